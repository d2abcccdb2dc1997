//! A lock's packages followed in what the daemon holds: each package's
//! project's page in the form its installer asks for, and, of the files
//! its held page lists that the lock pins, the one the installer takes on
//! its platform ([`Ranking::pick`]), with the core metadata the page
//! advertises; how many others there are is said, not counted.
//!
//! Anyone may ask (the stats socket), so what a search costs is bounded by
//! what is held, not by how the request is written: the packages are taken
//! by project, each project's page read and indexed once whatever the
//! number of packages naming it; a package named twice is followed once;
//! a lock of more than [`PACKAGES_LIMIT`] packages is refused; and the
//! search stops between projects once its requester is gone.

use std::collections::{HashMap, HashSet};
use std::time::Duration;

use super::tags::Ranking;
use super::{Installer, Lock, Locked, LockedFile};
use crate::id::SideId;
use crate::needs::{self, HeldBodies, NeededItem, Needs, NeedsError};
use crate::pypi::files::{project_of, served_path, version_of};
use crate::pypi::page::{self, Form, Listed};
use crate::pypi::{normalize, Index, Pypi, PAGE_LIMIT};

/// The URLs a lock names PyPI by.
const PYPI_URLS: [&str; 3] = ["https://pypi.org/simple", "https://pypi.python.org/simple", "https://pypi.org/pypi"];

/// The most packages one request follows: far more than a real lock pins
/// (hundreds; a few thousand for the largest).
const PACKAGES_LIMIT: usize = 10_000;

impl Pypi {
    /// What installing the locked packages needs, from what is held.
    pub(in crate::pypi) fn lock_needs(
        &self,
        asked: serde_json::Value,
        held: &dyn HeldBodies,
    ) -> Result<Needs, NeedsError> {
        let lock: Lock = needs::parse(asked)?;
        if lock.packages.len() > PACKAGES_LIMIT {
            return Err(NeedsError::new(format!(
                "the lock pins {} packages, more than the {PACKAGES_LIMIT} one request may ask to follow",
                lock.packages.len()
            )));
        }
        if let Some(installer) = &lock.installer {
            installer.target.check().map_err(NeedsError::new)?;
        }
        let config = self.config();
        let mut search = Search::new(held, lock.installer.as_ref(), config.index_ttl);
        search.found.unknown = lock.unknown;
        for (index, project, packages) in by_project(&config.indexes, &lock.packages, &mut search.found.unknown) {
            if held.abandoned() {
                return Err(NeedsError::new("the search stopped: its requester is gone"));
            }
            search.follow(index, &project, &packages);
        }
        Ok(search.finish())
    }
}

/// The packages of `packages` by the project and index they are of, each
/// project once, in the order the lock first names it; a package of an
/// index pkgproxy does not serve is told in `unknown`.
fn by_project<'l, 'i>(
    indexes: &'i [Index],
    packages: &'l [Locked],
    unknown: &mut Vec<String>,
) -> Vec<(&'i Index, String, Vec<&'l Locked>)> {
    let mut projects: Vec<(&Index, String, Vec<&Locked>)> = Vec::new();
    let mut at: HashMap<(&str, String), usize> = HashMap::new();
    for package in packages {
        let Some(index) = index_named(indexes, package.index.as_deref()) else {
            unknown.push(format!(
                "{} {}: its index ({}) is not one pkgproxy serves",
                package.name,
                package.version,
                package.index.as_deref().unwrap_or_default()
            ));
            continue;
        };
        let project = normalize(&package.name);
        let slot = *at.entry((index.name.as_str(), project.clone())).or_insert_with(|| {
            projects.push((index, project, Vec::new()));
            projects.len() - 1
        });
        projects[slot].2.push(package);
    }
    projects
}

