//! A registry's needs: each image reference (`alpine:3.20`,
//! `ghcr.io/o/i@sha256:...`) as the manifest request a client makes
//! through pkgproxy (`/v2/REGISTRY/REPOSITORY/manifests/REFERENCE`); the
//! daemon follows it to the platform's manifest and its blobs.

/// The registry clients name when a reference names none.
const DOCKER_HUB: &str = "docker.io";

/// The manifest URL of `reference`, as pkgproxy serves it.
pub fn manifest_url(reference: &str) -> anyhow::Result<String> {
    let reference = reference.trim();
    anyhow::ensure!(!reference.is_empty() && !reference.contains(char::is_whitespace), "{reference:?} is not an image");
    let (name, pinned) = match reference.split_once('@') {
        Some((name, digest)) => (name, digest.to_owned()),
        None => {
            let last = reference.rsplit('/').next().unwrap_or(reference);
            match last.rsplit_once(':') {
                Some((_, tag)) => (&reference[..reference.len() - tag.len() - 1], tag.to_owned()),
                None => (reference, "latest".to_owned()),
            }
        }
    };
    let (registry, repository) = match name.split_once('/') {
        Some((first, rest)) if first.contains(['.', ':']) || first == "localhost" => (first, rest.to_owned()),
        _ => (DOCKER_HUB, name.to_owned()),
    };
    let repository = match (registry, repository.contains('/')) {
        (DOCKER_HUB, false) => format!("library/{repository}"),
        _ => repository,
    };
    anyhow::ensure!(!repository.is_empty() && !pinned.is_empty(), "{reference:?} is not an image");
    Ok(format!("/v2/{registry}/{repository}/manifests/{pinned}"))
}

/// The platform a machine like this one pulls (`linux/amd64`).
pub fn platform() -> String {
    let arch = match std::env::consts::ARCH {
        "x86_64" => "amd64",
        "aarch64" => "arm64",
        "x86" => "386",
        "arm" => "arm",
        other => other,
    };
    format!("linux/{arch}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn references_become_the_manifest_requests_clients_make() {
        let cases = [
            ("alpine", "/v2/docker.io/library/alpine/manifests/latest"),
            ("alpine:3.20", "/v2/docker.io/library/alpine/manifests/3.20"),
            ("docker.io/o/i:v1", "/v2/docker.io/o/i/manifests/v1"),
            ("ghcr.io/o/i@sha256:abc", "/v2/ghcr.io/o/i/manifests/sha256:abc"),
            ("localhost:5000/i:2", "/v2/localhost:5000/i/manifests/2"),
        ];
        for (reference, url) in cases {
            assert_eq!(manifest_url(reference).unwrap(), url, "{reference}");
        }
        assert!(manifest_url("a b").is_err());
    }
}
