//! How snap requests are classified, and how snapd is told no.

use http::header::CONTENT_TYPE;
use http::{HeaderMap, HeaderValue};

use super::*;
use crate::decision::expect::{cached, forwarded};
use crate::route::Mount;

const DIGEST: &str = "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef";

struct Fixture {
    _dir: tempfile::TempDir,
    snap: Snap,
}

fn fixture() -> Fixture {
    let dir = tempfile::tempdir().unwrap();
    let cache = Cache::open(dir.path(), Arc::new(pkgproxy_cache::SystemClock)).unwrap();
    let config = Config::new(&Options { stores: vec!["http://127.0.0.1:8721/".into()] }).unwrap();
    Fixture { snap: Snap::new(config, cache), _dir: dir }
}

fn device_headers(arch: &'static str) -> HeaderMap {
    let mut headers = HeaderMap::new();
    headers.insert("snap-device-series", HeaderValue::from_static("16"));
    headers.insert("snap-device-architecture", HeaderValue::from_static(arch));
    headers.insert("user-agent", HeaderValue::from_static("snapd/2.57.6"));
    headers
}

fn classify(snap: &Snap, method: Method, headers: &HeaderMap, path: &str, query: Option<&str>) -> Decision {
    let request = Request {
        method: &method,
        headers,
        mount: Mount::Prefix("/snap"),
        path,
        query,
        target: None,
        host: "proxy.lan:3142",
        secure: false,
    };
    snap.classify(&request)
}

#[test]
fn a_refresh_is_forwarded_recorded_for_its_device_and_rewritten_for_its_client() {
    let fixture = fixture();
    let headers = device_headers("amd64");
    let refresh = forwarded(classify(&fixture.snap, Method::POST, &headers, "/v2/snaps/refresh", None));
    assert_eq!(refresh.origin.path, "/v2/snaps/refresh");
    assert_eq!(refresh.origin.instances, ["http://127.0.0.1:8721"]);
    let Some(Record::SnapActions(recorded_for)) = &refresh.record else { panic!("not recorded") };
    assert_eq!(Device::of(recorded_for), Device::of(&headers));
    assert_eq!(refresh.rewrite, Some(Rewrite::at(ServedAt { base: "http://proxy.lan:3142/snap".into() })));
    assert_eq!(refresh.headers["accept-encoding"], "identity");
    let get = classify(&fixture.snap, Method::GET, &headers, "/v2/snaps/refresh", None);
    assert!(matches!(get, Decision::Refuse(refusal) if refusal.allow == Some("POST")));
}

#[test]
fn personal_traffic_is_forwarded_and_never_recorded_or_cached() {
    let fixture = fixture();
    let mut user = device_headers("amd64");
    user.insert("authorization", HeaderValue::from_static("Macaroon root=x"));
    for (method, path) in [
        (Method::POST, "/v2/snaps/refresh"),
        (Method::GET, "/v2/snaps/info/hello"),
        (Method::GET, "/v2/assertions/account/dev1"),
    ] {
        let forward = forwarded(classify(&fixture.snap, method, &user, path, None));
        assert_eq!((forward.record, forward.rewrite), (None, None), "{path}");
    }
    let blob = format!("/download/{DIGEST}/4096/api/v1/snaps/download/ID_3.snap");
    let paid = forwarded(classify(&fixture.snap, Method::GET, &user, &blob, None));
    assert_eq!(
        paid.origin.path, "/api/v1/snaps/download/ID_3.snap",
        "a user's download goes to the store's path, uncached"
    );
    let device = device_headers("amd64");
    for path in ["/api/v1/snaps/auth/nonces", "/api/v1/snaps/auth/sessions", "/v2/cohorts"] {
        assert_eq!(forwarded(classify(&fixture.snap, Method::POST, &device, path, None)).record, None);
    }
    let private = classify(&fixture.snap, Method::GET, &device, "/v2/snaps/find", Some("q=x&private=true"));
    assert!(matches!(private, Decision::Forward(_)));
}

#[test]
fn blobs_are_keyed_by_digest_and_store_and_fetched_through_the_redirect() {
    let fixture = fixture();
    let path = format!("/download/{DIGEST}/4096/api/v1/snaps/download/ID_3.snap");
    let blob = cached(classify(&fixture.snap, Method::GET, &device_headers("amd64"), &path, None));
    assert_eq!(blob.key, format!("snap/blob/global/{DIGEST}"));
    assert_eq!(
        (blob.class, blob.wanted.expected.size, blob.asking.redirects),
        (Class::Immutable, Some(4096), Redirects::Followed)
    );
    assert_eq!(blob.origin.path, "/api/v1/snaps/download/ID_3.snap");
    assert!(fixture.snap.verifier(&blob, &[]).is_some());
    let mut brand = device_headers("amd64");
    brand.insert("x-ubuntu-store", HeaderValue::from_static("acme"));
    let branded = cached(classify(&fixture.snap, Method::GET, &brand, &path, None));
    assert_eq!(branded.key, format!("snap/blob/store=acme/{DIGEST}"));
    let hostile = classify(&fixture.snap, Method::GET, &brand, &format!("/download/{DIGEST}/1/../../etc/passwd"), None);
    assert!(matches!(hostile, Decision::Refuse(_)));
}

