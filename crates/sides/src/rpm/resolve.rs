//! What a list of packages needs, followed where the repositories'
//! metadata is (the resolving role): for each root read (a folder with
//! `repodata/repomd.xml` held, or the ones named), its `repomd.xml`, the
//! metadata dnf reads for an install, and the packages the list stands for
//! in the root's primary metadata ([`super::closure`]), each at the path
//! below the repository where primary puts it (`xml:base` on a mirror
//! included).
//!
//! Only what the cache holds is read: a `repomd.xml` or a primary not
//! held is said, and a warm fetches it and asks again. Primary metadata is
//! read as a stream from its file, as it was fetched.

use std::io::Read;

use pkgproxy_cache::BodyReader;

use super::checks::REPOMD_LIMIT;
use super::closure::{Catalogue, Resolved, Wanted};
use super::config::{Config, Repository};
use super::needs::List;
use super::nevra;
use super::primary::{self, Compression};
use super::repomd::{MetadataFile, Repomd};
use super::{layout, package_path, readable_primary, Rpm};
use crate::decision::CachedRequest;
use crate::id::SideId;
use crate::needs::{self, HeldBodies, NeededItem, Needs, NeedsError};
use crate::role::Resolving;

/// The kinds of metadata dnf reads for an install, besides `repomd.xml`,
/// in each form a root publishes: dnf 4 reads primary and filelists (dnf 5
/// filelists only when a file is asked for), both read comps, updateinfo
/// and modules where published; a dnf built with zchunk asks for the
/// `_zck` forms, one without for the others.
const DNF_READS: &[&str] = &["primary", "filelists", "group", "group_gz", "group_xz", "updateinfo", "modules"];

/// A root read: its repository and its path below it (`""` for the base).
struct Root<'c> {
    repository: &'c Repository,
    path: String,
}

impl Root<'_> {
    /// `REPOSITORY/PATH`, as people read it.
    fn label(&self) -> String {
        match self.path.as_str() {
            "" => self.repository.name.clone(),
            path => format!("{}/{path}", self.repository.name),
        }
    }

    /// The request a client makes for `path` below its repository.
    fn item(&self, path: &str, label: String) -> NeededItem {
        let prefix = crate::route::prefix_of(SideId::Rpm).unwrap_or_default();
        NeededItem { url: format!("{prefix}/{}/{path}", self.repository.name), label }
    }
}

impl Resolving for Rpm {
    /// The roots' metadata, and the packages the list stands for in their
    /// primary metadata. Blocking: it decompresses and reads primary.
    fn needs(&self, asked: serde_json::Value, held: &dyn HeldBodies) -> Result<Needs, NeedsError> {
        let list: List = needs::parse(asked)?;
        let config = self.config();
        let mut found = Needs::default();
        let roots = self.roots(&config, &list, &mut found)?;
        let wanted = Wanted { nevras: list.nevras, names: list.names, arch: list.arch };
        let mut catalogue = Catalogue::new(wanted);
        let mut all_read = !roots.is_empty();
        for (number, root) in roots.iter().enumerate() {
            all_read &= self.read_root(&config, root, number, held, &mut catalogue, &mut found)?;
        }
        // Packages chosen without every root's metadata could be older
        // ones a root not read replaces: none is named until all are read.
        if all_read {
            add_packages(&roots, catalogue.resolve(), &mut found);
        }
        if roots.len() > 1 {
            let labels: Vec<String> = roots.iter().map(Root::label).collect();
            found.notes.push(format!("read {} roots: {}", roots.len(), labels.join(", ")));
        }
        Ok(found)
    }
}

