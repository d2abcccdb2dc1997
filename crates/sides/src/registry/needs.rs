//! What pulling images needs, for `pkgproxyctl check registry`: each image
//! reference (`alpine:3.20`, `ghcr.io/o/i@sha256:...`) as the manifest
//! request a client makes through pkgproxy
//! (`/v2/REGISTRY/REPOSITORY/manifests/REFERENCE`); the daemon follows it
//! to the platform's manifest and its blobs, in the manifests it holds.

use serde::{Deserialize, Serialize};

use super::manifest::MANIFEST_LIMIT;
use super::Registry;
use crate::needs::{self, Asked, HeldBodies, NeededItem, Needs, NeedsError, NeedsReader};

/// What `check registry` takes.
#[derive(Debug, clap::Args)]
struct Arguments {
    /// Image references: `alpine:3.20`, `ghcr.io/o/i@sha256:...`.
    #[arg(required = true)]
    images: Vec<String>,
    /// The platform pulled (default: this machine's, `linux/amd64`).
    #[arg(long, value_name = "OS/ARCH[/VARIANT]")]
    platform: Option<String>,
}

/// What pulling some images needs: what the daemon follows.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
struct Pull {
    /// Each image's manifest request.
    manifests: Vec<String>,
    /// The platform pulled (`linux/amd64`, `linux/arm/v7`).
    platform: String,
}

/// The registry's reader of a build's image references.
pub struct Reader;

impl NeedsReader for Reader {
    fn command(&self) -> clap::Command {
        let about = "Container images: each reference's manifest, the platform's manifest an index names, its \
                     config and layers";
        <Arguments as clap::Args>::augment_args(clap::Command::new("registry")).about(about)
    }

    fn read(&self, matches: &clap::ArgMatches) -> Result<Asked, NeedsError> {
        let arguments: Arguments = needs::arguments(matches)?;
        needs::resolve(&Pull {
            manifests: arguments.images.iter().map(|image| manifest_url(image)).collect::<Result<_, _>>()?,
            platform: arguments.platform.unwrap_or_else(platform),
        })
    }
}

impl Registry {
    /// What pulling the asked images needs: each manifest asked for, the
    /// platform's manifest an index names, and the config and layers a
    /// manifest names, as far as the manifests the cache holds say.
    /// Blocking.
    pub(super) fn pull_needs(&self, asked: serde_json::Value, held: &dyn HeldBodies) -> Result<Needs, NeedsError> {
        let asked: Pull = needs::parse(asked)?;
        let mut found = Needs::default();
        let mut urls = Vec::new();
        for url in &asked.manifests {
            let Some((name, _)) = url.rsplit_once("/manifests/") else {
                found.unknown.push(format!("{url} is not a manifest request"));
                continue;
            };
            urls.push(url.clone());
            let mut manifest = url.clone();
            // An index, then the platform's manifest it names.
            for _ in 0..2 {
                let Some(body) = held.body(&manifest, MANIFEST_LIMIT) else {
                    found.unknown.push(format!("{manifest} is not cached: what it names is not known"));
                    break;
                };
                let Ok(json) = serde_json::from_slice::<serde_json::Value>(&body) else {
                    found.unknown.push(format!("{manifest} is not a manifest"));
                    break;
                };
                if let Some(list) = json["manifests"].as_array() {
                    let Some(digest) = for_platform(list, &asked.platform) else {
                        found.unknown.push(format!("{manifest} names no image for {}", asked.platform));
                        break;
                    };
                    manifest = format!("{name}/manifests/{digest}");
                    urls.push(manifest.clone());
                    continue;
                }
                let layers = json["layers"].as_array().into_iter().flatten();
                let config = json["config"]["digest"].as_str();
                let digests = config.into_iter().chain(layers.filter_map(|layer| layer["digest"].as_str()));
                urls.extend(digests.map(|digest| format!("{name}/blobs/{digest}")));
                break;
            }
        }
        let label = |url: &String| url.strip_prefix("/v2/").unwrap_or(url).to_owned();
        found.items = urls.iter().map(|url| NeededItem { url: url.clone(), label: label(url) }).collect();
        Ok(found)
    }
}

/// The digest of the manifest an index lists for `platform` (`os/arch`,
/// or `os/arch/variant`).
fn for_platform<'j>(list: &'j [serde_json::Value], platform: &str) -> Option<&'j str> {
    let mut wanted = platform.split('/');
    let (os, arch, variant) = (wanted.next()?, wanted.next()?, wanted.next());
    list.iter()
        .find(|entry| {
            let on = &entry["platform"];
            on["os"] == os && on["architecture"] == arch && variant.is_none_or(|variant| on["variant"] == variant)
        })
        .and_then(|entry| entry["digest"].as_str())
}

/// The registry clients name when a reference names none.
const DOCKER_HUB: &str = "docker.io";

/// The manifest URL of `reference`, as pkgproxy serves it.
fn manifest_url(reference: &str) -> Result<String, NeedsError> {
    let reference = reference.trim();
    let not_an_image = || NeedsError::new(format!("{reference:?} is not an image"));
    if reference.is_empty() || reference.contains(char::is_whitespace) {
        return Err(not_an_image());
    }
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
    if repository.is_empty() || pinned.is_empty() {
        return Err(not_an_image());
    }
    Ok(format!("/v2/{registry}/{repository}/manifests/{pinned}"))
}

/// The platform a machine like this one pulls (`linux/amd64`).
fn platform() -> String {
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
