//! How LXD requests are classified, and how a generation is adopted.

use std::sync::Arc;

use http::{HeaderMap, StatusCode};
use serde_json::json;

use super::*;
use crate::decision::expect::{cached, refused};
use crate::route::Mount;

const SHA: &str = "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855";
const PRODUCTS: &str = "streams/v1/com.ubuntu.cloud:released:download.json";

struct Fixture {
    _dir: tempfile::TempDir,
    lxd: Lxd,
}

fn lxd() -> Fixture {
    let dir = tempfile::tempdir().unwrap();
    let cache = Cache::open(dir.path(), Arc::new(pkgproxy_cache::SystemClock)).unwrap();
    let test = RemoteOptions { name: "test".into(), mirrors: vec!["http://127.0.0.1:8731/releases/".into()] };
    let config = Config::new(&Options { remotes: vec![test], index_ttl: None }).unwrap();
    let lxd = Lxd::open(config, cache, dir.path()).unwrap();
    Fixture { _dir: dir, lxd }
}

fn classify(lxd: &Lxd, path: &str) -> Decision {
    let headers = HeaderMap::new();
    let request = Request {
        method: &Method::GET,
        headers: &headers,
        mount: Mount::Prefix("/lxd"),
        path,
        query: None,
        target: None,
        host: "p:3142",
        secure: false,
    };
    lxd.classify(&request)
}

fn generation(decision: Decision) -> GenerationRequest {
    match decision {
        Decision::Generation(generation) => *generation,
        other => panic!("not a generation: {other:?}"),
    }
}

/// Adopts a generation whose products file names `items`.
fn adopt(lxd: &Lxd, items: serde_json::Value) {
    let index = json!({"index": {"d": {"datatype": "image-downloads", "path": PRODUCTS, "products": ["p"]}}});
    let products = json!({"products": {"p": {"versions": {"20240101": {"items": items}}}}});
    let root = generation(classify(lxd, "/test/streams/v1/index.json")).root;
    let index = index.to_string();
    let members = lxd.members(&root, index.as_bytes()).unwrap();
    assert_eq!(members.len(), 1);
    assert_eq!(members[0].origin.path, format!("/{PRODUCTS}"));
    let bodies = vec![(members[0].clone(), Bytes::from(products.to_string()))];
    lxd.adopt(&root, index.as_bytes(), &bodies).unwrap();
}

#[test]
fn the_index_is_the_root_of_a_generation_fresh_for_the_index_ttl() {
    let fixture = lxd();
    let request = generation(classify(&fixture.lxd, "/test/streams/v1/index.json"));
    assert_eq!(request.serve, Member::Key("lxd/test/streams/v1/index.json".into()));
    assert_eq!(request.root.key, "lxd/test/streams/v1/index.json");
    assert_eq!(request.root.origin.instances, ["http://127.0.0.1:8731/releases"]);
    assert_eq!(request.root.origin.path, "/streams/v1/index.json");
    assert_eq!((request.root.wanted.fresh_for, request.root.class), (DEFAULT_INDEX_TTL, Class::Revalidated));
    let doubled = generation(classify(&fixture.lxd, "//test//streams/v1/index.json"));
    assert_eq!(doubled.serve, request.serve, "runs of slashes are one");
}

