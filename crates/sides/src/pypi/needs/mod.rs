//! What a Python install needs, for `pkgproxyctl check pypi FILE`: for each
//! package a lock pins, its project's page in the form the installers ask
//! for (JSON; HTML with `--html`, for older pips and poetry), and of the
//! files the lock names (by hash or file name; every file of the version
//! when it names none) the one an installer takes on the target platform
//! (this machine's, or the one `--platform` and the like name: [`tags`],
//! [`machine`]), with the core metadata its page promises. The files are
//! known only from the held page: a warm fetches the pages first, then,
//! asked again, the files.
//!
//! Read: `requirements.txt` (pinned with `==`, with or without
//! `--hash=sha256:...`), `uv.lock`, `pylock.toml` (PEP 751) and
//! `poetry.lock`. The daemon follows what they pin in what it holds
//! ([`follow`]).

mod follow;
mod machine;
mod tags;

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::needs::{self, Asked, NeedsError, NeedsReader};

/// What `check pypi` takes.
#[derive(Debug, clap::Args)]
struct Arguments {
    /// The lock: a requirements.txt, uv.lock, pylock.toml or poetry.lock.
    #[arg(default_value = "requirements.txt")]
    lock: PathBuf,
    /// Count the wheels of this platform, as pip download takes it
    /// (manylinux_2_28_x86_64, musllinux_1_2_aarch64, win_amd64,
    /// macosx_11_0_arm64), and of the older ones a machine of it takes
    /// (manylinux2014 on glibc 2.28); repeat for several. Default: this
    /// machine's.
    #[arg(long = "platform", value_name = "PLATFORM")]
    platforms: Vec<String>,
    /// Count the wheels of this Python version (3.12 or 312). Default:
    /// that of the machine's python3.
    #[arg(long, value_name = "VERSION")]
    python_version: Option<String>,
    /// Count the wheels of this implementation: cp (CPython), pp (PyPy),
    /// py (any). Default: that of the machine's python3.
    #[arg(long, value_name = "IMPL")]
    implementation: Option<String>,
    /// Count the wheels of this ABI (cp312, abi3, none); repeat for several.
    /// Default: the implementation's own.
    #[arg(long = "abi", value_name = "ABI")]
    abis: Vec<String>,
    /// The Python whose version and platform are the defaults (a virtual
    /// environment's, say). Default: python3, and CPython 3.12 on this
    /// machine's platform where there is none.
    #[arg(long, value_name = "PATH")]
    python: Option<PathBuf>,
    /// Count the HTML form of each project's page (older pips, poetry),
    /// not the JSON form pip and uv ask for.
    #[arg(long)]
    html: bool,
}

/// A file a lock names: by its name, its SHA-256, or both.
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
struct LockedFile {
    filename: Option<String>,
    sha256: Option<String>,
}

/// A package a lock pins.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
struct Locked {
    name: String,
    version: String,
    /// The simple index it is from, as the lock names it (`None`: PyPI).
    index: Option<String>,
    /// Its files the lock names; none: every file of the version.
    files: Vec<LockedFile>,
}

/// A lock's packages: what the daemon follows.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
struct Lock {
    packages: Vec<Locked>,
    /// What the lock has that pkgproxy cannot follow, for people.
    unknown: Vec<String>,
    /// Whose requests are counted; `None` (a `pkgproxyctl` from before
    /// platforms were counted): both page forms and every file.
    #[serde(default)]
    installer: Option<Installer>,
}

/// The installer whose requests are counted.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
struct Installer {
    /// It asks for pages in HTML, not JSON.
    html: bool,
    /// The interpreter and platform it installs for.
    target: tags::Target,
    /// What people call the target (`cp312 on manylinux_2_36_x86_64`).
    label: String,
}

/// The reader of Python locks.
pub struct Reader;

impl NeedsReader for Reader {
    fn command(&self) -> clap::Command {
        let about = "pip, uv, poetry, pdm: what installing a requirements.txt (pinned), uv.lock, pylock.toml or \
                     poetry.lock asks for with empty client caches, on this machine or the platform named: each \
                     project's page, and of each pinned version the file pip takes there (the wheel of the best \
                     tag, else the sdist) and its core metadata";
        <Arguments as clap::Args>::augment_args(clap::Command::new("pypi")).about(about)
    }

