//! Default locations, following systemd's conventions and the original
//! pkgproxy: `$CACHE_DIRECTORY` / `$RUNTIME_DIRECTORY` when systemd provides
//! them, system folders as root, the user's own folders otherwise.

use std::path::PathBuf;

fn is_root() -> bool {
    // SAFETY: geteuid has no preconditions and cannot fail.
    unsafe { libc::geteuid() == 0 }
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
        // SAFETY: getuid has no preconditions and cannot fail.
        None => std::env::temp_dir().join(format!("pkgproxy-{}", unsafe { libc::getuid() })),
    }
}

/// The default stats socket.
pub fn default_stats_socket() -> PathBuf {
    default_runtime_dir().join("stats.sock")
}

/// The default admin socket.
pub fn default_admin_socket() -> PathBuf {
    default_runtime_dir().join("admin.sock")
}
