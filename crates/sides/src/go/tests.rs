//! How go requests are classified.

use super::*;

fn side() -> Config {
    Config::new(&Options { proxies: vec!["http://127.0.0.1:8001/".into()], ..Options::default() }).unwrap()
}

fn cached(path: &str) -> CachedRequest {
    match side().classify(path) {
        Decision::Cache(request) => *request,
        other => panic!("{path}: not cached: {other:?}"),
    }
}

fn refused(path: &str) -> http::StatusCode {
    match side().classify(path) {
        Decision::Refuse(refusal) => refusal.status,
        other => panic!("{path}: not refused: {other:?}"),
    }
}

#[test]
fn every_spelling_of_a_module_has_one_key() {
    let keys: Vec<String> = [
        "/example.com/!hello!caps/@v/v0.1.0.zip",
        "/example.com/%21hello%21caps/@v/v0.1.0.zip",
        "/example.com/%21hello%21CAPS/@v/v0.1.0.zip".replace("CAPS", "caps").as_str(),
    ]
    .iter()
    .map(|p| cached(p).key)
    .collect();
    assert!(keys.iter().all(|k| k == "go/example.com/!hello!caps/@v/v0.1.0.zip"), "{keys:?}");
    let request = cached("/example.com/%21hello%21caps/@v/v0.1.0.zip");
    assert_eq!(request.origin.path, "/example.com/!hello!caps/@v/v0.1.0.zip");
    assert_eq!(request.origin.instances, ["http://127.0.0.1:8001"]);
    assert_eq!(request.class, Class::Immutable);
}

#[test]
fn lists_and_latest_are_revalidated_versions_are_not() {
    assert_eq!(cached("/example.com/hello/@v/list").class, Class::Revalidated);
    assert_eq!(cached("/example.com/hello/@latest").class, Class::Revalidated);
    assert_eq!(cached("/example.com/hello/@v/v1.0.0.info").class, Class::Immutable);
    assert_eq!(cached("/example.com/hello/@v/v1.0.0.mod").class, Class::Immutable);
    assert_eq!(cached("/sumdb/sum.golang.org/supported").class, Class::Revalidated);
    assert_eq!(cached("/sumdb/sum.golang.org/latest").class, Class::Revalidated);
    assert_eq!(cached("/sumdb/sum.golang.org/tile/8/0/x001/234.p/5").class, Class::Immutable);
    let lookup = cached("/sumdb/sum.golang.org/lookup/example.com/%21hello@v1.0.0");
    assert_eq!(lookup.key, "go/sumdb/sum.golang.org/lookup/example.com/!hello@v1.0.0");
    assert_eq!(lookup.class, Class::Immutable);
}

#[test]
fn malformed_or_foreign_paths_are_refused() {
    assert_eq!(refused("/example.com/Hello/@v/list"), 400, "upper case must be escaped");
    assert_eq!(refused("/example.com/hello/@v/1.0.0.zip"), 400);
    assert_eq!(refused("/example.com/hello/@v/v1.0.0.tar"), 404);
    assert_eq!(refused("/example.com/hello"), 404);
    assert_eq!(refused("/example.com/../etc/@v/list"), 400);
    assert_eq!(refused("/sumdb/evil.example.com/supported"), 404);
    assert_eq!(refused("/sumdb/sum.golang.org/tile/../x"), 400);
    assert_eq!(refused("/"), 404);
}

#[test]
fn zips_and_mods_know_their_module_and_lookup() {
    let side = side();
    let zip = cached("/example.com/!hello/@v/v1.0.0.zip");
    assert_eq!(Config::file_of(&zip), Some(("example.com/Hello".into(), GoFile::Zip("v1.0.0".into()))));
    assert_eq!(side.lookup_for(&zip).unwrap().key, "go/sumdb/sum.golang.org/lookup/example.com/!hello@v1.0.0");
    assert!(side.verifier(&zip, Sums::default()).is_some());
    let info = cached("/example.com/hello/@v/v1.0.0.info");
    assert!(side.lookup_for(&info).is_none());
    let off = Config::new(&Options { sumdb: Some("off".into()), ..Options::default() }).unwrap();
    assert!(off.lookup_for(&zip).is_none());
}

#[test]
fn bad_configuration_names_the_key() {
    let bad = |config: Options| Config::new(&config).unwrap_err().to_string();
    assert!(bad(Options { proxies: vec!["ftp://x".into()], ..Options::default() }).starts_with("go.proxies"));
    assert!(bad(Options { sumdb: Some("not a name".into()), ..Options::default() }).starts_with("go.sumdb"));
    assert_eq!(Config::new(&Options::default()).unwrap().proxies(), [DEFAULT_PROXY]);
}

#[test]
fn an_upstream_s_url_is_served_below_go_and_its_checksum_database_below_sumdb() {
    let config = side();
    let at = |url: &str| config.upstream_path(url);
    assert_eq!(at("http://127.0.0.1:8001/example.com/m/@v/list").as_deref(), Some("/go/example.com/m/@v/list"));
    assert_eq!(
        at("https://proxy.golang.org/example.com/m/@v/v1.0.0.zip").as_deref(),
        Some("/go/example.com/m/@v/v1.0.0.zip")
    );
    assert_eq!(
        at("https://sum.golang.org/lookup/example.com/m@v1.0.0").as_deref(),
        Some("/go/sumdb/sum.golang.org/lookup/example.com/m@v1.0.0")
    );
    assert_eq!(at("https://proxy.example/example.com/m/@v/list"), None);
    assert_eq!(at("http://127.0.0.1:8002/example.com/m/@v/list"), None);
}

#[test]
fn a_release_is_named_by_its_info_and_judged_as_an_artifact_of_it() {
    use crate::role::{Gated, Gating};
    let go = super::Go::new(side());
    let request = go.release_request("example.com/Hello", "v1.2.0").expect("a request");
    let Some(Gated::Artifact { release, times_from }) = go.gated(&request) else { panic!("{request:?}") };
    assert_eq!((release.name.as_str(), release.version.as_str()), ("example.com/Hello", "v1.2.0"));
    assert!(times_from.key.ends_with("example.com/!hello/@v/v1.2.0.info"), "{}", times_from.key);
    assert!(go.release_request("not a module", "v1.0.0").is_none());
}
