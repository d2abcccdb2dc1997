//! The snap side end to end: the real `snap` command (Debian's snapd
//! package, daemonless) with `SNAPPY_FORCE_API_URL` pointing at pkgproxy,
//! in front of a fake Snap Store on 127.0.0.1.
//!
//! A fake store can never satisfy the Canonical root key built into
//! `snap`, so `snap download` always ends at the trust root: after the
//! blob and the snap-revision, snap-declaration and account assertions, it
//! cannot decode the fake store's account-key. Each test asserts that exact
//! stop, which shows everything before it went through.

use crate::common::PKGPROXY;
use pkgproxy_testkit::{Daemon, FakeStore, SnapOutput, SnapSandbox};

/// The stop at the trust root.
const TRUST_ROOT_STOP: &str = "cannot decode public key";

async fn daemon_for(store: &FakeStore) -> Daemon {
    Daemon::start(PKGPROXY, Some(&format!("[snap]\nstores = [\"{}\"]\n", store.url()))).await
}

fn api_url(daemon: &Daemon) -> String {
    format!("http://{}/snap/", daemon.proxy_addr())
}

/// `snap download NAME` in the folder `folder`.
fn download(snap: &SnapSandbox, folder: &str, name: &str) -> SnapOutput {
    let output = snap.run(folder, &["download", name]);
    eprintln!("snap download {name}: {}{}", output.stdout, output.stderr);
    output
}

fn assert_reached_the_trust_root(output: &SnapOutput) {
    assert!(!output.success);
    assert!(output.stderr.contains(TRUST_ROOT_STOP), "{}", output.stderr);
}

/// The paths the store was asked for, without their queries.
fn asked(store: &FakeStore) -> Vec<String> {
    store.requests().iter().map(|r| r.path.split('?').next().unwrap().to_string()).collect()
}

#[tokio::test(flavor = "multi_thread")]
async fn snap_download_goes_through_pkgproxy_to_the_trust_root_and_again_from_the_cache() {
    let store = FakeStore::start().await;
    let daemon = daemon_for(&store).await;
    let snap = SnapSandbox::new(&api_url(&daemon));
    let expected = store.blob("hello-pkgproxy", "amd64", "");

    let cold = download(&snap, "cold", "hello-pkgproxy");
    assert_reached_the_trust_root(&cold);
    assert_eq!(cold.file("hello-pkgproxy_3.snap").as_deref(), Some(expected.bytes.as_ref()), "the store's bytes");
    let paths = asked(&store);
    for path in ["/v2/snaps/refresh", "/api/v1/snaps/download/hellopkgproxyid00000000000000001_3.snap"] {
        assert_eq!(paths.iter().filter(|p| *p == path).count(), 1, "{path} once: {paths:#?}");
    }
    assert!(paths.iter().any(|p| p.starts_with("/cdn/")), "pkgproxy followed the redirect: {paths:#?}");
    assert!(
        store.requests().iter().all(|r| r.header("via").is_some_and(|via| via.contains("pkgproxy"))),
        "all through pkgproxy"
    );
    for kind in ["snap-revision", "snap-declaration", "account", "account-key"] {
        assert!(paths.iter().any(|p| p.starts_with(&format!("/v2/assertions/{kind}/"))), "{kind}: {paths:#?}");
    }

    store.clear_requests();
    let warm = download(&snap, "warm", "hello-pkgproxy");
    assert_reached_the_trust_root(&warm);
    assert_eq!(warm.file("hello-pkgproxy_3.snap").as_deref(), Some(expected.bytes.as_ref()));
    let paths = asked(&store);
    assert!(
        paths.iter().all(|p| p == "/v2/snaps/refresh" || p.starts_with("/v2/assertions/snap-declaration/")),
        "only the refresh and the declaration's revalidation reach the store: {paths:#?}"
    );
}
