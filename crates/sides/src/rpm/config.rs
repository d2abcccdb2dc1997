//! `[rpm]`: the repositories the RPM side serves, each at `/rpm/NAME/`
//! with its distribution's own paths below, each the mirrors of one pool,
//! and how long a `repomd.xml` is trusted. Fedora, EPEL, CentOS Stream,
//! Rocky Linux, AlmaLinux and openSUSE are built in; a
//! `[[rpm.repository]]` with a built-in's name gives that repository's
//! mirrors, as `[[apt.archive]]` does for apt's.
//!
//! Where a distribution publishes a metalink (Fedora, EPEL, CentOS
//! Stream), it says which `repomd.xml` is current: the one a mirror gives
//! must be listed there, so a mirror that is behind is never taken.

use std::time::Duration;

use crate::config::ConfigError;
use crate::id::SideId;
use crate::instances::Instances;

/// How long a `repomd.xml` is served without asking again.
pub const DEFAULT_METADATA_TTL: Duration = Duration::from_secs(300);

/// How a built-in repository's metalink is found from the path of one of
/// its repositories (the folder holding `repodata/`).
type MetalinkRule = fn(&str) -> Option<String>;

/// A repository every pkgproxy serves unless configured otherwise.
struct BuiltIn {
    name: &'static str,
    url: &'static str,
    metalink: Option<MetalinkRule>,
    /// The URLs its repository files name it by, beside `url` (what
    /// `setup dnf` recognises in a `.repo` file).
    aliases: &'static [&'static str],
}

/// The built-in repositories, by name.
const BUILT_IN: &[BuiltIn] = &[
    BuiltIn {
        name: "fedora",
        url: "https://dl.fedoraproject.org/pub/fedora/linux",
        metalink: Some(fedora_metalink),
        aliases: &["http://download.example/pub/fedora/linux", "https://download.fedoraproject.org/pub/fedora/linux"],
    },
    BuiltIn {
        name: "epel",
        url: "https://dl.fedoraproject.org/pub/epel",
        metalink: Some(epel_metalink),
        aliases: &["https://download.example/pub/epel", "https://download.fedoraproject.org/pub/epel"],
    },
    BuiltIn {
        name: "centos-stream",
        url: "https://mirror.stream.centos.org",
        metalink: Some(centos_stream_metalink),
        aliases: &[],
    },
    BuiltIn { name: "rocky", url: "https://dl.rockylinux.org/pub/rocky", metalink: None, aliases: &[] },
    BuiltIn { name: "almalinux", url: "https://repo.almalinux.org/almalinux", metalink: None, aliases: &[] },
    BuiltIn { name: "opensuse", url: "https://download.opensuse.org", metalink: None, aliases: &[] },
];

/// Fedora's: `releases/41/Everything/x86_64/os` is `fedora-41`,
/// `updates/41/Everything/x86_64` is `updates-released-f41`.
fn fedora_metalink(root: &str) -> Option<String> {
    let parts: Vec<&str> = root.split('/').collect();
    let repo = match parts.as_slice() {
        ["releases", release, "Everything", arch, "os"] => (format!("fedora-{release}"), *arch),
        ["updates", release, "Everything", arch] => (format!("updates-released-f{release}"), *arch),
        _ => return None,
    };
    Some(format!("https://mirrors.fedoraproject.org/metalink?repo={}&arch={}", repo.0, repo.1))
}

/// EPEL's: `9/Everything/x86_64` is `epel-9`.
fn epel_metalink(root: &str) -> Option<String> {
    match root.split('/').collect::<Vec<_>>().as_slice() {
        [release, "Everything", arch] => {
            Some(format!("https://mirrors.fedoraproject.org/metalink?repo=epel-{release}&arch={arch}"))
        }
        _ => None,
    }
}

/// CentOS Stream's: `9-stream/BaseOS/x86_64/os` is `centos-baseos-9-stream`.
fn centos_stream_metalink(root: &str) -> Option<String> {
    match root.split('/').collect::<Vec<_>>().as_slice() {
        [stream, section, arch, "os"] if stream.ends_with("-stream") => Some(format!(
            "https://mirrors.centos.org/metalink?repo=centos-{}-{stream}&arch={arch}",
            section.to_ascii_lowercase()
        )),
        _ => None,
    }
}

/// Each built-in repository's name with the URLs `.repo` files name it by
/// (its own first): what a client's setup points at pkgproxy.
pub fn built_in_urls() -> impl Iterator<Item = (&'static str, &'static str)> {
    BUILT_IN.iter().flat_map(|built_in| {
        std::iter::once((built_in.name, built_in.url)).chain(built_in.aliases.iter().map(|url| (built_in.name, *url)))
    })
}

