//! Bundles for air gaps: what builds need, exported from one pkgproxy and
//! imported into another that was never online, which then serves the
//! real clients; a damaged bundle refused naming the item; an import done
//! twice taking in nothing the second time.

use std::path::{Path, PathBuf};

use pkgproxy_testkit::tarball::{entries_of, tar_of_files};
use pkgproxy_testkit::{
    AptRepo, AptSandbox, Daemon, FakeHub, FakeSimplestreams, FakeStore, GoSandbox, Image, LxcSandbox, LxdImage, Origin,
    PackageSpec, SkopeoSandbox, SnapSandbox,
};
use sha2::{Digest, Sha256};

use crate::common::{archive, PKGPROXY};
use crate::go_client::upstream_with_sums;
use crate::readiness::{ctl, updated_through_pkgproxy};

/// A signing key made with `pkgproxyctl keygen` in `dir`: the private
/// key's path, and the `[bundles]` section that trusts its public key.
pub(crate) fn signing_key(dir: &Path) -> (PathBuf, String) {
    let key = dir.join("bundles.key");
    let made = std::process::Command::new(env!("CARGO_BIN_EXE_pkgproxyctl"))
        .args(["keygen", "-o", key.to_str().unwrap()])
        .output()
        .unwrap();
    let printed = String::from_utf8_lossy(&made.stdout);
    assert!(made.status.success(), "{printed}{}", String::from_utf8_lossy(&made.stderr));
    let public = dir.join("bundles.key.pub");
    assert!(printed.contains(&std::fs::read_to_string(&public).unwrap().trim().to_string()), "{printed}");
    (key, format!("[bundles]\ntrusted_keys = [{:?}]\n", public.to_str().unwrap()))
}

/// Exports from `online` into `bundle`, with `args` (groups, or `--all`),
/// signed with a new key made in `dir`; a pkgproxy with `config`, offline
/// from its start, that trusts the key.
async fn carried_signed(online: &Daemon, config: &str, bundle: &Path, args: &[&str]) -> Daemon {
    let (key, trusted) = signing_key(bundle.parent().unwrap());
    let export = ["export", "-o", bundle.to_str().unwrap(), "--sign", key.to_str().unwrap()];
    let (exported, printed) = ctl(online, &[&export[..], args].concat());
    assert!(exported, "{printed}");
    Daemon::start_with(PKGPROXY, Some(&format!("{config}{trusted}")), &["-offline"]).await
}

/// The counts line of what `import` printed: `N of M items taken in ...`.
fn counts(printed: &str) -> &str {
    printed.lines().find(|line| line.contains(" items taken in")).unwrap_or_else(|| panic!("no counts: {printed}"))
}

/// A repository with a package that pulls in two others.
fn chain_of_three(dir: &Path) -> AptRepo {
    AptRepo::builder()
        .spec(PackageSpec::new("pkgproxy-top", "1.0-1", 4096).depends("pkgproxy-mid"))
        .spec(PackageSpec::new("pkgproxy-mid", "1.0-1", 4096).depends("pkgproxy-leaf"))
        .package("pkgproxy-leaf", "1.0-1", 4096)
        .build(dir)
}

/// The configuration of a pkgproxy in front of the three origins.
fn config(apt: &Origin, go: &Origin, hub: &FakeHub) -> String {
    format!(
        "{}[go]\nproxies = [\"{}\"]\n{}",
        archive("local", &[format!("{}/debian", apt.url())]),
        go.url(),
        hub.config("docker.io")
    )
}