#[test]
fn products_files_and_the_images_they_name_are_served_and_nothing_else() {
    let fixture = lxd();
    let lxd = &fixture.lxd;
    let unknown = refused(classify(lxd, &format!("/test/{PRODUCTS}")));
    assert_eq!(unknown.status, StatusCode::NOT_FOUND, "no index read yet");
    let item = |path: &str| json!({"ftype": "squashfs", "path": path, "sha256": SHA, "size": 7});
    adopt(
        lxd,
        json!({"a": item("server/noble/a.squashfs"), "b": item("server/noble/twin.squashfs"), "c": item("../../escaped/x")}),
    );

    let products = generation(classify(lxd, &format!("/test/{}", PRODUCTS.replace(':', "%3A"))));
    assert_eq!(products.serve, Member::Key(format!("lxd/test/{PRODUCTS}")), "colons, encoded or not");
    let file = cached(classify(lxd, "/test/server/noble/a.squashfs"));
    assert_eq!(file.key, format!("lxd/file/sha256/{SHA}"));
    assert_eq!((file.wanted.expected.sha256.as_deref(), file.wanted.expected.size), (Some(SHA), Some(7)));
    assert_eq!((file.class, file.asking.redirects), (Class::Immutable, Redirects::Followed));
    assert_eq!(file.origin.path, "/server/noble/a.squashfs");
    let twin = cached(classify(lxd, "/test/server/noble/twin.squashfs"));
    assert_eq!(twin.key, file.key, "one entry for the two names of one file");

    for path in ["/test/server/noble/other.squashfs", "/test/escaped/x", "/test/streams/v1/aws.json"] {
        assert_eq!(refused(classify(lxd, path)).status, StatusCode::NOT_FOUND, "{path}");
    }
    assert_eq!(refused(classify(lxd, "/test/server/../etc/passwd")).status, StatusCode::BAD_REQUEST);
    assert_eq!(refused(classify(lxd, "/nowhere/streams/v1/index.json")).status, StatusCode::NOT_FOUND);
}

#[test]
fn built_in_remotes_are_there_and_a_configured_one_takes_their_place() {
    let config = Config::new(&Options::default()).unwrap();
    assert_eq!(config.remote("ubuntu").unwrap().mirrors.urls(), ["https://cloud-images.ubuntu.com/releases"]);
    assert!(config.remote("craft-com.ubuntu.cloud-buildd-daily").is_some());
    let mirror = RemoteOptions { name: "ubuntu".into(), mirrors: vec!["http://mirror.lan/ubuntu/releases".into()] };
    let config = Config::new(&Options { remotes: vec![mirror], index_ttl: Some(Duration::from_secs(60)) }).unwrap();
    assert_eq!(config.remote("ubuntu").unwrap().mirrors.urls(), ["http://mirror.lan/ubuntu/releases"]);
    assert_eq!(config.trusted(), ["http://mirror.lan/ubuntu/releases"]);
    let bad = RemoteOptions { name: "a b".into(), mirrors: vec!["http://x".into()] };
    assert!(Config::new(&Options { remotes: vec![bad], index_ttl: None }).is_err());
}

#[test]
fn a_daemon_s_proxied_request_for_a_remote_s_host_is_served_as_the_remote_s_file() {
    let fixture = lxd();
    let lxd = &fixture.lxd;
    let forwarded = |host: &str, path: &str| {
        let headers = HeaderMap::new();
        let target = Target { scheme: "http".into(), host: host.into(), port: 80, raw_path: path.into() };
        let request = Request {
            method: &Method::GET,
            headers: &headers,
            mount: Mount::ForwardProxy,
            path,
            query: None,
            target: Some(&target),
            host: "p:3142",
            secure: false,
        };
        (lxd.claims(&target), lxd.classify(&request))
    };
    let (served, unknown) = forwarded("127.0.0.1", "/releases/server/noble/a.squashfs");
    assert!(served);
    assert_eq!(generation(unknown).serve, Member::DecidedAgain, "the index is read first to learn its sum");
    let item = json!({"ftype": "squashfs", "path": "server/noble/a.squashfs", "sha256": SHA, "size": 7});
    adopt(lxd, json!({"a": item}));
    let (_, known) = forwarded("127.0.0.1", "/releases/server/noble/a.squashfs");
    assert_eq!(cached(known).key, format!("lxd/file/sha256/{SHA}"));
    let (served, other) = forwarded("example.org", "/releases/server/noble/a.squashfs");
    assert!(!served);
    assert_eq!(refused(other).status, StatusCode::FORBIDDEN);
    assert!(lxd.tunnels_to("cloud-images.ubuntu.com") && !lxd.tunnels_to("example.org"));
}
