//! What a path below a repository (`/rpm/NAME/...`) names, by the layout
//! every RPM repository has: a folder with `repodata/repomd.xml` in it is
//! a repository's root, the metadata files sit beside `repomd.xml`, and
//! packages (`*.rpm`) anywhere below a root, where the primary metadata
//! says.

/// What a path names.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RpmPath {
    /// `ROOT/repodata/repomd.xml`: revalidated, checked, never older.
    Repomd {
        /// The root (`""` for the repository's base).
        root: String,
    },
    /// `ROOT/repodata/repomd.xml.asc` or `.key`: kept beside it,
    /// revalidated as it is.
    RepomdSignature,
    /// Another file of `ROOT/repodata/`: a metadata file `repomd.xml`
    /// names (or an old one it named).
    Metadata {
        /// The root (`""` for the repository's base).
        root: String,
        /// Its path from the root (`repodata/HASH-primary.xml.zst`).
        location: String,
    },
    /// A package: `*.rpm` (source packages, `*.src.rpm`, too).
    Package,
    /// Another file (`.treeinfo`, images, `media.repo`): kept as it
    /// comes, revalidated as `repomd.xml` is.
    Other,
}

/// The name of the folder of a repository's metadata.
pub const REPODATA: &str = "repodata";

/// A file name that is not the metalink key pkgproxy keeps beside a
/// `repomd.xml` (see [`metalink_path`]).
const METALINK_SUFFIX: &str = ".metalink";

impl RpmPath {
    /// What `path` (below a repository, no leading `/`) names; `None` for a
    /// name pkgproxy keeps for itself.
    pub fn parse(path: &str) -> Option<RpmPath> {
        if path.ends_with(METALINK_SUFFIX) && path.contains("/repodata/repomd.xml") || path == metalink_path("") {
            return None;
        }
        let (folder, name) = path.rsplit_once('/').unwrap_or(("", path));
        let (root, in_repodata) = match folder.rsplit_once('/') {
            Some((root, REPODATA)) => (root, true),
            None if folder == REPODATA => ("", true),
            _ => ("", false),
        };
        if in_repodata {
            return Some(match name {
                "repomd.xml" => RpmPath::Repomd { root: root.to_owned() },
                "repomd.xml.asc" | "repomd.xml.key" => RpmPath::RepomdSignature,
                _ => RpmPath::Metadata { root: root.to_owned(), location: format!("{REPODATA}/{name}") },
            });
        }
        if name.ends_with(".rpm") {
            return Some(RpmPath::Package);
        }
        Some(RpmPath::Other)
    }

    /// Whether what it names never changes under its name: a package, or
    /// a metadata file named by its checksum (as createrepo names them
    /// unless told not to).
    pub fn is_immutable(&self) -> bool {
        match self {
            RpmPath::Package => true,
            RpmPath::Metadata { location, .. } => is_checksummed_name(location),
            _ => false,
        }
    }
}

/// Whether a metadata file's name starts with a checksum
/// (`repodata/HEX-primary.xml.gz`).
pub fn is_checksummed_name(location: &str) -> bool {
    let name = location.rsplit('/').next().unwrap_or(location);
    let Some((hex, _)) = name.split_once('-') else { return false };
    matches!(hex.len(), 40 | 64 | 96 | 128) && hex.bytes().all(|b| b.is_ascii_hexdigit())
}

/// The path of `root`'s `repomd.xml`.
pub fn repomd_path(root: &str) -> String {
    join(root, "repodata/repomd.xml")
}

/// The path of the key pkgproxy keeps `root`'s metalink under, beside its
/// `repomd.xml` (a name no client asks for: refused by [`RpmPath::parse`]).
pub fn metalink_path(root: &str) -> String {
    format!("{}{METALINK_SUFFIX}", repomd_path(root))
}

/// `location` (relative to `root`) as a path below the repository.
pub fn join(root: &str, location: &str) -> String {
    match root {
        "" => location.to_owned(),
        root => format!("{root}/{location}"),
    }
}

/// The roots a package at `path` may belong to, deepest first: each
/// folder above it (a package is below the root whose primary names it,
/// usually in `Packages/`, sometimes further up with `../`-free paths
/// only).
pub fn roots_above(path: &str) -> impl Iterator<Item = &str> {
    let mut folder = Some(path.rsplit_once('/').map_or("", |(folder, _)| folder));
    std::iter::from_fn(move || {
        let current = folder?;
        folder = current.rsplit_once('/').map(|(up, _)| up).or((!current.is_empty()).then_some(""));
        Some(current)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paths_are_read_by_the_repository_layout() {
        let repomd = RpmPath::parse("releases/41/Everything/x86_64/os/repodata/repomd.xml");
        assert_eq!(repomd, Some(RpmPath::Repomd { root: "releases/41/Everything/x86_64/os".into() }));
        assert_eq!(RpmPath::parse("repodata/repomd.xml"), Some(RpmPath::Repomd { root: String::new() }));
        assert_eq!(RpmPath::parse("x/repodata/repomd.xml.asc"), Some(RpmPath::RepomdSignature));
        let primary = RpmPath::parse(
            "x/repodata/0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef-primary.xml.zst",
        )
        .unwrap();
        assert!(primary.is_immutable());
        assert_eq!(
            primary,
            RpmPath::Metadata {
                root: "x".into(),
                location: "repodata/0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef-primary.xml.zst"
                    .into()
            }
        );
        assert!(!RpmPath::parse("repodata/primary.xml.gz").unwrap().is_immutable());
        assert_eq!(RpmPath::parse("x/Packages/g/gcc-14-1.fc41.x86_64.rpm"), Some(RpmPath::Package));
        assert_eq!(RpmPath::parse("x/.treeinfo"), Some(RpmPath::Other));
        assert_eq!(RpmPath::parse("x/repodata/repomd.xml.metalink"), None);
        assert_eq!(RpmPath::parse("repodata/repomd.xml.metalink"), None);
    }

    #[test]
    fn a_package_s_possible_roots_are_the_folders_above_it() {
        let roots: Vec<&str> = roots_above("a/b/Packages/p.rpm").collect();
        assert_eq!(roots, ["a/b/Packages", "a/b", "a", ""]);
        assert_eq!(roots_above("p.rpm").collect::<Vec<_>>(), [""]);
    }
}
