//! Snaps' needs: each `NAME[=CHANNEL]` as the download `snap download NAME
//! --channel CHANNEL` makes on this kind of machine; the daemon finds the
//! store's recorded answer for it, its blob and its assertions.

use pkgproxy_control::SnapWanted;

/// The channel `snap` asks for when given none.
const DEFAULT_CHANNEL: &str = "stable";

/// `NAME[=CHANNEL]`, as `snap --channel` takes the channel.
pub fn wanted(argument: &str) -> anyhow::Result<SnapWanted> {
    let (name, channel) = argument.split_once('=').unwrap_or((argument, DEFAULT_CHANNEL));
    let valid = |word: &str| !word.is_empty() && word.bytes().all(|b| b.is_ascii_graphic() && b != b'=');
    anyhow::ensure!(valid(name) && valid(channel), "{argument:?} is not NAME or NAME=CHANNEL");
    Ok(SnapWanted { name: name.to_owned(), channel: channel.to_owned() })
}

/// What people call a request `snap` makes: the file a download gives, the
/// assertion's type and key.
pub fn label(url: &str) -> String {
    let below = url.strip_prefix("/snap").unwrap_or(url);
    if below.starts_with("/download/") {
        return below.rsplit('/').next().unwrap_or(below).to_owned();
    }
    let assertion = below.strip_prefix("/v2/assertions/").unwrap_or(below);
    assertion.split('?').next().unwrap_or(assertion).to_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_snap_is_named_with_its_channel_or_stable() {
        assert_eq!(wanted("hello").unwrap(), SnapWanted { name: "hello".into(), channel: "stable".into() });
        assert_eq!(wanted("lxd=5.21/edge").unwrap().channel, "5.21/edge");
        assert!(wanted("=edge").is_err() && wanted("a b").is_err());
        let download = "/snap/download/abc/7/api/v1/snaps/download/ID_3.snap";
        assert_eq!(label(download), "ID_3.snap");
        assert_eq!(label("/snap/v2/assertions/account/dev1?max-format=0"), "account/dev1");
    }
}
