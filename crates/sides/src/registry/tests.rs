//! How registry requests are classified, and how clients are told no.

use super::*;
use crate::config::Configures;
use crate::decision::expect::{cached, named, refused};
use crate::decision::{ClientAuthorization, Redirects};
use crate::route::Mount;
use http::header::{HeaderValue, ACCEPT, CONTENT_TYPE, RETRY_AFTER};
use http::HeaderMap;

const HEX: &str = "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855";

/// The side, and the folder its cache is in.
struct Fixture {
    _dir: tempfile::TempDir,
    registry: Registry,
}

impl std::ops::Deref for Fixture {
    type Target = Registry;
    fn deref(&self) -> &Registry {
        &self.registry
    }
}

fn registry() -> Fixture {
    let local = UpstreamOptions {
        name: "registry.lan:5000".into(),
        mirrors: vec!["http://127.0.0.1:5000/".into()],
        username: None,
        password: None,
    };
    let hub = UpstreamOptions {
        name: "index.docker.io".into(),
        mirrors: vec!["http://127.0.0.1:5010".into()],
        username: None,
        password: None,
    };
    let dir = tempfile::tempdir().unwrap();
    let cache = Cache::open(dir.path(), Arc::new(pkgproxy_cache::SystemClock)).unwrap();
    let config = Config::new(&Options {
        upstreams: vec![local, hub],
        tag_ttl: None,
        pull_reserve: None,
        private_offline: false,
    })
    .unwrap();
    Fixture { registry: Registry::new(config, cache), _dir: dir }
}

fn classify(method: Method, path: &str, query: Option<&str>) -> Decision {
    classify_with(method, path, query, &HeaderMap::new())
}

fn classify_with(method: Method, path: &str, query: Option<&str>, headers: &HeaderMap) -> Decision {
    let request = Request {
        method: &method,
        headers,
        mount: Mount::Prefix("/v2"),
        path,
        query,
        target: None,
        host: "p:3142",
        secure: false,
    };
    registry().classify(&request)
}

#[test]
fn the_ping_is_answered_here() {
    let Decision::Answer(answer) = classify(Method::GET, "/", None) else { panic!("not answered") };
    assert_eq!((answer.status, answer.body.as_ref()), (StatusCode::OK, &b"{}"[..]));
    assert_eq!(answer.headers["docker-distribution-api-version"], "registry/2.0");
}

#[test]
fn a_blob_is_one_entry_per_digest_checked_against_it_and_fetched_from_its_repository() {
    let hub = cached(classify(Method::GET, &format!("/alpine/blobs/sha256:{HEX}"), Some("ns=docker.io")));
    let local = cached(classify(Method::GET, &format!("/registry.lan:5000/team/app/blobs/sha256:{HEX}"), None));
    assert_eq!(hub.key, local.key, "one entry whatever named it");
    assert_eq!(hub.key, format!("registry/blob/sha256/{HEX}"));
    assert_eq!(hub.wanted.expected.sha256.as_deref(), Some(HEX));
    assert_eq!((hub.class, hub.asking.redirects), (Class::Immutable, Redirects::Followed));
    assert_eq!(hub.origin.instances, ["http://127.0.0.1:5010"], "docker.io's configured mirror");
    assert_eq!(hub.origin.path, format!("/v2/library/alpine/blobs/sha256:{HEX}"));
    assert_eq!(local.origin.path, format!("/v2/team/app/blobs/sha256:{HEX}"));
    assert_eq!(hub.reply.content_headers["docker-content-digest"], format!("sha256:{HEX}").as_str());
    assert!(!hub.reply.headers.contains_key("docker-content-digest"), "not on a 404");
    assert_eq!(hub.reply.headers["oci-namespace"], "docker.io");
    assert_eq!(hub.reply.headers["docker-distribution-api-version"], "registry/2.0");
    assert!(!hub.asking.headers.contains_key(ACCEPT));
}

#[test]
fn manifests_are_asked_for_in_the_fixed_modern_set() {
    let by_digest = cached(classify(Method::HEAD, &format!("/library/hello/manifests/sha256:{HEX}"), None));
    assert_eq!(by_digest.key, format!("registry/manifest/sha256/{HEX}"));
    assert_eq!(by_digest.asking.headers[ACCEPT], MANIFEST_TYPES);
    let by_tag = named(classify(Method::GET, "/library/hello/manifests/v1", None)).name;
    assert_eq!(by_tag.key, "registry/tag/docker.io/library/hello/v1");
    assert_eq!((by_tag.class, by_tag.wanted.fresh_for), (Class::Revalidated, DEFAULT_TAG_TTL));
    assert!(!MANIFEST_TYPES.contains("*/*") && !MANIFEST_TYPES.contains("v1+prettyjws"));
}

