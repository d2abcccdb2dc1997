//! The fleet's policy on the PyPI side, with the real pip and uv: a file
//! the policy refuses is marked yanked on both forms of its project's page,
//! its reason the policy's line, so an unpinned install resolves the newest
//! file served, and a pinned one prints why and is refused its download
//! with a `403` saying why again. The index has `fresh-pkg` 1.0 (a wheel
//! and an sdist) uploaded a month before the server's clock, and 1.1 (a
//! wheel and an sdist) a day before.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, SystemTime};

use pkgproxy_cache::Clock;
use pkgproxy_control::ModeRequest;
use pkgproxy_testkit::client::send;
use pkgproxy_testkit::{python_tool, Distribution, FakePypi};

use crate::inproc::Server;

const DAY: Duration = Duration::from_secs(24 * 60 * 60);
const JSON: (&str, &str) = ("accept", "application/vnd.pypi.simple.v1+json");

/// The index's files of `fresh-pkg`.
struct Fresh {
    old_wheel: Distribution,
    new_wheel: Distribution,
    new_sdist: Distribution,
}

fn publish(fake: &FakePypi, now: SystemTime) -> Fresh {
    let month = now - 30 * DAY;
    let fresh = Fresh {
        old_wheel: Distribution::wheel("fresh-pkg", "1.0", &[], 200).uploaded_at(month),
        new_wheel: Distribution::wheel("fresh-pkg", "1.1", &[], 200).uploaded_at(now - DAY),
        new_sdist: Distribution::sdist("fresh-pkg", "1.1").uploaded_at(now - DAY),
    };
    fake.publish(fresh.old_wheel.clone());
    fake.publish(Distribution::sdist("fresh-pkg", "1.0").uploaded_at(month));
    fake.publish(fresh.new_wheel.clone());
    fake.publish(fresh.new_sdist.clone());
    fresh
}

/// `[pypi]` for `fake` as PyPI.
fn pypi(fake: &FakePypi) -> String {
    format!("[pypi]\nmirrors = [\"{}\"]\n[upstream]\ntrust = [\"{}\"]\n", fake.url(), fake.files_url())
}

/// The fake index, pkgproxy in front of it with `policy` (its `[policy]`
/// section), and `fresh-pkg` published by the server's clock.
async fn index_with(policy: &str) -> (FakePypi, Server, Fresh) {
    let fake = FakePypi::start(&[]).await;
    let server = Server::start(Some(&format!("{}{policy}", pypi(&fake)))).await;
    let fresh = publish(&fake, server.clock().now());
    (fake, server, fresh)
}

/// pkgproxy's index at `mount` (`/pypi` for PyPI, `/pypi/NAME`).
fn index_url(server: &Server, mount: &str) -> String {
    format!("http://{}{mount}/simple/", server.proxy_addr())
}

/// What a client run said, and whether it succeeded.
struct Ran {
    success: bool,
    said: String,
}

fn run(command: &mut Command) -> Ran {
    let output = command.env("PIP_CONFIG_FILE", "/dev/null").env("UV_NO_CONFIG", "1").output().expect("it runs");
    let said = format!("{}{}", String::from_utf8_lossy(&output.stdout), String::from_utf8_lossy(&output.stderr));
    Ran { success: output.status.success(), said }
}

/// `pip download --no-deps fresh-pkg` (or what `requirement` says) into a
/// new folder: the files downloaded.
fn pip_download(index: &str, requirement: &str) -> (Ran, Vec<String>) {
    let (into, cache) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let ran = run(Command::new(python_tool("pip"))
        .args(["download", "--no-deps", "--no-input", "--disable-pip-version-check", "--index-url", index, "-d"])
        .arg(into.path())
        .arg("--cache-dir")
        .arg(cache.path())
        .arg(requirement));
    let mut files: Vec<String> = std::fs::read_dir(into.path())
        .map(|dir| dir.flatten().map(|entry| entry.file_name().to_string_lossy().into_owned()).collect())
        .unwrap_or_default();
    files.sort();
    (ran, files)
}

/// A requirements file pinning `fresh-pkg==VERSION` by the hashes of
/// `files`.
fn pinned(dir: &Path, files: &[&Distribution]) -> PathBuf {
    let hashes: Vec<String> = files.iter().map(|file| format!(" --hash=sha256:{}", file.sha256)).collect();
    let path = dir.join("requirements.txt");
    std::fs::write(&path, format!("fresh-pkg=={}{}\n", files[0].version, hashes.concat())).unwrap();
    path
}