impl Rpm {
    /// The roots to read: those named, else every one held of the
    /// repositories named (or of all), those of another architecture
    /// left out; none when they are several releases of one repository.
    fn roots<'c>(&self, config: &'c Config, list: &List, found: &mut Needs) -> Result<Vec<Root<'c>>, NeedsError> {
        let repositories = repositories(config, &list.repositories)?;
        if !list.roots.is_empty() {
            return Ok(self.named_roots(&repositories, &list.roots, found));
        }
        let mut roots = Vec::new();
        for repository in &repositories {
            roots.extend(self.held_roots(repository).into_iter().map(|path| Root { repository, path }));
        }
        if roots.is_empty() {
            let whose = match list.repositories.as_slice() {
                [] => "pkgproxy holds no repodata/repomd.xml".to_owned(),
                names => format!("no repodata/repomd.xml of {} is held", names.join(", ")),
            };
            found.unknown.push(format!(
                "{whose}: run `dnf makecache` through pkgproxy first, or name the root with --repository and \
                 --root (warm then fetches it)"
            ));
            return Ok(roots);
        }
        let roots = of_arch(roots, &list.arch, found);
        if let Some((one, other)) = releases_apart(&roots) {
            found.unknown.push(format!(
                "pkgproxy holds two releases of {}: {} and {}: name the machine's roots with --root (its release \
                 and its updates)",
                one.repository.name, one.path, other.path
            ));
            return Ok(Vec::new());
        }
        Ok(roots)
    }

    /// The roots named, in each repository that holds their `repomd.xml`,
    /// or in the one repository named (a warm fetches it there).
    fn named_roots<'c>(&self, repositories: &[&'c Repository], paths: &[String], found: &mut Needs) -> Vec<Root<'c>> {
        let mut roots = Vec::new();
        for path in paths {
            let path = &path.trim_matches('/').to_owned();
            let holding: Vec<&Repository> = repositories
                .iter()
                .copied()
                .filter(|repository| self.cache.lookup(&repository.key(&layout::repomd_path(path))).is_some())
                .collect();
            match (holding.as_slice(), repositories) {
                ([], [only]) => roots.push(Root { repository: only, path: path.clone() }),
                ([], _) => found.unknown.push(format!(
                    "{path}: no repository holds its repodata/repomd.xml: name its repository with --repository \
                     (warm then fetches it)"
                )),
                (holding, _) => {
                    roots.extend(holding.iter().map(|repository| Root { repository, path: path.clone() }));
                }
            }
        }
        roots
    }

    /// The roots of `repository` whose `repomd.xml` was taken (the index
    /// notes each) and is held still, sorted.
    fn held_roots(&self, repository: &Repository) -> Vec<String> {
        let prefix = format!("{}/", repository.name);
        let mut roots: Vec<String> = self
            .index
            .roots()
            .into_iter()
            .filter_map(|key| Some(key.strip_prefix(&prefix)?.to_owned()))
            .filter(|root| self.cache.lookup(&repository.key(&layout::repomd_path(root))).is_some())
            .collect();
        roots.sort();
        roots
    }

    /// Reads `root` (number `number`): names its `repomd.xml` and the
    /// metadata dnf reads, and adds its primary's packages to
    /// `catalogue`. `false` when what is needed is not held (said in
    /// `found`).
    fn read_root(
        &self,
        config: &Config,
        root: &Root<'_>,
        number: usize,
        held: &dyn HeldBodies,
        catalogue: &mut Catalogue,
        found: &mut Needs,
    ) -> Result<bool, NeedsError> {
        let label = root.label();
        let repomd_path = layout::repomd_path(&root.path);
        found.items.push(root.item(&repomd_path, format!("{label} repomd.xml")));
        let repomd = self
            .held_request(config, root.repository, &repomd_path)
            .and_then(|request| held.read(&request, REPOMD_LIMIT))
            .and_then(|body| Repomd::read(&body).ok());
        let Some(repomd) = repomd else {
            found.unknown.push(format!("{label}: its repodata/repomd.xml is not held (warm fetches it)"));
            return Ok(false);
        };
        for file in repomd.files.iter().filter(|file| dnf_reads(&file.kind)) {
            let path = layout::join(&root.path, &file.location);
            found.items.push(root.item(&path, format!("{label} {}", file.kind)));
        }
        let Some(primary) = readable_primary(&repomd) else {
            found.unknown.push(format!("{label}: {}", unreadable(&repomd)));
            return Ok(false);
        };
        let path = layout::join(&root.path, &primary.location);
        let Some(file) = self.held_request(config, root.repository, &path).and_then(|request| held.open(&request))
        else {
            found.unknown.push(format!("{label}: its primary metadata is not held (warm fetches it)"));
            return Ok(false);
        };
        let read = self.read_primary(root, number, primary, &file, held, catalogue);
        if held.abandoned() {
            return Err(NeedsError::new("the search stopped: whoever asked for it is gone"));
        }
        match read {
            Ok(()) => Ok(true),
            Err(why) => {
                found.unknown.push(format!("{label}: its primary metadata cannot be read: {why}"));
                Ok(false)
            }
        }
    }

    /// Streams the primary metadata in `file` into `catalogue`, until the
    /// requester is gone.
    fn read_primary(
        &self,
        root: &Root<'_>,
        number: usize,
        primary: &MetadataFile,
        file: &std::fs::File,
        held: &dyn HeldBodies,
        catalogue: &mut Catalogue,
    ) -> Result<(), String> {
        let compression = Compression::of(&primary.location).ok_or("its compression is not read")?;
        let raw = Watched { inner: BodyReader::new(file), held };
        let reader = compression.reader(raw).map_err(|error| error.to_string())?;
        let path_of = package_path(root.repository.clone(), root.path.clone());
        primary::read(reader, |package| catalogue.add(number, &package, path_of(&package)))
            .map(|_| ())
            .map_err(|error| error.to_string())
    }

    /// The request a client's `GET` of `path` below `repository` makes.
    fn held_request(&self, config: &Config, repository: &Repository, path: &str) -> Option<CachedRequest> {
        self.classify_in(config, repository, path).ok()?.into_cached()
    }
}