/// One request's search: what it found so far.
struct Search<'h> {
    /// What the cache holds.
    held: &'h dyn HeldBodies,
    /// How long a held page is fresh, as a client's request for it says.
    index_ttl: Duration,
    /// Where the side is mounted (`/pypi`).
    prefix: &'static str,
    /// The pages to ask for, and what is not followed.
    found: Needs,
    /// The files to ask for, after the pages.
    files: Vec<NeededItem>,
    /// The files named so far, by URL: each is named once.
    named: HashSet<String>,
    /// The page forms asked for, the one files are read from first.
    forms: &'static [Form],
    /// What the installer takes, and what people call its platform;
    /// `None`: every file the lock pins.
    platform: Option<(Ranking, &'h str)>,
    /// How many files the lock pins that the installer does not take.
    left_out: usize,
}

impl<'h> Search<'h> {
    fn new(held: &'h dyn HeldBodies, installer: Option<&'h Installer>, index_ttl: Duration) -> Search<'h> {
        let forms: &[Form] = match installer {
            None => &[Form::Json, Form::Html],
            Some(installer) if installer.html => &[Form::Html],
            Some(_) => &[Form::Json],
        };
        Search {
            held,
            index_ttl,
            prefix: crate::route::prefix_of(SideId::Pypi).unwrap_or_default(),
            found: Needs::default(),
            files: Vec::new(),
            named: HashSet::new(),
            forms,
            platform: installer.map(|installer| (Ranking::of(&installer.target), installer.label.as_str())),
            left_out: 0,
        }
    }

    /// Follows `packages`, all of `project` on `index`, in its held page.
    fn follow(&mut self, index: &Index, project: &str, packages: &[&Locked]) {
        let base = format!("{}{}", self.prefix, index.mount);
        let page_url = |form: Form| format!("{base}/simple/{project}/?{}", form.query());
        for form in self.forms {
            let label = format!("{project} page ({})", form.as_str());
            self.found.items.push(NeededItem { url: page_url(*form), label });
        }
        // Read as a client's request for the page is cached: its own
        // request, not its URL routed again.
        let request = index.page(project, self.forms[0], self.index_ttl);
        let held = self.held.read(&request, PAGE_LIMIT).and_then(|body| page::parse(&body));
        let page = held.map(|held| HeldPage::of(held.files, project));
        let mut followed = HashSet::new();
        for package in packages {
            if !followed.insert((package.version.to_ascii_lowercase(), &package.files)) {
                continue;
            }
            let Some(page) = &page else {
                self.found.unknown.push(format!(
                    "{} {}: its files are known once its page is held (warm fetches it first)",
                    package.name, package.version
                ));
                continue;
            };
            let listed = page.locked(package);
            if listed.is_empty() {
                let why = format!("{} {}: its page lists no file the lock names", package.name, package.version);
                self.found.unknown.push(why);
            }
            for listed in self.taken(package, listed) {
                self.name_file(&base, listed);
            }
        }
    }

    /// Of `listed`, the files `package` pins, the one its installer takes
    /// (all of them when no installer is named); the others are counted
    /// as left out, and a release with none it takes is told.
    fn taken<'l>(&mut self, package: &Locked, listed: Vec<&'l Listed>) -> Vec<&'l Listed> {
        let Some((ranking, label)) = &self.platform else { return listed };
        if listed.is_empty() {
            return listed;
        }
        match ranking.pick(listed.iter().map(|file| file.filename.as_str())) {
            Some(at) => {
                self.left_out += listed.len() - 1;
                vec![listed[at]]
            }
            None => {
                self.found.unknown.push(format!(
                    "{} {}: no file for {label} among its {} (no wheel of its tags, no sdist)",
                    package.name,
                    package.version,
                    listed.len()
                ));
                Vec::new()
            }
        }
    }

    /// Names `listed`, a file of the index at `base`, and its core
    /// metadata if its page advertises it.
    fn name_file(&mut self, base: &str, listed: &Listed) {
        let Some(path) = served_path(listed) else {
            self.found.unknown.push(format!("{}: its page gives no hash to check it by", listed.filename));
            return;
        };
        let url = format!("{base}/packages/{path}");
        if !self.named.insert(url.clone()) {
            return;
        }
        if listed.metadata_sha256.is_some() {
            let label = format!("{} core metadata", listed.filename);
            self.files.push(NeededItem { url: url.clone(), label: listed.filename.clone() });
            self.files.push(NeededItem { url: format!("{url}.metadata"), label });
        } else {
            self.files.push(NeededItem { url, label: listed.filename.clone() });
        }
    }

    /// What was found: the pages, then the files, and for what platform,
    /// leaving out how many.
    fn finish(mut self) -> Needs {
        self.found.items.append(&mut self.files);
        if let Some((_, label)) = &self.platform {
            self.found.notes.push(format!(
                "counted for {label}: of each pinned version, the file pip takes there (--platform, \
                 --python-version, --implementation count for another)"
            ));
        }
        if self.left_out > 0 {
            let files = if self.left_out == 1 { "file" } else { "files" };
            self.found.notes.push(format!(
                "left out: {} {files} of the pinned versions for other platforms or Pythons, or that pip passes \
                 over for a better one",
                self.left_out
            ));
        }
        self.found
    }
}

