//! `explain`, `check` and the answer itself read the cache the same way:
//! for each situation of a table (not cached, a hit, an index past its
//! window, an index a newer Release superseded, expected bytes held under
//! another name, a remembered "not found", offline), what `explain` says
//! the next request gets is what it gets (`X-Pkgproxy-Cache` and
//! `X-Pkgproxy-Reason`), and `check` says ready exactly when the request is
//! answered from the cache with the network gone.

use std::time::Duration;

use http::Method;
use pkgproxy_control::{Explanation, ItemReadiness, ModeRequest, ReadinessRequest, CHECK_PATH, EXPLAIN_PATH};
use pkgproxy_testkit::client::{proxy_get, Answer};
use pkgproxy_testkit::{AptRepo, Origin};

use crate::common::{archive, sha256_file};
use crate::inproc::Server;

const INDEX: &str = "dists/testing/main/binary-all/Packages.xz";
const OTHER_INDEX: &str = "dists/testing/main/binary-all/Packages.gz";

async fn explain(server: &Server, url: &str) -> Explanation {
    let path = format!(
        "{EXPLAIN_PATH}?url={}",
        percent_encoding::utf8_percent_encode(url, percent_encoding::NON_ALPHANUMERIC)
    );
    server.admin().json(Method::GET, &path, None).await.expect("an explanation")
}

async fn check(server: &Server, url: &str) -> ItemReadiness {
    let asked = ReadinessRequest { urls: vec![url.to_owned()], headers: Vec::new() };
    let body = serde_json::to_vec(&asked).unwrap().into();
    let mut items: Vec<ItemReadiness> =
        server.admin().json(Method::POST, CHECK_PATH, Some(body)).await.expect("a verdict");
    items.pop().expect("one verdict")
}

async fn set_mode(server: &Server, mode: &str) {
    let asked = ModeRequest { mode: mode.to_owned(), from: None, cluster: false };
    server.admin().set_offline(&asked).await.expect("the mode is set");
}

/// Whether `answer` came from the cache, as a client with the network
/// gone would be served.
fn from_the_cache(answer: &Answer) -> bool {
    answer.status < 500 && matches!(answer.header("x-pkgproxy-cache"), Some("hit" | "stale"))
}

/// Asks `explain` and `check` about `url`, then gets it: the three agree.
/// What explain said was done, and the answer.
async fn agreed(server: &Server, situation: &str, url: &str) -> (String, Answer) {
    let told = explain(server, url).await;
    let verdict = check(server, url).await;
    // What check says of the network gone is what the same request gets
    // offline (which changes nothing that is held).
    set_mode(server, "offline").await;
    let absolute = match url.starts_with('/') {
        true => format!("http://{}{url}", server.proxy_addr()),
        false => url.to_owned(),
    };
    let offline = proxy_get(server.proxy_addr(), &absolute, &[]).await;
    set_mode(server, "never").await;
    let answer = proxy_get(server.proxy_addr(), &absolute, &[]).await;
    let (cache, why) = (answer.header("x-pkgproxy-cache"), answer.header("x-pkgproxy-reason").map(str::to_owned));
    let context = format!("{situation}: {told:?}, {verdict:?}, {} {cache:?} {why:?}", answer.status);
    assert_eq!(verdict.ready, from_the_cache(&offline), "{context}; offline: {} {:?}", offline.status, offline.headers);
    match told.action.as_str() {
        "hit" => assert_eq!((cache, why), (Some("hit"), None), "{context}"),
        "fetch" => assert_eq!((cache, why.as_deref()), (Some("miss"), told.reason.as_deref()), "{context}"),
        "revalidate" => {
            assert!(matches!(cache, Some("revalidated" | "miss")), "{context}");
            assert_eq!(why, told.reason, "{context}");
        }
        "serve stale" => assert_eq!((cache, why.as_deref()), (Some("stale"), told.reason.as_deref()), "{context}"),
        "refuse" => {
            assert!(answer.status >= 400, "{context}");
            assert_eq!(why, told.reason, "{context}");
        }
        other => panic!("{context}: unexpected action {other}"),
    }
    (told.action, answer)
}