/// The RPM side's configuration, as written (`[rpm]`).
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Options {
    /// How long a `repomd.xml` is served without asking again.
    #[serde(default, with = "humantime_serde")]
    pub metadata_ttl: Option<Duration>,
    /// Repositories, each at `/rpm/NAME/`.
    #[serde(default)]
    pub repository: Vec<RepositoryOptions>,
}

/// A repository, as written (`[[rpm.repository]]`).
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RepositoryOptions {
    /// Its name: `/rpm/NAME/`.
    pub name: String,
    /// Its base URLs, the mirrors of one pool.
    #[serde(default)]
    pub mirrors: Vec<String>,
    /// The metalink that says which `repodata/repomd.xml` (directly below
    /// the mirrors' base URL) is current.
    #[serde(default)]
    pub metalink: Option<String>,
    /// Whether the fleet's policy (`[policy]`) judges its packages:
    /// `false` for a repository the fleet publishes to itself.
    #[serde(default)]
    pub policy: Option<bool>,
}

/// Where a repository's metalinks are.
#[derive(Debug, Clone)]
enum Metalinks {
    /// None is published.
    None,
    /// A built-in's, found from each repository's path.
    Rule(MetalinkRule),
    /// One, configured, for the `repodata/` directly below the base URL.
    At(String),
}

/// A repository pkgproxy serves.
#[derive(Debug, Clone)]
pub struct Repository {
    /// Its name, in paths, keys and pools.
    pub name: String,
    /// Its instances.
    pub mirrors: Instances,
    metalinks: Metalinks,
    /// Whether the fleet's policy judges its packages.
    pub gated: bool,
    /// Whether its mirrors were configured: they may be on local
    /// addresses, and so may its metalink.
    configured: bool,
}

impl Repository {
    /// The cache key of `path` (below the repository, no leading `/`).
    pub fn key(&self, path: &str) -> String {
        format!("rpm/{}/{path}", self.name)
    }

    /// Its pool's name.
    pub fn pool(&self) -> String {
        format!("rpm {}", self.name)
    }

    /// The metalink of the repository whose `repodata/` is in `root` (a
    /// path below this one, `""` for its base), if one is published.
    pub fn metalink(&self, root: &str) -> Option<String> {
        match &self.metalinks {
            Metalinks::None => None,
            Metalinks::Rule(rule) => rule(root),
            Metalinks::At(url) => root.is_empty().then(|| url.clone()),
        }
    }
}

/// The RPM side's configuration, validated.
#[derive(Debug, Clone)]
pub struct Config {
    /// The repositories, built-in ones first.
    pub repositories: Vec<Repository>,
    /// How long a `repomd.xml` is served without asking again.
    pub metadata_ttl: Duration,
    /// The hosts of the repositories' mirrors and of the URLs their
    /// distributions name them by: a forward-proxy request for another
    /// host (apt's, every one of them) is told apart at once.
    hosts: std::collections::HashSet<String>,
}

/// The host of `url` (`scheme://[user@]host[:port]/...`), without its
/// port or brackets.
fn host_of(url: &str) -> Option<&str> {
    let rest = url.split_once("://")?.1;
    let authority = rest.split(['/', '?']).next()?;
    let host_port = authority.rsplit_once('@').map_or(authority, |(_, host)| host);
    match host_port.strip_prefix('[') {
        Some(bracketed) => bracketed.split_once(']').map(|(host, _)| host),
        None => host_port.split(':').next(),
    }
}

/// Checks a configured metalink: an `http(s)` URL with a host.
fn metalink_url(url: &str) -> Result<String, String> {
    let uri: http::Uri = url.parse().map_err(|_| format!("{url:?} is not a URL"))?;
    if !matches!(uri.scheme_str(), Some("http" | "https")) || uri.host().is_none_or(str::is_empty) {
        return Err(format!("{url:?} must be an http:// or https:// URL"));
    }
    Ok(url.to_owned())
}