#[tokio::test(flavor = "multi_thread")]
async fn a_bundle_exported_then_imported_offline_serves_apt_go_and_skopeo_and_twice_changes_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let repo = chain_of_three(dir.path());
    let apt_origin = Origin::serve(repo.root()).await;
    let source = format!("{}/debian", apt_origin.url());
    let (_modules, go_origin, _) = upstream_with_sums().await;
    let direct = GoSandbox::new(&go_origin.url());
    direct.go("direct", &["mod", "tidy"]).assert_success();
    let go_sum = direct.app().join("go.sum");
    let hub = FakeHub::start().await;
    let image = Image::build("carried across", None);
    hub.publish("library/hello", "v1", &image);
    let config = config(&apt_origin, &go_origin, &hub);

    // The connected side: an apt update, then everything warmed.
    let online = Daemon::start(PKGPROXY, Some(&config)).await;
    let apt = AptSandbox::new(Some(&online.proxy_url()), &source, repo.keyring());
    apt.update().assert_success();
    let sources = apt.dir().join("etc/apt/sources.list");
    let (sources, go_sum) = (sources.to_str().unwrap(), go_sum.to_str().unwrap());
    let groups = ["apt", "--sources", sources, "pkgproxy-top", "go", go_sum, "registry", "hello:v1"];
    for group in [&groups[..4], &groups[4..6], &groups[6..]] {
        let (warmed, printed) = ctl(&online, &[&["warm"][..], group].concat());
        assert!(warmed, "{printed}");
    }
    let bundle = dir.path().join("bundle.tar");
    let (key, trusted) = signing_key(dir.path());
    let export = ["export", "-o", bundle.to_str().unwrap(), "--sign", key.to_str().unwrap()];
    let (exported, printed) = ctl(&online, &[&export[..], &groups].concat());
    assert!(exported && printed.contains(", signed by ed25519:"), "{printed}");
    assert!(!dir.path().join("bundle.tar.part").exists());

    // The air-gapped side: offline from its start, never asked anything
    // of the origins.
    for origin in [&apt_origin, &go_origin] {
        origin.clear_requests();
    }
    hub.clear_requests();
    let gapped = Daemon::start_with(PKGPROXY, Some(&format!("{config}{trusted}")), &["-offline"]).await;
    let (ready, printed) = ctl(&gapped, &[&["check"][..], &groups[..4]].concat());
    assert!(!ready, "{printed}");
    let (imported, printed) = ctl(&gapped, &["import", bundle.to_str().unwrap()]);
    assert!(imported && printed.starts_with("signed by ed25519:"), "{printed}");
    let (taken, of) = printed.split_once(" items taken in").and_then(|(counts, _)| counts.split_once(" of ")).unwrap();
    let taken = taken.rsplit('\n').next().unwrap();
    assert!(taken == of && taken != "0", "every item taken in: {printed}");
    for group in [&groups[..4], &groups[4..6], &groups[6..]] {
        let (ready, printed) = ctl(&gapped, &[&["check"][..], group].concat());
        assert!(ready, "{printed}");
    }

    let fresh_apt = AptSandbox::new(Some(&gapped.proxy_url()), &source, repo.keyring());
    fresh_apt.update().assert_success();
    fresh_apt.run(&["install", "--download-only", "-y", "pkgproxy-top"]).assert_success();
    for package in ["pkgproxy-top", "pkgproxy-mid", "pkgproxy-leaf"] {
        let downloaded = std::fs::read_dir(fresh_apt.dir().join("var/cache/apt/archives")).unwrap();
        let name = downloaded.filter_map(|e| e.ok()?.file_name().into_string().ok()).find(|n| n.starts_with(package));
        assert!(name.is_some(), "{package} was not downloaded");
    }
    let go = GoSandbox::new(&format!("http://{}/go", gapped.proxy_addr()));
    std::fs::copy(go_sum, go.app().join("go.sum")).unwrap();
    go.go("gapped", &["mod", "download"]).assert_success();
    go.go("gapped", &["build", "-o", "app", "."]).assert_success();
    let pulled = SkopeoSandbox::new(gapped.proxy_addr()).copy("docker.io/library/hello:v1", "gapped");
    assert!(pulled.success, "{}", pulled.stderr);
    assert!(apt_origin.requests().is_empty(), "{:#?}", apt_origin.requests());
    assert!(go_origin.requests().is_empty(), "{:#?}", go_origin.requests());
    assert!(hub.requests().is_empty(), "{:#?}", hub.requests());

    // The whole cache, in one bundle, serves the same.
    let second = whole_cache_carried(&online, &config, dir.path()).await;
    for group in [&groups[..4], &groups[4..6], &groups[6..]] {
        let (ready, printed) = ctl(&second, &[&["check"][..], group].concat());
        assert!(ready, "{printed}");
    }
    let again = AptSandbox::new(Some(&second.proxy_url()), &source, repo.keyring());
    again.update().assert_success();

    // Again: nothing taken in, nothing changed.
    let entries = |daemon: &Daemon| ctl(daemon, &["cache", "ls", "--json"]).1;
    let before = entries(&gapped);
    let (imported, printed) = ctl(&gapped, &["import", bundle.to_str().unwrap()]);
    assert!(imported && counts(&printed).starts_with("0 of "), "{printed}");
    assert_eq!(entries(&gapped), before);
}

