//! `[mirror.NAME]` of the configuration file, validated: traffic mirroring,
//! a copy of requests sent to a shadow target. Every bad value refuses to
//! start with a message naming the key.

use std::time::Duration;

use http::{HeaderValue, Method};

use pkgproxy_sides::SideId;

use crate::config::ShadowSection;

/// Which requests a mirror copies.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Step {
    /// Every request of its sides, as it arrives.
    Request,
    /// Only what goes to the upstream: misses and revalidations.
    Upstream,
}

/// One mirror's settings.
#[derive(Debug, Clone, PartialEq)]
pub struct ShadowConfig {
    /// Its name, `NAME` of `[mirror.NAME]`.
    pub name: String,
    /// Where copies go: `http[s]://host[:port][/prefix]`.
    pub target: String,
    /// The target's host (trusted by the address policy: targets are
    /// usually local).
    pub target_host: String,
    /// The sides whose requests are copied.
    pub sides: Vec<SideId>,
    /// The share of requests copied, 0 to 100.
    pub percentage: u32,
    /// The methods copied.
    pub methods: Vec<Method>,
    /// The largest request body copied; 0: requests with a body are not.
    pub max_body_size: u64,
    /// How long a copy may take, its answer included.
    pub timeout: Duration,
    /// Copies under way at one time.
    pub max_inflight: usize,
    /// The `Host` of the copies (unset: the request's).
    pub host: Option<HeaderValue>,
    /// Whether the mirror's statuses are set against the upstream's.
    pub compare: bool,
    /// Which requests are copied.
    pub step: Step,
    /// Seeds the sampling of `percentage` (tests); `None`: from the system.
    pub seed: Option<u64>,
}

/// A `[mirror.NAME]` that cannot be used.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
#[error("mirror.{name}.{key}: {reason}")]
pub struct ShadowConfigError {
    /// `NAME` of the `[mirror.NAME]` at fault.
    pub name: String,
    /// The key at fault.
    pub key: &'static str,
    /// What is wrong with its value, for people.
    pub reason: String,
}

impl ShadowConfig {
    /// Validates `[mirror.name]`.
    pub fn new(name: &str, section: &ShadowSection) -> Result<Self, ShadowConfigError> {
        let bad = |key: &'static str, reason: String| ShadowConfigError { name: name.to_string(), key, reason };
        let (target, target_host) = target(&section.target).map_err(|reason| bad("target", reason.to_string()))?;
        let sides = match &section.sides {
            None => SideId::ALL.to_vec(),
            Some(names) => {
                names.iter().map(|name| side(name)).collect::<Result<_, _>>().map_err(|r| bad("sides", r))?
            }
        };
        let percentage = section.percentage.unwrap_or(100);
        if percentage > 100 {
            return Err(bad("percentage", format!("{percentage} is not 0 to 100")));
        }
        let methods = section.methods.clone().unwrap_or_else(|| vec!["GET".to_string(), "HEAD".to_string()]);
        let methods = methods
            .iter()
            .map(|m| Method::from_bytes(m.to_ascii_uppercase().as_bytes()))
            .collect::<Result<Vec<_>, _>>()
            .map_err(|_| bad("methods", "a method is not a valid HTTP method".to_string()))?;
        let max_body_size = match &section.max_body_size {
            None => 0,
            Some(size) => size.bytes().map_err(|reason| bad("max_body_size", reason))?,
        };
        let timeout = section.timeout.unwrap_or(Duration::from_secs(5));
        if timeout.is_zero() {
            return Err(bad("timeout", "must be longer than zero".to_string()));
        }
        let max_inflight = section.max_inflight.unwrap_or(100);
        if max_inflight == 0 {
            return Err(bad("max_inflight", "must be at least 1".to_string()));
        }
        let host = match &section.host {
            None => None,
            Some(host) => {
                Some(HeaderValue::from_str(host).map_err(|_| bad("host", format!("{host:?} is not a valid Host")))?)
            }
        };
        let step = match section.step.as_deref() {
            None | Some("request") => Step::Request,
            Some("upstream") => Step::Upstream,
            Some(other) => return Err(bad("step", format!("{other:?} is not \"request\" or \"upstream\""))),
        };
        Ok(ShadowConfig {
            name: name.to_string(),
            target,
            target_host,
            sides,
            percentage,
            methods,
            max_body_size,
            timeout,
            max_inflight,
            host,
            compare: section.compare.unwrap_or(false),
            step,
            seed: None,
        })
    }
}

