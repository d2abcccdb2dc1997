//! `[maven]`: the repositories the Maven side serves, each at
//! `/maven/NAME/` and each the mirrors of one pool, and how long what
//! changes is trusted. Three are built in (Maven Central, Google's Android
//! repository, the Gradle plugin portal); a `[[maven.repository]]` with a
//! built-in's name gives that repository's mirrors, as `[[apt.archive]]`
//! does for apt's.

use std::time::Duration;

use crate::config::ConfigError;
use crate::id::SideId;
use crate::instances::Instances;

/// How long a `maven-metadata.xml` is served without asking again.
pub const DEFAULT_METADATA_TTL: Duration = Duration::from_secs(300);
/// How long an upstream's "not found" is remembered: Maven and Gradle ask
/// every repository of a build for every artifact, and most say no.
pub const DEFAULT_NEGATIVE_TTL: Duration = Duration::from_secs(3600);

/// A repository every pkgproxy serves unless configured otherwise.
struct BuiltIn {
    name: &'static str,
    url: &'static str,
}

/// The built-in repositories, by name.
const BUILT_IN: &[BuiltIn] = &[
    BuiltIn { name: "central", url: "https://repo1.maven.org/maven2" },
    BuiltIn { name: "google", url: "https://dl.google.com/dl/android/maven2" },
    BuiltIn { name: "gradle-plugins", url: "https://plugins.gradle.org/m2" },
];

/// Maven Central's other canonical hosts: a URL on them (a lockfile's, a
/// `settings.xml`'s) is Central's.
pub const CENTRAL_ALIASES: &[&str] = &["https://repo.maven.apache.org/maven2", "https://repo1.maven.org/maven2"];

/// The built-in repositories' names, each with a URL builds name it by
/// (Central's on each of its canonical hosts): what a client's setup
/// points at pkgproxy.
pub fn built_in_urls() -> impl Iterator<Item = (&'static str, &'static str)> {
    let central = CENTRAL_ALIASES.iter().map(|url| ("central", *url));
    let others = BUILT_IN.iter().filter(|built_in| built_in.name != "central");
    central.chain(others.map(|built_in| (built_in.name, built_in.url)))
}

/// The Maven side's configuration, as written (`[maven]`).
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Options {
    /// How long a `maven-metadata.xml` is served without asking again.
    #[serde(default, with = "humantime_serde")]
    pub metadata_ttl: Option<Duration>,
    /// How long an upstream's `404` is remembered.
    #[serde(default, with = "humantime_serde")]
    pub negative_ttl: Option<Duration>,
    /// Whether an artifact without a published checksum beside it is
    /// refused (default `true`).
    #[serde(default)]
    pub require_checksums: Option<bool>,
    /// Repositories, each at `/maven/NAME/`.
    #[serde(default)]
    pub repository: Vec<RepositoryOptions>,
}

/// A repository, as written (`[[maven.repository]]`).
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RepositoryOptions {
    /// Its name: `/maven/NAME/`.
    pub name: String,
    /// Its base URLs, the mirrors of one pool.
    #[serde(default)]
    pub mirrors: Vec<String>,
    /// Whether an artifact without a published checksum is refused; the
    /// section's `require_checksums` when unset.
    #[serde(default)]
    pub require_checksums: Option<bool>,
    /// Whether the fleet's policy (`[policy]`) judges its artifacts:
    /// `false` for a repository the fleet publishes to itself.
    #[serde(default)]
    pub policy: Option<bool>,
}

/// A repository pkgproxy serves.
#[derive(Debug, Clone)]
pub struct Repository {
    /// Its name, in paths, keys and pools.
    pub name: String,
    /// Its instances.
    pub mirrors: Instances,
    /// Whether an artifact without a published checksum is refused.
    pub require_checksums: bool,
    /// Whether the fleet's policy judges its artifacts.
    pub gated: bool,
}

impl Repository {
    /// The cache key of `path` (below the repository, no leading `/`).
    pub fn key(&self, path: &str) -> String {
        format!("maven/{}/{path}", self.name)
    }

    /// Its pool's name.
    pub fn pool(&self) -> String {
        format!("maven {}", self.name)
    }
}

/// The Maven side's configuration, validated.
#[derive(Debug, Clone)]
pub struct Config {
    /// The repositories, built-in ones first.
    pub repositories: Vec<Repository>,
    /// How long metadata is served without asking again.
    pub metadata_ttl: Duration,
    /// How long an upstream's `404` is remembered.
    pub negative_ttl: Duration,
}

