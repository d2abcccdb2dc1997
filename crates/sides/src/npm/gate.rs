//! The npm side under the fleet's policy: a tarball (and an exact
//! version's document) is one release, timed by its package's full
//! document (`time`); a package's document is a listing, served without
//! the versions the policy refuses (`versions`, `time`) and with its
//! `dist-tags` re-pointed, so a resolution through pkgproxy picks the
//! newest version it serves by itself.

use std::collections::{HashMap, HashSet};

use bytes::Bytes;
use http::header::{HeaderValue, ACCEPT};
use pkgproxy_cache::Class;
use serde::Deserialize;

use super::config::Registry;
use super::keys::{Form, KeyKind, Keyed, Space};
use super::name::{self, PackageName, Tarball};
use super::Npm;
use crate::decision::CachedRequest;
use crate::id::SideId;
use crate::raw_object;
use crate::role::{Filtered, Gated, Gating, Judge, Judged, ReleaseName, Times};

impl Gating for Npm {
    fn gated(&self, request: &CachedRequest) -> Option<Gated> {
        let config = self.config();
        let Keyed { registry, space, kind } = Keyed::parse(&config, &request.key)?;
        if !registry.gated {
            return None;
        }
        let (name, version) = match kind {
            KeyKind::Document(..) => return Some(Gated::Listing),
            KeyKind::Version(name, version) if name::is_exact_version(&version) => (name, version),
            // A dist-tag's version (`/NAME/latest`): judged as served.
            KeyKind::Version(..) => return Some(Gated::Listing),
            KeyKind::Tarball(tarball) => (tarball.name, tarball.version),
        };
        let mut times_from = full_document(registry, space, &name, config.index_ttl);
        times_from.asking.auth = request.asking.auth.clone();
        let release = ReleaseName { name: name.to_string(), timed_as: version.clone(), version };
        Some(Gated::Artifact { release, times_from: Box::new(times_from) })
    }

    /// The version's tarball on the npm registry (or its mirrors), named
    /// as the registry names tarballs (`NAME/-/UNSCOPED-VERSION.tgz`).
    fn release_request(&self, name: &str, version: &str) -> Option<CachedRequest> {
        let config = self.config();
        let registry = config.registry("")?;
        let name = PackageName::parse(name)?;
        if !name::is_exact_version(version) {
            return None;
        }
        let tarball = Tarball::new(name.clone(), &format!("{}-{version}.tgz", name.unscoped()))?;
        Some(super::tarball_in(registry, Space::Shared, &tarball))
    }

    fn times(&self, _source: &CachedRequest, body: &[u8]) -> Times {
        times_of(body)
    }

    fn filtered(&self, request: &CachedRequest, body: &[u8], judge: &mut dyn Judge) -> Filtered {
        let config = self.config();
        let tagged = match Keyed::parse(&config, &request.key) {
            Some(Keyed { registry, space, kind: KeyKind::Version(name, _) }) => {
                let mut full = full_document(registry, space, &name, config.index_ttl);
                full.asking.auth = request.asking.auth.clone();
                Some((name, full))
            }
            _ => None,
        };
        drop(config);
        match tagged {
            Some((name, full)) => tagged_version(&name, full, body, judge),
            None => self.filtered_document(request, body, judge).unwrap_or(Filtered::AsStored),
        }
    }
}

impl Npm {
    /// A document without the versions the policy refuses (`None`: it
    /// names none); refused whole when it refuses every one, so that the
    /// client prints why (npm and pnpm print a document's `403` and its
    /// reason; a document of no versions says only "no versions"). An
    /// abbreviated document has no `time`: its package's full one gives
    /// it.
    fn filtered_document(&self, request: &CachedRequest, body: &[u8], judge: &mut dyn Judge) -> Option<Filtered> {
        let config = self.config();
        let Keyed { registry, space, kind: KeyKind::Document(name, form) } = Keyed::parse(&config, &request.key)?
        else {
            return None;
        };
        let text = std::str::from_utf8(body).ok()?;
        let members = raw_object::members(text)?;
        let member = |wanted: &str| members.iter().find(|(name, _)| name == wanted).map(|(_, value)| *value);
        let versions = raw_object::members_of(member("versions")?)?;
        let mut times = member("time").map(|time| times_of(time.get().as_bytes())).unwrap_or_default();
        if form == Form::Abbreviated && judge.needs_times() {
            let mut full = full_document(registry, space, &name, config.index_ttl);
            full.asking.auth = request.asking.auth.clone();
            if let Some(Some(body)) = judge.fetch(vec![full]).pop() {
                times = times_of(&body);
            }
        }
        let package = name.to_string();
        let mut lines: HashMap<&str, String> = HashMap::new();
        for (version, _) in &versions {
            if let Judged::Blocked(line) = judge.judge(&package, version, times.get(version.as_ref()).copied()) {
                lines.insert(version.as_ref(), line);
            }
        }
        if lines.is_empty() {
            return None;
        }
        let blocked: HashSet<&str> = lines.keys().copied().collect();
        let served: Vec<&str> =
            versions.iter().map(|(version, _)| version.as_ref()).filter(|v| !blocked.contains(v)).collect();
        if served.is_empty() {
            let latest = member("dist-tags")
                .and_then(|tags| serde_json::from_str::<HashMap<String, String>>(tags.get()).ok())
                .and_then(|tags| tags.get("latest").cloned());
            let line = latest.and_then(|latest| lines.get(latest.as_str()).cloned());
            return line.or_else(|| lines.into_values().next()).map(Filtered::Refused);
        }
        let kept_versions = raw_object::write(
            versions
                .iter()
                .filter(|(version, _)| !blocked.contains(version.as_ref()))
                .map(|(v, raw)| (v.as_ref(), raw.get())),
        );
        let kept_time = member("time").and_then(raw_object::members_of).map(|time| {
            raw_object::write(
                time.iter()
                    .filter(|(key, _)| !blocked.contains(key.as_ref()))
                    .map(|(key, raw)| (key.as_ref(), raw.get())),
            )
        });
        let tags = member("dist-tags").map(|tags| repointed_tags(tags.get(), &served, &blocked));
        let written = raw_object::write(members.iter().map(|(key, raw)| {
            let value = match key.as_ref() {
                "versions" => kept_versions.as_str(),
                "time" => kept_time.as_deref().unwrap_or(raw.get()),
                "dist-tags" => tags.as_deref().unwrap_or(raw.get()),
                _ => raw.get(),
            };
            (key.as_ref(), value)
        }));
        Some(Filtered::Rewritten(Bytes::from(written)))
    }
}

