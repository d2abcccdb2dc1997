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

use std::collections::{BTreeMap, HashSet};
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use super::name::{tarball_of_url, PackageName, Tarball};
use super::{Config, Npm, Registry};
use crate::needs::{self, Asked, NeededItem, Needs, NeedsError, NeedsReader};

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

/// A package from a registry, if it is one: an exact version, and a
/// tarball (where the lockfile names one) fetched over HTTP, not a git or
/// `file:` one.
fn from_registry(name: &str, version: &str, resolved: Option<String>, integrity: Option<String>) -> Option<Locked> {
    let fetched = resolved.as_deref().is_none_or(|url| url.starts_with("https://") || url.starts_with("http://"));
    let from_registry = fetched && !name.is_empty() && is_exact_version(version);
    from_registry.then(|| Locked { name: name.to_owned(), version: version.to_owned(), resolved, integrity })
}

/// Whether `version` is one version, not a range, a tag or a URL.
fn is_exact_version(version: &str) -> bool {
    version.bytes().next().is_some_and(|b| b.is_ascii_digit())
        && version.bytes().all(|b| b.is_ascii_alphanumeric() || b"-.+".contains(&b))
}

/// `NAME@REST` (the name maybe scoped) as its name and the rest.
fn split_at_name(spec: &str) -> Option<(&str, &str)> {
    let at = spec.get(1..)?.find('@')? + 1;
    Some((&spec[..at], &spec[at + 1..]))
}

/// npm's lockfile: its `packages` (lockfile versions 2 and 3), else its
/// `dependencies` tree (version 1).
fn package_lock(text: &str) -> Result<Vec<Locked>, String> {
    #[derive(Deserialize)]
    #[serde(rename_all = "camelCase")]
    struct File {
        lockfile_version: Option<u32>,
        packages: Option<BTreeMap<String, Entry>>,
        dependencies: Option<BTreeMap<String, Dependency>>,
    }
    #[derive(Deserialize)]
    #[serde(rename_all = "camelCase")]
    struct Entry {
        name: Option<String>,
        version: Option<String>,
        resolved: Option<String>,
        integrity: Option<String>,
        #[serde(default)]
        link: bool,
        #[serde(default)]
        in_bundle: bool,
    }
    let file: File = serde_json::from_str(text).map_err(|error| error.to_string())?;
    if file.lockfile_version.is_none() {
        return Err("it has no lockfileVersion".into());
    }
    let Some(packages) = file.packages else {
        let mut found = Vec::new();
        dependency_tree(file.dependencies.unwrap_or_default(), &mut found);
        return Ok(found);
    };
    let locked = packages.into_iter().filter_map(|(key, entry)| {
        // The root (""), and a workspace's own folder, are not installed.
        let (_, folder) = key.rsplit_once("node_modules/")?;
        if entry.link || entry.in_bundle {
            return None;
        }
        let name = entry.name.as_deref().unwrap_or(folder);
        from_registry(name, entry.version.as_deref()?, entry.resolved, entry.integrity)
    });
    Ok(locked.collect())
}

/// A package of a version 1 package-lock's tree.
#[derive(Deserialize)]
struct Dependency {
    /// Its version; `npm:NAME@VERSION` for an alias, a URL or path for a
    /// git or `file:` dependency.
    version: String,
    resolved: Option<String>,
    integrity: Option<String>,
    #[serde(default)]
    bundled: bool,
    /// The packages installed below it.
    dependencies: Option<BTreeMap<String, Dependency>>,
}

/// The packages from registries of a version 1 package-lock's tree.
fn dependency_tree(tree: BTreeMap<String, Dependency>, found: &mut Vec<Locked>) {
    for (name, dependency) in tree {
        if let Some(below) = dependency.dependencies {
            dependency_tree(below, found);
        }
        if dependency.bundled {
            continue;
        }
        let (name, version) = match dependency.version.strip_prefix("npm:") {
            Some(aliased) => split_at_name(aliased).unwrap_or_default(),
            None => (name.as_str(), dependency.version.as_str()),
        };
        found.extend(from_registry(name, version, dependency.resolved, dependency.integrity));
    }
}