/// A held page's files of one project, found by what a lock names them
/// by.
struct HeldPage {
    /// The files, in the page's order.
    files: Vec<Listed>,
    /// Where each version's files are (the version in lower case).
    by_version: HashMap<String, Vec<usize>>,
    /// Where the files of each SHA-256 are (lower case).
    by_sha256: HashMap<String, Vec<usize>>,
    /// Where the files of each name are.
    by_name: HashMap<String, Vec<usize>>,
}

impl HeldPage {
    /// The files of `listed`, a page's, that are of `project`.
    fn of(listed: Vec<Listed>, project: &str) -> HeldPage {
        let files: Vec<Listed> =
            listed.into_iter().filter(|file| project_of(&file.filename).as_deref() == Some(project)).collect();
        let mut page = HeldPage {
            by_version: HashMap::new(),
            by_sha256: HashMap::new(),
            by_name: HashMap::new(),
            files: Vec::new(),
        };
        for (at, file) in files.iter().enumerate() {
            if let Some(version) = version_of(&file.filename) {
                page.by_version.entry(version.to_ascii_lowercase()).or_default().push(at);
            }
            if let Some(sha256) = &file.sha256 {
                page.by_sha256.entry(sha256.to_ascii_lowercase()).or_default().push(at);
            }
            page.by_name.entry(file.filename.clone()).or_default().push(at);
        }
        page.files = files;
        page
    }

    /// The files `package` pins, in the page's order: those it names (by
    /// hash, by name, or both), or, when it names none, every file of its
    /// version.
    fn locked(&self, package: &Locked) -> Vec<&Listed> {
        let mut found: Vec<usize> = match package.files.is_empty() {
            true => self.by_version.get(&package.version.to_ascii_lowercase()).cloned().unwrap_or_default(),
            false => package.files.iter().flat_map(|locked| self.named(locked)).collect(),
        };
        found.sort_unstable();
        found.dedup();
        found.into_iter().map(|at| &self.files[at]).collect()
    }

    /// Where the files `locked` names are.
    fn named(&self, locked: &LockedFile) -> Vec<usize> {
        let at = match (&locked.sha256, &locked.filename) {
            (Some(sha256), _) => self.by_sha256.get(&sha256.to_ascii_lowercase()),
            (None, Some(filename)) => self.by_name.get(filename),
            (None, None) => None,
        };
        let named =
            |at: &&usize| locked.filename.as_ref().is_none_or(|filename| &self.files[**at].filename == filename);
        at.into_iter().flatten().filter(named).copied().collect()
    }
}