/// The repositories `names` names (all when none), or which is not one.
fn repositories<'c>(config: &'c Config, names: &[String]) -> Result<Vec<&'c Repository>, NeedsError> {
    if names.is_empty() {
        return Ok(config.repositories.iter().collect());
    }
    names
        .iter()
        .map(|name| {
            config.repository(name).ok_or_else(|| {
                let configured: Vec<&str> = config.repositories.iter().map(|r| r.name.as_str()).collect();
                NeedsError::new(format!("no repository {name:?} is configured (configured: {})", configured.join(", ")))
            })
        })
        .collect()
}

/// Whether dnf reads metadata of `kind` for an install.
fn dnf_reads(kind: &str) -> bool {
    DNF_READS.contains(&kind.strip_suffix("_zck").unwrap_or(kind))
}

/// Why `repomd` names no primary metadata pkgproxy reads.
fn unreadable(repomd: &Repomd) -> &'static str {
    match repomd.files.iter().any(|file| file.kind == "primary_zck") {
        true => "it publishes its primary metadata as zchunk (.zck) only, which pkgproxy does not read",
        false => "its repomd.xml names no primary metadata pkgproxy reads (.xml, .gz, .xz or .zst)",
    }
}

/// `roots` but those of another architecture than `arch`, each left out
/// said.
fn of_arch<'c>(mut roots: Vec<Root<'c>>, arch: &str, found: &mut Needs) -> Vec<Root<'c>> {
    roots.retain(|root| {
        let other_arch = of_another_arch(&root.path, arch);
        if other_arch {
            found.notes.push(format!("{} left out: another architecture's (--root reads it)", root.label()));
        }
        !other_arch
    });
    if roots.is_empty() {
        found.unknown.push(format!("every root held is of another architecture than {arch}: see --arch"));
    }
    roots
}

/// Whether the root at `path` is of another architecture than `arch`: a
/// folder of its path names a machine's architecture, and none `arch`.
fn of_another_arch(path: &str, arch: &str) -> bool {
    let mut segments = path.split('/');
    let names_arch = segments.clone().any(nevra::is_machine_arch);
    names_arch && !segments.any(|segment| segment == arch)
}