/// `pip install -r requirements` (pinned with hashes) into a new folder.
fn pip_install_pinned(index: &str, requirements: &Path) -> Ran {
    let (target, cache) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    run(Command::new(python_tool("pip"))
        .args(["install", "--no-deps", "--no-input", "--disable-pip-version-check", "--index-url", index])
        .arg("--target")
        .arg(target.path())
        .arg("--cache-dir")
        .arg(cache.path())
        .arg("-r")
        .arg(requirements))
}

/// `uv pip install requirement` into a new folder: the version of
/// `fresh-pkg` installed.
fn uv_install(index: &str, requirement: &str) -> (Ran, Option<String>) {
    let (target, cache) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let ran = run(Command::new(python_tool("uv"))
        .args(["pip", "install", "--index-url", index, "--target"])
        .arg(target.path())
        .arg("--cache-dir")
        .arg(cache.path())
        .args(["--python", python_tool("python").to_str().unwrap(), requirement]));
    (ran, installed(target.path()))
}

/// `uv pip sync requirements` into a new folder.
fn uv_sync(index: &str, requirements: &Path) -> (Ran, Option<String>) {
    let (target, cache) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let ran = run(Command::new(python_tool("uv"))
        .args(["pip", "sync", "--index-url", index, "--target"])
        .arg(target.path())
        .arg("--cache-dir")
        .arg(cache.path())
        .args(["--python", python_tool("python").to_str().unwrap()])
        .arg(requirements));
    (ran, installed(target.path()))
}

/// The version of `fresh-pkg` installed in `target`.
fn installed(target: &Path) -> Option<String> {
    std::fs::read_dir(target).ok()?.flatten().find_map(|entry| {
        let name = entry.file_name().to_string_lossy().into_owned();
        Some(name.strip_prefix("fresh_pkg-")?.strip_suffix(".dist-info")?.to_owned())
    })
}

/// The status line and body pkgproxy answers a client's `GET path`.
fn fetched_by_curl(server: &Server, path: &str) -> (String, String) {
    let url = format!("http://{}{path}", server.proxy_addr());
    let out = Command::new("curl").args(["-s", "-D", "-", &url]).output().expect("curl runs");
    let said = String::from_utf8_lossy(&out.stdout).into_owned();
    let status = said.lines().next().unwrap_or_default().trim_end().to_owned();
    let body = said.split_once("\r\n\r\n").map(|(_, body)| body.to_owned()).unwrap_or_default();
    (status, body)
}

/// Each file of `fresh-pkg`'s JSON page at `mount` and its `yanked`.
async fn yanked_in_json(server: &Server, mount: &str) -> Vec<(String, serde_json::Value)> {
    let page = send(server.proxy_addr(), "GET", &format!("{mount}/simple/fresh-pkg/"), &[JSON], b"").await;
    assert_eq!(page.status, 200);
    let page: serde_json::Value = serde_json::from_slice(&page.body).expect("a JSON page");
    let files = page["files"].as_array().expect("files").iter();
    files.map(|file| (file["filename"].as_str().unwrap_or_default().to_owned(), file["yanked"].clone())).collect()
}

async fn set_mode(server: &Server, mode: &str) {
    let asked = ModeRequest { mode: mode.to_owned(), from: None, cluster: false };
    server.admin().set_offline(&asked).await.expect("the mode is set");
}

