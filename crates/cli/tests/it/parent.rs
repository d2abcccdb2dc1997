//! A site's pkgproxy drawing from a regional one (`[upstream] proxy`):
//! real apt and go through the child, the parent's cache serving a second
//! child, a parent that serves wrong bytes caught by the child, a loop
//! refused, and a parent's refusal opening the child's breaker for the
//! origin host.

use pkgproxy_metrics::{SideCounter, UpstreamCounter};
use pkgproxy_testkit::client::{get, proxy_get};
use pkgproxy_testkit::{
    AptRepo, AptSandbox, Behaviour, ChaosUpstream, Daemon, FakeHub, FakeSimplestreams, GoModules, GoSandbox, Image,
    LxcSandbox, LxdImage, Origin, SkopeoSandbox,
};
use sha2::Digest;

use crate::common::{archive, PKGPROXY};
use crate::go_client::upstream_with_sums;

fn child_of(parent: &str, archive_section: &str) -> String {
    format!("{archive_section}[upstream]\nproxy = \"http://{parent}\"\n")
}

#[tokio::test(flavor = "multi_thread")]
async fn apt_through_a_child_is_served_by_its_parent_and_a_second_child_by_the_parent_s_cache() {
    let repo = AptRepo::shared_default();
    let origin = Origin::serve(repo.root()).await;
    let source = format!("{}/debian", origin.url());
    let apt_archive = archive("local", std::slice::from_ref(&source));
    let parent = Daemon::start(PKGPROXY, Some(&apt_archive)).await;
    let child = Daemon::start(PKGPROXY, Some(&child_of(parent.proxy_addr(), &apt_archive))).await;

    let apt = AptSandbox::new(Some(&child.proxy_url()), &source, repo.keyring());
    apt.update().assert_success();
    apt.download(&["pkgproxy-hello"]).assert_success();
    let got = std::fs::read(apt.downloaded("pkgproxy-hello")).unwrap();
    assert_eq!(
        sha2::Sha256::digest(&got),
        sha2::Sha256::digest(std::fs::read(repo.deb_path("pkgproxy-hello")).unwrap())
    );
    // Everything the origin saw came from the parent.
    let parent_sent = parent.info().await.upstream.get(UpstreamCounter::Requests);
    assert_eq!(parent_sent, origin.requests().len() as u64, "the origin saw the parent's requests only");
    let deb = repo.deb_url_path("pkgproxy-hello");
    assert_eq!(origin.count_path(&deb), 1);

    // A second child, with a cache of its own: the parent's cache answers.
    let second = Daemon::start(PKGPROXY, Some(&child_of(parent.proxy_addr(), &apt_archive))).await;
    let answer = proxy_get(second.proxy_addr(), &format!("{}{deb}", origin.url()), &[]).await;
    assert_eq!(answer.status, 200);
    assert_eq!(answer.body.as_ref(), got.as_slice());
    assert_eq!(origin.count_path(&deb), 1, "the parent's cache served the second child");
}

#[tokio::test(flavor = "multi_thread")]
async fn a_parent_that_serves_wrong_bytes_is_caught_and_nothing_wrong_is_cached() {
    let repo = AptRepo::shared_default();
    // A "parent" that serves the repository, and the package wrong.
    let parent = ChaosUpstream::start().await;
    for (path, body) in pkgproxy_testkit::tree::files(repo.root()) {
        let path = path.strip_prefix(repo.root()).expect("under the root");
        parent.put(&format!("/{}", path.display()), body);
    }
    let deb = repo.deb_url_path("pkgproxy-hello");
    parent.set_path_behaviour(&deb, Behaviour::WrongBytes);
    let origin = Origin::serve(repo.root()).await;
    let source = format!("{}/debian", origin.url());
    let child = Daemon::start(
        PKGPROXY,
        Some(&child_of(&parent.addr().to_string(), &archive("local", std::slice::from_ref(&source)))),
    )
    .await;
    let apt = AptSandbox::new(Some(&child.proxy_url()), &source, repo.keyring());
    apt.update().assert_success();
    apt.download(&["pkgproxy-hello"]).assert_failure();
    assert!(parent.requests_for(&deb) >= 1, "the child asked its parent");
    assert_eq!(origin.requests().len(), 0, "and nobody else");
    // Nothing wrong was cached: the child asks its parent again, and the
    // wrong bytes never reach a client whole (a 200 whose body breaks off
    // before its last byte, or an error, as the fetch's timing has it).
    let asked = parent.requests_for(&deb);
    let again = proxy_get(child.proxy_addr(), &format!("{}{deb}", origin.url()), &[]).await;
    assert_eq!(parent.requests_for(&deb), asked + 1, "not served from the child's cache");
    let whole = std::fs::read(repo.deb_path("pkgproxy-hello")).unwrap();
    assert!(again.status != 200 || again.body.len() < whole.len(), "{}: {} bytes", again.status, again.body.len());
}

