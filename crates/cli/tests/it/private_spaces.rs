//! What a client's own credentials bring reaches only the clients the
//! registry accepts for that package: a token the registry takes for one
//! package reads no other private one, online or offline; a refused
//! token's `404` is nobody else's; a client's token goes only to its
//! registry's origins, never to a host a document names; a configured
//! mirror's credentials go with the files on that mirror and nowhere
//! else; and on the cargo side, what a request with credentials brought is
//! never served to one without.

use pkgproxy_testkit::client::{send, Answer};
use pkgproxy_testkit::{project_with_dependencies, CrateVersion, FakeCrates, FakeNpm, TarballHost};

use crate::inproc::Server;

const DOCUMENT: &str = "/npm/@corp%2fc";
const TARBALL: &str = "/npm/@corp/c/-/c-2.0.0.tgz";

/// A registry whose `@corp/c` only alice's and alice-2's tokens may read
/// (anyone else gets `404`, as the npm registry answers), its tarballs on
/// `host`, and a pkgproxy in front of it.
async fn a_private_package(host: TarballHost) -> (FakeNpm, Server) {
    let fake = FakeNpm::start(&project_with_dependencies()).await;
    fake.set_tarball_host(host);
    fake.restrict("@corp/c", &["alice", "alice-2"]);
    let config = format!("[npm]\nmirrors = [\"{}\"]\n[upstream]\ntrust = [\"{}\"]\n", fake.url(), fake.cdn_url());
    (fake, Server::start(Some(&config)).await)
}

async fn get_as(server: &Server, path: &str, token: &str) -> Answer {
    let authorization = format!("Bearer {token}");
    send(server.proxy_addr(), "GET", path, &[("authorization", authorization.as_str())], b"").await
}

async fn set_mode(server: &Server, mode: &str) {
    let asked = pkgproxy_control::ModeRequest { mode: mode.to_owned(), from: None, cluster: false };
    server.admin().set_offline(&asked).await.expect("the mode is set");
}

fn text(answer: &Answer) -> String {
    String::from_utf8_lossy(&answer.body).into_owned()
}

#[tokio::test(flavor = "multi_thread")]
async fn a_token_the_registry_accepts_for_one_package_reads_no_other_private_one_online_or_offline() {
    let (fake, server) = a_private_package(TarballHost::Registry).await;
    let document = get_as(&server, DOCUMENT, "alice").await;
    assert_eq!(document.status, 200, "{}", text(&document));
    let tarball = get_as(&server, TARBALL, "alice").await;
    assert_eq!(tarball.status, 200, "{}", text(&tarball));
    let public = get_as(&server, "/npm/a", "mallory").await;
    assert_eq!(public.status, 200, "the registry takes mallory's token for a public package");
    for path in [DOCUMENT, TARBALL] {
        let read = get_as(&server, path, "mallory").await;
        assert_ne!(read.status, 200, "{path}: {}", text(&read));
        assert!(read.body != document.body && read.body != tarball.body, "{path}");
    }
    let asked_for_mallory = fake
        .requests()
        .iter()
        .filter(|r| r.path.contains("corp") && r.header("authorization") == Some("Bearer mallory"))
        .count();
    assert!(asked_for_mallory >= 1, "the registry was asked whether mallory may read @corp/c: {:#?}", fake.requests());

    set_mode(&server, "offline").await;
    for path in [DOCUMENT, TARBALL] {
        let read = get_as(&server, path, "mallory").await;
        assert_ne!(read.status, 200, "offline, {path}: {}", text(&read));
        assert!(read.body != document.body && read.body != tarball.body, "offline, {path}");
    }
    let offline = get_as(&server, TARBALL, "alice").await;
    assert_eq!((offline.status, offline.body == tarball.body), (200, true), "alice was confirmed for it before");
}

#[tokio::test(flavor = "multi_thread")]
async fn a_refused_token_s_not_found_is_never_an_entitled_client_s() {
    let (_fake, server) = a_private_package(TarballHost::Registry).await;
    assert_eq!(get_as(&server, DOCUMENT, "alice").await.status, 200);
    let refused = get_as(&server, TARBALL, "mallory").await;
    assert_eq!(refused.status, 404, "{}", text(&refused));
    for token in ["alice", "alice-2"] {
        let tarball = get_as(&server, TARBALL, token).await;
        assert_eq!(tarball.status, 200, "{token}: {}", text(&tarball));
    }
    assert_eq!(get_as(&server, DOCUMENT, "mallory").await.status, 404);
    let document = get_as(&server, DOCUMENT, "alice-2").await;
    assert_eq!(document.status, 200, "{}", text(&document));
}