#[tokio::test(flavor = "multi_thread")]
async fn min_age_holds_new_files_back_and_a_pinned_install_says_why_until_they_are_old_enough() {
    let (fake, server, fresh) = index_with("[policy]\nmin_age = \"3d\"\n").await;
    // A wheel added to the old release a day ago is as fresh as its upload.
    let late_wheel = Distribution::wheel_tagged("fresh-pkg", "1.0", "py311-none-any", &[], 200)
        .uploaded_at(server.clock().now() - DAY);
    fake.publish(late_wheel.clone());
    let index = index_url(&server, "/pypi");

    let (ran, files) = pip_download(&index, "fresh-pkg");
    assert!(ran.success, "{}", ran.said);
    assert_eq!(files, [fresh.old_wheel.filename.as_str()], "1.1 is held back, and 1.0's new wheel: {}", ran.said);
    let (ran, version) = uv_install(&index, "fresh-pkg");
    assert!(ran.success, "{}", ran.said);
    assert_eq!(version.as_deref(), Some("1.0"), "{}", ran.said);

    // The page, in both forms: the fresh files marked yanked with the
    // reason, the rest as the index wrote them.
    let json = yanked_in_json(&server, "/pypi").await;
    for (file, yanked) in &json {
        let held = [&fresh.new_wheel.filename, &fresh.new_sdist.filename, &late_wheel.filename].contains(&file);
        match held {
            true => assert!(yanked.as_str().is_some_and(|why| why.contains("is blocked by policy")), "{file}"),
            false => assert_eq!(yanked, &serde_json::json!(false), "{file}"),
        }
    }
    let html = send(server.proxy_addr(), "GET", "/pypi/simple/fresh-pkg/", &[("accept", "text/html")], b"").await;
    let html = String::from_utf8_lossy(&html.body).into_owned();
    let marked = html.lines().filter(|line| line.contains("data-yanked=\"pypi:fresh-pkg@1.")).count();
    assert_eq!(marked, 3, "{html}");

    let dir = tempfile::tempdir().unwrap();
    let requirements = pinned(dir.path(), &[&fresh.new_wheel, &fresh.new_sdist]);
    let refused = pip_install_pinned(&index, &requirements);
    assert!(!refused.success, "{}", refused.said);
    println!("pip install -r (fresh-pkg==1.1 pinned with hashes), min_age 3d:\n{}", refused.said);
    // pip stops at the download, during resolution, before it would print
    // the yank's reason: it prints the status line's reason phrase.
    assert!(refused.said.contains("403 Client Error: Blocked by pkgproxy policy (min_age until "), "{}", refused.said);
    let (refused, _) = uv_sync(&index, &requirements);
    assert!(!refused.success, "{}", refused.said);
    println!("uv pip sync (fresh-pkg==1.1 pinned), min_age 3d:\n{}", refused.said);
    assert!(refused.said.contains("(403 Blocked by pkgproxy policy (min_age until "), "{}", refused.said);
    let (refused, _) = uv_install(&index, "fresh-pkg==1.1");
    assert!(!refused.success, "{}", refused.said);
    println!("uv pip install fresh-pkg==1.1, min_age 3d:\n{}", refused.said);
    assert!(refused.said.contains("(403 Blocked by pkgproxy policy (min_age until "), "{}", refused.said);
    let (status, body) = fetched_by_curl(&server, &format!("/pypi/{}", fresh.new_wheel.path()));
    assert!(status.starts_with("HTTP/1.1 403 Blocked by pkgproxy policy (min_age until "), "{status}");
    assert!(body.starts_with("pkgproxy: pypi:fresh-pkg@1.1 is blocked by policy: published "), "{body}");
    assert_eq!(fake.count(&fresh.new_wheel.filename), 0, "never fetched for a refused client");

    server.clock().advance(4 * DAY);
    let installed = pip_install_pinned(&index, &requirements);
    assert!(installed.success, "{}", installed.said);
    let (synced, version) = uv_sync(&index, &requirements);
    assert!(synced.success, "{}", synced.said);
    assert_eq!(version.as_deref(), Some("1.1"));
    assert_eq!(fake.count(&fresh.new_wheel.filename), 1, "fetched once, then from the cache: {:#?}", fake.requests());
}

#[tokio::test(flavor = "multi_thread")]
async fn not_after_serves_only_what_was_published_before_it() {
    // The server's clock starts at the system's time, a moment after this.
    let line = humantime::format_rfc3339_seconds(SystemTime::now() - 10 * DAY);
    let (_fake, server, fresh) = index_with(&format!("[policy]\nnot_after = \"{line}\"\n")).await;
    let index = index_url(&server, "/pypi");
    let (ran, files) = pip_download(&index, "fresh-pkg");
    assert!(ran.success, "{}", ran.said);
    assert_eq!(files, [fresh.old_wheel.filename.as_str()]);
    let (ran, version) = uv_install(&index, "fresh-pkg");
    assert!(ran.success, "{}", ran.said);
    assert_eq!(version.as_deref(), Some("1.0"));
    let json = yanked_in_json(&server, "/pypi").await;
    let (_, why) = json.iter().find(|(file, _)| *file == fresh.new_wheel.filename).expect("listed");
    assert!(why.as_str().is_some_and(|why| why.contains("after not_after")), "{why}");
}

