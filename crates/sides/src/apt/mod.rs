//! The apt side: a forward proxy for `Acquire::http::Proxy`.
//!
//! Requests name a mirror of an archive (`http://deb.debian.org/debian/...`).
//! Only archive-shaped paths (`dists/`, `pool/`) on known or configured
//! archive hosts are served; everything else is refused, so pkgproxy is not
//! an open proxy. `pool/**` and `dists/**/by-hash/**` never change under
//! their name and are cached forever; other `dists/**` files are revalidated
//! after a window.

mod archives;
mod classify;
pub mod deb822;
pub mod index;
mod integrity;
pub mod packages;
pub mod release;

use std::time::Duration;

pub use archives::{builtin, Archive, HostPattern, Mirror};
pub use integrity::Apt;

use crate::decision::{Decision, Refusal, Target};

/// The default freshness window of `dists/**` files fetched by name.
pub const DEFAULT_INDEX_TTL: Duration = Duration::from_secs(300);

/// An archive from the configuration file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ArchiveConfig {
    /// Its name (a built-in name adds mirrors to that archive).
    pub name: String,
    /// Its mirrors' base URLs (`http://host[:port]/prefix`).
    pub mirrors: Vec<String>,
}

/// A configuration the apt side cannot use.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum AptConfigError {
    /// An archive's name is empty or has characters unfit for a cache key.
    #[error("apt.archive name {0:?} must be non-empty and use only a-z, 0-9, '.', '_' and '-'")]
    BadName(String),
    /// An archive has no mirrors.
    #[error("apt.archive {0:?} has no mirrors")]
    NoMirrors(String),
    /// A mirror URL is malformed or unsupported.
    #[error("apt.archive {archive:?} mirror {url:?}: {reason}")]
    BadMirror {
        /// The archive.
        archive: String,
        /// The URL.
        url: String,
        /// What is wrong with it.
        reason: &'static str,
    },
}

/// The apt side's configuration, validated.
#[derive(Debug, Clone)]
pub struct AptSide {
    archives: Vec<Archive>,
    index_ttl: Duration,
}

impl AptSide {
    /// Builds the side from the built-in archives plus `configured` ones.
    pub fn new(configured: &[ArchiveConfig], index_ttl: Duration) -> Result<Self, AptConfigError> {
        let mut archives = builtin();
        for config in configured {
            let mirrors = parse_mirrors(config)?;
            let urls: Vec<String> = mirrors.iter().map(Mirror::to_string).collect();
            match archives.iter_mut().find(|a| a.name == config.name) {
                Some(existing) => {
                    existing.mirrors.extend(mirrors);
                    existing.configured = true;
                    existing.pool.extend(urls);
                }
                None => archives.push(Archive { name: config.name.clone(), mirrors, configured: true, pool: urls }),
            }
        }
        Ok(AptSide { archives, index_ttl })
    }

    /// How long a `dists/**` file fetched by name stays fresh.
    pub fn index_ttl(&self) -> Duration {
        self.index_ttl
    }

    /// The archives, built-in and configured.
    pub fn archives(&self) -> &[Archive] {
        &self.archives
    }

    /// The hosts of configured mirrors: these may be on local addresses.
    pub fn trusted_hosts(&self) -> Vec<String> {
        let configured = self.archives.iter().filter(|a| a.configured).flat_map(|a| &a.mirrors);
        configured
            .filter_map(|m| match &m.host {
                HostPattern::Exact(host) => Some(host.clone()),
                HostPattern::Country { .. } => None,
            })
            .collect()
    }

    /// Decides what to do with a proxied `GET`/`HEAD`.
    pub fn classify(&self, target: Target) -> Decision {
        classify::classify(&self.archives, target)
    }

    /// Whether a `CONNECT host:port` may be tunnelled: port 443 of a host
    /// that serves a known archive.
    pub fn allows_tunnel(&self, host: &str, port: u16) -> Result<(), Refusal> {
        if port != 443 {
            return Err(Refusal::forbidden(format!("CONNECT is allowed to port 443 only, not {port}")));
        }
        let known = self.archives.iter().flat_map(|a| &a.mirrors).any(|m| m.is_on_host(host));
        if known {
            Ok(())
        } else {
            Err(Refusal::forbidden(format!("CONNECT to {host} refused: not a known archive host")))
        }
    }
}

fn parse_mirrors(config: &ArchiveConfig) -> Result<Vec<Mirror>, AptConfigError> {
    let name_ok = !config.name.is_empty()
        && config.name.bytes().all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b"._-".contains(&b));
    if !name_ok {
        return Err(AptConfigError::BadName(config.name.clone()));
    }
    if config.mirrors.is_empty() {
        return Err(AptConfigError::NoMirrors(config.name.clone()));
    }
    config.mirrors.iter().map(|url| parse_mirror(&config.name, url)).collect()
}

fn parse_mirror(archive: &str, url: &str) -> Result<Mirror, AptConfigError> {
    let bad = |reason| AptConfigError::BadMirror { archive: archive.to_string(), url: url.to_string(), reason };
    let uri: http::Uri = url.parse().map_err(|_| bad("not a URL"))?;
    let tls = match uri.scheme_str() {
        Some("http") => false,
        Some("https") => true,
        _ => return Err(bad("must start with http:// or https://")),
    };
    let host = uri.host().ok_or_else(|| bad("has no host"))?;
    if uri.query().is_some() {
        return Err(bad("must not have a query"));
    }
    let prefix = uri.path().trim_end_matches('/');
    crate::path::checked_path(&format!("{prefix}/")).map_err(|_| bad("has a malformed path"))?;
    Ok(Mirror {
        tls,
        host: HostPattern::Exact(host.trim_start_matches('[').trim_end_matches(']').to_ascii_lowercase()),
        port: uri.port_u16().unwrap_or(if tls { 443 } else { 80 }),
        prefix: prefix.to_string(),
    })
}