#[tokio::test(flavor = "multi_thread")]
async fn a_child_whose_parent_is_itself_refuses_the_loop() {
    let port = std::net::TcpListener::bind("127.0.0.1:0").and_then(|l| l.local_addr()).unwrap().port();
    let repo = AptRepo::shared_default();
    let origin = Origin::serve(repo.root()).await;
    let source = format!("{}/debian", origin.url());
    let me = format!("127.0.0.1:{port}");
    let config = child_of(&me, &archive("local", std::slice::from_ref(&source)));
    let looped = Daemon::start_with(PKGPROXY, Some(&config), &["-addr", &me]).await;
    let deb = repo.deb_url_path("pkgproxy-hello");
    let answer = proxy_get(looped.proxy_addr(), &format!("{}{deb}", origin.url()), &[]).await;
    assert_ne!(answer.status, 200);
    assert!(looped.log().contains("request loop") || answer.status == 508, "{}: {}", answer.status, looped.log());
    assert_eq!(origin.requests().len(), 0);
    assert_eq!(get(looped.proxy_addr(), "/pkgproxy/v1/status").await.status, 200, "still serving");
}

#[tokio::test(flavor = "multi_thread")]
async fn a_parent_s_overloaded_answer_opens_the_child_s_breaker_for_the_origin_host() {
    let repo = AptRepo::shared_default();
    let origin = Origin::serve(repo.root()).await;
    // The origin by name, the parent by address: the child's breaker must
    // name the origin.
    let source = format!("http://localhost:{}/debian", origin.addr().port());
    let apt_archive = archive("local", std::slice::from_ref(&source));
    let overloaded = ["-offline-mode", "store-overloaded"];
    let parent = Daemon::start_with(PKGPROXY, Some(&apt_archive), &overloaded).await;
    let child = Daemon::start_with(PKGPROXY, Some(&child_of(parent.proxy_addr(), &apt_archive)), &overloaded).await;
    let (busy, other) = (repo.deb_url_path("pkgproxy-hello"), repo.deb_url_path("pkgproxy-small1"));
    origin.set_status_override(&busy, Some(429));
    origin.set_retry_after(Some("120"));
    let url = |path: &str| format!("http://localhost:{}{path}", origin.addr().port());
    let answer = proxy_get(child.proxy_addr(), &url(&busy), &[]).await;
    assert_eq!(answer.status, 429, "the store's answer passed on through both");
    let parent_sent = parent.info().await.upstream.get(UpstreamCounter::Requests);

    let refused = proxy_get(child.proxy_addr(), &url(&other), &[]).await;
    assert_eq!(refused.status, 503, "the child leaves the origin alone itself");
    assert_eq!(parent.info().await.upstream.get(UpstreamCounter::Requests), parent_sent);
    assert_eq!(origin.count_path(&other), 0);
    let open: Vec<String> = child.info().await.offline.upstreams.iter().map(|u| u.host.clone()).collect();
    assert_eq!(open, ["localhost"], "the breaker is the origin host's, not the parent's");
}

#[tokio::test(flavor = "multi_thread")]
async fn an_offline_parent_says_so_in_a_header_the_child_passes_on() {
    let repo = AptRepo::shared_default();
    let origin = Origin::serve(repo.root()).await;
    let source = format!("{}/debian", origin.url());
    let apt_archive = archive("local", std::slice::from_ref(&source));
    let parent = Daemon::start_with(PKGPROXY, Some(&apt_archive), &["-offline"]).await;
    let child = Daemon::start(PKGPROXY, Some(&child_of(parent.proxy_addr(), &apt_archive))).await;
    let url = format!("{}{}", origin.url(), repo.deb_url_path("pkgproxy-small2"));
    let answer = proxy_get(child.proxy_addr(), &url, &[]).await;
    assert_eq!(answer.status, 503);
    assert_eq!(answer.header("x-pkgproxy-refused"), Some("offline"), "{:?}", answer.headers);
    assert_eq!(origin.requests().len(), 0);
}

fn go_section(proxy: &str) -> String {
    format!("[go]\nproxies = [\"{proxy}\"]\n")
}

