//! Turning a proxied apt request into a decision: which archive, which cache
//! key, how it ages, and what its body must match.

use std::net::IpAddr;
use std::time::Duration;

use pkgproxy_cache::{Class, Expected};

use super::archives::Archive;
use percent_encoding::{utf8_percent_encode, AsciiSet, CONTROLS};

use super::archives::Mirror;
use crate::decision::{CachedRequest, DatedResume, Decision, Origin, Refusal, Target};
use crate::decision::{Reply, Wanted};
use crate::id::SideId;
use crate::path::checked_path;

/// Decides a request for `target`; index files fetched by name are served
/// for `index_ttl` before they are revalidated.
pub(super) fn classify(archives: &[Archive], target: &Target, index_ttl: Duration) -> Decision {
    if target.scheme != "http" {
        return Decision::Refuse(Refusal::bad_request("only http:// URLs are proxied (https:// goes through CONNECT)"));
    }
    let path = match checked_path(&target.raw_path) {
        Ok(path) => path,
        Err(refusal) => return Decision::Refuse(refusal),
    };
    for archive in archives {
        for mirror in &archive.mirrors {
            if let Some(relative) = mirror.relative(&target.host, target.port, &path) {
                return decide(archive, mirror, relative, target, index_ttl);
            }
        }
    }
    Decision::Refuse(unknown_target(archives, target))
}

fn unknown_target(archives: &[Archive], target: &Target) -> Refusal {
    let host = &target.host;
    let on_known_host = archives.iter().flat_map(|a| &a.mirrors).any(|m| m.is_on(host, target.port));
    if on_known_host {
        return Refusal::forbidden(format!("{} is not under a known archive on {host}", target.raw_path));
    }
    if let Ok(ip) = host.parse::<IpAddr>() {
        if let Some(kind) = pkgproxy_addr::local_kind(ip) {
            return Refusal::forbidden(format!(
                "{host} is a {kind}: only configured archives may be on local addresses"
            ));
        }
    }
    Refusal::forbidden(format!(
        "{host} is not a known archive host; add it to an [[apt.archive]] in the configuration to proxy it"
    ))
}

fn decide(archive: &Archive, mirror: &Mirror, relative: &str, target: &Target, index_ttl: Duration) -> Decision {
    let (class, expected, dated_resume) = if relative.starts_with("pool/") {
        (Class::Immutable, Expected::default(), DatedResume::Honoured)
    } else if relative.starts_with("dists/") {
        match by_hash(relative) {
            Some(expected) => (Class::Immutable, expected, DatedResume::WholeFile),
            None => (Class::Revalidated, Expected::default(), DatedResume::WholeFile),
        }
    } else {
        return Decision::Refuse(Refusal::forbidden(format!(
            "only dists/ and pool/ of archive {} are proxied",
            archive.name
        )));
    };
    if relative.ends_with('/') {
        return Decision::Refuse(Refusal::forbidden("folder listings are not proxied"));
    }
    let key = format!("apt/{}/{relative}", archive.name);
    let origin = origin(archive, mirror, relative, target);
    Decision::cache(CachedRequest {
        wanted: Wanted { expected, fresh_for: index_ttl, ..Wanted::default() },
        reply: Reply { dated_resume, ..Reply::default() },
        ..CachedRequest::new(SideId::Apt, key, origin, class)
    })
}

/// What a path of the archive is fetched from: the archive's configured
/// mirrors when it has any, else the mirror the client named.
fn origin(archive: &Archive, mirror: &Mirror, relative: &str, target: &Target) -> Origin {
    if archive.pool.is_empty() {
        let Target { host, port, raw_path, .. } = target;
        let host = if host.contains(':') { format!("[{host}]") } else { host.clone() };
        let base = if *port == 80 { format!("http://{host}") } else { format!("http://{host}:{port}") };
        return Origin { pool: format!("{} via {base}", archive.name), instances: vec![base], path: raw_path.clone() };
    }
    let below_prefix = target.raw_path.strip_prefix(mirror.prefix.as_str()).filter(|rest| rest.starts_with('/'));
    let path = match below_prefix {
        Some(rest) => rest.to_string(),
        None => format!("/{}", utf8_percent_encode(relative, PATH_ESCAPES)),
    };
    Origin { pool: archive.name.clone(), instances: archive.pool.clone(), path }
}

