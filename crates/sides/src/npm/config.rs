//! The npm side's configuration: the npm registry (or its mirrors) and the
//! registries beside it, each mounted by name, how long a document is
//! served without asking, and where served documents point tarballs.

use std::time::Duration;

use pkgproxy_cache::Cache;

use super::Npm;
use crate::config::{ConfigError, Configures, Reloadable};
use crate::decision::Origin;
use crate::id::SideId;
use crate::instances::Instances;
use crate::named::Naming;

/// The npm registry, when no mirror is configured.
pub const DEFAULT_REGISTRY: &str = "https://registry.npmjs.org";
/// yarn 1's name of the npm registry, which its lockfiles record.
const YARN_REGISTRY: &str = "https://registry.yarnpkg.com";
/// How long a package's document is served without asking.
pub const DEFAULT_INDEX_TTL: Duration = Duration::from_secs(300);
/// The npm registry's name in keys and pools.
pub(super) const NPM: &str = "npm";
/// Where compressed forms of documents are kept, beside the registries.
pub(super) const PACKED: &str = "packed";

/// Where the documents pkgproxy serves point tarballs.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum TarballUrls {
    /// At pkgproxy, except the npm registry's own for npm, which re-homes
    /// them itself and keeps them in its lockfile.
    #[default]
    Auto,
    /// At pkgproxy, for every client: lockfiles then name pkgproxy.
    Always,
}

/// The npm side's configuration, as written (`[npm]`).
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Options {
    /// The npm registry, or its mirrors (`https://host/`); empty: the npm
    /// registry itself.
    #[serde(default)]
    pub mirrors: Vec<String>,
    /// How long a package's document is served without asking.
    #[serde(default, with = "humantime_serde")]
    pub index_ttl: Option<Duration>,
    /// Where served documents point tarballs.
    #[serde(default)]
    pub tarball_urls: TarballUrls,
    /// Other registries, each at `/npm/NAME/`.
    #[serde(default)]
    pub registry: Vec<RegistryOptions>,
}

/// A registry beside the npm registry, as written (`[[npm.registry]]`).
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RegistryOptions {
    /// Its name: `/npm/NAME/`.
    pub name: String,
    /// Its URLs, the mirrors of one pool.
    pub mirrors: Vec<String>,
    /// Whether the fleet's policy (`[policy]`) judges its packages:
    /// `false` for a registry whose packages the fleet publishes itself.
    #[serde(default)]
    pub policy: Option<bool>,
}

/// How `[npm]` names its registries: the npm registry built in, and
/// each `[[npm.registry]]` at `/npm/NAME/`.
const NAMING: Naming = Naming {
    side: SideId::Npm,
    table: "registry",
    urls: "mirrors",
    built_in: NPM,
    default_url: DEFAULT_REGISTRY,
    reserved: &[PACKED],
    // `-` leads the registry's API paths (`/-/...`).
    refused: |name| name.starts_with('-'),
    rule: "a registry's name is lower-case letters, digits, - and _ (not npm, packed, -...)",
    no_urls: "give the registry's URLs",
};

/// A registry pkgproxy serves.
#[derive(Debug, Clone)]
pub(super) struct Registry {
    /// Its name in keys and pools (`npm`, or the configured one).
    pub(super) name: String,
    /// Where it is mounted below `/npm`: `""` for the npm registry, `/NAME`.
    pub(super) mount: String,
    /// Its instances.
    pub(super) mirrors: Instances,
    /// Whether the fleet's policy judges its packages.
    pub(super) gated: bool,
}

impl Registry {
    pub(super) fn is_npm(&self) -> bool {
        self.name == NPM
    }

    pub(super) fn origin(&self, path: String) -> Origin {
        Origin { pool: format!("npm {}", self.name), instances: self.mirrors.urls().to_vec(), path }
    }

