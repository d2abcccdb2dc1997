//! What an npm, pnpm or yarn install needs, for `pkgproxyctl check npm` and
//! `warm npm`: the tarball of each package its lockfile locks to a
//! registry, as the install asks pkgproxy for it. The reader (in
//! `pkgproxyctl`, where the lockfile is) only reads the packages: npm's
//! `package-lock.json` and `npm-shrinkwrap.json` (lockfile versions 1 to
//! 3), pnpm's `pnpm-lock.yaml` (5 to 9), and `yarn.lock` in yarn 1's format
//! and in yarn 2+'s YAML. The daemon, which knows the registries
//! configured, tells which registry each tarball is from; it checks a
//! tarball against its version's own document as it fetches it, so the
//! lock's integrity is carried, not needed.
//!
//! Left out: what an install does not fetch from a registry. Workspaces,
//! links and `file:` packages are on disk; git dependencies come from their
//! host; a bundled package is inside its parent's tarball. yarn 2+'s
//! `checksum` is of its own zip archives, not of the tarballs, and is not
//! read.

use std::collections::HashSet;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use super::name::{tarball_of_url, PackageName, Tarball};
use super::{Config, Npm, Registry};
use crate::needs::{self, Asked, NeededItem, Needs, NeedsError, NeedsReader};
use formats::{package_lock, pnpm_lock, yarn1_lock, yarn_berry_lock};

mod formats;

/// The lockfiles looked for in the current directory, first found first:
/// npm prefers a shrinkwrap to a package-lock when both are there.
const LOCKFILES: [&str; 4] = ["npm-shrinkwrap.json", "package-lock.json", "pnpm-lock.yaml", "yarn.lock"];

/// The hosts lockfiles name the npm registry by: its own, and yarn 1's
/// alias of it.
const NPM_REGISTRY_HOSTS: [&str; 2] = ["registry.npmjs.org", "registry.yarnpkg.com"];

/// What `check npm` takes.
#[derive(Debug, clap::Args)]
struct Arguments {
    /// The lockfile: a package-lock.json, npm-shrinkwrap.json, pnpm-lock.yaml or yarn.lock (default: the first of
    /// npm-shrinkwrap.json, package-lock.json, pnpm-lock.yaml and yarn.lock in this directory).
    lockfile: Option<PathBuf>,
}

/// A package a lockfile locks to a registry.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
struct Locked {
    /// Its name on the registry (an alias's target, not the alias).
    name: String,
    /// Its exact version.
    version: String,
    /// The URL of its tarball the lockfile names; `None` where it names
    /// none (pnpm and yarn 2+, for the npm registry's).
    resolved: Option<String>,
    /// Its integrity (`sha512-...`), where the lockfile gives one.
    integrity: Option<String>,
}

/// A lockfile's packages from registries, each once, sorted: what the
/// daemon follows.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
struct Lock {
    packages: Vec<Locked>,
    /// Whether its client asks for each package's document even when
    /// installing what it locks (pnpm checks its supply-chain policy).
    #[serde(default)]
    documents: bool,
    /// Whether its client fetches the tarball URLs it names as written,
    /// whatever registry it is pointed at (yarn 1).
    #[serde(default)]
    urls_as_written: bool,
}

/// The lockfile formats read.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Format {
    /// npm's `package-lock.json` or `npm-shrinkwrap.json`.
    PackageLock,
    /// pnpm's `pnpm-lock.yaml`.
    Pnpm,
    /// yarn 1's `yarn.lock`, in its own format.
    Yarn1,
    /// yarn 2+'s `yarn.lock`, in YAML.
    YarnBerry,
}