/// Two roots of one repository that are two releases of it: their paths
/// differ in one folder only, a release number in both
/// (`releases/40/...` and `releases/41/...`, `9-stream` and `10-stream`).
fn releases_apart<'r, 'c>(roots: &'r [Root<'c>]) -> Option<(&'r Root<'c>, &'r Root<'c>)> {
    let release = |segment: &str| -> Option<String> {
        segment
            .contains(|c: char| c.is_ascii_digit())
            .then(|| segment.replace(|c: char| c.is_ascii_digit() || c == '.', ""))
    };
    let apart = |a: &Root<'_>, b: &Root<'_>| {
        let (a_segments, b_segments): (Vec<&str>, Vec<&str>) =
            (a.path.split('/').collect(), b.path.split('/').collect());
        let differing: Vec<(&str, &str)> =
            a_segments.iter().zip(&b_segments).filter(|(x, y)| x != y).map(|(x, y)| (*x, *y)).collect();
        a.repository.name == b.repository.name
            && a_segments.len() == b_segments.len()
            && matches!(differing.as_slice(), [(x, y)] if release(x).is_some() && release(x) == release(y))
    };
    roots.iter().enumerate().find_map(|(at, one)| Some((one, roots[at + 1..].iter().find(|other| apart(one, other))?)))
}

/// The packages `resolved` chose, as requests of their roots'
/// repositories; what it could not choose, said.
fn add_packages(roots: &[Root<'_>], resolved: Resolved, found: &mut Needs) {
    for package in resolved.packages {
        let root = &roots[package.root];
        match &package.path {
            Some(path) => found.items.push(root.item(path, package.nevra)),
            None => found.unknown.push(format!(
                "{}: {}'s primary metadata puts it on a host that is no mirror of {}: pkgproxy does not serve it",
                package.nevra,
                root.label(),
                root.repository.name
            )),
        }
    }
    found.unknown.extend(resolved.missing);
    found.warnings.extend(resolved.unprovided);
    if resolved.skipped > 0 {
        found.notes.push(format!(
            "{} conditional requirements (`(a if b)`) not followed: dnf installs them only beside what they name",
            resolved.skipped
        ));
    }
}

/// A reader of a held body that stops once the search's requester is
/// gone: the rest of a primary of 150 MB would reach nobody.
struct Watched<'h, R> {
    inner: R,
    held: &'h dyn HeldBodies,
}