#[tokio::test(flavor = "multi_thread")]
async fn a_bundle_with_one_flipped_byte_is_refused_naming_the_item() {
    let dir = tempfile::tempdir().unwrap();
    let repo = chain_of_three(dir.path());
    let (_origin, source, online, apt) = updated_through_pkgproxy(&repo).await;
    let config = archive("local", std::slice::from_ref(&source));
    let sources = apt.dir().join("etc/apt/sources.list");
    let group = ["apt", "--sources", sources.to_str().unwrap(), "pkgproxy-top"];
    let bundle = dir.path().join("bundle.tar");
    let (exported, printed) = ctl(&online, &[&["export", "-o", bundle.to_str().unwrap()][..], &group].concat());
    assert!(!exported && printed.contains("warm it first"), "nothing is written before all is held: {printed}");
    assert!(!bundle.exists());
    assert!(ctl(&online, &[&["warm"][..], &group].concat()).0);
    assert!(ctl(&online, &[&["export", "-o", bundle.to_str().unwrap()][..], &group].concat()).0);

    // One byte of pkgproxy-mid's package flipped.
    let mid = std::fs::read(repo.deb_path("pkgproxy-mid")).unwrap();
    let blob = format!("blobs/{}", hex::encode(Sha256::digest(&mid)));
    let mut bytes = std::fs::read(&bundle).unwrap();
    let at = position_of(&bytes, &blob) + mid.len() as u64 / 2;
    bytes[at as usize] ^= 0x01;
    let damaged = dir.path().join("damaged.tar");
    std::fs::write(&damaged, &bytes).unwrap();

    // Bundles taken unsigned: what is checked here is the bytes.
    let gapped = Daemon::start_with(PKGPROXY, Some(&config), &["-offline"]).await;
    let import = |bundle: &Path| ctl(&gapped, &["import", "--trust-unsigned", bundle.to_str().unwrap()]);
    let (imported, printed) = import(&damaged);
    assert!(!imported, "{printed}");
    let deb = repo.deb_filename("pkgproxy-mid");
    assert!(printed.contains(&format!("({source}/{deb}): ")), "the item is named: {printed}");
    assert!(printed.contains("do not match") && printed.contains(", 1 refused:"), "{printed}");
    let (ready, printed) = ctl(&gapped, &[&["check"][..], &group].concat());
    assert!(!ready && printed.contains("missing  pkgproxy-mid"), "the damaged item is not served: {printed}");
    assert!(printed.contains("ready    pkgproxy-leaf"), "the items after it are taken in: {printed}");

    // The package changed and the manifest rewritten to match: the sums
    // of the Packages index (from the bundle's InRelease) refuse it.
    let mut changed = mid.clone();
    let middle = changed.len() / 2;
    changed[middle] ^= 0x01;
    let sha = hex::encode(Sha256::digest(&mid));
    std::fs::write(&damaged, with_blob_replaced(&std::fs::read(&bundle).unwrap(), &sha, &changed)).unwrap();
    let (imported, printed) = import(&damaged);
    assert!(!imported, "{printed}");
    assert!(printed.contains(&format!("({source}/{deb}): ")), "the item is named: {printed}");
    assert!(printed.contains(&format!("{sha} was expected")), "the index's sum: {printed}");

    // The manifest damaged: refused before any item.
    let mut bytes = std::fs::read(&bundle).unwrap();
    let at = position_of(&bytes, "pkgproxy-bundle.json") + 40;
    bytes[at as usize] ^= 0x01;
    std::fs::write(&damaged, &bytes).unwrap();
    let (imported, printed) = import(&damaged);
    assert!(!imported && printed.contains("does not match its SHA-256"), "{printed}");

    // The bundle as written still goes in whole.
    let (imported, printed) = import(&bundle);
    assert!(imported, "{printed}");
    assert!(ctl(&gapped, &[&["check"][..], &group].concat()).0);
}

