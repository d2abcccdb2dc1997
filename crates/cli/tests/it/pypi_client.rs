//! The real pip and uv (current ones, from the test tools' virtual
//! environment) through pkgproxy's PyPI side, against a fake index whose
//! files are on a second port: every page and file fetched once, checked,
//! and served again from the cache.

use std::process::Command;

use pkgproxy_testkit::{project_with_a_dependency, python_tool, Daemon, Distribution, FakePypi};

use crate::common::PKGPROXY;
use crate::inproc::Server;
use crate::readiness::ctl;

async fn index_and_pkgproxy() -> (FakePypi, Server) {
    let fake = FakePypi::start(&project_with_a_dependency()).await;
    let config = format!("[pypi]\nmirrors = [\"{}\"]\n[upstream]\ntrust = [\"{}\"]\n", fake.url(), fake.files_url());
    let server = Server::start(Some(&config)).await;
    (fake, server)
}

/// `pip install PROJECT` into a new folder with a new cache, through the
/// index at `index`; what it said.
fn pip_install(index: &str, project: &str) -> (bool, String, tempfile::TempDir) {
    let target = tempfile::tempdir().unwrap();
    let cache = tempfile::tempdir().unwrap();
    let output = Command::new(python_tool("pip"))
        .args(["install", "--no-input", "--disable-pip-version-check", "--index-url", index, "--target"])
        .arg(target.path())
        .arg("--cache-dir")
        .arg(cache.path())
        .arg(project)
        .env("PIP_CONFIG_FILE", "/dev/null")
        .output()
        .unwrap();
    let said = format!("{}{}", String::from_utf8_lossy(&output.stdout), String::from_utf8_lossy(&output.stderr));
    (output.status.success(), said, target)
}

fn uv_install(index: &str, project: &str) -> (bool, String, tempfile::TempDir) {
    let target = tempfile::tempdir().unwrap();
    let cache = tempfile::tempdir().unwrap();
    let output = Command::new(python_tool("uv"))
        .args(["pip", "install", "--index-url", index, "--target"])
        .arg(target.path())
        .arg("--cache-dir")
        .arg(cache.path())
        .args(["--python", python_tool("python").to_str().unwrap(), project])
        .env("UV_NO_CONFIG", "1")
        .output()
        .unwrap();
    let said = format!("{}{}", String::from_utf8_lossy(&output.stdout), String::from_utf8_lossy(&output.stderr));
    (output.status.success(), said, target)
}

#[tokio::test(flavor = "multi_thread")]
async fn pip_installs_through_pkgproxy_and_a_second_fresh_pip_asks_nothing_upstream() {
    let (fake, server) = index_and_pkgproxy().await;
    let index = format!("http://{}/pypi/simple/", server.proxy_addr());
    let (installed, said, target) = pip_install(&index, "top-level");
    assert!(installed, "{said}");
    assert!(target.path().join("leaf_pkg/__init__.py").exists());
    assert!(fake.count("/packages/") >= 2, "the files came from the index's file host: {:#?}", fake.requests());
    fake.clear_requests();
    let (again, said, _) = pip_install(&index, "top-level");
    assert!(again, "{said}");
    assert!(fake.requests().is_empty(), "nothing asked twice: {:#?}", fake.requests());
}

#[tokio::test(flavor = "multi_thread")]
async fn uv_installs_through_pkgproxy_and_a_second_fresh_uv_asks_nothing_upstream() {
    let (fake, server) = index_and_pkgproxy().await;
    let index = format!("http://{}/pypi/simple/", server.proxy_addr());
    let (installed, said, target) = uv_install(&index, "top-level");
    assert!(installed, "{said}");
    assert!(target.path().join("leaf_pkg/__init__.py").exists());
    fake.clear_requests();
    let (again, said, _) = uv_install(&index, "top-level");
    assert!(again, "{said}");
    assert!(fake.requests().is_empty(), "nothing asked twice: {:#?}", fake.requests());
}

