//! The cache's page at `/cache/`, read by the real Chromium after the
//! real npm and cargo fetched through pkgproxy twice (the second time
//! from fresh client caches, so from pkgproxy's): each package with its
//! versions, sizes and hits, narrowed by the search as one types and by
//! `?q=` without script, the top clients and packages, a layout that fits
//! a phone, and a package fetched with a token never named.

use std::path::PathBuf;
use std::time::Duration;

use pkgproxy_control::{Browse, BrowsePackage, BROWSE_JSON_PATH};
use pkgproxy_testkit::browser::{Chromium, PHONE};
use pkgproxy_testkit::client::{get, send};
use pkgproxy_testkit::{
    project_with_dependencies, CargoSandbox, CrateVersion, FakeCrates, FakeNpm, NodeClient, NodeSandbox, NpmPackage,
    TarballHost,
};

use crate::inproc::Server;

/// A package only the token `TOKEN` may read.
const PRIVATE: &str = "secret-thing";
const TOKEN: &str = "npm_PRIVATE42";

/// Where the screenshots are kept for people to look at.
fn artefact(name: &str) -> PathBuf {
    let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("artefacts");
    std::fs::create_dir_all(&dir).unwrap();
    dir.join(name)
}

/// A fake npm registry (with a private package) and a fake cargo
/// registry, and pkgproxy in front of both.
async fn registries_and_pkgproxy() -> (FakeNpm, FakeCrates, Server) {
    let mut packages = project_with_dependencies();
    packages.push(NpmPackage::new(PRIVATE, "3.1.4", &[]));
    let npm = FakeNpm::start(&packages).await;
    npm.set_tarball_host(TarballHost::Registry);
    npm.restrict(PRIVATE, &[TOKEN]);
    let crates = FakeCrates::start(&[
        CrateVersion::build("itoa", "1.0.0", &[], 300),
        CrateVersion::build("serde_json", "1.0.0", &[("itoa", "1")], 2_000),
    ])
    .await;
    let config = format!(
        "[npm]\nmirrors = [\"{}\"]\n[cargo]\nindex = [\"{}\"]\n[upstream]\ntrust = [\"{}\"]\n",
        npm.url(),
        crates.url(),
        crates.cdn_url()
    );
    (npm, crates, Server::start(Some(&config)).await)
}

/// npm installs `a` (and what it needs) and cargo fetches `serde_json`,
/// each twice from a fresh cache of its own; the private package is
/// fetched twice with its token.
async fn fetch_through(server: &Server) {
    let registry = format!("http://{}/npm", server.proxy_addr());
    let node = NodeSandbox::new(NodeClient::Npm, &[("a", "^1.0.0")]);
    let installed = node.install(&registry);
    assert!(installed.success, "{}", installed.output);
    node.forget();
    let again = node.install_locked(&registry);
    assert!(again.success, "{}", again.output);

    let cargo =
        CargoSandbox::new(&format!("sparse+http://{}/cargo/index/", server.proxy_addr()), &[("serde_json", "1")]);
    for home in ["first", "second"] {
        let fetched = cargo.run(home, &["fetch"]);
        assert!(fetched.success, "{}", fetched.output);
    }

    let token = format!("Bearer {TOKEN}");
    for _ in 0..2 {
        for path in [format!("/npm/{PRIVATE}"), format!("/npm/{PRIVATE}/-/{PRIVATE}-3.1.4.tgz")] {
            let private = send(server.proxy_addr(), "GET", &path, &[("authorization", token.as_str())], b"").await;
            assert_eq!(private.status, 200, "{path}: {}", String::from_utf8_lossy(&private.body));
        }
    }
}

/// The row of `package` in `side`'s table of `dom`, if it is there.
pub(crate) fn row<'d>(dom: &'d str, side: &str, package: &str) -> Option<&'d str> {
    let section = &dom[dom.find(&format!("<section class=\"side\" data-side=\"{side}\">"))?..];
    let section = &section[..section.find("</section>")?];
    let start = section.find(&format!("<tr data-package=\"{package}\">"))?;
    Some(&section[start..start + section[start..].find("</tr>")?])
}

/// The text of the cell `class` of `row`.
pub(crate) fn cell(row: &str, class: &str) -> String {
    let opening = format!("<td class=\"{class}\"");
    let start = row.find(&opening).unwrap_or_else(|| panic!("no {class} in {row}"));
    let start = start + row[start..].find('>').unwrap() + 1;
    row[start..start + row[start..].find("</td>").unwrap()].to_string()
}

pub(crate) fn package<'b>(browse: &'b Browse, side: &str, name: &str) -> &'b BrowsePackage {
    let side = browse.sides.iter().find(|listed| listed.side == side).unwrap();
    side.packages.iter().find(|package| package.name == name).unwrap_or_else(|| panic!("{name}: {side:#?}"))
}

