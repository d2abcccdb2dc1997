//! The LXD side end to end: the real `lxc` (no daemon) listing and
//! exporting images through pkgproxy, as an `https://` simplestreams
//! remote with pkgproxy's certificate pinned, in front of a simplestreams
//! origin on 127.0.0.1 that the test kit generates.

use std::time::Duration;

use crate::common::PKGPROXY;
use crate::inproc::Server;
use pkgproxy_testkit::client::send;
use pkgproxy_testkit::{Daemon, FakeSimplestreams, LxcSandbox, LxdImage, RecordedRequest};

/// The remote's name in pkgproxy and in lxc.
const REMOTE: &str = "test";

fn config(origin: &FakeSimplestreams, extra: &str) -> String {
    format!("[lxd]\n{extra}\n[[lxd.remote]]\nname = \"{REMOTE}\"\nmirrors = [\"{}/releases\"]\n", origin.url())
}

/// An origin with one serial published.
async fn origin_with(serial: &str, image: &LxdImage) -> FakeSimplestreams {
    let origin = FakeSimplestreams::start().await;
    origin.publish(serial, image);
    origin
}

/// An lxc whose remote `test` is pkgproxy at `addr` over https, its
/// certificate pinned.
async fn lxc_for(addr: &str) -> LxcSandbox {
    let pem = send(addr, "GET", "/pkgproxy/v1/certificate.pem", &[], b"").await;
    assert_eq!(pem.status, 200);
    let lxc = LxcSandbox::new(&[(REMOTE, &format!("https://{addr}/lxd/{REMOTE}"))]);
    lxc.pin(REMOTE, std::str::from_utf8(&pem.body).unwrap());
    lxc
}

fn image_files(requests: &[RecordedRequest]) -> Vec<&RecordedRequest> {
    requests.iter().filter(|r| r.path.contains("/server/")).collect()
}

#[tokio::test(flavor = "multi_thread")]
async fn lxc_lists_and_exports_through_pkgproxy_and_a_second_export_asks_the_origin_nothing() {
    let image = LxdImage::build("noble", None);
    let origin = origin_with("20240101", &image).await;
    let daemon = Daemon::start(PKGPROXY, Some(&config(&origin, ""))).await;
    let lxc = lxc_for(daemon.proxy_addr()).await;

    let listed = lxc.list(REMOTE);
    assert!(listed.success, "{}", listed.stderr);
    assert!(listed.stdout.contains("testos"), "{}", listed.stdout);
    let info = lxc.run(&["image", "info", &format!("{REMOTE}:testos")]);
    assert!(info.success && info.stdout.contains("20240101"), "{}{}", info.stdout, info.stderr);

    let exported = lxc.export(&format!("{REMOTE}:testos"), "first");
    assert!(exported.success, "{}", exported.stderr);
    let files = lxc.exported("first");
    assert_eq!(files.len(), 2, "metadata and rootfs: {:?}", files.iter().map(|(n, _)| n).collect::<Vec<_>>());
    for (name, bytes) in &files {
        let published = [&image.meta, &image.squashfs].into_iter().any(|part| part.as_ref() == bytes.as_slice());
        assert!(published, "{name} is the origin's");
    }
    let log = daemon.log();
    assert!(!log.contains("panicked"), "{log}");

    origin.clear_requests();
    let again = lxc.export(&format!("{REMOTE}:testos"), "second");
    assert!(again.success, "{}", again.stderr);
    assert_eq!(lxc.exported("second"), files);
    assert!(origin.requests().is_empty(), "within the index window nothing: {:#?}", origin.requests());
}

#[tokio::test(flavor = "multi_thread")]
async fn the_json_comes_over_tls_and_the_files_over_plain_http_on_the_one_port() {
    let image = LxdImage::build("noble", None);
    let origin = origin_with("20240101", &image).await;
    let daemon = Daemon::start(PKGPROXY, Some(&config(&origin, ""))).await;
    let lxc = lxc_for(daemon.proxy_addr()).await;
    let exported = lxc.export(&format!("{REMOTE}:testos"), "out");
    assert!(exported.success, "{}", exported.stderr);
    // lxc tries each file over plain http on the remote's host and port
    // first: served there, it never falls back to https for them.
    let log = daemon.log();
    let tls = log.lines().filter(|l| l.contains("tls") && l.contains("index.json")).count();
    let plain = log.lines().filter(|l| l.contains("plain") && l.contains(".squashfs")).count();
    assert!(tls >= 1 && plain >= 1, "index over TLS, files over plain http:\n{log}");
}