#[tokio::test(flavor = "multi_thread")]
async fn debian_s_own_pip_installs_through_pkgproxy_and_again_offline_with_a_fresh_cache() {
    let (fake, server) = index_and_pkgproxy().await;
    let index = format!("http://{}/pypi/simple/", server.proxy_addr());
    // Debian's pip (23.0) reads the HTML form and never asks for `.metadata`.
    let debian_pip = |target: &std::path::Path| {
        let cache = tempfile::tempdir().unwrap();
        let output = Command::new("/usr/bin/python3")
            .args(["-m", "pip", "install", "--no-input", "--disable-pip-version-check", "--index-url", &index])
            .arg("--target")
            .arg(target)
            .arg("--cache-dir")
            .arg(cache.path())
            .arg("top-level")
            .env("PIP_CONFIG_FILE", "/dev/null")
            .output()
            .unwrap();
        let said = format!("{}{}", String::from_utf8_lossy(&output.stdout), String::from_utf8_lossy(&output.stderr));
        (output.status.success(), said)
    };
    let target = tempfile::tempdir().unwrap();
    let (installed, said) = debian_pip(target.path());
    assert!(installed, "{said}");
    assert!(target.path().join("leaf_pkg/__init__.py").exists(), "{said}");
    set_mode(&server, "offline").await;
    fake.clear_requests();
    let again = tempfile::tempdir().unwrap();
    let (installed, said) = debian_pip(again.path());
    assert!(installed, "{said}");
    assert!(again.path().join("leaf_pkg/__init__.py").exists(), "{said}");
    assert!(fake.requests().is_empty(), "nothing asked while offline: {:#?}", fake.requests());
}

async fn set_mode(server: &Server, mode: &str) {
    let asked = pkgproxy_control::ModeRequest { mode: mode.to_owned(), from: None, cluster: false };
    server.admin().set_offline(&asked).await.expect("the mode is set");
}

#[tokio::test(flavor = "multi_thread")]
async fn offline_pip_and_uv_install_what_was_fetched_and_a_project_never_seen_fails_saying_why() {
    let (fake, server) = index_and_pkgproxy().await;
    let index = format!("http://{}/pypi/simple/", server.proxy_addr());
    let (installed, said, _) = pip_install(&index, "top-level");
    assert!(installed, "{said}");
    set_mode(&server, "offline").await;
    fake.clear_requests();
    let (offline, said, target) = pip_install(&index, "top-level");
    assert!(offline, "{said}");
    assert!(target.path().join("top_level/__init__.py").exists());
    let (offline, said, _) = uv_install(&index, "top-level");
    assert!(offline, "{said}");
    assert!(fake.requests().is_empty(), "nothing asked while offline: {:#?}", fake.requests());

    let started = std::time::Instant::now();
    let (never, said, _) = uv_install(&index, "never-seen");
    assert!(!never);
    assert!(said.contains("Offline (pkgproxy)"), "pkgproxy's reason in uv's words: {said}");
    assert!(started.elapsed() < std::time::Duration::from_secs(10), "no retries of a 424");
}

#[tokio::test(flavor = "multi_thread")]
async fn metadata_never_fetched_is_read_from_the_held_wheel_and_pip_resolves_offline_with_it() {
    use pkgproxy_testkit::client::send;
    let (fake, server) = index_and_pkgproxy().await;
    // The pages and wheels are held, their core metadata never asked for.
    for project in ["top-level", "leaf-pkg"] {
        let json = [("accept", "application/vnd.pypi.simple.v1+json")];
        let page = send(server.proxy_addr(), "GET", &format!("/pypi/simple/{project}/"), &json, b"").await;
        assert_eq!(page.status, 200);
        let page: serde_json::Value = serde_json::from_slice(&page.body).unwrap();
        for file in page["files"].as_array().unwrap() {
            let url = file["url"].as_str().unwrap();
            let path = url.split_once(server.proxy_addr()).unwrap().1;
            assert!(path.starts_with("/pypi/packages/"), "a link at pkgproxy: {url}");
            assert_eq!(send(server.proxy_addr(), "GET", path, &[], b"").await.status, 200, "{path}");
        }
    }
    assert_eq!(fake.count(".metadata"), 0);
    set_mode(&server, "offline").await;
    fake.clear_requests();
    let (installed, said, _) = pip_install(&format!("http://{}/pypi/simple/", server.proxy_addr()), "top-level");
    assert!(installed, "{said}");
    assert!(fake.requests().is_empty(), "{:#?}", fake.requests());
}

#[tokio::test(flavor = "multi_thread")]
async fn wrong_bytes_fail_pip_and_are_not_cached_and_the_honest_file_then_installs() {
    let (fake, server) = index_and_pkgproxy().await;
    let index = format!("http://{}/pypi/simple/", server.proxy_addr());
    fake.set_corrupt(true);
    let (installed, said, _) = pip_install(&index, "leaf-pkg");
    assert!(!installed, "{said}");
    fake.set_corrupt(false);
    let (installed, said, _) = pip_install(&index, "leaf-pkg");
    assert!(installed, "the honest bytes, fetched again: {said}");
    fake.clear_requests();
    assert!(pip_install(&index, "leaf-pkg").0);
    assert_eq!(fake.count("/packages/"), 0, "the honest file was kept: {:#?}", fake.requests());
}

