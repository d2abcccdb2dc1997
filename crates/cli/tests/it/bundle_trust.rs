//! Which bundles an air-gapped pkgproxy takes: one signed by a key it
//! trusts (one changed by hand, or signed by another key, or not at all,
//! is refused unless the admin says so); a later bundle's newer copy of
//! what changes under its name, though the pkgproxy is offline; and a
//! manifest shaped to cost memory is refused within bounds.

use std::path::Path;

use bytes::Bytes;
use http_body_util::Full;
use pkgproxy_control::{ExportRequest, Imported, ModeRequest, EXPORT_PATH, IMPORT_PATH, IMPORT_TRUST_UNSIGNED};
use pkgproxy_server::bundle::{MANIFEST, MANIFEST_SUM, SIGNATURE};
use pkgproxy_server::signing::SigningKey;
use pkgproxy_testkit::client::{get, send};
use pkgproxy_testkit::tarball::{entries_of, tar_of_files};
use pkgproxy_testkit::{Daemon, FakeHub, GoModules, Image, Origin};
use sha2::{Digest, Sha256};

use crate::bundle::{signing_key, with_blob_replaced};
use crate::common::PKGPROXY;
use crate::inproc;
use crate::readiness::ctl;

/// `bundle` with its signature made again with the key at `key` (or
/// taken out), as whoever holds that key would.
fn signed_again(bundle: &[u8], key: Option<&Path>) -> Vec<u8> {
    let mut entries = entries_of(bundle);
    entries.retain(|(name, _)| name != SIGNATURE);
    assert_eq!((entries[0].0.as_str(), entries[1].0.as_str()), (MANIFEST, MANIFEST_SUM));
    if let Some(key) = key {
        let sum = String::from_utf8(entries[1].1.clone()).unwrap();
        entries.insert(2, (SIGNATURE.to_owned(), SigningKey::read(key).unwrap().sign(sum.trim())));
    }
    tar_of_files(&entries)
}

#[tokio::test(flavor = "multi_thread")]
async fn only_a_bundle_signed_by_a_trusted_key_goes_in_and_a_tag_repointed_by_hand_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let hub = FakeHub::start().await;
    let (genuine, makers) = (Image::build("genuine", None), Image::build("the maker's", None));
    hub.publish("library/alpine", "3.20", &genuine);
    let config = hub.config("docker.io");
    let online = Daemon::start(PKGPROXY, Some(&config)).await;
    let group = ["registry", "alpine:3.20"];
    assert!(ctl(&online, &[&["warm"][..], &group].concat()).0);
    let bundle = dir.path().join("alpine.tar");
    let (key, trusted) = signing_key(dir.path());
    let export = ["export", "-o", bundle.to_str().unwrap(), "--sign", key.to_str().unwrap()];
    assert!(ctl(&online, &[&export[..], &group].concat()).0);
    let signed = std::fs::read(&bundle).unwrap();

    // The tag repointed at the maker's manifest, the manifest and its sum
    // written again; then signed by the maker's own key; then unsigned.
    let genuine_sha = genuine.manifest.digest.trim_start_matches("sha256:");
    let repointed = with_blob_replaced(&signed, genuine_sha, &makers.manifest.bytes);
    let makers_dir = dir.path().join("maker");
    std::fs::create_dir(&makers_dir).unwrap();
    let (makers_key, _) = signing_key(&makers_dir);
    let forgeries = [
        (repointed.clone(), "does not match its manifest: the bundle was changed after it was signed"),
        (signed_again(&repointed, Some(&makers_key)), "which is not among [bundles] trusted_keys"),
        (signed_again(&repointed, None), "it is not signed"),
    ];
    let gapped = Daemon::start_with(PKGPROXY, Some(&format!("{config}{trusted}")), &["-offline"]).await;
    let forged = dir.path().join("forged.tar");
    for (bytes, why) in forgeries {
        std::fs::write(&forged, bytes).unwrap();
        let (imported, printed) = ctl(&gapped, &["import", forged.to_str().unwrap()]);
        assert!(!imported && printed.contains(why), "{why}: {printed}");
        let tag = send(gapped.proxy_addr(), "GET", "/v2/library/alpine/manifests/3.20", &[], b"").await;
        assert_ne!(tag.body, makers.manifest.bytes, "{why}");
        assert_ne!(tag.status, 200, "nothing was taken in: {why}");
    }

    // Taken on the admin's word: what is checked still is.
    std::fs::write(&forged, signed_again(&signed, None)).unwrap();
    let (imported, printed) = ctl(&gapped, &["import", "--trust-unsigned", forged.to_str().unwrap()]);
    assert!(imported && printed.starts_with("unsigned or signed by a key not trusted"), "{printed}");
    // The genuine bundle: signed by the trusted key, and the tag is the hub's.
    let (imported, printed) = ctl(&gapped, &["import", bundle.to_str().unwrap()]);
    assert!(imported && printed.starts_with("signed by ed25519:"), "{printed}");
    let accept = [("accept", genuine.manifest.media_type.unwrap())];
    let tag = send(gapped.proxy_addr(), "GET", "/v2/library/alpine/manifests/3.20", &accept, b"").await;
    assert_eq!((tag.status, tag.body), (200, genuine.manifest.bytes.clone()));
}