#[tokio::test(flavor = "multi_thread")]
async fn a_bundle_of_print_uris_lines_carries_the_indexes_that_prove_the_packages() {
    let dir = tempfile::tempdir().unwrap();
    let repo = chain_of_three(dir.path());
    let (origin, source, online, apt) = updated_through_pkgproxy(&repo).await;
    let config = archive("local", std::slice::from_ref(&source));
    let uris = apt.run(&["download", "--print-uris", "pkgproxy-top", "pkgproxy-mid", "pkgproxy-leaf"]);
    uris.assert_success();
    let list = dir.path().join("uris");
    std::fs::write(&list, &uris.stdout).unwrap();
    let group = ["apt", "--uris", list.to_str().unwrap()];
    assert!(ctl(&online, &[&["warm"][..], &group].concat()).0);
    let bundle = dir.path().join("bundle.tar");
    let gapped = carried_signed(&online, &config, &bundle, &group).await;
    origin.clear_requests();
    let (imported, printed) = ctl(&gapped, &["import", bundle.to_str().unwrap()]);
    let (taken, _) = counts(&printed).split_once(" of ").unwrap_or_default();
    assert!(imported && taken.parse::<usize>().is_ok_and(|taken| taken > 3), "the indexes too: {printed}");
    let fresh = AptSandbox::new(Some(&gapped.proxy_url()), &source, repo.keyring());
    fresh.update().assert_success();
    fresh.download(&["pkgproxy-top"]).assert_success();
    assert!(origin.requests().is_empty(), "{:#?}", origin.requests());
}

#[tokio::test(flavor = "multi_thread")]
async fn a_module_zip_changed_in_a_bundle_is_refused_by_the_checksum_database_record_it_carries() {
    let (modules, origin, _) = upstream_with_sums().await;
    let direct = GoSandbox::new(&origin.url());
    direct.go("direct", &["mod", "tidy"]).assert_success();
    let go_sum = direct.app().join("go.sum");
    let config = format!("[go]\nproxies = [\"{}\"]\n", origin.url());
    let online = Daemon::start(PKGPROXY, Some(&config)).await;
    let group = ["go", go_sum.to_str().unwrap()];
    assert!(ctl(&online, &[&["warm"][..], &group].concat()).0);
    let dir = tempfile::tempdir().unwrap();
    let bundle = dir.path().join("modules.tar");
    assert!(ctl(&online, &[&["export", "-o", bundle.to_str().unwrap()][..], &group].concat()).0);

    // A well-formed zip of the same version that says something else.
    let zip = "example.com/hello/@v/v1.0.0.zip";
    let original = std::fs::read(modules.root().join(zip)).unwrap();
    let mut tampered =
        modules.versions.iter().find(|v| v.path == "example.com/hello" && v.version == "v1.0.0").unwrap().clone();
    tampered.files[0].1 = "package hello\n\n// Hello greets.\nfunc Hello() string { return \"pwned\" }\n".into();
    let tampered = std::fs::read(pkgproxy_testkit::GoModules::build(vec![tampered]).root().join(zip)).unwrap();
    let changed =
        with_blob_replaced(&std::fs::read(&bundle).unwrap(), &hex::encode(Sha256::digest(&original)), &tampered);
    std::fs::write(&bundle, changed).unwrap();

    // Taken unsigned: the checksum database's record is what refuses it.
    origin.clear_requests();
    let gapped = Daemon::start_with(PKGPROXY, Some(&config), &["-offline"]).await;
    let (imported, printed) = ctl(&gapped, &["import", "--trust-unsigned", bundle.to_str().unwrap()]);
    assert!(!imported, "{printed}");
    assert!(printed.contains(&format!("(/go/{zip}): ")) && printed.contains("checksum"), "{printed}");
    assert!(origin.requests().is_empty(), "the record came from the bundle: {:#?}", origin.requests());
}

