//! A moved tag while the registry rate-limits, with the real `skopeo`
//! against a hub that counts pulls as Docker Hub does (a manifest `HEAD` is
//! free, a manifest `GET` counts, and past the limit it is a `429` with
//! `Retry-After`). In process, so that the tag's window and the hub's
//! `Retry-After` pass on a clock the test moves.

use std::time::Duration;

use pkgproxy_testkit::client::send;
use pkgproxy_testkit::{FakeHub, Image, SkopeoSandbox};

use crate::inproc::Server;

/// The manifest requests the hub answered with a token, as `METHOD path`.
fn manifest_requests(hub: &FakeHub) -> Vec<String> {
    let asked = hub
        .requests()
        .into_iter()
        .filter(|r| r.path.starts_with("/v2/library/hello/manifests/") && r.header("authorization").is_some());
    asked.map(|r| format!("{} {}", r.method, r.path)).collect()
}

/// `skopeo copy` of `hello:moving` into `layout`, off the runtime's
/// threads (the server runs on them): the image's layer.
fn pull(skopeo: &SkopeoSandbox, layout: &str) -> Vec<u8> {
    let pulled = tokio::task::block_in_place(|| skopeo.copy("docker.io/library/hello:moving", layout));
    assert!(pulled.success, "{layout}: {}", pulled.stderr);
    let blobs = skopeo.layout(layout).join("blobs/sha256");
    let layers: Vec<Vec<u8>> = std::fs::read_dir(&blobs)
        .expect("the layout's blobs")
        .map(|blob| std::fs::read(blob.unwrap().path()).unwrap())
        .filter(|bytes| bytes.starts_with(&[0x1f, 0x8b]))
        .collect();
    assert_eq!(layers.len(), 1, "one gzipped layer in {layout}");
    layers.into_iter().next().unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_moved_tag_past_the_pull_limit_serves_the_last_image_and_retries_cost_one_probe() {
    let hub = FakeHub::start().await;
    let (first, second) = (Image::build("first", None), Image::build("second", None));
    hub.publish("library/hello", "moving", &first);
    let config = hub.config("docker.io");
    let server = Server::start(Some(&config)).await;
    let skopeo = SkopeoSandbox::new(server.proxy_addr());
    assert_eq!(pull(&skopeo, "first"), first.layer.bytes);

    // An hour on (the tag's window long past), the tag moves, and the hub's
    // pull limit is reached.
    server.clock().advance(Duration::from_secs(3600));
    hub.publish("library/hello", "moving", &second);
    hub.limit_pulls(0, 120);
    hub.clear_requests();
    for attempt in ["limited-1", "limited-2", "limited-3"] {
        assert_eq!(pull(&skopeo, attempt), first.layer.bytes, "the image pulled an hour ago");
    }
    let answer = send(server.proxy_addr(), "GET", "/v2/library/hello/manifests/moving", &[], b"").await;
    assert_eq!((answer.status, &answer.body), (200, &first.manifest.bytes));
    assert_eq!(answer.header("docker-content-digest"), Some(first.manifest.digest.as_str()));
    assert_eq!(answer.header("x-pkgproxy-cache"), Some("stale"));
    let reason = answer.header("x-pkgproxy-reason").unwrap_or_default();
    assert!(reason.starts_with("upstream rate-limited, asked again in "), "{reason}");
    let warning = answer.header("warning").unwrap_or_default();
    assert!(
        warning.starts_with("299 - \"pkgproxy: served cached docker.io/library/hello:moving (checked 1h ago)"),
        "{warning}"
    );
    assert!(warning.contains("upstream rate-limited"), "{warning}");
    let by_digest = format!("GET /v2/library/hello/manifests/{}", second.manifest.digest);
    assert_eq!(
        manifest_requests(&hub),
        ["HEAD /v2/library/hello/manifests/moving".to_string(), by_digest.clone()],
        "one probe for every pull while the hub asked to be left alone"
    );

    // The hub's Retry-After over and the limit lifted: the next pull
    // brings the new image, fetched by digest, and the tag points at it.
    server.clock().advance(Duration::from_secs(121));
    hub.lift_pull_limit();
    hub.clear_requests();
    assert_eq!(pull(&skopeo, "lifted"), second.layer.bytes);
    assert_eq!(manifest_requests(&hub), ["HEAD /v2/library/hello/manifests/moving".to_string(), by_digest]);
    let now = send(server.proxy_addr(), "GET", "/v2/library/hello/manifests/moving", &[], b"").await;
    assert_eq!((now.status, &now.body), (200, &second.manifest.bytes));
    assert_eq!(now.header("x-pkgproxy-cache"), Some("hit"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_tag_never_pulled_past_the_limit_is_an_honest_429_and_retries_in_the_window_reach_no_hub() {
    let hub = FakeHub::start().await;
    hub.publish("library/hello", "moving", &Image::build("first", None));
    let config = hub.config("docker.io");
    let server = Server::start(Some(&config)).await;
    hub.limit_pulls(0, 120);
    let manifest = "/v2/library/hello/manifests/moving";
    let first = send(server.proxy_addr(), "GET", manifest, &[], b"").await;
    assert_eq!((first.status, first.header("retry-after")), (429, Some("120")));
    let probes = manifest_requests(&hub).len();
    server.clock().advance(Duration::from_secs(100));
    let retry = send(server.proxy_addr(), "GET", manifest, &[], b"").await;
    assert_eq!((retry.status, retry.header("retry-after")), (429, Some("20")), "the time the hub has left");
    let body: serde_json::Value = serde_json::from_slice(&retry.body).unwrap();
    assert_eq!(body["errors"][0]["code"], "TOOMANYREQUESTS");
    assert_eq!(manifest_requests(&hub).len(), probes, "the retry reached no hub");
}
