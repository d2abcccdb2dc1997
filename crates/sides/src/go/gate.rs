//! The go side under the fleet's policy. A version's `.info`, `.mod` and
//! `.zip` are one release, timed by its `.info` (`Time`): the module proxy
//! protocol has no other publish time, and an `.info` never changes, so it
//! is fetched once. `@v/list` is served without the versions the policy
//! refuses; `@latest` is re-pointed at the newest version it serves, as the
//! go command would pick it from the list, or refused when it serves none.
//!
//! The go command asks `@latest` only when the list names no version: an
//! answer it reads as "not found" there (`404`, `410`) sends it to the next
//! proxy of its `GOPROXY`, or ends in "no matching versions" with no word
//! of why, so a `@latest` left with nothing to name is refused as its
//! version is, and the go command prints that line.

use std::time::SystemTime;

use bytes::Bytes;
use pkgproxy_cache::Class;
use serde::Deserialize;

use super::path::escape;
use super::{Config, Go, GoFile};
use crate::decision::CachedRequest;
use crate::role::{Filtered, Gated, Gating, Judge, Judged, ReleaseName, Times};

/// How many versions' `.info` a `@latest` re-pointing asks for at once,
/// newest first: most often the first few serve.
const INFOS_AT_ONCE: usize = 8;

impl Gating for Go {
    fn gated(&self, request: &CachedRequest) -> Option<Gated> {
        let config = self.config();
        if !config.gated {
            return None;
        }
        let (module, file) = Config::file_of(request)?;
        let version = match file {
            GoFile::List | GoFile::Latest => return Some(Gated::Listing),
            GoFile::Info(version) | GoFile::Mod(version) | GoFile::Zip(version) => version,
        };
        let times_from = Box::new(info_request(&config, &module, &version));
        let release = ReleaseName { name: module, timed_as: version.clone(), version };
        Some(Gated::Artifact { release, times_from })
    }

    /// The version's `.info`: it is the release, as its `.mod` and `.zip`
    /// are.
    fn release_request(&self, name: &str, version: &str) -> Option<CachedRequest> {
        if !super::path::is_module_path(name) || !super::path::is_version(version) {
            return None;
        }
        Some(info_request(&self.config(), name, version))
    }

    /// The `Time` of a version's `.info`, by its version.
    fn times(&self, source: &CachedRequest, body: &[u8]) -> Times {
        let (Some((_, GoFile::Info(version))), Some(at)) = (Config::file_of(source), published(body)) else {
            return Times::new();
        };
        Times::from([(version, at)])
    }

    fn filtered(&self, request: &CachedRequest, body: &[u8], judge: &mut dyn Judge) -> Filtered {
        let config = self.config();
        match Config::file_of(request) {
            Some((module, GoFile::List)) => filtered_list(&config, &module, body, judge).into(),
            Some((module, GoFile::Latest)) => repointed_latest(&config, &module, body, judge),
            _ => Filtered::AsStored,
        }
    }
}

/// What pkgproxy reads of a version's `.info` (and of `@latest`, which has
/// its shape).
#[derive(Debug, Deserialize)]
struct Info {
    #[serde(rename = "Version")]
    version: String,
    #[serde(rename = "Time", default)]
    time: Option<String>,
}

/// When the `.info` `body` says its version was published.
fn published(body: &[u8]) -> Option<SystemTime> {
    let info: Info = serde_json::from_slice(body).ok()?;
    pkgproxy_policy::parse_time(info.time.as_deref()?)
}

/// The request for `module`'s `.info` of `version`.
fn info_request(config: &Config, module: &str, version: &str) -> CachedRequest {
    config.cached(format!("{}/@v/{}.info", escape(module), escape(version)), Class::Immutable)
}

/// The request for `module`'s `@v/list`.
fn list_request(config: &Config, module: &str) -> CachedRequest {
    config.cached(format!("{}/@v/list", escape(module)), Class::Revalidated)
}

/// `body`, `module`'s `@v/list`, without the versions the policy refuses:
/// the other lines as written, in their order. `None`: it refuses none.
fn filtered_list(config: &Config, module: &str, body: &[u8], judge: &mut dyn Judge) -> Option<Bytes> {
    let text = std::str::from_utf8(body).ok()?;
    let listed: Vec<(&str, &str)> =
        text.lines().filter_map(|line| Some((line, line.split_whitespace().next()?))).collect();
    let versions: Vec<&str> = listed.iter().map(|(_, version)| *version).collect();
    let times = times_of(config, module, &versions, judge);
    let kept: Vec<&str> = listed
        .iter()
        .zip(times)
        .filter(|((_, version), at)| judge.judge(module, version, *at).serves())
        .map(|((line, _), _)| *line)
        .collect();
    if kept.len() == listed.len() {
        return None;
    }
    Some(Bytes::from(kept.iter().map(|line| format!("{line}\n")).collect::<String>()))
}

