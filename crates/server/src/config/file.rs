//! The TOML configuration file, as written. Unknown keys are errors, so a
//! typo is reported at start rather than silently ignored.
//!
//! [`EXAMPLE`] shows every key, with its default or a typical value.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

use pkgproxy_sides::{SidesConfig, SidesFile};
use serde::Deserialize;

use super::placement;

/// A configuration file using every key, commented: shown by `pkgproxy
/// -help`, and parsed by a test so it never drifts from what is read.
pub const EXAMPLE: &str = include_str!("example.toml");

/// The whole file: the server's sections here; each side reads its own
/// from [`SidesFile`].
#[derive(Debug, Clone, Default, Deserialize)]
pub struct ConfigFile {
    /// The file as the sides read it.
    #[serde(skip)]
    pub sides: SidesFile,
    /// `[upstream]`.
    #[serde(default)]
    pub upstream: UpstreamSection,
    /// `[mirror.NAME]` tables.
    #[serde(default)]
    pub mirror: BTreeMap<String, ShadowSection>,
    /// `[cache]`.
    #[serde(default)]
    pub cache: CacheSection,
    /// `[server]`.
    #[serde(default)]
    pub server: ServerSection,
    /// `[status]`.
    #[serde(default)]
    pub status: StatusSection,
    /// `[cluster]`: absent, the node works alone.
    pub cluster: Option<ClusterSection>,
    /// `[bundles]`.
    #[serde(default)]
    pub bundles: BundlesSection,
    /// `[policy]`: absent, every release is served as the registries
    /// publish it.
    pub policy: Option<pkgproxy_policy::Options>,
}

/// `[bundles]`.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct BundlesSection {
    /// The public keys whose signatures an import trusts: each the key
    /// itself (`ed25519:...`) or the path of a file holding it.
    #[serde(default)]
    pub trusted_keys: Vec<String>,
}

/// `[cluster]`.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ClusterSection {
    /// The S3 endpoint.
    pub endpoint: String,
    /// The bucket the nodes share.
    pub bucket: String,
    /// Where under the bucket pkgproxy keeps its objects (`pkgproxy`).
    pub prefix: Option<String>,
    /// The store's region (`us-east-1`).
    pub region: Option<String>,
    /// The access key; `AWS_ACCESS_KEY_ID` without it.
    pub access_key_id: Option<String>,
    /// Its secret; `AWS_SECRET_ACCESS_KEY` without it.
    pub secret_access_key: Option<String>,
    /// This node's name in the cluster (the host name).
    pub node_id: Option<String>,
    /// Where the other nodes reach this one (its proxy listener's URL).
    pub peer_url: Option<String>,
    /// How long a fetch's lease lasts unless renewed (`"30s"`).
    #[serde(default, with = "humantime_serde")]
    pub lease_ttl: Option<Duration>,
    /// The secret nodes prove to each other (default: derived from the
    /// secret key).
    pub peer_secret: Option<String>,
    /// How often the cluster's offline switch is read (`"2s"`).
    #[serde(default, with = "humantime_serde")]
    pub offline_poll: Option<Duration>,
}

/// `[status]`.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct StatusSection {
    /// The status page at `/` and its JSON (on by default).
    #[serde(default = "on")]
    pub page: bool,
    /// `/metrics` on the proxy listener too (off by default: it is on the
    /// stats socket).
    #[serde(default)]
    pub metrics: bool,
    /// The cache's page at `/cache/` and its JSON (on by default).
    #[serde(default = "on")]
    pub browse: bool,
}

impl Default for StatusSection {
    fn default() -> Self {
        StatusSection { page: true, metrics: false, browse: true }
    }
}

fn on() -> bool {
    true
}

