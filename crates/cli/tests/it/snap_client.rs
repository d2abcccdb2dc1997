//! The snap side end to end: the real `snap` command (Debian's snapd
//! package, daemonless) with `SNAPPY_FORCE_API_URL` pointing at pkgproxy,
//! in front of a fake Snap Store on 127.0.0.1.
//!
//! A fake store can never satisfy the Canonical root key built into
//! `snap`, so `snap download` always ends at the trust root: after the
//! blob and the snap-revision, snap-declaration and account assertions, it
//! cannot decode the fake store's account-key. Each test asserts that exact
//! stop, which shows everything before it went through.

use crate::common::PKGPROXY;
use pkgproxy_metrics::SideCounter;
use pkgproxy_testkit::{Daemon, FakeStore, SnapOutput, SnapSandbox};

/// The stop at the trust root.
const TRUST_ROOT_STOP: &str = "cannot decode public key";

async fn daemon_for(store: &FakeStore) -> Daemon {
    Daemon::start(PKGPROXY, Some(&store.config())).await
}

fn api_url(daemon: &Daemon) -> String {
    format!("http://{}/snap/", daemon.proxy_addr())
}

/// `snap download NAME` in the folder `folder`.
fn download(snap: &SnapSandbox, folder: &str, name: &str) -> SnapOutput {
    let output = snap.run(folder, &["download", name]);
    eprintln!("snap download {name}: {}{}", output.stdout, output.stderr);
    output
}

fn assert_reached_the_trust_root(output: &SnapOutput) {
    assert!(!output.success);
    assert!(output.stderr.contains(TRUST_ROOT_STOP), "{}", output.stderr);
}

/// The paths the store was asked for, without their queries.
fn asked(store: &FakeStore) -> Vec<String> {
    store.requests().iter().map(|r| r.path.split('?').next().unwrap().to_string()).collect()
}

#[tokio::test(flavor = "multi_thread")]
async fn snap_download_goes_through_pkgproxy_to_the_trust_root_and_again_from_the_cache() {
    let store = FakeStore::start().await;
    let daemon = daemon_for(&store).await;
    let snap = SnapSandbox::new(&api_url(&daemon));
    let expected = store.blob("hello-pkgproxy", "amd64", "");

    let cold = download(&snap, "cold", "hello-pkgproxy");
    assert_reached_the_trust_root(&cold);
    assert_eq!(cold.file("hello-pkgproxy_3.snap").as_deref(), Some(expected.bytes.as_ref()), "the store's bytes");
    let paths = asked(&store);
    for path in ["/v2/snaps/refresh", "/api/v1/snaps/download/hellopkgproxyid00000000000000001_3.snap"] {
        assert_eq!(paths.iter().filter(|p| *p == path).count(), 1, "{path} once: {paths:#?}");
    }
    assert!(paths.iter().any(|p| p.starts_with("/cdn/")), "pkgproxy followed the redirect: {paths:#?}");
    assert!(
        store.requests().iter().all(|r| r.header("via").is_some_and(|via| via.contains("pkgproxy"))),
        "all through pkgproxy"
    );
    for kind in ["snap-revision", "snap-declaration", "account", "account-key"] {
        assert!(paths.iter().any(|p| p.starts_with(&format!("/v2/assertions/{kind}/"))), "{kind}: {paths:#?}");
    }

    store.clear_requests();
    let warm = download(&snap, "warm", "hello-pkgproxy");
    assert_reached_the_trust_root(&warm);
    assert_eq!(warm.file("hello-pkgproxy_3.snap").as_deref(), Some(expected.bytes.as_ref()));
    let paths = asked(&store);
    assert!(
        paths.iter().all(|p| p == "/v2/snaps/refresh" || p.starts_with("/v2/assertions/snap-declaration/")),
        "only the refresh and the declaration's revalidation reach the store: {paths:#?}"
    );
}

/// `snap known --remote KIND KEY=VALUE...`: the store asked by the `snap`
/// command itself (`--direct` where a snapd runs, which would otherwise
/// ask its own store).
fn known(snap: &SnapSandbox, args: &[&str]) -> SnapOutput {
    let daemon_runs = std::path::Path::new("/run/snapd.socket").exists();
    let mut all = vec!["known", if daemon_runs { "--direct" } else { "--remote" }];
    all.extend_from_slice(args);
    let output = snap.run("known", &all);
    eprintln!("snap {}: {}{}", all.join(" "), output.stdout, output.stderr);
    output
}

