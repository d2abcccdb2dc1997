//! The names LXD clients see pkgproxy's remotes under, the same wherever
//! they are shown: the status page's lines and what `pkgproxyctl setup`
//! writes.

/// The remotes an LXD client holds fixed (`lxc remote list` says `STATIC`):
/// they cannot be pointed elsewhere.
pub const STATIC_REMOTES: [&str; 2] = ["ubuntu", "ubuntu-daily"];

/// The name pkgproxy's LXD remote `name` gets in an LXD client: its own
/// (the craft tools then use the cache unchanged), or `pkgproxy-NAME` for
/// a name the client holds fixed.
pub fn remote_name(name: &str, fixed: bool) -> String {
    match fixed {
        true => format!("pkgproxy-{name}"),
        false => name.to_owned(),
    }
}

/// [`remote_name`] for a client whose remotes are not known: the
/// usual fixed ones ([`STATIC_REMOTES`]).
pub fn remote_name_usually(name: &str) -> String {
    remote_name(name, STATIC_REMOTES.contains(&name))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_the_remotes_lxd_holds_fixed_are_renamed() {
        assert_eq!(remote_name_usually("ubuntu"), "pkgproxy-ubuntu");
        assert_eq!(remote_name_usually("images"), "images");
        assert_eq!(remote_name_usually("craft-com.ubuntu.cloud-buildd"), "craft-com.ubuntu.cloud-buildd");
    }
}