#[tokio::test(flavor = "multi_thread")]
async fn chromium_lists_what_npm_and_cargo_fetched_with_versions_sizes_and_hits_and_never_the_private_package() {
    let (_npm, _crates, server) = registries_and_pkgproxy().await;
    fetch_through(&server).await;

    let json = get(server.proxy_addr(), BROWSE_JSON_PATH).await;
    assert_eq!(json.status, 200, "{}", String::from_utf8_lossy(&json.body));
    let text = String::from_utf8_lossy(&json.body).into_owned();
    assert!(!text.contains(PRIVATE), "the private package is named: {text}");
    let browse: Browse = serde_json::from_str(&text).unwrap();
    let a = package(&browse, "npm", "a");
    assert_eq!(a.versions.iter().map(|v| v.version.as_str()).collect::<Vec<_>>(), ["1.0.0"]);
    assert!(a.hits >= 1 && a.versions[0].hits >= 1, "the second install's tarball came from the cache: {a:?}");
    let serde_json = package(&browse, "cargo", "serde_json");
    assert_eq!(serde_json.versions[0].version, "1.0.0");
    assert!(serde_json.versions[0].bytes > 0 && serde_json.versions[0].hits >= 1, "{serde_json:?}");
    let npm = browse.sides.iter().find(|side| side.side == "npm").unwrap();
    assert!(npm.private_entries >= 2, "the private document and tarball are counted, not named: {npm:?}");
    assert!(browse.top_clients.iter().any(|client| client.address == "127.0.0.1"), "{:?}", browse.top_clients);
    assert!(browse.top_packages.iter().any(|top| top.name == "a" && top.side == "npm"), "{:?}", browse.top_packages);

    // By address: `localhost` may reach another server's port on `::1`.
    let url = format!("http://{}/cache/", server.proxy_addr());
    let (dom, searched, status) = tokio::task::spawn_blocking({
        let url = url.clone();
        move || {
            let chromium = Chromium::new();
            let dom = chromium.dump_dom(&url, Duration::from_secs(2));
            let searched = chromium.dump_dom(&format!("{url}?q=SERDE"), Duration::from_secs(2));
            let status = chromium.dump_dom(&url.replace("/cache/", "/"), Duration::from_secs(2));
            (dom, searched, status)
        }
    })
    .await
    .unwrap();
    assert!(status.contains("<a href=\"/cache/\">cache</a>"), "the status page links to the cache's page");
    assert!(dom.contains("<a href=\"/\">status</a>"), "and back");
    assert!(!dom.contains(PRIVATE), "the private package is on the page:\n{dom}");
    let a_row = row(&dom, "npm", "a").unwrap_or_else(|| panic!("no row for a:\n{dom}"));
    assert!(cell(a_row, "versions").contains("1.0.0"), "{a_row}");
    assert_eq!(cell(a_row, "hits"), a.hits.to_string());
    assert_ne!(cell(a_row, "size"), "0 B");
    let crate_row = row(&dom, "cargo", "serde_json").unwrap_or_else(|| panic!("no row for serde_json:\n{dom}"));
    assert_eq!(cell(crate_row, "hits"), serde_json.hits.to_string());
    assert!(row(&dom, "npm", "@corp/c").is_some() && row(&dom, "cargo", "itoa").is_some());
    assert!(row(&searched, "cargo", "serde_json").is_some(), "?q= finds it in any case:\n{searched}");
    assert!(row(&searched, "npm", "a").is_none() && row(&searched, "cargo", "itoa").is_none(), "{searched}");
    assert!(searched.contains("value=\"SERDE\""), "the search box keeps the search");

    let (desktop, phone) = (artefact("browse-page-desktop.png"), artefact("browse-page-phone.png"));
    let typed = tokio::task::spawn_blocking(move || {
        let chromium = Chromium::new();
        chromium.screenshot(&url, (1280, 1200), &desktop);
        chromium.screenshot(&url, PHONE, &phone);
        chromium.evaluate_on_phone(
            &url,
            "document.getElementById('q')",
            "(() => { const box = document.getElementById('q'); box.value = 'ito'; \
               box.dispatchEvent(new Event('input')); \
               return { shown: [...document.querySelectorAll('tr[data-package]')].filter(r => !r.hidden) \
                          .map(r => r.dataset.package), \
                        page: document.documentElement.scrollWidth, screen: window.innerWidth }; })()",
        )
    })
    .await
    .unwrap();
    assert_eq!(typed["shown"], serde_json::json!(["itoa"]), "typing narrows the list at once: {typed}");
    assert_eq!(typed["screen"], PHONE.0, "{typed}");
    assert!(typed["page"].as_u64() <= typed["screen"].as_u64(), "nothing sticks out sideways on a phone: {typed}");
}