#[tokio::test(flavor = "multi_thread")]
async fn a_corrupt_short_or_long_file_is_never_cached_nor_delivered_whole_and_the_next_honest_one_is() {
    let image = LxdImage::build("noble", None);
    let origin = origin_with("20240101", &image).await;
    let daemon = Daemon::start(PKGPROXY, Some(&config(&origin, ""))).await;
    let lxc = lxc_for(daemon.proxy_addr()).await;
    for (knob, name) in [(0, "corrupt"), (1, "short"), (2, "long")] {
        origin.set_corrupt(knob == 0);
        origin.set_short(knob == 1);
        origin.set_long(knob == 2);
        let failed = lxc.export(&format!("{REMOTE}:testos"), name);
        assert!(!failed.success, "{name}: lxc must fail");
        assert!(lxc.exported(name).iter().all(|(_, bytes)| bytes != image.squashfs.as_ref()), "{name}");
    }
    origin.set_long(false);
    let honest = lxc.export(&format!("{REMOTE}:testos"), "honest");
    assert!(honest.success, "{}", honest.stderr);
    assert!(lxc.exported("honest").iter().any(|(_, bytes)| bytes == image.squashfs.as_ref()));
    origin.clear_requests();
    assert!(lxc.export(&format!("{REMOTE}:testos"), "cached").success);
    assert!(image_files(&origin.requests()).is_empty(), "the honest answer was cached");
}

#[tokio::test(flavor = "multi_thread")]
async fn an_old_serial_still_exports_after_the_origin_deletes_it_and_the_new_one_shows_after_the_window() {
    let (old, new) = (LxdImage::build("old", None), LxdImage::build("new", None));
    let origin = origin_with("20240101", &old).await;
    let old_files = origin.items("20240101");
    let server = Server::start(Some(&config(&origin, "index_ttl = \"10m\""))).await;
    let lxc = lxc_for(server.proxy_addr()).await;
    assert!(lxc.export(&format!("{REMOTE}:testos"), "old").success);

    origin.publish("20240102", &new);
    origin.delete("20240101");
    let listed = lxc.list(REMOTE);
    assert!(listed.stdout.contains("20240101") && !listed.stdout.contains("20240102"), "{}", listed.stdout);
    let within = lxc.export(&format!("{REMOTE}:testos"), "within");
    assert!(within.success, "the old generation, from the cache: {}", within.stderr);
    assert_eq!(lxc.exported("within"), lxc.exported("old"));

    server.clock().advance(Duration::from_secs(601));
    let listed = lxc.list(REMOTE);
    assert!(listed.stdout.contains("20240102"), "the new generation after the window: {}", listed.stdout);
    // An LXD daemon still holding the old products file asks for the old
    // serial's files, which the origin no longer has.
    origin.clear_requests();
    for (path, _, size) in old_files.iter().filter(|(path, _, _)| !path.ends_with(".img")) {
        let answer = send(server.proxy_addr(), "GET", &format!("/lxd/{REMOTE}/{path}"), &[], b"").await;
        assert_eq!((answer.status, answer.body.len() as u64), (200, *size), "{path}");
    }
    assert!(image_files(&origin.requests()).is_empty(), "{:#?}", origin.requests());
    let newest = lxc.export(&format!("{REMOTE}:testos"), "new");
    assert!(newest.success, "{}", newest.stderr);
    assert!(lxc.exported("new").iter().any(|(_, bytes)| bytes == new.squashfs.as_ref()));

    // A refresh that fails changes nothing: the last generation is served.
    origin.set_status(503);
    server.clock().advance(Duration::from_secs(601));
    let listed = lxc.list(REMOTE);
    assert!(listed.success && listed.stdout.contains("20240102"), "{}{}", listed.stdout, listed.stderr);
}