#[test]
fn answers_are_keyed_by_device_and_normalised_query() {
    let fixture = fixture();
    let key = |arch, query| {
        cached(classify(&fixture.snap, Method::GET, &device_headers(arch), "/v2/snaps/info/hello", Some(query))).key
    };
    assert_eq!(key("amd64", "fields=b,a&architecture=amd64"), key("amd64", "architecture=amd64&fields=a,b"));
    assert_ne!(key("amd64", "fields=a"), key("arm64", "fields=a"));
    let info = cached(classify(
        &fixture.snap,
        Method::GET,
        &device_headers("amd64"),
        "/v2/snaps/info/hello",
        Some("fields=a"),
    ));
    assert_eq!((info.wanted.fresh_for, info.reply.rewrite.is_some()), (Duration::ZERO, true));
    assert_eq!(info.origin.path, "/v2/snaps/info/hello?fields=a");
    assert_eq!(info.asking.headers["snap-device-architecture"], "amd64");
    let names = cached(classify(&fixture.snap, Method::GET, &device_headers("amd64"), "/api/v1/snaps/names", None));
    assert_eq!((names.wanted.fresh_for, names.reply.rewrite), (CATALOGUE_TTL, None));
}

#[test]
fn assertions_are_served_by_max_format() {
    let fixture = fixture();
    let headers = device_headers("amd64");
    let declaration = cached(classify(
        &fixture.snap,
        Method::GET,
        &headers,
        "/v2/assertions/snap-declaration/16/ID",
        Some("max-format=5"),
    ));
    assert_eq!(declaration.wanted.accepts, Acceptance::AssertionFormatAtMost(5));
    let legacy =
        cached(classify(&fixture.snap, Method::GET, &headers, "/api/v1/snaps/assertions/snap-declaration/16/ID", None));
    assert_eq!(legacy.key, declaration.key, "one assertion, whatever the path");
    assert!(fixture.snap.accepts(declaration.wanted.accepts, b"type: snap-declaration\nformat: 5\n\nsig"));
    assert!(!fixture.snap.accepts(Acceptance::AssertionFormatAtMost(4), b"type: snap-declaration\nformat: 5\n\nsig"));
}

#[test]
fn media_come_only_as_a_store_answer_named_them() {
    let fixture = fixture();
    let headers = device_headers("amd64");
    let path = "/media/https/dashboard.snapcraft.io/site_media/icon.png";
    assert!(matches!(classify(&fixture.snap, Method::GET, &headers, path, None), Decision::Refuse(_)));
    let answer = br#"{"snap": {"media": [{"type": "icon", "url": "https://dashboard.snapcraft.io/site_media/icon.png"},
        {"type": "video", "url": "https://dashboard.snapcraft.io/intro"}]}}"#;
    let at = ServedAt { base: "http://proxy.lan:3142/snap".into() };
    let rewritten = fixture.snap.urls_rewritten(&at, answer).unwrap();
    assert!(std::str::from_utf8(&rewritten).unwrap().contains(&format!("http://proxy.lan:3142/snap{path}")));
    let media = cached(classify(&fixture.snap, Method::GET, &headers, path, None));
    assert_eq!(media.origin.instances, ["https://dashboard.snapcraft.io"]);
    assert_eq!(media.origin.path, "/site_media/icon.png");
    for unnamed in [
        "/media/https/dashboard.snapcraft.io/site_media/other.png",
        "/media/https/dashboard.snapcraft.io/intro",
        "/media/https/api.snapcraft.io/v2/snaps/info/hello",
    ] {
        let refused = classify(&fixture.snap, Method::GET, &headers, unnamed, None);
        assert!(matches!(refused, Decision::Refuse(_)), "{unnamed}: the same host, not named, or a video");
    }
    let with_query = classify(&fixture.snap, Method::GET, &headers, path, Some("cmd=x"));
    assert!(matches!(with_query, Decision::Refuse(_)), "another query is another URL");

    // After a restart nothing is learnt yet, but what was served is cached.
    fixture.snap.cache.put(&media.key, b"png", vec![], Class::Revalidated).unwrap();
    let restarted = Snap::new(Config::clone(&fixture.snap.config()), fixture.snap.cache.clone());
    assert!(matches!(classify(&restarted, Method::GET, &headers, path, None), Decision::Cache(_)));
    let other = "/media/https/dashboard.snapcraft.io/site_media/other.png";
    assert!(matches!(classify(&restarted, Method::GET, &headers, other, None), Decision::Refuse(_)));
}