    fn read(&self, matches: &clap::ArgMatches) -> Result<Asked, NeedsError> {
        let arguments: Arguments = needs::arguments(matches)?;
        let chosen = machine::Chosen {
            platforms: &arguments.platforms,
            python_version: arguments.python_version.as_deref(),
            implementation: arguments.implementation.as_deref(),
            abis: &arguments.abis,
            python: arguments.python.as_deref(),
        };
        let (target, label) = machine::target(&chosen)?;
        let installer = Installer { html: arguments.html, target, label };
        needs::read_lock(&arguments.lock, |text| {
            let lock = lock_of(&arguments.lock, text)?;
            Ok(Lock { installer: Some(installer), ..lock })
        })
    }
}

/// The packages `text`, the lock at `path`, pins; its kind told by its
/// name, else by its content.
fn lock_of(path: &Path, text: &str) -> Result<Lock, String> {
    let name = path.file_name().and_then(|name| name.to_str()).unwrap_or_default();
    if name == "uv.lock" {
        return uv_lock(text);
    }
    if name == "poetry.lock" {
        return poetry_lock(text);
    }
    if name.starts_with("pylock.") && name.ends_with(".toml") {
        return pylock(text);
    }
    if name.ends_with(".toml") || name.ends_with(".lock") {
        return Err("not a lock pkgproxy reads (uv.lock, poetry.lock, pylock.toml, or a requirements file)".into());
    }
    Ok(requirements(text))
}

/// A requirements file: each `NAME==VERSION` line (with extras, markers
/// and `--hash` options), the index `--index-url` names.
fn requirements(text: &str) -> Lock {
    let mut lock = Lock::default();
    let mut index = None;
    for line in logical_lines(text) {
        let mut words = line.split_whitespace().peekable();
        let Some(first) = words.peek().copied() else { continue };
        if first.starts_with('-') {
            if let Some(url) = option_value(&line, &["--index-url", "-i"]) {
                index = Some(url);
            } else if !first.starts_with("--hash") {
                lock.unknown.push(format!("{first}: options other than --index-url are not followed"));
            }
            continue;
        }
        let requirement = line.split(';').next().unwrap_or_default();
        let requirement = requirement.split(" --").next().unwrap_or_default().trim();
        let Some((name, version)) = requirement.split_once("==") else {
            lock.unknown.push(format!("{requirement}: not pinned with =="));
            continue;
        };
        let name = name.split('[').next().unwrap_or_default().trim();
        let version = version.trim();
        if name.is_empty() || version.is_empty() || version.contains([',', '*', ' ']) {
            lock.unknown.push(format!("{requirement}: not one pinned version"));
            continue;
        }
        let files = hashes(&line).map(|sha256| LockedFile { filename: None, sha256: Some(sha256) }).collect();
        lock.packages.push(Locked { name: name.to_owned(), version: version.to_owned(), index: index.clone(), files });
    }
    lock
}

/// The lines of a requirements file, continuations joined and comments
/// gone.
fn logical_lines(text: &str) -> Vec<String> {
    let mut lines = Vec::new();
    let mut current = String::new();
    for line in text.lines() {
        let line = match line.find(" #").or_else(|| line.starts_with('#').then_some(0)) {
            Some(at) => &line[..at],
            None => line,
        };
        match line.trim_end().strip_suffix('\\') {
            Some(continued) => current.push_str(continued),
            None => {
                current.push_str(line);
                lines.push(std::mem::take(&mut current));
            }
        }
    }
    lines.push(current);
    lines.into_iter().map(|line| line.trim().to_owned()).filter(|line| !line.is_empty()).collect()
}

/// The value of the first of `names` on `line` (`--name=value` or
/// `--name value`).
fn option_value(line: &str, names: &[&str]) -> Option<String> {
    let mut words = line.split_whitespace();
    while let Some(word) = words.next() {
        for name in names {
            if let Some(value) = word.strip_prefix(name).and_then(|rest| rest.strip_prefix('=')) {
                return Some(value.to_owned());
            }
            if word == *name {
                return words.next().map(str::to_owned);
            }
        }
    }
    None
}