/// pnpm's lockfile: its `packages` keyed by name and version, in each of
/// its documents (pnpm 10 may put its own configuration's lock first).
fn pnpm_lock(text: &str) -> Result<Vec<Locked>, String> {
    #[derive(Deserialize)]
    #[serde(rename_all = "camelCase")]
    struct File {
        lockfile_version: Option<yaml_serde::Value>,
        packages: Option<BTreeMap<String, Package>>,
    }
    #[derive(Deserialize)]
    struct Package {
        resolution: Option<Resolution>,
    }
    /// Where a package is from: a registry's has an integrity, and a
    /// tarball where pnpm cannot tell it from the registry's URL.
    #[derive(Deserialize)]
    struct Resolution {
        integrity: Option<String>,
        tarball: Option<String>,
        /// `directory` or `git`; none for a registry's.
        #[serde(rename = "type")]
        kind: Option<String>,
    }
    let mut found = Vec::new();
    let mut versioned = false;
    for document in yaml_serde::Deserializer::from_str(text) {
        let file = File::deserialize(document).map_err(|error| error.to_string())?;
        let Some(lockfile_version) = file.lockfile_version else { continue };
        let major = pnpm_major(&lockfile_version)?;
        versioned = true;
        for (key, package) in file.packages.unwrap_or_default() {
            let Some((name, version)) = pnpm_key(&key, major) else { continue };
            let Some(resolution) = package.resolution.filter(|resolution| resolution.kind.is_none()) else { continue };
            found.extend(from_registry(name, version, resolution.tarball, resolution.integrity));
        }
    }
    match versioned {
        true => Ok(found),
        false => Err("it has no lockfileVersion".into()),
    }
}

/// The major version of a pnpm `lockfileVersion` (`'9.0'`, or `5.4` as a
/// number), if it is one whose keys [`pnpm_key`] reads.
fn pnpm_major(lockfile_version: &yaml_serde::Value) -> Result<u32, String> {
    let text = match lockfile_version {
        yaml_serde::Value::String(text) => text.clone(),
        yaml_serde::Value::Number(number) => number.to_string(),
        other => return Err(format!("its lockfileVersion is not a version: {other:?}")),
    };
    let major = text.split('.').next().and_then(|major| major.parse::<u32>().ok());
    major
        .filter(|major| (5..=9).contains(major))
        .ok_or_else(|| format!("lockfileVersion {text}: pkgproxy reads lockfile versions 5 to 9"))
}

/// The name and version a pnpm `packages` key names, if it names a
/// registry's package: `/name@1.0.0(peer@2.0.0)` (versions 6 to 8),
/// `name@1.0.0` (9), `/name/1.0.0_peer@2.0.0` (5); peers after the version.
/// Other packages' keys name a URL or path (`file:...`, `name@https://...`,
/// `github.com/...`).
fn pnpm_key(key: &str, major: u32) -> Option<(&str, &str)> {
    let key = match major {
        9.. => key,
        _ => key.strip_prefix('/')?,
    };
    let (name, version) = match major {
        6.. => split_at_name(key.split('(').next()?)?,
        _ => {
            let at = key.match_indices('/').nth(usize::from(key.starts_with('@')))?.0;
            (&key[..at], key[at + 1..].split('_').next()?)
        }
    };
    is_exact_version(version).then_some((name, version))
}

/// yarn 1's lockfile: entries headed by the specs they satisfy, each with
/// its fields indented below.
fn yarn1_lock(text: &str) -> Result<Vec<Locked>, String> {
    let mut found = Vec::new();
    let mut entry: Option<Yarn1Entry> = None;
    for (at, line) in text.lines().enumerate() {
        let line = line.trim_end();
        if line.trim_start().is_empty() || line.trim_start().starts_with('#') {
            continue;
        }
        if !line.starts_with(' ') {
            found.extend(entry.take().and_then(Yarn1Entry::locked));
            let specs = line.strip_suffix(':').ok_or_else(|| format!("line {}: not an entry's heading", at + 1))?;
            let spec = specs.split(',').next().unwrap_or_default().trim();
            entry = Some(Yarn1Entry { spec: unquote(spec).to_owned(), ..Yarn1Entry::default() });
            continue;
        }
        let Some(current) = entry.as_mut() else { return Err(format!("line {}: a field before any entry", at + 1)) };
        if line.starts_with("    ") {
            continue; // a field's own fields: its dependencies
        }
        let (key, value) = line.trim().split_once(' ').unwrap_or((line.trim(), ""));
        let value = Some(unquote(value.trim()).to_owned());
        match unquote(key) {
            "version" => current.version = value,
            "resolved" => current.resolved = value,
            "integrity" => current.integrity = value,
            _ => {}
        }
    }
    found.extend(entry.and_then(Yarn1Entry::locked));
    Ok(found)
}