/// The index a lock names by `url` (`None`: PyPI): PyPI's, one of an
/// index's mirrors, or a pkgproxy's own (`.../pypi/simple`,
/// `.../pypi/NAME/simple`: a lock made through pkgproxy names it).
fn index_named<'i>(indexes: &'i [Index], url: Option<&str>) -> Option<&'i Index> {
    let Some(url) = url.map(|url| url.trim_end_matches('/')) else {
        return indexes.iter().find(|index| index.mount.is_empty());
    };
    if PYPI_URLS.contains(&url) {
        return indexes.iter().find(|index| index.mount.is_empty());
    }
    if let Some(mount) = pkgproxy_mount(url) {
        return indexes.iter().find(|index| index.mount == mount);
    }
    indexes.iter().find(|index| index.mirrors.urls().iter().any(|mirror| mirror.trim_end_matches('/') == url))
}

/// The mount (`""`, `/NAME`) of a pkgproxy's index URL.
fn pkgproxy_mount(url: &str) -> Option<String> {
    let path = url.split_once("://").map_or(url, |(_, rest)| rest.find('/').map_or("", |at| &rest[at..]));
    let below = path.strip_suffix("/simple")?;
    let (before, last) = below.rsplit_once('/')?;
    match (last, before.rsplit_once('/')) {
        ("pypi", _) => Some(String::new()),
        (name, Some((_, "pypi"))) => Some(format!("/{name}")),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::pypi::{Config, Options};

    /// The cache as a resolver reads it: one JSON page held per project
    /// of `held`, each of `files` files of version 1.0; counting the
    /// bodies read, its requester gone after `gone_after` of them.
    #[derive(Default)]
    struct Pages {
        held: Vec<String>,
        files: usize,
        /// The files' names after `PROJECT-1.0-`, in place of `N-py3-none-any.whl`.
        named: Vec<&'static str>,
        read: std::cell::Cell<usize>,
        /// After how many reads the requester is gone, if it goes.
        gone_after: Option<usize>,
    }

    impl Pages {
        fn page(&self, project: &str) -> String {
            let files: Vec<_> = (0..self.files)
                .map(|n| {
                    let sha256 = format!("{n:064x}");
                    let rest =
                        self.named.get(n).map_or_else(|| format!("{n}-py3-none-any.whl"), |rest| rest.to_string());
                    serde_json::json!({
                        "filename": format!("{project}-1.0-{rest}"),
                        "url": format!("https://files.example/{project}-1.0-{rest}"),
                        "hashes": {"sha256": sha256},
                    })
                })
                .collect();
            serde_json::json!({"meta": {"api-version": "1.1"}, "name": project, "files": files}).to_string()
        }
    }

    impl crate::decision::CacheView for Pages {
        fn open(&self, _request: &crate::decision::CachedRequest) -> Option<std::sync::Arc<std::fs::File>> {
            None
        }

        fn read(&self, request: &crate::decision::CachedRequest, _limit: u64) -> Option<Vec<u8>> {
            self.read.set(self.read.get() + 1);
            let project = request.key.strip_prefix("pypi/pypi/simple/")?.split('/').next()?;
            self.held.iter().any(|held| held == project).then(|| self.page(project).into_bytes())
        }
    }

    impl HeldBodies for Pages {
        fn body(&self, _url: &str, _limit: u64) -> Option<Vec<u8>> {
            None
        }

        fn open_sha256(&self, _sha256: &str, _size: u64) -> Option<std::sync::Arc<std::fs::File>> {
            None
        }

        fn now(&self) -> std::time::SystemTime {
            std::time::SystemTime::now()
        }

        fn abandoned(&self) -> bool {
            self.gone_after.is_some_and(|reads| self.read.get() >= reads)
        }
    }

    fn side() -> (Pypi, tempfile::TempDir) {
        let dir = tempfile::tempdir().unwrap();
        let cache = pkgproxy_cache::Cache::open(dir.path(), std::sync::Arc::new(pkgproxy_cache::SystemClock)).unwrap();
        (Pypi::new(Config::new(&Options::default()).unwrap(), cache), dir)
    }

    fn lock_of_packages(packages: impl Iterator<Item = (String, String)>) -> serde_json::Value {
        let packages: Vec<Locked> =
            packages.map(|(name, version)| Locked { name, version, index: None, files: Vec::new() }).collect();
        serde_json::to_value(Lock { packages, unknown: Vec::new(), installer: None }).unwrap()
    }

    #[test]
    fn a_lock_naming_one_project_a_hundred_times_reads_its_page_once() {
        let (side, _dir) = side();
        let held = Pages { held: vec!["demo".into()], files: 50, ..Pages::default() };
        let lock = lock_of_packages((0..100).map(|_| ("Demo".to_owned(), "1.0".to_owned())));
        let needs = side.lock_needs(lock, &held).unwrap();
        assert_eq!(held.read.get(), 1, "the page read once for the request");
        let files = needs.items.iter().filter(|item| item.url.contains("/packages/")).count();
        assert_eq!(files, 50, "each file named once: {:?}", needs.unknown);
    }

    #[test]
    fn a_lock_of_more_packages_than_a_request_follows_is_refused_saying_how_many_it_may_have() {
        let (side, _dir) = side();
        let held = Pages::default();
        let lock = lock_of_packages((0..10_001).map(|n| (format!("p{n}"), "1.0".to_owned())));
        let Err(refused) = side.lock_needs(lock, &held) else { panic!("a lock of 10001 packages was followed") };
        assert!(refused.to_string().contains("10000"), "{refused}");
        assert_eq!(held.read.get(), 0, "refused before anything is read");
        let lock = lock_of_packages((0..10_000).map(|n| (format!("p{n}"), "1.0".to_owned())));
        assert!(side.lock_needs(lock, &held).is_ok(), "a lock at the bound is followed");
    }

    #[test]
    fn a_pkgproxy_s_own_index_urls_name_its_indexes() {
        assert_eq!(pkgproxy_mount("http://h:3142/pypi/simple").as_deref(), Some(""));
        assert_eq!(pkgproxy_mount("http://h:3142/pypi/corp/simple").as_deref(), Some("/corp"));
        assert_eq!(pkgproxy_mount("https://pypi.org/simple"), None);
        assert_eq!(pkgproxy_mount("https://corp.example/a/b/simple"), None);
    }

    #[test]
    fn the_search_stops_once_its_requester_is_gone() {
        let (side, _dir) = side();
        let projects: Vec<String> = (0..50).map(|n| format!("p{n}")).collect();
        let held = Pages { held: projects.clone(), files: 10, gone_after: Some(3), ..Pages::default() };
        let lock = lock_of_packages(projects.into_iter().map(|name| (name, "1.0".to_owned())));
        let Err(stopped) = side.lock_needs(lock, &held) else { panic!("the search went on for nobody") };
        assert!(stopped.to_string().contains("requester is gone"), "{stopped}");
        assert_eq!(held.read.get(), 3, "no page read once the requester is gone");
    }

    #[test]
    fn each_package_is_followed_by_hash_by_name_or_by_version_and_each_file_named_once() {
        let (side, _dir) = side();
        let held = Pages { held: vec!["demo".into()], files: 4, ..Pages::default() };
        let (sha1, sha3) = (format!("{:064X}", 1), format!("{:064x}", 3));
        let lock = serde_json::json!({"packages": [
            {"name": "demo", "version": "1.0", "index": null, "files": [{"filename": null, "sha256": sha1}]},
            {"name": "Demo", "version": "1.0", "index": null, "files": [
                {"filename": "demo-1.0-2-py3-none-any.whl", "sha256": null},
                {"filename": "demo-1.0-0-py3-none-any.whl", "sha256": sha3},
                {"filename": "demo-1.0-1-py3-none-any.whl", "sha256": sha1},
            ]},
            {"name": "demo", "version": "2.0", "index": null, "files": []},
            {"name": "other", "version": "1.0", "index": "https://elsewhere.example/simple", "files": []},
        ], "unknown": []});
        let needs = side.lock_needs(lock, &held).unwrap();
        let labels: Vec<_> = needs.items.iter().map(|item| item.label.as_str()).collect();
        assert_eq!(
            labels,
            ["demo page (json)", "demo page (html)", "demo-1.0-1-py3-none-any.whl", "demo-1.0-2-py3-none-any.whl"]
        );
        assert_eq!(held.read.get(), 1);
        assert_eq!(needs.unknown.len(), 2, "{:?}", needs.unknown);
        assert!(needs.unknown[0].contains("other 1.0: its index"), "{:?}", needs.unknown);
        assert!(needs.unknown[1].contains("demo 2.0: its page lists no file"), "{:?}", needs.unknown);
    }

    /// An installer of CPython 3.12 on glibc 2.28, x86_64.
    fn glibc_2_28(html: bool) -> Installer {
        let target = crate::pypi::needs::tags::Target {
            implementation: "cp".into(),
            python: (3, 12),
            abis: vec!["cp312".into()],
            platforms: crate::pypi::needs::tags::expand_platform("manylinux_2_28_x86_64"),
        };
        Installer { html, target, label: "cp312 on manylinux_2_28_x86_64".into() }
    }

    #[test]
    fn a_lock_naming_every_platform_s_files_needs_the_one_pip_takes_here_and_says_how_many_it_left_out() {
        let (side, _dir) = side();
        let named = vec![
            "cp312-cp312-win_amd64.whl",
            "cp312-cp312-manylinux_2_17_x86_64.manylinux2014_x86_64.whl",
            "cp312-cp312-macosx_11_0_arm64.whl",
            "cp311-cp311-manylinux_2_17_x86_64.whl",
            "cp312-cp312-manylinux_2_34_x86_64.whl",
        ];
        let held = Pages { held: vec!["demo".into()], files: 5, named, ..Pages::default() };
        let by_hash = (0..5).map(|n| serde_json::json!({"filename": null, "sha256": format!("{n:064x}")}));
        let lock = serde_json::json!({"packages": [
            {"name": "demo", "version": "1.0", "index": null, "files": by_hash.collect::<Vec<_>>()},
        ], "unknown": [], "installer": glibc_2_28(false)});
        let needs = side.lock_needs(lock, &held).unwrap();
        let labels: Vec<_> = needs.items.iter().map(|item| item.label.as_str()).collect();
        assert_eq!(labels, ["demo page (json)", "demo-1.0-cp312-cp312-manylinux_2_17_x86_64.manylinux2014_x86_64.whl"]);
        assert_eq!(needs.notes.len(), 2, "{needs:?}");
        assert!(needs.notes[0].starts_with("counted for cp312 on manylinux_2_28_x86_64: "), "{needs:?}");
        assert!(
            needs.notes[1].starts_with("left out: 4 files of the pinned versions for other platforms"),
            "{needs:?}"
        );
        assert!(needs.unknown.is_empty(), "{:?}", needs.unknown);
    }

    #[test]
    fn a_release_with_no_file_for_the_platform_is_told_and_the_html_form_counted_when_asked() {
        let (side, _dir) = side();
        let held =
            Pages { held: vec!["demo".into()], files: 1, named: vec!["cp312-cp312-win_amd64.whl"], ..Pages::default() };
        let lock = serde_json::json!({"packages": [
            {"name": "demo", "version": "1.0", "index": null, "files": []},
        ], "unknown": [], "installer": glibc_2_28(true)});
        let needs = side.lock_needs(lock, &held).unwrap();
        let labels: Vec<_> = needs.items.iter().map(|item| item.label.as_str()).collect();
        assert_eq!(labels, ["demo page (html)"]);
        assert_eq!(needs.unknown.len(), 1, "{needs:?}");
        assert!(
            needs.unknown[0].contains("demo 1.0: no file for cp312 on manylinux_2_28_x86_64 among its 1"),
            "{needs:?}"
        );
    }
}
