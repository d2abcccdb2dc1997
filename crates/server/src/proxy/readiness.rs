//! Whether pkgproxy could serve a request with the network gone
//! (`pkgproxyctl check`), and fetching what it could not (`pkgproxyctl
//! warm`): one URL at a time, as a client would ask for it. The client
//! turns a build's inputs (a `go.sum`, `--print-uris` lines) into URLs;
//! what only the cache can say (the packages an apt install pulls in, the
//! blobs an image's manifests name) the daemon finds here, in what it
//! holds. It answers for each URL from its cache, and warms through its
//! own request path: its one way out, its checks, its cache.

use std::sync::Arc;

use http::{HeaderMap, StatusCode};
use http_body_util::BodyExt;
use pkgproxy_cache::BodyReader;
use pkgproxy_control::{
    AptNeeds, AptNeedsRequest, AptPackage, ItemReadiness, RegistryNeeds, RegistryNeedsRequest, SuiteValidity,
    VALIDITY_WARNED_WITHIN,
};
use pkgproxy_sides::apt::closure::Catalogue;
use pkgproxy_sides::apt::packages::Compression;
use pkgproxy_sides::apt::release::{self, FileSum};
use pkgproxy_sides::{CachedRequest, Decision, Side};

use super::explain::{self, Decided};
use super::reason::{Reason, REASON};
use super::{cached, pointer};
use crate::context::{Exchange, UpstreamAnswer};
use crate::state::State;

/// Whether a `GET` of `url` would be answered with the network gone.
pub fn check(state: &State, url: &str) -> ItemReadiness {
    let item = |ready: bool, reason: Option<String>, size: Option<u64>| ItemReadiness {
        url: url.trim().to_owned(),
        ready,
        reason,
        size,
    };
    match explain::decide(state, url) {
        Err(why) => item(false, Some(why), None),
        Ok(Decided { decision: Decision::Cache(request), side, .. }) => match cached_readiness(state, side, &request) {
            Ok(size) => item(true, None, size),
            Err(why) => item(false, Some(why.to_string()), None),
        },
        Ok(Decided { decision: Decision::Answer(_), .. }) => item(true, None, None),
        Ok(Decided { decision: Decision::Refuse(refusal), .. }) => {
            item(false, Some(Reason::Refused(refusal.reason).to_string()), None)
        }
        Ok(Decided { decision: Decision::Forward(_), .. }) => {
            item(false, Some("passed to the upstream uncached: never served offline".to_owned()), None)
        }
        Ok(Decided { decision: Decision::Generation(_), .. }) => item(
            false,
            Some("served from an LXD index generation, which check does not look into yet".to_owned()),
            None,
        ),
    }
}

/// A cache entry a bundle carries.
#[derive(Debug, Clone)]
pub struct Carried {
    /// The request a client makes for it; `None` for what pkgproxy fetches
    /// itself to check the next item (a checksum database record).
    pub url: Option<String>,
    /// Its key here.
    pub key: String,
    /// What is stored.
    pub entry: Arc<pkgproxy_cache::Entry>,
}

/// What the answer to a `GET` of `url` is made of in the cache: the
/// entries that prove it (what the side fetches to check it) first, then
/// its own. Nothing for what needs no entry (a side's own answer, a
/// remembered "not found"). `Err`: why it is not held.
pub fn carried(state: &State, url: &str) -> Result<Vec<Carried>, String> {
    let Decided { side, decision, .. } = explain::decide(state, url)?;
    let request = match decision {
        Decision::Cache(request) => *request,
        Decision::Answer(_) => return Ok(Vec::new()),
        Decision::Refuse(refusal) => return Err(Reason::Refused(refusal.reason).to_string()),
        Decision::Forward(_) => return Err("passed to the upstream uncached, never kept".to_owned()),
        Decision::Generation(_) => {
            return Err("served from an LXD index generation, which bundles do not carry yet".to_owned())
        }
    };
    let now = tokio::time::Instant::now().into_std();
    if side.remembered(&request.key, now, true).is_some() {
        return Ok(Vec::new());
    }
    let mut carried: Vec<Carried> = side
        .prerequisites(&request)
        .into_iter()
        .filter_map(|proof| {
            let entry = cached::usable(state, state.cache.lookup(&proof.key), &proof).ok()?;
            Some(Carried { url: None, key: proof.key, entry })
        })
        .collect();
    let entry = match cached::usable(state, state.cache.lookup(&request.key), &request) {
        Ok(entry) => entry,
        Err(_) if explain::adoptable(state, &request) => {
            let (sha256, size) = (request.expected.sha256.clone(), request.expected.size);
            Arc::new(by_hash(sha256.unwrap_or_default(), size.unwrap_or_default(), request.class))
        }
        Err(why) => return Err(why.to_string()),
    };
    carried.push(Carried { url: Some(url.trim().to_owned()), key: request.key, entry });
    Ok(carried)
}