impl Format {
    fn as_str(self) -> &'static str {
        match self {
            Format::PackageLock => "package-lock.json",
            Format::Pnpm => "pnpm-lock.yaml",
            Format::Yarn1 => "yarn 1 yarn.lock",
            Format::YarnBerry => "yarn 2+ yarn.lock",
        }
    }

    /// The format of `text`, the lockfile at `path`: told by its name where
    /// the name tells (so a broken file is read as what it claims to be),
    /// else by its content.
    fn of(path: &Path, text: &str) -> Option<Format> {
        let name = path.file_name().and_then(|name| name.to_str()).unwrap_or_default();
        if name.ends_with(".json") {
            return Some(Format::PackageLock);
        }
        if name.ends_with(".yaml") || name.ends_with(".yml") {
            return Some(Format::Pnpm);
        }
        let has_line = |start: &str| text.lines().any(|line| line.starts_with(start));
        if has_line("__metadata:") {
            Some(Format::YarnBerry)
        } else if has_line("# yarn lockfile v1") {
            Some(Format::Yarn1)
        } else if text.trim_start().starts_with('{') {
            Some(Format::PackageLock)
        } else if has_line("lockfileVersion:") {
            Some(Format::Pnpm)
        } else {
            None
        }
    }
}

/// The npm family's reader of a lockfile.
pub struct Reader;

impl NeedsReader for Reader {
    fn command(&self) -> clap::Command {
        let about = "npm, pnpm, yarn: what installing a package-lock.json, npm-shrinkwrap.json, pnpm-lock.yaml or \
                     yarn.lock asks for with empty client caches: each locked package's tarball";
        <Arguments as clap::Args>::augment_args(clap::Command::new("npm")).about(about)
    }

    fn read(&self, matches: &clap::ArgMatches) -> Result<Asked, NeedsError> {
        let arguments: Arguments = needs::arguments(matches)?;
        let lockfile = match arguments.lockfile {
            Some(lockfile) => lockfile,
            None => lockfile_in(Path::new(""))
                .ok_or_else(|| NeedsError::new(format!("none of {} here: name the lockfile", LOCKFILES.join(", "))))?,
        };
        needs::read_lock(&lockfile, |text| lock_of(&lockfile, text))
    }
}

/// The first of [`LOCKFILES`] in `dir`.
fn lockfile_in(dir: &Path) -> Option<PathBuf> {
    LOCKFILES.iter().map(|name| dir.join(name)).find(|path| path.is_file())
}

/// The packages from registries that `text`, the lockfile at `path`, locks.
fn lock_of(path: &Path, text: &str) -> Result<Lock, String> {
    let format =
        Format::of(path, text).ok_or_else(|| format!("not a lockfile pkgproxy reads ({})", LOCKFILES.join(", ")))?;
    let read = match format {
        Format::PackageLock => package_lock(text),
        Format::Pnpm => pnpm_lock(text),
        Format::Yarn1 => yarn1_lock(text),
        Format::YarnBerry => yarn_berry_lock(text),
    };
    let mut packages = read.map_err(|why| format!("not a {}: {why}", format.as_str()))?;
    packages.sort();
    packages.dedup();
    Ok(Lock { packages, documents: format == Format::Pnpm, urls_as_written: format == Format::Yarn1 })
}

impl Npm {
    /// What installing the locked packages asks pkgproxy for: each
    /// package's tarball, below the registry it is from.
    pub(super) fn lock_needs(&self, asked: serde_json::Value) -> Result<Needs, NeedsError> {
        let lock: Lock = needs::parse(asked)?;
        let config = self.config();
        let prefix = crate::route::prefix_of(crate::id::SideId::Npm).unwrap_or_default();
        let mut found = Needs::default();
        let mut asked_for = HashSet::new();
        for package in &lock.packages {
            let Some(registry) = registry_of(&config, package.resolved.as_deref()) else {
                let url = package.resolved.as_deref().unwrap_or_default();
                found.unknown.push(format!(
                    "{}@{}: its tarball ({url}) is on no registry pkgproxy serves",
                    package.name, package.version
                ));
                continue;
            };
            if let Some(url) = package.resolved.as_deref().filter(|url| lock.urls_as_written && !at_pkgproxy(url)) {
                found.unknown.push(format!(
                    "{}@{}: yarn 1 fetches {url} as its lockfile names it, past pkgproxy (a lockfile made through \
                     pkgproxy names pkgproxy)",
                    package.name, package.version
                ));
                continue;
            }
            let Some(tarball) = tarball_of(package) else {
                found.unknown.push(format!("{}@{}: not a package's name and version", package.name, package.version));
                continue;
            };
            if lock.documents {
                // A held full document answers for the abbreviated one too.
                let url = format!("{prefix}{}/{}", registry.mount, tarball.name.in_path());
                if asked_for.insert(url.clone()) {
                    found.items.push(NeededItem { url, label: format!("{} document", package.name) });
                }
            }
            let url = format!("{prefix}{}{}", registry.mount, tarball.path());
            if asked_for.insert(url.clone()) {
                found.items.push(NeededItem { url, label: format!("{}@{} tarball", package.name, package.version) });
            }
        }
        Ok(found)
    }
}

