//! The fake npm registry is one the real clients take: npm, pnpm, yarn 1
//! and yarn 4 (as `test.sh` installs them) resolve a dependency chain with
//! a scoped package and a version published before npm 5 from it, check its
//! hashes, install it, and install it again from their lockfiles; each asks
//! in its own way, which the fake's log shows. Its answers and faults are
//! also read here directly, as a proxy would see them.

use std::time::Duration;

use pkgproxy_testkit::client::{send, Answer};
use pkgproxy_testkit::npm::{project_with_dependencies, ABBREVIATED};
use pkgproxy_testkit::{FakeNpm, NodeClient, NodeSandbox, NpmPackage, PathClass, RecordedRequest, TarballHost};
use serde_json::Value;

/// The packages a project depending on `a` installs, and their versions.
const INSTALLED: [(&str, &str); 4] = [("a", "1.0.0"), ("b", "1.0.0"), ("@corp/c", "2.0.0"), ("old", "0.1.0")];

/// Installs `a` with `client` from `fake`, checks all four landed, and
/// returns the sandbox (its lockfile written).
fn install_a(client: NodeClient, fake: &FakeNpm) -> NodeSandbox {
    let sandbox = NodeSandbox::new(client, &[("a", "^1.0.0")]);
    let run = sandbox.install(&fake.url());
    assert!(run.success, "{} install: {}", client.as_str(), run.output);
    for (name, version) in INSTALLED {
        assert_eq!(sandbox.installed(name).as_deref(), Some(version), "{name} by {}: {}", client.as_str(), run.output);
    }
    assert!(sandbox.lockfile().exists(), "{} wrote {}", client.as_str(), client.lockfile());
    sandbox
}

/// Forgets what `sandbox` installed and downloaded, installs again from
/// its lockfile, and checks all four landed.
fn install_again_from_the_lockfile(sandbox: &NodeSandbox, client: NodeClient, fake: &FakeNpm) {
    fake.clear_requests();
    sandbox.forget();
    let run = sandbox.install_locked(&fake.url());
    assert!(run.success, "{} locked install: {}", client.as_str(), run.output);
    for (name, version) in INSTALLED {
        assert_eq!(sandbox.installed(name).as_deref(), Some(version), "{name} by {}: {}", client.as_str(), run.output);
    }
    assert_eq!(fake.requests_of(PathClass::Tarball).len(), 4, "{:#?}", fake.requests());
}

fn paths(requests: &[RecordedRequest]) -> Vec<&str> {
    requests.iter().map(|request| request.path.as_str()).collect()
}

#[tokio::test(flavor = "multi_thread")]
async fn npm_installs_a_chain_reading_full_documents_and_again_from_its_lock_reading_tarballs_only() {
    let fake = FakeNpm::start(&project_with_dependencies()).await;
    let sandbox = install_a(NodeClient::Npm, &fake);
    let documents = fake.requests_of(PathClass::Document);
    assert!(paths(&documents).contains(&"/@corp%2fc"), "{:#?}", fake.requests());
    for request in &documents {
        assert_eq!(request.header("accept"), Some("application/json"), "npm 11 reads full documents");
        assert_eq!(request.header("npm-command"), Some("install"));
        assert!(request.header("user-agent").unwrap_or_default().starts_with("npm/"));
    }
    assert_eq!(paths(&fake.requests_of(PathClass::Tarball)).len(), 4);
    let lock: Value = serde_json::from_slice(&std::fs::read(sandbox.lockfile()).unwrap()).unwrap();
    let old = &lock["packages"]["node_modules/old"];
    assert_eq!(
        old["integrity"].as_str(),
        Some(NpmPackage::new("old", "0.1.0", &[]).old_style().recorded_integrity().as_str())
    );
    let scoped = &lock["packages"]["node_modules/@corp/c"]["resolved"];
    assert_eq!(scoped.as_str(), Some(format!("{}/@corp/c/-/c-2.0.0.tgz", fake.url()).as_str()));

    install_again_from_the_lockfile(&sandbox, NodeClient::Npm, &fake);
    assert_eq!(fake.requests_of(PathClass::Document).len(), 0, "npm ci reads the lock: {:#?}", fake.requests());
}

