use super::*;
use crate::route::Mount;
use crate::LocatedHost;
use http::StatusCode;

fn side(config: &str) -> (Npm, tempfile::TempDir) {
    let dir = tempfile::tempdir().unwrap();
    let cache = Cache::open(dir.path(), Arc::new(pkgproxy_cache::SystemClock)).unwrap();
    let options: Options = toml::from_str(config).unwrap();
    (Npm::new(Config::new(&options).unwrap(), cache), dir)
}

fn classify(side: &Npm, method: &Method, path: &str, headers: &[(&'static str, &'static str)]) -> Decision {
    let mut map = HeaderMap::new();
    for (name, value) in headers {
        map.append(*name, HeaderValue::from_static(value));
    }
    let (path, query) = match path.split_once('?') {
        Some((path, query)) => (path, Some(query)),
        None => (path, None),
    };
    let request = Request {
        method,
        headers: &map,
        mount: Mount::Prefix("/npm"),
        path,
        query,
        target: None,
        host: "cache.lan:3142",
        secure: false,
    };
    side.classify(&request)
}

fn cached(decision: Decision) -> CachedRequest {
    match decision {
        Decision::Cache(request) => *request,
        other => panic!("not cached: {other:?}"),
    }
}

const CORP: &str = "[[registry]]\nname = \"corp\"\nmirrors = [\"https://corp.example/npm/\"]\n";

#[test]
fn every_spelling_of_a_name_is_one_key_per_form_and_registry() {
    let (npm, _dir) = side(CORP);
    let get = |path: &str, headers| cached(classify(&npm, &Method::GET, path, headers));
    for path in ["/@types%2fnode", "/@types%2Fnode", "/@types/node"] {
        let full = get(path, &[]);
        assert_eq!(full.key, "npm/npm/doc/@types/node/full", "{path}");
        assert_eq!(full.origin.path, "/@types%2fnode");
        assert_eq!(full.origin.instances, [DEFAULT_REGISTRY]);
        assert_eq!(full.class, Class::Revalidated);
        assert_eq!(full.wanted.fresh_for, DEFAULT_INDEX_TTL);
        assert_eq!(full.asking.headers[ACCEPT], "application/json");
    }
    let corgi = get(
        "/@types%2Fnode",
        &[("accept", "application/vnd.npm.install-v1+json; q=1.0, application/json; q=0.8, */*")],
    );
    assert_eq!(corgi.key, "npm/npm/doc/@types/node/abbreviated");
    assert!(corgi.asking.headers[ACCEPT].to_str().unwrap().starts_with(Form::ABBREVIATED));
    assert_eq!(corgi.reply.headers[VARY], "Accept, Accept-Encoding");
    let corp = get("/corp/left-pad", &[]);
    assert_eq!(
        (corp.key.as_str(), corp.origin.instances[0].as_str()),
        ("npm/corp/doc/left-pad/full", "https://corp.example/npm")
    );
    assert_eq!(corp.reply.rewrite.unwrap().served_at.base, "http://cache.lan:3142/npm/corp");
    let version = get("/left-pad/1.3.0", &[]);
    assert_eq!((version.key.as_str(), version.wanted.fresh_for), ("npm/npm/version/left-pad/1.3.0", VERSION_TTL));
    assert_eq!(get("/left-pad/latest", &[]).wanted.fresh_for, DEFAULT_INDEX_TTL, "a tag moves");
    let tarball = get("/@s%2fn/-/n-1.0.0.tgz", &[]);
    assert_eq!((tarball.key.as_str(), tarball.class), ("npm/npm/tarball/@s/n/n-1.0.0.tgz", Class::Immutable));
    assert_eq!(tarball.origin.path, "/@s/n/-/n-1.0.0.tgz");
}

