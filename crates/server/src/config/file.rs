//! The TOML configuration file, as written. Unknown keys are errors, so a
//! typo is reported at start rather than silently ignored.
//!
//! ```toml
//! [apt]
//! index_ttl = "5m"          # freshness window of dists/** files fetched by name
//!
//! [[apt.archive]]           # an archive of your own, or more mirrors of a built-in one
//! name = "local"
//! mirrors = ["http://127.0.0.1:8001/debian", "http://127.0.0.1:8002/debian"]
//!
//! [go]
//! proxies = ["http://127.0.0.1:8001"]   # upstream module proxies (default https://proxy.golang.org)
//! list_ttl = "5m"            # freshness window of @v/list, @latest and the sumdb's latest
//! negative_ttl = "1m"        # how long a 404/410 of the upstream is remembered
//! sumdb = "sum.golang.org"   # the checksum database proxied and consulted; "off": neither
//!
//! [upstream]
//! connect_timeout = "2s"     # TCP connect to an upstream instance
//! first_byte_timeout = "2s"  # an attempt on a healthy instance: start → answer head
//! retry_timeout = "10s"      # an attempt when every instance is penalised
//! deadline = "30s"           # all attempts of one request (its body excepted)
//! idle_timeout = "60s"       # an upstream body sending nothing
//! pool_idle_timeout = "60s"  # an idle pooled connection is closed
//! penalty_base = "1s"        # a failed instance is left out this long, doubling
//! penalty_max = "5m"         # on each failure in a row, up to this
//! keepalive_time = "30s"     # TCP keepalive: idle time before the first probe
//! keepalive_interval = "10s" # and between probes
//! resolve = ["deb.debian.org:80:192.0.2.10"]   # host:port:address[:port], before DNS
//!
//! [mirror.shadow]            # send a copy of the traffic to a second address
//! target = "http://127.0.0.1:3143"   # http or https; a path prefix is allowed, no query
//! sides = ["apt", "go"]      # whose requests are copied (default: all)
//! percentage = 100           # the share of requests copied
//! methods = ["GET", "HEAD"]  # the methods copied
//! max_body_size = "0"        # "64kb" etc.; 0: requests with a body are not copied
//! timeout = "5s"             # a copy, its answer included
//! max_inflight = 100         # copies under way at once; beyond, not copied
//! compare = false            # log where the mirror's status differs from the upstream's
//! step = "request"           # or "upstream": only misses and revalidations
//! ```

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

use serde::Deserialize;

/// The whole file.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ConfigFile {
    /// `[apt]`.
    #[serde(default)]
    pub apt: AptSection,
    /// `[upstream]`.
    #[serde(default)]
    pub upstream: UpstreamSection,
    /// `[mirror.NAME]` tables.
    #[serde(default)]
    pub mirror: BTreeMap<String, ShadowSection>,
    /// `[go]`.
    #[serde(default)]
    pub go: GoSection,
}

/// `[go]`.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct GoSection {
    /// Upstream module proxies, the instances of one pool.
    #[serde(default)]
    pub proxies: Vec<String>,
    /// Freshness window of `list` and `@latest`.
    #[serde(default, with = "humantime_serde")]
    pub list_ttl: Option<Duration>,
    /// How long `404`/`410` answers are remembered.
    #[serde(default, with = "humantime_serde")]
    pub negative_ttl: Option<Duration>,
    /// The checksum database proxied and consulted, or `off`.
    pub sumdb: Option<String>,
}

/// One `[mirror.NAME]`, as written (see `mirror::config` for the rules).
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

/// `[apt]`.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AptSection {
    /// Freshness window of `dists/**` files fetched by name.
    #[serde(default, with = "humantime_serde")]
    pub index_ttl: Option<Duration>,
    /// `[[apt.archive]]` tables.
    #[serde(default)]
    pub archive: Vec<ArchiveSection>,
}

/// One `[[apt.archive]]`.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ArchiveSection {
    /// The archive's name (a built-in name adds mirrors to it).
    pub name: String,
    /// Base URLs of its mirrors.
    pub mirrors: Vec<String>,
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
}

/// A configuration file that cannot be read.
#[derive(Debug, thiserror::Error)]
pub enum FileError {
    /// It could not be read.
    #[error("cannot read configuration file {}: {source}", path.display())]
    Read {
        /// The file.
        path: PathBuf,
        /// Why.
        #[source]
        source: std::io::Error,
    },
    /// It is not valid TOML or has unknown or mistyped keys.
    #[error("configuration file {}: {message}", path.display())]
    Parse {
        /// The file.
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

    /// Parses the text of a configuration file.
    pub fn parse(text: &str) -> Result<Self, String> {
        toml::from_str(text).map_err(|e| e.to_string().trim_end().to_string())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_documented_example_parses() {
        let doc = include_str!("file.rs");
        let example: String = doc
            .lines()
            .skip_while(|l| !l.starts_with("//! ```toml"))
            .skip(1)
            .take_while(|l| !l.starts_with("//! ```"))
            .map(|l| l.trim_start_matches("//!").trim_start())
            .collect::<Vec<_>>()
            .join("\n");
        let file = ConfigFile::parse(&example).unwrap();
        assert_eq!(file.apt.archive[0].mirrors.len(), 2);
        assert_eq!(file.upstream.resolve.len(), 1);
        assert_eq!(file.mirror["shadow"].max_inflight, Some(100));
    }

    #[test]
    fn the_earlier_name_of_first_byte_timeout_is_still_read() {
        let file = ConfigFile::parse("[upstream]\nhead_timeout = \"3s\"\n").unwrap();
        assert_eq!(file.upstream.first_byte_timeout, Some(Duration::from_secs(3)));
    }

    #[test]
    fn unknown_keys_are_named() {
        let err = ConfigFile::parse("[apt]\nindex_tll = \"5m\"\n").unwrap_err();
        assert!(err.contains("index_tll"), "{err}");
        let err = ConfigFile::parse("[apt]\nindex_ttl = \"five minutes\"\n").unwrap_err();
        assert!(err.contains("index_ttl"), "{err}");
    }
}