/// `[server]`.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ServerSection {
    /// The listener's TLS certificate chain (PEM); without it, one is made.
    pub tls_cert: Option<PathBuf>,
    /// Its private key (PEM).
    pub tls_key: Option<PathBuf>,
    /// How long a client may take to send a request's head, from its
    /// connection or its first byte (`"10s"`).
    #[serde(default, with = "humantime_serde")]
    pub header_read_timeout: Option<Duration>,
    /// How long a keep-alive connection may wait for its next request.
    #[serde(default, with = "humantime_serde")]
    pub idle_timeout: Option<Duration>,
    /// How long a client may take nothing of an answer it was sent before
    /// its connection is closed (`"60s"`).
    #[serde(default, with = "humantime_serde")]
    pub send_timeout: Option<Duration>,
    /// How recent a revalidation answers a client asking for a fresh
    /// copy (`Cache-Control: no-cache` or `max-age=0`; `"10s"`).
    #[serde(default, with = "humantime_serde")]
    pub revalidate_floor: Option<Duration>,
    /// Client connections open at once (default: from the file limit).
    pub max_connections: Option<usize>,
    /// Client connections open at once from one address.
    pub max_connections_per_client: Option<usize>,
    /// How many leading bits of an IPv6 address name one client.
    pub ipv6_client_prefix: Option<u8>,
    /// The client networks served (`"10.0.0.0/8"`, `"::1/128"`); default:
    /// loopback, private and link-local ones.
    pub allow: Option<Vec<String>>,
}

/// `[cache]`.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CacheSection {
    /// The most the cache holds (`"50GiB"`); unlimited without it.
    pub max_size: Option<String>,
    /// The free space kept on the cache's file system (`"5%"`, `"10GiB"`).
    pub min_free: Option<String>,
    /// The largest body cached (`"4GiB"`); larger ones are passed through.
    pub max_object_size: Option<String>,
}

/// One `[mirror.NAME]`, as written (see [`super::shadow`] for the rules).
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ShadowSection {
    /// Where copies go.
    pub target: String,
    /// Whose requests are copied.
    pub sides: Option<Vec<String>>,
    /// The share of requests copied.
    pub percentage: Option<u32>,
    /// The methods copied.
    pub methods: Option<Vec<String>>,
    /// The largest body copied.
    pub max_body_size: Option<super::Size>,
    /// How long a copy may take.
    #[serde(default, with = "humantime_serde")]
    pub timeout: Option<Duration>,
    /// Copies under way at one time.
    pub max_inflight: Option<usize>,
    /// The `Host` of the copies.
    pub host: Option<String>,
    /// Compare the statuses.
    pub compare: Option<bool>,
    /// `request` or `upstream`.
    pub step: Option<String>,
}

/// `[upstream]`.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct UpstreamSection {
    /// TCP connect timeout.
    #[serde(default, with = "humantime_serde")]
    pub connect_timeout: Option<Duration>,
    /// Time allowed for an attempt's answer head (`head_timeout` is its
    /// earlier name, still read).
    #[serde(default, alias = "head_timeout", with = "humantime_serde")]
    pub first_byte_timeout: Option<Duration>,
    /// Time allowed for an attempt on a penalised instance.
    #[serde(default, with = "humantime_serde")]
    pub retry_timeout: Option<Duration>,
    /// Time allowed for all attempts of a request.
    #[serde(default, with = "humantime_serde")]
    pub deadline: Option<Duration>,
    /// Time a body may send nothing.
    #[serde(default, with = "humantime_serde")]
    pub idle_timeout: Option<Duration>,
    /// Time an idle pooled connection is kept.
    #[serde(default, with = "humantime_serde")]
    pub pool_idle_timeout: Option<Duration>,
    /// The first penalty of a failed instance.
    #[serde(default, with = "humantime_serde")]
    pub penalty_base: Option<Duration>,
    /// The longest penalty.
    #[serde(default, with = "humantime_serde")]
    pub penalty_max: Option<Duration>,
    /// TCP keepalive idle time.
    #[serde(default, with = "humantime_serde")]
    pub keepalive_time: Option<Duration>,
    /// TCP keepalive probe interval.
    #[serde(default, with = "humantime_serde")]
    pub keepalive_interval: Option<Duration>,
    /// Fixed addresses, `host:port:address`.
    #[serde(default)]
    pub resolve: Vec<String>,
    /// Origins on local addresses, beside the configured upstreams' own,
    /// that an upstream may send pkgproxy to (a registry's blob storage on
    /// the LAN): `http://minio.lan:9000`. Each is trusted on its own port
    /// only, as the configured upstreams are.
    #[serde(default)]
    pub trust: Vec<String>,
    /// A parent pkgproxy (`http://region-cache:3142`): apt's requests go
    /// through it as a forward proxy, the other sides ask its endpoint for
    /// them. Without it, `HTTP_PROXY`, `HTTPS_PROXY` and `NO_PROXY` name a
    /// plain proxy.
    pub proxy: Option<String>,
}