#[tokio::test(flavor = "multi_thread")]
async fn offline_a_snap_seen_before_downloads_with_no_store_request_and_one_never_seen_fails_at_once() {
    let store = FakeStore::start().await;
    let daemon = daemon_for(&store).await;
    let snap = SnapSandbox::new(&api_url(&daemon));
    let expected = store.blob("hello-pkgproxy", "amd64", "");
    assert_reached_the_trust_root(&download(&snap, "online", "hello-pkgproxy"));

    daemon.set_offline_mode("offline").await;
    store.clear_requests();
    let offline = download(&snap, "offline", "hello-pkgproxy");
    assert_reached_the_trust_root(&offline);
    assert_eq!(offline.file("hello-pkgproxy_3.snap").as_deref(), Some(expected.bytes.as_ref()));

    let snap_id = &store.snaps()[0].snap_id;
    let revision = format!("snap-sha3-384={}", expected.revision_name());
    for (args, kind, key) in [
        (vec!["snap-revision", revision.as_str()], "snap-revision", vec![expected.revision_name()]),
        (
            vec!["snap-declaration", "series=16", &format!("snap-id={snap_id}")],
            "snap-declaration",
            vec!["16".into(), snap_id.clone()],
        ),
        (vec!["account", "account-id=pkgproxydev"], "account", vec!["pkgproxydev".into()]),
    ] {
        let output = known(&snap, &args);
        assert!(output.success, "{kind}: {}", output.stderr);
        let key: Vec<&str> = key.iter().map(String::as_str).collect();
        let served = store.assertion(kind, &key).unwrap();
        assert_eq!(output.stdout.trim_end().as_bytes(), served.trim_ascii_end(), "{kind} byte for byte");
    }

    let never = download(&snap, "never", "other-pkgproxy");
    assert!(!never.success);
    assert!(never.stderr.contains("cannot download snap \"other-pkgproxy\": pkgproxy is offline"), "{}", never.stderr);
    assert!(never.elapsed.as_secs() < 5, "no retries: {:?}", never.elapsed);

    let unknown = known(&snap, &["account", "account-id=nobody"]);
    assert!(!unknown.success);
    assert!(unknown.stderr.contains("pkgproxy is offline"), "{}", unknown.stderr);
    assert!(!unknown.stderr.contains("not found"), "a refusal, never an absence: {}", unknown.stderr);
    assert!(unknown.elapsed.as_secs() < 5, "no retries: {:?}", unknown.elapsed);
    assert!(store.requests().is_empty(), "offline: nothing reached the store: {:#?}", store.requests());

    let refused = pkgproxy_testkit::client::get(daemon.proxy_addr(), "/snap/v2/snaps/info/other-pkgproxy").await;
    assert_eq!(refused.status, 424);
    assert_eq!(refused.header("content-type"), Some("application/json"));
    assert_eq!(refused.header("x-oops-id"), Some("pkgproxy-offline"));
    assert_eq!(refused.header("retry-after"), None);
    let body: serde_json::Value = serde_json::from_slice(&refused.body).unwrap();
    assert_eq!(body["error-list"][0]["code"], "pkgproxy-offline");
}

#[tokio::test(flavor = "multi_thread")]
async fn each_architecture_and_brand_store_gets_its_own_answers_and_blobs() {
    let store = FakeStore::start().await;
    let daemon = daemon_for(&store).await;
    let url = api_url(&daemon);
    let global = SnapSandbox::new(&url);
    let arm = SnapSandbox::new(&url).with_env("UBUNTU_STORE_ARCH", "arm64");
    let brand = SnapSandbox::new(&url).with_env("UBUNTU_STORE_ID", "acme");
    for (snap, arch, store_id) in [(&global, "amd64", ""), (&arm, "arm64", ""), (&brand, "amd64", "acme")] {
        for round in ["first", "second"] {
            let output = download(snap, &format!("{arch}-{store_id}-{round}"), "hello-pkgproxy");
            assert_reached_the_trust_root(&output);
            let expected = store.blob("hello-pkgproxy", arch, store_id);
            assert_eq!(
                output.file("hello-pkgproxy_3.snap").as_deref(),
                Some(expected.bytes.as_ref()),
                "{arch} {store_id:?} {round}"
            );
        }
    }
    let cdn = asked(&store).iter().filter(|p| p.starts_with("/cdn/")).count();
    assert_eq!(cdn, 3, "each blob fetched once: {:#?}", asked(&store));
}