/// The registry a lockfile's tarball URL `resolved` is on: the one with
/// the longest of its URLs that the URL starts with; the npm registry for
/// its hosts, or for none (pnpm and yarn 2+ name none of its tarballs); or
/// the one a pkgproxy URL (`http://HOST/npm[/NAME]/...`) names, as
/// pkgproxy would serve it.
fn registry_of<'c>(config: &'c Config, resolved: Option<&str>) -> Option<&'c Registry> {
    let Some(url) = resolved else { return config.registry("") };
    let below_mirror = config
        .registries
        .iter()
        .filter_map(|registry| Some((registry.own_path(url)?.len(), registry)))
        .min_by_key(|(below, _)| *below);
    if let Some((_, registry)) = below_mirror {
        return Some(registry);
    }
    let (host, path) = host_and_path(url)?;
    if NPM_REGISTRY_HOSTS.contains(&host) {
        return config.registry("");
    }
    let below = path.strip_prefix("/npm").filter(|below| below.starts_with('/'))?;
    Some(config.registry_of_path(below).0)
}

/// Whether `url` is one of pkgproxy's own (`http://HOST/npm/...`), as
/// documents served to yarn 1 name tarballs.
fn at_pkgproxy(url: &str) -> bool {
    host_and_path(url).is_some_and(|(host, path)| !NPM_REGISTRY_HOSTS.contains(&host) && path.starts_with("/npm/"))
}

/// The host (without its port) and the path of `url`.
fn host_and_path(url: &str) -> Option<(&str, &str)> {
    let rest = url.split_once("://")?.1;
    let (authority, path) = rest.split_at(rest.find('/').unwrap_or(rest.len()));
    Some((authority.split(':').next()?, path))
}