impl<R: Read> Read for Watched<'_, R> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        if self.held.abandoned() {
            return Err(std::io::Error::other("whoever asked for the search is gone"));
        }
        self.inner.read(buf)
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use pkgproxy_cache::{Cache, Class};
    use sha2::Digest;

    use super::*;
    use crate::decision::CacheView;
    use crate::rpm::{Options, RepositoryOptions};

    /// The cache as the daemon's search reads it, without the server:
    /// by key.
    struct Held<'c>(&'c Cache);

    impl CacheView for Held<'_> {
        fn open(&self, request: &CachedRequest) -> Option<Arc<std::fs::File>> {
            let entry = self.0.lookup(&request.key)?;
            self.0.open_body(&entry).ok()
        }
    }

    impl HeldBodies for Held<'_> {
        fn body(&self, _url: &str, _limit: u64) -> Option<Vec<u8>> {
            None
        }

        fn open_sha256(&self, _sha256: &str, _size: u64) -> Option<Arc<std::fs::File>> {
            None
        }

        fn now(&self) -> std::time::SystemTime {
            std::time::SystemTime::now()
        }
    }

    /// The RPM side with one repository, `local`, at `mirrors`, and its cache.
    fn side(mirrors: &[&str]) -> (Rpm, Cache, tempfile::TempDir) {
        let dir = tempfile::tempdir().unwrap();
        let cache = Cache::open(dir.path(), Arc::new(pkgproxy_cache::SystemClock)).unwrap();
        let mirrors = mirrors.iter().map(|url| (*url).to_owned()).collect();
        let repository = RepositoryOptions { name: "local".into(), mirrors, ..RepositoryOptions::default() };
        let config = Config::new(&Options { repository: vec![repository], ..Options::default() }).unwrap();
        (Rpm::open(config, cache.clone(), dir.path()).unwrap(), cache, dir)
    }

    /// Puts a `repomd.xml` naming the test's primary metadata (gzipped)
    /// and a zchunk copy below `root`, as taken; with `primary`, the
    /// primary too.
    fn put_root(rpm: &Rpm, cache: &Cache, root: &str, primary: bool) {
        let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
        std::io::Write::write_all(&mut gz, crate::rpm::primary::tests::PRIMARY.as_bytes()).unwrap();
        let gz = gz.finish().unwrap();
        let sha = hex::encode(sha2::Sha256::digest(&gz));
        let data = |kind: &str, name: &str| {
            format!("<data type=\"{kind}\"><checksum type=\"sha256\">{sha}</checksum><location href=\"repodata/{sha}-{name}\"/></data>")
        };
        let repomd = format!(
            "<repomd><revision>1</revision>{}{}{}</repomd>",
            data("primary", "primary.xml.gz"),
            data("primary_zck", "primary.xml.zck"),
            data("other", "other.xml.gz")
        );
        let key = |path: &str| format!("rpm/local/{}", layout::join(root, path));
        cache.put(&key("repodata/repomd.xml"), repomd.as_bytes(), vec![], Class::Revalidated).unwrap();
        rpm.index().hold_root("local", root).unwrap();
        if primary {
            cache.put(&key(&format!("repodata/{sha}-primary.xml.gz")), &gz, vec![], Class::Immutable).unwrap();
        }
    }

    fn asked(names: &[&str], roots: &[&str]) -> serde_json::Value {
        serde_json::to_value(List {
            repositories: Vec::new(),
            roots: roots.iter().map(|root| (*root).to_owned()).collect(),
            arch: "x86_64".into(),
            nevras: Vec::new(),
            names: names.iter().map(|name| (*name).to_owned()).collect(),
        })
        .unwrap()
    }

    fn labels(needs: &Needs) -> Vec<&str> {
        needs.items.iter().map(|item| item.label.as_str()).collect()
    }

    #[test]
    fn a_name_needs_its_root_s_metadata_then_its_packages_where_primary_puts_them() {
        let (rpm, cache, _dir) = side(&["http://127.0.0.1:1/el", "http://mirror.example/pub"]);
        let needs = rpm.needs(asked(&["hello"], &[]), &Held(&cache)).unwrap();
        assert!(needs.items.is_empty(), "{needs:?}");
        assert_eq!(needs.unknown.len(), 1);
        assert!(needs.unknown[0].starts_with("pkgproxy holds no repodata/repomd.xml: "), "{:?}", needs.unknown);

        put_root(&rpm, &cache, "9/x86_64", false);
        let needs = rpm.needs(asked(&["hello"], &[]), &Held(&cache)).unwrap();
        assert_eq!(
            labels(&needs),
            ["local/9/x86_64 repomd.xml", "local/9/x86_64 primary", "local/9/x86_64 primary_zck"]
        );
        assert_eq!(needs.items[0].url, "/rpm/local/9/x86_64/repodata/repomd.xml");
        assert_eq!(needs.unknown, ["local/9/x86_64: its primary metadata is not held (warm fetches it)"]);

        put_root(&rpm, &cache, "9/x86_64", true);
        let needs = rpm.needs(asked(&["hello"], &[]), &Held(&cache)).unwrap();
        let urls: Vec<&str> = needs.items.iter().map(|item| item.url.as_str()).collect();
        assert_eq!(
            urls[3..],
            [
                "/rpm/local/9/x86_64/Packages/h/hello-1.0-1.noarch.rpm",
                "/rpm/local/other/Packages/l/libgreet-0.3-4.fc41.x86_64.rpm"
            ],
            "libgreet's xml:base is on a mirror of the repository: {needs:?}"
        );
        assert_eq!(labels(&needs)[3..], ["hello-1.0-1.noarch", "libgreet-2:0.3-4.fc41.x86_64"]);
        assert!(needs.unknown.is_empty(), "{:?}", needs.unknown);
        assert_eq!(
            needs.warnings,
            ["/bin/sh (required by hello-1.0-1.noarch): no package of the roots read provides it"]
        );
    }

    #[test]
    fn a_root_that_publishes_primary_as_zchunk_only_is_said() {
        let (rpm, cache, _dir) = side(&["http://127.0.0.1:1/el"]);
        let hex = "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef";
        let repomd = format!(
            "<repomd><data type=\"primary_zck\"><checksum type=\"sha256\">{hex}</checksum>\
             <location href=\"repodata/{hex}-primary.xml.zck\"/></data></repomd>"
        );
        cache.put("rpm/local/repodata/repomd.xml", repomd.as_bytes(), vec![], Class::Revalidated).unwrap();
        rpm.index().hold_root("local", "").unwrap();
        let needs = rpm.needs(asked(&["hello"], &[]), &Held(&cache)).unwrap();
        assert_eq!(labels(&needs), ["local repomd.xml", "local primary_zck"]);
        assert_eq!(
            needs.unknown,
            ["local: it publishes its primary metadata as zchunk (.zck) only, which pkgproxy does not read"]
        );
    }

    #[test]
    fn a_package_at_another_host_and_roots_of_two_releases_are_said() {
        let (rpm, cache, _dir) = side(&["http://127.0.0.1:1/el"]);
        put_root(&rpm, &cache, "9/x86_64", true);
        let needs = rpm.needs(asked(&["libgreet"], &[]), &Held(&cache)).unwrap();
        assert_eq!(
            needs.unknown,
            ["libgreet-2:0.3-4.fc41.x86_64: local/9/x86_64's primary metadata puts it on a host that is no mirror of \
              local: pkgproxy does not serve it"]
        );
        put_root(&rpm, &cache, "8/x86_64", true);
        put_root(&rpm, &cache, "9/aarch64", true);
        let needs = rpm.needs(asked(&["hello"], &[]), &Held(&cache)).unwrap();
        assert!(needs.items.is_empty(), "{needs:?}");
        assert!(
            needs.unknown[0].starts_with("pkgproxy holds two releases of local: 8/x86_64 and 9/x86_64"),
            "{needs:?}"
        );
        assert_eq!(needs.notes, ["local/9/aarch64 left out: another architecture's (--root reads it)"]);
        let needs = rpm.needs(asked(&["hello"], &["9/x86_64/"]), &Held(&cache)).unwrap();
        assert_eq!(labels(&needs)[0], "local/9/x86_64 repomd.xml", "the root named is read alone");
        assert_eq!(labels(&needs).last(), Some(&"hello-1.0-1.noarch"));
        assert!(needs.unknown[0].starts_with("libgreet-2:0.3-4.fc41.x86_64: "), "{needs:?}");
    }

    fn roots<'c>(repository: &'c Repository, paths: &[&str]) -> Vec<Root<'c>> {
        paths.iter().map(|path| Root { repository, path: (*path).to_owned() }).collect()
    }

    #[test]
    fn roots_of_two_releases_are_told_apart_from_a_release_and_its_updates() {
        let config = Config::new(&super::super::Options::default()).unwrap();
        let fedora = config.repository("fedora").unwrap();
        let one_release = roots(fedora, &["releases/41/Everything/x86_64/os", "updates/41/Everything/x86_64"]);
        assert!(releases_apart(&one_release).is_none());
        let two = roots(fedora, &["releases/40/Everything/x86_64/os", "releases/41/Everything/x86_64/os"]);
        let (one, other) = releases_apart(&two).unwrap();
        assert_eq!((one.path.as_str(), other.path.as_str()), (two[0].path.as_str(), two[1].path.as_str()));
        let stream = config.repository("centos-stream").unwrap();
        assert!(
            releases_apart(&roots(stream, &["9-stream/BaseOS/x86_64/os", "9-stream/AppStream/x86_64/os"])).is_none()
        );
        assert!(releases_apart(&roots(stream, &["9-stream/BaseOS/x86_64/os", "10-stream/BaseOS/x86_64/os"])).is_some());
    }

    #[test]
    fn a_root_whose_path_names_another_architecture_is_another_architecture_s() {
        assert!(of_another_arch("releases/41/Everything/aarch64/os", "x86_64"));
        assert!(!of_another_arch("releases/41/Everything/x86_64/os", "x86_64"));
        assert!(!of_another_arch("distribution/leap/15.6/repo/oss", "x86_64"), "one root for every architecture");
        assert!(!of_another_arch("", "x86_64"));
    }

    #[test]
    fn dnf_reads_primary_filelists_comps_updateinfo_and_modules_in_each_form() {
        for kind in ["primary", "primary_zck", "filelists", "filelists_zck", "group_gz", "group_zck", "updateinfo"] {
            assert!(dnf_reads(kind), "{kind}");
        }
        for kind in ["other", "other_zck", "primary_db", "prestodelta", "susedata"] {
            assert!(!dnf_reads(kind), "{kind}");
        }
    }
}
