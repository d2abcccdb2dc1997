//! The four lockfile formats, read for the packages they lock to a
//! registry: npm's `package-lock.json` and `npm-shrinkwrap.json` (lockfile
//! versions 1 to 3), pnpm's `pnpm-lock.yaml` (5 to 9), and `yarn.lock` in
//! yarn 1's own format and in yarn 2+'s YAML.

use std::collections::BTreeMap;

use serde::Deserialize;

use super::Locked;

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
pub(super) fn package_lock(text: &str) -> Result<Vec<Locked>, String> {
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
pub(super) fn pnpm_lock(text: &str) -> Result<Vec<Locked>, String> {
    #[derive(Deserialize)]
    #[serde(rename_all = "camelCase")]
    struct File {
        lockfile_version: Option<LockfileVersion>,
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
    let documents: Vec<File> = serde_saphyr::from_multiple(text).map_err(|error| error.to_string())?;
    for file in documents {
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

/// A pnpm `lockfileVersion`: quoted since version 6 (`'9.0'`), a number
/// before (`5.4`).
#[derive(Debug, Deserialize)]
#[serde(untagged)]
enum LockfileVersion {
    Text(String),
    Number(f64),
}

/// The major version of a pnpm `lockfileVersion` (`'9.0'`, or `5.4` as a
/// number), if it is one whose keys [`pnpm_key`] reads.
fn pnpm_major(lockfile_version: &LockfileVersion) -> Result<u32, String> {
    let text = match lockfile_version {
        LockfileVersion::Text(text) => text.clone(),
        LockfileVersion::Number(number) => number.to_string(),
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
pub(super) fn yarn1_lock(text: &str) -> Result<Vec<Locked>, String> {
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
pub(super) fn yarn_berry_lock(text: &str) -> Result<Vec<Locked>, String> {
    #[derive(Deserialize)]
    struct Entry {
        resolution: Option<String>,
    }
    let entries: BTreeMap<String, Entry> = serde_saphyr::from_str(text).map_err(|error| error.to_string())?;
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

#[cfg(test)]
pub(super) mod tests {
    use std::path::Path;

    use super::super::lock_of;
    use super::super::tests::locked;
    use super::*;

    /// The packages of `text`, read as the lockfile `file`, as `name@version`.
    fn read(file: &str, text: &str) -> Vec<String> {
        let lock = lock_of(Path::new(file), text).unwrap();
        lock.packages.iter().map(|package| format!("{}@{}", package.name, package.version)).collect()
    }

    pub(in crate::npm::needs) const PACKAGE_LOCK_3: &str = r#"{
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
}
