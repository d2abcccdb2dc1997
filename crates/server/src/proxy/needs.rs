//! What a build needs, found in what the cache holds, where only the
//! cache can say (the packages an apt install pulls in, the blobs an
//! image's manifests name, a snap's download and assertions): the requests
//! `pkgproxyctl check` and `warm` then ask about one by one (see
//! [`super::readiness`]).

use std::sync::Arc;

use bytes::Bytes;
use http::{HeaderMap, HeaderValue, Method};
use http_body_util::{BodyExt, Full};
use pkgproxy_cache::BodyReader;
use pkgproxy_control::{
    AptNeeds, AptNeedsRequest, AptPackage, LxdNeeds, LxdNeedsRequest, RegistryNeeds, RegistryNeedsRequest, SnapNeeds,
    SnapNeedsRequest, SnapWanted, SuiteValidity, VALIDITY_WARNED_WITHIN,
};
use pkgproxy_sides::apt::closure::Catalogue;
use pkgproxy_sides::apt::packages::Compression;
use pkgproxy_sides::apt::release::{self, FileSum};
use pkgproxy_sides::apt::Apt;
use pkgproxy_sides::lxd::needs::Instance;
use pkgproxy_sides::lxd::Lxd;
use pkgproxy_sides::snap::needs::{classic_device, DOWNLOAD_FIELDS, NEWER_FIELDS};
use pkgproxy_sides::snap::Snap;
use pkgproxy_sides::{route, Decision, Mount, SideId};
use serde_json::json;

use super::explain;
use super::lookup::{self, Held, Moment};
use super::{forward, outcome};
use crate::context::{Exchange, UpstreamAnswer};
use crate::state::State;

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
    let Some(apt) = state.sides.typed::<Apt>() else { return Vec::new() };
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
    state.cache.open_body(&lookup::by_hash(sha256, sum.size, pkgproxy_cache::Class::Immutable)).ok()
}

