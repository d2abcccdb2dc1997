//! The archives pkgproxy knows: each a name and the URL prefixes of its
//! equivalent mirrors. Every mirror of an archive serves the same files under
//! the same paths, so a file from any of them has one cache entry.

use std::fmt;

/// How a mirror's host is matched.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum HostPattern {
    /// Exactly this host (lower case).
    Exact(String),
    /// A two-letter country label followed by this suffix, e.g.
    /// `ftp.` + cc + `.debian.org` is `Country { prefix: "ftp.", suffix: ".debian.org" }`.
    Country {
        /// What comes before the country code.
        prefix: &'static str,
        /// What comes after it.
        suffix: &'static str,
    },
}

impl HostPattern {
    fn matches(&self, host: &str) -> bool {
        match self {
            HostPattern::Exact(exact) => exact == host,
            HostPattern::Country { prefix, suffix } => host
                .strip_prefix(prefix)
                .and_then(|rest| rest.strip_suffix(suffix))
                .is_some_and(|cc| cc.len() == 2 && cc.bytes().all(|b| b.is_ascii_lowercase())),
        }
    }
}

/// One mirror of an archive: `http[s]://HOST[:PORT]/PREFIX`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Mirror {
    /// Fetched over TLS (`https://`, configured mirrors only). apt asks
    /// pkgproxy for `http://` URLs, so such a mirror serves as an instance
    /// of its archive's pool rather than as a name apt uses.
    pub tls: bool,
    /// The host or host pattern.
    pub host: HostPattern,
    /// The port (80 for the built-in mirrors).
    pub port: u16,
    /// The path the archive lives under, without a trailing slash (`/debian`,
    /// or empty for an archive at the root).
    pub prefix: String,
}

impl Mirror {
    /// The archive-relative path of a request to this mirror, or `None` when
    /// the request is not for this mirror.
    pub fn relative<'p>(&self, host: &str, port: u16, path: &'p str) -> Option<&'p str> {
        if port != self.port || !self.host.matches(host) {
            return None;
        }
        path.strip_prefix(self.prefix.as_str())?.strip_prefix('/')
    }

    /// True when the mirror lives on `host:port` (any path).
    pub fn is_on(&self, host: &str, port: u16) -> bool {
        self.port == port && self.host.matches(host)
    }

    /// True when the mirror lives on `host` (any port, any path).
    pub fn is_on_host(&self, host: &str) -> bool {
        self.host.matches(host)
    }
}

impl fmt::Display for Mirror {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let scheme = if self.tls { "https" } else { "http" };
        match &self.host {
            HostPattern::Exact(host) if host.contains(':') => write!(f, "{scheme}://[{host}]")?,
            HostPattern::Exact(host) => write!(f, "{scheme}://{host}")?,
            HostPattern::Country { prefix, suffix } => write!(f, "{scheme}://{prefix}<cc>{suffix}")?,
        }
        let default_port = if self.tls { 443 } else { 80 };
        if self.port != default_port {
            write!(f, ":{}", self.port)?;
        }
        write!(f, "{}", self.prefix)
    }
}

/// An archive: a name (used in cache keys) and its mirrors.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Archive {
    /// The name; cache keys are `apt/<name>/<path>`.
    pub name: String,
    /// Its equivalent mirrors.
    pub mirrors: Vec<Mirror>,
    /// True when the operator configured it (or added mirrors to it): its
    /// hosts may then be on local addresses.
    pub configured: bool,
    /// The base URLs of the mirrors the operator configured, in order: when
    /// there are any, they are the instances every request for the archive
    /// is fetched from, whichever mirror the client named.
    pub pool: Vec<String>,
}

fn exact(host: &str, prefix: &str) -> Mirror {
    Mirror { tls: false, host: HostPattern::Exact(host.to_string()), port: 80, prefix: prefix.to_string() }
}

fn country(prefix: &'static str, suffix: &'static str, path: &str) -> Mirror {
    Mirror { tls: false, host: HostPattern::Country { prefix, suffix }, port: 80, prefix: path.to_string() }
}

fn archive(name: &str, mirrors: Vec<Mirror>) -> Archive {
    Archive { name: name.to_string(), mirrors, configured: false, pool: Vec::new() }
}

/// The built-in archives: Debian and Ubuntu with their usual mirror names.
pub fn builtin() -> Vec<Archive> {
    vec![
        archive(
            "debian",
            vec![
                exact("deb.debian.org", "/debian"),
                exact("ftp.debian.org", "/debian"),
                exact("httpredir.debian.org", "/debian"),
                exact("http.debian.net", "/debian"),
                exact("cdn-fastly.deb.debian.org", "/debian"),
                exact("cloudfront.debian.net", "/debian"),
                country("ftp.", ".debian.org", "/debian"),
                country("ftp2.", ".debian.org", "/debian"),
            ],
        ),
        archive(
            "debian-security",
            vec![
                exact("security.debian.org", "/debian-security"),
                exact("deb.debian.org", "/debian-security"),
                exact("cdn-fastly.deb.debian.org", "/debian-security"),
                exact("security-cdn.debian.org", "/debian-security"),
            ],
        ),
        archive(
            "debian-debug",
            vec![exact("deb.debian.org", "/debian-debug"), exact("debug.mirrors.debian.org", "/debian-debug")],
        ),
        archive(
            "debian-archive",
            vec![exact("archive.debian.org", "/debian"), exact("archive.debian.org", "/debian-archive")],
        ),
        archive(
            "ubuntu",
            vec![
                exact("archive.ubuntu.com", "/ubuntu"),
                exact("security.ubuntu.com", "/ubuntu"),
                country("", ".archive.ubuntu.com", "/ubuntu"),
            ],
        ),
        archive(
            "ubuntu-ports",
            vec![exact("ports.ubuntu.com", "/ubuntu-ports"), country("", ".ports.ubuntu.com", "/ubuntu-ports")],
        ),
        archive("ubuntu-old-releases", vec![exact("old-releases.ubuntu.com", "/ubuntu")]),
    ]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn country_mirrors_match_two_letter_codes_only() {
        let m = country("ftp.", ".debian.org", "/debian");
        assert!(m.is_on_host("ftp.de.debian.org"));
        assert!(!m.is_on_host("ftp.debian.org"));
        assert!(!m.is_on_host("ftp.evil.debian.org"));
        assert!(!m.is_on_host("ftp.de.debian.org.evil.com"));
        let u = country("", ".archive.ubuntu.com", "/ubuntu");
        assert!(u.is_on_host("fr.archive.ubuntu.com"));
        assert!(!u.is_on_host("archive.ubuntu.com"));
    }

    #[test]
    fn relative_path_needs_the_whole_prefix_segment() {
        let m = exact("deb.debian.org", "/debian");
        assert_eq!(m.relative("deb.debian.org", 80, "/debian/pool/x.deb"), Some("pool/x.deb"));
        assert_eq!(m.relative("deb.debian.org", 80, "/debian-security/pool/x.deb"), None);
        assert_eq!(m.relative("deb.debian.org", 8080, "/debian/pool/x.deb"), None);
    }
}