#[tokio::test(flavor = "multi_thread")]
async fn twenty_clients_of_one_large_wheel_make_one_fetch_and_a_cut_one_is_not_kept() {
    use pkgproxy_testkit::client::send;
    let large = Distribution::wheel("large", "1.0", &[], 8 * 1024 * 1024);
    let fake = FakePypi::start(std::slice::from_ref(&large)).await;
    let config = format!("[pypi]\nmirrors = [\"{}\"]\n[upstream]\ntrust = [\"{}\"]\n", fake.url(), fake.files_url());
    let server = Server::start(Some(&config)).await;
    let path = format!("/pypi/{}", large.path());
    fake.set_cut(true);
    let cut = send(server.proxy_addr(), "GET", &path, &[], b"").await;
    assert!(cut.status != 200 || cut.body != large.bytes, "a cut body never reaches a client whole");
    fake.set_cut(false);
    fake.clear_requests();
    let clients = (0..20).map(|_| {
        let (addr, path) = (server.proxy_addr().to_owned(), path.clone());
        tokio::spawn(async move { send(&addr, "GET", &path, &[], b"").await })
    });
    for answer in futures_util::future::join_all(clients).await {
        let answer = answer.unwrap();
        assert_eq!(answer.status, 200);
        assert!(answer.body == large.bytes);
    }
    assert_eq!(fake.count(&large.filename), 1, "{:#?}", fake.requests());
}

#[tokio::test(flavor = "multi_thread")]
async fn both_forms_of_a_page_agree_and_every_link_points_at_pkgproxy() {
    use pkgproxy_testkit::client::send;
    let (_fake, server) = index_and_pkgproxy().await;
    let json = [("accept", "application/vnd.pypi.simple.v1+json")];
    let as_json = send(server.proxy_addr(), "GET", "/pypi/simple/Top_Level", &json, b"").await;
    assert_eq!(as_json.header("vary"), Some("Accept"));
    let as_json: serde_json::Value = serde_json::from_slice(&as_json.body).unwrap();
    let as_html = send(server.proxy_addr(), "GET", "/pypi/simple/top-level/", &[("accept", "text/html")], b"").await;
    let as_html = String::from_utf8(as_html.body.to_vec()).unwrap();
    let pkgproxy = format!("http://{}/pypi/packages/", server.proxy_addr());
    for file in as_json["files"].as_array().unwrap() {
        let url = file["url"].as_str().unwrap();
        assert!(url.starts_with(&pkgproxy), "{url}");
        let sha256 = file["hashes"]["sha256"].as_str().unwrap();
        assert!(as_html.contains(&format!("href=\"{url}#sha256={sha256}\"")), "the same link in HTML: {as_html}");
    }
    assert_eq!(as_html.matches("href=").count(), as_json["files"].as_array().unwrap().len());
}