/// The publish times of `module`'s `versions`, from their `.info`, when a
/// rule in force reads times; else none is fetched.
fn times_of(config: &Config, module: &str, versions: &[&str], judge: &mut dyn Judge) -> Vec<Option<SystemTime>> {
    if !judge.needs_times() {
        return vec![None; versions.len()];
    }
    let requests = versions.iter().map(|version| info_request(config, module, version)).collect();
    judge.fetch(requests).into_iter().map(|body| body.as_deref().and_then(published)).collect()
}

/// `body`, `module`'s `@latest`, as served: as it is when the policy
/// serves its version; else the `.info` of the newest version it serves
/// of the module's list; else refused with its version's line.
fn repointed_latest(config: &Config, module: &str, body: &[u8], judge: &mut dyn Judge) -> Filtered {
    let Ok(latest) = serde_json::from_slice::<Info>(body) else { return Filtered::AsStored };
    let mut at = latest.time.as_deref().and_then(pkgproxy_policy::parse_time);
    if at.is_none() && judge.needs_times() {
        let info = judge.fetch(vec![info_request(config, module, &latest.version)]).pop().flatten();
        at = info.as_deref().and_then(published);
    }
    let line = match judge.judge(module, &latest.version, at) {
        Judged::Served => return Filtered::AsStored,
        Judged::Blocked(line) => line,
    };
    match newest_served(config, module, &latest.version, judge) {
        Some(info) => Filtered::Rewritten(info),
        None => Filtered::Refused(line),
    }
}

/// The `.info` of the newest version of `module`'s list the policy serves
/// (but `refused`, judged already), in the go command's order of choice.
fn newest_served(config: &Config, module: &str, refused: &str, judge: &mut dyn Judge) -> Option<Bytes> {
    let list = judge.fetch(vec![list_request(config, module)]).pop().flatten()?;
    let text = String::from_utf8_lossy(&list);
    let candidates: Vec<&str> = in_order_of_choice(text.lines().filter_map(|line| line.split_whitespace().next()))
        .into_iter()
        .filter(|version| *version != refused)
        .collect();
    if !judge.needs_times() {
        let version = candidates.into_iter().find(|version| judge.judge(module, version, None).serves())?;
        return judge.fetch(vec![info_request(config, module, version)]).pop().flatten();
    }
    for chunk in candidates.chunks(INFOS_AT_ONCE) {
        let infos = judge.fetch(chunk.iter().map(|version| info_request(config, module, version)).collect());
        for (version, info) in chunk.iter().zip(infos) {
            // A version whose `.info` cannot be had cannot be answered with.
            let Some(info) = info else { continue };
            if judge.judge(module, version, published(&info)).serves() {
                return Some(info);
            }
        }
    }
    None
}

/// `versions` as the go command prefers them for `latest`: release
/// versions, the highest first, then pre-releases, the highest first.
/// Pseudo-versions, and what is no semantic version, are left out, as the
/// go command leaves them out of a list.
fn in_order_of_choice<'v>(versions: impl Iterator<Item = &'v str>) -> Vec<&'v str> {
    let mut known: Vec<(bool, semver::Version, &str)> = versions
        .filter_map(|text| {
            let version = semver::Version::parse(text.strip_prefix('v')?).ok()?;
            (!is_pseudo(&version)).then(|| (version.pre.is_empty(), version, text))
        })
        .collect();
    known.sort_by(|a, b| (b.0, &b.1).cmp(&(a.0, &a.1)));
    known.dedup_by(|a, b| a.2 == b.2);
    known.into_iter().map(|(_, _, text)| text).collect()
}

/// Whether `version` is a pseudo-version: its pre-release ends in a commit
/// time (14 digits) and a commit hash (12 hex digits).
fn is_pseudo(version: &semver::Version) -> bool {
    let Some(tail) = version.pre.as_str().rsplit('.').next() else { return false };
    let Some((time, hash)) = tail.split_once('-') else { return false };
    time.len() == 14
        && time.bytes().all(|b| b.is_ascii_digit())
        && hash.len() == 12
        && hash.bytes().all(|b| b.is_ascii_hexdigit())
}

#[cfg(test)]
mod tests {
    use std::collections::HashMap;
    use std::time::Duration;

    use super::super::Options;
    use super::*;
    use crate::decision::Decision;