#[tokio::test(flavor = "multi_thread")]
async fn explain_check_and_the_answer_agree_in_every_situation_of_the_cache() {
    let dir = tempfile::tempdir().unwrap();
    let mut repo = AptRepo::builder().package("pkgproxy-hello", "1.0", 2048).build(dir.path());
    let origin = Origin::serve(repo.root()).await;
    let modules = tempfile::tempdir().unwrap();
    let go = Origin::serve(modules.path()).await;
    let config = format!(
        "{}[apt]\nindex_ttl = \"5m\"\n[go]\nproxies = [\"{}\"]\n",
        archive("local", &[format!("{}/debian", origin.url())]),
        go.url()
    );
    let server = Server::start(Some(&config)).await;
    let base = format!("{}/debian", origin.url());
    let release = format!("{base}/dists/testing/InRelease");
    let deb = format!("{}{}", origin.url(), repo.deb_url_path("pkgproxy-hello"));
    let (index, other_index) = (format!("{base}/{INDEX}"), format!("{base}/{OTHER_INDEX}"));

    // Not cached, then a hit: a file that never changes, an index within
    // its window.
    assert_eq!(agreed(&server, "a deb not cached", &deb).await.0, "fetch");
    assert_eq!(agreed(&server, "a deb cached", &deb).await.0, "hit");
    assert_eq!(agreed(&server, "a Release not cached", &release).await.0, "fetch");
    assert_eq!(agreed(&server, "an index not cached", &index).await.0, "fetch");
    assert_eq!(agreed(&server, "an index within its window", &index).await.0, "hit");
    assert_eq!(agreed(&server, "another index", &other_index).await.0, "fetch");

    // Past its window: revalidated, and the age is the one explain said.
    server.clock().advance(Duration::from_secs(600));
    let (action, answer) = agreed(&server, "a Release past its window", &release).await;
    assert_eq!((action.as_str(), answer.header("x-pkgproxy-cache")), ("revalidate", Some("revalidated")));
    assert_eq!(answer.header("x-pkgproxy-reason"), Some("expired (age 10m, window 5m)"));

    // A newer Release lists other bytes for the index: the cached one is
    // superseded, never served, not even offline.
    repo.add_package("pkgproxy-later", "2.0", 1024);
    repo.rebuild_indexes();
    server.clock().advance(Duration::from_secs(600));
    assert_eq!(agreed(&server, "a newer Release", &release).await.0, "revalidate");
    let superseded = explain(&server, &other_index).await;
    assert!(superseded.reason.as_deref().unwrap_or_default().starts_with("superseded by"), "{superseded:?}");
    assert!(!check(&server, &other_index).await.ready, "a superseded index is not served offline");
    assert_eq!(agreed(&server, "an index a newer Release superseded", &other_index).await.0, "fetch");

    // The new bytes fetched by hash first: the index by name adopts them.
    let new_index = sha256_file(&repo.root().join("debian").join(INDEX));
    let by_hash = format!("{base}/dists/testing/main/binary-all/by-hash/SHA256/{new_index}");
    assert_eq!(agreed(&server, "an index by hash", &by_hash).await.0, "fetch");
    let (action, adopted) = agreed(&server, "an index held under its hash", &index).await;
    assert_eq!((action.as_str(), crate::common::sha256(&adopted.body)), ("hit", new_index));

    // A module the proxy does not have: its "not found" is remembered, and
    // served as a hit.
    let missing = "/go/example.com/missing/@v/list";
    let (action, first) = agreed(&server, "a module never asked for", missing).await;
    assert_eq!((action.as_str(), first.status), ("fetch", 404));
    let (action, again) = agreed(&server, "a module remembered missing", missing).await;
    assert_eq!((action.as_str(), again.status), ("hit", 404));

    // Offline: what is held is a hit, what is not is refused as offline.
    set_mode(&server, "offline").await;
    let unseen = format!("{}{}", origin.url(), repo.deb_url_path("pkgproxy-later"));
    let told = explain(&server, &unseen).await;
    assert_eq!((told.action.as_str(), told.reason.as_deref()), ("refuse", Some("offline")));
    assert_eq!(explain(&server, &deb).await.action, "hit");
}