#[tokio::test(flavor = "multi_thread")]
async fn a_snap_warmed_downloads_offline_and_its_bundle_serves_a_pkgproxy_never_online() {
    let store = FakeStore::start().await;
    let config = store.config();
    let online = Daemon::start(PKGPROXY, Some(&config)).await;
    let expected = store.blob("hello-pkgproxy", "amd64", "");
    let group = ["snap", "hello-pkgproxy", "--arch", "amd64"];

    let (ready, printed) = ctl(&online, &[&["check"][..], &group].concat());
    assert!(
        !ready && printed.contains("hello-pkgproxy (stable): the store's answer for it is not recorded"),
        "{printed}"
    );
    assert!(store.requests().is_empty(), "a check asks nothing of the store");
    let (warmed, printed) = ctl(&online, &[&["warm"][..], &group].concat());
    assert!(warmed, "{printed}");
    let (ready, printed) = ctl(&online, &[&["check"][..], &group].concat());
    assert!(ready, "{printed}");
    for kind in ["snap-revision/", "snap-declaration/16/", "account/", "account-key/"] {
        assert!(printed.lines().any(|line| line.starts_with(&format!("ready    {kind}"))), "{kind}: {printed}");
    }

    // Offline, a snap download in a fresh folder: as far as a fake store
    // lets it go (the trust root), with nothing asked of the store.
    assert!(ctl(&online, &["offline", "offline"]).0);
    store.clear_requests();
    let snap = SnapSandbox::new(&format!("http://{}/snap/", online.proxy_addr()));
    let offline = snap.run("offline", &["download", "hello-pkgproxy"]);
    assert!(offline.stderr.contains(SNAP_TRUST_ROOT), "{}", offline.stderr);
    assert_eq!(offline.file("hello-pkgproxy_3.snap").as_deref(), Some(expected.bytes.as_ref()));
    assert!(store.requests().is_empty(), "{:#?}", store.requests());

    // Carried to a pkgproxy that was never online.
    let dir = tempfile::tempdir().unwrap();
    let bundle = dir.path().join("snaps.tar");
    let gapped = carried_signed(&online, &config, &bundle, &group).await;
    let (imported, printed) = ctl(&gapped, &["import", bundle.to_str().unwrap()]);
    assert!(
        imported && counts(&printed).starts_with("6 of 6 items taken in"),
        "the record, the .snap, four assertions: {printed}"
    );
    let snap = SnapSandbox::new(&format!("http://{}/snap/", gapped.proxy_addr()));
    let gapped_download = snap.run("gapped", &["download", "hello-pkgproxy"]);
    assert!(gapped_download.stderr.contains(SNAP_TRUST_ROOT), "{}", gapped_download.stderr);
    assert_eq!(gapped_download.file("hello-pkgproxy_3.snap").as_deref(), Some(expected.bytes.as_ref()));

    // The whole cache carries the snap too: its record, download and
    // assertions.
    let second = whole_cache_carried(&online, &config, dir.path()).await;
    let snap = SnapSandbox::new(&format!("http://{}/snap/", second.proxy_addr()));
    let from_whole = snap.run("whole", &["download", "hello-pkgproxy"]);
    assert!(from_whole.stderr.contains(SNAP_TRUST_ROOT), "{}", from_whole.stderr);
    assert!(store.requests().is_empty(), "{:#?}", store.requests());
}

#[tokio::test(flavor = "multi_thread")]
async fn an_lxd_image_warmed_exports_offline_and_its_bundle_serves_a_pkgproxy_never_online() {
    let image = LxdImage::build("carried", None);
    let origin = FakeSimplestreams::start().await;
    origin.publish("20240101", &image);
    let config = format!("[[lxd.remote]]\nname = \"test\"\nmirrors = [\"{}/releases\"]\n", origin.url());
    let online = Daemon::start(PKGPROXY, Some(&config)).await;
    let group = ["lxd", "test:testos", "--arch", "amd64"];

    let (ready, printed) = ctl(&online, &[&["check"][..], &group].concat());
    assert!(!ready && printed.contains("test:testos: the remote's index is not cached"), "{printed}");
    assert!(origin.requests().is_empty(), "a check asks nothing of the remote");
    let (warmed, printed) = ctl(&online, &[&["warm"][..], &group].concat());
    assert!(warmed, "{printed}");
    assert!(printed.contains("4 of 4 ready"), "index, products, metadata, squashfs: {printed}");
    let vm = [&["check"][..], &group, &["--vm"]].concat();
    let (ready, printed) = ctl(&online, &vm);
    let disk = printed.lines().any(|line| line.starts_with("missing") && line.contains("amd64.img"));
    assert!(!ready && disk, "the VM's disk image is not warm: {printed}");

    assert!(ctl(&online, &["offline", "offline"]).0);
    origin.clear_requests();
    let lxc = lxc_through(&online).await;
    let exported = lxc.export("test:testos", "offline");
    assert!(exported.success, "{}", exported.stderr);
    assert!(origin.requests().is_empty(), "{:#?}", origin.requests());

    let dir = tempfile::tempdir().unwrap();
    let bundle = dir.path().join("images.tar");
    let gapped = carried_signed(&online, &config, &bundle, &group).await;
    let (imported, printed) = ctl(&gapped, &["import", bundle.to_str().unwrap()]);
    assert!(imported && counts(&printed).starts_with("4 of 4 items taken in"), "{printed}");
    let lxc = lxc_through(&gapped).await;
    let exported = lxc.export("test:testos", "gapped");
    assert!(exported.success, "{}", exported.stderr);
    let files = lxc.exported("gapped");
    assert!(files.iter().any(|(_, bytes)| bytes.as_slice() == image.squashfs.as_ref()), "the image's root");
    assert!(origin.requests().is_empty(), "{:#?}", origin.requests());
    let (imported, printed) = ctl(&gapped, &["import", bundle.to_str().unwrap()]);
    assert!(imported && counts(&printed).starts_with("0 of 4 items taken in"), "{printed}");

    // The whole cache carries the image too.
    let second = whole_cache_carried(&online, &config, dir.path()).await;
    let exported = lxc_through(&second).await.export("test:testos", "whole");
    assert!(exported.success, "{}", exported.stderr);
    assert!(origin.requests().is_empty(), "{:#?}", origin.requests());
}

