//! The registry side end to end: the real `skopeo` pulling through
//! pkgproxy as its mirror, in front of a fake Docker Hub on 127.0.0.1
//! that does the Bearer dance and sends blobs to a CDN on another port.

use crate::common::PKGPROXY;
use pkgproxy_testkit::client::send;
use pkgproxy_testkit::{Daemon, FakeHub, Image, RecordedRequest, SkopeoSandbox};

/// A hub with an image whose file says `text` published as `repository:v1`
/// (and `v1-multi`), and a pkgproxy in front of it with `[registry]`
/// settings `extra`.
async fn published(repository: &str, text: &str, extra: &str) -> (FakeHub, Image, Daemon) {
    let hub = FakeHub::start().await;
    let image = Image::build(text, None);
    hub.publish(repository, "v1", &image);
    let daemon = daemon_for(&hub, extra).await;
    (hub, image, daemon)
}

async fn daemon_for(hub: &FakeHub, extra: &str) -> Daemon {
    let config = format!("{}[registry]\n{extra}\n", hub.config("docker.io"));
    Daemon::start(PKGPROXY, Some(&config)).await
}

fn count(requests: &[RecordedRequest], pred: impl Fn(&RecordedRequest) -> bool) -> usize {
    requests.iter().filter(|r| pred(r)).count()
}

/// The bytes of blob `digest` in the OCI layout at `layout`.
fn blob_in(skopeo: &SkopeoSandbox, layout: &str, digest: &str) -> Option<Vec<u8>> {
    std::fs::read(skopeo.layout(layout).join("blobs/sha256").join(digest.trim_start_matches("sha256:"))).ok()
}