    /// A policy refusing named versions, and (when set) what was published
    /// after a line or at no known time; its fetches answered from `held`.
    #[derive(Default)]
    struct Rules {
        refused: Vec<&'static str>,
        not_after: Option<SystemTime>,
        held: HashMap<String, Bytes>,
        fetched: Vec<String>,
    }

    impl Judge for Rules {
        fn needs_times(&self) -> bool {
            self.not_after.is_some()
        }

        fn judge(&mut self, name: &str, version: &str, published: Option<SystemTime>) -> Judged {
            let late = self.not_after.is_some_and(|line| published.is_none_or(|at| at > line));
            match self.refused.contains(&version) || late {
                true => Judged::Blocked(format!("go:{name}@{version} is blocked by policy")),
                false => Judged::Served,
            }
        }

        fn fetch(&mut self, requests: Vec<CachedRequest>) -> Vec<Option<Bytes>> {
            self.fetched.extend(requests.iter().map(|request| request.key.clone()));
            requests.iter().map(|request| self.held.get(&request.key).cloned()).collect()
        }
    }

    const LIST: &str = "/example.com/!hello/@v/list";
    const LATEST: &str = "/example.com/!hello/@latest";

    fn go(policy: Option<bool>) -> Go {
        let options = Options { proxies: vec!["http://127.0.0.1:8001".into()], policy, ..Options::default() };
        Go::new(Config::new(&options).unwrap())
    }

    fn request(path: &str) -> CachedRequest {
        match go(None).config().classify(path) {
            Decision::Cache(request) => *request,
            other => panic!("{path}: {other:?}"),
        }
    }

    fn day(n: u64) -> SystemTime {
        SystemTime::UNIX_EPOCH + Duration::from_secs(n * 86_400)
    }

    fn info(version: &str, at: SystemTime) -> String {
        format!("{{\"Version\":\"{version}\",\"Time\":\"{}\"}}", humantime::format_rfc3339_seconds(at))
    }

    /// Rules whose fetches find `list` and each version's `.info`, the
    /// `n`th published on day `n + 1`.
    fn holding(list: &[&str]) -> Rules {
        let mut held = HashMap::new();
        held.insert(format!("go{LIST}"), Bytes::from(list.iter().map(|v| format!("{v}\n")).collect::<String>()));
        for (n, version) in list.iter().enumerate() {
            let key = format!("go/example.com/!hello/@v/{version}.info");
            held.insert(key, Bytes::from(info(version, day(n as u64 + 1))));
        }
        Rules { held, ..Rules::default() }
    }

    fn filtered(path: &str, body: &str, rules: &mut Rules) -> Filtered {
        go(None).filtered(&request(path), body.as_bytes(), rules)
    }

    #[test]
    fn a_list_loses_the_versions_published_after_the_line_and_keeps_the_rest_in_order() {
        let mut rules = Rules { not_after: Some(day(2) + Duration::from_secs(3600)), ..holding(&["v1.0.0", "v1.1.0"]) };
        let written = day(3);
        rules.held.insert("go/example.com/!hello/@v/v1.2.0.info".into(), Bytes::from(info("v1.2.0", written)));
        let served = filtered(LIST, "v1.2.0\nv1.0.0\nv1.1.0\n", &mut rules);
        assert_eq!(served, Filtered::Rewritten(Bytes::from("v1.0.0\nv1.1.0\n")));
        assert_eq!(rules.fetched.len(), 3, "each version's .info gives its time: {:?}", rules.fetched);

        let mut all_old = Rules { not_after: Some(day(10)), ..holding(&["v1.0.0", "v1.1.0"]) };
        assert_eq!(filtered(LIST, "v1.0.0\nv1.1.0\n", &mut all_old), Filtered::AsStored);
    }

    #[test]
    fn without_a_rule_reading_times_a_list_is_judged_without_fetching() {
        let mut rules = Rules { refused: vec!["v1.1.0"], ..Rules::default() };
        let served = filtered(LIST, "v1.0.0\nv1.1.0\nv1.2.0\n", &mut rules);
        assert_eq!(served, Filtered::Rewritten(Bytes::from("v1.0.0\nv1.2.0\n")));
        assert!(rules.fetched.is_empty(), "{:?}", rules.fetched);
    }