impl Config {
    /// Validates `options`.
    pub fn new(options: &Options) -> Result<Config, ConfigError> {
        let bad = |key: &dyn std::fmt::Display, reason: String| ConfigError::new(SideId::Rpm, key, reason);
        let mut repositories: Vec<Repository> = BUILT_IN
            .iter()
            .map(|built_in| Repository {
                name: built_in.name.to_owned(),
                mirrors: Instances::built_in(built_in.url),
                metalinks: built_in.metalink.map_or(Metalinks::None, Metalinks::Rule),
                gated: true,
                configured: false,
            })
            .collect();
        let mut named = Vec::new();
        for configured in &options.repository {
            let name = &configured.name;
            crate::config::repository_name(SideId::Rpm, name, &mut named)?;
            let urls_key = format!("repository.{name}.mirrors");
            let built_in = BUILT_IN.iter().find(|built_in| built_in.name == name);
            if configured.mirrors.is_empty() && built_in.is_none() {
                return Err(bad(&urls_key, "give the base URLs of the repository (https://host/path)".to_owned()));
            }
            let mirrors = Instances::new(&configured.mirrors, built_in.map(|built_in| built_in.url))
                .map_err(|reason| bad(&urls_key, reason))?;
            let metalinks = match (&configured.metalink, built_in.and_then(|built_in| built_in.metalink)) {
                (Some(url), _) => Metalinks::At(
                    metalink_url(url).map_err(|reason| bad(&format!("repository.{name}.metalink"), reason))?,
                ),
                (None, Some(rule)) => Metalinks::Rule(rule),
                (None, None) => Metalinks::None,
            };
            let repository = Repository {
                name: name.clone(),
                mirrors,
                metalinks,
                gated: configured.policy.unwrap_or(true),
                configured: true,
            };
            match repositories.iter_mut().find(|known| &known.name == name) {
                Some(known) => *known = repository,
                None => repositories.push(repository),
            }
        }
        let mut config = Config {
            repositories,
            metadata_ttl: options.metadata_ttl.unwrap_or(DEFAULT_METADATA_TTL),
            hosts: Default::default(),
        };
        config.know_hosts();
        Ok(config)
    }

    /// Notes the hosts of the mirrors (again, after they changed).
    pub fn know_hosts(&mut self) {
        let mirrors =
            self.repositories.iter().flat_map(|repository| repository.mirrors.urls().iter().map(String::as_str));
        let urls = mirrors.chain(built_in_urls().map(|(_, url)| url));
        self.hosts = urls.filter_map(host_of).map(|host| host.to_ascii_lowercase()).collect();
    }

    /// The repository named `name`.
    pub fn repository(&self, name: &str) -> Option<&Repository> {
        self.repositories.iter().find(|repository| repository.name == name)
    }