#[tokio::test(flavor = "multi_thread")]
async fn an_index_that_gives_no_times_is_refused_when_unknown_time_refuses_and_served_when_it_allows() {
    let (fake, server, fresh) = index_with("[policy]\nmin_age = \"3d\"\nunknown_time = \"refuse\"\n").await;
    fake.set_no_times(true);
    let index = index_url(&server, "/pypi");
    let dir = tempfile::tempdir().unwrap();
    let requirements = pinned(dir.path(), &[&fresh.old_wheel]);
    let refused = pip_install_pinned(&index, &requirements);
    assert!(!refused.success, "{}", refused.said);
    println!("pip install -r (fresh-pkg==1.0 pinned), no times and unknown_time = \"refuse\":\n{}", refused.said);
    assert!(refused.said.contains("403 Client Error: Blocked by pkgproxy policy (unknown_time)"), "{}", refused.said);
    let (_, body) = fetched_by_curl(&server, &format!("/pypi/{}", fresh.old_wheel.path()));
    assert!(body.contains("pypi:fresh-pkg@1.0 is blocked by policy: its publish time cannot be learnt"), "{body}");

    server.reload_with(&format!("{}[policy]\nmin_age = \"3d\"\nunknown_time = \"allow\"\n", pypi(&fake))).await;
    let served = pip_install_pinned(&index, &requirements);
    assert!(served.success, "{}", served.said);
    let (ran, version) = uv_install(&index, "fresh-pkg");
    assert!(ran.success, "{}", ran.said);
    assert_eq!(version.as_deref(), Some("1.1"), "nothing is known to be too new");
}

/// An OSV folder holding one malicious-package record for `fresh-pkg` 1.1.
fn malicious_record() -> tempfile::TempDir {
    let dir = tempfile::tempdir().expect("a folder");
    let record = serde_json::json!({
        "id": "MAL-2026-7002",
        "summary": "Malicious code in fresh-pkg (PyPI)",
        "affected": [{"package": {"ecosystem": "PyPI", "name": "fresh-pkg"}, "versions": ["1.1"]}]
    });
    std::fs::write(dir.path().join("MAL-2026-7002.json"), record.to_string()).expect("the record");
    dir
}

#[tokio::test(flavor = "multi_thread")]
async fn a_malicious_package_record_refuses_its_version_serves_its_neighbour_and_allow_lets_it_through() {
    let osv = malicious_record();
    let policy = format!("[policy]\nosv = [{:?}]\n", osv.path());
    let (fake, server, fresh) = index_with(&policy).await;
    let index = index_url(&server, "/pypi");
    let (ran, version) = uv_install(&index, "fresh-pkg");
    assert!(ran.success, "{}", ran.said);
    assert_eq!(version.as_deref(), Some("1.0"), "the neighbour is served");
    let dir = tempfile::tempdir().unwrap();
    let requirements = pinned(dir.path(), &[&fresh.new_wheel, &fresh.new_sdist]);
    let refused = pip_install_pinned(&index, &requirements);
    assert!(!refused.success, "{}", refused.said);
    println!("pip install -r (fresh-pkg==1.1 pinned), named by a MAL- record:\n{}", refused.said);
    assert!(refused.said.contains("403 Client Error: Blocked by pkgproxy policy (MAL-2026-7002)"), "{}", refused.said);
    let (_, body) = fetched_by_curl(&server, &format!("/pypi/{}", fresh.new_wheel.path()));
    assert!(body.contains("pypi:fresh-pkg@1.1 is blocked by policy: named by MAL-2026-7002"), "{body}");

    server.reload_with(&format!("{}{policy}allow = [\"pypi:fresh-pkg@1.1\"]\n", pypi(&fake))).await;
    let allowed = pip_install_pinned(&index, &requirements);
    assert!(allowed.success, "break-glass: {}", allowed.said);
    let (ran, version) = uv_install(&index, "fresh-pkg");
    assert!(ran.success, "{}", ran.said);
    assert_eq!(version.as_deref(), Some("1.1"));
}