/// `body`, the version a dist-tag names (`/NAME/latest`), as served: as it
/// is, or refused with its version's line when the policy refuses that
/// version (no tag ever names a refused version; the package's document
/// names the one served in its place). Its time is the full document's.
fn tagged_version(name: &PackageName, full: CachedRequest, body: &[u8], judge: &mut dyn Judge) -> Filtered {
    #[derive(Deserialize)]
    struct Named {
        version: String,
    }
    let Ok(Named { version }) = serde_json::from_slice::<Named>(body) else { return Filtered::AsStored };
    let published = match judge.needs_times() {
        true => judge.fetch(vec![full]).pop().flatten().and_then(|document| times_of(&document).remove(&version)),
        false => None,
    };
    match judge.judge(&name.to_string(), &version, published) {
        Judged::Blocked(line) => Filtered::Refused(line),
        Judged::Served => Filtered::AsStored,
    }
}

/// The request for `name`'s full document of `registry`, in `space`.
fn full_document(
    registry: &Registry,
    space: Space,
    name: &PackageName,
    fresh_for: std::time::Duration,
) -> CachedRequest {
    let key = registry.key(space, &format!("doc/{name}/{}", Form::Full.as_str()));
    let mut request =
        CachedRequest::new(SideId::Npm, key, registry.origin(format!("/{}", name.in_path())), Class::Revalidated);
    request.wanted.fresh_for = fresh_for;
    request.asking.headers.insert(ACCEPT, HeaderValue::from_static(Form::Full.accept()));
    request
}

/// The versions' times of a document, or of its `time` member itself.
fn times_of(body: &[u8]) -> Times {
    #[derive(Deserialize)]
    struct Document {
        #[serde(default)]
        time: Option<HashMap<String, serde_json::Value>>,
    }
    let parsed = serde_json::from_slice::<Document>(body)
        .ok()
        .and_then(|document| document.time)
        .or_else(|| serde_json::from_slice::<HashMap<String, serde_json::Value>>(body).ok());
    let mut times = Times::new();
    for (version, at) in parsed.unwrap_or_default() {
        if matches!(version.as_str(), "created" | "modified") {
            continue;
        }
        if let Some(at) = at.as_str().and_then(pkgproxy_policy::parse_time) {
            times.insert(version, at);
        }
    }
    times
}

/// `dist-tags` (`tags`, as written) with every tag that named a blocked
/// version re-pointed: `latest` to the highest served release not above
/// the registry's own; another tag to the highest served version not above
/// its own (a pre-release only for a pre-release's tag); a tag left with
/// none is dropped.
fn repointed_tags(tags: &str, served: &[&str], blocked: &HashSet<&str>) -> String {
    let Some(members) = raw_object::members(tags) else { return tags.to_owned() };
    let served: Vec<semver::Version> = served.iter().filter_map(|v| semver::Version::parse(v).ok()).collect();
    let mut written: Vec<(String, String)> = Vec::new();
    for (tag, raw) in &members {
        let Ok(version) = serde_json::from_str::<String>(raw.get()) else {
            written.push((tag.to_string(), raw.get().to_owned()));
            continue;
        };
        if !blocked.contains(version.as_str()) {
            written.push((tag.to_string(), raw.get().to_owned()));
            continue;
        }
        let Ok(named) = semver::Version::parse(&version) else { continue };
        let takes_pre = !named.pre.is_empty() && tag != "latest";
        let best = served.iter().filter(|v| **v <= named && (takes_pre || v.pre.is_empty())).max();
        if let Some(best) = best {
            written.push((tag.to_string(), serde_json::to_string(&best.to_string()).unwrap_or_default()));
        }
    }
    raw_object::write(written.iter().map(|(tag, value)| (tag.as_str(), value.as_str())))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tags_move_to_the_newest_served_version_not_above_their_own() {
        let blocked: HashSet<&str> = ["1.3.1", "2.0.0-beta.2"].into();
        let served = ["1.2.0", "1.3.0", "1.3.0-rc.1", "2.0.0-beta.1"];
        let tags = r#"{"latest":"1.3.1","next":"2.0.0-beta.2","old":"1.2.0","gone":"1.3.1"}"#;
        let written = repointed_tags(tags, &served, &blocked);
        assert_eq!(written, r#"{"latest":"1.3.0","next":"2.0.0-beta.1","old":"1.2.0","gone":"1.3.0"}"#);
        let nothing_served = repointed_tags(r#"{"latest":"1.3.1"}"#, &[], &blocked);
        assert_eq!(nothing_served, "{}");
    }
}