#[tokio::test(flavor = "multi_thread")]
async fn a_page_over_sixteen_mib_is_served_as_it_is_held_its_links_at_pkgproxy_and_nothing_else_changed() {
    use pkgproxy_testkit::client::send;
    let (fake, server) = index_and_pkgproxy().await;
    fake.add_history("leaf.pkg", 48_000);
    let json = [("accept", "application/vnd.pypi.simple.v1+json")];
    let upstream = send(
        fake.url().trim_start_matches("http://").split('/').next().unwrap(),
        "GET",
        "/simple/leaf-pkg/",
        &json,
        b"",
    )
    .await;
    assert!(upstream.body.len() > 16 << 20 && upstream.body.len() < 64 << 20, "{} bytes", upstream.body.len());
    let pkgproxy = format!("http://{}/pypi/packages/", server.proxy_addr());
    let upstream = String::from_utf8(upstream.body.to_vec()).unwrap();
    let expected =
        upstream.replace(&format!("\"url\":\"{}/packages/", fake.files_url()), &format!("\"url\":\"{pkgproxy}"));
    assert_eq!(expected.matches(&pkgproxy).count(), 48_002, "every file's link, and nothing else, at pkgproxy");
    for (when, cache) in [("fetched", "miss"), ("held", "hit")] {
        let served = send(server.proxy_addr(), "GET", "/pypi/simple/leaf-pkg/", &json, b"").await;
        assert_eq!(
            served.status,
            200,
            "{when}: {}",
            String::from_utf8_lossy(&served.body[..served.body.len().min(300)])
        );
        assert_eq!(served.header("x-pkgproxy-cache"), Some(cache), "{when}");
        assert_eq!(served.header("content-length"), None, "{when}: streamed as it is rewritten, never held whole");
        assert!(served.body == expected.as_bytes(), "{when}: only the links changed");
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn a_page_going_back_in_time_is_refused_and_an_overloaded_index_leaves_pages_stale() {
    use pkgproxy_testkit::client::send;
    let (fake, server) = index_and_pkgproxy().await;
    let json = [("accept", "application/vnd.pypi.simple.v1+json")];
    let first = send(server.proxy_addr(), "GET", "/pypi/simple/leaf-pkg/", &json, b"").await;
    fake.set_lagging(Some(1));
    server.clock().advance(std::time::Duration::from_secs(600));
    let again = send(server.proxy_addr(), "GET", "/pypi/simple/leaf-pkg/", &json, b"").await;
    assert!(again.body == first.body, "the newer page kept");
    assert_eq!(again.header("x-pkgproxy-cache"), Some("stale"), "{:?}", again.header("x-pkgproxy-reason"));
    fake.set_lagging(None);
    fake.force_status(429);
    server.clock().advance(std::time::Duration::from_secs(600));
    let stale = send(server.proxy_addr(), "GET", "/pypi/simple/leaf-pkg/", &json, b"").await;
    assert_eq!(stale.status, 200);
    assert_eq!(stale.header("x-pkgproxy-cache"), Some("stale"));
}

#[tokio::test(flavor = "multi_thread")]
async fn a_file_published_after_its_page_was_held_is_fetched_at_once() {
    use pkgproxy_testkit::client::send;
    let (fake, server) = index_and_pkgproxy().await;
    let json = [("accept", "application/vnd.pypi.simple.v1+json")];
    assert_eq!(send(server.proxy_addr(), "GET", "/pypi/simple/leaf-pkg/", &json, b"").await.status, 200);
    let newer = Distribution::wheel("leaf.pkg", "2.0", &[], 200);
    fake.publish(newer.clone());
    let fetched = send(server.proxy_addr(), "GET", &format!("/pypi/{}", newer.path()), &[], b"").await;
    assert_eq!(fetched.status, 200, "{}", String::from_utf8_lossy(&fetched.body));
    assert!(fetched.body == newer.bytes);
}

#[tokio::test(flavor = "multi_thread")]
async fn pip_and_uv_read_what_setup_writes_pip_in_the_admin_s_own_global_section() {
    let (fake, server) = index_and_pkgproxy().await;
    let root = tempfile::tempdir().unwrap();
    // An image's pip.conf, as Debian's and most images' are: a [global]
    // of the admin's.
    let admin_s = "[global]\ncert = /etc/ssl/certs/ca-certificates.crt\ntimeout = 37\n";
    std::fs::create_dir_all(root.path().join("etc")).unwrap();
    std::fs::write(root.path().join("etc/pip.conf"), admin_s).unwrap();
    for client in ["pip", "uv"] {
        let applied = Command::new(env!("CARGO_BIN_EXE_pkgproxyctl"))
            .args(["setup", client, "-addr", server.proxy_addr(), "--apply"])
            .args(["-stats-socket-path", "/nonexistent/stats.sock", "-admin-socket-path", "/nonexistent/admin.sock"])
            .env("PKGPROXY_SETUP_ROOT", root.path())
            .output()
            .unwrap();
        assert!(applied.status.success(), "{}", String::from_utf8_lossy(&applied.stderr));
    }
    let target = tempfile::tempdir().unwrap();
    let cache = tempfile::tempdir().unwrap();
    let pip = Command::new(python_tool("pip"))
        .args(["install", "--no-input", "--disable-pip-version-check", "--target"])
        .arg(target.path())
        .arg("--cache-dir")
        .arg(cache.path())
        .arg("top-level")
        .env("PIP_CONFIG_FILE", root.path().join("etc/pip.conf"))
        .output()
        .unwrap();
    assert!(pip.status.success(), "{}", String::from_utf8_lossy(&pip.stderr));
    let listed = Command::new(python_tool("pip"))
        .args(["config", "list"])
        .env("PIP_CONFIG_FILE", root.path().join("etc/pip.conf"))
        .env("HOME", root.path())
        .env_remove("XDG_CONFIG_HOME")
        .output()
        .unwrap();
    let listed = String::from_utf8_lossy(&listed.stdout);
    let index = format!("global.index-url='http://{}/pypi/simple/'", server.proxy_addr());
    for setting in [index.as_str(), "global.timeout='37'", "global.cert='/etc/ssl/certs/ca-certificates.crt'"] {
        assert!(listed.lines().any(|line| line == setting), "pip reads {listed}, not {setting}");
    }
    let uv_target = tempfile::tempdir().unwrap();
    let uv = Command::new(python_tool("uv"))
        .args(["pip", "install", "--target"])
        .arg(uv_target.path())
        .arg("--cache-dir")
        .arg(cache.path().join("uv"))
        .args(["--python", python_tool("python").to_str().unwrap(), "top-level"])
        .env("UV_CONFIG_FILE", root.path().join("etc/uv/uv.toml"))
        .output()
        .unwrap();
    assert!(uv.status.success(), "{}", String::from_utf8_lossy(&uv.stderr));
    assert!(fake.count("/simple/top-level/") >= 1, "through pkgproxy, which asked the index");
}

/// `TOOL ARGS` with the index at `index`, no configuration of the user's,
/// and a new cache; whether it succeeded and what it said.
fn run_python_tool(tool_name: &str, args: &[&str], index: &str) -> (bool, String) {
    let cache = tempfile::tempdir().unwrap();
    let mut command = Command::new(python_tool(tool_name));
    command.args(args).env("PIP_CONFIG_FILE", "/dev/null").env("UV_NO_CONFIG", "1");
    match tool_name {
        "pip" => command.args(["--index-url", index, "--cache-dir"]).arg(cache.path()),
        _ => command
            .args(["--index-url", index, "--python", python_tool("python").to_str().unwrap(), "--cache-dir"])
            .arg(cache.path()),
    };
    let output = command.output().unwrap();
    let said = format!("{}{}", String::from_utf8_lossy(&output.stdout), String::from_utf8_lossy(&output.stderr));
    (output.status.success(), said)
}

#[tokio::test(flavor = "multi_thread")]
async fn check_says_what_a_requirements_file_needs_warm_fetches_it_and_pip_and_uv_install_it_offline() {
    let fake = FakePypi::start(&project_with_a_dependency()).await;
    let config = format!("[pypi]\nmirrors = [\"{}\"]\n[upstream]\ntrust = [\"{}\"]\n", fake.url(), fake.files_url());
    let daemon = Daemon::start(PKGPROXY, Some(&config)).await;
    let index = format!("http://{}/pypi/simple/", daemon.proxy_addr());
    let dir = tempfile::tempdir().unwrap();
    let requirements = dir.path().join("requirements.txt");
    let wheel = |project: &str, version: &str| {
        project_with_a_dependency()
            .into_iter()
            .find(|file| file.project == project && file.version == version && file.filename.ends_with(".whl"))
            .unwrap()
    };
    let (top, leaf) = (wheel("Top-Level", "1.0"), wheel("leaf.pkg", "1.1"));
    let pinned =
        format!("top-level==1.0 \\\n    --hash=sha256:{}\nleaf.pkg==1.1 --hash=sha256:{}\n", top.sha256, leaf.sha256);
    std::fs::write(&requirements, pinned).unwrap();
    let requirements = requirements.to_str().unwrap();

    let (ready, printed) = ctl(&daemon, &["check", "pypi", requirements]);
    assert!(!ready, "{printed}");
    assert!(printed.contains("top-level page (json)"), "{printed}");
    assert!(fake.requests().is_empty(), "a check asks nothing upstream: {:#?}", fake.requests());
    let (warmed, printed) = ctl(&daemon, &["warm", "pypi", requirements]);
    assert!(warmed, "{printed}");
    let (ready, printed) = ctl(&daemon, &["check", "pypi", requirements]);
    assert!(ready, "{printed}");
    for listed in [&top.filename, &leaf.filename] {
        assert!(printed.contains(listed.as_str()), "the locked files are named: {printed}");
    }
    assert!(!printed.contains("leaf_pkg-1.0"), "an unlocked version is not warmed: {printed}");

    assert!(ctl(&daemon, &["offline", "offline"]).0);
    fake.clear_requests();
    let target = tempfile::tempdir().unwrap();
    let target_dir = target.path().to_str().unwrap();
    let pip = [
        "install",
        "--no-input",
        "--disable-pip-version-check",
        "--require-hashes",
        "-r",
        requirements,
        "--target",
        target_dir,
    ];
    let (installed, said) = run_python_tool("pip", &pip, &index);
    assert!(installed, "{said}");
    assert!(target.path().join("leaf_pkg/__init__.py").exists());
    let synced = tempfile::tempdir().unwrap();
    let uv = ["pip", "sync", "--require-hashes", requirements, "--target", synced.path().to_str().unwrap()];
    let (installed, said) = run_python_tool("uv", &uv, &index);
    assert!(installed, "{said}");
    assert!(synced.path().join("top_level/__init__.py").exists(), "{said}");
    assert!(fake.requests().is_empty(), "nothing asked while offline: {:#?}", fake.requests());

    // A signed bundle of it, taken in by a pkgproxy that was never online.
    let (key, trusted) = crate::bundle::signing_key(dir.path());
    let bundle = dir.path().join("build.tar");
    let export = ["export", "-o", bundle.to_str().unwrap(), "--sign", key.to_str().unwrap(), "pypi", requirements];
    let (exported, printed) = ctl(&daemon, &export);
    assert!(exported, "{printed}");
    let gapped = Daemon::start_with(PKGPROXY, Some(&format!("{config}{trusted}")), &["-offline"]).await;
    let (imported, printed) = ctl(&gapped, &["import", bundle.to_str().unwrap()]);
    assert!(imported, "{printed}");
    let far = tempfile::tempdir().unwrap();
    let pip =
        ["install", "--no-input", "--disable-pip-version-check", "--require-hashes", "-r", requirements, "--target"];
    let mut pip = pip.to_vec();
    pip.push(far.path().to_str().unwrap());
    let (installed, said) = run_python_tool("pip", &pip, &format!("http://{}/pypi/simple/", gapped.proxy_addr()));
    assert!(installed, "{said}");
    assert!(far.path().join("top_level/__init__.py").exists());
    assert!(fake.requests().is_empty(), "{:#?}", fake.requests());
}

#[tokio::test(flavor = "multi_thread")]
async fn a_search_for_what_a_lock_needs_stops_once_its_requester_has_gone() {
    use pkgproxy_testkit::client::send;
    use tokio::io::AsyncWriteExt;
    let fake = FakePypi::start(&project_with_a_dependency()).await;
    // A page of some 19 MB: reading it is the first step of the search.
    fake.add_history("leaf.pkg", 48_000);
    let config = format!("[pypi]\nmirrors = [\"{}\"]\n[upstream]\ntrust = [\"{}\"]\n", fake.url(), fake.files_url());
    let daemon = Daemon::start(PKGPROXY, Some(&config)).await;
    let json = [("accept", "application/vnd.pypi.simple.v1+json")];
    for project in ["leaf-pkg", "top-level"] {
        let held = send(daemon.proxy_addr(), "GET", &format!("/pypi/simple/{project}/"), &json, b"").await;
        assert_eq!(held.status, 200, "{project}");
    }
    let package =
        |name: &str, version: &str| serde_json::json!({"name": name, "version": version, "index": null, "files": []});
    let lock =
        serde_json::json!({"packages": [package("leaf.pkg", "1.1"), package("top-level", "1.0")], "unknown": []});
    let body = serde_json::json!({"asked": lock}).to_string();
    let mut asking = tokio::net::UnixStream::connect(daemon.stats_socket()).await.unwrap();
    let request = format!(
        "POST /pkgproxy/v1/needs/pypi HTTP/1.1\r\nhost: pkgproxy\r\ncontent-type: application/json\r\n\
         content-length: {}\r\n\r\n{body}",
        body.len()
    );
    asking.write_all(request.as_bytes()).await.unwrap();
    pkgproxy_testkit::eventually("the search to start", || async {
        daemon.log().contains("following what a build needs").then_some(())
    })
    .await;
    drop(asking);
    pkgproxy_testkit::eventually("the search to stop", || async {
        daemon.log().contains("stopped: its requester is gone").then_some(())
    })
    .await;
}

#[tokio::test(flavor = "multi_thread")]
async fn a_uv_lock_made_through_pkgproxy_is_checked_warmed_and_synced_offline() {
    let fake = FakePypi::start(&project_with_a_dependency()).await;
    let config = format!("[pypi]\nmirrors = [\"{}\"]\n[upstream]\ntrust = [\"{}\"]\n", fake.url(), fake.files_url());
    let daemon = Daemon::start(PKGPROXY, Some(&config)).await;
    let index = format!("http://{}/pypi/simple/", daemon.proxy_addr());
    let project = tempfile::tempdir().unwrap();
    let pyproject = "[project]\nname = \"app\"\nversion = \"0.1.0\"\nrequires-python = \">=3.8\"\n\
                     dependencies = [\"top-level==1.0\"]\n";
    std::fs::write(project.path().join("pyproject.toml"), pyproject).unwrap();
    let uv = |args: &[&str]| {
        let mut all = vec!["--directory", project.path().to_str().unwrap()];
        all.extend_from_slice(args);
        run_python_tool("uv", &all, &index)
    };
    let (locked, said) = uv(&["lock"]);
    assert!(locked, "{said}");
    let lock = project.path().join("uv.lock");
    assert!(std::fs::read_to_string(&lock).unwrap().contains(&index), "the lock names pkgproxy's index");
    let lock = lock.to_str().unwrap();

    let (ready, printed) = ctl(&daemon, &["check", "pypi", lock]);
    assert!(!ready, "the wheels were never fetched: {printed}");
    let (warmed, printed) = ctl(&daemon, &["warm", "pypi", lock]);
    assert!(warmed, "{printed}");
    let (ready, printed) = ctl(&daemon, &["check", "pypi", lock]);
    assert!(ready, "{printed}");

    assert!(ctl(&daemon, &["offline", "offline"]).0);
    fake.clear_requests();
    let (synced, said) = uv(&["sync", "--frozen"]);
    assert!(synced, "{said}");
    let site = std::fs::read_dir(project.path().join(".venv/lib")).unwrap().next().unwrap().unwrap().path();
    assert!(site.join("site-packages/leaf_pkg/__init__.py").exists(), "installed: {said}");
    assert!(fake.requests().is_empty(), "nothing asked while offline: {:#?}", fake.requests());
}

#[tokio::test(flavor = "multi_thread")]
async fn an_index_down_or_hanging_leaves_installs_of_what_is_held_working() {
    use pkgproxy_testkit::client::send;
    let fake = FakePypi::start(&project_with_a_dependency()).await;
    // A hanging index costs a request at most the deadline: a short one.
    let config = format!(
        "[pypi]\nmirrors = [\"{}\"]\n[upstream]\ntrust = [\"{}\"]\nretry_timeout = \"2s\"\ndeadline = \"4s\"\n",
        fake.url(),
        fake.files_url()
    );
    let server = Server::start(Some(&config)).await;
    let index = format!("http://{}/pypi/simple/", server.proxy_addr());
    let (installed, said, _) = uv_install(&index, "top-level");
    assert!(installed, "{said}");
    let json = [("accept", "application/vnd.pypi.simple.v1+json")];

    fake.force_status(500);
    server.clock().advance(std::time::Duration::from_secs(600));
    let (installed, said, _) = uv_install(&index, "top-level");
    assert!(installed, "the held pages and files serve while the index fails: {said}");
    let page = send(server.proxy_addr(), "GET", "/pypi/simple/top-level/", &json, b"").await;
    assert_eq!((page.status, page.header("x-pkgproxy-cache")), (200, Some("stale")));
    assert!(
        page.header("x-pkgproxy-reason").is_some_and(|why| why.contains("500")),
        "{:?}",
        page.header("x-pkgproxy-reason")
    );
    let never = send(server.proxy_addr(), "GET", "/pypi/simple/never-seen/", &json, b"").await;
    let said = String::from_utf8_lossy(&never.body);
    assert_eq!(never.status, 424, "an index's 500 is not passed on to installers that retry it: {said}");
    assert!(said.contains("500"), "{said}");
    fake.force_status(503);
    let busy = send(server.proxy_addr(), "GET", "/pypi/simple/never-seen-either/", &json, b"").await;
    assert_eq!((busy.status, busy.header("retry-after")), (424, Some("30")), "asked to wait: told when, not retried");

    fake.force_status(0);
    fake.set_stalled(true);
    server.clock().advance(std::time::Duration::from_secs(600));
    let started = std::time::Instant::now();
    let (installed, said, _) = uv_install(&index, "top-level");
    assert!(installed, "the held pages serve while the index hangs: {said}");
    assert!(
        started.elapsed() < std::time::Duration::from_secs(15),
        "bounded by the upstream's deadline: {:?}",
        started.elapsed()
    );
    let never = send(server.proxy_addr(), "GET", "/pypi/simple/never-seen/", &json, b"").await;
    let said = String::from_utf8_lossy(&never.body);
    assert_eq!(never.status, 424, "not a 404 nor a 5xx for what may exist: {said}");
}

/// pip sleeps a `503`'s `Retry-After` before each of its five retries
/// (here 30 s: two and a half minutes of silence); a `424` it takes as
/// final, as uv does, which then prints pkgproxy's reason.
#[tokio::test(flavor = "multi_thread")]
async fn pip_and_uv_fail_at_once_for_a_page_not_held_while_the_index_asks_to_wait() {
    let (fake, server) = index_and_pkgproxy().await;
    let index = format!("http://{}/pypi/simple/", server.proxy_addr());
    fake.force_status(503);
    let started = std::time::Instant::now();
    let (installed, said, _) = pip_install(&index, "never-seen");
    assert!(!installed, "{said}");
    assert!(said.contains("No matching distribution found for never-seen"), "all pip says by default: {said}");
    let waited = started.elapsed();
    assert!(
        waited < std::time::Duration::from_secs(10),
        "pip fails at once, not after sleeping the index's Retry-After five times: {waited:?}"
    );
    let started = std::time::Instant::now();
    let (installed, said, _) = uv_install(&index, "never-seen");
    assert!(!installed, "{said}");
    assert!(
        said.contains("424 Not held (pkgproxy): the index asks to wait"),
        "pkgproxy's reason in uv's words: {said}"
    );
    let waited = started.elapsed();
    assert!(waited < std::time::Duration::from_secs(10), "uv fails at once, without retries: {waited:?}");
}

#[tokio::test(flavor = "multi_thread")]
async fn uv_and_pip_install_over_the_tls_side_of_the_port_trusting_pkgproxy_s_certificate() {
    use pkgproxy_testkit::client::send;
    let (fake, server) = index_and_pkgproxy().await;
    let pem = send(server.proxy_addr(), "GET", "/pkgproxy/v1/certificate.pem", &[], b"").await;
    assert_eq!(pem.status, 200);
    let dir = tempfile::tempdir().unwrap();
    let certificate = dir.path().join("pkgproxy.pem");
    std::fs::write(&certificate, &pem.body).unwrap();
    let certificate = certificate.to_str().unwrap();
    let index = format!("https://{}/pypi/simple/", server.proxy_addr());

    let page = send(server.proxy_addr(), "GET", "/pypi/simple/top-level/", &[], b"").await;
    assert!(String::from_utf8_lossy(&page.body).contains("href=\"http://"), "over plain HTTP, plain links");
    let over_tls =
        Command::new("curl").args(["-sS", "--cacert", certificate, &format!("{index}top-level/")]).output().unwrap();
    let over_tls = String::from_utf8_lossy(&over_tls.stdout);
    assert!(over_tls.contains(&format!("href=\"https://{}/pypi/packages/", server.proxy_addr())), "{over_tls}");
    let synced = tempfile::tempdir().unwrap();
    let cache = tempfile::tempdir().unwrap();
    let output = Command::new(python_tool("uv"))
        .args(["pip", "install", "--index-url", &index, "--target"])
        .arg(synced.path())
        .arg("--cache-dir")
        .arg(cache.path())
        .args(["--python", python_tool("python").to_str().unwrap(), "top-level"])
        .env("UV_NO_CONFIG", "1")
        .env("SSL_CERT_FILE", certificate)
        .output()
        .unwrap();
    let said = format!("{}{}", String::from_utf8_lossy(&output.stdout), String::from_utf8_lossy(&output.stderr));
    assert!(output.status.success(), "{said}");
    assert!(synced.path().join("top_level/__init__.py").exists());
    assert!(fake.count("/packages/") >= 2, "the files came through pkgproxy: {:#?}", fake.requests());

    // pip, Debian's and a current one, with the certificate as its `cert`
    // (requests prefers a CA bundle named in the environment: none here).
    let current_pip = python_tool("pip");
    for pip in [vec!["/usr/bin/python3", "-m", "pip"], vec![current_pip.to_str().unwrap()]] {
        let target = tempfile::tempdir().unwrap();
        let pip_cache = tempfile::tempdir().unwrap();
        let output = Command::new(pip[0])
            .args(&pip[1..])
            .args(["install", "--no-input", "--disable-pip-version-check", "--index-url", &index])
            .args(["--cert", certificate, "--target"])
            .arg(target.path())
            .arg("--cache-dir")
            .arg(pip_cache.path())
            .arg("top-level")
            .env("PIP_CONFIG_FILE", "/dev/null")
            .env_remove("PIP_CERT")
            .env_remove("REQUESTS_CA_BUNDLE")
            .env_remove("CURL_CA_BUNDLE")
            .output()
            .unwrap();
        let said = format!("{}{}", String::from_utf8_lossy(&output.stdout), String::from_utf8_lossy(&output.stderr));
        assert!(output.status.success(), "{pip:?}: {said}");
        assert!(target.path().join("leaf_pkg/__init__.py").exists());
    }
}
