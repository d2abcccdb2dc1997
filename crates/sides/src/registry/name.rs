//! Where a registry request goes: the upstream registry, the repository
//! and what of it, read from the path below `/v2` and containerd's `?ns=`,
//! checked against the distribution spec's grammar before anything is
//! asked upstream (a malformed name or digest is the client's `400`, never
//! an upstream's answer passed on).
//!
//! The registry is named by a path prefix (`/v2/ghcr.io/owner/img/...`: a
//! first component with a dot or a colon, or `localhost`, as image
//! references name a registry), else by `?ns=` (both given must agree),
//! else it is Docker Hub, whose one-component names are `library/NAME` and
//! whose three host names are one registry.

use crate::decision::Refusal;

/// The registry a name without one is on.
pub const DOCKER_HUB: &str = "docker.io";
/// Docker Hub's other names.
const DOCKER_HUB_ALIASES: [&str; 2] = ["index.docker.io", "registry-1.docker.io"];

/// A content digest, checked.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Digest {
    /// `sha256` or `sha512`: the algorithms pkgproxy verifies.
    pub algorithm: &'static str,
    /// The lower-case hex.
    pub hex: String,
}

impl std::fmt::Display for Digest {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}:{}", self.algorithm, self.hex)
    }
}

impl Digest {
    /// Parses `algorithm:hex`.
    pub fn parse(text: &str) -> Result<Digest, Refusal> {
        let invalid =
            |why: &str| Refusal::bad_request(format!("{text:?} is not a digest: {why}")).with_code("DIGEST_INVALID");
        let (algorithm, hex) = text.split_once(':').ok_or_else(|| invalid("no algorithm"))?;
        let (algorithm, length) = match algorithm {
            "sha256" => ("sha256", 64),
            "sha512" => ("sha512", 128),
            _ => return Err(invalid("only sha256 and sha512 are supported")),
        };
        if hex.len() != length || !hex.bytes().all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b)) {
            return Err(invalid(&format!("{algorithm} takes {length} lower-case hex digits")));
        }
        Ok(Digest { algorithm, hex: hex.to_string() })
    }
}

/// A manifest's reference: a tag, or a digest.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Reference {
    /// A tag, which moves.
    Tag(String),
    /// A digest, which does not.
    Digest(Digest),
}

/// What a request asks of a repository.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Endpoint {
    /// `manifests/<reference>`.
    Manifest(Reference),
    /// `blobs/<digest>`.
    Blob(Digest),
    /// `tags/list`.
    Tags,
}

/// A request located: which registry, which repository, what.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Located {
    /// The registry as clients name it (`docker.io`, `ghcr.io`).
    pub registry: String,
    /// The repository on it (`library/alpine`).
    pub repository: String,
    /// What is asked.
    pub endpoint: Endpoint,
}

/// Locates `path` (below `/v2`, starting with `/`), with containerd's `ns`.
pub fn locate(path: &str, ns: Option<&str>) -> Result<Located, Refusal> {
    let rest = path.strip_prefix('/').unwrap_or(path);
    let (name, endpoint) = split_endpoint(rest)?;
    let (prefix, repository) = match name.split_once('/') {
        Some((first, rest)) if names_a_registry(first) => (Some(canonical(first)), rest),
        _ => (None, name),
    };
    let registry = match (prefix, ns.map(canonical)) {
        (Some(prefix), Some(ns)) if prefix != ns => {
            return Err(name_invalid(format!("the path names registry {prefix} but ns names {ns}")))
        }
        (Some(registry), _) | (None, Some(registry)) => registry,
        (None, None) => DOCKER_HUB,
    };
    if !is_repository(repository) {
        return Err(name_invalid(format!("{repository:?} is not a repository name")));
    }
    let repository = match (registry, repository.contains('/')) {
        (DOCKER_HUB, false) => format!("library/{repository}"),
        _ => repository.to_string(),
    };
    Ok(Located { registry: registry.to_string(), repository, endpoint })
}