#[tokio::test(flavor = "multi_thread")]
async fn ten_parallel_exports_make_one_origin_request_per_file_and_headers_come_at_once() {
    let image = LxdImage::build("big", Some(8 * 1024 * 1024));
    let origin = origin_with("20240101", &image).await;
    let daemon = Daemon::start(PKGPROXY, Some(&config(&origin, ""))).await;
    let lxc = std::sync::Arc::new(lxc_for(daemon.proxy_addr()).await);
    assert!(lxc.list(REMOTE).success);
    origin.set_trickle(Some(Duration::from_millis(20)));
    origin.clear_requests();
    let exports: Vec<_> = (0..10)
        .map(|i| {
            let lxc = std::sync::Arc::clone(&lxc);
            tokio::task::spawn_blocking(move || lxc.export(&format!("{REMOTE}:testos"), &format!("p{i}")))
        })
        .collect();
    // While the origin trickles, a client's headers arrive at once.
    let squashfs = image_path(&origin, ".squashfs");
    let started = std::time::Instant::now();
    let head = send(daemon.proxy_addr(), "HEAD", &format!("/lxd/{REMOTE}/{squashfs}"), &[], b"").await;
    assert_eq!(head.status, 200);
    assert!(started.elapsed() < Duration::from_secs(1), "{:?}", started.elapsed());
    for export in exports {
        let exported = export.await.unwrap();
        assert!(exported.success, "{}", exported.stderr);
    }
    let requests = origin.requests();
    let files = image_files(&requests);
    assert_eq!(files.len(), 2, "one origin request per file: {files:#?}");
}

/// The path of serial 20240101's file whose name ends with `suffix`.
fn image_path(origin: &FakeSimplestreams, suffix: &str) -> String {
    let items = origin.items("20240101");
    items.iter().find(|(path, _, _)| path.ends_with(suffix)).map(|(path, _, _)| path.clone()).expect("the item")
}

#[tokio::test(flavor = "multi_thread")]
async fn a_redirect_is_followed_inside_and_escaping_or_unknown_paths_are_refused_without_asking() {
    let image = LxdImage::build("noble", None);
    let origin = origin_with("20240101", &image).await;
    origin.add_escaping_item();
    origin.set_redirect(true);
    let daemon = Daemon::start(PKGPROXY, Some(&config(&origin, ""))).await;
    let lxc = lxc_for(daemon.proxy_addr()).await;
    let exported = lxc.export(&format!("{REMOTE}:testos"), "out");
    assert!(exported.success, "{}", exported.stderr);

    let addr = daemon.proxy_addr();
    let squashfs = image_path(&origin, ".squashfs");
    let answer = send(addr, "GET", &format!("/lxd/{REMOTE}/{squashfs}"), &[], b"").await;
    assert_eq!(answer.status, 200);
    assert!(answer.header("location").is_none(), "no Location reaches the client");

    origin.clear_requests();
    for path in ["escaped/evil.squashfs", "server/unknown.img", "streams/v1/com.ubuntu.cloud:released:aws.json"] {
        let refused = send(addr, "GET", &format!("/lxd/{REMOTE}/{path}"), &[], b"").await;
        assert_eq!(refused.status, 404, "{path}");
    }
    let climbing = send(addr, "GET", &format!("/lxd/{REMOTE}/../../escaped/evil.squashfs"), &[], b"").await;
    assert!(matches!(climbing.status, 400 | 404), "{}", climbing.status);
    assert!(origin.requests().is_empty(), "asked nothing: {:#?}", origin.requests());
    assert!(!origin.requests().iter().any(|r| r.path.contains("escaped")));
}

#[tokio::test(flavor = "multi_thread")]
async fn offline_everything_cached_exports_with_no_origin_traffic_and_an_uncached_file_is_a_503() {
    let origin = origin_with("20240101", &LxdImage::build("noble", None)).await;
    let daemon = Daemon::start(PKGPROXY, Some(&config(&origin, ""))).await;
    let lxc = lxc_for(daemon.proxy_addr()).await;
    assert!(lxc.export(&format!("{REMOTE}:testos"), "online").success);

    daemon.set_offline_mode("offline").await;
    origin.clear_requests();
    assert!(lxc.list(REMOTE).success);
    let offline = lxc.export(&format!("{REMOTE}:testos"), "offline");
    assert!(offline.success, "{}", offline.stderr);
    assert_eq!(lxc.exported("offline"), lxc.exported("online"));
    let disk = image_path(&origin, ".img");
    let uncached = send(daemon.proxy_addr(), "GET", &format!("/lxd/{REMOTE}/{disk}"), &[], b"").await;
    assert_eq!(uncached.status, 503);
    assert!(String::from_utf8_lossy(&uncached.body).contains("offline"));
    assert!(origin.requests().is_empty(), "{:#?}", origin.requests());
}