/// The tarball of `package` as registries lay them out: the file its
/// lockfile's URL names when the URL is laid out so, else
/// `UNSCOPED-VERSION.tgz`.
fn tarball_of(package: &Locked) -> Option<Tarball> {
    let name = PackageName::parse(&package.name)?;
    let named = package.resolved.as_deref().and_then(tarball_of_url).filter(|tarball| tarball.name == name);
    named.or_else(|| Tarball::new(name.clone(), &format!("{}-{}.tgz", name.unscoped(), package.version)))
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use pkgproxy_cache::Cache;

    use super::*;
    use crate::npm::{Options, RegistryOptions};

    pub(super) fn locked(name: &str, version: &str, resolved: Option<&str>, integrity: Option<&str>) -> Locked {
        Locked {
            name: name.to_owned(),
            version: version.to_owned(),
            resolved: resolved.map(str::to_owned),
            integrity: integrity.map(str::to_owned),
        }
    }

    #[test]
    fn the_first_lockfile_found_is_read_npm_s_shrinkwrap_before_its_package_lock() {
        let dir = tempfile::tempdir().unwrap();
        assert_eq!(lockfile_in(dir.path()), None);
        for name in ["yarn.lock", "package-lock.json", "npm-shrinkwrap.json"] {
            std::fs::write(dir.path().join(name), "").unwrap();
            assert_eq!(lockfile_in(dir.path()), Some(dir.path().join(name)), "{name}");
        }
        assert_eq!(Format::of(Path::new("lock"), "{\"lockfileVersion\": 3}"), Some(Format::PackageLock));
        assert_eq!(Format::of(Path::new("lock"), "---\nlockfileVersion: '9.0'\n"), Some(Format::Pnpm));
        assert_eq!(Format::of(Path::new("lock"), "name = \"x\"\n"), None);
    }

    /// What `check npm FILE` reads of `text`, written to `name` in `dir`.
    fn read_file(dir: &Path, name: &str, text: &str) -> Result<Asked, NeedsError> {
        let path = dir.join(name);
        std::fs::write(&path, text).unwrap();
        let matches = Reader.command().try_get_matches_from(["npm", path.to_str().unwrap()]).unwrap();
        Reader.read(&matches)
    }

    #[test]
    fn a_malformed_lockfile_is_an_error_naming_the_file_and_what_it_was_read_as() {
        let dir = tempfile::tempdir().unwrap();
        let malformed = [
            ("package-lock.json", "{\"lockfileVersion\": 3, \"packages\": {", "not a package-lock.json"),
            ("package-lock.json", "{\"name\": \"app\", \"dependencies\": {}}", "no lockfileVersion"),
            ("pnpm-lock.yaml", "lockfileVersion: '9.0'\npackages:\n  - [\n", "not a pnpm-lock.yaml"),
            ("yarn.lock", "# yarn lockfile v1\n\nms@^2.1.0\n  version \"2.1.3\"\n", "line 3"),
            ("yarn.lock", "__metadata:\n  version: 8\n\"ms@npm:^2\":\n resolution: [\n", "not a yarn 2+ yarn.lock"),
            ("yarn.lock", "hello\n", "not a lockfile pkgproxy reads"),
        ];
        for (name, text, why) in malformed {
            let error = read_file(dir.path(), name, text).unwrap_err().to_string();
            let path = dir.path().join(name).display().to_string();
            assert!(error.starts_with(&format!("{path}: ")), "{error}");
            assert!(error.contains(why), "{name}: {error}");
        }
        let Asked::Resolve(asked) = read_file(dir.path(), "package-lock.json", formats::tests::PACKAGE_LOCK_3).unwrap()
        else {
            panic!("a lock is resolved by the daemon")
        };
        assert_eq!(needs::parse::<Lock>(asked).unwrap().packages.len(), 4);
    }

    fn side(registries: Vec<RegistryOptions>) -> (Npm, tempfile::TempDir) {
        let dir = tempfile::tempdir().unwrap();
        let cache = Cache::open(dir.path(), Arc::new(pkgproxy_cache::SystemClock)).unwrap();
        let config = Config::new(&Options { registry: registries, ..Options::default() }).unwrap();
        (Npm::new(config, cache), dir)
    }

    #[test]
    fn locked_packages_are_asked_as_tarballs_below_the_registry_their_url_is_on() {
        let corp = RegistryOptions {
            name: "corp".into(),
            mirrors: vec!["https://corp.example/repository/npm/".into()],
            policy: None,
        };
        let (npm, _dir) = side(vec![corp]);
        let packages = vec![
            locked("@scope/util", "1.2.0", Some("https://registry.npmjs.org/@scope/util/-/util-1.2.0.tgz"), None),
            locked("left-pad", "1.3.0", Some("https://registry.yarnpkg.com/left-pad/-/left-pad-1.3.0.tgz"), None),
            locked("left-pad", "1.3.0", Some("https://registry.npmjs.org/left-pad/-/left-pad-1.3.0.tgz"), None),
            locked("react", "18.2.0", None, Some("sha512-FFFF")),
            locked("@corp/ui", "3.0.0", Some("https://corp.example/repository/npm/@corp%2fui/-/ui-3.0.0.tgz"), None),
            locked("weird", "1.0.0", Some("https://corp.example/repository/npm/download/weird/1.0.0/abcdef"), None),
            locked("ms", "2.1.3", Some("http://cache.lan:3142/npm/ms/-/ms-2.1.3.tgz"), None),
            locked("odd", "1.0.0", Some("http://cache.lan:3142/npm/corp/odd/-/odd-1.0.0.tgz"), None),
            locked("old", "1.0.0", Some("https://registry.npmjs.org/old/-/old-1.0.0-final.tgz"), None),
            locked("gitdep", "0.1.0", Some("https://codeload.github.com/user/gitdep/tar.gz/0123456"), None),
        ];
        let asked = serde_json::to_value(Lock { packages, ..Lock::default() }).unwrap();
        let needs = npm.lock_needs(asked).unwrap();
        let urls: Vec<&str> = needs.items.iter().map(|item| item.url.as_str()).collect();
        assert_eq!(
            urls,
            [
                "/npm/@scope/util/-/util-1.2.0.tgz",
                "/npm/left-pad/-/left-pad-1.3.0.tgz",
                "/npm/react/-/react-18.2.0.tgz",
                "/npm/corp/@corp/ui/-/ui-3.0.0.tgz",
                "/npm/corp/weird/-/weird-1.0.0.tgz",
                "/npm/ms/-/ms-2.1.3.tgz",
                "/npm/corp/odd/-/odd-1.0.0.tgz",
                "/npm/old/-/old-1.0.0-final.tgz",
            ]
        );
        assert_eq!(needs.items[0].label, "@scope/util@1.2.0 tarball");
        assert_eq!(needs.unknown.len(), 1, "{:?}", needs.unknown);
        assert!(needs.unknown[0].starts_with("gitdep@0.1.0: its tarball (https://codeload.github.com/"));
    }

    #[test]
    fn pnpm_s_locks_warm_documents_and_yarn_1_s_naming_the_registry_are_said_to_pass_pkgproxy_by() {
        let (npm, _dir) = side(Vec::new());
        let pnpm = Lock { packages: vec![locked("@s/n", "1.0.0", None, None)], documents: true, ..Lock::default() };
        let needs = npm.lock_needs(serde_json::to_value(pnpm).unwrap()).unwrap();
        let urls: Vec<&str> = needs.items.iter().map(|item| item.url.as_str()).collect();
        assert_eq!(urls, ["/npm/@s%2fn", "/npm/@s/n/-/n-1.0.0.tgz"]);
        let yarn1 = Lock {
            packages: vec![
                locked("a", "1.0.0", Some("https://registry.yarnpkg.com/a/-/a-1.0.0.tgz"), None),
                locked("b", "1.0.0", Some("http://cache.lan:3142/npm/b/-/b-1.0.0.tgz"), None),
            ],
            urls_as_written: true,
            ..Lock::default()
        };
        let needs = npm.lock_needs(serde_json::to_value(yarn1).unwrap()).unwrap();
        assert_eq!(needs.items.len(), 1, "{:?}", needs.items);
        assert!(needs.unknown[0].contains("yarn 1 fetches https://registry.yarnpkg.com/"), "{:?}", needs.unknown);
    }

    #[test]
    fn a_mirror_of_the_npm_registry_is_the_npm_registry_and_the_longest_mirror_wins() {
        let nested =
            RegistryOptions { name: "inner".into(), mirrors: vec!["https://npm.example/inner".into()], policy: None };
        let (npm, _dir) = side(vec![nested]);
        let mut config = Config::clone(&npm.config());
        config.registries[0].mirrors = crate::instances::Instances::new(&["https://npm.example".into()], None).unwrap();
        let on = |url: &str| registry_of(&config, Some(url)).map(|registry| registry.mount.as_str());
        assert_eq!(on("https://npm.example/x/-/x-1.0.0.tgz"), Some(""));
        assert_eq!(on("https://npm.example/inner/x/-/x-1.0.0.tgz"), Some("/inner"));
        assert_eq!(on("https://registry.npmjs.org/x/-/x-1.0.0.tgz"), Some(""), "its canonical host still names it");
        assert_eq!(on("https://nexus.example/repository/npm/x/-/x-1.0.0.tgz"), None);
    }
}