#[test]
fn containerd_s_percent_encoded_ns_names_a_registry_with_a_port() {
    for query in ["ns=registry.lan%3A5000", "ns=registry.lan:5000", "foo=1&ns=registry.lan%3a5000"] {
        let asked = named(classify(Method::GET, "/x/manifests/v1", Some(query))).name;
        assert_eq!(asked.origin.instances, ["http://127.0.0.1:5000"], "{query}");
        assert_eq!(asked.reply.headers["oci-namespace"], "registry.lan:5000", "{query}");
    }
}

#[test]
fn an_unknown_registry_is_a_fast_404_and_a_push_is_unsupported() {
    let unknown = refused(classify(Method::GET, "/evil.example/x/manifests/v1", None));
    assert_eq!((unknown.status, unknown.code), (StatusCode::NOT_FOUND, Some("NAME_UNKNOWN")));
    let by_ns = refused(classify(Method::GET, "/x/manifests/v1", Some("ns=evil.example")));
    assert_eq!(by_ns.code, Some("NAME_UNKNOWN"));
    let push = refused(classify(Method::PUT, "/library/hello/manifests/v1", None));
    assert_eq!((push.status, push.code), (StatusCode::METHOD_NOT_ALLOWED, Some("UNSUPPORTED")));
}

#[test]
fn failures_are_told_in_the_spec_s_envelope_and_never_as_a_500() {
    let body = |answer: &LocalAnswer| serde_json::from_slice::<serde_json::Value>(&answer.body).unwrap();
    let invalid = failure_answer(&Failure::Refused(&Refusal::bad_request("bad").with_code("DIGEST_INVALID")));
    assert_eq!(
        (invalid.status, body(&invalid)["errors"][0]["code"].as_str()),
        (StatusCode::BAD_REQUEST, Some("DIGEST_INVALID"))
    );
    let offline = failure_answer(&Failure::Offline);
    assert_eq!(offline.status, StatusCode::SERVICE_UNAVAILABLE);
    assert!(!offline.headers.contains_key(RETRY_AFTER));
    assert_eq!(offline.headers[CONTENT_TYPE], "application/json");
    let limited = failure_answer(&Failure::Overloaded { retry_after: Duration::from_secs(30) });
    assert_eq!(
        (limited.status, &limited.headers[RETRY_AFTER]),
        (StatusCode::TOO_MANY_REQUESTS, &HeaderValue::from(30))
    );
    assert_eq!(body(&limited)["errors"][0]["code"], "TOOMANYREQUESTS");
    let failed = failure_answer(&Failure::UpstreamFailed { reason: "reset" });
    assert_eq!(failed.status, StatusCode::SERVICE_UNAVAILABLE);
    for answer in [invalid, offline, limited, failed] {
        assert_eq!(answer.headers["docker-distribution-api-version"], "registry/2.0");
    }
}

#[test]
fn configured_upstreams_add_registries_or_replace_a_built_in_one_s_instances() {
    let registry = registry();
    assert_eq!(registry.config().upstream("docker.io").unwrap().mirrors.urls(), ["http://127.0.0.1:5010"]);
    assert_eq!(registry.config().upstream("ghcr.io").unwrap().mirrors.urls(), ["https://ghcr.io"]);
    assert!(registry.config().upstream("registry.lan:5000").is_some());
    let mut urls = registry.config().trusted();
    urls.sort();
    assert_eq!(urls, ["http://127.0.0.1:5000", "http://127.0.0.1:5010"]);
    let none = UpstreamOptions { name: "x.lan".into(), mirrors: vec![], username: None, password: None };
    assert!(Config::new(&Options { upstreams: vec![none], tag_ttl: None, pull_reserve: None, private_offline: false })
        .is_err());
    let bad =
        UpstreamOptions { name: "X Lan".into(), mirrors: vec!["http://x".into()], username: None, password: None };
    assert!(Config::new(&Options { upstreams: vec![bad], tag_ttl: None, pull_reserve: None, private_offline: false })
        .is_err());
    let nameless = UpstreamOptions {
        name: "x.lan".into(),
        mirrors: vec!["http://x".into()],
        username: Some(String::new()),
        password: Some("pw".into()),
    };
    assert!(Config::new(&Options {
        upstreams: vec![nameless],
        tag_ttl: None,
        pull_reserve: None,
        private_offline: false
    })
    .is_err());
}

