//! The PyPI side under the fleet's policy. Each file is judged on its own,
//! by its own upload time (PEP 700's `upload-time`, which only the JSON
//! form of a project's page gives): a wheel added to an old release is as
//! fresh as its upload. A file (and its core metadata, `FILE.metadata`) is
//! one release's artifact, named by its project and the version its name
//! holds and timed by its project's JSON page; a project's page, in either
//! form, is a listing.
//!
//! A file the policy refuses is marked yanked on the page, the line saying
//! why as the reason (JSON: `"yanked": "LINE"`; HTML: `data-yanked="LINE"`),
//! not taken off it. PEP 592 has pip and uv pass over a yanked file unless
//! the requirement pins its exact version, so an unpinned install resolves
//! the newest file the policy serves by itself. A pinned one (`==`, a
//! lockfile, hashes) takes the file all the same and asks for it (or its
//! core metadata), which pkgproxy refuses with a `403` whose status line
//! says why: pip and uv both print that line (they fail while resolving,
//! before they would print the yank's reason; a tool that reads the page
//! shows the reason there). A page without the file would leave a pinned
//! install saying only that no such version exists, not why. A file the
//! index yanked already stays yanked, its reason the policy's line. Every
//! other byte of the page stays as served without a policy (times and
//! all).

use std::ops::Range;
use std::time::SystemTime;

use bytes::Bytes;
use serde::Deserialize;
use serde_json::value::RawValue;

use super::files;
use super::page::{self, Form, Listed};
use super::Pypi;
use crate::decision::CachedRequest;
use crate::raw_object;
use crate::role::{Filtered, Gated, Gating, Judge, ReleaseName, Times};

impl Gating for Pypi {
    fn gated(&self, request: &CachedRequest) -> Option<Gated> {
        let config = self.config();
        let index = config.index_of_key(&request.key)?;
        if !index.gated {
            return None;
        }
        if request.key.starts_with(&index.key("simple/")) {
            return Some(Gated::Listing);
        }
        let (_, file) = Pypi::file_of(&config, request)?;
        let (project, version) = files::release_of(&file.filename)?;
        let mut times_from = index.page(&project, Form::Json, config.index_ttl);
        times_from.asking.auth = request.asking.auth.clone();
        let release = ReleaseName { name: project, version: version.to_owned(), timed_as: file.filename.clone() };
        Some(Gated::Artifact { release, times_from: Box::new(times_from) })
    }

    /// The release's sdist on PyPI, named as PEP 625 names them
    /// (`{name}-{version}.tar.gz`, the name's runs of `-`, `_`, `.` one
    /// `_`): each file is timed by its own upload, and the sdist stands for
    /// the release. A release with no sdist has no time to read there
    /// (`policy why` then says its time is unknown; a client's request of
    /// one of its wheels is timed by that wheel).
    fn release_request(&self, name: &str, version: &str) -> Option<CachedRequest> {
        let config = self.config();
        let index = config.indexes.first()?;
        let project = super::normalize(name).replace('-', "_");
        let filename = format!("{project}-{version}.tar.gz");
        // The digest its path would name is the page's to give: the policy
        // reads the file's name alone.
        let file = files::FilePath::parse(&format!("00/00/{}/{filename}", "0".repeat(60)))?;
        Some(self.file(index, &file))
    }

    /// Each file's upload time, by its name, from a page in JSON (an HTML
    /// page gives none).
    fn times(&self, _source: &CachedRequest, body: &[u8]) -> Times {
        upload_times(body)
    }

    /// The page with each file the policy refuses marked yanked. An HTML
    /// page gives no times: its project's JSON page does.
    fn filtered(&self, request: &CachedRequest, body: &[u8], judge: &mut dyn Judge) -> Filtered {
        self.marked(request, body, judge).into()
    }
}

impl Pypi {
    /// A page with each file the policy refuses marked yanked; `None`:
    /// none is.
    fn marked(&self, request: &CachedRequest, body: &[u8], judge: &mut dyn Judge) -> Option<Bytes> {
        let config = self.config();
        let index = config.index_of_key(&request.key)?;
        let (project, _form) = request.key.strip_prefix(&index.key("simple/"))?.rsplit_once('/')?;
        let text = String::from_utf8_lossy(body);
        if text.trim_start().starts_with('{') {
            let mut reason = |filename: &str, uploaded| blocked(judge, project, filename, uploaded);
            return marked_json(&text, &mut reason).map(Bytes::from);
        }
        let mut times = Times::new();
        if judge.needs_times() {
            let mut json = index.page(project, Form::Json, config.index_ttl);
            json.asking.auth = request.asking.auth.clone();
            if let Some(Some(body)) = judge.fetch(vec![json]).pop() {
                times = upload_times(&body);
            }
        }
        let mut marked = false;
        let mut reason = |listed: &Listed| {
            let why = blocked(judge, project, &listed.filename, times.get(&listed.filename).copied());
            marked |= why.is_some();
            why
        };
        let written = page::marked_yanked_html(&text, &mut reason);
        marked.then(|| Bytes::from(written))
    }
}