/// Everything `server` holds, as a bundle (unsigned).
async fn exported_whole(server: &inproc::Server) -> Vec<u8> {
    let asked = ExportRequest { all: true, ..Default::default() };
    let mut bundle = Vec::new();
    let body = Bytes::from(serde_json::to_vec(&asked).unwrap());
    server.admin().download(EXPORT_PATH, body, &mut bundle, |_| {}).await.expect("an export");
    bundle
}

/// `server` takes in `bundle`, unsigned as the admin says.
async fn imported(server: &inproc::Server, bundle: Vec<u8>) -> Imported {
    let path = format!("{IMPORT_PATH}?{IMPORT_TRUST_UNSIGNED}=true");
    server.admin().upload(&path, Full::new(Bytes::from(bundle))).await.expect("an import")
}

#[tokio::test(flavor = "multi_thread")]
async fn a_later_bundle_refreshes_what_changes_under_its_name_on_an_offline_pkgproxy() {
    let modules = GoModules::standard();
    let origin = Origin::serve(modules.root()).await;
    let list_file = modules.root().join("example.com/hello/@v/list");
    std::fs::write(&list_file, "v1.0.0\n").unwrap();
    let config = format!("[go]\nproxies = [\"{}\"]\nsumdb = \"off\"\n", origin.url());
    let list = "/go/example.com/hello/@v/list";
    let newer = "/go/example.com/hello/@v/v1.1.0.info";

    // Week one, then week two: a new version listed.
    let online = inproc::Server::start(Some(&config)).await;
    assert_eq!(get(online.proxy_addr(), list).await.body, "v1.0.0\n");
    let week_one = exported_whole(&online).await;
    online.clock().advance(std::time::Duration::from_secs(7 * 24 * 3600));
    std::fs::write(&list_file, "v1.0.0\nv1.1.0\n").unwrap();
    assert_eq!(get(online.proxy_addr(), list).await.body, "v1.0.0\nv1.1.0\n");
    assert_eq!(get(online.proxy_addr(), newer).await.status, 200);
    let week_two = exported_whole(&online).await;
    origin.clear_requests();

    // The air-gapped pkgproxy, offline: each week's bundle taken in.
    let gapped = inproc::Server::start(Some(&config)).await;
    let offline = ModeRequest { mode: "offline".to_owned(), from: None, cluster: false };
    gapped.admin().set_offline(&offline).await.unwrap();
    let first = imported(&gapped, week_one).await;
    assert_eq!((first.imported, first.refused), (1, 0), "{first:?}");
    assert_eq!(get(gapped.proxy_addr(), list).await.body, "v1.0.0\n");
    let second = imported(&gapped, week_two).await;
    assert_eq!(
        (second.imported, second.refused, second.items),
        (2, 0, 2),
        "the newer list, the new version: {second:?}"
    );
    assert_eq!(get(gapped.proxy_addr(), list).await.body, "v1.0.0\nv1.1.0\n");
    assert_eq!(get(gapped.proxy_addr(), newer).await.status, 200);
    assert!(origin.requests().is_empty(), "{:#?}", origin.requests());
}

#[tokio::test(flavor = "multi_thread")]
async fn a_manifest_shaped_to_cost_memory_is_refused_within_bounds() {
    let dir = tempfile::tempdir().unwrap();
    let daemon = Daemon::start(PKGPROXY, None).await;
    // One item, ten million headers: 100 MB of JSON.
    let body = b"x\n";
    let sha = hex::encode(Sha256::digest(body));
    let headers = vec![r#"["a","b"]"#; 10_000_000].join(",");
    let manifest = format!(
        r#"{{"format":1,"pkgproxy":"x","created":0,"items":[{{"url":"/go/example.com/big/@v/v1.0.0.info","key":"go/example.com/big/@v/v1.0.0.info","sha256":"{sha}","size":2,"fetched_at":0,"headers":[{headers}]}}]}}"#
    )
    .into_bytes();
    let sum = hex::encode(Sha256::digest(&manifest)).into_bytes();
    let bundle = tar_of_files(&[
        (MANIFEST.to_owned(), manifest),
        (MANIFEST_SUM.to_owned(), sum),
        (format!("blobs/{sha}"), body.to_vec()),
    ]);
    let path = dir.path().join("big.tar");
    std::fs::write(&path, bundle).unwrap();
    let (imported, printed) = ctl(&daemon, &["import", "--trust-unsigned", path.to_str().unwrap()]);
    assert!(!imported && printed.contains("has more than 64 headers"), "{printed}");
    let peak = daemon.peak_rss_kib();
    assert!(peak < 200 * 1024, "a 100 MB manifest took the daemon to {peak} KiB");
}