/// The cached body a `GET` of `url` would be answered with offline, read
/// whole (up to [`RELEASE_LIMIT`]).
fn cached_bytes(state: &State, url: &str) -> Option<Vec<u8>> {
    use std::io::Read;
    let request = explain::decide(state, url).ok()?.decision.into_cached()?;
    let entry = lookup::look(&Held(state), &request, &Moment::offline(state)).entry().cloned()?;
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

/// What `snap download` of the asked snaps needs on a classic device of
/// the asked architecture: the recorded store answer for each, then its
/// download and assertion chain, as far as the cache holds them. Blocking.
pub fn snap_needs(state: &State, asked: &SnapNeedsRequest) -> SnapNeeds {
    let Some(snap) = state.sides.typed::<Snap>() else { return SnapNeeds::default() };
    let mount = route::prefix_of(SideId::Snap).unwrap_or_default();
    let device = classic_device(&asked.architecture);
    let mut needs = SnapNeeds::default();
    for wanted in &asked.snaps {
        let found = snap.offline_needs(&device, &wanted.name, &wanted.channel);
        needs.urls.extend(found.paths.iter().map(|path| format!("{mount}{path}")));
        needs.unresolved.extend(found.unresolved);
        needs.records.extend(found.records);
    }
    let headers = device_headers(&device);
    let text = |(name, value): (&http::HeaderName, &HeaderValue)| Some((name.to_string(), value.to_str().ok()?.into()));
    needs.headers = headers.iter().filter_map(text).collect();
    needs
}

/// Asks the store, through the snap side's own path (which records each
/// answer for offline replay), for the download of each asked snap whose
/// answer is not recorded, as `snap download` would. The store's refusals
/// (`NAME: no such snap`), or why it could not be asked.
pub async fn snap_refresh(state: &Arc<State>, asked: &SnapNeedsRequest) -> Vec<String> {
    let side = state.sides.get(SideId::Snap);
    let Some(snap) = state.sides.typed::<Snap>() else { return Vec::new() };
    let device = classic_device(&asked.architecture);
    let missing: Vec<&SnapWanted> =
        asked.snaps.iter().filter(|wanted| !snap.holds_answer(&device, &wanted.name, &wanted.channel)).collect();
    if missing.is_empty() {
        return Vec::new();
    }
    let actions: Vec<serde_json::Value> = missing
        .iter()
        .enumerate()
        .map(|(n, wanted)| {
            json!({"action": "download", "instance-key": format!("download-{}", n + 1),
                   "name": wanted.name, "channel": wanted.channel, "epoch": null})
        })
        .collect();
    let fields: Vec<&str> = DOWNLOAD_FIELDS.iter().chain(NEWER_FIELDS.iter()).copied().collect();
    let body = json!({"context": [], "actions": actions, "fields": fields}).to_string();
    let mut headers = device_headers(&device);
    let json = HeaderValue::from_static("application/json");
    headers.insert(http::header::ACCEPT, json.clone());
    headers.insert(http::header::CONTENT_TYPE, json);
    let own = http::Uri::from_static("/");
    let host = crate::context::host_of(&own, &headers, state.listen);
    let routed = pkgproxy_sides::Request {
        method: &Method::POST,
        headers: &headers,
        mount: Mount::Prefix(route::prefix_of(SideId::Snap).unwrap_or_default()),
        path: "/v2/snaps/refresh",
        query: None,
        target: None,
        host: &host,
    };
    let Decision::Forward(request) = side.classify(&routed) else {
        return vec!["the snap side does not forward refreshes".to_owned()];
    };
    let answer = UpstreamAnswer::default();
    let exchange = Exchange { method: &Method::POST, ..Exchange::own_get(&headers, routed.mount, &answer) };
    let outcome = forward::forward(state, &exchange, request, Full::new(Bytes::from(body))).await;
    let response = outcome::respond(Some(side), state.upstream.switch.mode(), outcome);
    let status = response.status();
    let Ok(body) = response.into_body().collect().await.map(|body| body.to_bytes()) else {
        return vec!["the store's answer broke off".to_owned()];
    };
    let Ok(answer) = serde_json::from_slice::<serde_json::Value>(&body) else {
        return vec![format!("the store answered {status}")];
    };
    refused_actions(&answer, &missing)
}

/// The per-action errors of a refresh answer, by snap.
fn refused_actions(answer: &serde_json::Value, asked: &[&SnapWanted]) -> Vec<String> {
    let results = answer["results"].as_array().into_iter().flatten();
    let errors = results.filter(|result| result["result"] == "error").map(|result| {
        let number = result["instance-key"].as_str().and_then(|key| key.strip_prefix("download-"));
        let wanted = number.and_then(|n| n.parse::<usize>().ok()).and_then(|n| asked.get(n.wrapping_sub(1)));
        let what = wanted.map_or_else(|| "a snap".to_owned(), |w| format!("{} ({})", w.name, w.channel));
        format!("{what}: {}", result["error"]["message"].as_str().unwrap_or("the store refused it"))
    });
    let global = answer["error-list"].as_array().into_iter().flatten();
    errors.chain(global.map(|error| error["message"].as_str().unwrap_or("the store refused").to_owned())).collect()
}

/// The headers by which a device says what it is.
fn device_headers(device: &pkgproxy_sides::snap::Device) -> HeaderMap {
    let mut headers = HeaderMap::new();
    // The v2 names, and the v1 ones downloads and assertions go with.
    let pairs = [
        ("snap-device-series", device.series.as_str()),
        ("snap-device-architecture", device.architecture.as_str()),
        ("snap-classic", device.classic.as_str()),
        ("snap-device-capabilities", "default-tracks"),
        ("x-ubuntu-series", device.series.as_str()),
        ("x-ubuntu-architecture", device.architecture.as_str()),
        ("x-ubuntu-classic", device.classic.as_str()),
    ];
    for (name, value) in pairs {
        if let Ok(value) = HeaderValue::from_str(value) {
            headers.insert(name, value);
        }
    }
    headers
}

/// What fetching the asked LXD images needs: each remote's index and
/// products files, then each image's files of the newest version listed
/// for the alias, as far as the held generations say. Blocking.
pub fn lxd_needs(state: &State, asked: &LxdNeedsRequest) -> LxdNeeds {
    let Some(lxd) = state.sides.typed::<Lxd>() else { return LxdNeeds::default() };
    let mount = route::prefix_of(SideId::Lxd).unwrap_or_default();
    let mut needs = LxdNeeds::default();
    for image in &asked.images {
        let instance = match image.vm {
            true => Instance::VirtualMachine,
            false => Instance::Container,
        };
        let found = lxd.offline_needs(&image.remote, &image.alias, instance, &asked.architecture);
        let url = |path: &String| format!("{mount}/{}/{path}", image.remote);
        needs.urls.extend(found.paths.iter().map(url).filter(|url| !needs.urls.contains(url)).collect::<Vec<_>>());
        needs.unresolved.extend(found.unresolved);
    }
    needs
}