    /// The path below the registry of `url`, one of its own links: on one
    /// of its instances, or, for the npm registry, on its canonical host
    /// (what mirrors of it still name).
    pub(super) fn own_path<'u>(&self, url: &'u str) -> Option<&'u str> {
        let canonical = || self.is_npm().then(|| crate::instances::path_below(DEFAULT_REGISTRY, url)).flatten();
        self.mirrors.path_below(url).or_else(canonical)
    }
}

/// The npm side's configuration, validated.
#[derive(Debug, Clone)]
pub struct Config {
    pub(super) registries: Vec<Registry>,
    pub(super) index_ttl: Duration,
    pub(super) tarball_urls: TarballUrls,
}

impl Config {
    /// Validates `options`.
    pub fn new(options: &Options) -> Result<Config, ConfigError> {
        let configured = options.registry.iter().map(|registry| (&registry.name, &registry.mirrors[..]));
        let registries = NAMING.registries(&options.mirrors, configured)?;
        let registries = registries.into_iter().map(|named| Registry {
            gated: options.registry.iter().find(|r| r.name == named.name).and_then(|r| r.policy).unwrap_or(true),
            name: named.name,
            mount: named.mount,
            mirrors: named.mirrors,
        });
        Ok(Config {
            registries: registries.collect(),
            index_ttl: options.index_ttl.unwrap_or(DEFAULT_INDEX_TTL),
            tarball_urls: options.tarball_urls,
        })
    }

    /// The registry of `path` (below `/npm`, decoded) and the path below it.
    pub(super) fn registry_of_path<'p>(&self, path: &'p str) -> (&Registry, &'p str) {
        let first = path.trim_start_matches('/').split('/').next().unwrap_or_default();
        let named = self.registries.iter().skip(1).find(|registry| registry.name == first);
        match named {
            Some(registry) => {
                let below = &path[1 + first.len()..];
                (registry, if below.is_empty() { "/" } else { below })
            }
            None => (&self.registries[0], path),
        }
    }

    pub(super) fn registry_of_key(&self, key: &str) -> Option<&Registry> {
        let name = key.strip_prefix("npm/")?.split('/').next()?;
        self.registries.iter().find(|registry| registry.name == name)
    }

    /// pkgproxy's path for `url`, a registry's own (on one of its
    /// instances, the npm registry's host or yarn's name of it): below the
    /// registry whose URL it is deepest below.
    pub(super) fn upstream_path(&self, url: &str) -> Option<String> {
        let prefix = crate::route::prefix_of(SideId::Npm)?;
        let deepest = self
            .registries
            .iter()
            .filter_map(|registry| Some((registry.own_path(url)?, registry)))
            .min_by_key(|(below, _)| below.len());
        let (below, mount) = match deepest {
            Some((below, registry)) => (below, registry.mount.as_str()),
            None => (crate::instances::path_below(YARN_REGISTRY, url)?, ""),
        };
        Some(format!("{prefix}{mount}{below}"))
    }

    /// The registry mounted at `mount` (`""` or `/NAME`).
    pub(super) fn registry(&self, mount: &str) -> Option<&Registry> {
        self.registries.iter().find(|registry| registry.mount == mount)
    }
}

impl Configures for Config {
    type Side = Npm;
    type Options = Options;
    type Invalid = ConfigError;
    const ID: SideId = SideId::Npm;

    fn validate(options: &Options) -> Result<Config, ConfigError> {
        Config::new(options)
    }

    fn open_side(&self, cache: &Cache) -> Result<Npm, String> {
        Ok(Npm::new(self.clone(), cache.clone()))
    }

    fn held_by(side: &Npm) -> &Reloadable<Config> {
        &side.config
    }

    /// The registries configured: these may be on local addresses.
    fn trusted(&self) -> Vec<String> {
        self.registries.iter().flat_map(|registry| registry.mirrors.trusted_urls()).collect()
    }

    /// Every registry fetched from the parent pkgproxy at `parent`.
    fn chain(&mut self, parent: &str) {
        for registry in &mut self.registries {
            let mount = format!("/npm{}", registry.mount);
            registry.mirrors.chain_to(parent, &mount);
        }
    }
}
