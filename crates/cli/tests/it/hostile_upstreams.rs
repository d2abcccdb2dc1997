//! Upstreams that misbehave, against the real daemon: redirects toward
//! the machine's own or the local network's addresses, or to other
//! schemes, are refused (nothing is fetched from their targets), as a
//! client's own targets are; answers that lie about their body fail the
//! fetch, and nothing of them is cached or served whole.

use std::time::Duration;

use crate::common::{archive, PKGPROXY};
use pkgproxy_testkit::client::{get, proxy_get};
use pkgproxy_testkit::hub::{FakeHub, Image};
use pkgproxy_testkit::{AptRepo, AptSandbox, Behaviour, ChaosUpstream, Daemon, Origin};

/// A hub known by a name (`hub.test`, pinned to its loopback address):
/// it is trusted on that address, and nothing else on the machine is.
async fn named_hub() -> (FakeHub, Image, Daemon) {
    let hub = FakeHub::start().await;
    let image = Image::build("redirected", None);
    hub.publish("library/app", "v1", &image);
    let port = hub.url().rsplit(':').next().unwrap().to_string();
    let config = format!(
        "[upstream]\nresolve = [\"hub.test:{port}:127.0.0.1\"]\n[[registry.upstream]]\nname = \"docker.io\"\nmirrors = [\"http://hub.test:{port}\"]\n"
    );
    let daemon = Daemon::start(PKGPROXY, Some(&config)).await;
    (hub, image, daemon)
}

#[tokio::test(flavor = "multi_thread")]
async fn redirects_to_local_addresses_and_other_schemes_are_refused_and_nothing_is_fetched_there() {
    let (hub, image, daemon) = named_hub().await;
    let empty = tempfile::tempdir().unwrap();
    let recorder = Origin::serve(empty.path()).await;
    let port = recorder.addr().port();
    let blob = format!("/v2/library/app/blobs/{}", image.layer.digest);
    for location in [
        format!("http://127.0.0.1:{port}/stolen"),
        format!("http://localhost:{port}/stolen"),
        "http://169.254.169.254/latest/meta-data/".to_string(),
        "file:///etc/passwd".to_string(),
        "gopher://127.0.0.1:70/".to_string(),
    ] {
        hub.set_blob_location(Some(&location));
        let answer = tokio::time::timeout(Duration::from_secs(20), get(daemon.proxy_addr(), &blob)).await.unwrap();
        assert!(answer.status >= 500, "{location}: {} {:?}", answer.status, String::from_utf8_lossy(&answer.body));
        assert_ne!(answer.body.as_ref(), image.layer.bytes.as_ref());
    }
    assert!(recorder.requests().is_empty(), "nothing reached the redirect targets: {:?}", recorder.requests());
    let log = daemon.log();
    assert!(log.contains("169.254.169.254"), "the refusal is logged with its target:\n{log}");

    // The registry's own CDN is on a loopback address it was not trusted
    // for either; pinned by name, it is served.
    hub.set_blob_location(None);
    let cdn = get(daemon.proxy_addr(), &blob).await;
    assert!(cdn.status >= 500, "the CDN on 127.0.0.1 is not trusted: {}", cdn.status);
    assert_eq!(daemon.info().await.cache.get(pkgproxy_metrics::CacheGauge::Entries), 0, "nothing cached");
}

/// A chaos upstream serving the shared repository, behind a pkgproxy that
/// knows it as archive `local`, after a real `apt-get update` through it (so
/// pkgproxy knows each package's size and hash).
async fn lying_mirror() -> (&'static AptRepo, ChaosUpstream, Daemon, AptSandbox) {
    let repo = AptRepo::shared_default();
    let chaos = ChaosUpstream::start().await;
    for (path, bytes) in pkgproxy_testkit::tree::files(repo.root()) {
        chaos.put(&format!("/{}", path.strip_prefix(repo.root()).unwrap().display()), bytes);
    }
    let source = format!("{}/debian", chaos.url());
    let daemon = Daemon::start(PKGPROXY, Some(&archive("local", std::slice::from_ref(&source)))).await;
    let apt = AptSandbox::new(Some(&daemon.proxy_url()), &source, repo.keyring());
    apt.update().assert_success();
    (repo, chaos, daemon, apt)
}