#[tokio::test(flavor = "multi_thread")]
async fn skopeo_pulls_through_pkgproxy_once_and_then_from_the_cache() {
    let (hub, image, daemon) = published("library/hello", "hello", "").await;
    let skopeo = SkopeoSandbox::new(daemon.proxy_addr());

    let cold = skopeo.copy("docker.io/library/hello:v1", "cold");
    assert!(cold.success, "{}", cold.stderr);
    assert_eq!(blob_in(&skopeo, "cold", &image.layer.digest).as_deref(), Some(image.layer.bytes.as_ref()));
    assert_eq!(blob_in(&skopeo, "cold", &image.config.digest).as_deref(), Some(image.config.bytes.as_ref()));
    let requests = hub.requests();
    let paths: Vec<&str> = requests.iter().map(|r| r.path.as_str()).collect();
    assert_eq!(count(&requests, |r| r.path.starts_with("/token")), 1, "one token for the scope: {paths:#?}");
    let manifests = manifest_requests(&hub, "library/hello");
    let by_digest = format!("GET /v2/library/hello/manifests/{}", image.manifest.digest);
    assert_eq!(
        manifests,
        ["HEAD /v2/library/hello/manifests/v1".to_string(), by_digest],
        "the tag's digest, then the manifest by it"
    );
    for part in [&image.layer, &image.config] {
        let hex = part.digest.trim_start_matches("sha256:");
        assert_eq!(count(&requests, |r| r.path.starts_with(&format!("/cdn/{hex}"))), 1, "{paths:#?}");
    }
    let cdn: Vec<&RecordedRequest> = requests.iter().filter(|r| r.path.starts_with("/cdn/")).collect();
    assert!(cdn.iter().all(|r| r.header("authorization").is_none()), "no token to the CDN");

    hub.clear_requests();
    let warm = skopeo.copy("docker.io/library/hello:v1", "warm");
    assert!(warm.success, "{}", warm.stderr);
    assert!(hub.requests().is_empty(), "within the tag's window nothing reaches the hub: {:#?}", hub.requests());
    let by_digest = skopeo.copy(&format!("docker.io/library/hello@{}", image.manifest.digest), "by-digest");
    assert!(by_digest.success, "{}", by_digest.stderr);
    assert!(hub.requests().is_empty(), "a digest never asks the hub: {:#?}", hub.requests());
    let inspected = skopeo.run(&["inspect", &format!("oci:{}:latest", skopeo.layout("warm").display())]);
    assert!(
        inspected.success && inspected.stdout.contains(&image.manifest.digest),
        "{}{}",
        inspected.stdout,
        inspected.stderr
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn a_cached_tag_names_its_digest_and_serves_a_client_that_accepts_its_type_offline_too() {
    let (hub, image, daemon) = published("library/hello", "hello", "").await;
    let addr = daemon.proxy_addr();
    let tag = "/v2/library/hello/manifests/v1";
    assert_eq!(send(addr, "GET", tag, &[], b"").await.status, 200);
    for method in ["GET", "HEAD"] {
        let hit = send(addr, method, tag, &[], b"").await;
        assert_eq!(
            hit.header("docker-content-digest"),
            Some(image.manifest.digest.as_str()),
            "{method}, from the cache"
        );
    }
    let missing = send(addr, "HEAD", &format!("/v2/library/hello/blobs/sha256:{}", "b".repeat(64)), &[], b"").await;
    assert_eq!(missing.status, 404);
    assert!(missing.header("docker-content-digest").is_none(), "a 404 names no content");

    daemon.set_offline_mode("offline").await;
    hub.clear_requests();
    let oci_only = [("accept", "application/vnd.oci.image.manifest.v1+json")];
    let served = send(addr, "GET", tag, &oci_only, b"").await;
    assert_eq!((served.status, served.body), (200, image.manifest.bytes.clone()), "the type it accepts, cached");
    let docker_only = [("accept", "application/vnd.docker.distribution.manifest.v2+json")];
    assert_eq!(send(addr, "GET", tag, &docker_only, b"").await.status, 503, "not a type it reads: asked upstream");
    assert!(hub.requests().is_empty());
}

#[tokio::test(flavor = "multi_thread")]
async fn a_multi_arch_index_is_pulled_and_short_names_are_library_names() {
    let (hub, image, daemon) = published("library/hello", "multi", "").await;
    let skopeo = SkopeoSandbox::new(daemon.proxy_addr());
    let pulled = skopeo.copy("docker.io/hello:v1-multi", "multi");
    assert!(pulled.success, "{}", pulled.stderr);
    assert_eq!(blob_in(&skopeo, "multi", &image.layer.digest).as_deref(), Some(image.layer.bytes.as_ref()));
    let authorised = manifest_requests(&hub, "library/hello");
    assert_eq!(
        authorised,
        [
            "HEAD /v2/library/hello/manifests/v1-multi".to_string(),
            format!("GET /v2/library/hello/manifests/{}", image.index.digest),
            format!("GET /v2/library/hello/manifests/{}", image.manifest.digest),
        ],
        "one request per manifest, each by digest"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn routing_the_ping_unknown_registries_and_the_spec_s_errors() {
    let (hub, image, daemon) = published("library/hello", "hello", "").await;
    let addr = daemon.proxy_addr();
    let json =
        |answer: &pkgproxy_testkit::client::Answer| serde_json::from_slice::<serde_json::Value>(&answer.body).unwrap();

    let ping = send(addr, "GET", "/v2/", &[], b"").await;
    assert_eq!((ping.status, ping.body.as_ref()), (200, &b"{}"[..]));
    assert_eq!(ping.header("docker-distribution-api-version"), Some("registry/2.0"));
    for path in
        ["/v2/hello/manifests/v1?ns=docker.io", "/v2/library/hello/manifests/v1", "/v2/docker.io/hello/manifests/v1"]
    {
        let answer = send(addr, "GET", path, &[], b"").await;
        assert_eq!(answer.status, 200, "{path}: {:?}", json(&answer));
        assert_eq!(answer.body, image.manifest.bytes, "{path}");
    }
    let with_ns = send(addr, "GET", "/v2/hello/manifests/v1?ns=docker.io", &[], b"").await;
    assert_eq!(with_ns.header("oci-namespace"), Some("docker.io"));

    hub.clear_requests();
    let unknown = send(addr, "GET", "/v2/x/manifests/v1?ns=evil.example", &[], b"").await;
    assert_eq!((unknown.status, json(&unknown)["errors"][0]["code"].as_str()), (404, Some("NAME_UNKNOWN")));
    let bad_digest = send(addr, "GET", "/v2/library/hello/blobs/sha256:1234", &[], b"").await;
    assert_eq!((bad_digest.status, json(&bad_digest)["errors"][0]["code"].as_str()), (400, Some("DIGEST_INVALID")));
    let bad_name = send(addr, "GET", "/v2/Library/Hello/manifests/v1", &[], b"").await;
    assert_eq!((bad_name.status, json(&bad_name)["errors"][0]["code"].as_str()), (400, Some("NAME_INVALID")));
    for method in ["GET", "HEAD"] {
        let bad_tag = send(addr, method, "/v2/library/hello/manifests/.INVALID_MANIFEST_NAME", &[], b"").await;
        assert_eq!(bad_tag.status, 404, "no manifest can have that name: {method}");
    }
    assert!(hub.requests().is_empty(), "none of these reached the hub: {:#?}", hub.requests());

    let missing = send(addr, "GET", "/v2/library/hello/manifests/nope", &[], b"").await;
    assert_eq!((missing.status, json(&missing)["errors"][0]["code"].as_str()), (404, Some("MANIFEST_UNKNOWN")));
    let blob = format!("/v2/library/hello/blobs/{}", image.layer.digest);
    let head = send(addr, "HEAD", &blob, &[], b"").await;
    let get = send(addr, "GET", &blob, &[], b"").await;
    assert_eq!((get.status, get.body.clone()), (200, image.layer.bytes.clone()), "a blob asked before any manifest");
    for answer in [&head, &get] {
        assert_eq!(answer.header("content-length"), Some(image.layer.bytes.len().to_string().as_str()));
        assert_eq!(answer.header("docker-content-digest"), Some(image.layer.digest.as_str()));
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn offline_tags_resolve_to_what_was_pulled_with_no_hub_traffic() {
    let (hub, image, daemon) = published("library/hello", "hello", "tag_ttl = \"0s\"").await;
    let skopeo = SkopeoSandbox::new(daemon.proxy_addr());
    assert!(skopeo.copy("docker.io/library/hello:v1", "online").success);

    daemon.set_offline_mode("offline").await;
    hub.clear_requests();
    let offline = skopeo.copy("docker.io/library/hello:v1", "offline");
    assert!(offline.success, "{}", offline.stderr);
    assert_eq!(blob_in(&skopeo, "offline", &image.layer.digest).as_deref(), Some(image.layer.bytes.as_ref()));
    assert!(hub.requests().is_empty(), "{:#?}", hub.requests());
    let ping = send(daemon.proxy_addr(), "GET", "/v2/", &[], b"").await;
    assert_eq!(ping.status, 200);
    let never = send(daemon.proxy_addr(), "GET", "/v2/library/other/manifests/v1", &[], b"").await;
    assert_eq!(never.status, 503);
    assert_eq!(never.header("retry-after"), None);
    assert!(hub.requests().is_empty());
}

/// The hub's authorised requests for manifests of `repository` (the ones
/// a token came with, not the challenged first tries), as `METHOD path`.
fn manifest_requests(hub: &FakeHub, repository: &str) -> Vec<String> {
    let prefix = format!("/v2/{repository}/manifests/");
    let asked =
        hub.requests().into_iter().filter(|r| r.path.starts_with(&prefix) && r.header("authorization").is_some());
    asked.map(|r| format!("{} {}", r.method, r.path)).collect()
}

#[tokio::test(flavor = "multi_thread")]
async fn after_the_tag_s_window_one_head_revalidates_it_and_a_moved_tag_is_fetched_by_digest() {
    let (hub, _first, daemon) = published("library/hello", "first", "tag_ttl = \"0s\"").await;
    let skopeo = SkopeoSandbox::new(daemon.proxy_addr());
    assert!(skopeo.copy("docker.io/library/hello:v1", "cold").success);

    hub.clear_requests();
    let same = skopeo.copy("docker.io/library/hello:v1", "same");
    assert!(same.success, "{}", same.stderr);
    let asked = manifest_requests(&hub, "library/hello");
    assert_eq!(asked, ["HEAD /v2/library/hello/manifests/v1"], "one HEAD, no GET");
    assert!(hub.requests().iter().all(|r| !r.path.starts_with("/cdn/")));

    let second = Image::build("second", None);
    hub.publish("library/hello", "v1", &second);
    hub.clear_requests();
    let moved = skopeo.copy("docker.io/library/hello:v1", "moved");
    assert!(moved.success, "{}", moved.stderr);
    assert_eq!(blob_in(&skopeo, "moved", &second.layer.digest).as_deref(), Some(second.layer.bytes.as_ref()));
    let asked = manifest_requests(&hub, "library/hello");
    assert_eq!(
        asked,
        [
            "HEAD /v2/library/hello/manifests/v1".to_string(),
            format!("GET /v2/library/hello/manifests/{}", second.manifest.digest)
        ],
        "by digest, never by tag"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn a_rate_limited_or_gone_hub_leaves_a_tag_at_its_last_content_with_a_warning() {
    let (hub, first, daemon) = published("library/hello", "first", "tag_ttl = \"0s\"").await;
    hub.publish("library/hello", "v2", &first);
    let skopeo = SkopeoSandbox::new(daemon.proxy_addr());
    assert!(skopeo.copy("docker.io/library/hello:v1", "cold").success);
    assert!(skopeo.copy("docker.io/library/hello:v2", "cold2").success);

    let second = Image::build("second", None);
    // One tag each: a rate limit holds its tag until its Retry-After.
    for (status, tag, why) in [(429, "v1", "rate-limited"), (503, "v2", "unavailable")] {
        hub.publish("library/hello", tag, &second);
        hub.force_status(status);
        let path = format!("/v2/library/hello/manifests/{tag}");
        let answer = send(daemon.proxy_addr(), "GET", &path, &[], b"").await;
        assert_eq!((answer.status, answer.body.clone()), (200, first.manifest.bytes.clone()), "{status}");
        let warning = answer.header("warning").unwrap_or_default();
        let name = format!("299 - \"pkgproxy: served cached docker.io/library/hello:{tag} (checked");
        assert!(warning.starts_with(&name), "{warning}");
        assert!(warning.contains(why), "{warning}");
        assert_eq!(answer.header("docker-content-digest"), Some(first.manifest.digest.as_str()));
        assert_eq!(answer.header("x-pkgproxy-cache"), Some("stale"));
        let pulled = skopeo.copy(&format!("docker.io/library/hello:{tag}"), &format!("during-{status}"));
        assert!(pulled.success, "{status}: {}", pulled.stderr);
        assert_eq!(
            blob_in(&skopeo, &format!("during-{status}"), &first.layer.digest).as_deref(),
            Some(first.layer.bytes.as_ref())
        );
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn a_miss_while_rate_limited_is_an_honest_429_and_a_dead_hub_a_quick_503() {
    let hub = FakeHub::start().await;
    hub.publish("library/hello", "v1", &Image::build("hello", None));
    let daemon = daemon_for(&hub, "").await;
    hub.force_status(429);
    let limited = send(daemon.proxy_addr(), "GET", "/v2/library/hello/manifests/v1", &[], b"").await;
    assert_eq!(limited.status, 429);
    assert_eq!(limited.header("retry-after"), Some("30"));
    let body: serde_json::Value = serde_json::from_slice(&limited.body).unwrap();
    assert_eq!(body["errors"][0]["code"], "TOOMANYREQUESTS");

    drop(hub);
    let started = std::time::Instant::now();
    let gone = send(daemon.proxy_addr(), "GET", "/v2/library/other/manifests/v1", &[], b"").await;
    assert_eq!(gone.status, 503, "{:?}", String::from_utf8_lossy(&gone.body));
    assert!(started.elapsed() < std::time::Duration::from_secs(5), "{:?}", started.elapsed());
}

#[tokio::test(flavor = "multi_thread")]
async fn a_corrupt_blob_fails_the_pull_is_never_cached_and_the_next_pull_fetches_it_again() {
    let (hub, image, daemon) = published("library/hello", "hello", "").await;
    let skopeo = SkopeoSandbox::new(daemon.proxy_addr());
    hub.set_corrupt(true);
    let corrupt = skopeo.copy("docker.io/library/hello:v1", "corrupt");
    assert!(!corrupt.success, "a corrupt layer must fail the pull");

    hub.set_corrupt(false);
    hub.clear_requests();
    let honest = skopeo.copy("docker.io/library/hello:v1", "honest");
    assert!(honest.success, "{}", honest.stderr);
    assert_eq!(blob_in(&skopeo, "honest", &image.layer.digest).as_deref(), Some(image.layer.bytes.as_ref()));
    let layer = format!("/cdn/{}", image.layer.digest.trim_start_matches("sha256:"));
    assert_eq!(count(&hub.requests(), |r| r.path.starts_with(&layer)), 1, "the layer was not cached: fetched again");
}

#[tokio::test(flavor = "multi_thread")]
async fn ten_concurrent_pulls_of_a_large_layer_make_one_cdn_fetch_and_ranges_into_it_are_right() {
    let hub = FakeHub::start().await;
    let image = Image::build("big", Some(64 * 1024 * 1024));
    hub.publish("library/big", "v1", &image);
    let daemon = daemon_for(&hub, "").await;
    let addr = daemon.proxy_addr().to_string();
    let blob = format!("/v2/library/big/blobs/{}", image.layer.digest);
    let length = image.layer.bytes.len();
    assert!(length > 64 * 1000 * 1000, "a 64 MiB layer, not shrunk by gzip: {length}");
    let mut clients = Vec::new();
    for i in 0..10usize {
        let (addr, blob) = (addr.clone(), blob.clone());
        let start = i * (length / 10);
        clients.push(tokio::spawn(async move {
            let whole = send(&addr, "GET", &blob, &[], b"").await;
            let range = format!("bytes={start}-");
            let part = send(&addr, "GET", &blob, &[("range", &range)], b"").await;
            (whole, part, start)
        }));
    }
    for client in clients {
        let (whole, part, start) = client.await.unwrap();
        assert_eq!((whole.status, whole.body.len()), (200, length));
        assert!(whole.body == image.layer.bytes, "the whole layer");
        assert_eq!(part.status, 206);
        assert!(part.body == image.layer.bytes.slice(start..), "the range from {start}");
    }
    let cdn = format!("/cdn/{}", image.layer.digest.trim_start_matches("sha256:"));
    assert_eq!(count(&hub.requests(), |r| r.path.starts_with(&cdn)), 1, "one CDN fetch for every client");
}

#[tokio::test(flavor = "multi_thread")]
async fn in_store_overloaded_mode_a_429_opens_the_breaker_and_client_retries_cost_no_probe() {
    let hub = FakeHub::start().await;
    hub.publish("library/hello", "v1", &Image::build("hello", None));
    let config = hub.config("docker.io");
    let daemon = Daemon::start_with(PKGPROXY, Some(&config), &["-offline-mode", "store-overloaded"]).await;
    hub.force_status(429);
    let first = send(daemon.proxy_addr(), "GET", "/v2/library/hello/manifests/v1", &[], b"").await;
    assert_eq!(first.status, 429);
    let probes = hub.requests().len();
    for _ in 0..5 {
        let retry = send(daemon.proxy_addr(), "GET", "/v2/library/hello/manifests/v1", &[], b"").await;
        assert_eq!(retry.status, 429);
        assert!(retry.header("retry-after").is_some_and(|s| s.parse::<u64>().unwrap() > 0));
        let body: serde_json::Value = serde_json::from_slice(&retry.body).unwrap();
        assert_eq!(body["errors"][0]["code"], "TOOMANYREQUESTS");
    }
    assert_eq!(hub.requests().len(), probes, "the breaker kept the retries from the hub: {:#?}", hub.requests());
}

/// containerd resolves a tag with a `HEAD` carrying `?ns=docker.io` and
/// one comma-separated `Accept`, never pings `/v2/`, then fetches by
/// digest. Running containerd needs root: ignored by default, run by
/// test.sh as root.
#[tokio::test(flavor = "multi_thread")]
#[ignore = "needs root to run containerd; test.sh runs it as root"]
async fn containerd_pulls_through_pkgproxy_by_namespace() {
    let (hub, image, daemon) = published("library/hello", "hello", "").await;
    let containerd = pkgproxy_testkit::containerd::Containerd::start(daemon.proxy_addr()).await;
    let fetched = containerd.fetch("docker.io/library/hello:v1-multi");
    assert!(fetched.success, "{}", fetched.output);
    let requests = hub.requests();
    for part in [&image.layer, &image.config] {
        let hex = part.digest.trim_start_matches("sha256:");
        assert_eq!(count(&requests, |r| r.path.starts_with(&format!("/cdn/{hex}"))), 1);
    }
    hub.clear_requests();
    let again = containerd.fetch("docker.io/library/hello:v1-multi");
    assert!(again.success, "{}", again.output);
    assert!(hub.requests().is_empty(), "within the tag's window: {:#?}", hub.requests());
}

/// containerd names a registry with a port in the mirror's query as
/// `?ns=registry.lan%3A5000` (Go's `url.Values.Encode`).
#[tokio::test(flavor = "multi_thread")]
#[ignore = "needs root to run containerd; test.sh runs it as root"]
async fn containerd_pulls_from_a_registry_on_a_port_named_percent_encoded() {
    let hub = FakeHub::start().await;
    let image = Image::build("on a port", None);
    hub.publish("team/hello", "v1", &image);
    let config = hub.config("registry.lan:5000");
    let daemon = Daemon::start(PKGPROXY, Some(&config)).await;
    let containerd = pkgproxy_testkit::containerd::Containerd::start(daemon.proxy_addr()).await;
    let fetched = containerd.fetch("registry.lan:5000/team/hello:v1-multi");
    assert!(fetched.success, "{}\n{}", fetched.output, daemon.log());
    let layer = format!("/cdn/{}", image.layer.digest.trim_start_matches("sha256:"));
    assert_eq!(count(&hub.requests(), |r| r.path.starts_with(&layer)), 1, "fetched through pkgproxy, once");
}

#[tokio::test(flavor = "multi_thread")]
async fn pkgproxyctl_setup_prints_applies_and_undoes_each_registry_client_s_file() {
    let hub = FakeHub::start().await;
    let daemon = daemon_for(&hub, "").await;
    let base = format!("http://{}", daemon.proxy_addr());
    let root = tempfile::tempdir().unwrap();
    let ctl = |args: &[&str]| {
        let output = std::process::Command::new(env!("CARGO_BIN_EXE_pkgproxyctl"))
            .args(["setup", "-stats-socket-path"])
            .arg(daemon.stats_socket())
            .args(args)
            .args(["--root", root.path().to_str().unwrap(), "--no-restart"])
            .output()
            .unwrap();
        (
            output.status.success(),
            String::from_utf8_lossy(&output.stdout).into_owned() + &String::from_utf8_lossy(&output.stderr),
        )
    };
    let file = |path: &str| std::fs::read_to_string(root.path().join(path)).ok();

    let (ok, printed) = ctl(&["containerd"]);
    assert!(
        ok && printed.contains(&format!("[host.\"{base}\"]\n  capabilities = [\"pull\", \"resolve\"]")),
        "{printed}"
    );
    assert!(ctl(&["containerd", "--apply"]).0);
    assert!(file("etc/containerd/certs.d/_default/hosts.toml").unwrap().contains(&format!("[host.\"{base}\"]")));
    assert!(ctl(&["containerd", "--undo"]).0);
    assert!(file("etc/containerd/certs.d/_default/hosts.toml").is_none());

    assert!(ctl(&["podman", "--apply"]).0);
    let podman = file("etc/containers/registries.conf.d/50-pkgproxy.conf").unwrap();
    let host = daemon.proxy_addr();
    assert!(
        podman.contains(&format!(
            "prefix = \"docker.io\"\nlocation = \"registry-1.docker.io\"\n[[registry.mirror]]\nlocation = \"{host}\""
        )),
        "{podman}"
    );
    assert!(podman.contains(&format!("location = \"{host}/ghcr.io\"")), "{podman}");

    let k3s = root.path().join("etc/rancher/k3s/registries.yaml");
    std::fs::create_dir_all(k3s.parent().unwrap()).unwrap();
    std::fs::write(&k3s, "mirrors: {}\n").unwrap();
    let (ok, refused) = ctl(&["k3s", "--apply"]);
    assert!(!ok && refused.contains("not pkgproxy's"), "someone else's file is never overwritten: {refused}");
    assert_eq!(file("etc/rancher/k3s/registries.yaml").unwrap(), "mirrors: {}\n");

    let docker = root.path().join("etc/docker/daemon.json");
    std::fs::create_dir_all(docker.parent().unwrap()).unwrap();
    std::fs::write(&docker, "{\"log-driver\": \"journald\"}").unwrap();
    assert!(ctl(&["docker", "--apply"]).0);
    let merged: serde_json::Value = serde_json::from_str(&file("etc/docker/daemon.json").unwrap()).unwrap();
    assert_eq!(merged, serde_json::json!({"log-driver": "journald", "registry-mirrors": [base]}));
    assert!(ctl(&["docker", "--undo"]).0);
    let restored: serde_json::Value = serde_json::from_str(&file("etc/docker/daemon.json").unwrap()).unwrap();
    assert_eq!(restored, serde_json::json!({"log-driver": "journald"}));
}

#[tokio::test(flavor = "multi_thread")]
async fn tls_and_plain_http_share_the_port_with_a_certificate_clients_can_pin() {
    let (_hub, image, mut daemon) = published("library/hello", "hello", "").await;
    let pem = send(daemon.proxy_addr(), "GET", "/pkgproxy/v1/certificate.pem", &[], b"").await;
    assert_eq!(pem.status, 200);
    let pem = String::from_utf8(pem.body.to_vec()).unwrap();
    assert!(pem.starts_with("-----BEGIN CERTIFICATE-----"), "{pem}");

    let ping = pkgproxy_testkit::client::tls_get(daemon.proxy_addr(), &pem, "pkgproxy", "/v2/").await;
    assert_eq!((ping.status, ping.body.as_ref()), (200, &b"{}"[..]));
    let manifest =
        pkgproxy_testkit::client::tls_get(daemon.proxy_addr(), &pem, "localhost", "/v2/library/hello/manifests/v1")
            .await;
    assert_eq!(
        (manifest.status, manifest.body.clone()),
        (200, image.manifest.bytes.clone()),
        "any name the certificate has"
    );
    let plain = send(daemon.proxy_addr(), "GET", "/v2/library/hello/manifests/v1", &[], b"").await;
    assert_eq!(plain.body, image.manifest.bytes, "plain HTTP on the same port");

    daemon.restart().await;
    let again = send(daemon.proxy_addr(), "GET", "/pkgproxy/v1/certificate.pem", &[], b"").await;
    assert_eq!(String::from_utf8(again.body.to_vec()).unwrap(), pem, "the same certificate after a restart");
}

#[tokio::test(flavor = "multi_thread")]
async fn with_the_pull_quota_down_to_its_reserve_a_moved_tag_keeps_its_content_until_the_quota_recovers() {
    let (hub, first, daemon) = published("library/hello", "first", "tag_ttl = \"0s\"\npull_reserve = 5").await;
    let manifest = || send(daemon.proxy_addr(), "GET", "/v2/library/hello/manifests/v1", &[], b"");
    assert_eq!(manifest().await.body, first.manifest.bytes);

    let second = Image::build("second", None);
    hub.publish("library/hello", "v1", &second);
    hub.set_remaining(5);
    hub.clear_requests();
    let kept = manifest().await;
    assert_eq!((kept.status, kept.body.clone()), (200, first.manifest.bytes.clone()));
    let warning = kept.header("warning").unwrap_or_default();
    assert!(warning.contains("pull quota is down to 5"), "{warning}");
    assert_eq!(manifest_requests(&hub, "library/hello"), ["HEAD /v2/library/hello/manifests/v1"], "no pull spent");

    hub.set_remaining(50);
    assert_eq!(manifest().await.body, second.manifest.bytes, "followed once the quota recovered");
}

/// A hub with a public `library/hello:v1` and a private `secret/app:v1`
/// that alice (`alice:pw`) and bob (`bob:pw2`) may pull, and a pkgproxy in
/// front of it with `[registry]` settings `extra`.
async fn with_a_private_repository(extra: &str) -> (FakeHub, Image, Image, Daemon) {
    let hub = FakeHub::start().await;
    let (public, secret) = (Image::build("public", None), Image::build("secret", None));
    hub.publish("library/hello", "v1", &public);
    hub.publish("secret/app", "v1", &secret);
    hub.make_private("secret/app", "alice:pw");
    hub.make_private("secret/app", "bob:pw2");
    let daemon = daemon_for(&hub, extra).await;
    (hub, public, secret, daemon)
}

/// `Authorization: Bearer ...` for `basic` (`Basic base64(user:password)`)
/// and `repository`, from the hub's token endpoint, as a client gets it.
async fn bearer(hub: &FakeHub, repository: &str, basic: &str) -> String {
    let hub_addr = hub.url().trim_start_matches("http://").to_string();
    let path = format!("/token?service=fakehub&scope=repository:{repository}:pull");
    let token = send(&hub_addr, "GET", &path, &[("authorization", basic)], b"").await;
    let token: serde_json::Value = serde_json::from_slice(&token.body).unwrap();
    format!("Bearer {}", token["token"].as_str().unwrap())
}

const ALICE: &str = "Basic YWxpY2U6cHc="; // alice:pw
const BOB: &str = "Basic Ym9iOnB3Mg=="; // bob:pw2

#[tokio::test(flavor = "multi_thread")]
async fn private_content_is_cached_once_and_served_only_to_clients_the_registry_accepts() {
    let (hub, public, secret, daemon) = with_a_private_repository("").await;
    let addr = daemon.proxy_addr();
    let get = |path: String, authorization: Option<String>| async move {
        let headers: Vec<(&str, &str)> = authorization.iter().map(|a| ("authorization", a.as_str())).collect();
        send(addr, "GET", &path, &headers, b"").await
    };
    let tag = "/v2/secret/app/manifests/v1".to_string();
    let layer = format!("/v2/secret/app/blobs/{}", secret.layer.digest);
    let cdn_fetches = || count(&hub.requests(), |r| r.path.starts_with("/cdn/"));

    let anonymous = get(tag.clone(), None).await;
    assert_eq!(anonymous.status, 401, "{:?}", String::from_utf8_lossy(&anonymous.body));
    assert!(anonymous.header("www-authenticate").is_some_and(|c| c.contains("realm=")), "the challenge, relayed");

    // The client answers the challenge itself, with its own credentials.
    let alice = bearer(&hub, "secret/app", ALICE).await;
    let manifest = get(tag.clone(), Some(alice.clone())).await;
    assert_eq!((manifest.status, manifest.body.clone()), (200, secret.manifest.bytes.clone()));
    let pulled = get(layer.clone(), Some(alice.clone())).await;
    assert_eq!((pulled.status, pulled.body.clone()), (200, secret.layer.bytes.clone()));
    let config = format!("/v2/secret/app/blobs/{}", secret.config.digest);
    assert_eq!(get(config.clone(), Some(alice.clone())).await.status, 200);
    assert_eq!(cdn_fetches(), 2);

    // bob, another reader: the registry is asked once whether bob may read
    // the repository, and the bytes come from the cache.
    hub.clear_requests();
    let bob = bearer(&hub, "secret/app", BOB).await;
    hub.clear_requests();
    let pulled = get(layer.clone(), Some(bob.clone())).await;
    assert_eq!((pulled.status, pulled.body.clone()), (200, secret.layer.bytes.clone()));
    let config = get(config, Some(bob.clone())).await;
    assert_eq!((config.status, config.body.clone()), (200, secret.config.bytes.clone()));
    let asked: Vec<String> = hub.requests().iter().map(|r| format!("{} {}", r.method, r.path)).collect();
    assert_eq!(asked, [format!("HEAD {layer}")], "one confirmation for bob's pull, no bytes");
    assert_eq!(hub.requests()[0].header("authorization"), Some(bob.as_str()), "with bob's own token");

    // Nobody else gets it from the cache: not without credentials, not
    // with credentials the registry refuses, not under a public name.
    hub.clear_requests();
    let refused = get(layer.clone(), None).await;
    assert_eq!(refused.status, 401, "{:?}", String::from_utf8_lossy(&refused.body));
    assert!(refused.header("www-authenticate").is_some_and(|c| c.contains("realm=")));
    assert!(String::from_utf8_lossy(&refused.body).contains("UNAUTHORIZED"));
    let stranger = bearer(&hub, "secret/app", "Basic bWFsbG9yeTp4").await; // mallory:x
    assert_eq!(get(layer.clone(), Some(stranger)).await.status, 401, "credentials the registry refuses");
    let under_public_name = get(format!("/v2/library/hello/blobs/{}", secret.layer.digest), None).await;
    assert_eq!(under_public_name.status, 404, "a private layer under a public name");
    assert!(String::from_utf8_lossy(&under_public_name.body).contains("BLOB_UNKNOWN"));
    assert_eq!(cdn_fetches(), 0);

    let public_still = get("/v2/library/hello/manifests/v1".into(), Some(alice.clone())).await;
    assert_eq!(public_still.body, public.manifest.bytes, "a public repository with credentials: through the cache");

    daemon.set_offline_mode("offline").await;
    let offline = get(layer, Some(alice)).await;
    assert_eq!(offline.status, 503, "private content is not served offline unless configured");
}

#[tokio::test(flavor = "multi_thread")]
async fn configured_so_private_content_is_served_offline_to_a_credential_accepted_before() {
    let (hub, _, secret, daemon) = with_a_private_repository("private_offline = true").await;
    let addr = daemon.proxy_addr();
    let alice = bearer(&hub, "secret/app", ALICE).await;
    let bob = bearer(&hub, "secret/app", BOB).await;
    let layer = format!("/v2/secret/app/blobs/{}", secret.layer.digest);
    assert_eq!(send(addr, "GET", "/v2/secret/app/manifests/v1", &[], b"").await.status, 401);
    assert_eq!(send(addr, "GET", &layer, &[("authorization", &alice)], b"").await.status, 200);

    daemon.set_offline_mode("offline").await;
    let served = send(addr, "GET", &layer, &[("authorization", &alice)], b"").await;
    assert_eq!((served.status, served.body), (200, secret.layer.bytes.clone()));
    assert_eq!(send(addr, "GET", &layer, &[("authorization", &bob)], b"").await.status, 503, "bob was never asked");
    assert_eq!(send(addr, "GET", &layer, &[], b"").await.status, 503);
}

/// containerd answers the challenge of whichever request gets one (it
/// never pings), so a private image pulls through pkgproxy with the
/// account's own credentials, and the next reader's from the cache.
#[tokio::test(flavor = "multi_thread")]
#[ignore = "needs root to run containerd; test.sh runs it as root"]
async fn containerd_pulls_a_private_image_with_its_own_credentials_and_the_next_reader_from_the_cache() {
    let (hub, _, secret, daemon) = with_a_private_repository("").await;
    let containerd = pkgproxy_testkit::containerd::Containerd::start(daemon.proxy_addr()).await;
    let image = "docker.io/secret/app:v1-multi";

    let alice = containerd.fetch_as(image, Some("alice:pw"));
    assert!(alice.success, "{}", alice.output);
    let cdn = |requests: &[RecordedRequest]| count(requests, |r| r.path.starts_with("/cdn/"));
    assert_eq!(cdn(&hub.requests()), 2, "the layer and the config: {:#?}", hub.requests());

    // bob, on another machine (a containerd of its own, its content store
    // empty).
    hub.clear_requests();
    let elsewhere = pkgproxy_testkit::containerd::Containerd::start(daemon.proxy_addr()).await;
    let bob = elsewhere.fetch_as(image, Some("bob:pw2"));
    assert!(bob.success, "{}", bob.output);
    let requests = hub.requests();
    assert_eq!(cdn(&requests), 0, "from the cache: {requests:#?}");
    let as_bob = count(&requests, |r| r.header("authorization").is_some_and(|a| a.ends_with("-by-bob")));
    assert!(as_bob > 0, "the registry was asked whether bob may read it: {requests:#?}");
    let manifests_by_digest = count(&requests, |r| r.method == "GET" && r.path.contains("/manifests/sha256:"));
    assert_eq!(manifests_by_digest, 0, "manifests from the cache too: {requests:#?}");

    let stranger = pkgproxy_testkit::containerd::Containerd::start(daemon.proxy_addr()).await;
    let anonymous = stranger.fetch_as(&format!("docker.io/secret/app@{}", secret.manifest.digest), None);
    assert!(!anonymous.success, "a pull without credentials is refused: {}", anonymous.output);
}

#[tokio::test(flavor = "multi_thread")]
async fn a_stalled_hub_costs_seconds_and_a_cached_tag_is_still_served() {
    let (hub, image, daemon) = published("library/hello", "hello", "tag_ttl = \"0s\"").await;
    let manifest = |name: &'static str| send(daemon.proxy_addr(), "GET", name, &[], b"");
    assert_eq!(manifest("/v2/library/hello/manifests/v1").await.status, 200);

    hub.set_stalled(true);
    let started = std::time::Instant::now();
    let cached = manifest("/v2/library/hello/manifests/v1").await;
    assert_eq!((cached.status, cached.body.clone()), (200, image.manifest.bytes.clone()));
    assert!(cached.header("warning").is_some_and(|w| w.contains("unavailable")), "{:?}", cached.header("warning"));
    assert!(
        started.elapsed() < std::time::Duration::from_secs(6),
        "one attempt's time, not the retries': {:?}",
        started.elapsed()
    );
    let started = std::time::Instant::now();
    let missing = manifest("/v2/library/other/manifests/v1").await;
    assert!(matches!(missing.status, 503 | 504), "{}", missing.status);
    assert!(
        started.elapsed() < std::time::Duration::from_secs(35),
        "bounded by the upstream's deadline: {:?}",
        started.elapsed()
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn with_an_account_configured_pkgproxy_pulls_as_it_and_caches_what_it_may_read() {
    let hub = FakeHub::start().await;
    let secret = Image::build("secret", None);
    hub.publish("team/app", "v1", &secret);
    // A password no random log text (a temporary folder's name) can hold.
    let password = "Pull-Secret-4711";
    hub.make_private("team/app", &format!("puller:{password}"));
    let config = format!("{}username = \"puller\"\npassword = \"{password}\"\n", hub.config("docker.io"));
    let daemon = Daemon::start(PKGPROXY, Some(&config)).await;
    let skopeo = SkopeoSandbox::new(daemon.proxy_addr());
    let pulled = skopeo.copy("docker.io/team/app:v1", "pulled");
    assert!(pulled.success, "{}", pulled.stderr);
    assert_eq!(blob_in(&skopeo, "pulled", &secret.layer.digest).as_deref(), Some(secret.layer.bytes.as_ref()));
    let tokens: Vec<RecordedRequest> = hub.requests().into_iter().filter(|r| r.path.starts_with("/token")).collect();
    assert_eq!(tokens.len(), 1, "one token for the scope: {tokens:#?}");
    assert!(tokens[0].path.contains("account=puller"), "{}", tokens[0].path);
    assert!(tokens[0].header("authorization").is_some_and(|a| a.starts_with("Basic ")));
    assert!(!daemon.log().contains(password), "the password is never logged");

    hub.clear_requests();
    assert!(skopeo.copy("docker.io/team/app:v1", "again").success);
    assert!(hub.requests().is_empty(), "cached, like public content: {:#?}", hub.requests());
}

#[tokio::test(flavor = "multi_thread")]
async fn ten_skopeo_pulls_at_once_of_a_64_mib_layer_make_one_cdn_fetch() {
    let hub = FakeHub::start().await;
    let image = Image::build("big", Some(64 * 1024 * 1024));
    hub.publish("library/big", "v1", &image);
    let daemon = daemon_for(&hub, "").await;
    let skopeo = std::sync::Arc::new(SkopeoSandbox::new(daemon.proxy_addr()));
    let pulls: Vec<_> = (0..10)
        .map(|i| {
            let skopeo = std::sync::Arc::clone(&skopeo);
            tokio::task::spawn_blocking(move || skopeo.copy("docker.io/library/big:v1", &format!("pull-{i}")))
        })
        .collect();
    for pull in pulls {
        let pulled = pull.await.unwrap();
        assert!(pulled.success, "{}", pulled.stderr);
    }
    for i in 0..10 {
        let layer = blob_in(&skopeo, &format!("pull-{i}"), &image.layer.digest).expect("the layer");
        assert!(layer == image.layer.bytes, "pull {i} has the right layer");
    }
    let cdn = format!("/cdn/{}", image.layer.digest.trim_start_matches("sha256:"));
    assert_eq!(count(&hub.requests(), |r| r.path.starts_with(&cdn)), 1, "one CDN fetch for ten pulls");
}

#[tokio::test(flavor = "multi_thread")]
async fn another_registry_is_reached_by_its_path_prefix() {
    let hub = FakeHub::start().await;
    let image = Image::build("ghcr", None);
    hub.publish("owner/img", "v1", &image);
    let config = hub.config("ghcr.io");
    let daemon = Daemon::start(PKGPROXY, Some(&config)).await;
    let skopeo = SkopeoSandbox::new(daemon.proxy_addr());
    let pulled = skopeo.copy("ghcr.io/owner/img:v1", "ghcr");
    assert!(pulled.success, "{}", pulled.stderr);
    assert_eq!(blob_in(&skopeo, "ghcr", &image.layer.digest).as_deref(), Some(image.layer.bytes.as_ref()));
    let by_ns = send(daemon.proxy_addr(), "GET", "/v2/owner/img/manifests/v1?ns=ghcr.io", &[], b"").await;
    assert_eq!((by_ns.status, by_ns.body.clone()), (200, image.manifest.bytes.clone()));
}

#[tokio::test(flavor = "multi_thread")]
async fn fifty_clients_asking_for_one_tag_at_once_cost_one_head() {
    let (hub, image, daemon) = published("library/alpine", "alpine", "tag_ttl = \"0s\"").await;
    let addr = daemon.proxy_addr().to_string();
    assert_eq!(send(&addr, "GET", "/v2/library/alpine/manifests/v1", &[], b"").await.status, 200);
    hub.set_manifest_delay(std::time::Duration::from_millis(500));
    hub.clear_requests();
    let clients: Vec<_> = (0..50)
        .map(|_| {
            let addr = addr.clone();
            tokio::spawn(async move { send(&addr, "GET", "/v2/library/alpine/manifests/v1", &[], b"").await })
        })
        .collect();
    for client in clients {
        let answer = client.await.unwrap();
        assert_eq!((answer.status, answer.body.clone()), (200, image.manifest.bytes.clone()));
    }
    assert_eq!(
        manifest_requests(&hub, "library/alpine"),
        ["HEAD /v2/library/alpine/manifests/v1"],
        "one HEAD for fifty"
    );
}
