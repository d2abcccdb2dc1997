//! Which packages a list of NEVRAs and names stands for, as dnf would
//! install them from the primary metadata of the roots read: a NEVRA is
//! that build (the most recently published copy where several roots list
//! it); a name is its newest build for the machine's architecture (or
//! `noarch`), and what it `Requires` is followed through every package's
//! `provides` (names, virtual names and the files primary lists) to a
//! closure, each requirement met by a package already taken (the list's
//! own first), else by its newest provider. A list of NEVRAs alone is a
//! machine's whole set, as `rpm -qa` prints it: nothing is followed.
//!
//! Primary metadata is read once, as a stream: for NEVRAs only the
//! matches are kept; for names, each name's newest build for the
//! architecture, with its provides and requires as 64-bit hashes (a
//! requirement's text kept once, for what is said of it): Fedora's 75,000
//! packages take tens of megabytes while the search runs, not the hundreds
//! their strings would.

use std::cmp::Ordering;
use std::collections::{HashMap, HashSet, VecDeque};
use std::hash::{Hash, Hasher};

use super::evr::Evr;
use super::nevra::Nevra;
use super::primary::Package;

/// What a list asks for.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Wanted {
    /// Builds, as `rpm -qa` names them.
    pub nevras: Vec<Nevra>,
    /// Names, each its newest build and what it requires.
    pub names: Vec<String>,
    /// The machine's architecture (`x86_64`): a name's build is of it or
    /// `noarch`.
    pub arch: String,
}

/// A package resolution chose.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Found {
    /// `NAME-[EPOCH:]VERSION-RELEASE.ARCH`.
    pub nevra: String,
    /// Which root listed it (the order the roots were read in).
    pub root: usize,
    /// Where below the repository it is; `None` when primary puts it at
    /// another host.
    pub path: Option<String>,
}

/// What a list stands for.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Resolved {
    /// The packages: the list's own first, then what they require.
    pub packages: Vec<Found>,
    /// What the list names that no root read lists.
    pub missing: Vec<String>,
    /// Requirements no package provides, with the package that has them:
    /// a package on the machine may, so these are said, not fatal.
    pub unprovided: Vec<String>,
    /// Conditional and nested rich requirements (`(a if b)`), not followed.
    pub skipped: usize,
}

/// A provide's or a requirement's 64-bit hash: a collision among the
/// million strings of a distribution is about one in ten million.
fn hashed(text: &str) -> u64 {
    let mut hasher = std::hash::DefaultHasher::new();
    text.hash(&mut hasher);
    hasher.finish()
}

/// A package as resolution keeps it.
#[derive(Debug)]
struct Kept {
    name: Box<str>,
    arch: Box<str>,
    evr: Evr,
    time_file: u64,
    root: usize,
    path: Option<Box<str>>,
    /// What it provides, hashed (its own name included).
    provides: Box<[u64]>,
    /// What it requires, hashed (the texts are the catalogue's).
    requires: Box<[u64]>,
}

impl Kept {
    fn nevra(&self) -> String {
        let evr = &self.evr;
        match evr.epoch {
            0 => format!("{}-{}-{}.{}", self.name, evr.version, evr.release, self.arch),
            epoch => format!("{}-{epoch}:{}-{}.{}", self.name, evr.version, evr.release, self.arch),
        }
    }

    fn found(&self) -> Found {
        Found { nevra: self.nevra(), root: self.root, path: self.path.as_deref().map(str::to_owned) }
    }
}

/// The packages of the roots read so far, as far as the list needs them.
#[derive(Debug)]
pub struct Catalogue {
    wanted: Wanted,
    /// The asked NEVRAs by name, for a lookup per package read.
    nevras_by_name: HashMap<String, Vec<usize>>,
    /// Every package kept (some since replaced by a newer build).
    kept: Vec<Kept>,
    /// Each asked NEVRA's best match so far.
    matched: Vec<Option<usize>>,
    /// Each name's newest build, of the architecture (`true`) and of
    /// `noarch`, by the name's hash (kept only when names are asked).
    newest: HashMap<(u64, bool), usize>,
    /// The text of each requirement kept, by its hash.
    requirements: HashMap<u64, Box<str>>,
}