#[tokio::test(flavor = "multi_thread")]
async fn an_upstream_that_lies_about_a_body_fails_the_fetch_caches_nothing_and_the_next_honest_answer_is_cached() {
    let (repo, chaos, daemon, _apt) = lying_mirror().await;
    let path = repo.deb_url_path("pkgproxy-big");
    let url = format!("{}{path}", chaos.url());
    let good = std::fs::read(repo.deb_path("pkgproxy-big")).unwrap();
    let size = good.len() as u64;
    for lie in [
        Behaviour::HugeHeaders { bytes: 1 << 20 },
        Behaviour::ShortLength { declared: size / 2 },
        Behaviour::CutThenOtherLength { after_bytes: size / 3 },
        Behaviour::CutThenWrongRange { after_bytes: size / 3 },
        Behaviour::BadChunks { after_bytes: size / 4 },
        Behaviour::Endless,
        Behaviour::WrongBytes,
        Behaviour::Gzipped,
    ] {
        chaos.set_path_behaviour(&path, lie.clone());
        let lied = tokio::time::timeout(Duration::from_secs(60), proxy_get(daemon.proxy_addr(), &url, &[]))
            .await
            .unwrap_or_else(|_| panic!("{lie:?}: no answer"));
        let whole_and_wrong = lied.status == 200 && lied.complete && lied.body.as_ref() != good.as_slice();
        assert!(!whole_and_wrong, "{lie:?}: a complete wrong body was served");
        assert!(!(lied.status == 200 && lied.complete), "{lie:?}: the client is told it failed ({})", lied.status);
        let again = proxy_get(daemon.proxy_addr(), &url, &[]).await;
        assert_ne!(again.header("x-pkgproxy-cache"), Some("hit"), "{lie:?}: nothing was cached");

        chaos.clear_path_behaviour(&path);
        let honest = proxy_get(daemon.proxy_addr(), &url, &[]).await;
        assert_eq!((honest.status, honest.complete), (200, true), "{lie:?}");
        assert!(honest.body.as_ref() == good.as_slice(), "{lie:?}: the honest bytes");
        let hit = proxy_get(daemon.proxy_addr(), &url, &[]).await;
        assert_eq!(hit.header("x-pkgproxy-cache"), Some("hit"), "{lie:?}: the honest answer was cached");
        let (status, _) = daemon.admin("DELETE", "/pkgproxy/v1/cache/entries?pattern=apt/local/pool/**", None).await;
        assert_eq!(status, 200, "{lie:?}: emptied for the next lie");
    }
    let log = daemon.log();
    let failures: Vec<&str> = log.lines().filter(|line| line.contains("fetch failed")).collect();
    assert!(failures.len() >= 8, "each lie is logged:\n{log}");
    let named = failures.iter().filter(|line| line.contains(&format!("upstream=\"{}/debian\"", chaos.url()))).count();
    assert!(named >= 5, "failures name the upstream:\n{}", failures.join("\n"));
}

/// An upstream's `101`, `304` to an unconditional request, or a status HTTP
/// does not have is never relayed: the client gets a `502`, and what it
/// pipelined behind that request is answered.
#[tokio::test(flavor = "multi_thread")]
async fn an_interim_unasked_for_or_unknown_status_is_a_502_and_pipelined_requests_go_on() {
    let chaos = ChaosUpstream::start().await;
    let server = crate::inproc::Server::start(Some(&archive("chaos", &[format!("{}/debian", chaos.url())]))).await;
    for code in [101, 304, 999] {
        chaos.set_behaviour(Behaviour::Status { code, retry_after: None });
        let deb = format!("{}/debian/pool/main/y/y_{code}.deb", chaos.url());
        let pipelined = format!(
            "GET {deb} HTTP/1.1\r\nHost: {host}\r\n\r\nGET /v2/ HTTP/1.1\r\nHost: {host}\r\nConnection: close\r\n\r\n",
            host = chaos.addr()
        );
        let raw =
            pkgproxy_testkit::client::raw_exchange(server.proxy_addr(), pipelined.as_bytes(), Duration::from_secs(20))
                .await;
        let text = String::from_utf8_lossy(&raw);
        assert_eq!(pkgproxy_testkit::client::first_status(&raw), 502, "{code}: {text}");
        assert!(text.matches("HTTP/1.1 ").count() == 2 && text.ends_with("{}"), "{code}: both answered: {text}");
        let plain = proxy_get(server.proxy_addr(), &deb, &[]).await;
        assert_eq!(plain.status, 502, "{code}");
        let why = plain.header("x-pkgproxy-reason").unwrap_or_default();
        assert!(why.contains(&format!("answered {code}")), "{code}: {why}");
    }
}