/// The side named `name`.
fn side(name: &str) -> Result<SideId, String> {
    SideId::from_name(name).ok_or_else(|| {
        let known: Vec<&str> = SideId::ALL.iter().map(|side| side.as_str()).collect();
        format!("unknown side {name:?} (known: {})", known.join(", "))
    })
}

/// Checks a target URL; returns it without a trailing slash, and its host.
fn target(url: &str) -> Result<(String, String), &'static str> {
    let uri: http::Uri = url.parse().map_err(|_| "not a URL")?;
    if !matches!(uri.scheme_str(), Some("http" | "https")) {
        return Err("must start with http:// or https://");
    }
    let host = uri.host().filter(|h| !h.is_empty()).ok_or("has no host")?;
    if uri.query().is_some() {
        return Err("must not have a query");
    }
    let host = host.trim_start_matches('[').trim_end_matches(']').to_ascii_lowercase();
    Ok((url.trim_end_matches('/').to_string(), host))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::ConfigFile;

    fn mirror(toml: &str) -> Result<ShadowConfig, ShadowConfigError> {
        let file = ConfigFile::parse(toml).unwrap();
        let (name, section) = file.mirror.iter().next().unwrap();
        ShadowConfig::new(name, section)
    }

    #[test]
    fn defaults_are_the_documented_ones() {
        let config = mirror("[mirror.shadow]\ntarget = \"http://127.0.0.1:3143/\"\n").unwrap();
        assert_eq!(config.target, "http://127.0.0.1:3143");
        assert_eq!(config.percentage, 100);
        assert_eq!(config.methods, [Method::GET, Method::HEAD]);
        assert_eq!(config.max_body_size, 0);
        assert_eq!(config.timeout, Duration::from_secs(5));
        assert_eq!(config.max_inflight, 100);
        assert_eq!(config.step, Step::Request);
        assert!(!config.compare);
        assert_eq!(config.sides.len(), SideId::ALL.len());
    }

    #[test]
    fn bad_values_name_their_key() {
        let cases = [
            ("target = \"ftp://x\"", "mirror.s.target"),
            ("target = \"http://x/?q=1\"", "mirror.s.target"),
            ("target = \"http://x\"\npercentage = 101", "mirror.s.percentage"),
            ("target = \"http://x\"\nsides = [\"pip\"]", "mirror.s.sides"),
            ("target = \"http://x\"\nmethods = [\"GE T\"]", "mirror.s.methods"),
            ("target = \"http://x\"\nmax_body_size = \"64 parsecs\"", "mirror.s.max_body_size"),
            ("target = \"http://x\"\nmax_inflight = 0", "mirror.s.max_inflight"),
            ("target = \"http://x\"\nstep = \"proxy\"", "mirror.s.step"),
            ("target = \"http://x\"\ntimeout = \"0s\"", "mirror.s.timeout"),
        ];
        for (body, key) in cases {
            let error = mirror(&format!("[mirror.s]\n{body}\n")).unwrap_err().to_string();
            assert!(error.starts_with(key), "{body}: {error}");
        }
        let error = ConfigFile::parse("[mirror.s]\ntarget = \"http://x\"\nmax_inflite = 3\n").unwrap_err();
        assert!(error.contains("max_inflite"), "{error}");
        let error = ConfigFile::parse("[mirror.s]\npercentage = 5\n").unwrap_err();
        assert!(error.contains("target"), "{error}");
    }
}