/// The name and the endpoint of `rest` (`NAME/manifests/REF`, ...).
fn split_endpoint(rest: &str) -> Result<(&str, Endpoint), Refusal> {
    if let Some(name) = rest.strip_suffix("/tags/list") {
        return Ok((name, Endpoint::Tags));
    }
    let unknown = || Refusal::not_found(format!("/v2/{rest} is not a pull endpoint")).with_code("UNSUPPORTED");
    let (name, kind, reference) = ["manifests", "blobs"]
        .iter()
        .filter_map(|kind| {
            let (name, reference) = rest.rsplit_once(&format!("/{kind}/"))?;
            Some((name, *kind, reference))
        })
        .next()
        .ok_or_else(unknown)?;
    if reference.contains('/') || reference.is_empty() {
        return Err(unknown());
    }
    let endpoint = match kind {
        "blobs" => Endpoint::Blob(Digest::parse(reference)?),
        _ if reference.contains(':') => Endpoint::Manifest(Reference::Digest(Digest::parse(reference)?)),
        _ if is_tag(reference) => Endpoint::Manifest(Reference::Tag(reference.to_string())),
        // No manifest has such a name: the spec's answer to a manifest a
        // repository does not hold, given here without asking upstream.
        _ => {
            let reason = format!("{reference:?} is not a tag: no manifest has that name");
            return Err(Refusal::not_found(reason).with_code("MANIFEST_UNKNOWN"));
        }
    };
    Ok((name, endpoint))
}

fn name_invalid(reason: String) -> Refusal {
    Refusal::bad_request(reason).with_code("NAME_INVALID")
}

/// The registry's name as pkgproxy knows it: Docker Hub's aliases are one.
pub fn canonical(name: &str) -> &str {
    match DOCKER_HUB_ALIASES.contains(&name) {
        true => DOCKER_HUB,
        false => name,
    }
}

/// Whether a name's first component names a registry, as image references
/// do: a host name with a dot, a port, or `localhost`.
fn names_a_registry(component: &str) -> bool {
    let alnum = |b: Option<&u8>| b.is_some_and(|b| b.is_ascii_lowercase() || b.is_ascii_digit());
    let bytes = component.as_bytes();
    (component.contains('.') || component.contains(':') || component == "localhost")
        && alnum(bytes.first())
        && alnum(bytes.last())
        && component.bytes().all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || matches!(b, b'.' | b'-' | b':'))
}

/// The spec's repository grammar: components of lower-case letters and
/// digits joined by `.`, `_`, `__` or runs of `-`, separated by `/`.
fn is_repository(name: &str) -> bool {
    name.len() <= 255 && !name.is_empty() && name.split('/').all(is_component)
}

fn is_component(component: &str) -> bool {
    let bytes = component.as_bytes();
    let alnum = |b: &u8| b.is_ascii_lowercase() || b.is_ascii_digit();
    if bytes.is_empty() || !alnum(&bytes[0]) || !alnum(&bytes[bytes.len() - 1]) {
        return false;
    }
    // Separators between alphanumerics: `.`, `_`, `__`, or any run of `-`.
    component
        .split(|c: char| c.is_ascii_lowercase() || c.is_ascii_digit())
        .filter(|separator| !separator.is_empty())
        .all(|separator| matches!(separator, "." | "_" | "__") || separator.bytes().all(|b| b == b'-'))
        && bytes.iter().all(|b| alnum(b) || matches!(b, b'.' | b'_' | b'-'))
}

/// The spec's tag grammar: `[a-zA-Z0-9_][a-zA-Z0-9._-]{0,127}`.
fn is_tag(tag: &str) -> bool {
    let bytes = tag.as_bytes();
    !bytes.is_empty()
        && bytes.len() <= 128
        && (bytes[0].is_ascii_alphanumeric() || bytes[0] == b'_')
        && bytes.iter().all(|b| b.is_ascii_alphanumeric() || matches!(b, b'_' | b'.' | b'-'))
}