/// `text`, without the double quotes around it.
fn unquote(text: &str) -> &str {
    text.strip_prefix('"').and_then(|text| text.strip_suffix('"')).unwrap_or(text)
}

/// An entry of yarn 1's lockfile, as read.
#[derive(Debug, Default)]
struct Yarn1Entry {
    /// The first spec it satisfies: `name@range`, `alias@npm:name@range`.
    spec: String,
    version: Option<String>,
    /// Its tarball's URL, with the tarball's SHA-1 after a `#`.
    resolved: Option<String>,
    integrity: Option<String>,
}

impl Yarn1Entry {
    /// The package, if the entry is a registry's: its spec is a range or
    /// a tag (others name a protocol or a repository: `file:`,
    /// `github:`, `user/repo`), and yarn wrote its tarball's URL.
    fn locked(self) -> Option<Locked> {
        let (name, range) = split_at_name(&self.spec)?;
        let (name, range) = match range.strip_prefix("npm:") {
            Some(aliased) => split_at_name(aliased)?,
            None => (name, range),
        };
        if range.contains([':', '/']) {
            return None;
        }
        let resolved = self.resolved?.split('#').next()?.to_owned();
        from_registry(name, &self.version?, Some(resolved), self.integrity)
    }
}

/// yarn 2+'s lockfile: each entry's `resolution`, a package and where it
/// is from.
fn yarn_berry_lock(text: &str) -> Result<Vec<Locked>, String> {
    #[derive(Deserialize)]
    struct Entry {
        resolution: Option<String>,
    }
    let entries: BTreeMap<String, Entry> = yaml_serde::from_str(text).map_err(|error| error.to_string())?;
    let locked = entries.into_values().filter_map(|entry| {
        let (name, version, resolved) = berry_resolution(&entry.resolution?)?;
        from_registry(&name, &version, resolved, None)
    });
    Ok(locked.collect())
}