#[tokio::test(flavor = "multi_thread")]
async fn a_lying_store_s_blob_is_never_cached_and_an_honest_retry_works() {
    let store = FakeStore::start().await;
    let daemon = daemon_for(&store).await;
    let snap = SnapSandbox::new(&api_url(&daemon));
    store.set_lying(true);
    let lied = download(&snap, "lied", "hello-pkgproxy");
    assert!(!lied.success);
    assert!(!lied.stderr.contains(TRUST_ROOT_STOP), "the download itself failed: {}", lied.stderr);
    assert!(lied.file("hello-pkgproxy_3.snap").is_none(), "no wrong snap is left behind");
    let expected = store.blob("hello-pkgproxy", "amd64", "");
    let blob_url = format!(
        "/snap/download/{}/{}/api/v1/snaps/download/{}_3.snap",
        expected.sha3_384,
        expected.bytes.len(),
        store.snaps()[0].snap_id
    );
    daemon.set_offline_mode("offline").await;
    let cached = pkgproxy_testkit::client::get(daemon.proxy_addr(), &blob_url).await;
    assert_eq!(cached.status, 424, "nothing was cached");
    daemon.set_offline_mode("never").await;

    store.set_lying(false);
    let honest = download(&snap, "honest", "hello-pkgproxy");
    assert_reached_the_trust_root(&honest);
    assert_eq!(honest.file("hello-pkgproxy_3.snap").as_deref(), Some(expected.bytes.as_ref()));
}

#[tokio::test(flavor = "multi_thread")]
async fn a_partial_download_is_resumed_from_the_cache() {
    let store = FakeStore::start().await;
    let daemon = daemon_for(&store).await;
    let snap = SnapSandbox::new(&api_url(&daemon));
    let expected = store.blob("hello-pkgproxy", "amd64", "");
    assert_reached_the_trust_root(&download(&snap, "first", "hello-pkgproxy"));

    let folder = snap.folder("resumed");
    std::fs::write(folder.join("hello-pkgproxy_3.snap.partial"), &expected.bytes[..1000]).unwrap();
    store.clear_requests();
    let from_cache = || async { daemon.info().await.sides["snap"].get(SideCounter::BytesFromCache) };
    let before = from_cache().await;
    let resumed = snap.run_in(&folder, &["download", "hello-pkgproxy"]);
    assert_reached_the_trust_root(&resumed);
    assert_eq!(resumed.file("hello-pkgproxy_3.snap").as_deref(), Some(expected.bytes.as_ref()));
    assert!(asked(&store).iter().all(|p| !p.starts_with("/cdn/")), "from the cache");
    // Served from the cache: the blob from byte 1000 on, and the assertions
    // that are not asked for again (the declaration is).
    let assertions: usize = [
        ("snap-revision", vec![expected.revision_name()]),
        ("account", vec!["pkgproxydev".to_string()]),
        ("account-key", vec![pkgproxy_testkit::snapstore::STORE_KEY.to_string()]),
    ]
    .iter()
    .map(|(kind, key)| store.assertion(kind, &key.iter().map(String::as_str).collect::<Vec<_>>()).unwrap().len())
    .sum();
    let sent = from_cache().await - before;
    assert_eq!(sent, (expected.bytes.len() - 1000 + assertions) as u64, "a 206 from byte 1000");
}

#[tokio::test(flavor = "multi_thread")]
async fn while_the_store_is_overloaded_what_is_cached_keeps_being_served_and_the_rest_is_told_when_to_come_back() {
    let store = FakeStore::start().await;
    let config = store.config();
    let daemon = Daemon::start_with(PKGPROXY, Some(&config), &["-offline-mode", "store-overloaded"]).await;
    let snap = SnapSandbox::new(&api_url(&daemon));
    let expected = store.blob("hello-pkgproxy", "amd64", "");
    assert_reached_the_trust_root(&download(&snap, "online", "hello-pkgproxy"));

    store.force_status(429);
    let overloaded = download(&snap, "overloaded", "hello-pkgproxy");
    assert_reached_the_trust_root(&overloaded);
    assert_eq!(overloaded.file("hello-pkgproxy_3.snap").as_deref(), Some(expected.bytes.as_ref()));

    store.clear_requests();
    let refused = pkgproxy_testkit::client::get(daemon.proxy_addr(), "/snap/v2/snaps/info/other-pkgproxy").await;
    assert_eq!(refused.status, 424, "{:?}", String::from_utf8_lossy(&refused.body));
    assert_eq!(refused.header("content-type"), Some("application/json"));
    let retry_after: u64 = refused.header("retry-after").expect("a Retry-After").parse().unwrap();
    assert!(retry_after > 0);
    assert!(store.requests().is_empty(), "the breaker kept the store alone: {:#?}", store.requests());
}