/// A pkgproxy with `config`, offline from its start, that imported a
/// bundle of everything `online` holds (written in `dir`).
pub(crate) async fn whole_cache_carried(online: &Daemon, config: &str, dir: &Path) -> Daemon {
    let whole = dir.join("whole").join("whole.tar");
    std::fs::create_dir_all(whole.parent().unwrap()).unwrap();
    let gapped = carried_signed(online, config, &whole, &["--all"]).await;
    let (imported, printed) = ctl(&gapped, &["import", whole.to_str().unwrap()]);
    assert!(imported, "{printed}");
    gapped
}

/// An lxc whose remote `test` is `daemon` over https, its certificate
/// pinned.
async fn lxc_through(daemon: &Daemon) -> LxcSandbox {
    let pem = pkgproxy_testkit::client::get(daemon.proxy_addr(), "/pkgproxy/v1/certificate.pem").await;
    let lxc = LxcSandbox::new(&[("test", &format!("https://{}/lxd/test", daemon.proxy_addr()))]);
    lxc.pin("test", std::str::from_utf8(&pem.body).unwrap());
    lxc
}

/// Where `snap download` stops against a fake store: the store's keys are
/// not the Canonical root it trusts (everything before was served).
const SNAP_TRUST_ROOT: &str = "cannot decode public key";

/// `bundle` with the bytes whose SHA-256 is `old` replaced by `new`, and
/// its manifest (and the manifest's sum) rewritten to match: a bundle
/// changed by someone who knows its format.
pub(crate) fn with_blob_replaced(bundle: &[u8], old: &str, new: &[u8]) -> Vec<u8> {
    let new_sha = hex::encode(Sha256::digest(new));
    let mut files = entries_of(bundle);
    let mut manifest: serde_json::Value = serde_json::from_slice(&files[0].1).unwrap();
    let items = manifest["items"].as_array_mut().unwrap();
    let changed = items.iter_mut().filter(|item| item["sha256"] == old).map(|item| {
        item["sha256"] = new_sha.clone().into();
        item["size"] = new.len().into();
    });
    assert!(changed.count() > 0, "no item has {old}");
    files[0].1 = serde_json::to_vec(&manifest).unwrap();
    files[1].1 = hex::encode(Sha256::digest(&files[0].1)).into_bytes();
    for (name, bytes) in &mut files {
        if *name == format!("blobs/{old}") {
            (*name, *bytes) = (format!("blobs/{new_sha}"), new.to_vec());
        }
    }
    tar_of_files(&files)
}

/// Where the data of the tar entry `name` starts in `tar`.
pub(crate) fn position_of(tar: &[u8], name: &str) -> u64 {
    let mut archive = tar::Archive::new(tar);
    let entry =
        archive.entries().unwrap().map(Result::unwrap).find(|entry| entry.path().unwrap().to_str() == Some(name));
    entry.unwrap_or_else(|| panic!("{name} is not in the bundle")).raw_file_position()
}