impl Catalogue {
    /// An empty catalogue for `wanted`.
    pub fn new(wanted: Wanted) -> Catalogue {
        let mut nevras_by_name: HashMap<String, Vec<usize>> = HashMap::new();
        for (at, nevra) in wanted.nevras.iter().enumerate() {
            nevras_by_name.entry(nevra.name.clone()).or_default().push(at);
        }
        let matched = vec![None; wanted.nevras.len()];
        Catalogue {
            wanted,
            nevras_by_name,
            kept: Vec::new(),
            matched,
            newest: HashMap::new(),
            requirements: HashMap::new(),
        }
    }

    /// Takes what the list needs of `package`, listed by root number
    /// `root` at `path` below the repository.
    pub fn add(&mut self, root: usize, package: &Package, path: Option<String>) {
        let matching: Vec<usize> = match self.nevras_by_name.get(&package.name) {
            Some(asked) => asked.iter().copied().filter(|&at| self.wanted.nevras[at].names(package)).collect(),
            None => Vec::new(),
        };
        let native = package.arch == self.wanted.arch;
        let followed = !self.wanted.names.is_empty() && (native || package.arch == "noarch");
        let key = (hashed(&package.name), native);
        let evr = Evr::new(&package.epoch, &package.version, &package.release);
        let time_file = package.time_file.unwrap_or(0);
        let newer = |held: Option<usize>, kept: &[Kept]| {
            held.is_none_or(|at| {
                let held = &kept[at];
                evr.cmp(&held.evr).then(time_file.cmp(&held.time_file)) == Ordering::Greater
            })
        };
        let better_match: Vec<usize> = matching.into_iter().filter(|&at| newer(self.matched[at], &self.kept)).collect();
        let newest = followed && newer(self.newest.get(&key).copied(), &self.kept);
        if better_match.is_empty() && !newest {
            return;
        }
        let at = self.keep(root, package, path, evr);
        for asked in better_match {
            self.matched[asked] = Some(at);
        }
        if newest {
            self.newest.insert(key, at);
        }
    }

    fn keep(&mut self, root: usize, package: &Package, path: Option<String>, evr: Evr) -> usize {
        // A package provides its own name, whether primary says so or not
        // (rpm adds it to every package it builds).
        let mut provides: Vec<u64> = package.provides.iter().map(|text| hashed(text)).collect();
        let own = hashed(&package.name);
        if !provides.contains(&own) {
            provides.push(own);
        }
        let mut requires = Vec::with_capacity(package.requires.len());
        for text in &package.requires {
            let hash = hashed(text);
            self.requirements.entry(hash).or_insert_with(|| text.as_str().into());
            requires.push(hash);
        }
        self.kept.push(Kept {
            name: package.name.as_str().into(),
            arch: package.arch.as_str().into(),
            evr,
            time_file: package.time_file.unwrap_or(0),
            root,
            path: path.map(String::into_boxed_str),
            provides: provides.into_boxed_slice(),
            requires: requires.into_boxed_slice(),
        });
        self.kept.len() - 1
    }

    /// What the list stands for, in the packages read.
    pub fn resolve(self) -> Resolved {
        Closure::new(&self).run()
    }

    /// The newest build of `name`: of the architecture, unless `noarch`'s
    /// is newer.
    fn newest_named(&self, name: &str) -> Option<usize> {
        let hash = hashed(name);
        let native = self.newest.get(&(hash, true)).copied();
        let noarch = self.newest.get(&(hash, false)).copied();
        match (native, noarch) {
            (Some(native), Some(noarch)) if self.kept[noarch].evr > self.kept[native].evr => Some(noarch),
            (Some(native), _) => Some(native),
            (None, noarch) => noarch,
        }
    }
}

/// A rich requirement (`(a or b)`), as far as it is followed.
#[derive(Debug, PartialEq, Eq)]
enum Rich {
    /// Any one of these.
    Any(Vec<String>),
    /// Each of these.
    All(Vec<String>),
    /// Conditional or nested: dnf installs it only beside what it names.
    Skipped,
}