/// The SHA-256 hashes a requirement's `--hash` options give.
fn hashes(line: &str) -> impl Iterator<Item = String> + '_ {
    let words: Vec<&str> = line.split_whitespace().collect();
    let mut found = Vec::new();
    for (at, word) in words.iter().enumerate() {
        let value = match word.strip_prefix("--hash=") {
            Some(value) => Some(value),
            None if *word == "--hash" => words.get(at + 1).copied(),
            None => None,
        };
        if let Some(sha256) = value.and_then(|value| value.strip_prefix("sha256:")) {
            found.push(sha256.to_ascii_lowercase());
        }
    }
    found.into_iter()
}

/// The file name at the end of `url`.
fn filename_of(url: &str) -> Option<String> {
    let path = url.split(['#', '?']).next()?;
    let name = path.rsplit('/').next()?;
    (!name.is_empty()).then(|| percent_encoding::percent_decode_str(name).decode_utf8_lossy().into_owned())
}

/// `sha256:HEX` as `HEX`.
fn sha256_of(hash: &str) -> Option<String> {
    hash.strip_prefix("sha256:").map(str::to_ascii_lowercase)
}

/// uv's lock: each package from a registry, its sdist and wheels.
fn uv_lock(text: &str) -> Result<Lock, String> {
    #[derive(Deserialize)]
    struct File {
        #[serde(default)]
        package: Vec<Package>,
    }
    #[derive(Deserialize)]
    struct Package {
        name: String,
        version: Option<String>,
        source: Option<Source>,
        sdist: Option<Artifact>,
        #[serde(default)]
        wheels: Vec<Artifact>,
    }
    #[derive(Deserialize)]
    struct Source {
        registry: Option<String>,
    }
    #[derive(Deserialize)]
    struct Artifact {
        url: Option<String>,
        hash: Option<String>,
    }
    let file: File = toml::from_str(text).map_err(|error| format!("not a uv.lock: {}", error.message()))?;
    let mut lock = Lock::default();
    for package in file.package {
        let Some(registry) = package.source.and_then(|source| source.registry) else { continue };
        let Some(version) = package.version else { continue };
        let files = package
            .sdist
            .into_iter()
            .chain(package.wheels)
            .map(|artifact| LockedFile {
                filename: artifact.url.as_deref().and_then(filename_of),
                sha256: artifact.hash.as_deref().and_then(sha256_of),
            })
            .collect();
        lock.packages.push(Locked { name: package.name, version, index: Some(registry), files });
    }
    Ok(lock)
}

/// A PEP 751 lock: each package from an index, its sdist and wheels.
fn pylock(text: &str) -> Result<Lock, String> {
    #[derive(Deserialize)]
    struct File {
        #[serde(default)]
        packages: Vec<Package>,
    }
    #[derive(Deserialize)]
    struct Package {
        name: String,
        version: Option<String>,
        index: Option<String>,
        sdist: Option<Artifact>,
        #[serde(default)]
        wheels: Vec<Artifact>,
    }
    #[derive(Deserialize)]
    struct Artifact {
        name: Option<String>,
        url: Option<String>,
        #[serde(default)]
        hashes: std::collections::BTreeMap<String, String>,
    }
    let file: File = toml::from_str(text).map_err(|error| format!("not a pylock.toml: {}", error.message()))?;
    let mut lock = Lock::default();
    for package in file.packages {
        let (Some(version), false) = (package.version, package.sdist.is_none() && package.wheels.is_empty()) else {
            continue;
        };
        let files = package
            .sdist
            .into_iter()
            .chain(package.wheels)
            .map(|artifact| LockedFile {
                filename: artifact.name.or_else(|| artifact.url.as_deref().and_then(filename_of)),
                sha256: artifact.hashes.get("sha256").map(|sha| sha.to_ascii_lowercase()),
            })
            .collect();
        lock.packages.push(Locked { name: package.name, version, index: package.index, files });
    }
    Ok(lock)
}

/// poetry's lock: each package's files, from PyPI or a `legacy` source.
fn poetry_lock(text: &str) -> Result<Lock, String> {
    #[derive(Deserialize)]
    struct File {
        #[serde(default)]
        package: Vec<Package>,
    }
    #[derive(Deserialize)]
    struct Package {
        name: String,
        version: String,
        #[serde(default)]
        files: Vec<Artifact>,
        source: Option<Source>,
    }
    #[derive(Deserialize)]
    struct Artifact {
        file: String,
        hash: Option<String>,
    }
    #[derive(Deserialize)]
    struct Source {
        #[serde(rename = "type")]
        kind: String,
        url: Option<String>,
    }
    let file: File = toml::from_str(text).map_err(|error| format!("not a poetry.lock: {}", error.message()))?;
    let mut lock = Lock::default();
    for package in file.package {
        let index = match package.source {
            None => None,
            Some(source) if source.kind == "legacy" => source.url,
            Some(_) => continue,
        };
        let files = package
            .files
            .into_iter()
            .map(|artifact| LockedFile {
                filename: Some(artifact.file),
                sha256: artifact.hash.as_deref().and_then(sha256_of),
            })
            .collect();
        lock.packages.push(Locked { name: package.name, version: package.version, index, files });
    }
    Ok(lock)
}