    #[test]
    fn latest_moves_to_the_newest_served_release_before_any_pre_release() {
        let listed = ["v1.0.0", "v1.1.0", "v1.2.0-rc.1", "v1.3.0", "v0.0.0-20240101000000-abcdefabcdef"];
        let latest = info("v1.3.0", day(4));
        let mut served = Rules { refused: vec!["v1.1.0"], ..holding(&listed) };
        assert_eq!(filtered(LATEST, &latest, &mut served), Filtered::AsStored, "its version is served");

        let mut releases_left = Rules { refused: vec!["v1.3.0", "v1.1.0"], ..holding(&listed) };
        let repointed = filtered(LATEST, &latest, &mut releases_left);
        assert_eq!(repointed, Filtered::Rewritten(Bytes::from(info("v1.0.0", day(1)))));
        let infos: Vec<&String> = releases_left.fetched.iter().filter(|key| key.ends_with(".info")).collect();
        assert_eq!(infos, ["go/example.com/!hello/@v/v1.0.0.info"], "only the answer's .info without a time rule");

        let mut pre_release_left = Rules { refused: vec!["v1.3.0", "v1.1.0", "v1.0.0"], ..holding(&listed) };
        let repointed = filtered(LATEST, &latest, &mut pre_release_left);
        assert_eq!(repointed, Filtered::Rewritten(Bytes::from(info("v1.2.0-rc.1", day(3)))));

        let everything = vec!["v1.3.0", "v1.2.0-rc.1", "v1.1.0", "v1.0.0", "v0.0.0-20240101000000-abcdefabcdef"];
        let mut none_left = Rules { refused: everything, ..holding(&listed) };
        let refused = filtered(LATEST, &latest, &mut none_left);
        assert_eq!(refused, Filtered::Refused("go:example.com/Hello@v1.3.0 is blocked by policy".into()));
    }

    #[test]
    fn latest_is_timed_by_its_own_body_and_moved_by_the_times_of_the_listed_versions() {
        let listed = ["v1.0.0", "v1.1.0", "v1.2.0"];
        let mut rules = Rules { not_after: Some(day(2) + Duration::from_secs(3600)), ..holding(&listed) };
        let repointed = filtered(LATEST, &info("v1.2.0", day(3)), &mut rules);
        assert_eq!(repointed, Filtered::Rewritten(Bytes::from(info("v1.1.0", day(2)))));
        assert!(!rules.fetched.iter().any(|key| key.ends_with("v1.2.0.info")), "{:?}", rules.fetched);

        let mut untimed = Rules { not_after: Some(day(10)), ..holding(&listed) };
        let latest_without_time = r#"{"Version":"v1.2.0"}"#;
        assert_eq!(filtered(LATEST, latest_without_time, &mut untimed), Filtered::AsStored, "its .info gives it");
        assert_eq!(untimed.fetched, ["go/example.com/!hello/@v/v1.2.0.info"]);
    }

    #[test]
    fn a_version_s_files_are_one_release_timed_by_its_info_and_an_exempt_side_is_not_judged() {
        let side = go(None);
        for file in ["info", "mod", "zip"] {
            let Some(Gated::Artifact { release, times_from }) =
                side.gated(&request(&format!("/example.com/!hello/@v/v1.0.0.{file}")))
            else {
                panic!("a .{file} is an artifact");
            };
            assert_eq!((release.name.as_str(), release.version.as_str()), ("example.com/Hello", "v1.0.0"));
            assert_eq!(times_from.key, "go/example.com/!hello/@v/v1.0.0.info");
            assert_eq!(times_from.class, Class::Immutable);
        }
        assert!(matches!(side.gated(&request(LIST)), Some(Gated::Listing)));
        assert!(matches!(side.gated(&request(LATEST)), Some(Gated::Listing)));
        assert!(side.gated(&request("/sumdb/sum.golang.org/lookup/example.com/!hello@v1.0.0")).is_none());
        assert!(go(Some(false)).gated(&request(LIST)).is_none(), "[go] policy = false");

        let source = request("/example.com/!hello/@v/v1.0.0.info");
        assert_eq!(side.times(&source, info("v1.0.0", day(1)).as_bytes()), Times::from([("v1.0.0".into(), day(1))]));
        assert!(side.times(&source, br#"{"Version":"v1.0.0"}"#).is_empty(), "no Time: not known");
    }

    #[test]
    fn the_order_of_choice_puts_releases_first_and_leaves_pseudo_versions_out() {
        let listed =
            ["v1.2.0-rc.1", "v1.10.0", "v1.9.0", "v0.0.0-20240101000000-abcdefabcdef", "junk", "v2.0.0+incompatible"];
        let order = in_order_of_choice(listed.into_iter());
        assert_eq!(order, ["v2.0.0+incompatible", "v1.10.0", "v1.9.0", "v1.2.0-rc.1"]);
        let pseudo = |text: &str| is_pseudo(&semver::Version::parse(text).unwrap());
        assert!(pseudo("1.2.4-0.20240101000000-abcdefabcdef"));
        assert!(pseudo("1.2.3-pre.0.20240101000000-abcdefabcdef"));
        assert!(!pseudo("1.2.3-rc.1"));
    }
}
