//! The fake as the real `lxc` 5.0.2 sees it (no pkgproxy: an `http://`
//! remote straight at the fake), and the knobs over plain HTTP.

use std::time::{Duration, Instant};

use super::*;
use crate::client::{proxy_request, send};
use crate::lxc::LxcSandbox;

const SERIAL: &str = "20240101";

/// A fake with `SERIAL` published, and an lxc whose remote `ss` is it.
async fn origin_and_lxc(image: &LxdImage) -> (FakeSimplestreams, LxcSandbox) {
    let origin = FakeSimplestreams::start().await;
    origin.publish(SERIAL, image);
    let lxc = LxcSandbox::new(&[("ss", &origin.root())]);
    (origin, lxc)
}

fn paths(origin: &FakeSimplestreams) -> Vec<String> {
    origin.requests().into_iter().map(|r| r.path).collect()
}

fn item_path(origin: &FakeSimplestreams, suffix: &str) -> String {
    let items = origin.items(SERIAL);
    items.into_iter().map(|(path, _, _)| path).find(|path| path.ends_with(suffix)).expect("the item")
}

#[tokio::test(flavor = "multi_thread")]
async fn lxc_lists_a_container_and_a_vm_image_by_their_combined_fingerprints() {
    let image = LxdImage::build("noble", None);
    let (origin, lxc) = origin_and_lxc(&image).await;
    let listed = lxc.list("ss");
    assert!(listed.success, "{}", listed.stderr);
    let images = listed.json();
    let of_type = |kind: &str| images.as_array().unwrap().iter().find(|i| i["type"] == kind).cloned().unwrap();
    let (container, vm) = (of_type("container"), of_type("virtual-machine"));
    assert_eq!(container["fingerprint"].as_str(), origin.container_fingerprint(SERIAL).as_deref());
    assert_eq!(vm["fingerprint"].as_str(), origin.vm_fingerprint(SERIAL).as_deref());
    assert_eq!(container["size"], image.meta.len() + image.squashfs.len());
    assert_eq!(container["properties"]["serial"], SERIAL);
    assert!(container["aliases"].as_array().unwrap().iter().any(|a| a["name"] == "testos"), "{container}");
    let index = format!("{ROOT}/{INDEX_PATH}");
    assert_eq!(paths(&origin), [index, format!("{ROOT}/{PRODUCTS_PATH}")], "the index, then the products file");
    let first = &origin.requests()[0];
    assert!(first.header("user-agent").is_some_and(|ua| ua.starts_with("LXD 5.0.2")), "{first:?}");
    assert_eq!(first.header("if-none-match"), None, "lxc never revalidates");
}

#[tokio::test(flavor = "multi_thread")]
async fn lxc_exports_the_origin_s_bytes_for_the_container_and_the_vm() {
    let image = LxdImage::build("noble", None);
    let (origin, lxc) = origin_and_lxc(&image).await;
    let started = Instant::now();
    let exported = lxc.export("ss:testos", "container");
    assert!(exported.success, "{}", exported.stderr);
    assert!(
        started.elapsed() < Duration::from_secs(5),
        "the http://http:// attempt fails fast: {:?}",
        started.elapsed()
    );
    let names_and_bytes = |name: &str| lxc.exported(name).into_iter().map(|(n, b)| (n, Bytes::from(b))).collect();
    let expected = |root: &Bytes, suffix: &str| {
        let name = |path: String| path.rsplit('/').next().unwrap().to_string();
        vec![
            (name(item_path(&origin, "-lxd.tar.xz")), image.meta.clone()),
            (name(item_path(&origin, suffix)), root.clone()),
        ]
    };
    let container: Vec<(String, Bytes)> = names_and_bytes("container");
    assert_eq!(container, expected(&image.squashfs, ".squashfs"));
    assert_eq!(origin.file_requests(), 2, "{:#?}", paths(&origin));

    let exported = lxc.export_vm("ss:testos", "vm");
    assert!(exported.success, "{}", exported.stderr);
    let vm: Vec<(String, Bytes)> = names_and_bytes("vm");
    assert_eq!(vm, expected(&image.disk, ".img"));
}