/// Why the policy refuses `filename`, a file of `project` uploaded at
/// `uploaded`; `None`: it is served (or its name names no version, so no
/// rule can name it).
fn blocked(judge: &mut dyn Judge, project: &str, filename: &str, uploaded: Option<SystemTime>) -> Option<String> {
    let version = files::version_of(filename)?;
    match judge.judge(project, version, uploaded) {
        crate::role::Judged::Blocked(line) => Some(line),
        crate::role::Judged::Served => None,
    }
}

/// The upload time of each file a JSON page lists, by its name.
fn upload_times(body: &[u8]) -> Times {
    #[derive(Deserialize)]
    struct Page {
        files: Vec<File>,
    }
    #[derive(Deserialize)]
    struct File {
        filename: String,
        #[serde(rename = "upload-time")]
        upload_time: Option<String>,
    }
    let Ok(page) = serde_json::from_slice::<Page>(body) else { return Times::new() };
    page.files
        .into_iter()
        .filter_map(|file| Some((file.filename, pkgproxy_policy::parse_time(&file.upload_time?)?)))
        .collect()
}

/// `text`, a JSON page, with each file `reason` gives a reason for (it is
/// told the file's name and upload time) marked yanked for it: its
/// `yanked` value replaced, or one added at the end of its entry. Every
/// other byte stays. `None`: nothing marked.
fn marked_json(text: &str, reason: &mut dyn FnMut(&str, Option<SystemTime>) -> Option<String>) -> Option<String> {
    let members = raw_object::members(text)?;
    let files = members.iter().find(|(name, _)| name == "files")?.1;
    let entries: Vec<&RawValue> = serde_json::from_str(files.get()).ok()?;
    let mut edits: Vec<(Range<usize>, String)> = Vec::new();
    for entry in entries {
        let Some(fields) = raw_object::members_of(entry) else { continue };
        let field = |wanted: &str| fields.iter().find(|(name, _)| name == wanted).map(|(_, value)| *value);
        let text_of = |raw: &RawValue| serde_json::from_str::<String>(raw.get()).ok();
        let Some(filename) = field("filename").and_then(text_of) else { continue };
        let uploaded = field("upload-time").and_then(text_of).and_then(|at| pkgproxy_policy::parse_time(&at));
        let Some(why) = reason(&filename, uploaded) else { continue };
        let why = serde_json::to_string(&why).ok()?;
        let edit = match field("yanked") {
            Some(yanked) => (within(text, yanked.get())?, why),
            None => {
                let closing = within(text, entry.get())?.end - 1;
                let comma = if fields.is_empty() { "" } else { "," };
                (closing..closing, format!("{comma}\"yanked\":{why}"))
            }
        };
        edits.push(edit);
    }
    if edits.is_empty() {
        return None;
    }
    let mut out = String::with_capacity(text.len() + edits.iter().map(|(_, with)| with.len()).sum::<usize>());
    let mut copied = 0;
    for (range, with) in edits {
        out.push_str(&text[copied..range.start]);
        out.push_str(&with);
        copied = range.end;
    }
    out.push_str(&text[copied..]);
    Some(out)
}

/// Where `part`, a value serde read borrowing from `whole`, is in it; its
/// bytes are `whole`'s own, so their address says where.
fn within(whole: &str, part: &str) -> Option<Range<usize>> {
    let start = (part.as_ptr() as usize).checked_sub(whole.as_ptr() as usize)?;
    let range = start..start + part.len();
    (range.end <= whole.len()).then_some(range)
}

#[cfg(test)]
mod tests {
    use super::*;

