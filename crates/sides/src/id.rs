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
    /// Maven, Gradle and every JVM build, as Maven repositories under
    /// `/maven`.
    Maven,
    /// dnf and yum, as RPM repositories under `/rpm`.
    Rpm,
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
        SideId::Maven,
        SideId::Rpm,
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
            SideId::Maven => "maven",
            SideId::Rpm => "rpm",
            #[cfg(feature = "toy")]
            SideId::Toy => "toy",
        }
    }

    /// The clients people know the side by, as every list of what pkgproxy
    /// serves names them (the help, the manual, the README): built from
    /// here, or checked against it, so that no list leaves a side out.
    pub fn clients(self) -> &'static [&'static str] {
        match self {
            SideId::Apt => &["apt"],
            SideId::Go => &["the go command"],
            SideId::Snap => &["snapd"],
            SideId::Registry => &["container registries' clients"],
            SideId::Lxd => &["LXD"],
            SideId::Cargo => &["cargo"],
            SideId::Pypi => &["pip", "uv"],
            SideId::Npm => &["npm", "pnpm", "yarn"],
            SideId::Maven => &["Maven", "Gradle"],
            SideId::Rpm => &["dnf", "yum"],
            #[cfg(feature = "toy")]
            SideId::Toy => &[],
        }
    }

    /// The side in one or two words, as a short list says it (the unit's
    /// and the package's one-line descriptions).
    pub fn short_name(self) -> &'static str {
        match self {
            SideId::Apt => "apt",
            SideId::Go => "go",
            SideId::Snap => "snapd",
            SideId::Registry => "container registries",
            SideId::Lxd => "LXD",
            SideId::Cargo => "cargo",
            SideId::Pypi => "pip",
            SideId::Npm => "npm",
            SideId::Maven => "Maven",
            SideId::Rpm => "dnf",
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

/// Every side's clients, in a sentence's list: "apt, the go command, ...,
/// npm, pnpm and yarn".
pub fn every_client() -> String {
    let names: Vec<&str> = SideId::ALL.iter().flat_map(|side| side.clients()).copied().collect();
    match names.split_last() {
        Some((last, [])) => (*last).to_owned(),
        Some((last, rest)) => format!("{} and {last}", rest.join(", ")),
        None => String::new(),
    }
}

impl std::fmt::Display for SideId {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_list_of_every_client_names_each_side_s_clients_once() {
        let list = every_client();
        assert!(list.starts_with("apt, the go command, snapd, "), "{list}");
        assert!(list.ends_with(", npm, pnpm, yarn, Maven, Gradle, dnf and yum"), "{list}");
        let items: Vec<&str> = list.split(", ").flat_map(|item| item.split(" and ")).collect();
        let clients: Vec<&str> = SideId::ALL.iter().flat_map(|side| side.clients()).copied().collect();
        assert_eq!(items, clients);
    }
}