#[cfg(test)]
mod tests {
    use super::*;

    const HEX: &str = "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855";

    fn located(path: &str, ns: Option<&str>) -> (String, String, Endpoint) {
        let located = locate(path, ns).unwrap();
        (located.registry, located.repository, located.endpoint)
    }

    fn code(path: &str, ns: Option<&str>) -> (u16, &'static str) {
        let refusal = locate(path, ns).unwrap_err();
        (refusal.status.as_u16(), refusal.code.unwrap())
    }

    #[test]
    fn the_registry_comes_from_the_path_then_ns_then_docker_hub() {
        let tag = |t: &str| Endpoint::Manifest(Reference::Tag(t.into()));
        assert_eq!(located("/alpine/manifests/3.20", None), ("docker.io".into(), "library/alpine".into(), tag("3.20")));
        assert_eq!(located("/library/hello/manifests/v1", Some("docker.io")).1, "library/hello");
        assert_eq!(located("/owner/img/manifests/v1", Some("ghcr.io")).0, "ghcr.io");
        assert_eq!(located("/ghcr.io/owner/img/manifests/v1", None), ("ghcr.io".into(), "owner/img".into(), tag("v1")));
        assert_eq!(located("/ghcr.io/owner/img/manifests/v1", Some("ghcr.io")).0, "ghcr.io");
        assert_eq!(located("/registry-1.docker.io/alpine/manifests/v1", Some("docker.io")).1, "library/alpine");
        assert_eq!(located(&format!("/localhost:5000/x/blobs/sha256:{HEX}"), None).0, "localhost:5000");
        assert_eq!(located("/owner/img/manifests/v1", Some("index.docker.io")).0, "docker.io");
        assert_eq!(code("/ghcr.io/owner/img/manifests/v1", Some("quay.io")), (400, "NAME_INVALID"));
    }

    #[test]
    fn digests_and_names_are_checked_by_the_spec_s_grammar() {
        let blob = format!("/library/hello/blobs/sha256:{HEX}");
        assert_eq!(located(&blob, None).2, Endpoint::Blob(Digest { algorithm: "sha256", hex: HEX.into() }));
        assert_eq!(code("/library/hello/blobs/sha256:abc", None), (400, "DIGEST_INVALID"));
        assert_eq!(code(&format!("/library/hello/blobs/sha256:{}", HEX.to_uppercase()), None), (400, "DIGEST_INVALID"));
        assert_eq!(code("/library/hello/blobs/md5:abc", None), (400, "DIGEST_INVALID"));
        assert_eq!(code("/library/hello/blobs/latest", None), (400, "DIGEST_INVALID"));
        assert_eq!(code("/library/hello/manifests/sha256:zz", None), (400, "DIGEST_INVALID"));
        assert_eq!(code("/library/hello/manifests/-bad", None), (404, "MANIFEST_UNKNOWN"), "no such tag can exist");
        assert_eq!(code("/library/hello/manifests/.INVALID_MANIFEST_NAME", None), (404, "MANIFEST_UNKNOWN"));
        assert_eq!(code("/Library/hello/manifests/v1", None), (400, "NAME_INVALID"));
        assert_eq!(code("/library/hel..lo/manifests/v1", None), (400, "NAME_INVALID"));
        assert_eq!(code("/library//hello/manifests/v1", None), (400, "NAME_INVALID"));
        assert_eq!(code("/library/hello/referrers/x", None), (404, "UNSUPPORTED"));
        assert!(locate("/a__b/c-----d/e.f_g/manifests/v1", None).is_ok());
        for dotted in ["/./library/alpine/manifests/v1", "/../library/alpine/manifests/v1", "/.lan/x/manifests/v1"] {
            assert_eq!(code(dotted, None), (400, "NAME_INVALID"), "{dotted}");
        }
        assert_eq!(located("/library/hello/tags/list", None).2, Endpoint::Tags);
    }
}