    const PAGE: &str = r#"{"meta": {"api-version": "1.1", "_last-serial": 7}, "name": "demo",
 "files": [
  {"filename": "demo-1.0.tar.gz", "url": "https://f/demo-1.0.tar.gz", "upload-time": "2026-11-01T00:00:00.000000Z", "yanked": false},
  {"filename": "demo-1.1-py3-none-any.whl", "url": "https://f/w", "upload-time": "2026-12-05T00:00:00Z" },
  {"filename": "demo-1.1.tar.gz", "url": "https://f/s", "upload-time": "2026-12-05T01:00:00Z", "yanked": "broken"}
 ], "versions": ["1.0", "1.1"]}"#;

    fn fresh(filename: &str, uploaded: Option<SystemTime>) -> Option<String> {
        let line = pkgproxy_policy::parse_time("2026-12-01T00:00:00Z").unwrap();
        uploaded.is_none_or(|at| at > line).then(|| format!("pypi:demo is blocked: {filename} \"new\""))
    }

    #[test]
    fn a_blocked_file_of_a_json_page_is_marked_yanked_and_every_other_byte_stays() {
        let marked = marked_json(PAGE, &mut fresh).unwrap();
        let expected = PAGE
            .replacen(
                r#""upload-time": "2026-12-05T00:00:00Z" }"#,
                r#""upload-time": "2026-12-05T00:00:00Z" ,"yanked":"pypi:demo is blocked: demo-1.1-py3-none-any.whl \"new\""}"#,
                1,
            )
            .replacen(r#""yanked": "broken""#, r#""yanked": "pypi:demo is blocked: demo-1.1.tar.gz \"new\"""#, 1);
        assert_eq!(marked, expected);
        let page: serde_json::Value = serde_json::from_str(&marked).unwrap();
        assert_eq!(page["files"][0]["yanked"], false, "the old file is served as it was");
        assert_eq!(page["files"][1]["upload-time"], "2026-12-05T00:00:00Z", "times kept");
        assert_eq!(marked_json(PAGE, &mut |_, _| None), None, "nothing blocked: served as it is");
    }

    #[test]
    fn an_empty_entry_takes_its_mark_without_a_comma() {
        let marked = marked_json(r#"{"files":[{}, {"filename":"x-1.0.zip"}]}"#, &mut fresh).unwrap();
        assert_eq!(
            marked,
            r#"{"files":[{}, {"filename":"x-1.0.zip","yanked":"pypi:demo is blocked: x-1.0.zip \"new\""}]}"#
        );
        assert_eq!(marked_json("[1]", &mut fresh), None);
        assert_eq!(marked_json(r#"{"files": 3}"#, &mut fresh), None);
    }

    /// A policy refusing what was uploaded after 2026-12-01, the JSON page
    /// `PAGE` answering every fetch.
    struct Freeze {
        fetched: Vec<String>,
    }

    impl Judge for Freeze {
        fn needs_times(&self) -> bool {
            true
        }

        fn judge(&mut self, name: &str, version: &str, published: Option<SystemTime>) -> crate::role::Judged {
            let line = pkgproxy_policy::parse_time("2026-12-01T00:00:00Z").unwrap();
            match published.is_some_and(|at| at <= line) {
                true => crate::role::Judged::Served,
                false => crate::role::Judged::Blocked(format!("pypi:{name}@{version} is blocked by policy")),
            }
        }

        fn fetch(&mut self, requests: Vec<CachedRequest>) -> Vec<Option<Bytes>> {
            self.fetched.extend(requests.iter().map(|request| request.key.clone()));
            requests.iter().map(|_| Some(Bytes::from_static(PAGE.as_bytes()))).collect()
        }
    }

    #[test]
    fn an_html_page_is_judged_by_the_times_of_its_json_form() {
        let dir = tempfile::tempdir().unwrap();
        let cache = pkgproxy_cache::Cache::open(dir.path(), std::sync::Arc::new(pkgproxy_cache::SystemClock)).unwrap();
        let side = Pypi::new(super::super::Config::new(&super::super::Options::default()).unwrap(), cache);
        let config = side.config();
        let html_page = config.index("").unwrap().page("demo", Form::Html, super::super::DEFAULT_INDEX_TTL);
        let html = "<a href=\"https://f/demo-1.0.tar.gz\">demo-1.0.tar.gz</a>\n\
                    <a href=\"https://f/w\" data-requires-python=\"&gt;=3\">demo-1.1-py3-none-any.whl</a>\n";
        let mut judge = Freeze { fetched: Vec::new() };
        let marked = side.marked(&html_page, html.as_bytes(), &mut judge).unwrap();
        let expected = html.replacen(
            "<a href=\"https://f/w\"",
            "<a data-yanked=\"pypi:demo@1.1 is blocked by policy\" href=\"https://f/w\"",
            1,
        );
        assert_eq!(std::str::from_utf8(&marked).unwrap(), expected);
        assert_eq!(judge.fetched, ["pypi/pypi/simple/demo/json"]);
        let json_page = config.index("").unwrap().page("demo", Form::Json, super::super::DEFAULT_INDEX_TTL);
        let marked = side.marked(&json_page, PAGE.as_bytes(), &mut judge).unwrap();
        assert_eq!(judge.fetched.len(), 1, "a JSON page gives its own times");
        let page: serde_json::Value = serde_json::from_slice(&marked).unwrap();
        let yanked: Vec<&serde_json::Value> = page["files"].as_array().unwrap().iter().map(|f| &f["yanked"]).collect();
        assert_eq!(
            yanked,
            [
                &serde_json::json!(false),
                &"pypi:demo@1.1 is blocked by policy".into(),
                &"pypi:demo@1.1 is blocked by policy".into()
            ]
        );
    }

    #[test]
    fn each_file_s_upload_time_is_read_by_its_name() {
        let times = upload_times(PAGE.as_bytes());
        assert_eq!(times.len(), 3);
        assert_eq!(times["demo-1.0.tar.gz"], pkgproxy_policy::parse_time("2026-11-01T00:00:00Z").unwrap());
        assert!(upload_times(b"<html></html>").is_empty());
        let untimed = upload_times(br#"{"files":[{"filename":"a-1.0.zip"}]}"#);
        assert!(untimed.is_empty(), "a file without a time has none");
    }
}