#[tokio::test(flavor = "multi_thread")]
async fn the_top_of_the_last_day_forgets_an_older_day_while_the_listing_keeps_its_hits() {
    let npm = FakeNpm::start(&project_with_dependencies()).await;
    npm.set_tarball_host(TarballHost::Registry);
    let server = Server::start(Some(&format!("[npm]\nmirrors = [\"{}\"]\n", npm.url()))).await;
    for _ in 0..3 {
        let tarball = send(server.proxy_addr(), "GET", "/npm/a/-/a-1.0.0.tgz", &[], b"").await;
        assert_eq!(tarball.status, 200, "{}", String::from_utf8_lossy(&tarball.body));
    }
    let browse = || async {
        let json = get(server.proxy_addr(), BROWSE_JSON_PATH).await;
        assert_eq!(json.status, 200, "{}", String::from_utf8_lossy(&json.body));
        serde_json::from_slice::<Browse>(&json.body).unwrap()
    };
    let today = browse().await;
    assert_eq!(today.top_packages.iter().find(|top| top.name == "a").map(|top| top.requests), Some(3));
    assert_eq!(today.top_clients.iter().map(|client| client.requests).sum::<u64>(), 3, "{:?}", today.top_clients);
    assert_eq!(package(&today, "npm", "a").versions[0].hits, 2, "the first was the miss");

    server.clock().advance(Duration::from_secs(25 * 3_600));
    let tomorrow = browse().await;
    assert!(tomorrow.top_packages.is_empty() && tomorrow.top_clients.is_empty(), "{tomorrow:?}");
    assert_eq!(package(&tomorrow, "npm", "a").versions[0].hits, 2, "hits are kept while the entry is");
}

#[tokio::test(flavor = "multi_thread")]
async fn with_browse_off_the_cache_s_page_and_json_are_gone_and_the_status_page_stays() {
    let server = Server::start(Some("[status]\nbrowse = false\n")).await;
    assert_eq!(get(server.proxy_addr(), "/cache/").await.status, 404);
    assert_eq!(get(server.proxy_addr(), BROWSE_JSON_PATH).await.status, 404);
    assert_eq!(get(server.proxy_addr(), "/").await.status, 200);
    let posted = send(server.proxy_addr(), "POST", "/cache/", &[], b"x").await;
    assert_eq!(posted.status, 404, "off is off, whatever the method");
}

#[tokio::test(flavor = "multi_thread")]
async fn an_image_skopeo_pulled_is_listed_by_its_tag_and_a_private_repository_s_never() {
    use pkgproxy_testkit::{Daemon, FakeHub, Image, SkopeoSandbox};
    let hub = FakeHub::start().await;
    hub.publish("library/hello", "v1", &Image::build("hello", None));
    hub.publish("secret/app", "v1", &Image::build("secret", None));
    hub.make_private("secret/app", "alice:pw");
    let daemon = Daemon::start(crate::common::PKGPROXY, Some(&hub.config("docker.io"))).await;
    let skopeo = SkopeoSandbox::new(daemon.proxy_addr());
    assert!(skopeo.copy("docker.io/library/hello:v1", "public").success);
    assert!(skopeo.copy("docker.io/library/hello:v1", "again").success);
    let alice = crate::private_doors::alice(&hub).await;
    let secret =
        send(daemon.proxy_addr(), "GET", "/v2/secret/app/manifests/v1", &[("authorization", &alice)], b"").await;
    assert_eq!(secret.status, 200, "alice reads her own image");

    let listed: Browse = serde_json::from_slice(&get(daemon.proxy_addr(), BROWSE_JSON_PATH).await.body).unwrap();
    let registry = listed.sides.iter().find(|side| side.side == "registry").expect("the registry side");
    let names: Vec<&str> = registry.packages.iter().map(|package| package.name.as_str()).collect();
    assert_eq!(names, ["docker.io/library/hello"], "{registry:#?}");
    let hello = &registry.packages[0];
    assert_eq!(hello.versions.iter().map(|version| version.version.as_str()).collect::<Vec<_>>(), ["v1"]);
    assert!(hello.hits >= 1, "the second pull's tag was a hit: {hello:?}");
    assert!(registry.other_bytes > 0 && registry.other_noun.contains("layers"), "{registry:?}");
    let text = String::from_utf8(get(daemon.proxy_addr(), BROWSE_JSON_PATH).await.body.to_vec()).unwrap();
    assert!(!text.contains("secret"), "the private repository is never named: {text}");
    let page = String::from_utf8(get(daemon.proxy_addr(), "/cache/?q=app").await.body.to_vec()).unwrap();
    assert!(!page.contains("secret"), "nor found by a search");
}
