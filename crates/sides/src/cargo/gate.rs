//! The cargo side under the fleet's policy: a `.crate` is one release,
//! timed by its index file's `pubtime` (crates.io's index gives each
//! version's publish time on its line); an index file is a listing, served
//! without the lines of the versions the policy refuses.
//!
//! A refused version's line is taken out, not marked yanked: cargo still
//! takes a yanked version a lockfile pins, so a mark would hold nothing
//! back. Without the line, a resolution picks the newest version served,
//! and a lockfile naming the version fails to resolve; its download, asked
//! for directly, is refused with a `403` that says why. Every other line
//! stays byte for byte.

use std::borrow::Cow;
use std::time::SystemTime;

use bytes::Bytes;

use pkgproxy_cache::Class;

use super::{index, Cargo, Keyed, Space};
use crate::decision::CachedRequest;
use crate::id::SideId;
use crate::role::{Filtered, Gated, Gating, Judge, ReleaseName, Times};

impl Gating for Cargo {
    fn gated(&self, request: &CachedRequest) -> Option<Gated> {
        let config = self.config();
        let Keyed { registry, space, below } = config.keyed(&request.key)?;
        if !registry.gated {
            return None;
        }
        if below.starts_with("index/") {
            return Some(Gated::Listing);
        }
        let mut parts = below.strip_prefix("crates/")?.split('/');
        let (name, version) = (parts.next()?, parts.next()?);
        let mut times_from = self.index_file(registry, space, &index::file_path(name), config.index_ttl);
        times_from.asking = request.asking.clone();
        let release =
            ReleaseName { name: name.to_ascii_lowercase(), version: version.to_owned(), timed_as: version.to_owned() };
        Some(Gated::Artifact { release, times_from: Box::new(times_from) })
    }

    /// The version's `.crate` on crates.io (its key without the checksum
    /// a download's URL names: the policy reads the name and version
    /// alone, and the checksum is the index file's to give).
    fn release_request(&self, name: &str, version: &str) -> Option<CachedRequest> {
        let config = self.config();
        let registry = config.registries.first()?;
        let name = name.to_ascii_lowercase();
        let fine =
            |part: &str| !part.is_empty() && part.bytes().all(|b| b.is_ascii_alphanumeric() || b"-_.+".contains(&b));
        if !fine(&name) || !fine(version) {
            return None;
        }
        let key = registry.key_in(Space::Shared, &format!("crates/{name}/{version}"));
        let origin = registry.index_origin(format!("/crates/{name}/{version}"));
        Some(CachedRequest::new(SideId::Cargo, key, origin, Class::Immutable))
    }

    /// Each version's `pubtime`, from an index file.
    fn times(&self, _source: &CachedRequest, body: &[u8]) -> Times {
        publish_times(body)
    }

    /// The index file without the lines of the versions the policy
    /// refuses.
    fn filtered(&self, request: &CachedRequest, body: &[u8], judge: &mut dyn Judge) -> Filtered {
        let Some(name) = request.key.split_once("/index/").and_then(|(_, below)| index::crate_of(below)) else {
            return Filtered::AsStored;
        };
        let name = name.to_owned();
        without_refused(body, &mut |version, published| judge.judge(&name, version, published).serves()).into()
    }
}

/// What the policy reads of an index file's line.
#[derive(serde::Deserialize)]
struct Timed<'a> {
    #[serde(borrow)]
    vers: Cow<'a, str>,
    /// When it was published (RFC 3339), on crates.io's index.
    #[serde(default, borrow)]
    pubtime: Option<Cow<'a, str>>,
}

/// The publish time of each version an index file gives one.
fn publish_times(body: &[u8]) -> Times {
    body.split(|b| *b == b'\n')
        .filter_map(|raw| serde_json::from_slice::<Timed<'_>>(raw.trim_ascii()).ok())
        .filter_map(|line| Some((line.vers.into_owned(), pkgproxy_policy::parse_time(line.pubtime.as_deref()?)?)))
        .collect()
}

/// `body`, an index file, without the lines whose version `serves` (told
/// the version and its publish time) refuses; `None`: none is.
fn without_refused(body: &[u8], serves: &mut dyn FnMut(&str, Option<SystemTime>) -> bool) -> Option<Bytes> {
    let mut kept = Vec::with_capacity(body.len());
    let mut removed = false;
    for raw in body.split_inclusive(|b| *b == b'\n') {
        let refused = serde_json::from_slice::<Timed<'_>>(raw.trim_ascii()).ok().is_some_and(|line| {
            let published = line.pubtime.as_deref().and_then(pkgproxy_policy::parse_time);
            !serves(&line.vers, published)
        });
        match refused {
            true => removed = true,
            false => kept.extend_from_slice(raw),
        }
    }
    removed.then(|| Bytes::from(kept))
}

#[cfg(test)]
mod tests {
    use super::*;

    const FILE: &str = concat!(
        "{\"name\":\"Demo\",\"vers\":\"1.0.0\",\"deps\":[],\"cksum\":\"aa\",\"features\":{},\"yanked\":false,\"pubtime\":\"2026-11-01T00:00:00Z\"}\n",
        "{\"name\":\"Demo\",\"vers\":\"1.1.0\",\"deps\":[],\"cksum\":\"bb\",\"features\":{},\"yanked\":false,\"pubtime\":\"2026-12-05T00:00:00Z\"}\n",
        "\n",
        "{\"name\":\"Demo\",  \"vers\":\"1.2.0\",\"deps\":[],\"cksum\":\"cc\",\"features\":{},\"yanked\":true}\n",
        "not json\n",
        "{\"name\":\"Demo\",\"vers\":\"0.9.0\",\"pubtime\":\"2026-10-01T00:00:00Z\"}",
    );

    #[test]
    fn the_lines_of_refused_versions_are_taken_out_and_the_rest_kept_byte_for_byte() {
        let line = pkgproxy_policy::parse_time("2026-12-01T00:00:00Z").unwrap();
        let mut seen = Vec::new();
        let mut before_the_line = |version: &str, published: Option<SystemTime>| {
            seen.push(version.to_owned());
            published.is_some_and(|at| at <= line)
        };
        let kept = without_refused(FILE.as_bytes(), &mut before_the_line).unwrap();
        let lines: Vec<&str> = FILE.split_inclusive('\n').collect();
        assert_eq!(kept, [lines[0], lines[2], lines[4], lines[5]].concat(), "1.1.0 too new, 1.2.0 of no known time");
        assert_eq!(seen, ["1.0.0", "1.1.0", "1.2.0", "0.9.0"]);
        assert_eq!(without_refused(FILE.as_bytes(), &mut |_, _| true), None, "nothing refused: served as it is");
        assert_eq!(without_refused(FILE.as_bytes(), &mut |v, _| v != "0.9.0").unwrap(), lines[..5].concat());
    }

    #[test]
    fn each_version_is_timed_by_its_pubtime() {
        let times = publish_times(FILE.as_bytes());
        assert_eq!(times.len(), 3);
        assert_eq!(times["1.1.0"], pkgproxy_policy::parse_time("2026-12-05T00:00:00Z").unwrap());
        assert!(!times.contains_key("1.2.0"), "no pubtime, no time");
    }
}