#[tokio::test(flavor = "multi_thread")]
async fn go_through_a_child_is_served_by_its_parent_and_a_second_child_by_the_parent_s_cache() {
    let (_modules, origin, _) = upstream_with_sums().await;
    let section = go_section(&origin.url());
    let parent = Daemon::start(PKGPROXY, Some(&section)).await;
    let child = Daemon::start(PKGPROXY, Some(&child_of(parent.proxy_addr(), &section))).await;

    let go = GoSandbox::new(&format!("http://{}/go", child.proxy_addr()));
    go.go("first", &["mod", "download"]).assert_success();
    go.go("first", &["build", "-o", "app", "."]).assert_success();
    let run = std::process::Command::new(go.app().join("app")).output().unwrap();
    assert_eq!(String::from_utf8_lossy(&run.stdout), "hello!\n");
    let parent_sent = parent.info().await.upstream.get(UpstreamCounter::Requests);
    assert_eq!(parent_sent, origin.requests().len() as u64, "the origin saw the parent's requests only");
    assert!(child.info().await.upstream.get(UpstreamCounter::Requests) > 0);
    assert!(parent.info().await.sides["go"].get(SideCounter::Requests) > 0, "the child asked the parent's /go");
    let paths: Vec<String> = origin.requests().iter().map(|r| r.path.clone()).collect();
    assert!(paths.iter().any(|p| p.starts_with("/sumdb/sum.golang.org/lookup/")), "{paths:#?}");

    // A second child, with a cache of its own: the parent's cache answers
    // every file a version has (only lists may be asked again).
    origin.clear_requests();
    let second = Daemon::start(PKGPROXY, Some(&child_of(parent.proxy_addr(), &section))).await;
    let go = GoSandbox::new(&format!("http://{}/go", second.proxy_addr()));
    go.go("second", &["mod", "download"]).assert_success();
    go.go("second", &["build", "-o", "app", "."]).assert_success();
    let asked: Vec<String> = origin.requests().iter().map(|r| r.path.clone()).collect();
    assert!(
        asked.iter().all(|p| p.ends_with("/@v/list") || p.ends_with("/@latest") || p.ends_with("/supported")),
        "the parent's cache served the second child: {asked:#?}"
    );
    assert!(second.info().await.upstream.get(UpstreamCounter::Requests) > 0, "the second child asked the parent");
}

#[tokio::test(flavor = "multi_thread")]
async fn a_parent_that_serves_a_tampered_module_zip_is_caught_by_the_child() {
    let (modules, origin, _) = upstream_with_sums().await;
    // A "parent" serving the module proxy's tree below /go, with one zip
    // replaced by a well-formed zip of the same version that says
    // something else: only its sum in the checksum database tells.
    let parent = ChaosUpstream::start().await;
    for (path, body) in pkgproxy_testkit::tree::files(modules.root()) {
        let path = path.strip_prefix(modules.root()).expect("under the root");
        parent.put(&format!("/go/{}", path.display()), body);
    }
    let mut tampered =
        modules.versions.iter().find(|v| v.path == "example.com/hello" && v.version == "v1.0.0").unwrap().clone();
    tampered.files[0].1 = "package hello\n\n// Hello greets.\nfunc Hello() string { return \"pwned\" }\n".into();
    let tampered = GoModules::build(vec![tampered]);
    let zip = "/example.com/hello/@v/v1.0.0.zip";
    parent.put(&format!("/go{zip}"), std::fs::read(tampered.root().join(&zip[1..])).unwrap());
    let child = Daemon::start(PKGPROXY, Some(&child_of(&parent.addr().to_string(), &go_section(&origin.url())))).await;
    let answer = get(child.proxy_addr(), &format!("/go{zip}")).await;
    assert!(parent.requests_for(&format!("/go{zip}")) >= 1, "the child asked its parent");
    assert_ne!(answer.status, 200, "the tampered zip is refused");
    assert!(String::from_utf8_lossy(&answer.body).contains("checksum"), "{:?}", answer.body);
    assert_eq!(origin.requests().len(), 0, "and nobody else was asked");
    let go = GoSandbox::new(&format!("http://{}/go", child.proxy_addr()));
    let output = go.go("tampered", &["mod", "download", "example.com/hello@v1.0.0"]);
    assert!(!output.success, "go never got the tampered zip: {}", output.stdout);
    let info = get(child.proxy_addr(), "/go/example.com/hello/@v/v1.0.0.info").await;
    assert_eq!(info.status, 200, "the rest is served");
}