/// Bytes escaped when a decoded archive path is sent upstream.
const PATH_ESCAPES: &AsciiSet = &CONTROLS.add(b' ').add(b'"').add(b'#').add(b'%').add(b'?').add(b'<').add(b'>');

/// For `dists/**/by-hash/<ALGORITHM>/<hex>`: any path is immutable, and the
/// hash in it is what the body must match (for the algorithms we check).
fn by_hash(relative: &str) -> Option<Expected> {
    let (_, tail) = relative.rsplit_once("/by-hash/")?;
    let (algorithm, hash) = tail.split_once('/')?;
    let hex_of = |len: usize| {
        (hash.len() == len && hash.bytes().all(|b| b.is_ascii_hexdigit())).then(|| hash.to_ascii_lowercase())
    };
    let mut expected = Expected::default();
    match algorithm {
        "SHA256" => expected.sha256 = hex_of(64),
        "SHA512" => expected.sha512 = hex_of(128),
        _ => {}
    }
    Some(expected)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::apt::{ArchiveConfig, Config, DEFAULT_INDEX_TTL};
    use crate::decision::expect::{cached, refused};

    fn side() -> Config {
        let local = ArchiveConfig {
            name: "local".into(),
            mirrors: vec!["http://127.0.0.1:8001/debian".into(), "http://127.0.0.1:8002/debian/".into()],
        };
        Config::new(&[local], DEFAULT_INDEX_TTL).unwrap()
    }

    fn target(host: &str, port: u16, path: &str) -> Target {
        Target { scheme: "http".into(), host: host.into(), port, raw_path: path.into() }
    }

    #[test]
    fn equivalent_debian_mirrors_share_one_key() {
        let side = side();
        let path = "/debian/pool/main/h/hello/hello_2.10-3_amd64.deb";
        let keys: Vec<String> = ["deb.debian.org", "ftp.de.debian.org", "httpredir.debian.org", "ftp.debian.org"]
            .iter()
            .map(|host| cached(side.classify(&target(host, 80, path))).key)
            .collect();
        assert!(keys.iter().all(|k| k == "apt/debian/pool/main/h/hello/hello_2.10-3_amd64.deb"), "{keys:?}");
    }

    #[test]
    fn ubuntu_mirrors_share_one_key_and_ports_is_its_own_archive() {
        let side = side();
        let path = "/ubuntu/dists/noble/InRelease";
        let a = cached(side.classify(&target("archive.ubuntu.com", 80, path))).key;
        let b = cached(side.classify(&target("de.archive.ubuntu.com", 80, path))).key;
        let c = cached(side.classify(&target("security.ubuntu.com", 80, path))).key;
        assert_eq!(a, b);
        assert_eq!(a, c);
        let ports = cached(side.classify(&target("ports.ubuntu.com", 80, "/ubuntu-ports/dists/noble/InRelease"))).key;
        assert_eq!(ports, "apt/ubuntu-ports/dists/noble/InRelease");
    }

    #[test]
    fn configured_mirrors_share_one_key_and_are_the_instances_of_its_pool() {
        let side = side();
        let a = cached(side.classify(&target("127.0.0.1", 8001, "/debian/dists/testing/InRelease")));
        let b = cached(side.classify(&target("127.0.0.1", 8002, "/debian/dists/testing/InRelease")));
        assert_eq!(a.key, b.key);
        assert_eq!(a.key, "apt/local/dists/testing/InRelease");
        let expected = ["http://127.0.0.1:8001/debian", "http://127.0.0.1:8002/debian"];
        assert_eq!(a.origin.instances, expected, "every configured mirror is an instance");
        assert_eq!(b.origin.instances, expected);
        assert_eq!(b.origin.path, "/dists/testing/InRelease");
        let named = cached(side.classify(&target("ftp.de.debian.org", 80, "/debian/pool/main/a/a.deb"))).origin;
        assert_eq!(named.instances, ["http://ftp.de.debian.org"], "an archive without configured mirrors");
        assert_eq!(named.path, "/debian/pool/main/a/a.deb");
    }

    #[test]
    fn pool_and_by_hash_are_immutable_other_dists_revalidated() {
        let side = side();
        let pool = cached(side.classify(&target("deb.debian.org", 80, "/debian/pool/main/a/a.deb")));
        assert_eq!(pool.class, Class::Immutable);
        let index = cached(side.classify(&target(
            "deb.debian.org",
            80,
            "/debian/dists/bookworm/main/binary-amd64/Packages.xz",
        )));
        assert_eq!(index.class, Class::Revalidated);
        let release = cached(side.classify(&target("deb.debian.org", 80, "/debian/dists/bookworm/InRelease")));
        assert_eq!(release.class, Class::Revalidated);
        let sha = "a".repeat(128);
        let by_hash = cached(side.classify(&target(
            "deb.debian.org",
            80,
            &format!("/debian/dists/bookworm/main/binary-amd64/by-hash/SHA512/{sha}"),
        )));
        assert_eq!(by_hash.class, Class::Immutable);
        assert_eq!(by_hash.wanted.expected.sha512.as_deref(), Some(sha.as_str()));
    }

    #[test]
    fn foreign_hosts_and_non_archive_paths_are_forbidden() {
        let side = side();
        assert_eq!(refused(side.classify(&target("example.com", 80, "/debian/pool/a.deb"))).status, 403);
        assert_eq!(refused(side.classify(&target("deb.debian.org", 80, "/debian/README"))).status, 403);
        assert_eq!(refused(side.classify(&target("deb.debian.org", 80, "/etc/passwd"))).status, 403);
        assert_eq!(refused(side.classify(&target("deb.debian.org", 8080, "/debian/pool/a.deb"))).status, 403);
    }

    #[test]
    fn local_targets_are_forbidden_unless_configured() {
        let side = side();
        let loopback = refused(side.classify(&target("127.0.0.1", 9999, "/debian/pool/a.deb")));
        assert_eq!(loopback.status, 403);
        assert!(loopback.reason.contains("loopback"), "{}", loopback.reason);
        let link_local = refused(side.classify(&target("169.254.169.254", 80, "/debian/pool/a.deb")));
        assert!(link_local.reason.contains("link-local"), "{}", link_local.reason);
        let v6 = refused(side.classify(&target("fe80::1", 80, "/debian/pool/a.deb")));
        assert!(v6.reason.contains("link-local"), "{}", v6.reason);
    }

    #[test]
    fn climbing_paths_are_bad_requests() {
        let side = side();
        assert_eq!(refused(side.classify(&target("deb.debian.org", 80, "/debian/pool/../../etc/passwd"))).status, 400);
        assert_eq!(refused(side.classify(&target("deb.debian.org", 80, "/debian/pool/%2e%2e/x"))).status, 400);
    }

    #[test]
    fn archive_hosts_are_known_for_tunnels() {
        let side = side();
        assert!(side.serves_host("deb.debian.org"));
        assert!(side.serves_host("ftp.fr.debian.org"));
        assert!(!side.serves_host("example.com"));
    }

    #[test]
    fn bad_archive_configuration_is_refused() {
        let bad = |name: &str, mirrors: &[&str]| {
            Config::new(
                &[ArchiveConfig { name: name.into(), mirrors: mirrors.iter().map(|m| m.to_string()).collect() }],
                DEFAULT_INDEX_TTL,
            )
            .unwrap_err()
        };
        assert!(matches!(bad("Bad Name", &["http://x/debian"]), ConfigError::BadName(_)));
        assert!(matches!(bad("x", &[]), ConfigError::NoMirrors(_)));
        assert!(matches!(bad("x", &["ftp://x/debian"]), ConfigError::BadMirror { .. }));
        assert!(matches!(bad("x", &["http://x/debian?q=1"]), ConfigError::BadMirror { .. }));
    }

    #[test]
    fn an_https_mirror_is_an_instance_of_its_archive_s_pool() {
        let configs = [ArchiveConfig {
            name: "debian".into(),
            mirrors: vec!["https://mirror.example.net/debian/".into(), "https://other.example.net:8443/debian".into()],
        }];
        let side = Config::new(&configs, DEFAULT_INDEX_TTL).unwrap();
        let origin = cached(side.classify(&target("deb.debian.org", 80, "/debian/pool/main/a/a.deb"))).origin;
        assert_eq!(origin.instances, ["https://mirror.example.net/debian", "https://other.example.net:8443/debian"]);
        assert_eq!(origin.path, "/pool/main/a/a.deb");
    }

    use crate::apt::ConfigError;
}