#[tokio::test(flavor = "multi_thread")]
async fn a_corrupt_short_or_long_file_fails_the_export_with_a_hash_mismatch() {
    let (origin, lxc) = origin_and_lxc(&LxdImage::build("noble", None)).await;
    for knob in ["corrupt", "short", "long"] {
        origin.set_corrupt(knob == "corrupt");
        origin.set_short(knob == "short");
        origin.set_long(knob == "long");
        let failed = lxc.export("ss:testos", knob);
        assert!(!failed.success, "{knob}");
        assert!(failed.stderr.contains("Hash mismatch"), "{knob}: {}", failed.stderr);
        assert!(lxc.exported(knob).is_empty(), "{knob}: lxc leaves nothing behind");
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn lxc_follows_the_same_host_redirect_and_still_exports() {
    let image = LxdImage::build("noble", None);
    let (origin, lxc) = origin_and_lxc(&image).await;
    origin.set_redirect(true);
    let exported = lxc.export("ss:testos", "out");
    assert!(exported.success, "{}", exported.stderr);
    assert!(lxc.exported("out").iter().any(|(_, bytes)| bytes == image.squashfs.as_ref()));
    let squashfs = item_path(&origin, ".squashfs");
    let asked = paths(&origin);
    assert!(asked.contains(&format!("{ROOT}/{squashfs}")) && asked.contains(&format!("{ROOT}/redirected/{squashfs}")));
}

#[tokio::test(flavor = "multi_thread")]
async fn lxc_skips_the_escaping_item_and_exports_testos_without_fetching_it() {
    let (origin, lxc) = origin_and_lxc(&LxdImage::build("noble", None)).await;
    origin.add_escaping_item();
    let exported = lxc.export("ss:testos", "out");
    assert!(exported.success, "{}", exported.stderr);
    assert!(!paths(&origin).iter().any(|path| path.contains("escaped")), "{:#?}", paths(&origin));
    let addr = origin.addr().to_string();
    let target = send(&addr, "GET", "/escaped/evil.squashfs", &[], b"").await;
    assert_eq!((target.status, target.body.as_ref()), (200, &b"outside the remote"[..]));
    let products = send(&addr, "GET", &format!("{ROOT}/{PRODUCTS_PATH}"), &[], b"").await;
    assert!(String::from_utf8_lossy(&products.body).contains("../../escaped/evil.squashfs"));
}

#[tokio::test(flavor = "multi_thread")]
async fn a_forced_status_fails_lxc_s_listing() {
    let (origin, lxc) = origin_and_lxc(&LxdImage::build("noble", None)).await;
    origin.set_status(503);
    let listed = lxc.list("ss");
    assert!(!listed.success && listed.stderr.contains("503 Service Unavailable"), "{}", listed.stderr);
}

#[tokio::test(flavor = "multi_thread")]
async fn the_products_file_revalidates_by_etag_or_date_and_changes_with_each_publish() {
    let origin = FakeSimplestreams::start().await;
    origin.publish(SERIAL, &LxdImage::build("noble", None));
    let (addr, path) = (origin.addr().to_string(), format!("{ROOT}/{PRODUCTS_PATH}"));
    let first = send(&addr, "GET", &path, &[], b"").await;
    let (etag, date) = (first.header("etag").unwrap().to_string(), first.header("last-modified").unwrap().to_string());
    assert_eq!(send(&addr, "GET", &path, &[("if-none-match", &etag)], b"").await.status, 304);
    assert_eq!(send(&addr, "GET", &path, &[("if-modified-since", &date)], b"").await.status, 304);

    origin.publish("20240102", &LxdImage::build("next", None));
    let moved = send(&addr, "GET", &path, &[("if-none-match", &etag)], b"").await;
    assert_eq!(moved.status, 200);
    assert!(String::from_utf8_lossy(&moved.body).contains("20240102"));
    assert_eq!(send(&addr, "GET", &path, &[("if-modified-since", &date)], b"").await.status, 200);

    origin.set_validators(false);
    let bare = send(&addr, "GET", &path, &[("if-none-match", &etag)], b"").await;
    assert_eq!((bare.status, bare.header("etag"), bare.header("last-modified")), (200, None, None));
}

#[tokio::test(flavor = "multi_thread")]
async fn a_deleted_serial_leaves_the_products_file_and_its_files_404() {
    let origin = FakeSimplestreams::start().await;
    origin.publish(SERIAL, &LxdImage::build("noble", None));
    let squashfs = item_path(&origin, ".squashfs");
    origin.delete(SERIAL);
    let addr = origin.addr().to_string();
    let products = send(&addr, "GET", &format!("{ROOT}/{PRODUCTS_PATH}"), &[], b"").await;
    assert!(!String::from_utf8_lossy(&products.body).contains(SERIAL));
    assert_eq!(send(&addr, "GET", &format!("{ROOT}/{squashfs}"), &[], b"").await.status, 404);
    assert!(origin.items(SERIAL).is_empty());
}

#[tokio::test(flavor = "multi_thread")]
async fn short_and_long_bodies_are_whole_by_their_content_length() {
    let image = LxdImage::build("noble", None);
    let origin = FakeSimplestreams::start().await;
    origin.publish(SERIAL, &image);
    let (addr, path) = (origin.addr().to_string(), format!("{ROOT}/{}", item_path(&origin, ".squashfs")));
    for (short, long) in [(true, false), (false, true)] {
        origin.set_short(short);
        origin.set_long(long);
        let answer = send(&addr, "GET", &path, &[], b"").await;
        let length: usize = answer.header("content-length").unwrap().parse().unwrap();
        assert!(answer.complete && length == answer.body.len() && length != image.squashfs.len());
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn a_trickled_file_sends_its_headers_at_once_and_its_body_slowly() {
    let origin = FakeSimplestreams::start().await;
    origin.publish(SERIAL, &LxdImage::build("noble", Some(4 * 64 * 1024)));
    origin.set_trickle(Some(Duration::from_millis(100)));
    let addr = origin.addr().to_string();
    let url = format!("http://{addr}{ROOT}/{}", item_path(&origin, ".squashfs"));
    let started = Instant::now();
    let answer = proxy_request(&addr, "GET", &url, &[]).await;
    let headers = started.elapsed();
    let body = answer.into_body().collect().await.unwrap().to_bytes();
    assert_eq!(body.len(), 4 * 64 * 1024);
    assert!(started.elapsed() >= Duration::from_millis(400), "four chunks, 100 ms apart: {:?}", started.elapsed());
    assert!(started.elapsed() - headers >= Duration::from_millis(300), "headers first: {headers:?}");
}
