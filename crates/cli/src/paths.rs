//! Default locations, following systemd's conventions and the original
//! pkgproxy: `$CACHE_DIRECTORY`, `$STATE_DIRECTORY`, `$RUNTIME_DIRECTORY`
//! and `$CONFIGURATION_DIRECTORY` when systemd provides them, system
//! folders as root, the user's own folders otherwise.

use std::path::PathBuf;

fn is_root() -> bool {
    rustix::process::geteuid().is_root()
}

/// The first folder of a systemd `*_DIRECTORY` variable (it may list several,
/// separated by colons).
fn systemd_dir(var: &str) -> Option<PathBuf> {
    let value = std::env::var_os(var)?;
    let first = value.to_string_lossy().split(':').next()?.to_string();
    (!first.is_empty()).then(|| PathBuf::from(first))
}

fn home() -> Option<PathBuf> {
    std::env::var_os("HOME").filter(|h| !h.is_empty()).map(PathBuf::from)
}

/// The default cache directory.
pub fn default_cache_dir() -> PathBuf {
    if let Some(dir) = systemd_dir("CACHE_DIRECTORY") {
        return dir;
    }
    if is_root() {
        return PathBuf::from("/var/cache/pkgproxy");
    }
    let user_cache = std::env::var_os("XDG_CACHE_HOME")
        .filter(|d| !d.is_empty())
        .map(PathBuf::from)
        .or_else(|| home().map(|h| h.join(".cache")))
        .unwrap_or_else(std::env::temp_dir);
    user_cache.join("pkgproxy")
}

/// The default state directory: what is not cache and must outlive a
/// cleared cache (the listener's TLS certificate, which LXD clients pin).
pub fn default_state_dir() -> PathBuf {
    if let Some(dir) = systemd_dir("STATE_DIRECTORY") {
        return dir;
    }
    if is_root() {
        return PathBuf::from("/var/lib/pkgproxy");
    }
    let user_state = std::env::var_os("XDG_STATE_HOME")
        .filter(|d| !d.is_empty())
        .map(PathBuf::from)
        .or_else(|| home().map(|h| h.join(".local/state")))
        .unwrap_or_else(std::env::temp_dir);
    user_state.join("pkgproxy")
}

/// The configuration file read when none is named, if there is one: the
/// copy systemd hands the service (`LoadCredential=pkgproxy.toml:...`,
/// for a file that holds secrets and is readable by root only), else
/// `pkgproxy.toml` in `$CONFIGURATION_DIRECTORY`, else, as root,
/// `/etc/pkgproxy/pkgproxy.toml`.
pub fn default_config() -> Option<PathBuf> {
    let in_dir = |var: &str| systemd_dir(var).map(|dir| dir.join("pkgproxy.toml"));
    let mut candidates = vec![in_dir("CREDENTIALS_DIRECTORY"), in_dir("CONFIGURATION_DIRECTORY")];
    if is_root() {
        candidates.push(Some(PathBuf::from("/etc/pkgproxy/pkgproxy.toml")));
    }
    candidates.into_iter().flatten().find(|path| path.is_file())
}

/// The default folder of the control sockets.
pub fn default_runtime_dir() -> PathBuf {
    if let Some(dir) = systemd_dir("RUNTIME_DIRECTORY") {
        return dir;
    }
    if is_root() {
        return PathBuf::from("/run/pkgproxy");
    }
    match std::env::var_os("XDG_RUNTIME_DIR").filter(|d| !d.is_empty()) {
        Some(dir) => PathBuf::from(dir).join("pkgproxy"),
        None => std::env::temp_dir().join(format!("pkgproxy-{}", rustix::process::getuid().as_raw())),
    }
}

/// The default stats socket.
pub fn default_stats_socket() -> PathBuf {
    default_runtime_dir().join("stats.sock")
}

/// The socket `name` that `pkgproxyctl` asks by default: the one this
/// user's own pkgproxy would make, else the system's (a packaged
/// pkgproxy's, in `/run/pkgproxy`) when that is there.
pub fn ctl_socket(name: &str) -> PathBuf {
    first_there(default_runtime_dir().join(name), PathBuf::from("/run/pkgproxy").join(name))
}

/// `own` unless only `system` is there.
fn first_there(own: PathBuf, system: PathBuf) -> PathBuf {
    match !own.exists() && system.exists() {
        true => system,
        false => own,
    }
}

/// The default admin socket.
pub fn default_admin_socket() -> PathBuf {
    default_runtime_dir().join("admin.sock")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_user_without_a_pkgproxy_of_their_own_asks_the_system_s() {
        let dir = tempfile::tempdir().unwrap();
        let (own, system) = (dir.path().join("own.sock"), dir.path().join("system.sock"));
        assert_eq!(first_there(own.clone(), system.clone()), own, "neither: the error names the user's");
        std::fs::write(&system, b"").unwrap();
        assert_eq!(first_there(own.clone(), system.clone()), system);
        std::fs::write(&own, b"").unwrap();
        assert_eq!(first_there(own.clone(), system), own, "the user's own pkgproxy first");
    }
}