#[test]
fn a_client_that_does_not_take_every_modern_type_gets_its_tag_as_it_asked() {
    let accepts = |values: &[&'static str]| {
        let mut headers = HeaderMap::new();
        values.iter().for_each(|value| {
            headers.append(ACCEPT, HeaderValue::from_static(value));
        });
        classify_with(Method::GET, "/library/hello/manifests/v1", None, &headers)
    };
    let skopeo = [
        "application/vnd.oci.image.manifest.v1+json",
        "application/vnd.docker.distribution.manifest.v2+json",
        "application/vnd.docker.distribution.manifest.v1+prettyjws",
        "application/vnd.docker.distribution.manifest.v1+json",
        "application/vnd.docker.distribution.manifest.list.v2+json",
        "application/vnd.oci.image.index.v1+json",
    ];
    assert!(matches!(accepts(&skopeo), Decision::Pointer(_)), "six headers, one type each");
    let containerd = ["application/vnd.docker.distribution.manifest.v2+json, application/vnd.docker.distribution.manifest.list.v2+json, application/vnd.oci.image.manifest.v1+json, application/vnd.oci.image.index.v1+json, */*"];
    assert!(matches!(accepts(&containerd), Decision::Pointer(_)), "one comma list");
    let Decision::Forward(old) = accepts(&["application/vnd.docker.distribution.manifest.v2+json"]) else {
        panic!("not passed through")
    };
    assert_eq!(old.headers.get_all(ACCEPT).iter().count(), 1);
    assert_eq!(old.headers[ACCEPT], "application/vnd.docker.distribution.manifest.v2+json");
    assert_eq!(old.origin.path, "/v2/library/hello/manifests/v1");
}

#[test]
fn content_is_served_under_a_repository_as_its_link_says() {
    let registry = registry();
    let path = format!("/secret/app/blobs/sha256:{HEX}");
    let bearer = HeaderValue::from_static("Bearer alice-token");
    let with_token: HeaderMap = [(http::header::AUTHORIZATION, bearer.clone())].into_iter().collect();
    let ask = |headers: &HeaderMap| {
        let request = Request {
            method: &Method::GET,
            headers,
            mount: Mount::Prefix("/v2"),
            path: &path,
            query: None,
            target: None,
            host: "p:3142",
            secure: false,
        };
        cached(registry.classify(&request))
    };

    let unlinked = ask(&HeaderMap::new());
    let access = unlinked.access.as_deref().expect("confirmed before it is served");
    assert_eq!((access.unknown_code, access.offline), ("BLOB_UNKNOWN", false));
    assert!(matches!(unlinked.asking.auth, UpstreamAuth::Bearer { .. }), "as pkgproxy: the name may be public");
    assert!(matches!(ask(&with_token).asking.auth, UpstreamAuth::Bearer { .. }), "not known to be private");

    let challenge = ("www-authenticate".to_string(), "Bearer realm=\"http://hub/token\"".to_string());
    let refused = Arc::new(PassedAnswer {
        status: StatusCode::UNAUTHORIZED,
        headers: vec![challenge.clone()],
        body: Bytes::new(),
    });
    let now = std::time::Instant::now();
    registry.remember(&unlinked, &refused, now);
    // The refusal answers the next anonymous requests for a while, in the
    // spec's envelope, with the challenge; never while offline.
    let remembered = registry.remembered(&unlinked, now, false).expect("remembered");
    assert_eq!((remembered.status, remembered.headers.contains(&challenge)), (StatusCode::UNAUTHORIZED, true));
    assert!(String::from_utf8_lossy(&remembered.body).contains("UNAUTHORIZED"));
    assert!(registry.remembered(&unlinked, now, true).is_none(), "offline");
    assert!(registry.remembered(&unlinked, now + REFUSAL_KEPT, false).is_none(), "for a while");
    let private = ask(&with_token);
    assert!(registry.remembered(&private, now, false).is_none(), "a client's own credentials are asked");
    assert_eq!(private.asking.auth, UpstreamAuth::Client(ClientAuthorization(bearer)));
    let grant = &private.access.as_deref().expect("confirmed").grant;
    assert!(grant.starts_with("docker.io/secret/app ") && !grant.contains("alice"), "{grant}");
    registry.granted(&private);
    assert!(ask(&HeaderMap::new()).access.is_some(), "linked privately: confirmed for everyone");
    assert!(matches!(ask(&HeaderMap::new()).asking.auth, UpstreamAuth::Bearer { .. }), "without credentials");

    let public_path = format!("/library/hello/blobs/sha256:{HEX}");
    let request = Request {
        method: &Method::GET,
        headers: &HeaderMap::new(),
        mount: Mount::Prefix("/v2"),
        path: &public_path,
        query: None,
        target: None,
        host: "p:3142",
        secure: false,
    };
    let under_public = cached(registry.classify(&request));
    assert!(under_public.access.is_some(), "another name is not linked by this one");
    registry.granted(&under_public);
    let linked = cached(registry.classify(&request));
    assert!(linked.access.is_none(), "linked publicly: served with nothing asked");
    assert!(ask(&HeaderMap::new()).access.is_some(), "and the private name still is not");
}