impl Config {
    /// Validates `options`.
    pub fn new(options: &Options) -> Result<Config, ConfigError> {
        let bad = |key: &dyn std::fmt::Display, reason: String| ConfigError::new(SideId::Maven, key, reason);
        let required = options.require_checksums.unwrap_or(true);
        let mut repositories: Vec<Repository> = BUILT_IN
            .iter()
            .map(|built_in| Repository {
                name: built_in.name.to_owned(),
                mirrors: Instances::built_in(built_in.url),
                require_checksums: required,
                gated: true,
            })
            .collect();
        let mut named = Vec::new();
        for configured in &options.repository {
            let name = &configured.name;
            crate::config::repository_name(SideId::Maven, name, &mut named)?;
            let urls_key = format!("repository.{name}.mirrors");
            let built_in = BUILT_IN.iter().find(|built_in| built_in.name == name).map(|built_in| built_in.url);
            if configured.mirrors.is_empty() && built_in.is_none() {
                return Err(bad(&urls_key, "give the base URLs of the repository (https://host/maven2)".to_owned()));
            }
            let mirrors = Instances::new(&configured.mirrors, built_in).map_err(|reason| bad(&urls_key, reason))?;
            let repository = Repository {
                name: name.clone(),
                mirrors,
                require_checksums: configured.require_checksums.unwrap_or(required),
                gated: configured.policy.unwrap_or(true),
            };
            match repositories.iter_mut().find(|known| &known.name == name) {
                Some(known) => *known = repository,
                None => repositories.push(repository),
            }
        }
        Ok(Config {
            repositories,
            metadata_ttl: options.metadata_ttl.unwrap_or(DEFAULT_METADATA_TTL),
            negative_ttl: options.negative_ttl.unwrap_or(DEFAULT_NEGATIVE_TTL),
        })
    }

    /// The repository named `name`.
    pub fn repository(&self, name: &str) -> Option<&Repository> {
        self.repositories.iter().find(|repository| repository.name == name)
    }

    /// The repository `key` is of, and the path below it.
    pub fn repository_of_key<'k>(&self, key: &'k str) -> Option<(&Repository, &'k str)> {
        let (name, path) = key.strip_prefix("maven/")?.split_once('/')?;
        Some((self.repository(name)?, path))
    }

    /// pkgproxy's path for `url`, a repository's own (on one of its
    /// mirrors, or on Central's canonical hosts).
    pub fn upstream_path(&self, url: &str) -> Option<String> {
        let central = self.repository("central");
        let canonical = CENTRAL_ALIASES.iter().find_map(|alias| crate::instances::path_below(alias, url));
        let canonical = central.zip(canonical);
        let (repository, below) = self
            .repositories
            .iter()
            .find_map(|repository| Some((repository, repository.mirrors.path_below(url)?)))
            .or(canonical)?;
        Some(format!("/maven/{}{below}", repository.name))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn options(text: &str) -> Options {
        toml::from_str(text).unwrap()
    }

    #[test]
    fn the_built_in_repositories_are_served_and_a_named_one_takes_its_mirrors() {
        let config = Config::new(&Options::default()).unwrap();
        let names: Vec<&str> = config.repositories.iter().map(|r| r.name.as_str()).collect();
        assert_eq!(names, ["central", "google", "gradle-plugins"]);
        assert_eq!(config.repository("central").unwrap().mirrors.urls(), ["https://repo1.maven.org/maven2"]);
        assert_eq!((config.metadata_ttl, config.negative_ttl), (DEFAULT_METADATA_TTL, DEFAULT_NEGATIVE_TTL));

        let config = Config::new(&options(
            r#"
            require_checksums = false
            [[repository]]
            name = "central"
            mirrors = ["https://mirror.example/maven2/"]
            [[repository]]
            name = "corp"
            mirrors = ["https://nexus.example/repository/releases"]
            require_checksums = true
            policy = false
            "#,
        ))
        .unwrap();
        let central = config.repository("central").unwrap();
        assert_eq!(central.mirrors.urls(), ["https://mirror.example/maven2"]);
        assert!(!central.require_checksums);
        let corp = config.repository("corp").unwrap();
        assert!(corp.require_checksums && !corp.gated);
        assert_eq!(
            config.upstream_path("https://repo.maven.apache.org/maven2/org/x/y/1/y-1.jar").as_deref(),
            Some("/maven/central/org/x/y/1/y-1.jar")
        );
        assert_eq!(
            config.upstream_path("https://nexus.example/repository/releases/a/b/1/b-1.pom").as_deref(),
            Some("/maven/corp/a/b/1/b-1.pom")
        );
    }

    #[test]
    fn a_bad_repository_names_its_key() {
        for (text, said) in [
            ("[[repository]]\nname = \"Corp\"\nmirrors = [\"https://a.example\"]", "repository.name"),
            ("[[repository]]\nname = \"corp\"", "repository.corp.mirrors"),
            ("[[repository]]\nname = \"corp\"\nmirrors = [\"ftp://a\"]", "repository.corp.mirrors"),
        ] {
            let error = Config::new(&options(text)).unwrap_err().to_string();
            assert!(error.contains(said), "{error}");
        }
    }
}