#[tokio::test(flavor = "multi_thread")]
async fn pnpm_installs_the_same_reading_abbreviated_documents_its_scopes_encoded_upper_case() {
    let fake = FakeNpm::start(&project_with_dependencies()).await;
    let sandbox = install_a(NodeClient::Pnpm, &fake);
    let documents = fake.requests_of(PathClass::Document);
    assert!(paths(&documents).contains(&"/@corp%2Fc"), "{:#?}", fake.requests());
    assert!(documents.iter().all(|request| request.header("accept").unwrap_or_default().starts_with(ABBREVIATED)));
    assert_eq!(fake.count("/pnpm"), 0, "no update check: {:#?}", fake.requests());
    let lock = std::fs::read_to_string(sandbox.lockfile()).unwrap();
    assert!(lock.contains("old@0.1.0:\n    resolution: {integrity: sha1-"), "{lock}");

    install_again_from_the_lockfile(&sandbox, NodeClient::Pnpm, &fake);
    // pnpm checks a lockfile against its supply-chain policies (release
    // age) with the abbreviated documents, when it has none cached.
    let documents = fake.requests_of(PathClass::Document);
    assert!(documents.iter().all(|request| request.header("accept").unwrap_or_default().starts_with(ABBREVIATED)));
}

#[tokio::test(flavor = "multi_thread")]
async fn yarn1_installs_the_same_asking_for_abbreviated_documents_even_for_tarballs() {
    let fake = FakeNpm::start(&project_with_dependencies()).await;
    let sandbox = install_a(NodeClient::Yarn1, &fake);
    assert!(paths(&fake.requests_of(PathClass::Document)).contains(&"/@corp%2fc"), "{:#?}", fake.requests());
    for request in fake.requests() {
        assert!(request.header("accept").unwrap_or_default().starts_with(ABBREVIATED), "{request:?}");
    }
    let lock = std::fs::read_to_string(sandbox.lockfile()).unwrap();
    assert!(lock.contains(&format!("resolved \"{}/@corp/c/-/c-2.0.0.tgz#", fake.url())), "{lock}");

    install_again_from_the_lockfile(&sandbox, NodeClient::Yarn1, &fake);
    assert_eq!(fake.requests_of(PathClass::Document).len(), 0, "{:#?}", fake.requests());
}

#[tokio::test(flavor = "multi_thread")]
async fn yarn4_installs_the_same_sending_no_accept_and_encoding_scoped_tarballs() {
    let fake = FakeNpm::start(&project_with_dependencies()).await;
    let sandbox = install_a(NodeClient::Yarn4, &fake);
    assert!(fake.requests().iter().all(|request| request.header("accept").is_none()), "{:#?}", fake.requests());
    let tarballs = fake.requests_of(PathClass::Tarball);
    assert!(paths(&tarballs).contains(&"/@corp%2fc/-/c-2.0.0.tgz"), "{:#?}", fake.requests());
    let lock = std::fs::read_to_string(sandbox.lockfile()).unwrap();
    assert!(lock.contains("resolution: \"@corp/c@npm:2.0.0\""), "{lock}");

    install_again_from_the_lockfile(&sandbox, NodeClient::Yarn4, &fake);
    assert_eq!(fake.requests_of(PathClass::Document).len(), 0, "{:#?}", fake.requests());
}

#[tokio::test(flavor = "multi_thread")]
async fn npm_fetches_tarballs_named_at_the_npm_registry_from_its_own_and_locks_the_canonical_url() {
    let fake = FakeNpm::start(&project_with_dependencies()).await;
    fake.set_tarball_host(TarballHost::Npmjs);
    let sandbox = install_a(NodeClient::Npm, &fake);
    let host = fake.url().trim_start_matches("http://").to_owned();
    let tarballs = fake.requests_of(PathClass::Tarball);
    assert_eq!(tarballs.len(), 4);
    assert!(tarballs.iter().all(|request| request.header("host") == Some(host.as_str())));
    let lock: Value = serde_json::from_slice(&std::fs::read(sandbox.lockfile()).unwrap()).unwrap();
    let resolved = &lock["packages"]["node_modules/@corp/c"]["resolved"];
    assert_eq!(resolved.as_str(), Some("https://registry.npmjs.org/@corp/c/-/c-2.0.0.tgz"));
}