/// Whether the cache holds what `request` needs, whatever its age (offline,
/// nothing is too old): its size, or why not.
fn cached_readiness(state: &State, side: &Side, request: &CachedRequest) -> Result<Option<u64>, Reason> {
    let now = tokio::time::Instant::now().into_std();
    if side.remembered(&request.key, now, true).is_some() {
        return Ok(None);
    }
    let size = match cached::usable(state, state.cache.lookup(&request.key), request) {
        Ok(entry) => Some(entry.size),
        Err(_) if explain::adoptable(state, request) => request.expected.size,
        Err(why) => return Err(why),
    };
    // Offline, content that needs the upstream's word for this client is
    // served only on a confirmation that counts offline.
    match request.access.as_deref() {
        Some(access) if !(access.offline && state.grants.holds(&access.grant, None, now)) => Err(Reason::Unconfirmed),
        _ => Ok(size),
    }
}

/// Fetches what a `GET` of `url` needs unless it is there: the answer is
/// read to its end, so the fetch completes and is kept. What it is then.
pub async fn warm(state: &Arc<State>, url: &str) -> ItemReadiness {
    let before = check(state, url);
    if before.ready {
        return before;
    }
    let Ok(Decided { side, mount, decision: Decision::Cache(request) }) = explain::decide(state, url) else {
        return before;
    };
    let (headers, answer) = (HeaderMap::new(), UpstreamAnswer::default());
    let exchange = Exchange::own_get(&headers, mount, &answer);
    let outcome = match request.pointer {
        Some(_) => pointer::serve(state, &exchange, side, *request).await,
        None => cached::serve(state, &exchange, side, *request).await,
    };
    let response = super::outcome::respond(Some(side), state.upstream.switch.mode(), outcome);
    let (status, why) = (response.status(), response.headers().get(REASON).cloned());
    let mut body = response.into_body();
    let mut read = 0;
    while let Some(frame) = body.frame().await {
        match frame {
            Ok(frame) => read += frame.data_ref().map_or(0, |data| data.len() as u64),
            Err(_) => break,
        }
    }
    let after = check(state, url);
    match (after.ready, status) {
        (true, _) => ItemReadiness { size: after.size.or(Some(read)), ..after },
        (false, StatusCode::OK) => after,
        (false, status) => {
            let why = why.and_then(|why| why.to_str().ok().map(str::to_owned));
            ItemReadiness { reason: Some(why.unwrap_or_else(|| format!("the upstream answered {status}"))), ..after }
        }
    }
}

/// The largest `InRelease` read to find a suite's indexes.
const RELEASE_LIMIT: u64 = 64 * 1024 * 1024;

/// What an `apt-get install` of `asked.packages` needs: each suite's
/// `InRelease` and `Packages` indexes, and the packages the install
/// downloads, found in the indexes the cache holds. Blocking: it reads and
/// decompresses them.
pub fn apt_needs(state: &State, asked: &AptNeedsRequest) -> AptNeeds {
    let mut needs = AptNeeds::default();
    let mut catalogue = Catalogue::default();
    let mut bases = Vec::new();
    for source in &asked.sources {
        let base = source.uri.trim_end_matches('/');
        let release_url = format!("{base}/dists/{}/InRelease", source.suite);
        needs.indexes.push(release_url.clone());
        let Some(release) = cached_bytes(state, &release_url).and_then(|bytes| release::parse(&bytes).ok()) else {
            needs.unresolved.push(format!("{release_url} is not cached"));
            continue;
        };
        for component in &source.components {
            for arch in [asked.architecture.as_str(), "all"] {
                let Some((path, sum)) = packages_index(&release, &format!("{component}/binary-{arch}")) else {
                    continue;
                };
                let url = format!("{base}/dists/{}/{path}", source.suite);
                needs.indexes.push(url.clone());
                let read = open_sum(state, &sum).map(|file| {
                    let compression = Compression::of_packages(&path).unwrap_or(Compression::None);
                    // Positional reads: the open file may be shared with others.
                    catalogue.add_index(compression.reader(BodyReader::new(&file)))
                });
                match read {
                    Some(Ok(_)) => bases.push(base.to_owned()),
                    Some(Err(error)) => needs.unresolved.push(format!("{url} cannot be read: {error}")),
                    None => needs.unresolved.push(format!("{url} is not cached")),
                }
            }
        }
    }
    let closure = catalogue.closure(&asked.packages);
    needs.packages = closure
        .packages
        .iter()
        .map(|package| AptPackage {
            name: package.name.clone(),
            url: format!("{}/{}", bases[package.index], package.filename),
        })
        .collect();
    needs.missing = closure.missing;
    needs.valid_until = valid_until(state, asked);
    needs
}

