//! LXD images' needs: each `REMOTE:ALIAS` as LXD fetches it through
//! pkgproxy (`/lxd/REMOTE/...`): the remote's index and products files,
//! then the image's files, which the daemon finds in the held products.

use pkgproxy_control::LxdImage;

/// `REMOTE:ALIAS`, for a container or (`vm`) a virtual machine.
pub fn image(argument: &str, vm: bool) -> anyhow::Result<LxdImage> {
    let (remote, alias) = argument.split_once(':').unwrap_or_default();
    let remote_ok = !remote.is_empty() && remote.bytes().all(|b| b.is_ascii_alphanumeric() || b"._-".contains(&b));
    let alias_ok = !alias.is_empty() && !alias.contains(char::is_whitespace);
    anyhow::ensure!(remote_ok && alias_ok, "{argument:?} is not REMOTE:ALIAS (ubuntu:24.04, images:debian/12)");
    Ok(LxdImage { remote: remote.to_owned(), alias: alias.to_owned(), vm })
}

/// What people call one of the requests: its path below the mount.
pub fn label(url: &str) -> String {
    url.strip_prefix("/lxd/").unwrap_or(url).to_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_image_is_a_remote_and_an_alias() {
        let image = image("images:debian/12", true).unwrap();
        assert_eq!((image.remote.as_str(), image.alias.as_str(), image.vm), ("images", "debian/12", true));
        for bad in ["24.04", ":24.04", "ubuntu:", "a b:c"] {
            assert!(super::image(bad, false).is_err(), "{bad}");
        }
    }
}
