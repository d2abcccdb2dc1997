//! What only a client's own credentials may read reaches nobody else by
//! another door: the stats socket (world-readable) neither lists the
//! cache's keys nor exports its content, and the admin socket's export
//! carries no private content, whatever it is asked for.

use http::Method;
use pkgproxy_control::{ExportRequest, CACHE_ENTRIES_PATH, EXPORT_PATH};
use pkgproxy_testkit::client::send;
use pkgproxy_testkit::{Daemon, FakeHub, Image};

use crate::common::PKGPROXY;

/// A hub whose `secret/app` only alice may pull, and a pkgproxy in front
/// of it that knows nothing of it yet.
async fn a_private_repository() -> (FakeHub, Image, Daemon) {
    let hub = FakeHub::start().await;
    let secret = Image::build("secret", None);
    hub.publish("secret/app", "v1", &secret);
    hub.make_private("secret/app", "alice:pw");
    let daemon = Daemon::start(PKGPROXY, Some(&hub.config("docker.io"))).await;
    (hub, secret, daemon)
}

/// `Authorization: Bearer ...` for alice, from the hub's token endpoint, as
/// a client gets it.
pub(crate) async fn alice(hub: &FakeHub) -> String {
    let hub_addr = hub.url().trim_start_matches("http://").to_string();
    let token = "/token?service=fakehub&scope=repository:secret/app:pull";
    let token = send(&hub_addr, "GET", token, &[("authorization", "Basic YWxpY2U6cHc=")], b"").await;
    let token: serde_json::Value = serde_json::from_slice(&token.body).unwrap();
    format!("Bearer {}", token["token"].as_str().unwrap())
}

/// [`a_private_repository`], its image's layer pulled with alice's own
/// token.
async fn a_private_image_cached() -> (FakeHub, Image, Daemon) {
    let (hub, secret, daemon) = a_private_repository().await;
    let layer = format!("/v2/secret/app/blobs/{}", secret.layer.digest);
    let pulled = send(daemon.proxy_addr(), "GET", &layer, &[("authorization", &alice(&hub).await)], b"").await;
    assert_eq!((pulled.status, pulled.body.clone()), (200, secret.layer.bytes.clone()));
    (hub, secret, daemon)
}

/// Whether `haystack` holds `content` (its first 64 bytes: a layer is
/// tarred whole into a bundle).
fn holds(haystack: &[u8], content: &[u8]) -> bool {
    let needle = &content[..content.len().min(64)];
    haystack.windows(needle.len()).any(|window| window == needle)
}

#[tokio::test(flavor = "multi_thread")]
async fn the_stats_socket_neither_lists_the_cache_nor_exports_it() {
    let (_hub, secret, daemon) = a_private_image_cached().await;
    let stats = daemon.stats();
    let (status, body) = stats.send(Method::GET, CACHE_ENTRIES_PATH, None).await.unwrap();
    assert_eq!(status, 403, "{}", String::from_utf8_lossy(&body));
    assert!(!String::from_utf8_lossy(&body).contains("secret"));
    let layer = format!("/v2/secret/app/blobs/{}", secret.layer.digest);
    let asked = ExportRequest { urls: vec![layer], all: false, records: vec![], policy: false };
    let (status, body) =
        stats.send(Method::POST, EXPORT_PATH, Some(serde_json::to_vec(&asked).unwrap().into())).await.unwrap();
    assert_eq!(status, 403);
    assert!(!holds(&body, &secret.layer.bytes), "nothing of it");
}

#[tokio::test(flavor = "multi_thread")]
async fn an_export_refuses_private_content_by_url_or_by_key_and_all_leaves_it_out() {
    let (_hub, secret, daemon) = a_private_image_cached().await;
    let admin = daemon.admin_client();
    let hex = secret.layer.digest.trim_start_matches("sha256:");
    let by_url =
        ExportRequest { urls: vec![format!("/v2/secret/app/blobs/{}", secret.layer.digest)], ..Default::default() };
    let by_key = ExportRequest { records: vec![format!("registry/blob/sha256/{hex}")], ..Default::default() };
    for asked in [by_url, by_key] {
        let body = serde_json::to_vec(&asked).unwrap().into();
        let (status, answer) = admin.send(Method::POST, EXPORT_PATH, Some(body)).await.unwrap();
        let text = String::from_utf8_lossy(&answer);
        assert_eq!(status, 409, "{asked:?}: {text}");
        assert!(!holds(&answer, &secret.layer.bytes), "{text}");
    }
    let all = ExportRequest { all: true, ..Default::default() };
    let (status, bundle) =
        admin.send(Method::POST, EXPORT_PATH, Some(serde_json::to_vec(&all).unwrap().into())).await.unwrap();
    assert_eq!(status, 200);
    assert!(!holds(&bundle, &secret.layer.bytes), "--all leaves it out");
}

#[tokio::test(flavor = "multi_thread")]
async fn a_client_s_own_credentials_work_on_its_first_request_to_a_repository_not_known_private() {
    let (hub, secret, daemon) = a_private_repository().await;
    let alice = alice(&hub).await;
    let as_alice = [("authorization", alice.as_str())];
    let layer = format!("/v2/secret/app/blobs/{}", secret.layer.digest);
    let pulled = send(daemon.proxy_addr(), "GET", &layer, &as_alice, b"").await;
    assert_eq!((pulled.status, pulled.body.clone()), (200, secret.layer.bytes.clone()), "the first time");

    // And a tag, on the first request after a restart (nothing known).
    let mut daemon = daemon;
    daemon.restart().await;
    let tag = send(daemon.proxy_addr(), "GET", "/v2/secret/app/manifests/v1", &as_alice, b"").await;
    assert_eq!((tag.status, tag.body.clone()), (200, secret.manifest.bytes.clone()));
}

/// An anonymous pull of a private repository costs the hub a few requests
/// once, and nothing while the refusal is remembered.
#[tokio::test(flavor = "multi_thread")]
async fn a_refused_anonymous_pull_costs_the_hub_little_once_and_nothing_again() {
    let (hub, secret, daemon) = a_private_repository().await;
    let skopeo = pkgproxy_testkit::SkopeoSandbox::new(daemon.proxy_addr());
    let first = tokio::task::block_in_place(|| skopeo.copy("docker.io/secret/app:v1", "first"));
    assert!(!first.success, "a private image, no credentials");
    let asked = hub.requests().len();
    assert!(asked <= 3, "a HEAD, a token and the HEAD with it: {:#?}", hub.requests());
    hub.clear_requests();
    let again = tokio::task::block_in_place(|| skopeo.copy("docker.io/secret/app:v1", "again"));
    assert!(!again.success);
    let digest =
        send(daemon.proxy_addr(), "GET", &format!("/v2/secret/app/blobs/{}", secret.layer.digest), &[], b"").await;
    assert_eq!(digest.status, 401);
    assert!(digest.header("www-authenticate").is_some_and(|c| c.contains("realm=")), "the challenge, remembered");
    assert!(hub.requests().is_empty(), "remembered: {:#?}", hub.requests());
}