/// A configuration file that cannot be read.
#[derive(Debug, thiserror::Error)]
pub enum FileError {
    /// It could not be read.
    #[error("cannot read configuration file {}: {source}", path.display())]
    Read {
        /// The file named by `-config`.
        path: PathBuf,
        /// The operating system's error.
        #[source]
        source: std::io::Error,
    },
    /// It is not valid TOML or has unknown or mistyped keys.
    #[error("configuration file {}: {message}", path.display())]
    Parse {
        /// The file named by `-config`.
        path: PathBuf,
        /// The parser's message (names the key and the line).
        message: String,
    },
}

impl ConfigFile {
    /// Reads and parses `path`.
    pub fn load(path: &Path) -> Result<Self, FileError> {
        let text =
            std::fs::read_to_string(path).map_err(|source| FileError::Read { path: path.to_path_buf(), source })?;
        Self::parse(&text).map_err(|message| FileError::Parse { path: path.to_path_buf(), message })
    }

    /// Parses the text of a configuration file: the server's sections,
    /// then each side's. A key that is neither's is an error.
    /// An unknown key or section is told with its line, the section it is
    /// in, and where it belongs or what it likely misspells.
    pub fn parse(text: &str) -> Result<Self, String> {
        let said = |error: toml::de::Error| {
            let placed = pkgproxy_sides::unknown_key(&error).and_then(|start| placement::unknown_key_at(text, start));
            placed.unwrap_or_else(|| error.to_string().trim_end().to_string())
        };
        let mut unknown = Vec::new();
        let server = toml::Deserializer::new(text);
        let mut file: ConfigFile =
            serde_ignored::deserialize(server, |path| unknown.push(path.to_string())).map_err(said)?;
        if let Some(key) = unknown.iter().find(|key| !SidesConfig::is_section(key)) {
            return Err(placement::unknown_at_top(text, key).unwrap_or_else(|| format!("unknown key `{key}`")));
        }
        file.sides = SidesFile::new(text);
        Ok(file)
    }

    /// A side's error, told with where its unknown key belongs if that is
    /// what is wrong.
    pub(super) fn side_error(&self, error: pkgproxy_sides::SectionError) -> super::SettingsError {
        let placed = error.unknown_key.and_then(|start| placement::unknown_key_at(self.sides.text(), start));
        match placed {
            Some(told) => super::SettingsError::Side(told),
            None => error.into(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_documented_example_parses() {
        let file = ConfigFile::parse(EXAMPLE).unwrap();
        let apt: pkgproxy_sides::apt::Options = file.sides.section(pkgproxy_sides::SideId::Apt).unwrap();
        assert_eq!(apt.archives[0].mirrors.len(), 2);
        assert_eq!(file.upstream.resolve.len(), 1);
        assert_eq!(file.mirror["shadow"].max_inflight, Some(100));
    }

    #[test]
    fn the_earlier_name_of_first_byte_timeout_is_still_read() {
        let file = ConfigFile::parse("[upstream]\nhead_timeout = \"3s\"\n").unwrap();
        assert_eq!(file.upstream.first_byte_timeout, Some(Duration::from_secs(3)));
    }

    #[test]
    fn unknown_keys_and_sections_are_named() {
        let err = ConfigFile::parse("[upstream]\nconect_timeout = \"5s\"\n").unwrap_err();
        assert!(err.contains("conect_timeout"), "{err}");
        let err = ConfigFile::parse("[pypy]\nmirrors = []\n").unwrap_err();
        assert!(err.contains("pypy"), "{err}");
        let side = |text: &str| SidesConfig::new(&ConfigFile::parse(text).unwrap().sides).unwrap_err().to_string();
        let err = side("[apt]\nindex_tll = \"5m\"\n");
        assert!(err.contains("index_tll") && err.contains("line 2"), "{err}");
        let err = side("[apt]\nindex_ttl = \"five minutes\"\n");
        assert!(err.contains("index_ttl"), "{err}");
    }
}
