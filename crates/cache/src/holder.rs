//! Which process holds a file's lock, as the system lists its locks
//! (`/proc/locks` on Linux): what a pkgproxy that finds its cache in use
//! names. Read only to say so; nothing is decided on it.

use std::os::unix::fs::MetadataExt;
use std::path::Path;

/// The process holding a lock on the file at `path`, when the system
/// says.
pub fn lock_holder(path: &Path) -> Option<u32> {
    let meta = std::fs::metadata(path).ok()?;
    let locks = std::fs::read_to_string("/proc/locks").ok()?;
    holder_in(&locks, &device_and_inode(meta.dev(), meta.ino()))
}

/// A file as `/proc/locks` names it: `MAJOR:MINOR:INODE`, the device's
/// numbers in hex.
fn device_and_inode(dev: u64, ino: u64) -> String {
    let (major, minor) = (libc::major(dev), libc::minor(dev));
    format!("{major:02x}:{minor:02x}:{ino}")
}

/// The first process in `locks` (the text of `/proc/locks`) holding a
/// lock on `file`.
fn holder_in(locks: &str, file: &str) -> Option<u32> {
    locks.lines().find_map(|line| {
        let fields: Vec<&str> = line.split_whitespace().collect();
        // `1: FLOCK  ADVISORY  WRITE 4242 fd:01:1234 0 EOF`; a waiting
        // lock's line has `->` after its number.
        let at = fields.iter().position(|field| field.contains(':') && field.matches(':').count() == 2)?;
        let pid: u32 = fields.get(at.checked_sub(1)?)?.parse().ok()?;
        (fields[at] == file && !fields.contains(&"->")).then_some(pid)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    const LOCKS: &str = "1: FLOCK  ADVISORY  WRITE 4242 fd:01:1234 0 EOF\n\
                         2: POSIX  ADVISORY  WRITE 77 08:02:99 0 EOF\n\
                         2: -> FLOCK  ADVISORY  WRITE 5151 fd:01:1234 0 EOF\n";

    #[test]
    fn the_holder_of_a_file_s_lock_is_read_from_the_system_s_list() {
        assert_eq!(holder_in(LOCKS, "fd:01:1234"), Some(4242), "the holder, not the one waiting");
        assert_eq!(holder_in(LOCKS, "08:02:99"), Some(77));
        assert_eq!(holder_in(LOCKS, "fd:01:9"), None);
        assert_eq!(device_and_inode(libc::makedev(253, 1), 1234), "fd:01:1234");
    }
}

#[cfg(test)]
mod in_use {
    use std::sync::Arc;

    #[test]
    fn a_cache_directory_in_use_names_the_pkgproxy_using_it() {
        let dir = tempfile::tempdir().unwrap();
        let _first = crate::Cache::open(dir.path(), Arc::new(crate::SystemClock)).unwrap();
        let second = crate::Cache::open(dir.path(), Arc::new(crate::SystemClock)).expect_err("in use");
        let said = second.to_string();
        assert!(said.contains(&format!("in use by another pkgproxy (pid {})", std::process::id())), "{said}");
        assert!(said.contains(&dir.path().display().to_string()) && !said.contains("Database"), "{said}");
    }
}