#[test]
fn snapd_is_told_no_with_a_424_and_the_store_s_error_list() {
    let offline = failure_answer(&Failure::Offline);
    assert_eq!(offline.status, StatusCode::FAILED_DEPENDENCY);
    assert_eq!(offline.headers[CONTENT_TYPE], "application/json");
    assert_eq!(offline.headers["x-oops-id"], "pkgproxy-offline");
    assert!(!offline.headers.contains_key(RETRY_AFTER));
    let body: Value = serde_json::from_slice(&offline.body).unwrap();
    assert_eq!(body["error-list"][0]["code"], "pkgproxy-offline");
    assert!(body["error-list"][0]["message"].as_str().unwrap().starts_with("pkgproxy is offline"));
    let overloaded = failure_answer(&Failure::Overloaded { retry_after: Duration::from_secs(30) });
    assert_eq!(
        (overloaded.status, &overloaded.headers[RETRY_AFTER]),
        (StatusCode::FAILED_DEPENDENCY, &HeaderValue::from(30))
    );
    for failure in [Failure::UpstreamFailed { reason: "reset" }, Failure::Internal { reason: "disk" }] {
        let answer = failure_answer(&failure);
        assert!(!answer.status.is_server_error(), "never a made-up 5xx: {failure:?}");
        let body: Value = serde_json::from_slice(&answer.body).unwrap();
        let code = body["error-list"][0]["code"].as_str().unwrap();
        assert!(code.starts_with("pkgproxy-") && !code.contains("not-found"), "{code}");
    }
}

#[test]
fn a_result_is_written_again_only_when_it_changed() {
    let fixture = fixture();
    let headers = device_headers("amd64");
    let sent = br#"{"context": [], "actions": [{"action": "download", "instance-key": "download-1", "name": "hello"}], "fields": ["revision"]}"#;
    let answer = |revision: u64| {
        json!({"results": [{"result": "download", "instance-key": "download-1", "name": "hello",
                            "snap": {"name": "hello", "snap-id": "id", "revision": revision}}]})
        .to_string()
    };
    let request: actions::RefreshRequest = serde_json::from_slice(sent).unwrap();
    let key = actions::record_key(&actions::action_key(&Device::of(&headers), &request.actions[0], &[]).unwrap());
    fixture.snap.record_results(&headers, sent, answer(3).as_bytes());
    let first = fixture.snap.cache.lookup(&key).expect("recorded");
    fixture.snap.record_results(&headers, sent, answer(3).as_bytes());
    assert!(Arc::ptr_eq(&first, &fixture.snap.cache.lookup(&key).unwrap()), "the same result is not written again");
    fixture.snap.record_results(&headers, sent, answer(4).as_bytes());
    let recorded = Holdings::record(&fixture.snap, &key).unwrap();
    assert_eq!(recorded.result["snap"]["revision"], 4, "a new revision replaces the record");
}

#[test]
fn through_a_parent_pkgproxy_the_parent_s_blob_urls_become_the_child_s_and_lead_back_to_the_parent() {
    let dir = tempfile::tempdir().unwrap();
    let cache = Cache::open(dir.path(), Arc::new(pkgproxy_cache::SystemClock)).unwrap();
    let mut config = Config::new(&Options::default()).unwrap();
    config.chain("http://region:3142");
    let snap = Snap::new(config, cache);
    let parent_url = format!("http://region:3142/snap/download/{DIGEST}/7/api/v1/snaps/download/ID_3.snap");
    let answer =
        serde_json::json!({"results": [{"snap": {"download": {"url": parent_url, "sha3-384": DIGEST, "size": 7}}}]});
    let at = ServedAt { base: "http://site:3142/snap".into() };
    let rewritten: serde_json::Value =
        serde_json::from_slice(&snap.urls_rewritten(&at, answer.to_string().as_bytes()).unwrap()).unwrap();
    let url = rewritten["results"][0]["snap"]["download"]["url"].as_str().unwrap().to_string();
    let path = url.strip_prefix("http://site:3142/snap").expect("the child's own URL");

    let blob = cached(classify(&snap, Method::GET, &device_headers("amd64"), path, None));
    assert_eq!(blob.origin.instances, ["http://region:3142/snap"]);
    assert_eq!(
        format!("{}{}", blob.origin.instances[0], blob.origin.path),
        parent_url,
        "asked of the parent as it named it"
    );
    assert_eq!(blob.wanted.expected.size, Some(7));
}
