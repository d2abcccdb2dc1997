//! Why an answer is not a plain hit: `X-Pkgproxy-Reason` on every answer
//! of the cache path but a fresh hit, the same words in the access log, and
//! `pkgproxyctl explain URL` saying beforehand what the next request gets.

use pkgproxy_control::Explanation;
use pkgproxy_testkit::client::{proxy_get, Answer};
use pkgproxy_testkit::{AptRepo, Daemon, Origin};

use crate::common::{archive, pkgproxyctl, revalidating_at_once, PKGPROXY};

/// What `pkgproxyctl explain URL` says of `url` on `daemon`, which exits
/// 1 for a refusal.
fn explain(daemon: &Daemon, url: &str) -> Explanation {
    let output = pkgproxyctl(daemon, &["explain", url, "--json"]);
    assert!(output.stderr.is_empty(), "{}", String::from_utf8_lossy(&output.stderr));
    let told: Explanation = serde_json::from_slice(&output.stdout).expect("an explanation");
    assert_eq!(output.status.success(), told.action != "refuse", "{told:?}");
    told
}

/// Asserts the explanation given before `answer` matches it: how it was
/// served and why.
fn agrees(told: &Explanation, answer: &Answer) {
    let why = answer.header("x-pkgproxy-reason").map(str::to_owned);
    match told.action.as_str() {
        "hit" => assert_eq!((answer.header("x-pkgproxy-cache"), why), (Some("hit"), None), "{told:?}"),
        "fetch" => {
            assert_eq!(answer.header("x-pkgproxy-cache"), Some("miss"), "{told:?}");
            assert_eq!(why, told.reason, "{told:?}");
        }
        "revalidate" => {
            assert!(matches!(answer.header("x-pkgproxy-cache"), Some("revalidated" | "miss")), "{told:?}");
            let (said, got) = (told.reason.clone().unwrap(), why.unwrap());
            // The age may have moved on a second between the two.
            assert_eq!(said.split(" (age").next(), got.split(" (age").next(), "{told:?}");
        }
        "refuse" => {
            assert!(answer.status >= 400, "{told:?}: {}", answer.status);
            assert_eq!(why, told.reason, "{told:?}");
        }
        other => panic!("unexpected action {other}: {told:?}"),
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn explain_says_what_the_next_request_gets_and_every_answer_but_a_hit_says_why() {
    let repo = AptRepo::shared_default();
    let origin = Origin::serve(repo.root()).await;
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("access.log");
    let config = revalidating_at_once(&archive("local", &[format!("{}/debian", origin.url())]));
    let flags = ["-access-log", log.to_str().unwrap(), "-apt-index-ttl", "5m"];
    let daemon = Daemon::start_with(PKGPROXY, Some(&config), &flags).await;
    let proxy = daemon.proxy_addr();
    let deb = format!("{}{}", origin.url(), repo.deb_url_path("pkgproxy-hello"));
    let release = format!("{}/debian/dists/testing/InRelease", origin.url());

    // Not cached: fetched.
    let told = explain(&daemon, &deb);
    assert_eq!((told.action.as_str(), told.reason.as_deref()), ("fetch", Some("not cached")), "{told:?}");
    assert_eq!(told.side.as_deref(), Some("apt"));
    agrees(&told, &proxy_get(proxy, &deb, &[]).await);
    // Cached: a hit, and nothing to explain.
    let told = explain(&daemon, &deb);
    assert_eq!((told.action.as_str(), told.reason.as_deref()), ("hit", None));
    agrees(&told, &proxy_get(proxy, &deb, &[]).await);

    // A client that asks for a fresher answer than the window: revalidated,
    // and it says so.
    assert_eq!(proxy_get(proxy, &release, &[]).await.header("x-pkgproxy-reason"), Some("not cached"));
    let asked = proxy_get(proxy, &release, &[("cache-control", "max-age=0")]).await;
    assert_eq!(asked.header("x-pkgproxy-cache"), Some("revalidated"));
    assert_eq!(asked.header("x-pkgproxy-reason"), Some("client asked max-age=0"));

    // Refused by the side: a host that is no archive of pkgproxy's.
    let elsewhere = "http://archive.invalid/debian/pool/main/x.deb";
    let told = explain(&daemon, elsewhere);
    assert_eq!(told.action, "refuse");
    assert!(told.reason.as_deref().unwrap_or_default().starts_with("refused: "), "{told:?}");
    agrees(&told, &proxy_get(proxy, elsewhere, &[]).await);

    // Offline: what is cached is a hit, what is not is refused as offline.
    let set = pkgproxyctl(&daemon, &["offline", "offline"]);
    assert!(set.status.success());
    let unseen = format!("{}{}", origin.url(), repo.deb_url_path("pkgproxy-small1"));
    let told = explain(&daemon, &unseen);
    assert_eq!((told.action.as_str(), told.reason.as_deref()), ("refuse", Some("offline")));
    agrees(&told, &proxy_get(proxy, &unseen, &[]).await);
    let told = explain(&daemon, &deb);
    assert_eq!(told.action, "hit");
    agrees(&told, &proxy_get(proxy, &deb, &[]).await);

    // The access log says the same words.
    let lines = pkgproxy_testkit::eventually("the access log's lines", || async {
        let text = std::fs::read_to_string(&log).unwrap_or_default();
        let lines: Vec<serde_json::Value> = text.lines().map(|l| serde_json::from_str(l).unwrap()).collect();
        (lines.len() >= 7).then_some(lines)
    })
    .await;
    let reasons: Vec<Option<&str>> = lines.iter().map(|line| line["reason"].as_str()).collect();
    let refused = reasons[4].filter(|reason| reason.starts_with("refused: "));
    let expected = [Some("not cached"), None, Some("not cached"), Some("client asked max-age=0"), refused];
    assert_eq!(&reasons[..5], expected, "{lines:#?}");
    assert!(refused.is_some(), "{lines:#?}");
    assert_eq!(&reasons[5..7], [Some("offline"), None], "{lines:#?}");
}

#[tokio::test(flavor = "multi_thread")]
async fn an_expired_index_says_its_age_and_window_and_a_busy_host_its_breaker() {
    let repo = AptRepo::shared_default();
    let origin = Origin::serve(repo.root()).await;
    let config = archive("local", &[format!("{}/debian", origin.url())]);
    let flags = ["-apt-index-ttl", "0s", "-offline-mode", "store-overloaded"];
    let daemon = Daemon::start_with(PKGPROXY, Some(&config), &flags).await;
    let proxy = daemon.proxy_addr();
    let release = format!("{}/debian/dists/testing/InRelease", origin.url());
    assert_eq!(proxy_get(proxy, &release, &[]).await.status, 200);
    let told = explain(&daemon, &release);
    assert_eq!(told.action, "revalidate", "{told:?}");
    assert!(told.reason.as_deref().unwrap_or_default().starts_with("expired (age "), "{told:?}");
    assert!(told.reason.as_deref().unwrap_or_default().ends_with(", window 0s)"), "{told:?}");
    agrees(&told, &proxy_get(proxy, &release, &[]).await);

    // The host asks for time: its breaker opens, and a miss is refused
    // with the time left.
    let (busy, unseen) = (repo.deb_url_path("pkgproxy-hello"), repo.deb_url_path("pkgproxy-small2"));
    origin.set_status_override(&busy, Some(429));
    origin.set_retry_after(Some("120"));
    assert_eq!(proxy_get(proxy, &format!("{}{busy}", origin.url()), &[]).await.status, 429);
    let url = format!("{}{unseen}", origin.url());
    let told = explain(&daemon, &url);
    assert_eq!(told.action, "refuse", "{told:?}");
    let reason = told.reason.clone().unwrap_or_default();
    assert!(reason.starts_with("breaker open for 127.0.0.1, ") && reason.ends_with(" s left"), "{reason}");
    let answer = proxy_get(proxy, &url, &[]).await;
    assert_eq!(answer.status, 503);
    let got = answer.header("x-pkgproxy-reason").unwrap_or_default();
    assert!(got.starts_with("breaker open for 127.0.0.1, ") && got.ends_with(" s left"), "{got}");
    assert_eq!(origin.count_path(&unseen), 0);
}

#[tokio::test(flavor = "multi_thread")]
async fn the_control_sockets_answer_bad_questions_with_a_clear_error() {
    use http::{Method, StatusCode};
    use pkgproxy_control::{ControlClient, CHECK_PATH, EXPLAIN_PATH, WARM_PATH};
    let daemon = Daemon::start(PKGPROXY, None).await;
    let (stats, admin) = (ControlClient::new(daemon.stats_socket()), ControlClient::new(daemon.admin_socket()));
    let send = |client: &ControlClient, method: Method, path: String, body: &'static [u8]| {
        let client = ControlClient::new(client.socket());
        async move { client.send(method, &path, Some(bytes::Bytes::from_static(body))).await.expect("an answer") }
    };
    let (status, body) = send(&stats, Method::GET, EXPLAIN_PATH.to_owned(), b"").await;
    assert_eq!(status, StatusCode::BAD_REQUEST, "{body:?}");
    let (status, body) = send(&stats, Method::GET, format!("{EXPLAIN_PATH}?url=%20%7F"), b"").await;
    assert_eq!(status, StatusCode::BAD_REQUEST, "{body:?}");
    assert!(String::from_utf8_lossy(&body).contains("is not a URL"), "{body:?}");
    let (status, body) = send(&stats, Method::POST, CHECK_PATH.to_owned(), b"{\"urls\": 7}").await;
    assert_eq!(status, StatusCode::BAD_REQUEST, "{body:?}");
    let (status, _) = send(&stats, Method::POST, WARM_PATH.to_owned(), b"{\"urls\": []}").await;
    assert_eq!(status, StatusCode::FORBIDDEN, "warming is the admin socket's");
    let (status, body) = send(&admin, Method::POST, WARM_PATH.to_owned(), b"{\"urls\": [\"/nowhere\", \"::\"]}").await;
    assert_eq!(status, StatusCode::OK, "{body:?}");
    let told: Vec<pkgproxy_control::ItemReadiness> = serde_json::from_slice(&body).unwrap();
    assert!(told.iter().all(|item| !item.ready && item.reason.is_some()), "{told:?}");

    let output = pkgproxyctl(&daemon, &["check", "registry", "not an image"]);
    assert!(!output.status.success());
    assert!(String::from_utf8_lossy(&output.stderr).contains("is not an image"), "{output:?}");
    let output = pkgproxyctl(&daemon, &["check", "go", "/nonexistent/go.sum"]);
    assert!(!output.status.success());
    assert!(String::from_utf8_lossy(&output.stderr).contains("/nonexistent/go.sum"), "{output:?}");
    let (_, live) = send(&stats, Method::GET, "/pkgproxy/v1/info".to_owned(), b"").await;
    assert!(!live.is_empty(), "still serving");
}

#[tokio::test(flavor = "multi_thread")]
async fn an_lxd_index_generation_says_why_it_was_not_a_plain_hit() {
    let origin = pkgproxy_testkit::FakeSimplestreams::start().await;
    origin.publish("20240101", &pkgproxy_testkit::LxdImage::build("why", None));
    let config =
        revalidating_at_once(&format!("[[lxd.remote]]\nname = \"test\"\nmirrors = [\"{}/releases\"]\n", origin.url()));
    let daemon = Daemon::start(PKGPROXY, Some(&config)).await;
    let index = "/lxd/test/streams/v1/index.json";
    let get = |headers: &'static [(&'static str, &'static str)]| {
        pkgproxy_testkit::client::send(daemon.proxy_addr(), "GET", index, headers, b"")
    };

    let first = get(&[]).await;
    assert_eq!((first.status, first.header("x-pkgproxy-reason")), (200, Some("not cached")));
    let again = get(&[]).await;
    assert_eq!((again.header("x-pkgproxy-cache"), again.header("x-pkgproxy-reason")), (Some("hit"), None));
    let asked = get(&[("cache-control", "max-age=0")]).await;
    assert_eq!(asked.header("x-pkgproxy-reason"), Some("client asked max-age=0"));

    // The remote failing: the last generation, saying why.
    origin.set_status(503);
    let stale = get(&[("cache-control", "max-age=0")]).await;
    assert_eq!(stale.status, 200);
    let why = stale.header("x-pkgproxy-reason").unwrap_or_default();
    assert!(why.starts_with("upstream failed"), "{why}");
}