#[tokio::test(flavor = "multi_thread")]
async fn a_client_s_token_goes_to_its_registry_only_never_to_a_host_a_document_names() {
    let (fake, server) = a_private_package(TarballHost::Cdn).await;
    assert_eq!(get_as(&server, DOCUMENT, "alice").await.status, 200);
    let tarball = get_as(&server, TARBALL, "alice").await;
    assert_eq!(tarball.status, 200, "the CDN serves it to anyone: {}", text(&tarball));
    let cdn = fake.cdn_url().trim_start_matches("http://").to_owned();
    let to_the_cdn: Vec<_> = fake.requests().into_iter().filter(|r| r.header("host") == Some(cdn.as_str())).collect();
    assert!(!to_the_cdn.is_empty(), "the tarball came from the CDN");
    assert!(to_the_cdn.iter().all(|r| r.header("authorization").is_none()), "{to_the_cdn:#?}");

    // A tarball host that wants a token is told none, and the client why.
    let (fake, server) = a_private_package(TarballHost::Cdn).await;
    fake.require_token(Some("alice"));
    let cdn = fake.cdn_url().trim_start_matches("http://").to_owned();
    assert_eq!(get_as(&server, DOCUMENT, "alice").await.status, 200);
    let refused = get_as(&server, TARBALL, "alice").await;
    assert_eq!(refused.status, 403, "{}", text(&refused));
    let said: serde_json::Value = serde_json::from_slice(&refused.body).unwrap();
    let said = said["error"].as_str().unwrap();
    assert!(said.contains(&cdn) && said.contains("token"), "{said}");
    let to_the_cdn: Vec<_> = fake.requests().into_iter().filter(|r| r.header("host") == Some(cdn.as_str())).collect();
    assert!(to_the_cdn.iter().all(|r| r.header("authorization").is_none()), "{to_the_cdn:#?}");
}

#[tokio::test(flavor = "multi_thread")]
async fn a_configured_mirror_s_credentials_go_with_its_tarballs_and_to_no_other_host() {
    let fake = FakeNpm::start(&project_with_dependencies()).await;
    fake.require_basic("npmuser", "CONFIGURED-TOKEN");
    let mirror = fake.url().replace("http://", "http://npmuser:CONFIGURED-TOKEN@");
    let config = format!(
        "[[npm.registry]]\nname = \"corp\"\nmirrors = [\"{mirror}\"]\n[upstream]\ntrust = [\"{}\"]\n",
        fake.cdn_url()
    );
    let server = Server::start(Some(&config)).await;
    let document = send(server.proxy_addr(), "GET", "/npm/corp/b", &[], b"").await;
    assert_eq!(document.status, 200, "{}", text(&document));
    let tarball = send(server.proxy_addr(), "GET", "/npm/corp/b/-/b-1.0.0.tgz", &[], b"").await;
    assert_eq!(tarball.status, 200, "{}", text(&tarball));
    let basic = "Basic bnBtdXNlcjpDT05GSUdVUkVELVRPS0VO";
    assert!(fake.requests().iter().all(|r| r.header("authorization") == Some(basic)), "{:#?}", fake.requests());

    // A tarball on another host of the document's naming gets none of them.
    fake.set_tarball_host(TarballHost::Cdn);
    fake.clear_requests();
    let document = send(server.proxy_addr(), "GET", "/npm/corp/old", &[], b"").await;
    assert_eq!(document.status, 200, "{}", text(&document));
    let elsewhere = send(server.proxy_addr(), "GET", "/npm/corp/old/-/old-0.1.0.tgz", &[], b"").await;
    assert_ne!(elsewhere.status, 200, "the CDN wants them, and is not the mirror");
    let cdn = fake.cdn_url().trim_start_matches("http://").to_owned();
    let to_the_cdn: Vec<_> = fake.requests().into_iter().filter(|r| r.header("host") == Some(cdn.as_str())).collect();
    assert!(
        !to_the_cdn.is_empty() && to_the_cdn.iter().all(|r| r.header("authorization").is_none()),
        "{to_the_cdn:#?}"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn what_a_client_s_credentials_bring_from_a_cargo_registry_is_never_served_to_a_client_without() {
    let tool = CrateVersion::build("internal-tool", "1.0.0", &[], 2_000);
    let fake = FakeCrates::start(std::slice::from_ref(&tool)).await;
    fake.require_auth_unannounced("Bearer corp-token");
    let config = format!(
        "[[cargo.registry]]\nname = \"corp\"\nindex = [\"{}\"]\n[upstream]\ntrust = [\"{}\"]\n",
        fake.url(),
        fake.cdn_url()
    );
    let server = Server::start(Some(&config)).await;
    let said = send(server.proxy_addr(), "GET", "/cargo/corp/index/config.json", &[], b"").await;
    assert_eq!(said.status, 200);
    let said: serde_json::Value = serde_json::from_slice(&said.body).unwrap();
    assert!(said.get("auth-required").is_none(), "the registry does not say it wants credentials: {said}");
    let file = "/cargo/corp/index/in/te/internal-tool";
    let krate = format!("/cargo/corp/crates/internal-tool/1.0.0/{}", tool.sha256);
    let with_token = [("authorization", "Bearer corp-token")];
    let index = send(server.proxy_addr(), "GET", file, &with_token, b"").await;
    assert_eq!(index.status, 200, "{}", text(&index));
    let bytes = send(server.proxy_addr(), "GET", &krate, &with_token, b"").await;
    assert_eq!((bytes.status, bytes.body == tool.bytes), (200, true));
    for headers in [&[][..], &[("authorization", "Bearer wrong")][..]] {
        for path in [file, krate.as_str()] {
            let read = send(server.proxy_addr(), "GET", path, headers, b"").await;
            assert_ne!(read.status, 200, "{path} {headers:?}: {}", text(&read));
            assert!(read.body != index.body && read.body != bytes.body, "{path} {headers:?}");
        }
    }
}