/// The asked suites whose Release expires within a day, or has.
fn valid_until(state: &State, asked: &AptNeedsRequest) -> Vec<SuiteValidity> {
    let Side::Apt(apt) = state.sides.get(pkgproxy_sides::SideId::Apt) else { return Vec::new() };
    let now = state.clock.now();
    let asked_suite =
        |suite: &str| asked.sources.iter().any(|source| suite.ends_with(&format!("/dists/{}", source.suite)));
    let expiring = apt.index().valid_until_before(now + VALIDITY_WARNED_WITHIN);
    expiring
        .into_iter()
        .filter(|(suite, _)| asked_suite(suite))
        .map(|(suite, until)| SuiteValidity::new(suite, until, now))
        .collect()
}

/// The `Packages` index a Release lists in `dir`, the most compressed
/// first, with its sum.
fn packages_index(release: &release::Release, dir: &str) -> Option<(String, FileSum)> {
    ["Packages.xz", "Packages.gz", "Packages"].iter().find_map(|name| {
        let path = format!("{dir}/{name}");
        release.files.get(&path).map(|sum| (path, *sum))
    })
}

/// The stored bytes with `sum`, whatever name they were fetched under.
fn open_sum(state: &State, sum: &FileSum) -> Option<Arc<std::fs::File>> {
    let sha256 = hex::encode(sum.sha256);
    if !state.cache.holds(&sha256, sum.size) {
        return None;
    }
    state.cache.open_body(&by_hash(sha256, sum.size, pkgproxy_cache::Class::Immutable)).ok()
}

/// An entry for stored bytes known by their hash alone (held under another
/// name): enough to open them.
fn by_hash(sha256: String, size: u64, class: pkgproxy_cache::Class) -> pkgproxy_cache::Entry {
    pkgproxy_cache::Entry {
        sha256,
        size,
        headers: Vec::new(),
        validators: Default::default(),
        fetched_at: 0,
        class,
        last_used: 0,
    }
}

/// The cached body a `GET` of `url` would be answered with offline, read
/// whole (up to [`RELEASE_LIMIT`]).
fn cached_bytes(state: &State, url: &str) -> Option<Vec<u8>> {
    use std::io::Read;
    let Ok(Decided { decision: Decision::Cache(request), .. }) = explain::decide(state, url) else { return None };
    let entry = cached::usable(state, state.cache.lookup(&request.key), &request).ok()?;
    let file = state.cache.open_body(&entry).ok()?;
    let mut bytes = Vec::new();
    BodyReader::new(&file).take(RELEASE_LIMIT).read_to_end(&mut bytes).ok()?;
    Some(bytes)
}

/// What pulling images needs: each manifest asked for, the platform's
/// manifest an index names, and the config and layers a manifest names,
/// as far as the manifests the cache holds say. Blocking.
pub fn registry_needs(state: &State, asked: &RegistryNeedsRequest) -> RegistryNeeds {
    let mut needs = RegistryNeeds::default();
    for url in &asked.manifests {
        let Some((name, _)) = url.rsplit_once("/manifests/") else {
            needs.unresolved.push(format!("{url} is not a manifest request"));
            continue;
        };
        needs.urls.push(url.clone());
        let mut manifest = url.clone();
        // An index, then the platform's manifest it names.
        for _ in 0..2 {
            let Some(body) = cached_bytes(state, &manifest) else {
                needs.unresolved.push(format!("{manifest} is not cached: what it names is not known"));
                break;
            };
            let Ok(json) = serde_json::from_slice::<serde_json::Value>(&body) else {
                needs.unresolved.push(format!("{manifest} is not a manifest"));
                break;
            };
            if let Some(list) = json["manifests"].as_array() {
                let Some(digest) = for_platform(list, &asked.platform) else {
                    needs.unresolved.push(format!("{manifest} names no image for {}", asked.platform));
                    break;
                };
                manifest = format!("{name}/manifests/{digest}");
                needs.urls.push(manifest.clone());
                continue;
            }
            let layers = json["layers"].as_array().into_iter().flatten();
            let digests =
                json["config"]["digest"].as_str().into_iter().chain(layers.filter_map(|l| l["digest"].as_str()));
            needs.urls.extend(digests.map(|digest| format!("{name}/blobs/{digest}")));
            break;
        }
    }
    needs
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
