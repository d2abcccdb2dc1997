use super::*;
use crate::route::Mount;

fn side(config: &str) -> (Cargo, tempfile::TempDir) {
    let dir = tempfile::tempdir().unwrap();
    let cache = Cache::open(dir.path(), Arc::new(pkgproxy_cache::SystemClock)).unwrap();
    let options: Options = toml::from_str(config).unwrap();
    (Cargo::new(Config::new(&options).unwrap(), cache), dir)
}

fn classify(side: &Cargo, method: &Method, path: &str, headers: &http::HeaderMap) -> Decision {
    let request = Request {
        method,
        headers,
        mount: Mount::Prefix("/cargo"),
        path,
        query: None,
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

fn refused(decision: Decision) -> StatusCode {
    match decision {
        Decision::Refuse(refusal) => refusal.status,
        other => panic!("not refused: {other:?}"),
    }
}

const SHA: &str = "4a5f13b858c8d314ee3e8f639011f7ccefe71f97f96e50151fb991f267928e2c";

#[test]
fn each_path_is_one_key_of_its_registry_and_its_index_in_lower_case() {
    let (cargo, _dir) = side("[[registry]]\nname = \"corp\"\nindex = [\"https://corp.example/index/\"]\n");
    let none = http::HeaderMap::new();
    let get = |path: &str| cached(classify(&cargo, &Method::GET, path, &none));
    let config = get("/index/config.json");
    assert_eq!(config.key, "cargo/crates-io/config.json");
    assert_eq!(config.origin.instances, ["https://index.crates.io"]);
    assert!(config.reply.fallback.is_some(), "pkgproxy can write it itself");
    let file = get("/index/SE/RD/Serde_Json");
    assert_eq!(file.key, "cargo/crates-io/index/se/rd/serde_json");
    assert_eq!(file.origin.path, "/se/rd/serde_json");
    assert_eq!(file.reply.etag, Etag::Content);
    assert_eq!(file.wanted.fresh_for, DEFAULT_INDEX_TTL);
    let corp = get("/corp/index/3/s/syn");
    assert_eq!(corp.key, "cargo/corp/index/3/s/syn");
    assert_eq!(corp.origin.instances, ["https://corp.example/index"]);
    let krate = get(&format!("/crates/Serde/1.0.0/{}", SHA.to_uppercase()));
    assert_eq!(krate.key, format!("cargo/crates-io/crates/Serde/1.0.0/{SHA}"));
    assert_eq!(krate.wanted.expected.sha256.as_deref(), Some(SHA));
    assert_eq!(krate.class, Class::Immutable);
}

#[test]
fn what_is_not_a_registry_path_is_refused() {
    let (cargo, _dir) = side("");
    let none = http::HeaderMap::new();
    let status = |path: &str| refused(classify(&cargo, &Method::GET, path, &none));
    assert_eq!(status("/index/se/rd/other"), StatusCode::NOT_FOUND);
    assert_eq!(status("/index/"), StatusCode::NOT_FOUND);
    assert_eq!(status("/nope/index/config.json"), StatusCode::NOT_FOUND);
    assert_eq!(status("/crates/serde/1.0.0"), StatusCode::NOT_FOUND);
    assert_eq!(status("/crates/serde/1.0.0/abc"), StatusCode::BAD_REQUEST);
    assert_eq!(status(&format!("/crates/se%20rde/1.0.0/{SHA}")), StatusCode::BAD_REQUEST);
    assert_eq!(status("/index/../config.json"), StatusCode::BAD_REQUEST);
    let post = refused(classify(&cargo, &Method::POST, "/index/config.json", &none));
    assert_eq!(post, StatusCode::METHOD_NOT_ALLOWED);
}

#[test]
fn a_client_s_credentials_go_upstream_and_its_access_is_confirmed() {
    let (cargo, _dir) = side("");
    let mut headers = http::HeaderMap::new();
    headers.insert(http::header::AUTHORIZATION, http::HeaderValue::from_static("Bearer one"));
    let file = cached(classify(&cargo, &Method::GET, "/index/it/oa/itoa", &headers));
    assert!(matches!(file.asking.auth, UpstreamAuth::Client(_)));
    let access = file.access.expect("confirmed per client");
    assert!(access.grant.starts_with("cargo crates-io ") && !access.grant.contains("Bearer"));
    let anonymous = cached(classify(&cargo, &Method::GET, "/index/it/oa/itoa", &http::HeaderMap::new()));
    assert!(anonymous.access.is_none(), "crates.io asks for none");
}

#[test]
fn what_a_client_s_credentials_bring_is_kept_apart_and_granted_per_crate() {
    let (cargo, _dir) = side("[[registry]]\nname = \"corp\"\nindex = [\"https://corp.example/index/\"]\n");
    let mut token = http::HeaderMap::new();
    token.insert(http::header::AUTHORIZATION, http::HeaderValue::from_static("Bearer corp-token"));
    let with_token = |path: &str| cached(classify(&cargo, &Method::GET, path, &token));
    let file = with_token("/corp/index/in/te/internal-tool");
    assert_eq!(file.key, "cargo/corp/private/index/in/te/internal-tool");
    let krate = with_token(&format!("/corp/crates/Internal-Tool/1.0.0/{SHA}"));
    assert_eq!(krate.key, format!("cargo/corp/private/crates/Internal-Tool/1.0.0/{SHA}"));
    let (file_access, crate_access) = (file.access.clone().unwrap(), krate.access.clone().unwrap());
    assert_eq!(file_access.grant, crate_access.grant, "a crate's grant is its index file's");
    assert!(file_access.grant.contains("internal-tool") && !file_access.grant.contains("Bearer"));
    assert_eq!(crate_access.confirmed_at.unwrap().path, "/in/te/internal-tool", "confirmed with its index file");
    let other = with_token("/corp/index/ot/he/other");
    assert_ne!(other.access.unwrap().grant, file_access.grant, "another crate, another grant");
    for key in [&file.key, &krate.key] {
        assert!(!cargo.readable_by_anyone(key), "{key}: never to peers or bundles");
        assert_eq!(cargo.client_url(key), None, "{key}");
    }
    let none = http::HeaderMap::new();
    let anonymous = cached(classify(&cargo, &Method::GET, "/corp/index/in/te/internal-tool", &none));
    assert_eq!(anonymous.key, "cargo/corp/index/in/te/internal-tool", "a client without credentials never reads it");
    assert!(cargo.readable_by_anyone(&anonymous.key));
    let prerequisites = cargo.prerequisites(&krate);
    assert_eq!(prerequisites[0].key, "cargo/corp/private/config.json", "its prerequisites in its own space");
}

#[test]
fn a_crate_on_an_index_instance_s_host_goes_with_that_instance_s_credentials_and_elsewhere_with_none() {
    let (cargo, _dir) = side("[[registry]]\nname = \"corp\"\nindex = [\"http://u:TOKEN@127.0.0.1:9/index/\"]\n");
    let krate =
        cached(classify(&cargo, &Method::GET, &format!("/corp/crates/tool/1.0.0/{SHA}"), &http::HeaderMap::new()));
    let located = |dl: &str| {
        let config = Bytes::from(format!("{{\"dl\":\"{dl}\"}}"));
        cargo.located(&krate, &[config]).unwrap().origin
    };
    let beside = located("http://127.0.0.1:9/dl");
    assert_eq!(
        (beside.instances[0].as_str(), beside.path.as_str()),
        ("http://u:TOKEN@127.0.0.1:9", "/dl/tool/1.0.0/download")
    );
    assert_eq!(located("http://127.0.0.1:10/dl").instances, ["http://127.0.0.1:10"], "another port: none");
}

#[test]
fn registries_are_named_once_and_not_as_paths_pkgproxy_serves() {
    let bad = |config: &str| Config::new(&toml::from_str::<Options>(config).unwrap()).unwrap_err().key;
    assert_eq!(bad("[[registry]]\nname = \"index\"\nindex = [\"https://x/\"]\n"), "registry.name");
    assert_eq!(bad("[[registry]]\nname = \"Corp\"\nindex = [\"https://x/\"]\n"), "registry.name");
    let twice =
        "[[registry]]\nname = \"a\"\nindex = [\"https://x/\"]\n[[registry]]\nname = \"a\"\nindex = [\"https://y/\"]\n";
    assert_eq!(bad(twice), "registry.name");
    assert_eq!(bad("[[registry]]\nname = \"a\"\nindex = []\n"), "registry.a.index");
}

#[test]
fn a_registry_s_no_such_crate_is_remembered_a_minute_for_index_files_only() {
    use std::time::{Duration, Instant};
    let (cargo, _dir) = side("");
    let none = http::HeaderMap::new();
    let file = cached(classify(&cargo, &Method::GET, "/index/no/ne/nonesuch", &none));
    let answer = Arc::new(PassedAnswer { status: StatusCode::NOT_FOUND, headers: Vec::new(), body: Bytes::new() });
    let now = Instant::now();
    cargo.remember(&file, &answer, now);
    assert!(cargo.remembered(&file, now + Duration::from_secs(59), false).is_some());
    assert!(
        cargo.remembered(&file, now + Duration::from_secs(61), false).is_none(),
        "a crate published since is found"
    );
    let krate = cached(classify(&cargo, &Method::GET, &format!("/crates/nonesuch/1.0.0/{SHA}"), &none));
    cargo.remember(&krate, &answer, now);
    assert!(cargo.remembered(&krate, now, false).is_none(), "a crate's URL is the registry's to say each time");
    let unavailable =
        Arc::new(PassedAnswer { status: StatusCode::SERVICE_UNAVAILABLE, headers: Vec::new(), body: Bytes::new() });
    let other = cached(classify(&cargo, &Method::GET, "/index/ot/he/other", &none));
    cargo.remember(&other, &unavailable, now);
    assert!(cargo.remembered(&other, now, false).is_none(), "only a no such crate");
}

#[test]
fn an_index_s_url_is_served_below_its_registry_and_a_crates_io_download_is_named() {
    let (side, _dir) = side("index = [\"https://mirror.example/crates\"]\n[[registry]]\nname = \"corp\"\nindex = [\"https://corp.example/index/\"]\n");
    let config = side.config();
    let at = |url: &str| config.index_file_at(url);
    assert_eq!(at("https://index.crates.io/3/s/syn").as_deref(), Some("/index/3/s/syn"));
    assert_eq!(at("https://mirror.example/crates/config.json").as_deref(), Some("/index/config.json"));
    assert_eq!(at("https://corp.example/index/it/oa/itoa").as_deref(), Some("/corp/index/it/oa/itoa"));
    assert_eq!(at("https://elsewhere.example/3/s/syn"), None);

    assert_eq!(crates_io_download("https://static.crates.io/crates/itoa/itoa-1.0.0.crate"), Some(("itoa", "1.0.0")));
    assert_eq!(crates_io_download("https://static.crates.io/crates/itoa/1.0.0/download"), Some(("itoa", "1.0.0")));
    for url in [
        "https://static.crates.io/crates/itoa/syn-1.0.0.crate",
        "https://static.crates.io/crates/itoa/1.0.0/other",
        "https://static.crates.io/crates/itoa",
        "https://static.crates.io/other/itoa/itoa-1.0.0.crate",
    ] {
        assert_eq!(crates_io_download(url), None, "{url}");
    }

    let file = format!(
        "{{\"name\":\"itoa\",\"vers\":\"1.0.0\",\"cksum\":\"{}\"}}\n{{\"name\":\"itoa\",\"vers\":\"1.0.1\",\"cksum\":\"{SHA}\"}}\n",
        SHA.to_ascii_uppercase().replace('4', "5")
    );
    assert_eq!(index::checksum(file.as_bytes(), "1.0.1").as_deref(), Some(SHA));
    assert_eq!(index::checksum(file.as_bytes(), "1.0.2"), None);
    assert_eq!(index::checksum(b"{\"vers\":\"1.0.0\",\"cksum\":\"short\"}", "1.0.0"), None);
}

#[test]
fn crates_are_timed_by_their_index_file_and_index_files_are_listings_unless_the_registry_is_exempt() {
    use crate::role::{Gated, ReleaseName};
    let exempt = "[[registry]]\nname = \"corp\"\nindex = [\"https://corp.example/index/\"]\npolicy = false\n";
    let (cargo, _dir) = side(exempt);
    let none = http::HeaderMap::new();
    let get = |path: &str| cached(classify(&cargo, &Method::GET, path, &none));
    let gating = cargo.roles().gating.expect("the side is judged by the policy");
    let Some(Gated::Artifact { release, times_from }) = gating.gated(&get(&format!("/crates/Serde/1.0.0/{SHA}")))
    else {
        panic!("a crate is a release's")
    };
    assert_eq!(release, ReleaseName { name: "serde".into(), version: "1.0.0".into(), timed_as: "1.0.0".into() });
    assert_eq!(times_from.key, "cargo/crates-io/index/se/rd/serde", "timed by its index file");
    assert!(matches!(gating.gated(&get("/index/se/rd/serde")), Some(Gated::Listing)));
    assert!(gating.gated(&get("/index/config.json")).is_none(), "config.json names no release");
    assert!(gating.gated(&get("/corp/index/3/s/syn")).is_none(), "policy = false");
    assert!(gating.gated(&get(&format!("/corp/crates/syn/2.0.0/{SHA}"))).is_none(), "policy = false");
}

#[test]
fn a_release_is_named_by_its_crate_and_judged_as_an_artifact_timed_by_its_index_file() {
    use crate::role::{Gated, Gating};
    let (cargo, _dir) = side("");
    let request = cargo.release_request("Serde", "1.0.228").expect("a request");
    let Some(Gated::Artifact { release, times_from }) = cargo.gated(&request) else { panic!("{request:?}") };
    assert_eq!((release.name.as_str(), release.version.as_str()), ("serde", "1.0.228"));
    assert!(times_from.key.ends_with("index/se/rd/serde"), "{}", times_from.key);
    assert!(cargo.release_request("no/slash", "1.0.0").is_none());
}