#[tokio::test(flavor = "multi_thread")]
async fn a_snap_whose_http_proxy_is_pkgproxy_reaches_the_snap_side_without_a_loop() {
    let store = FakeStore::start().await;
    let daemon = daemon_for(&store).await;
    let port = daemon.proxy_addr().rsplit(':').next().unwrap().to_string();
    let snap = SnapSandbox::new(&format!("http://pkgproxy.test:{port}/snap/"))
        .with_env("http_proxy", &format!("http://{}", daemon.proxy_addr()));
    let output = download(&snap, "proxied", "hello-pkgproxy");
    assert_reached_the_trust_root(&output);
    let expected = store.blob("hello-pkgproxy", "amd64", "");
    assert_eq!(output.file("hello-pkgproxy_3.snap").as_deref(), Some(expected.bytes.as_ref()));
    assert_eq!(asked(&store).iter().filter(|p| *p == "/v2/snaps/refresh").count(), 1);
    assert!(!daemon.log().contains("loop"), "{}", daemon.log());
}

#[tokio::test(flavor = "multi_thread")]
async fn pkgproxyctl_setup_snap_prints_applies_and_undoes_the_snapd_drop_in() {
    let store = FakeStore::start().await;
    let daemon = daemon_for(&store).await;
    let ctl = |args: &[&str]| {
        let output = std::process::Command::new(env!("CARGO_BIN_EXE_pkgproxyctl"))
            .args(["setup", "snap", "-stats-socket-path"])
            .arg(daemon.stats_socket())
            .args(args)
            .output()
            .unwrap();
        assert!(output.status.success(), "{}", String::from_utf8_lossy(&output.stderr));
        String::from_utf8_lossy(&output.stdout).into_owned()
    };
    let url = format!("SNAPPY_FORCE_API_URL={}", api_url(&daemon));
    let printed = ctl(&[]);
    assert!(printed.contains(&format!("Environment={url}\n")), "{printed}");
    let restart = "    systemctl daemon-reload\n    if systemctl is-active --quiet snapd.service; then systemctl try-restart snapd.service;";
    assert!(printed.contains(restart), "only when the drop-in changed, only if snapd runs: {printed}");
    assert!(printed.contains(&format!("export {url}\n")), "{printed}");
    assert!(!printed.contains("SNAPPY_FORCE_SAS_URL"));

    let root = tempfile::tempdir().unwrap();
    let root_arg = root.path().to_str().unwrap();
    let drop_in = root.path().join("etc/systemd/system/snapd.service.d/pkgproxy.conf");
    ctl(&["--apply", "--root", root_arg, "--no-restart"]);
    let written = std::fs::read_to_string(&drop_in).unwrap();
    assert!(written.contains(&format!("[Service]\nEnvironment={url}\n")), "{written}");
    ctl(&["--undo", "--root", root_arg, "--no-restart"]);
    assert!(!drop_in.exists());
}

/// The device headers snapd sends on v2 endpoints.
const DEVICE: [(&str, &str); 3] =
    [("snap-device-series", "16"), ("snap-device-architecture", "amd64"), ("snap-classic", "true")];

#[tokio::test(flavor = "multi_thread")]
async fn info_and_find_answers_point_at_pkgproxy_and_are_served_offline_for_the_queries_seen() {
    use pkgproxy_testkit::client::send;
    let store = FakeStore::start().await;
    let daemon = daemon_for(&store).await;
    let addr = daemon.proxy_addr();
    let info_path = "/snap/v2/snaps/info/hello-pkgproxy?architecture=amd64&fields=download";
    let find_path = "/snap/v2/snaps/find?q=hello&fields=download";
    let online_info = send(addr, "GET", info_path, &DEVICE, b"").await;
    let online_find = send(addr, "GET", find_path, &DEVICE, b"").await;
    assert_eq!((online_info.status, online_find.status), (200, 200));
    let info: serde_json::Value = serde_json::from_slice(&online_info.body).unwrap();
    let url = info["channel-map"][0]["download"]["url"].as_str().unwrap();
    assert!(url.starts_with(&format!("http://{addr}/snap/download/")), "rewritten for this client: {url}");
    let find: serde_json::Value = serde_json::from_slice(&online_find.body).unwrap();
    assert!(find["results"][0]["revision"]["download"]["url"]
        .as_str()
        .unwrap()
        .starts_with(&format!("http://{addr}/snap/")));

    daemon.set_offline_mode("offline").await;
    store.clear_requests();
    let offline_info = send(addr, "GET", info_path, &DEVICE, b"").await;
    assert_eq!((offline_info.status, &offline_info.body), (200, &online_info.body));
    let reordered = send(addr, "GET", "/snap/v2/snaps/find?fields=download&q=hello", &DEVICE, b"").await;
    assert_eq!((reordered.status, &reordered.body), (200, &online_find.body), "the same normalised query");
    let unseen = send(addr, "GET", "/snap/v2/snaps/find?q=other&fields=download", &DEVICE, b"").await;
    assert_eq!(unseen.status, 424, "a find never seen is refused, not answered empty");
    let other_arch = [DEVICE[0], ("snap-device-architecture", "arm64"), DEVICE[2]];
    assert_eq!(
        send(addr, "GET", info_path, &other_arch, b"").await.status,
        424,
        "another device's answer is not its own"
    );
    assert!(store.requests().is_empty());
}

