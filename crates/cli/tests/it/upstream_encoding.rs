//! What pkgproxy asks of its upstreams: the identity, always. An origin
//! that compresses text unless told `Accept-Encoding: identity` (as many
//! CDNs do when nothing is asked) still has its apt indexes and go module
//! files cached and served as the identity, the bytes checksums cover.

use pkgproxy_testkit::client::{proxy_get, send};
use pkgproxy_testkit::{AptRepo, GoModules, Origin};

use crate::common::archive;
use crate::inproc::Server;

#[tokio::test(flavor = "multi_thread")]
async fn an_origin_that_compresses_text_unless_asked_still_gives_apt_indexes_as_the_identity() {
    let repo = AptRepo::shared_default();
    let origin = Origin::serve(repo.root()).await;
    origin.set_compress_text(true);
    let server = Server::start(Some(&archive("local", &[format!("{}/debian", origin.url())]))).await;
    let dists = repo.root().join("debian/dists/testing");
    for index in ["InRelease", "main/binary-amd64/Packages"] {
        let url = format!("{}/debian/dists/testing/{index}", origin.url());
        let expected = std::fs::read(dists.join(index)).unwrap();
        let fetched = proxy_get(server.proxy_addr(), &url, &[("accept-encoding", "gzip")]).await;
        assert_eq!(fetched.status, 200, "{index}: {:?}", String::from_utf8_lossy(&fetched.body));
        assert!(fetched.body == expected, "{index}: the identity");
        assert_eq!(fetched.header("content-encoding"), None, "{index}");
        let again = proxy_get(server.proxy_addr(), &url, &[]).await;
        assert_eq!(again.header("x-pkgproxy-cache"), Some("hit"), "{index}: cached");
        assert!(again.body == expected, "{index}");
    }
    let asked: Vec<_> = origin.requests().into_iter().map(|r| r.header("accept-encoding").map(str::to_owned)).collect();
    assert!(!asked.is_empty() && asked.iter().all(|e| e.as_deref() == Some("identity")), "{asked:?}");
}

#[tokio::test(flavor = "multi_thread")]
async fn an_origin_that_compresses_text_unless_asked_still_gives_go_files_as_the_identity() {
    let modules = GoModules::standard();
    let origin = Origin::serve(modules.root()).await;
    origin.set_compress_text(true);
    let server = Server::start(Some(&format!("[go]\nproxies = [\"{}\"]\n", origin.url()))).await;
    for file in ["@v/list", "@v/v1.0.0.info", "@v/v1.0.0.mod"] {
        let path = format!("/go/example.com/hello/{file}");
        let expected = std::fs::read(modules.root().join("example.com/hello").join(file)).unwrap();
        let fetched = send(server.proxy_addr(), "GET", &path, &[("accept-encoding", "gzip")], b"").await;
        assert_eq!(fetched.status, 200, "{file}: {:?}", String::from_utf8_lossy(&fetched.body));
        assert!(fetched.body == expected, "{file}: the identity");
        assert_eq!(fetched.header("content-encoding"), None, "{file}");
        let again = send(server.proxy_addr(), "GET", &path, &[], b"").await;
        assert_eq!(again.header("x-pkgproxy-cache"), Some("hit"), "{file}: cached");
    }
    let asked: Vec<_> = origin.requests().into_iter().map(|r| r.header("accept-encoding").map(str::to_owned)).collect();
    assert!(!asked.is_empty() && asked.iter().all(|e| e.as_deref() == Some("identity")), "{asked:?}");
}