#[cfg(test)]
mod tests {
    use super::*;

    const HASH_A: &str = "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa";

    #[test]
    fn a_requirements_file_gives_its_pins_their_hashes_and_its_index() {
        let text = format!(
            "# built by pip-compile\n--index-url https://corp.example/simple/\n\
             requests[socks]==2.32.3 ; python_version >= \"3.8\" \\\n    --hash=sha256:{} \\\n    --hash sha256:{}\n\
             six==1.16.0  # via requests\nflask>=2\n-e ./local\n",
            HASH_A.to_uppercase(),
            "b".repeat(64)
        );
        let lock = lock_of(Path::new("requirements.txt"), &text).unwrap();
        assert_eq!(lock.packages.len(), 2, "{lock:?}");
        let requests = &lock.packages[0];
        assert_eq!((requests.name.as_str(), requests.version.as_str()), ("requests", "2.32.3"));
        assert_eq!(requests.index.as_deref(), Some("https://corp.example/simple/"));
        let hashes: Vec<_> = requests.files.iter().filter_map(|file| file.sha256.clone()).collect();
        assert_eq!(hashes, [HASH_A.to_owned(), "b".repeat(64)]);
        assert!(lock.packages[1].files.is_empty());
        assert_eq!(lock.unknown.len(), 2, "{:?}", lock.unknown);
        assert!(lock.unknown[0].contains("flask>=2"));
    }

    #[test]
    fn a_uv_lock_gives_its_registry_packages_files() {
        let text = format!(
            r#"version = 1
[[package]]
name = "app"
version = "0.1.0"
source = {{ virtual = "." }}

[[package]]
name = "six"
version = "1.16.0"
source = {{ registry = "https://pypi.org/simple" }}
sdist = {{ url = "https://files.example/six-1.16.0.tar.gz", hash = "sha256:{HASH_A}", size = 3 }}
wheels = [
    {{ url = "https://files.example/six-1.16.0-py2.py3-none-any.whl", hash = "sha256:{HASH_A}", size = 3 }},
]
"#
        );
        let lock = lock_of(Path::new("uv.lock"), &text).unwrap();
        assert_eq!(lock.packages.len(), 1);
        let six = &lock.packages[0];
        assert_eq!(six.files.len(), 2);
        assert_eq!(six.files[1].filename.as_deref(), Some("six-1.16.0-py2.py3-none-any.whl"));
        assert!(lock_of(Path::new("uv.lock"), "[[package]\n").is_err());
    }

    #[test]
    fn a_pylock_and_a_poetry_lock_give_their_files() {
        let pylock = format!(
            r#"lock-version = "1.0"
[[packages]]
name = "six"
version = "1.16.0"
index = "https://pypi.org/simple"
wheels = [{{ name = "six-1.16.0-py2.py3-none-any.whl", url = "https://f/six.whl", hashes = {{ sha256 = "{HASH_A}" }} }}]
"#
        );
        let lock = lock_of(Path::new("pylock.toml"), &pylock).unwrap();
        assert_eq!(lock.packages[0].files[0].filename.as_deref(), Some("six-1.16.0-py2.py3-none-any.whl"));
        let poetry = format!(
            r#"[[package]]
name = "six"
version = "1.16.0"
files = [{{ file = "six-1.16.0.tar.gz", hash = "sha256:{HASH_A}" }}]

[[package]]
name = "mine"
version = "1.0"
files = []
[package.source]
type = "git"
url = "https://git.example/mine"
"#
        );
        let lock = lock_of(Path::new("poetry.lock"), &poetry).unwrap();
        assert_eq!(lock.packages.len(), 1, "a git source is not an index's");
        assert_eq!(lock.packages[0].files[0].sha256.as_deref(), Some(HASH_A));
    }
}