#[tokio::test(flavor = "multi_thread")]
async fn yarn1_fetches_tarballs_from_the_cdn_when_the_documents_name_it() {
    let fake = FakeNpm::start(&project_with_dependencies()).await;
    fake.set_tarball_host(TarballHost::Cdn);
    install_a(NodeClient::Yarn1, &fake);
    let cdn = fake.cdn_url().trim_start_matches("http://").to_owned();
    let tarballs = fake.requests_of(PathClass::Tarball);
    assert_eq!(tarballs.len(), 4);
    assert!(tarballs.iter().all(|request| request.header("host") == Some(cdn.as_str())), "{tarballs:#?}");
}

#[tokio::test(flavor = "multi_thread")]
async fn a_required_token_turns_npm_away_without_it_and_lets_it_in_with_its_npmrc() {
    let fake = FakeNpm::start(&project_with_dependencies()).await;
    fake.require_token(Some("secret"));
    let sandbox = NodeSandbox::new(NodeClient::Npm, &[("a", "^1.0.0")]);
    let refused = sandbox.install(&fake.url());
    assert!(!refused.success && refused.output.contains("E401"), "{}", refused.output);
    let npmrc = format!("//{}/:_authToken=secret\n", fake.url().trim_start_matches("http://"));
    std::fs::write(sandbox.app().join(".npmrc"), npmrc).unwrap();
    let run = sandbox.install(&fake.url());
    assert!(run.success, "{}", run.output);
    assert_eq!(sandbox.installed("@corp/c").as_deref(), Some("2.0.0"));
    let last = fake.requests().pop().unwrap();
    assert_eq!(last.header("authorization"), Some("Bearer secret"));
}

async fn get(url: &str, path: &str, headers: &[(&str, &str)]) -> Answer {
    send(url.trim_start_matches("http://"), "GET", path, headers, b"").await
}

fn json(answer: &Answer) -> Value {
    serde_json::from_slice(&answer.body).unwrap()
}

#[tokio::test(flavor = "multi_thread")]
async fn documents_come_full_or_abbreviated_by_accept_with_the_registry_s_headers_and_404s() {
    let fake = FakeNpm::start(&project_with_dependencies()).await;
    let url = fake.url();
    let full = get(&url, "/@corp/c", &[]).await;
    assert_eq!((full.status, full.header("content-type")), (200, Some("application/json")));
    assert_eq!((full.header("vary"), full.header("cache-control")), (Some("Accept"), Some("public, max-age=300")));
    let document = json(&full);
    assert_eq!((document["_id"].as_str(), document["dist-tags"]["latest"].as_str()), (Some("@corp/c"), Some("2.0.0")));
    assert!(document["time"]["modified"].is_string() && document["readme"].is_string());
    let dist = &document["versions"]["2.0.0"]["dist"];
    assert_eq!(dist["tarball"].as_str(), Some(format!("{url}/@corp/c/-/c-2.0.0.tgz").as_str()));
    assert!(dist["integrity"].as_str().unwrap().starts_with("sha512-") && dist["shasum"].is_string());
    // Whatever the validators, the registry answers in full.
    let etag = full.header("etag").unwrap().to_owned();
    assert_eq!(get(&url, "/@corp%2Fc", &[("if-none-match", &etag)]).await.status, 200);

    let corgi = get(&url, "/@corp%2fc", &[("accept", "application/vnd.npm.install-v1+json; q=1.0, */*")]).await;
    assert_eq!(corgi.header("content-type"), Some(ABBREVIATED));
    let abbreviated = json(&corgi);
    assert_eq!(abbreviated["modified"], document["time"]["modified"]);
    assert!(abbreviated.get("time").is_none() && abbreviated.get("readme").is_none());
    assert_eq!(abbreviated["versions"]["2.0.0"]["dist"], *dist);
    assert!(json(&get(&url, "/old", &[]).await)["versions"]["0.1.0"]["dist"].get("integrity").is_none());

    let version = get(&url, "/a/1.0.0", &[]).await;
    assert_eq!(json(&version)["dependencies"]["b"].as_str(), Some("^1.0.0"));
    assert_eq!(json(&get(&url, "/b/latest", &[]).await)["_id"].as_str(), Some("b@1.0.0"));
    for missing in ["/nothing", "/a/9.9.9", "/a/-/a-9.9.9.tgz"] {
        let answer = get(&url, missing, &[]).await;
        assert_eq!((answer.status, answer.header("content-type")), (404, Some("application/json")), "{missing}");
        assert_eq!(json(&answer), serde_json::json!({"error": "Not found"}));
    }
    assert_eq!(get(&url, "/-/ping", &[]).await.body, "{}");
    let audit = send(url.trim_start_matches("http://"), "POST", "/-/npm/v1/security/advisories/bulk", &[], b"{}");
    assert_eq!(audit.await.status, 200);
}