#[tokio::test(flavor = "multi_thread")]
async fn a_path_no_side_serves_is_told_how_each_side_s_clients_are_pointed_at_pkgproxy() {
    let server = crate::inproc::Server::start(None).await;
    let answer = pkgproxy_testkit::client::get(server.proxy_addr(), "/nothing/here").await;
    assert_eq!(answer.status, 404);
    let text = String::from_utf8_lossy(&answer.body).into_owned();
    let host = server.proxy_addr();
    for line in [
        format!("Acquire::http::Proxy \"http://{host}/\";"),
        format!("export GOPROXY=http://{host}/go"),
        format!("SNAPPY_FORCE_API_URL=http://{host}/snap/"),
        format!("\"registry-mirrors\": [\"http://{host}\"]"),
        format!("pkgproxyctl setup lxd-remote --addr {host}\n"),
    ] {
        assert!(text.contains(&line), "{line} missing from:\n{text}");
    }
}

/// What `pkgproxyctl explain URL` says of `url`, and whether it exited 0.
fn explained(daemon: &Daemon, url: &str) -> (bool, Explanation) {
    let output = pkgproxyctl(daemon, &["explain", url, "--json"]);
    (output.status.success(), serde_json::from_slice(&output.stdout).expect("an explanation"))
}

#[tokio::test(flavor = "multi_thread")]
async fn an_upstream_s_url_from_a_lockfile_is_explained_as_pkgproxy_serves_it() {
    let itoa = pkgproxy_testkit::CrateVersion::build("itoa", "1.0.0", &[], 100);
    let fake = pkgproxy_testkit::FakeCrates::start(std::slice::from_ref(&itoa)).await;
    let daemon = Daemon::start(PKGPROXY, Some(&fake.config())).await;
    let blake = "0123456789abcdef0123456789abcdef0123456789abcdef0123456789ab";
    let wheel = format!("https://files.pythonhosted.org/packages/ab/cd/{blake}/six-1.16.0-py2.py3-none-any.whl");
    let cases = [
        ("https://registry.npmjs.org/ms/-/ms-2.1.3.tgz", "npm", "/npm/ms/-/ms-2.1.3.tgz"),
        ("https://registry.npmjs.org/@types/node", "npm", "/npm/@types/node"),
        (&wheel, "pypi", &format!("/pypi/packages/ab/cd/{blake}/six-1.16.0-py2.py3-none-any.whl")),
        ("https://pypi.org/simple/requests/", "pypi", "/pypi/simple/requests/"),
        ("https://proxy.golang.org/example.com/m/@v/v1.0.0.zip", "go", "/go/example.com/m/@v/v1.0.0.zip"),
        ("https://index.crates.io/3/s/syn", "cargo", "/cargo/index/3/s/syn"),
        (&format!("{}/it/oa/itoa", fake.url()), "cargo", "/cargo/index/it/oa/itoa"),
    ];
    for (url, side, path) in cases {
        let (ok, told) = explained(&daemon, url);
        assert!(ok, "{told:?}");
        assert_eq!((told.side.as_deref(), told.served_at.as_deref()), (Some(side), Some(path)), "{url}: {told:?}");
        assert_eq!((told.action.as_str(), told.reason.as_deref()), ("fetch", Some("not cached")), "{url}: {told:?}");
    }

    // A PyPI page, as pip and uv ask for it: the JSON form.
    for url in ["https://pypi.org/simple/requests/", "/pypi/simple/requests/"] {
        let (_, told) = explained(&daemon, url);
        assert_eq!(told.key.as_deref(), Some("pypi/pypi/simple/requests/json"), "{url}: {told:?}");
    }

    // A crate's path at pkgproxy names its SHA-256, which only its index
    // file says: not known before that file is held, then read from it.
    let download = "https://static.crates.io/crates/itoa/itoa-1.0.0.crate";
    let (ok, told) = explained(&daemon, download);
    assert!(!ok, "{told:?}");
    assert_eq!((told.side.as_deref(), told.action.as_str()), (Some("cargo"), "unknown"), "{told:?}");
    assert!(told.reason.as_deref().unwrap_or_default().contains("cannot be known offline"), "{told:?}");
    let index = pkgproxy_testkit::client::get(daemon.proxy_addr(), "/cargo/index/it/oa/itoa").await;
    assert_eq!(index.status, 200);
    let crate_path = format!("/cargo/crates/itoa/1.0.0/{}", itoa.sha256);
    for url in [download, "https://static.crates.io/crates/itoa/1.0.0/download"] {
        let (ok, told) = explained(&daemon, url);
        assert!(ok, "{told:?}");
        assert_eq!(told.served_at.as_deref(), Some(crate_path.as_str()), "{url}: {told:?}");
        assert_eq!(told.action, "fetch", "{url}: {told:?}");
    }

    // A refusal exits non-zero and says "refused" once.
    assert!(pkgproxyctl(&daemon, &["offline", "offline"]).status.success());
    let (ok, told) = explained(&daemon, "https://registry.npmjs.org/ms/-/ms-2.1.3.tgz");
    assert!(!ok, "offline, not held: {told:?}");
    assert_eq!((told.action.as_str(), told.reason.as_deref()), ("refuse", Some("offline")), "{told:?}");
    let text = pkgproxyctl(&daemon, &["explain", "http://archive.invalid/debian/pool/main/x.deb"]);
    assert!(!text.status.success());
    let text = String::from_utf8_lossy(&text.stdout).into_owned();
    assert!(text.starts_with("refused: ") && !text.contains("refused: refused"), "{text}");
    let text = pkgproxyctl(&daemon, &["explain", download]);
    let text = String::from_utf8_lossy(&text.stdout).into_owned();
    assert!(text.contains(&format!("served at: {crate_path}")), "{text}");
}
