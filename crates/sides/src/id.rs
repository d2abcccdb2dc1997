//! Which side a request belongs to: the closed set of client ecosystems,
//! named as logs, metrics, configuration and cache keys name them. A leaf:
//! every part of the crate names sides, none of this depends on them.

/// Which side: the closed set of client ecosystems.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum SideId {
    /// apt, as a forward proxy.
    Apt,
    /// The go command, as a module proxy under `/go`.
    Go,
    /// snapd and the `snap` command, as a store relay under `/snap`.
    Snap,
    /// OCI registry clients, as a pull-through mirror under `/v2`.
    Registry,
    /// LXD and the craft tools, as a simplestreams relay under `/lxd`.
    Lxd,
    /// cargo, as a sparse registry under `/cargo`.
    Cargo,
    /// pip, uv, poetry and pdm, as a simple index under `/pypi`.
    Pypi,
    /// npm, pnpm and both yarns, as a registry under `/npm`.
    Npm,
    /// A side that exists only to show what adding one takes (the test
    /// tree's, never shipped).
    #[cfg(feature = "toy")]
    Toy,
}

impl SideId {
    /// Every side, in the order info and metrics list them.
    pub const ALL: &[SideId] = &[
        SideId::Apt,
        SideId::Go,
        SideId::Snap,
        SideId::Registry,
        SideId::Lxd,
        SideId::Cargo,
        SideId::Pypi,
        SideId::Npm,
        #[cfg(feature = "toy")]
        SideId::Toy,
    ];

    /// The name used in logs, metrics, configuration and cache keys.
    pub fn as_str(self) -> &'static str {
        match self {
            SideId::Apt => "apt",
            SideId::Go => "go",
            SideId::Snap => "snap",
            SideId::Registry => "registry",
            SideId::Lxd => "lxd",
            SideId::Cargo => "cargo",
            SideId::Pypi => "pypi",
            SideId::Npm => "npm",
            #[cfg(feature = "toy")]
            SideId::Toy => "toy",
        }
    }

    /// The side named `name`, as configuration spells it.
    pub fn from_name(name: &str) -> Option<SideId> {
        SideId::ALL.iter().copied().find(|side| side.as_str() == name)
    }

    /// Its place in [`SideId::ALL`], for per-side tables.
    pub fn index(self) -> usize {
        self as usize
    }
}

impl std::fmt::Display for SideId {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}