#[tokio::test(flavor = "multi_thread")]
async fn an_index_configured_with_policy_false_serves_its_fresh_files() {
    let fake = FakePypi::start(&[]).await;
    let corp = format!("[[pypi.index]]\nname = \"corp\"\nmirrors = [\"{}\"]\npolicy = false\n", fake.url());
    let server = Server::start(Some(&format!("{}{corp}[policy]\nmin_age = \"3d\"\n", pypi(&fake)))).await;
    let fresh = publish(&fake, server.clock().now());
    let corp = index_url(&server, "/pypi/corp");
    let (ran, version) = uv_install(&corp, "fresh-pkg");
    assert!(ran.success, "{}", ran.said);
    assert_eq!(version.as_deref(), Some("1.1"), "the fleet's own index is not judged");
    let dir = tempfile::tempdir().unwrap();
    let requirements = pinned(dir.path(), &[&fresh.new_wheel, &fresh.new_sdist]);
    let installed = pip_install_pinned(&corp, &requirements);
    assert!(installed.success, "{}", installed.said);
    assert!(yanked_in_json(&server, "/pypi/corp").await.iter().all(|(_, yanked)| yanked == false));
    let (_, version) = uv_install(&index_url(&server, "/pypi"), "fresh-pkg");
    assert_eq!(version.as_deref(), Some("1.0"), "PyPI's is");
}

#[tokio::test(flavor = "multi_thread")]
async fn offline_the_policy_applies_to_what_is_cached_and_a_cached_file_is_served_once_old_enough() {
    let (fake, server, fresh) = index_with("[policy]\nmin_age = \"12h\"\n").await;
    let index = index_url(&server, "/pypi");
    let dir = tempfile::tempdir().unwrap();
    let new = pinned(dir.path(), &[&fresh.new_wheel, &fresh.new_sdist]);
    assert!(pip_install_pinned(&index, &new).success);
    let (ran, files) = pip_download(&index, "fresh-pkg==1.0");
    assert!(ran.success && files == [fresh.old_wheel.filename.as_str()], "{}", ran.said);
    let (ran, version) = uv_install(&index, "fresh-pkg");
    assert!(ran.success && version.as_deref() == Some("1.1"), "{}", ran.said);

    set_mode(&server, "offline").await;
    server.reload_with(&format!("{}[policy]\nmin_age = \"3d\"\n", pypi(&fake))).await;
    fake.clear_requests();
    let refused = pip_install_pinned(&index, &new);
    assert!(!refused.success, "cached, yet refused: {}", refused.said);
    assert!(refused.said.contains("Blocked by pkgproxy policy (min_age until "), "{}", refused.said);
    let (ran, files) = pip_download(&index, "fresh-pkg");
    assert!(ran.success, "{}", ran.said);
    assert_eq!(files, [fresh.old_wheel.filename.as_str()], "the held page, marked");

    server.clock().advance(4 * DAY);
    let installed = pip_install_pinned(&index, &new);
    assert!(installed.success, "{}", installed.said);
    assert!(fake.requests().is_empty(), "all of it from the cache: {:#?}", fake.requests());
}

#[tokio::test(flavor = "multi_thread")]
async fn a_reload_with_a_changed_rule_applies_to_the_next_request_without_fetching_anything_again() {
    let (fake, server, fresh) = index_with("[policy]\nmin_age = \"3d\"\n").await;
    let index = index_url(&server, "/pypi");
    let (ran, version) = uv_install(&index, "fresh-pkg");
    assert!(ran.success && version.as_deref() == Some("1.0"), "{}", ran.said);
    let (ran, _) = pip_download(&index, "fresh-pkg");
    assert!(ran.success, "{}", ran.said);
    fake.clear_requests();

    server.reload_with(&format!("{}[policy]\nmin_age = \"12h\"\n", pypi(&fake))).await;
    assert!(yanked_in_json(&server, "/pypi").await.iter().all(|(_, yanked)| yanked == false));
    let (ran, files) = pip_download(&index, "fresh-pkg");
    assert!(ran.success, "{}", ran.said);
    assert_eq!(files, [fresh.new_wheel.filename.as_str()], "the new rule, from the next request on");
    let pages = fake.requests().iter().filter(|request| request.path.contains("/simple/")).count();
    assert_eq!(pages, 0, "no page fetched again: {:#?}", fake.requests());

    fake.clear_requests();
    server.reload_with(&format!("{}[policy]\nmin_age = \"3d\"\n", pypi(&fake))).await;
    let dir = tempfile::tempdir().unwrap();
    let refused = pip_install_pinned(&index, &pinned(dir.path(), &[&fresh.new_wheel, &fresh.new_sdist]));
    assert!(!refused.success, "the held wheel refused again: {}", refused.said);
    let (ran, files) = pip_download(&index, "fresh-pkg");
    assert!(ran.success && files == [fresh.old_wheel.filename.as_str()], "{}", ran.said);
    assert!(fake.requests().is_empty(), "nothing fetched again: {:#?}", fake.requests());
}