#[tokio::test(flavor = "multi_thread")]
async fn offline_a_bulk_fetch_assertions_says_nothing_newer_for_what_the_device_holds() {
    use pkgproxy_testkit::client::send;
    let store = FakeStore::start().await;
    let daemon = daemon_for(&store).await;
    let snap = SnapSandbox::new(&api_url(&daemon));
    assert_reached_the_trust_root(&download(&snap, "online", "hello-pkgproxy"));
    daemon.set_offline_mode("offline").await;
    store.clear_requests();

    let snap_id = &store.snaps()[0].snap_id;
    let body = serde_json::json!({"context": [], "fields": [], "actions": [{"action": "fetch-assertions", "key": "g1", "instance-key": "g1",
        "assertions": [
            {"type": "snap-declaration", "primary-key": ["16", snap_id], "if-newer-than": 2},
            {"type": "snap-declaration", "primary-key": ["16", "neverheldneverheldneverheld00000"], "if-newer-than": 0},
            {"type": "store", "primary-key": ["acme"]}]}]});
    let headers = [DEVICE[0], DEVICE[1], DEVICE[2], ("content-type", "application/json")];
    let answer =
        send(daemon.proxy_addr(), "POST", "/snap/v2/snaps/refresh", &headers, body.to_string().as_bytes()).await;
    assert_eq!(answer.status, 200);
    let answer: serde_json::Value = serde_json::from_slice(&answer.body).unwrap();
    let result = &answer["results"][0];
    assert_eq!((result["result"].as_str(), result["key"].as_str()), (Some("fetch-assertions"), Some("g1")));
    assert_eq!(result["assertion-stream-urls"], serde_json::json!([]), "nothing newer than what the device holds");
    assert_eq!(result["error-list"].as_array().unwrap().len(), 1, "only the store assertion it never held: {result}");
    assert_eq!(result["error-list"][0]["code"], "pkgproxy-offline");
    assert!(store.requests().is_empty());
}

#[tokio::test(flavor = "multi_thread")]
async fn the_device_s_authorization_goes_to_the_store_and_never_to_its_cdn() {
    let store = FakeStore::start().await;
    let daemon = daemon_for(&store).await;
    let blob = store.blob("hello-pkgproxy", "amd64", "");
    let url = format!(
        "/snap/download/{}/{}/api/v1/snaps/download/{}_3.snap",
        blob.sha3_384,
        blob.bytes.len(),
        store.snaps()[0].snap_id
    );
    let device = [DEVICE[0], DEVICE[1], ("x-device-authorization", "Macaroon root=\"device\"")];
    let answer = pkgproxy_testkit::client::send(daemon.proxy_addr(), "GET", &url, &device, b"").await;
    assert_eq!((answer.status, answer.body.as_ref()), (200, blob.bytes.as_ref()));
    let requests = store.requests();
    let to_store = requests.iter().find(|r| r.path.starts_with("/api/v1/snaps/download/")).expect("asked the store");
    assert_eq!(to_store.header("x-device-authorization"), Some("Macaroon root=\"device\""));
    assert_eq!(to_store.header("accept-encoding"), Some("identity"));
    let to_cdn = requests.iter().find(|r| r.path.starts_with("/cdn/")).expect("followed to the CDN");
    assert!(to_cdn.headers.iter().all(|(name, _)| !name.ends_with("authorization")), "{:?}", to_cdn.headers);
}