#[tokio::test(flavor = "multi_thread")]
async fn an_lxd_daemon_s_proxied_file_requests_are_served_verified_from_the_same_entries() {
    let image = LxdImage::build("noble", None);
    let origin = origin_with("20240101", &image).await;
    let daemon = Daemon::start(PKGPROXY, Some(&config(&origin, ""))).await;
    let squashfs = image_path(&origin, ".squashfs");
    // As LXD sends it through core.proxy_http: absolute URI, plain http.
    let url = format!("{}/releases/{squashfs}", origin.url());
    let proxied = send(daemon.proxy_addr(), "GET", &url, &[], b"").await;
    assert_eq!((proxied.status, proxied.body.as_ref()), (200, image.squashfs.as_ref()));
    origin.clear_requests();
    let relayed = send(daemon.proxy_addr(), "GET", &format!("/lxd/{REMOTE}/{squashfs}"), &[], b"").await;
    assert_eq!(relayed.body.as_ref(), image.squashfs.as_ref());
    assert!(image_files(&origin.requests()).is_empty(), "the same entry: {:#?}", origin.requests());

    origin.set_corrupt(true);
    let disk = image_path(&origin, ".img");
    let corrupt = send(daemon.proxy_addr(), "GET", &format!("{}/releases/{disk}", origin.url()), &[], b"").await;
    assert!(corrupt.status != 200 || corrupt.body.len() < image.disk.len(), "never a whole wrong file");
    let elsewhere = send(daemon.proxy_addr(), "GET", "http://example.invalid/releases/x", &[], b"").await;
    assert_eq!(elsewhere.status, 403, "not a remote's host: the apt side's policy");
}

/// `pkgproxyctl setup ARGS` with `lxc`'s configuration in its sandbox:
/// whether it succeeded, and what it printed.
fn setup(lxc: &LxcSandbox, args: &[&str]) -> (bool, String) {
    let output = std::process::Command::new(env!("CARGO_BIN_EXE_pkgproxyctl"))
        .arg("setup")
        .args(args)
        .env("LXD_CONF", lxc.conf_dir())
        .output()
        .unwrap();
    let printed = String::from_utf8_lossy(&output.stdout).into_owned() + &String::from_utf8_lossy(&output.stderr);
    (output.status.success(), printed)
}

#[tokio::test(flavor = "multi_thread")]
async fn pkgproxyctl_setup_lxd_remote_gives_working_remotes_including_the_craft_names() {
    let image = LxdImage::build("noble", None);
    let origin = origin_with("20240101", &image).await;
    let extra = format!(
        "[[lxd.remote]]\nname = \"craft-com.ubuntu.cloud-buildd\"\nmirrors = [\"{}/releases\"]\n",
        origin.url()
    );
    let daemon = Daemon::start(PKGPROXY, Some(&(config(&origin, "") + &extra))).await;
    let lxc = LxcSandbox::new(&[]);
    let stats = daemon.stats_socket().display().to_string();
    let ctl = |args: &[&str]| setup(&lxc, &[&["-stats-socket-path", &stats], args].concat());
    let (ok, printed) = ctl(&["lxd-remote", "--host", "127.0.0.1"]);
    assert!(ok, "{printed}");
    assert!(lxc.conf_dir().join("servercerts/craft-com.ubuntu.cloud-buildd.crt").exists());
    assert!(lxc.conf_dir().join("servercerts/pkgproxy-ubuntu.crt").exists(), "ubuntu is static: beside it");
    for remote in [REMOTE, "craft-com.ubuntu.cloud-buildd"] {
        let exported = lxc.export(&format!("{remote}:testos"), remote);
        assert!(exported.success, "{remote}: {}", exported.stderr);
    }
    let (ok, printed) = ctl(&["lxd", "--print", "--host", "10.0.3.1"]);
    assert!(ok, "{printed}");
    let port = daemon.proxy_addr().rsplit(':').next().unwrap().to_string();
    for line in [
        format!("Acquire::http::Proxy \"http://10.0.3.1:{port}/\";"),
        format!("Environment=SNAPPY_FORCE_API_URL=http://10.0.3.1:{port}/snap/"),
        format!("GOPROXY=http://10.0.3.1:{port}/go"),
    ] {
        assert!(printed.contains(&line), "{line} in:\n{printed}");
    }
    let (ok, _) = ctl(&["lxd-remote", "--undo", "--host", "127.0.0.1"]);
    assert!(ok);
    assert!(!lxc.conf_dir().join("servercerts/craft-com.ubuntu.cloud-buildd.crt").exists());
}

