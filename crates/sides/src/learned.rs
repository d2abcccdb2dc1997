//! What a side reports of what it has learnt, for info and metrics.

/// A count of what a side has learnt, shown in `/pkgproxy/v1/info` under
/// `group` and in the metrics as `pkgproxy_<group>_<name>`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Learned {
    /// What it belongs to (`apt_index`).
    pub group: &'static str,
    /// What is counted (`pool_files`).
    pub name: &'static str,
    /// One sentence for the metrics' `HELP`.
    pub help: &'static str,
    /// The count now.
    pub value: u64,
}