/// `(a >= 1 or b)`, `(a and b)`, `(a if b)`: what must be installed for it.
fn rich(text: &str) -> Rich {
    let Some(inner) = text.strip_prefix('(').and_then(|rest| rest.strip_suffix(')')) else { return Rich::Skipped };
    let words = words_at_top(inner);
    if words.iter().any(|word| word.starts_with('(')) {
        return Rich::Skipped;
    }
    let operators: Vec<&str> = words
        .iter()
        .copied()
        .filter(|word| matches!(*word, "or" | "and" | "if" | "unless" | "else" | "with" | "without"))
        .collect();
    let names = |operator: &str| -> Vec<String> {
        let mut names = Vec::new();
        let mut at_start = true;
        for word in &words {
            match *word {
                word if word == operator => at_start = true,
                word if at_start => {
                    names.push(word.to_owned());
                    at_start = false;
                }
                _ => {}
            }
        }
        names
    };
    match operators.as_slice() {
        [] => Rich::All(names("")),
        all if all.iter().all(|operator| *operator == "or") => Rich::Any(names("or")),
        all if all.iter().all(|operator| *operator == "and") => Rich::All(names("and")),
        _ => Rich::Skipped,
    }
}

/// The words of `text` split at spaces outside parentheses
/// (`python3dist(foo) >= 1` is three).
fn words_at_top(text: &str) -> Vec<&str> {
    let mut words = Vec::new();
    let (mut depth, mut start) = (0usize, None);
    for (at, c) in text.char_indices() {
        match c {
            '(' => depth += 1,
            ')' => depth = depth.saturating_sub(1),
            c if c.is_whitespace() && depth == 0 => {
                if let Some(from) = start.take() {
                    words.push(&text[from..at]);
                }
                continue;
            }
            _ => {}
        }
        start.get_or_insert(at);
    }
    if let Some(from) = start {
        words.push(&text[from..]);
    }
    words
}

/// The walk from the list's packages through what they require.
struct Closure<'c> {
    catalogue: &'c Catalogue,
    /// Who provides each hash (the names' newest builds), sorted: built
    /// when a requirement is first followed.
    providers: Option<Vec<(u64, usize)>>,
    taken: HashSet<String>,
    provided: HashSet<u64>,
    failed: HashSet<u64>,
    /// Requirements to meet, with the package that has them.
    queue: VecDeque<(u64, usize)>,
    resolved: Resolved,
}

