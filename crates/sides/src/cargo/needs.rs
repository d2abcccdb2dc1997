//! What a cargo build needs, for `pkgproxyctl check cargo Cargo.lock`:
//! what `cargo fetch --locked` asks for with an empty `CARGO_HOME`, for
//! each package of the lockfile from a registry: its registry's
//! `config.json`, the crate's index file (cargo reads it even with a
//! lock), and the `.crate` of the locked checksum. The daemon knows which
//! registry a lockfile's source is.

use std::path::PathBuf;

use serde::{Deserialize, Serialize};

use super::index::{file_path, is_crate_name, is_version};
use super::{Cargo, Registry, CRATES_IO};
use crate::needs::{self, Asked, NeededItem, Needs, NeedsError, NeedsReader};

/// The sources a lockfile names crates.io by: the git index, and the
/// sparse one.
const CRATES_IO_SOURCES: [&str; 2] =
    ["registry+https://github.com/rust-lang/crates.io-index", "sparse+https://index.crates.io/"];

/// What `check cargo` takes.
#[derive(Debug, clap::Args)]
struct Arguments {
    /// The lockfile.
    #[arg(default_value = "Cargo.lock")]
    lockfile: PathBuf,
}

/// A package a lockfile locks to a registry.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
struct Locked {
    name: String,
    version: String,
    /// The registry, as the lockfile names it.
    source: String,
    /// The `.crate`'s SHA-256.
    checksum: String,
}

/// A lockfile's packages from registries: what the daemon follows.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
struct Lock {
    packages: Vec<Locked>,
}

/// cargo's reader of a lockfile.
pub struct Reader;

impl NeedsReader for Reader {
    fn command(&self) -> clap::Command {
        let about = "cargo: what `cargo fetch --locked` of a Cargo.lock asks for with an empty CARGO_HOME: each \
                     registry's config.json, each crate's index file and .crate";
        <Arguments as clap::Args>::augment_args(clap::Command::new("cargo")).about(about)
    }

    fn read(&self, matches: &clap::ArgMatches) -> Result<Asked, NeedsError> {
        let arguments: Arguments = needs::arguments(matches)?;
        needs::read_lock(&arguments.lockfile, lock_of)
    }
}

/// The packages from registries that `text`, a `Cargo.lock`, locks.
fn lock_of(text: &str) -> Result<Lock, String> {
    #[derive(Deserialize)]
    struct File {
        #[serde(default)]
        package: Vec<Package>,
    }
    #[derive(Deserialize)]
    struct Package {
        name: String,
        version: String,
        source: Option<String>,
        checksum: Option<String>,
    }
    let file: File = toml::from_str(text).map_err(|error| format!("not a Cargo.lock: {}", error.message()))?;
    let packages = file
        .package
        .into_iter()
        .filter_map(|package| {
            let source =
                package.source.filter(|source| source.starts_with("registry+") || source.starts_with("sparse+"))?;
            Some(Locked { name: package.name, version: package.version, source, checksum: package.checksum? })
        })
        .collect();
    Ok(Lock { packages })
}

/// Whether `source` (a lockfile's) names `registry`.
fn names(source: &str, registry: &Registry) -> bool {
    if registry.name == CRATES_IO {
        return CRATES_IO_SOURCES.contains(&source);
    }
    let index = source.strip_prefix("sparse+").unwrap_or(source).trim_end_matches('/');
    registry.index.urls().iter().any(|url| url.trim_end_matches('/') == index)
}

impl Cargo {
    /// What fetching the locked packages needs, registry by registry.
    pub(super) fn lock_needs(&self, asked: serde_json::Value) -> Result<Needs, NeedsError> {
        let lock: Lock = needs::parse(asked)?;
        let config = self.config();
        let prefix = crate::route::prefix_of(crate::id::SideId::Cargo).unwrap_or_default();
        let mut found = Needs::default();
        let mut files = Vec::new();
        let mut crates = Vec::new();
        for package in &lock.packages {
            let Some(registry) = config.registries.iter().find(|registry| names(&package.source, registry)) else {
                found.unknown.push(format!(
                    "{} {}: its registry ({}) is not one pkgproxy serves",
                    package.name, package.version, package.source
                ));
                continue;
            };
            let checksum = package.checksum.to_ascii_lowercase();
            let sound = is_crate_name(&package.name)
                && is_version(&package.version)
                && checksum.len() == 64
                && checksum.bytes().all(|b| b.is_ascii_hexdigit());
            if !sound {
                found
                    .unknown
                    .push(format!("{} {}: not a crate's name, version and checksum", package.name, package.version));
                continue;
            }
            let base = format!("{prefix}{}", registry.mount);
            let config_json = NeededItem {
                url: format!("{base}/index/config.json"),
                label: format!("{} config.json", registry.name),
            };
            if !found.items.contains(&config_json) {
                found.items.push(config_json);
            }
            let file = NeededItem {
                url: format!("{base}/index/{}", file_path(&package.name)),
                label: format!("{} index", package.name),
            };
            if !files.contains(&file) {
                files.push(file);
            }
            crates.push(NeededItem {
                url: format!("{base}/crates/{}/{}/{checksum}", package.name, package.version),
                label: format!("{} {} .crate", package.name, package.version),
            });
        }
        found.items.extend(files);
        found.items.extend(crates);
        Ok(found)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_lockfile_gives_its_registry_packages_and_leaves_out_the_others() {
        let lock = r#"
version = 4

[[package]]
name = "app"
version = "0.1.0"
dependencies = ["itoa"]

[[package]]
name = "itoa"
version = "1.0.15"
source = "registry+https://github.com/rust-lang/crates.io-index"
checksum = "4a5f13b858c8d314ee3e8f639011f7ccefe71f97f96e50151fb991f267928e2c"

[[package]]
name = "patched"
version = "0.1.0"
source = "git+https://example.com/patched#abc"
"#;
        let parsed = lock_of(lock).unwrap();
        assert_eq!(parsed.packages.len(), 1);
        assert_eq!(parsed.packages[0].name, "itoa");
        assert!(lock_of("[[package]\n").is_err());
    }
}