#[test]
fn a_held_full_document_answers_for_the_abbreviated_one() {
    let (npm, _dir) = side("");
    let corgi = [("accept", "application/vnd.npm.install-v1+json")];
    npm.cache.put("npm/npm/doc/a/full", b"{\"versions\":{}}", vec![], Class::Revalidated).unwrap();
    assert_eq!(cached(classify(&npm, &Method::GET, "/a", &corgi)).key, "npm/npm/doc/a/full");
    npm.cache.put("npm/npm/doc/a/abbreviated", b"{\"versions\":{}}", vec![], Class::Revalidated).unwrap();
    assert_eq!(cached(classify(&npm, &Method::GET, "/a", &corgi)).key, "npm/npm/doc/a/abbreviated");
}

#[test]
fn npm_s_own_requests_keep_the_registry_s_links_unless_told_always() {
    let (npm, _dir) = side("");
    let rewrite = |npm: &Npm, headers| cached(classify(npm, &Method::GET, "/a", headers)).reply.rewrite.unwrap();
    assert!(rewrite(&npm, &[("npm-command", "install")]).client_rehomes);
    assert!(!rewrite(&npm, &[("user-agent", "pnpm/10")]).client_rehomes);
    let (always, _dir) = side("tarball_urls = \"always\"\n");
    assert!(!rewrite(&always, &[("npm-command", "install")]).client_rehomes);
}

#[test]
fn the_api_publishing_and_reads_for_writing_are_passed_on_with_the_client_s_token() {
    let (npm, _dir) = side(CORP);
    let token = [("authorization", "Bearer s3cret")];
    for (method, path) in [
        (Method::POST, "/-/npm/v1/security/advisories/bulk"),
        (Method::GET, "/-/v1/search?text=x"),
        (Method::PUT, "/@s%2fn"),
        (Method::GET, "/@s%2fn?write=true"),
        (Method::DELETE, "/corp/x/-rev/1-a"),
    ] {
        let Decision::Forward(forward) = classify(&npm, &method, path, &token) else { panic!("{path}") };
        assert_eq!(forward.method, method);
        assert_eq!(forward.headers["authorization"], "Bearer s3cret", "{path}");
        assert!(!forward.origin.path.starts_with("/corp"), "{path}: below its registry");
    }
}

#[test]
fn what_a_token_brings_is_kept_apart_and_read_only_by_clients_the_registry_accepts() {
    let (npm, _dir) = side("");
    let private = cached(classify(&npm, &Method::GET, "/@corp%2fsecret", &[("authorization", "Bearer t")]));
    assert_eq!(private.key, "npm/npm/private/doc/@corp/secret/full");
    assert!(matches!(private.asking.auth, UpstreamAuth::Client(_)));
    assert!(private.access.is_some());
    assert!(!npm.readable_by_anyone(&private.key));
    assert_eq!(npm.client_url(&private.key), None, "never in a bundle");
    let shared = cached(classify(&npm, &Method::GET, "/@corp%2fsecret", &[]));
    assert!(shared.access.is_none() && npm.readable_by_anyone(&shared.key));
}

#[test]
fn a_token_s_grant_names_the_package_and_a_tarball_s_is_its_package_s() {
    let (npm, _dir) = side("");
    let token = [("authorization", "Bearer t")];
    let grant = |path: &str| cached(classify(&npm, &Method::GET, path, &token)).access.unwrap();
    let document = grant("/@corp%2fsecret");
    assert!(document.grant.contains("@corp/secret") && !document.grant.contains("Bearer"), "{}", document.grant);
    assert_eq!(grant("/@corp/secret/-/secret-1.0.0.tgz").grant, document.grant);
    assert_eq!(grant("/@corp%2Fsecret/1.0.0").grant, document.grant);
    assert_ne!(grant("/is-number").grant, document.grant, "another package, another grant");
    let tarball = grant("/@corp/secret/-/secret-1.0.0.tgz");
    assert_eq!(tarball.confirmed_at.unwrap().path, "/@corp%2fsecret", "confirmed with the package's document");
}