impl<'c> Closure<'c> {
    fn new(catalogue: &'c Catalogue) -> Closure<'c> {
        Closure {
            catalogue,
            providers: None,
            taken: HashSet::new(),
            provided: HashSet::new(),
            failed: HashSet::new(),
            queue: VecDeque::new(),
            resolved: Resolved::default(),
        }
    }

    fn run(mut self) -> Resolved {
        let catalogue = self.catalogue;
        // A list of NEVRAs alone is a whole set (`rpm -qa`); beside names,
        // a build listed may meet a name's requirement, and dnf installs
        // what that build requires too.
        let follow_listed = !catalogue.wanted.names.is_empty();
        for (nevra, matched) in catalogue.wanted.nevras.iter().zip(&catalogue.matched) {
            match matched {
                Some(at) => self.take(*at, follow_listed),
                None => self.resolved.missing.push(format!("{nevra}: no root read lists it")),
            }
        }
        for name in &catalogue.wanted.names {
            // As `dnf install` takes it: a package's name, else what one
            // provides (`pkgconfig(zlib)`, `/usr/bin/make`).
            match catalogue.newest_named(name).or_else(|| self.best_provider(name)) {
                Some(at) => self.take(at, true),
                None => self.resolved.missing.push(format!(
                    "{name}: no root read lists a package of that name or providing it, for {} or noarch",
                    catalogue.wanted.arch
                )),
            }
        }
        while let Some((requirement, by)) = self.queue.pop_front() {
            self.meet(requirement, by);
        }
        self.resolved
    }

    /// Takes package `at` (and, when `followed`, queues what it requires).
    fn take(&mut self, at: usize, followed: bool) {
        let kept = &self.catalogue.kept[at];
        if !self.taken.insert(kept.nevra()) {
            return;
        }
        self.provided.extend(kept.provides.iter().copied());
        if followed {
            self.queue.extend(kept.requires.iter().map(|&requirement| (requirement, at)));
        }
        self.resolved.packages.push(kept.found());
    }

    /// Meets `requirement` of package `by`: already, or by its best provider.
    fn meet(&mut self, requirement: u64, by: usize) {
        if self.provided.contains(&requirement) {
            return;
        }
        let catalogue = self.catalogue;
        let text = catalogue.requirements.get(&requirement).map_or("", |text| text);
        if !text.starts_with('(') {
            return self.meet_one(text, by);
        }
        match rich(text) {
            Rich::All(names) => names.iter().for_each(|name| self.meet_one(name, by)),
            Rich::Any(names) => {
                if names.iter().any(|name| self.provided.contains(&hashed(name))) {
                    return;
                }
                let first = names.iter().find(|name| self.best_provider(name).is_some());
                self.meet_one(first.map_or(text, String::as_str), by);
            }
            Rich::Skipped => self.resolved.skipped += 1,
        }
    }

    fn meet_one(&mut self, text: &str, by: usize) {
        let hash = hashed(text);
        if self.provided.contains(&hash) {
            return;
        }
        match self.best_provider(text) {
            Some(at) => self.take(at, true),
            None if self.failed.insert(hash) => {
                let by = self.catalogue.kept[by].nevra();
                let why = format!("{text} (required by {by}): no package of the roots read provides it");
                self.resolved.unprovided.push(why);
            }
            None => {}
        }
    }

    /// The provider of `text` dnf would take, of the names' newest builds.
    fn best_provider(&mut self, text: &str) -> Option<usize> {
        let catalogue = self.catalogue;
        let providers = self.providers.get_or_insert_with(|| {
            let mut providers: Vec<(u64, usize)> = catalogue
                .newest
                .values()
                .flat_map(|&at| catalogue.kept[at].provides.iter().map(move |&provide| (provide, at)))
                .collect();
            providers.sort_unstable();
            providers
        });
        let hash = hashed(text);
        let first = providers.partition_point(|(provide, _)| *provide < hash);
        let arch = catalogue.wanted.arch.as_str();
        providers[first..]
            .iter()
            .take_while(|(provide, _)| *provide == hash)
            .map(|&(_, at)| at)
            .max_by(|&a, &b| better_provider(text, arch, &catalogue.kept[a], &catalogue.kept[b]))
    }
}

/// Which of two providers of `requirement` dnf would take: the package of
/// that name, else the newest, of the architecture rather than `noarch`,
/// the shorter name, the first by name.
fn better_provider(requirement: &str, arch: &str, a: &Kept, b: &Kept) -> Ordering {
    (*a.name == *requirement)
        .cmp(&(*b.name == *requirement))
        .then_with(|| a.evr.cmp(&b.evr))
        .then_with(|| (*a.arch == *arch).cmp(&(*b.arch == *arch)))
        .then_with(|| b.name.len().cmp(&a.name.len()))
        .then_with(|| b.name.cmp(&a.name))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::rpm::primary;

    /// A tiny primary: `app` needs `/usr/bin/greet` (a file `greeter`
    /// has), `greeter` needs the virtual `greeting-lib` (two versions of
    /// `libgreet` and `altgreet` provide it), a rich requirement, a
    /// conditional one and one nobody provides.
    const PRIMARY: &str = r#"<?xml version="1.0" encoding="UTF-8"?>
<metadata xmlns="http://linux.duke.edu/metadata/common" xmlns:rpm="http://linux.duke.edu/metadata/rpm" packages="7">
<package type="rpm"><name>app</name><arch>x86_64</arch><version epoch="0" ver="1.0" rel="1.fc41"/>
  <time file="100" build="1"/><location href="Packages/a/app-1.0-1.fc41.x86_64.rpm"/>
  <format><rpm:provides><rpm:entry name="app"/><rpm:entry name="app(x86-64)"/></rpm:provides>
  <rpm:requires><rpm:entry name="/usr/bin/greet"/><rpm:entry name="rpmlib(PayloadIsZstd)"/>
  <rpm:entry name="(python3dist(tomli) or tomli-fallback)"/><rpm:entry name="(app-docs if documentation)"/>
  <rpm:entry name="libmissing.so.1()(64bit)"/></rpm:requires></format></package>
<package type="rpm"><name>greeter</name><arch>noarch</arch><version epoch="2" ver="2.0" rel="1"/>
  <time file="100" build="1"/><location href="Packages/g/greeter-2.0-1.noarch.rpm"/>
  <format><rpm:provides><rpm:entry name="greeter"/></rpm:provides>
  <rpm:requires><rpm:entry name="greeting-lib"/><rpm:entry name="app"/></rpm:requires>
  <file>/usr/bin/greet</file></format></package>
<package type="rpm"><name>libgreet</name><arch>x86_64</arch><version epoch="0" ver="0.10" rel="1"/>
  <time file="100" build="1"/><location href="Packages/l/libgreet-0.10-1.x86_64.rpm"/>
  <format><rpm:provides><rpm:entry name="libgreet"/><rpm:entry name="greeting-lib"/></rpm:provides></format></package>
<package type="rpm"><name>libgreet</name><arch>x86_64</arch><version epoch="0" ver="0.9" rel="1"/>
  <time file="200" build="1"/><location href="Packages/l/libgreet-0.9-1.x86_64.rpm"/>
  <format><rpm:provides><rpm:entry name="libgreet"/><rpm:entry name="greeting-lib"/></rpm:provides></format></package>
<package type="rpm"><name>altgreet</name><arch>x86_64</arch><version epoch="0" ver="0.1" rel="1"/>
  <time file="100" build="1"/><location href="Packages/a/altgreet-0.1-1.x86_64.rpm"/>
  <format><rpm:provides><rpm:entry name="altgreet"/><rpm:entry name="greeting-lib"/></rpm:provides></format></package>
<package type="rpm"><name>tomli-fallback</name><arch>noarch</arch><version epoch="0" ver="1" rel="1"/>
  <time file="100" build="1"/><location href="Packages/t/tomli-fallback-1-1.noarch.rpm"/>
  <format><rpm:provides><rpm:entry name="tomli-fallback"/></rpm:provides></format></package>
<package type="rpm"><name>app</name><arch>aarch64</arch><version epoch="0" ver="9.0" rel="1.fc41"/>
  <time file="100" build="1"/><location href="Packages/a/app-9.0-1.fc41.aarch64.rpm"/>
  <format><rpm:provides><rpm:entry name="app"/></rpm:provides></format></package>
</metadata>
"#;

    fn catalogue(wanted: Wanted) -> Catalogue {
        let mut catalogue = Catalogue::new(wanted);
        primary::read(PRIMARY.as_bytes(), |package| {
            let path = Some(package.href.clone());
            catalogue.add(0, &package, path);
        })
        .unwrap();
        catalogue
    }

    fn nevras(resolved: &Resolved) -> Vec<&str> {
        resolved.packages.iter().map(|found| found.nevra.as_str()).collect()
    }

    #[test]
    fn a_name_brings_its_newest_build_and_what_it_requires_through_files_and_virtual_names() {
        let wanted = Wanted { names: vec!["app".into()], arch: "x86_64".into(), ..Wanted::default() };
        let resolved = catalogue(wanted).resolve();
        assert_eq!(
            nevras(&resolved),
            ["app-1.0-1.fc41.x86_64", "greeter-2:2.0-1.noarch", "tomli-fallback-1-1.noarch", "libgreet-0.10-1.x86_64"],
            "the file's owner, the rich requirement's alternative that exists, the named provider's newest build"
        );
        assert_eq!(resolved.packages[3].path.as_deref(), Some("Packages/l/libgreet-0.10-1.x86_64.rpm"));
        assert_eq!(
            resolved.unprovided,
            ["libmissing.so.1()(64bit) (required by app-1.0-1.fc41.x86_64): no package of the roots read provides it"]
        );
        assert_eq!(resolved.skipped, 1, "the conditional requirement");
        assert!(resolved.missing.is_empty());
    }

    #[test]
    fn a_nevra_is_that_build_alone_and_what_the_list_has_meets_a_requirement() {
        let wanted = Wanted {
            nevras: vec![Nevra::parse("libgreet-0.9-1.x86_64").unwrap(), Nevra::parse("ghost-1-1.noarch").unwrap()],
            names: vec!["greeter".into(), "nothing".into()],
            arch: "x86_64".into(),
        };
        let resolved = catalogue(wanted).resolve();
        assert_eq!(
            nevras(&resolved),
            ["libgreet-0.9-1.x86_64", "greeter-2:2.0-1.noarch", "app-1.0-1.fc41.x86_64", "tomli-fallback-1-1.noarch"],
            "the listed libgreet 0.9 provides greeting-lib: no other is taken"
        );
        assert_eq!(
            resolved.missing,
            [
                "ghost-1-1.noarch: no root read lists it",
                "nothing: no root read lists a package of that name or providing it, for x86_64 or noarch"
            ]
        );
    }

    #[test]
    fn a_name_no_package_has_is_met_by_what_provides_it_as_dnf_install_takes_it() {
        let wanted = Wanted { names: vec!["greeting-lib".into()], arch: "x86_64".into(), ..Wanted::default() };
        assert_eq!(nevras(&catalogue(wanted).resolve()), ["libgreet-0.10-1.x86_64"], "the newest provider");
        let wanted = Wanted { names: vec!["/usr/bin/greet".into()], arch: "x86_64".into(), ..Wanted::default() };
        assert_eq!(nevras(&catalogue(wanted).resolve())[0], "greeter-2:2.0-1.noarch");
    }

    #[test]
    fn nevras_alone_keep_nothing_but_their_matches() {
        let wanted = Wanted { nevras: vec![Nevra::parse("app-9.0-1.fc41.aarch64").unwrap()], ..Wanted::default() };
        let catalogue = catalogue(wanted);
        assert!(catalogue.newest.is_empty(), "no name asked: nothing kept for the closure");
        assert_eq!(catalogue.kept.len(), 1, "only the match");
        assert_eq!(nevras(&catalogue.resolve()), ["app-9.0-1.fc41.aarch64"]);
    }

    #[test]
    fn beside_names_what_a_listed_build_requires_is_followed_too() {
        let greeter = || vec![Nevra::parse("greeter-2:2.0-1.noarch").unwrap()];
        let alone = Wanted { nevras: greeter(), arch: "x86_64".into(), ..Wanted::default() };
        assert_eq!(nevras(&catalogue(alone).resolve()), ["greeter-2:2.0-1.noarch"], "a whole set: nothing followed");
        let beside = Wanted { nevras: greeter(), names: vec!["tomli-fallback".into()], arch: "x86_64".into() };
        let resolved = catalogue(beside).resolve();
        assert_eq!(
            nevras(&resolved)[..3],
            ["greeter-2:2.0-1.noarch", "tomli-fallback-1-1.noarch", "libgreet-0.10-1.x86_64"]
        );
    }

    #[test]
    fn a_build_listed_by_two_roots_is_the_one_published_last() {
        let mut catalogue =
            Catalogue::new(Wanted { nevras: vec![Nevra::parse("greeter-2.0-1.noarch").unwrap()], ..Wanted::default() });
        let mut greeter = None;
        primary::read(PRIMARY.as_bytes(), |package| {
            if package.name == "greeter" {
                greeter = Some(package);
            }
        })
        .unwrap();
        let mut greeter = greeter.unwrap();
        catalogue.add(0, &greeter, Some("a/greeter.rpm".into()));
        greeter.time_file = Some(500);
        catalogue.add(1, &greeter, Some("b/greeter.rpm".into()));
        greeter.time_file = Some(50);
        catalogue.add(2, &greeter, Some("c/greeter.rpm".into()));
        let resolved = catalogue.resolve();
        assert_eq!((resolved.packages[0].root, resolved.packages[0].path.as_deref()), (1, Some("b/greeter.rpm")));
    }

    #[test]
    fn rich_requirements_are_read_as_far_as_they_are_followed() {
        assert_eq!(rich("(a >= 1.0 or b)"), Rich::Any(vec!["a".into(), "b".into()]));
        assert_eq!(rich("(python3dist(x) >= 2 and c)"), Rich::All(vec!["python3dist(x)".into(), "c".into()]));
        assert_eq!(rich("(a if b)"), Rich::Skipped);
        assert_eq!(rich("(a or (b and c))"), Rich::Skipped);
        assert_eq!(rich("(a or b and c)"), Rich::Skipped);
    }
}