#[tokio::test(flavor = "multi_thread")]
async fn skopeo_through_a_child_pulls_from_the_parent_and_a_second_child_from_the_parent_s_cache() {
    let hub = FakeHub::start().await;
    let image = Image::build("chained", None);
    hub.publish("library/hello", "v1", &image);
    let section = format!("[[registry.upstream]]\nname = \"docker.io\"\nmirrors = [\"{}\"]\n", hub.url());
    // The parent follows the hub's redirects to its CDN; the child only
    // asks the parent.
    let parent = Daemon::start(PKGPROXY, Some(&hub.config("docker.io"))).await;
    let child = Daemon::start(PKGPROXY, Some(&child_of(parent.proxy_addr(), &section))).await;

    let skopeo = SkopeoSandbox::new(child.proxy_addr());
    let pulled = skopeo.copy("docker.io/library/hello:v1", "first");
    assert!(pulled.success, "{}", pulled.stderr);
    let layer = skopeo.layout("first").join("blobs/sha256").join(image.layer.digest.trim_start_matches("sha256:"));
    assert_eq!(std::fs::read(layer).unwrap(), image.layer.bytes.as_ref());
    assert!(parent.info().await.sides["registry"].get(SideCounter::Requests) > 0, "the child asked the parent");

    hub.clear_requests();
    let second = Daemon::start(PKGPROXY, Some(&child_of(parent.proxy_addr(), &section))).await;
    let skopeo = SkopeoSandbox::new(second.proxy_addr());
    let by_digest = skopeo.copy(&format!("docker.io/library/hello@{}", image.manifest.digest), "second");
    assert!(by_digest.success, "{}", by_digest.stderr);
    assert!(hub.requests().is_empty(), "the parent's cache served the second child: {:#?}", hub.requests());
}

#[tokio::test(flavor = "multi_thread")]
async fn lxc_through_a_child_exports_from_the_parent() {
    let image = LxdImage::build("noble", None);
    let origin = FakeSimplestreams::start().await;
    origin.publish("20240101", &image);
    let section = format!("[[lxd.remote]]\nname = \"test\"\nmirrors = [\"{}/releases\"]\n", origin.url());
    let parent = Daemon::start(PKGPROXY, Some(&section)).await;
    let child = Daemon::start(PKGPROXY, Some(&child_of(parent.proxy_addr(), &section))).await;
    let pem = get(child.proxy_addr(), "/pkgproxy/v1/certificate.pem").await;
    let lxc = LxcSandbox::new(&[("test", &format!("https://{}/lxd/test", child.proxy_addr()))]);
    lxc.pin("test", std::str::from_utf8(&pem.body).unwrap());

    let exported = lxc.export("test:testos", "first");
    assert!(exported.success, "{}", exported.stderr);
    let files = lxc.exported("first");
    assert_eq!(files.len(), 2);
    for (name, bytes) in &files {
        let published = [&image.meta, &image.squashfs].into_iter().any(|part| part.as_ref() == bytes.as_slice());
        assert!(published, "{name} is the origin's");
    }
    let parent_sent = parent.info().await.upstream.get(UpstreamCounter::Requests);
    assert_eq!(parent_sent, origin.requests().len() as u64, "the origin saw the parent's requests only");
    assert!(child.info().await.upstream.get(UpstreamCounter::Requests) > 0);
}

#[tokio::test(flavor = "multi_thread")]
async fn a_busy_module_proxy_behind_the_parent_leaves_the_child_s_registry_alone() {
    let (_modules, origin, _) = upstream_with_sums().await;
    let hub = FakeHub::start().await;
    let image = Image::build("behind the parent", None);
    hub.publish("library/hello", "v1", &image);
    let registry = format!("[[registry.upstream]]\nname = \"docker.io\"\nmirrors = [\"{}\"]\n", hub.url());
    let sections = format!("{}{registry}", go_section(&origin.url()));
    let parent =
        Daemon::start(PKGPROXY, Some(&format!("{}{}", go_section(&origin.url()), hub.config("docker.io")))).await;
    let overloaded = ["-offline-mode", "store-overloaded"];
    let child = Daemon::start_with(PKGPROXY, Some(&child_of(parent.proxy_addr(), &sections)), &overloaded).await;

    let list = "/example.com/hello/@v/list";
    origin.set_status_override(list, Some(429));
    origin.set_retry_after(Some("120"));
    assert_eq!(get(child.proxy_addr(), &format!("/go{list}")).await.status, 429, "passed on through both");
    // The child leaves the parent's module proxy alone for the time asked...
    let asked = parent.info().await.sides["go"].get(SideCounter::Requests);
    let refused = get(child.proxy_addr(), "/go/example.com/hello/@v/v1.0.0.info").await;
    assert_eq!(refused.status, 503);
    assert_eq!(parent.info().await.sides["go"].get(SideCounter::Requests), asked, "not asked");
    let open: Vec<String> = child.info().await.offline.upstreams.iter().map(|u| u.host.clone()).collect();
    assert_eq!(open, [format!("{}/go", parent.proxy_addr())], "the breaker is the parent's module proxy's");
    // ...and still pulls from the registry behind the same parent.
    let skopeo = SkopeoSandbox::new(child.proxy_addr());
    let pulled = skopeo.copy("docker.io/library/hello:v1", "pulled");
    assert!(pulled.success, "{}", pulled.stderr);
}