#[test]
fn a_refusal_of_a_client_s_token_is_not_remembered_for_others() {
    let (npm, _dir) = side("");
    let now = std::time::Instant::now();
    let not_found = Arc::new(PassedAnswer { status: StatusCode::NOT_FOUND, headers: vec![], body: Bytes::new() });
    let with_token = cached(classify(&npm, &Method::GET, "/@corp%2fsecret", &[("authorization", "Bearer mallory")]));
    npm.remember(&with_token, &not_found, now);
    let with_another = cached(classify(&npm, &Method::GET, "/@corp%2fsecret", &[("authorization", "Bearer alice")]));
    assert!(npm.remembered(&with_another, now, false).is_none());
    let anonymous = cached(classify(&npm, &Method::GET, "/no-such", &[]));
    npm.remember(&anonymous, &not_found, now);
    assert!(npm.remembered(&anonymous, now, false).is_some(), "an anonymous absence is");
}

#[test]
fn a_tarball_on_a_configured_mirror_s_host_goes_with_its_credentials_and_one_elsewhere_with_none() {
    let (npm, _dir) = side("[[registry]]\nname = \"corp\"\nmirrors = [\"http://u:TOKEN@127.0.0.1:9/repo\"]\n");
    let document = r#"{"name":"a","versions":{
        "1.0.0":{"dist":{"tarball":"http://127.0.0.1:9/repo/a/-/a-1.0.0.tgz","shasum":"0000000000000000000000000000000000000001"}},
        "1.1.0":{"dist":{"tarball":"http://127.0.0.1:9/files/a-1.1.0.tgz","shasum":"0000000000000000000000000000000000000002"}},
        "1.2.0":{"dist":{"tarball":"http://127.0.0.1:10/a/-/a-1.2.0.tgz","shasum":"0000000000000000000000000000000000000003"}}}}"#;
    npm.cache.put("npm/corp/doc/a/full", document.as_bytes(), vec![], Class::Revalidated).unwrap();
    let located = |version: &str| {
        let request = cached(classify(&npm, &Method::GET, &format!("/corp/a/-/a-{version}.tgz"), &[]));
        assert!(npm.prerequisites(&request).is_empty(), "the held document says");
        npm.located(&request, &[]).unwrap()
    };
    let below = located("1.0.0");
    assert_eq!(below.origin.pool, "npm corp", "the registry's own pool, its credentials with it");
    assert_eq!((below.origin.path.as_str(), below.host), ("/a/-/a-1.0.0.tgz", LocatedHost::Registry));
    let beside = located("1.1.0");
    assert_eq!(beside.origin.instances, ["http://u:TOKEN@127.0.0.1:9"], "that instance's credentials");
    assert_eq!((beside.origin.path.as_str(), beside.host), ("/files/a-1.1.0.tgz", LocatedHost::Registry));
    let elsewhere = located("1.2.0");
    assert_eq!((elsewhere.origin.instances[0].as_str(), elsewhere.host), ("http://127.0.0.1:10", LocatedHost::Foreign));
}

const DOCUMENT: &str = r#"{"name":"a","time":{"modified":"2024-01-01T00:00:00.000Z"},"versions":{"1.0.0":{"dist":{"tarball":"https://registry.npmjs.org/a/-/a-1.0.0.tgz","shasum":"0000000000000000000000000000000000000001"}},"1.1.0":{"dist":{"tarball":"https://cdn.example/a/-/a-1.1.0.tgz","shasum":"0000000000000000000000000000000000000002"}}}}"#;