#[tokio::test(flavor = "multi_thread")]
async fn a_publish_moves_modified_on_and_a_lagging_cdn_moves_it_back_without_the_new_version() {
    let fake = FakeNpm::start(&project_with_dependencies()).await;
    let url = fake.url();
    let before = json(&get(&url, "/b", &[]).await);
    fake.publish(NpmPackage::new("b", "1.1.0", &[]));
    let after = json(&get(&url, "/b", &[]).await);
    assert!(after["time"]["modified"].as_str() > before["time"]["modified"].as_str());
    assert_eq!(after["dist-tags"]["latest"].as_str(), Some("1.1.0"));

    fake.set_modified_back(true);
    let lagging = json(&get(&url, "/b", &[("accept", ABBREVIATED)]).await);
    assert!(lagging["modified"].as_str() < after["time"]["modified"].as_str());
    assert!(lagging["versions"].get("1.1.0").is_none() && lagging["dist-tags"]["latest"] == "1.0.0");
    assert_eq!(get(&url, "/b/1.1.0", &[]).await.status, 404);
    assert_eq!(get(&url, "/b/-/b-1.1.0.tgz", &[]).await.status, 200, "the tarballs are there");
}

#[tokio::test(flavor = "multi_thread")]
async fn tarballs_are_served_on_both_ports_and_break_as_they_are_told_to() {
    let fake = FakeNpm::start(&project_with_dependencies()).await;
    let c = NpmPackage::new("@corp/c", "2.0.0", &[]);
    let (url, cdn) = (fake.url(), fake.cdn_url());
    for (base, path) in
        [(&url, "/@corp/c/-/c-2.0.0.tgz"), (&cdn, "/@corp/c/-/c-2.0.0.tgz"), (&cdn, "/@corp%2fc/-/c-2.0.0.tgz")]
    {
        let answer = get(base, path, &[]).await;
        assert_eq!((answer.status, &answer.body[..]), (200, &c.bytes[..]), "{base}{path}");
    }
    assert_eq!(get(&cdn, "/@corp/c", &[]).await.status, 404, "the CDN serves tarballs only");
    fake.set_tarball_host(TarballHost::Cdn);
    let dist = json(&get(&url, "/@corp/c/2.0.0", &[]).await)["dist"].clone();
    assert_eq!(dist["tarball"].as_str(), Some(format!("{cdn}/@corp/c/-/c-2.0.0.tgz").as_str()));

    fake.set_corrupt(true);
    let corrupt = get(&cdn, &c.tarball_path(), &[]).await;
    assert_eq!((corrupt.status, corrupt.body.len()), (200, c.bytes.len()));
    assert_ne!(corrupt.body, c.bytes);
    fake.set_corrupt(false);
    fake.set_cut(true);
    let cut = get(&cdn, &c.tarball_path(), &[]).await;
    assert!(!cut.complete && cut.body.len() < c.bytes.len());
    fake.set_cut(false);

    fake.force_status_on(PathClass::Tarball, 429);
    let limited = get(&cdn, &c.tarball_path(), &[]).await;
    assert_eq!((limited.status, limited.header("retry-after")), (429, Some("1")));
    assert_eq!(get(&url, "/@corp/c", &[]).await.status, 200, "documents are not limited");
    fake.force_status(503);
    assert_eq!(get(&url, "/@corp/c", &[]).await.status, 503);
    fake.force_status(0);
    fake.set_stalled_on(PathClass::Document, true);
    let stalled = tokio::time::timeout(Duration::from_millis(300), get(&url, "/a", &[])).await;
    assert!(stalled.is_err(), "a stalled document is never answered");
    assert_eq!(get(&url, "/a/-/a-1.0.0.tgz", &[]).await.status, 200);

    fake.require_token(Some("secret"));
    let refused = get(&cdn, &c.tarball_path(), &[]).await;
    assert_eq!(refused.status, 401);
    assert!(json(&refused)["error"].is_string());
    assert_eq!(get(&cdn, &c.tarball_path(), &[("authorization", "Bearer secret")]).await.status, 200);
}