/// A configured upstream is trusted on its own port only: a redirect or a
/// token realm naming another port of its host reaches nothing, the
/// account's password goes nowhere but the registry's own origin, and an
/// error never says what a body that failed its check hashed to.
#[tokio::test(flavor = "multi_thread")]
async fn another_port_of_a_configured_host_is_never_reached_nor_a_failed_body_s_hash_told() {
    let hub = FakeHub::start().await;
    let image = Image::build("ported", None);
    hub.publish("library/app", "v1", &image);
    hub.publish("library/other", "v1", &image);
    let empty = tempfile::tempdir().unwrap();
    let sentinel = Origin::serve(empty.path()).await;
    let config = format!("{}username = \"puller\"\npassword = \"s3cret\"\n", hub.config("docker.io"));
    let daemon = Daemon::start(PKGPROXY, Some(&config)).await;
    let blob = format!("/v2/library/app/blobs/{}", image.layer.digest);

    hub.set_blob_location(Some(&format!("{}/stolen", sentinel.url())));
    let redirected = get(daemon.proxy_addr(), &blob).await;
    assert!(redirected.status >= 500, "{}", redirected.status);
    hub.set_blob_location(None);
    hub.set_realm(Some(&format!("{}/token", sentinel.url())));
    // A scope no token is held for yet: the challenge sends pkgproxy to the realm.
    let realm = get(daemon.proxy_addr(), "/v2/library/other/manifests/v1").await;
    assert!(realm.status >= 400, "{}", realm.status);
    assert!(sentinel.requests().is_empty(), "another port of 127.0.0.1: {:?}", sentinel.requests());

    hub.set_realm(None);
    hub.set_corrupt(true);
    let corrupt = get(daemon.proxy_addr(), &blob).await;
    assert!(corrupt.status >= 500);
    let mut wrong = image.layer.bytes.to_vec();
    *wrong.last_mut().unwrap() ^= 0xff;
    let arrived = hex::encode(<sha2::Sha256 as sha2::Digest>::digest(&wrong));
    let told = format!("{:?} {}", corrupt.headers, String::from_utf8_lossy(&corrupt.body));
    assert!(!told.contains(&arrived), "what arrived is not told: {told}");
    let logged = pkgproxy_testkit::eventually("the failed fetch in the log", || async {
        daemon.log().contains("fetch failed").then_some(daemon.log())
    })
    .await;
    assert!(logged.contains(&arrived), "it is logged: {logged}");
}

/// A blob that fails its digest on a cold miss: every client is told so
/// (the registry's `503` in the spec's envelope), none gets an empty reply
/// or a `200` cut short. The registry serves the blob itself, wrong.
#[tokio::test(flavor = "multi_thread")]
async fn a_small_blob_failing_its_digest_on_a_cold_miss_is_a_503_for_every_client() {
    let registry = ChaosUpstream::start().await;
    let layer = bytes::Bytes::from(b"PRIVATE-LAYER-".repeat(200));
    let digest = format!("sha256:{}", hex::encode(<sha2::Sha256 as sha2::Digest>::digest(&layer)));
    let blob = format!("/v2/library/app/blobs/{digest}");
    registry.put(&blob, layer.clone());
    let config = format!("[[registry.upstream]]\nname = \"docker.io\"\nmirrors = [\"{}\"]\n", registry.url());
    let daemon = Daemon::start(PKGPROXY, Some(&config)).await;
    let late = Behaviour::LateWrongBytes { delay: Duration::from_millis(300) };
    for behaviour in [late, Behaviour::WrongBytes, Behaviour::ShortLength { declared: 100 }] {
        registry.set_behaviour(behaviour.clone());
        for _ in 0..2 {
            let answer = get(daemon.proxy_addr(), &blob).await;
            assert_eq!(answer.status, 503, "{behaviour:?}: {:?}", String::from_utf8_lossy(&answer.body));
            let body: serde_json::Value = serde_json::from_slice(&answer.body).expect("the spec's envelope");
            assert!(body["errors"][0]["code"].is_string(), "{body}");
        }
    }
    registry.set_behaviour(Behaviour::Ok);
    let honest = get(daemon.proxy_addr(), &blob).await;
    assert_eq!((honest.status, honest.body), (200, layer));
}

/// An index's HTML page, a registry's API answer and a passed-on error,
/// each served on pkgproxy's own origin beside its status page, run
/// nothing in a browser: no script, no sniffing.
#[tokio::test(flavor = "multi_thread")]
async fn upstream_pages_on_pkgproxy_s_own_origin_are_confined_to_run_nothing() {
    use pkgproxy_testkit::client::send;
    use pkgproxy_testkit::{project_with_a_dependency, project_with_dependencies, FakeNpm, FakePypi};
    let pypi = FakePypi::start(&project_with_a_dependency()).await;
    let npm = FakeNpm::start(&project_with_dependencies()).await;
    let config = format!(
        "[pypi]\nmirrors = [\"{}\"]\n[npm]\nmirrors = [\"{}\"]\n[upstream]\ntrust = [\"{}\", \"{}\"]\n",
        pypi.url(),
        npm.url(),
        pypi.files_url(),
        npm.cdn_url()
    );
    let server = crate::inproc::Server::start(Some(&config)).await;
    let html = [("accept", "text/html")];
    let project = project_with_a_dependency()[0].project.clone();
    for (path, headers) in [
        (format!("/pypi/simple/{project}/"), &html[..]),
        ("/npm/-/ping".to_string(), &[][..]),
        ("/npm/no-such-package".to_string(), &[][..]),
    ] {
        let answer = send(server.proxy_addr(), "GET", &path, headers, b"").await;
        assert!(answer.status == 200 || answer.status == 404, "{path}: {}", answer.status);
        let policy = answer.header("content-security-policy");
        assert_eq!(policy, Some("default-src 'none'; sandbox"), "{path}");
        assert_eq!(answer.header("x-content-type-options"), Some("nosniff"), "{path}");
    }
}