#[test]
fn a_tarball_is_checked_against_the_held_document_or_else_its_version_s_own() {
    let (npm, _dir) = side("mirrors = [\"http://127.0.0.1:9/\"]\n");
    npm.cache.put("npm/npm/doc/a/full", DOCUMENT.as_bytes(), vec![], Class::Revalidated).unwrap();
    let listed = cached(classify(&npm, &Method::GET, "/a/-/a-1.0.0.tgz", &[]));
    assert!(npm.prerequisites(&listed).is_empty(), "the held document says");
    let located = npm.located(&listed, &[]).unwrap();
    let origin = &located.origin;
    assert_eq!((origin.instances[0].as_str(), origin.path.as_str()), ("http://127.0.0.1:9", "/a/-/a-1.0.0.tgz"));
    assert_eq!(located.host, LocatedHost::Registry, "the npm registry's canonical host is its own");
    let on_cdn = cached(classify(&npm, &Method::GET, "/a/-/a-1.1.0.tgz", &[]));
    assert!(npm.prerequisites(&on_cdn).is_empty());
    let located = npm.located(&on_cdn, &[]).unwrap();
    assert_eq!(
        (located.origin.instances.as_slice(), located.host),
        (&["https://cdn.example".to_owned()][..], LocatedHost::Foreign)
    );

    let new = cached(classify(&npm, &Method::GET, "/a/-/a-2.0.0.tgz", &[]));
    let prerequisites = npm.prerequisites(&new);
    assert_eq!(prerequisites.len(), 1);
    assert_eq!(prerequisites[0].key, "npm/npm/version/a/2.0.0");
    assert_eq!(prerequisites[0].origin.path, "/a/2.0.0");
    let version = Bytes::from_static(br#"{"name":"a","version":"2.0.0","dist":{"tarball":"http://127.0.0.1:9/a/-/a-2.0.0.tgz","shasum":"0000000000000000000000000000000000000003"}}"#);
    assert_eq!(npm.located(&new, std::slice::from_ref(&version)).unwrap().origin.path, "/a/-/a-2.0.0.tgz");
    assert!(npm.verifier(&new, &[version]).is_some());
    let document = cached(classify(&npm, &Method::GET, "/a", &[]));
    assert_eq!(document.wanted.fresh_for, Duration::ZERO, "the held document is asked again: the version is new");
    assert_eq!(cached(classify(&npm, &Method::GET, "/a", &[])).wanted.fresh_for, DEFAULT_INDEX_TTL, "once");
}

#[test]
fn a_failure_is_told_in_npm_s_shape() {
    let (npm, _dir) = side("");
    let answer = npm.failure_answer(&Failure::Offline);
    assert_eq!(answer.status, StatusCode::FAILED_DEPENDENCY);
    assert!(answer.reason.unwrap().contains("pkgproxy"));
    let body: serde_json::Value = serde_json::from_slice(&answer.body).unwrap();
    assert!(body["error"].as_str().unwrap().contains("offline"), "{body}");
}

#[test]
fn a_registry_name_must_be_plain_and_once() {
    for bad in ["name = \"npm\"", "name = \"packed\"", "name = \"-\"", "name = \"A\"", "name = \"x/y\""] {
        let options: Options = toml::from_str(&format!("[[registry]]\n{bad}\nmirrors = [\"https://x/\"]\n")).unwrap();
        assert!(Config::new(&options).is_err(), "{bad}");
    }
}

#[test]
fn a_registry_s_url_is_served_below_the_registry_it_is_deepest_below() {
    let (side, _dir) = side(CORP);
    let config = side.config();
    let at = |url: &str| config.upstream_path(url);
    assert_eq!(at("https://registry.npmjs.org/ms/-/ms-2.1.3.tgz").as_deref(), Some("/npm/ms/-/ms-2.1.3.tgz"));
    assert_eq!(at("https://registry.yarnpkg.com/@types/node").as_deref(), Some("/npm/@types/node"));
    assert_eq!(at("https://corp.example/npm/@corp/ui").as_deref(), Some("/npm/corp/@corp/ui"));
    assert_eq!(at("https://corp.example/other/ui"), None);
    assert_eq!(at("https://user:pw@registry.npmjs.org/ms"), None);
}

#[test]
fn a_release_is_judged_by_its_tarball_as_a_client_asks_for_it() {
    use crate::role::{Gated, Gating};
    let (npm, _dir) = side(CORP);
    let asked = cached(classify(&npm, &Method::GET, "/@types/node/-/node-22.0.0.tgz", &[]));
    let named = npm.release_request("@types/node", "22.0.0").expect("a tarball");
    assert_eq!((named.key.as_str(), named.origin.path.as_str()), (asked.key.as_str(), asked.origin.path.as_str()));
    let Some(Gated::Artifact { release, .. }) = npm.gated(&named) else { panic!("an artifact") };
    assert_eq!((release.name.as_str(), release.version.as_str()), ("@types/node", "22.0.0"));
    assert!(npm.release_request("@types/node", "latest").is_none(), "a dist-tag is no release");
    assert!(npm.release_request("not a name", "1.0.0").is_none());
}
