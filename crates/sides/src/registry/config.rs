//! The registry side's configuration: the registries known without it,
//! the `[registry]` section as written, and the validated [`Config`] the
//! side runs with (reloaded in place).

use std::time::Duration;

use pkgproxy_cache::Cache;

use super::name;
use super::Registry;
use crate::config::{ConfigError, Configures, Reloadable};
use crate::decision::Credentials;
use crate::id::SideId;
use crate::instances::Instances;

/// How long a tag's manifest is served without asking upstream.
pub const DEFAULT_TAG_TTL: Duration = Duration::from_secs(60);
/// The pulls left in a registry's quota at or below which a moved tag is
/// not followed while its last content is cached.
pub const DEFAULT_PULL_RESERVE: u64 = 10;

/// The registries known without configuration, and where each is.
pub const BUILT_IN: [(&str, &str); 7] = [
    (name::DOCKER_HUB, "https://registry-1.docker.io"),
    ("ghcr.io", "https://ghcr.io"),
    ("quay.io", "https://quay.io"),
    ("registry.k8s.io", "https://registry.k8s.io"),
    ("gcr.io", "https://gcr.io"),
    ("public.ecr.aws", "https://public.ecr.aws"),
    ("mcr.microsoft.com", "https://mcr.microsoft.com"),
];

/// One upstream registry, as configured (`[[registry.upstream]]`).
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub struct UpstreamOptions {
    /// Its name, as clients write it in image references.
    pub name: String,
    /// Its instances' base URLs (the registry, or mirrors of it).
    pub mirrors: Vec<String>,
    /// An account pkgproxy pulls as: its user name. Everything it may read
    /// becomes readable to every client of pkgproxy.
    pub username: Option<String>,
    /// Its password, or a token standing for it.
    pub password: Option<String>,
}

impl UpstreamOptions {
    /// The account pkgproxy pulls as, if one is configured.
    fn credentials(&self) -> Option<Credentials> {
        let user = self.username.as_ref()?;
        Some(Credentials(format!("{user}:{}", self.password.as_deref().unwrap_or(""))))
    }
}

/// The registry side's configuration, as written (`[registry]`).
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Options {
    /// Upstreams beside the built-in ones, or mirrors for a built-in one
    /// (`[[registry.upstream]]`).
    #[serde(default, rename = "upstream")]
    pub upstreams: Vec<UpstreamOptions>,
    /// How long a tag is served without asking upstream.
    #[serde(default, with = "humantime_serde")]
    pub tag_ttl: Option<Duration>,
    /// The pulls kept in reserve in a registry's quota.
    pub pull_reserve: Option<u64>,
    /// Whether private content is served while offline to a credential
    /// the registry accepted for it before.
    #[serde(default)]
    pub private_offline: bool,
}

/// An upstream registry: its name and its instances.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Upstream {
    /// The name clients use.
    pub name: String,
    /// Its instances.
    pub mirrors: Instances,
    /// The account pkgproxy pulls as, if any.
    pub credentials: Option<Credentials>,
    /// The one mirror is a parent pkgproxy's path for this registry
    /// (`http://parent:3142/v2/ghcr.io`): upstream paths go below it
    /// without their own `/v2`.
    pub below_parent: bool,
}

/// The registry side's configuration, validated.
#[derive(Debug, Clone)]
pub struct Config {
    upstreams: Vec<Upstream>,
    /// How long a tag's manifest is served without asking upstream.
    pub(super) tag_ttl: Duration,
    /// The pulls left in a registry's quota kept in reserve.
    pub(super) pull_reserve: u64,
    /// Whether private content is served offline to a credential accepted before.
    pub(super) private_offline: bool,
}

impl Config {
    /// Validates `options`: configured mirrors replace a built-in
    /// registry's, a new name adds a registry.
    pub fn new(options: &Options) -> Result<Config, ConfigError> {
        let mut upstreams: Vec<Upstream> = BUILT_IN
            .iter()
            .map(|(name, url)| Upstream {
                name: name.to_string(),
                mirrors: Instances::built_in(url),
                credentials: None,
                below_parent: false,
            })
            .collect();
        for configured in &options.upstreams {
            let bad = |reason: String| {
                ConfigError::new(SideId::Registry, format_args!("upstream {:?}", configured.name), reason)
            };
            let name = name::canonical(&configured.name).to_string();
            if name.is_empty()
                || !name.bytes().all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b".-:".contains(&b))
            {
                return Err(bad("a registry name is a lower-case host name, with a port if need be".into()));
            }
            if configured.mirrors.is_empty() {
                return Err(bad("has no mirrors".into()));
            }
            let credentials = configured.credentials();
            if credentials.as_ref().is_some_and(|c| c.0.split_once(':').is_none_or(|(user, _)| user.is_empty())) {
                return Err(bad("credentials are user:password".into()));
            }
            let mirrors = Instances::new(&configured.mirrors, None).map_err(bad)?;
            upstreams.retain(|upstream| upstream.name != name);
            upstreams.push(Upstream { name, mirrors, credentials, below_parent: false });
        }
        Ok(Config {
            upstreams,
            tag_ttl: options.tag_ttl.unwrap_or(DEFAULT_TAG_TTL),
            pull_reserve: options.pull_reserve.unwrap_or(DEFAULT_PULL_RESERVE),
            private_offline: options.private_offline,
        })
    }

    /// The upstream named `name`.
    pub fn upstream(&self, name: &str) -> Option<&Upstream> {
        self.upstreams.iter().find(|upstream| upstream.name == name)
    }
}

impl Configures for Config {
    type Side = Registry;
    type Options = Options;
    type Invalid = ConfigError;
    const ID: SideId = SideId::Registry;

    fn validate(options: &Options) -> Result<Config, ConfigError> {
        Config::new(options)
    }

    fn open_side(&self, cache: &Cache) -> Result<Registry, String> {
        Ok(Registry::new(self.clone(), cache.clone()))
    }

    fn held_by(side: &Registry) -> &Reloadable<Config> {
        &side.config
    }

    /// The configured instances: these may be on local addresses (each
    /// on its own port only).
    fn trusted(&self) -> Vec<String> {
        self.upstreams.iter().flat_map(|upstream| upstream.mirrors.trusted_urls()).collect()
    }

    /// Every registry fetched through the parent pkgproxy at `parent`
    /// (`http://host:port`), which keeps its own mirrors of each.
    fn chain(&mut self, parent: &str) {
        for upstream in &mut self.upstreams {
            upstream.mirrors.chain_to(parent, &format!("/v2/{}", upstream.name));
            upstream.below_parent = true;
        }
    }
}
