//! `[mirror.NAME]` of the configuration file, validated: every bad value
//! refuses to start with a message naming the key.

use std::time::Duration;

use http::{HeaderValue, Method};

use crate::config::MirrorSection;

/// Which requests a mirror copies.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Step {
    /// Every request of its sides, as it arrives.
    Request,
    /// Only what goes to the upstream: misses and revalidations.
    Upstream,
}

/// The sides a mirror may name: those pkgproxy has or is designed to have
/// (requests of a side not built yet never arrive).
pub const SIDE_NAMES: [&str; 5] = ["apt", "snap", "go", "registry", "lxd"];

/// One mirror's settings.
#[derive(Debug, Clone, PartialEq)]
pub struct MirrorConfig {
    /// Its name, `NAME` of `[mirror.NAME]`.
    pub name: String,
    /// Where copies go: `http[s]://host[:port][/prefix]`.
    pub target: String,
    /// The target's host (trusted by the address policy: targets are
    /// usually local).
    pub target_host: String,
    /// The sides whose requests are copied.
    pub sides: Vec<String>,
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
pub struct MirrorConfigError {
    /// The mirror.
    pub name: String,
    /// The key at fault.
    pub key: &'static str,
    /// Why.
    pub reason: String,
}

impl MirrorConfig {
    /// Validates `[mirror.name]`.
    pub fn new(name: &str, section: &MirrorSection) -> Result<Self, MirrorConfigError> {
        let bad = |key: &'static str, reason: String| MirrorConfigError { name: name.to_string(), key, reason };
        let (target, target_host) = target(&section.target).map_err(|reason| bad("target", reason.to_string()))?;
        let sides = section.sides.clone().unwrap_or_else(|| SIDE_NAMES.iter().map(|s| s.to_string()).collect());
        if let Some(unknown) = sides.iter().find(|s| !SIDE_NAMES.contains(&s.as_str())) {
            return Err(bad("sides", format!("unknown side {unknown:?} (known: {})", SIDE_NAMES.join(", "))));
        }
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
        Ok(MirrorConfig {
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

/// A size as written: a number of bytes, or text like `"64kb"`, `"1.5 MiB"`,
/// `"0"`. `kb`, `mb`, `gb` are powers of 1000, `kib`, `mib`, `gib` of 1024.
pub fn parse_size(text: &str) -> Result<u64, String> {
    let text = text.trim();
    let split = text.find(|c: char| !(c.is_ascii_digit() || c == '.')).unwrap_or(text.len());
    let (number, unit) = text.split_at(split);
    let number: f64 = number.parse().map_err(|_| format!("{text:?} is not a size like \"64kb\""))?;
    let factor: u64 = match unit.trim().to_ascii_lowercase().as_str() {
        "" | "b" => 1,
        "k" | "kb" => 1_000,
        "kib" => 1 << 10,
        "m" | "mb" => 1_000_000,
        "mib" => 1 << 20,
        "g" | "gb" => 1_000_000_000,
        "gib" => 1 << 30,
        _ => return Err(format!("{text:?}: unknown unit {unit:?} (b, kb, kib, mb, mib, gb, gib)")),
    };
    let bytes = number * factor as f64;
    if !bytes.is_finite() || bytes > u64::MAX as f64 {
        return Err(format!("{text:?} is too large"));
    }
    Ok(bytes.round() as u64)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::ConfigFile;

    fn mirror(toml: &str) -> Result<MirrorConfig, MirrorConfigError> {
        let file = ConfigFile::parse(toml).unwrap();
        let (name, section) = file.mirror.iter().next().unwrap();
        MirrorConfig::new(name, section)
    }

    #[test]
    fn defaults_follow_the_seed() {
        let config = mirror("[mirror.shadow]\ntarget = \"http://127.0.0.1:3143/\"\n").unwrap();
        assert_eq!(config.target, "http://127.0.0.1:3143");
        assert_eq!(config.percentage, 100);
        assert_eq!(config.methods, [Method::GET, Method::HEAD]);
        assert_eq!(config.max_body_size, 0);
        assert_eq!(config.timeout, Duration::from_secs(5));
        assert_eq!(config.max_inflight, 100);
        assert_eq!(config.step, Step::Request);
        assert!(!config.compare);
        assert_eq!(config.sides.len(), SIDE_NAMES.len());
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

    #[test]
    fn sizes_parse_with_units() {
        assert_eq!(parse_size("0"), Ok(0));
        assert_eq!(parse_size("64kb"), Ok(64_000));
        assert_eq!(parse_size("64 KiB"), Ok(65_536));
        assert_eq!(parse_size("1.5mb"), Ok(1_500_000));
        assert_eq!(parse_size("2048"), Ok(2048));
        assert!(parse_size("kb").is_err());
        assert!(parse_size("-1").is_err());
    }
}