#[tokio::test(flavor = "multi_thread")]
async fn setup_lxd_remote_with_addr_asks_the_pkgproxy_there_and_needs_no_daemon_here() {
    let image = LxdImage::build("noble", None);
    let origin = origin_with("20240101", &image).await;
    let daemon = Daemon::start(PKGPROXY, Some(&config(&origin, ""))).await;
    let lxc = LxcSandbox::new(&[]);
    let no_daemon = ["-stats-socket-path", "/nonexistent/stats.sock", "-admin-socket-path", "/nonexistent/admin.sock"];
    let ctl =
        |args: &[&str]| setup(&lxc, &[&["lxd-remote", "-addr", daemon.proxy_addr()], &no_daemon[..], args].concat());
    let (ok, printed) = ctl(&["--print"]);
    assert!(ok, "{printed}");
    assert!(printed.contains(&format!("https://{}/lxd/{REMOTE}", daemon.proxy_addr())), "{printed}");
    assert!(printed.contains(daemon.info().await.certificate_pem.trim()), "its certificate, pinned: {printed}");

    let (ok, printed) = ctl(&[]);
    assert!(ok, "{printed}");
    let exported = lxc.export(&format!("{REMOTE}:testos"), REMOTE);
    assert!(exported.success, "{}", exported.stderr);
    let (ok, printed) = ctl(&["--undo"]);
    assert!(ok, "{printed}");
    assert!(!lxc.conf_dir().join(format!("servercerts/{REMOTE}.crt")).exists(), "taken back");
}

#[tokio::test(flavor = "multi_thread")]
async fn setup_lxd_remote_print_shows_the_remote_it_replaces_and_the_status_page_names_remotes_as_setup_does() {
    let image = LxdImage::build("noble", None);
    let origin = origin_with("20240101", &image).await;
    let daemon = Daemon::start(PKGPROXY, Some(&config(&origin, ""))).await;
    // The user's LXD holds a remote of that name elsewhere.
    let lxc = LxcSandbox::new(&[(REMOTE, "https://images.example.org")]);
    let no_daemon = ["-stats-socket-path", "/nonexistent/stats.sock", "-admin-socket-path", "/nonexistent/admin.sock"];
    let ctl =
        |args: &[&str]| setup(&lxc, &[&["lxd-remote", "-addr", daemon.proxy_addr()], &no_daemon[..], args].concat());
    let (ok, printed) = ctl(&["--print"]);
    assert!(ok, "{printed}");
    let remove = printed.find(&format!("lxc remote remove {REMOTE}   # was https://images.example.org"));
    let add = printed.find(&format!("lxc remote add {REMOTE} https://{}/lxd/{REMOTE}", daemon.proxy_addr()));
    assert!(remove.is_some() && remove < add, "the remove it does, before the add: {printed}");

    // The status page names each remote as setup does.
    let status = pkgproxy_testkit::client::get(daemon.proxy_addr(), "/pkgproxy/v1/status").await;
    let status = String::from_utf8_lossy(&status.body);
    assert!(status.contains(&format!("lxc remote add {REMOTE} https://")), "{status}");
    assert!(!status.contains(&format!("pkgproxy-{REMOTE}")), "{status}");
}
