//! The informing role: what a side has learnt and tells an admin (in
//! `pkgproxyctl info`, the metrics and the status page): apt's archives
//! and the suites whose `Release` expires, LXD's remotes.

use std::time::SystemTime;

use crate::learned::Learned;

/// What the side has learnt, for info, metrics and the status page.
pub trait Informing: Send + Sync {
    /// What the side has learnt.
    fn learned(&self) -> Vec<Learned> {
        Vec::new()
    }

    /// What the side serves offline only until a time before `by` (a
    /// suite whose `Release` expires), with that time: what info and the
    /// status page warn of.
    fn expiring(&self, _by: SystemTime) -> Vec<(String, SystemTime)> {
        Vec::new()
    }

    /// The names clients add pkgproxy under, one per upstream the side
    /// mounts by name (LXD's remotes): what `pkgproxyctl setup` and the
    /// status page name.
    fn remote_names(&self) -> Vec<String> {
        Vec::new()
    }
}