    /// The repository `key` is of, and the path below it.
    pub fn repository_of_key<'k>(&self, key: &'k str) -> Option<(&Repository, &'k str)> {
        let (name, path) = key.strip_prefix("rpm/")?.split_once('/')?;
        Some((self.repository(name)?, path))
    }

    /// pkgproxy's path for `url`, a repository's own (on one of its
    /// mirrors, or on a URL its distribution's files name it by).
    pub fn upstream_path(&self, url: &str) -> Option<String> {
        let on_mirror = self
            .repositories
            .iter()
            .find_map(|repository| Some((repository.name.as_str(), repository.mirrors.path_below(url)?)));
        let by_alias =
            || built_in_urls().find_map(|(name, base)| Some((name, crate::instances::path_below(base, url)?)));
        let (name, below) = on_mirror.or_else(by_alias)?;
        Some(format!("/rpm/{name}{below}"))
    }

    /// The repository a forward-proxy request for `url` (`http://`) is of,
    /// and the path below it (no leading `/`): `url` below one of its
    /// mirrors, or below a URL its distribution's files name it by, in
    /// `http://` or `https://` alike (dnf's `proxy=` sees the `http://`
    /// ones).
    pub fn forwarded<'u>(&self, url: &'u str) -> Option<(&Repository, &'u str)> {
        let below = |base: &str| {
            let in_clear = base.strip_prefix("https://").map(|rest| format!("http://{rest}"));
            crate::instances::path_below(base, url)
                .or_else(|| in_clear.and_then(|base| crate::instances::path_below(&base, url)))
        };
        let on_mirror = self
            .repositories
            .iter()
            .find_map(|repository| Some((repository, repository.mirrors.urls().iter().find_map(|base| below(base))?)));
        let by_alias = || built_in_urls().find_map(|(name, base)| Some((self.repository(name)?, below(base)?)));
        let (repository, path) = on_mirror.or_else(by_alias)?;
        Some((repository, path.strip_prefix('/').unwrap_or(path)))
    }

    /// Whether a repository's mirror (or a URL its files name it by) is on
    /// `host`: dnf may open a tunnel there for an `https://` repository.
    pub fn serves_host(&self, host: &str) -> bool {
        self.hosts.contains(host)
    }

    /// The URLs that may be on local addresses: the configured mirrors and
    /// metalinks.
    pub fn trusted(&self) -> Vec<String> {
        let configured = self.repositories.iter().filter(|repository| repository.configured);
        configured
            .flat_map(|repository| {
                let metalink = match &repository.metalinks {
                    Metalinks::At(url) => Some(url.clone()),
                    _ => None,
                };
                repository.mirrors.trusted_urls().into_iter().chain(metalink)
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn config(text: &str) -> Result<Config, ConfigError> {
        Config::new(&toml::from_str::<Options>(text).expect("options parse"))
    }

    #[test]
    fn the_built_ins_know_their_metalinks_by_path() {
        let config = config("").unwrap();
        let fedora = config.repository("fedora").unwrap();
        assert_eq!(
            fedora.metalink("releases/41/Everything/x86_64/os").as_deref(),
            Some("https://mirrors.fedoraproject.org/metalink?repo=fedora-41&arch=x86_64")
        );
        assert_eq!(
            fedora.metalink("updates/41/Everything/aarch64").as_deref(),
            Some("https://mirrors.fedoraproject.org/metalink?repo=updates-released-f41&arch=aarch64")
        );
        assert_eq!(fedora.metalink("releases/41/Server/x86_64/iso"), None);
        let epel = config.repository("epel").unwrap();
        assert_eq!(
            epel.metalink("9/Everything/x86_64").as_deref(),
            Some("https://mirrors.fedoraproject.org/metalink?repo=epel-9&arch=x86_64")
        );
        let stream = config.repository("centos-stream").unwrap();
        assert_eq!(
            stream.metalink("9-stream/AppStream/x86_64/os").as_deref(),
            Some("https://mirrors.centos.org/metalink?repo=centos-appstream-9-stream&arch=x86_64")
        );
        assert_eq!(config.repository("rocky").unwrap().metalink("9/BaseOS/x86_64/os"), None);
    }

    #[test]
    fn a_configured_repository_has_its_mirrors_and_its_metalink_for_its_base() {
        let config = config(
            r#"
            metadata_ttl = "1m"
            [[repository]]
            name = "internal"
            mirrors = ["http://127.0.0.1:8001/el9", "http://127.0.0.1:8002/el9/"]
            metalink = "http://127.0.0.1:8003/metalink?repo=el9"
            policy = false
            [[repository]]
            name = "fedora"
            mirrors = ["http://127.0.0.1:8004/fedora"]
            "#,
        )
        .unwrap();
        assert_eq!(config.metadata_ttl, Duration::from_secs(60));
        let internal = config.repository("internal").unwrap();
        assert_eq!(internal.mirrors.urls(), ["http://127.0.0.1:8001/el9", "http://127.0.0.1:8002/el9"]);
        assert_eq!(internal.metalink("").as_deref(), Some("http://127.0.0.1:8003/metalink?repo=el9"));
        assert_eq!(internal.metalink("sub"), None);
        assert!(!internal.gated);
        let fedora = config.repository("fedora").unwrap();
        assert!(fedora.metalink("releases/41/Everything/x86_64/os").is_some(), "a built-in keeps its metalinks");
        let trusted = config.trusted();
        assert!(trusted.contains(&"http://127.0.0.1:8003/metalink?repo=el9".to_owned()), "{trusted:?}");
        assert!(trusted.contains(&"http://127.0.0.1:8004/fedora".to_owned()), "{trusted:?}");
        assert_eq!(
            config.upstream_path("http://127.0.0.1:8002/el9/Packages/a-1-1.noarch.rpm").as_deref(),
            Some("/rpm/internal/Packages/a-1-1.noarch.rpm")
        );
        assert_eq!(
            config
                .upstream_path(
                    "http://download.example/pub/fedora/linux/releases/41/Everything/x86_64/os/repodata/repomd.xml"
                )
                .as_deref(),
            Some("/rpm/fedora/releases/41/Everything/x86_64/os/repodata/repomd.xml")
        );
    }

    #[test]
    fn a_forward_proxy_request_is_told_apart_by_its_host_first() {
        let config = config("[[repository]]\nname = \"x\"\nmirrors = [\"http://u:p@127.0.0.1:8001/el9\"]").unwrap();
        assert!(config.serves_host("127.0.0.1"));
        assert!(config.serves_host("dl.fedoraproject.org"));
        assert!(config.serves_host("download.example"));
        assert!(!config.serves_host("deb.debian.org"));
        assert_eq!(host_of("http://[::1]:80/x"), Some("::1"));
        assert_eq!(
            config
                .forwarded("http://dl.fedoraproject.org/pub/fedora/linux/releases/41/x.rpm")
                .map(|(r, p)| (r.name.as_str(), p)),
            Some(("fedora", "releases/41/x.rpm"))
        );
    }

    #[test]
    fn a_bad_repository_is_refused_naming_its_key() {
        let error = config("[[repository]]\nname = \"Bad\"\nmirrors = [\"http://a\"]").unwrap_err().to_string();
        assert!(error.contains("repository.name"), "{error}");
        let error = config("[[repository]]\nname = \"x\"").unwrap_err().to_string();
        assert!(error.contains("repository.x.mirrors"), "{error}");
        let error = config("[[repository]]\nname = \"x\"\nmirrors = [\"http://a\"]\nmetalink = \"ftp://b\"")
            .unwrap_err()
            .to_string();
        assert!(error.contains("repository.x.metalink"), "{error}");
    }
}