/// The package, version and tarball URL (where yarn wrote one) a yarn 2+
/// `resolution` locks from a registry: `@s/n@npm:1.2.0`, with
/// `::__archiveUrl=...` when the tarball is not where the registry's are;
/// or the one a patch applies to (`x@patch:x@npm%3A1.0.0#...`). Others are
/// workspaces, links, portals, files and git repositories.
fn berry_resolution(resolution: &str) -> Option<(String, String, Option<String>)> {
    let (name, reference) = split_at_name(resolution)?;
    let decode = |text: &str| percent_encoding::percent_decode_str(text).decode_utf8().ok().map(String::from);
    if let Some(patched) = reference.strip_prefix("patch:") {
        return berry_resolution(&decode(patched.split('#').next()?)?);
    }
    let npm = reference.strip_prefix("npm:")?;
    let (version, parameters) = npm.split_once("::").unwrap_or((npm, ""));
    let archive = parameters.split('&').find_map(|parameter| parameter.strip_prefix("__archiveUrl="));
    Some((name.to_owned(), version.to_owned(), archive.and_then(decode)))
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

    fn locked(name: &str, version: &str, resolved: Option<&str>, integrity: Option<&str>) -> Locked {
        Locked {
            name: name.to_owned(),
            version: version.to_owned(),
            resolved: resolved.map(str::to_owned),
            integrity: integrity.map(str::to_owned),
        }
    }

    /// The packages of `text`, read as the lockfile `file`, as `name@version`.
    fn read(file: &str, text: &str) -> Vec<String> {
        let lock = lock_of(Path::new(file), text).unwrap();
        lock.packages.iter().map(|package| format!("{}@{}", package.name, package.version)).collect()
    }

    const PACKAGE_LOCK_3: &str = r#"{
  "name": "app",
  "version": "1.0.0",
  "lockfileVersion": 3,
  "requires": true,
  "packages": {
    "": {
      "name": "app",
      "version": "1.0.0",
      "workspaces": ["packages/local"],
      "dependencies": { "@scope/util": "^1.2.0", "pad": "npm:left-pad@^1.3.0", "gitdep": "github:user/gitdep" }
    },
    "node_modules/@scope/util": {
      "version": "1.2.0",
      "resolved": "https://registry.npmjs.org/@scope/util/-/util-1.2.0.tgz",
      "integrity": "sha512-AAAA",
      "dependencies": { "ms": "^2.1.0" }
    },
    "node_modules/@scope/util/node_modules/ms": {
      "version": "2.1.3",
      "resolved": "https://registry.npmjs.org/ms/-/ms-2.1.3.tgz",
      "integrity": "sha512-BBBB"
    },
    "node_modules/bundler": {
      "version": "1.0.0",
      "resolved": "https://registry.npmjs.org/bundler/-/bundler-1.0.0.tgz",
      "integrity": "sha512-CCCC",
      "bundleDependencies": ["inner"]
    },
    "node_modules/bundler/node_modules/inner": { "version": "0.5.0", "inBundle": true },
    "node_modules/gitdep": {
      "version": "0.1.0",
      "resolved": "git+ssh://git@github.com/user/gitdep.git#0123456789abcdef0123456789abcdef01234567"
    },
    "node_modules/local": { "resolved": "packages/local", "link": true },
    "node_modules/ms": {
      "version": "2.1.3",
      "resolved": "https://registry.npmjs.org/ms/-/ms-2.1.3.tgz",
      "integrity": "sha512-BBBB"
    },
    "node_modules/pad": {
      "name": "left-pad",
      "version": "1.3.0",
      "resolved": "https://registry.npmjs.org/left-pad/-/left-pad-1.3.0.tgz",
      "integrity": "sha512-DDDD"
    },
    "packages/local": { "name": "local", "version": "0.0.1" }
  }
}"#;

    #[test]
    fn a_package_lock_gives_its_registry_packages_once_by_their_real_names() {
        let lock = lock_of(Path::new("package-lock.json"), PACKAGE_LOCK_3).unwrap();
        let npm = |path: &str| format!("https://registry.npmjs.org/{path}");
        assert_eq!(
            lock.packages,
            [
                locked("@scope/util", "1.2.0", Some(&npm("@scope/util/-/util-1.2.0.tgz")), Some("sha512-AAAA")),
                locked("bundler", "1.0.0", Some(&npm("bundler/-/bundler-1.0.0.tgz")), Some("sha512-CCCC")),
                locked("left-pad", "1.3.0", Some(&npm("left-pad/-/left-pad-1.3.0.tgz")), Some("sha512-DDDD")),
                locked("ms", "2.1.3", Some(&npm("ms/-/ms-2.1.3.tgz")), Some("sha512-BBBB")),
            ]
        );
    }

    #[test]
    fn a_version_1_package_lock_gives_its_dependency_tree() {
        let text = r#"{
  "name": "app",
  "lockfileVersion": 1,
  "requires": true,
  "dependencies": {
    "pad": { "version": "npm:left-pad@1.3.0", "resolved": "https://registry.npmjs.org/left-pad/-/left-pad-1.3.0.tgz" },
    "gitdep": { "version": "github:user/gitdep#0123456", "from": "github:user/gitdep" },
    "local": { "version": "file:packages/local" },
    "outer": {
      "version": "2.0.0",
      "resolved": "https://registry.npmjs.org/outer/-/outer-2.0.0.tgz",
      "integrity": "sha512-EEEE",
      "dependencies": {
        "ms": { "version": "2.0.0", "resolved": "https://registry.npmjs.org/ms/-/ms-2.0.0.tgz" },
        "inner": { "version": "0.5.0", "bundled": true }
      }
    }
  }
}"#;
        assert_eq!(read("npm-shrinkwrap.json", text), ["left-pad@1.3.0", "ms@2.0.0", "outer@2.0.0"]);
    }

    #[test]
    fn pnpm_locks_6_and_9_give_their_registry_packages_without_peer_suffixes() {
        let version_6 = "lockfileVersion: '6.0'

settings:
  autoInstallPeers: true
  excludeLinksFromLockfile: false

dependencies:
  react-dom:
    specifier: ^18.2.0
    version: 18.2.0(react@18.2.0)

packages:

  /@scope/util@1.2.0:
    resolution: {integrity: sha512-AAAA}
    dev: false

  /react-dom@18.2.0(react@18.2.0):
    resolution: {integrity: sha512-EEEE}
    peerDependencies:
      react: ^18.2.0
    dependencies:
      react: 18.2.0
    dev: false

  /react@18.2.0:
    resolution: {integrity: sha512-FFFF}
    engines: {node: '>=0.10.0'}
    dev: false

  /corp-lib@2.0.0:
    resolution: {integrity: sha512-GGGG, tarball: https://corp.example/repository/npm/corp-lib/-/corp-lib-2.0.0.tgz}
    dev: false

  github.com/user/gitdep/0123456:
    resolution: {tarball: https://codeload.github.com/user/gitdep/tar.gz/0123456}
    name: gitdep
    version: 0.1.0
    dev: false

  file:packages/local:
    resolution: {directory: packages/local, type: directory}
    name: local
    version: 0.0.1
    dev: false
";
        let lock = lock_of(Path::new("pnpm-lock.yaml"), version_6).unwrap();
        let corp = "https://corp.example/repository/npm/corp-lib/-/corp-lib-2.0.0.tgz";
        assert_eq!(
            lock.packages,
            [
                locked("@scope/util", "1.2.0", None, Some("sha512-AAAA")),
                locked("corp-lib", "2.0.0", Some(corp), Some("sha512-GGGG")),
                locked("react", "18.2.0", None, Some("sha512-FFFF")),
                locked("react-dom", "18.2.0", None, Some("sha512-EEEE")),
            ]
        );
        let version_9 = "lockfileVersion: '9.0'

importers:

  .:
    dependencies:
      '@scope/util':
        specifier: ^1.2.0
        version: 1.2.0
      react-dom:
        specifier: ^18.2.0
        version: 18.2.0(react@18.2.0)

packages:

  '@scope/util@1.2.0':
    resolution: {integrity: sha512-AAAA}

  gitdep@git+https://github.com/user/gitdep.git#0123456:
    resolution: {commit: 0123456, repo: https://github.com/user/gitdep.git, type: git}
    version: 0.1.0

  local@file:packages/local:
    resolution: {directory: packages/local, type: directory}

  react-dom@18.2.0(patch_hash=abcdef):
    resolution: {integrity: sha512-EEEE}
    peerDependencies:
      react: ^18.2.0

  react@18.2.0:
    resolution: {integrity: sha512-FFFF}

snapshots:

  '@scope/util@1.2.0': {}

  react-dom@18.2.0(react@18.2.0):
    dependencies:
      react: 18.2.0
";
        assert_eq!(read("pnpm-lock.yaml", version_9), ["@scope/util@1.2.0", "react@18.2.0", "react-dom@18.2.0"]);
    }

    #[test]
    fn pnpm_keys_of_each_lockfile_version_name_their_package() {
        assert_eq!(pnpm_key("/@s/n@1.0.0(react@18.0.0)(x@1.0.0)", 6), Some(("@s/n", "1.0.0")));
        assert_eq!(pnpm_key("@s/n@1.0.0-rc.1", 9), Some(("@s/n", "1.0.0-rc.1")));
        assert_eq!(pnpm_key("/@s/n/1.0.0_react@18.0.0", 5), Some(("@s/n", "1.0.0")));
        assert_eq!(pnpm_key("/lodash_merge/4.6.2", 5), Some(("lodash_merge", "4.6.2")));
        assert_eq!(pnpm_key("x@https://example.com/x.tgz", 9), None);
        assert_eq!(pnpm_key("github.com/user/repo/0123456", 6), None);
        let two_documents = "---\nlockfileVersion: '9.0'\npackages:\n  pnpm-plugin@1.0.0:\n    resolution: \
                             {integrity: sha512-A}\n---\nlockfileVersion: '9.0'\npackages:\n  ms@2.1.3:\n    \
                             resolution: {integrity: sha512-B}\n";
        assert_eq!(read("pnpm-lock.yaml", two_documents), ["ms@2.1.3", "pnpm-plugin@1.0.0"]);
        let too_old = lock_of(Path::new("pnpm-lock.yaml"), "lockfileVersion: 4\n").unwrap_err();
        assert!(too_old.contains("lockfileVersion 4: pkgproxy reads lockfile versions 5 to 9"), "{too_old}");
        assert!(lock_of(Path::new("pnpm-lock.yaml"), "lockfileVersion: 5.4\n").is_ok());
    }

    #[test]
    fn a_yarn_1_lock_gives_each_entry_once_however_many_specs_it_satisfies() {
        let text = r#"# THIS IS AN AUTOGENERATED FILE. DO NOT EDIT THIS FILE DIRECTLY.
# yarn lockfile v1


"@scope/util@^1.0.0", "@scope/util@^1.2.0":
  version "1.2.0"
  resolved "https://registry.yarnpkg.com/@scope/util/-/util-1.2.0.tgz#0123456789abcdef0123456789abcdef01234567"
  integrity sha512-AAAA
  dependencies:
    ms "^2.1.0"

"gitdep@github:user/gitdep":
  version "0.1.0"
  resolved "https://codeload.github.com/user/gitdep/tar.gz/0123456"

"local@file:packages/local":
  version "0.0.1"

ms@^2.1.0:
  version "2.1.3"
  resolved "https://registry.yarnpkg.com/ms/-/ms-2.1.3.tgz#89abcdef0123456789abcdef0123456789abcdef"
  integrity sha512-BBBB

"pad@npm:left-pad@^1.3.0":
  version "1.3.0"
  resolved "https://registry.yarnpkg.com/left-pad/-/left-pad-1.3.0.tgz#fedcba9876543210fedcba9876543210fedcba98"
"#;
        let lock = lock_of(Path::new("yarn.lock"), text).unwrap();
        let yarn = |path: &str| format!("https://registry.yarnpkg.com/{path}");
        assert_eq!(
            lock.packages,
            [
                locked("@scope/util", "1.2.0", Some(&yarn("@scope/util/-/util-1.2.0.tgz")), Some("sha512-AAAA")),
                locked("left-pad", "1.3.0", Some(&yarn("left-pad/-/left-pad-1.3.0.tgz")), None),
                locked("ms", "2.1.3", Some(&yarn("ms/-/ms-2.1.3.tgz")), Some("sha512-BBBB")),
            ]
        );
    }

    #[test]
    fn a_yarn_berry_lock_gives_npm_resolutions_and_what_patches_apply_to() {
        let text = r#"# This file is generated by running "yarn install" inside your project.
# Manual changes might be lost - proceed with caution!

__metadata:
  version: 8
  cacheKey: 10c0

"@scope/util@npm:^1.0.0, @scope/util@npm:^1.2.0":
  version: 1.2.0
  resolution: "@scope/util@npm:1.2.0"
  dependencies:
    ms: "npm:^2.1.0"
  checksum: 10c0/aaaa
  languageName: node
  linkType: hard

"app@workspace:.":
  version: 0.0.0-use.local
  resolution: "app@workspace:."
  dependencies:
    "@scope/util": "npm:^1.2.0"
  languageName: unknown
  linkType: soft

"gitdep@https://github.com/user/gitdep.git#commit=0123456":
  version: 0.1.0
  resolution: "gitdep@https://github.com/user/gitdep.git#commit=0123456"
  languageName: node
  linkType: hard

"local@link:../local::locator=app%40workspace%3A.":
  version: 0.0.0-use.local
  resolution: "local@link:../local::locator=app%40workspace%3A."
  languageName: node
  linkType: soft

"odd@npm:^3.0.0":
  version: 3.0.0
  resolution: "odd@npm:3.0.0::__archiveUrl=https%3A%2F%2Fcorp.example%2Fdownload%2Fodd%2F3.0.0"
  languageName: node
  linkType: hard

"pad@npm:left-pad@^1.3.0":
  version: 1.3.0
  resolution: "left-pad@npm:1.3.0"
  checksum: 10c0/cccc
  languageName: node
  linkType: hard

"typescript@patch:typescript@npm%3A^5.4.0#optional!builtin<compat/typescript>":
  version: 5.4.5
  resolution: "typescript@patch:typescript@npm%3A5.4.5#optional!builtin<compat/typescript>::version=5.4.5&hash=5adc0c"
  languageName: node
  linkType: hard
"#;
        let lock = lock_of(Path::new("yarn.lock"), text).unwrap();
        assert_eq!(
            lock.packages,
            [
                locked("@scope/util", "1.2.0", None, None),
                locked("left-pad", "1.3.0", None, None),
                locked("odd", "3.0.0", Some("https://corp.example/download/odd/3.0.0"), None),
                locked("typescript", "5.4.5", None, None),
            ]
        );
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
        let Asked::Resolve(asked) = read_file(dir.path(), "package-lock.json", PACKAGE_LOCK_3).unwrap() else {
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
        let corp =
            RegistryOptions { name: "corp".into(), mirrors: vec!["https://corp.example/repository/npm/".into()] };
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
        let nested = RegistryOptions { name: "inner".into(), mirrors: vec!["https://npm.example/inner".into()] };
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
