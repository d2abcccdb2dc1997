//! pkgproxy as an HTTP/1.1 proxy: ranges and conditionals answered from the
//! cache (RFC 9110), refusals of what it must not proxy, pipelining, CONNECT.

use std::time::Duration;

use crate::common::{archive, origin_and_daemon, origin_and_server, sha256, REVALIDATE_FLOOR};
use crate::inproc::Server;
use pkgproxy_cache::Clock;
use pkgproxy_metrics::{CacheGauge, ClientCounter, UpstreamCounter};
use pkgproxy_testkit::client::{first_status, proxy_fetch, proxy_get, raw_exchange};
use pkgproxy_testkit::{AptRepo, Origin, RefusingPort};

#[tokio::test(flavor = "multi_thread")]
async fn ranges_and_conditionals_from_the_cache_follow_rfc_9110() {
    let (repo, origin, server) = origin_and_server().await;
    let url = format!("{}{}", origin.url(), repo.deb_url_path("pkgproxy-small1"));
    let deb = std::fs::read(repo.deb_path("pkgproxy-small1")).unwrap();
    let len = deb.len();
    let proxy = server.proxy_addr();

    let full = proxy_get(proxy, &url, &[]).await;
    assert_eq!(full.status, 200);
    assert_eq!(full.body, deb);
    let etag = full.header("etag").expect("an ETag from the origin").to_string();
    let last_modified = full.header("last-modified").expect("Last-Modified").to_string();
    origin.clear_requests();

    let part = proxy_get(proxy, &url, &[("range", "bytes=10-19")]).await;
    assert_eq!(part.status, 206);
    assert_eq!(part.header("content-range"), Some(format!("bytes 10-19/{len}").as_str()));
    assert_eq!(part.body, deb[10..20]);

    let resume = proxy_get(proxy, &url, &[("range", "bytes=100-"), ("if-range", &last_modified)]).await;
    assert_eq!(resume.status, 206, "apt's resume with If-Range of the same date");
    assert_eq!(resume.body, deb[100..]);

    let suffix = proxy_get(proxy, &url, &[("range", "bytes=-5")]).await;
    assert_eq!(suffix.status, 206);
    assert_eq!(suffix.body, deb[len - 5..]);

    let changed = proxy_get(proxy, &url, &[("range", "bytes=100-"), ("if-range", "\"another\"")]).await;
    assert_eq!(changed.status, 200, "a stale If-Range gets the whole body");
    assert_eq!(changed.body, deb);

    let beyond = proxy_get(proxy, &url, &[("range", &format!("bytes={len}-"))]).await;
    assert_eq!(beyond.status, 416);
    assert_eq!(beyond.header("content-range"), Some(format!("bytes */{len}").as_str()));

    let several = proxy_get(proxy, &url, &[("range", "bytes=0-1,5-6")]).await;
    assert_eq!(several.status, 206, "a multipart answer");
    assert!(several.header("content-type").is_some_and(|t| t.starts_with("multipart/byteranges; boundary=")));

    let inm = proxy_get(proxy, &url, &[("if-none-match", &etag)]).await;
    assert_eq!(inm.status, 304);
    assert!(inm.body.is_empty());
    assert_eq!(inm.header("etag"), Some(etag.as_str()));

    let ims = proxy_get(proxy, &url, &[("if-modified-since", &last_modified)]).await;
    assert_eq!(ims.status, 304);
    let older = proxy_get(proxy, &url, &[("if-modified-since", "Thu, 01 Jan 1970 00:00:00 GMT")]).await;
    assert_eq!(older.status, 200);

    let head = proxy_fetch(proxy, "HEAD", &url, &[]).await;
    assert_eq!(head.status, 200);
    assert_eq!(head.header("content-length"), Some(len.to_string().as_str()));
    assert!(head.body.is_empty());

    assert_eq!(origin.requests().len(), 0, "all of these are answered from the cache");
}

#[tokio::test(flavor = "multi_thread")]
async fn a_client_reading_a_large_hit_slowly_does_not_make_pkgproxy_buffer_it() {
    use http_body_util::BodyExt;
    let (repo, origin, daemon) = origin_and_daemon().await;
    let url = format!("{}{}", origin.url(), repo.deb_url_path("pkgproxy-big"));
    assert_eq!(proxy_get(daemon.proxy_addr(), &url, &[]).await.status, 200);
    let before = daemon.rss_kib();
    // Four clients take the first bytes of the 20 MiB hit, then stop reading.
    let mut stalled = Vec::new();
    for _ in 0..4 {
        let mut body = pkgproxy_testkit::client::proxy_request(daemon.proxy_addr(), "GET", &url, &[]).await.into_body();
        body.frame().await.expect("a first frame").expect("data");
        stalled.push(body);
    }
    // Meanwhile a fifth client takes all 20 MiB: pkgproxy was free to read
    // ahead for the stalled ones all that time, had it been buffering.
    let whole = proxy_get(daemon.proxy_addr(), &url, &[]).await;
    assert_eq!(whole.body.len() as u64, std::fs::metadata(repo.deb_path("pkgproxy-big")).unwrap().len());
    let grown = daemon.rss_kib().saturating_sub(before);
    assert!(grown < 16 * 1024, "pkgproxy grew by {grown} KiB for four stalled 20 MiB downloads");
    drop(stalled);
}

#[tokio::test(flavor = "multi_thread")]
async fn a_range_on_a_miss_is_served_from_the_download_in_progress() {
    let (repo, origin, server) = origin_and_server().await;
    let url = format!("{}{}", origin.url(), repo.deb_url_path("pkgproxy-big"));
    let deb = std::fs::read(repo.deb_path("pkgproxy-big")).unwrap();
    let part = proxy_get(server.proxy_addr(), &url, &[("range", "bytes=1000-1999")]).await;
    assert_eq!(part.status, 206);
    assert_eq!(part.body, deb[1000..2000]);
    // The whole file was fetched once, for the cache, without a Range.
    let seen = origin.requests_matching("pkgproxy-big");
    assert_eq!(seen.len(), 1);
    assert!(seen[0].header("range").is_none());
}

/// RFC 9110 §14.6, as dnf asks for zchunk metadata: several ranges of a
/// held file are one `206` of `multipart/byteranges`, which curl fetches
/// and Python's email parser reads part by part; a large part goes by the
/// kernel. None left is a `416`; too many ranges, a `200` of the whole.
#[tokio::test(flavor = "multi_thread")]
async fn several_ranges_of_a_held_file_are_one_multipart_answer_curl_and_python_read() {
    let (repo, origin, server) = origin_and_server().await;
    let url = format!("{}{}", origin.url(), repo.deb_url_path("pkgproxy-big"));
    let deb = std::fs::read(repo.deb_path("pkgproxy-big")).unwrap();
    let len = deb.len();
    let proxy = server.proxy_addr();
    assert_eq!(proxy_get(proxy, &url, &[]).await.status, 200);
    origin.clear_requests();

    let before = kernel_sent(&server).await;
    let ranges = "0-9,20-29,100-199,1000000-3999999";
    let curled = curl_ranges(proxy, &url, ranges).await;
    assert_eq!(curled.status, 206, "{}", curled.heads);
    assert_eq!(curled.header("x-pkgproxy-cache"), Some("hit"));
    assert_eq!(curled.header("content-range"), None, "each part has its own");
    assert_eq!(curled.header("content-length"), Some(curled.body.len().to_string().as_str()), "exact");
    let wanted = [(0, 9), (20, 29), (100, 199), (1_000_000, 3_999_999)];
    assert_parts(&curled, &deb, &wanted, "application/octet-stream");
    let by_kernel = kernel_sent(&server).await - before;
    assert!(by_kernel >= 3_000_000, "the large part went by the kernel, {by_kernel} bytes did");

    // Overlapping ranges are one part; one range left is a plain 206.
    let coalesced = curl_ranges(proxy, &url, "100-199,0-9,150-300").await;
    assert_parts(&coalesced, &deb, &[(100, 300), (0, 9)], "application/octet-stream");
    let one_left = proxy_get(proxy, &url, &[("range", &format!("bytes=10-19, {len}-"))]).await;
    assert_eq!(one_left.status, 206);
    assert_eq!(one_left.header("content-range"), Some(format!("bytes 10-19/{len}").as_str()));
    assert_eq!(one_left.body, deb[10..20]);

    let none_left = proxy_get(proxy, &url, &[("range", &format!("bytes={len}-,{}-{}", len + 10, len + 20))]).await;
    assert_eq!(none_left.status, 416);
    assert_eq!(none_left.header("content-range"), Some(format!("bytes */{len}").as_str()));

    let many = (0..1001).map(|n| format!("{}-{}", n * 10, n * 10 + 1)).collect::<Vec<_>>().join(",");
    let too_many = proxy_get(proxy, &url, &[("range", &format!("bytes={many}"))]).await;
    assert_eq!(too_many.status, 200, "more than 1,000 ranges: the whole body");
    assert!(too_many.body == deb);
    let thrice = proxy_get(proxy, &url, &[("range", "bytes=0-,0-,0-0")]).await;
    assert_eq!((thrice.status, thrice.body.len()), (200, len), "more than twice the body: the whole body");

    let stale = proxy_get(proxy, &url, &[("range", "bytes=0-9,20-29"), ("if-range", "\"another\"")]).await;
    assert_eq!(stale.status, 200, "a stale If-Range: the whole body");
    let head = proxy_fetch(proxy, "HEAD", &url, &[("range", "bytes=0-9,20-29")]).await;
    assert_eq!(head.status, 200, "RFC 9110 §14.2: a range is for GET");
    assert_eq!(head.header("content-length"), Some(len.to_string().as_str()));
    assert!(head.body.is_empty());
    assert_eq!(origin.requests().len(), 0, "all of these are answered from the cache");
}

/// Several ranges of a file still downloading: each part is sent as its
/// bytes arrive, so parts early in the file come long before the download
/// ends; a part that ends the file comes once it is in and checked.
#[tokio::test(flavor = "multi_thread")]
async fn several_ranges_of_a_download_in_progress_are_sent_as_their_bytes_arrive() {
    let root = tempfile::tempdir().unwrap();
    let body: Vec<u8> = (0..3_000_000u32).map(|i| (i.wrapping_mul(2_654_435_761) >> 24) as u8).collect();
    let path = "debian/pool/main/s/slow_1_all.deb";
    put_file(root.path(), path, &body, std::time::SystemTime::now() - Duration::from_secs(86_400));
    let origin = Origin::serve(root.path()).await;
    let server = Server::start(Some(&archive("local", &[format!("{}/debian", origin.url())]))).await;
    let proxy = server.proxy_addr().to_string();
    let url = format!("{}/{path}", origin.url());
    // Six seconds at the origin's pace; the first client starts it.
    origin.set_rate_limit(Some(500_000));
    let first = pkgproxy_testkit::client::proxy_request(&proxy, "GET", &url, &[]).await;
    assert_eq!(first.status(), 200);

    let started = std::time::Instant::now();
    let late = tokio::spawn({
        let (proxy, url) = (proxy.clone(), url.clone());
        async move { curl_ranges(&proxy, &url, "0-9,-100").await }
    });
    let early = curl_ranges(&proxy, &url, "0-9,20-29,100-199,200000-299999").await;
    let took = started.elapsed();
    assert_eq!(early.status, 206, "{}", early.heads);
    assert_eq!(early.header("x-pkgproxy-cache"), Some("miss"), "served from the download");
    assert_parts(&early, &body, &[(0, 9), (20, 29), (100, 199), (200_000, 299_999)], "application/octet-stream");
    assert!(took < Duration::from_secs(3), "early parts wait for their bytes, not the download: {took:?}");

    let late = late.await.unwrap();
    assert_eq!(late.header("x-pkgproxy-cache"), Some("miss"), "served from the download");
    assert_parts(&late, &body, &[(0, 9), (2_999_900, 2_999_999)], "application/octet-stream");
    assert!(started.elapsed() > Duration::from_secs(4), "the last byte came with the download's end");
    drop(first);
    assert_eq!(origin.count_path("slow_1_all.deb"), 1, "one download served them all");
}

#[tokio::test(flavor = "multi_thread")]
async fn what_pkgproxy_must_not_proxy_is_refused_with_the_documented_status() {
    let (_, origin, server) = origin_and_server().await;
    let proxy = server.proxy_addr();
    let base = origin.url();
    let cases: Vec<(String, u16, &str)> = vec![
        (
            "GET http://example.com/debian/pool/main/a.deb HTTP/1.1\r\nHost: example.com\r\n\r\n".into(),
            403,
            "foreign host",
        ),
        (
            "GET http://127.0.0.1:1/debian/pool/main/a.deb HTTP/1.1\r\nHost: 127.0.0.1:1\r\n\r\n".into(),
            403,
            "loopback target",
        ),
        (
            "GET http://169.254.169.254/latest/meta-data HTTP/1.1\r\nHost: 169.254.169.254\r\n\r\n".into(),
            403,
            "link-local target",
        ),
        (
            "GET http://[fe80::1]/debian/pool/a.deb HTTP/1.1\r\nHost: [fe80::1]\r\n\r\n".into(),
            403,
            "IPv6 link-local target",
        ),
        ("GET http://10.1.2.3/debian/pool/a.deb HTTP/1.1\r\nHost: 10.1.2.3\r\n\r\n".into(), 403, "private target"),
        (format!("GET {base}/debian/README HTTP/1.1\r\nHost: x\r\n\r\n"), 403, "not an archive path"),
        (format!("GET {base}/debian/pool/../../../etc/passwd HTTP/1.1\r\nHost: x\r\n\r\n"), 400, "dot-dot path"),
        (
            format!("GET {base}/debian/pool/%2e%2e/%2E%2E/etc/passwd HTTP/1.1\r\nHost: x\r\n\r\n"),
            400,
            "encoded dot-dot",
        ),
        (format!("GET {base}/debian/pool/a%00b.deb HTTP/1.1\r\nHost: x\r\n\r\n"), 400, "NUL"),
        (format!("GET {base}/debian/pool/{} HTTP/1.1\r\nHost: x\r\n\r\n", "a".repeat(3000)), 400, "over-long path"),
        (format!("POST {base}/debian/pool/a.deb HTTP/1.1\r\nHost: x\r\nContent-Length: 0\r\n\r\n"), 405, "POST"),
        ("CONNECT deb.debian.org:22 HTTP/1.1\r\nHost: deb.debian.org:22\r\n\r\n".into(), 403, "CONNECT to port 22"),
        ("CONNECT example.com:443 HTTP/1.1\r\nHost: example.com:443\r\n\r\n".into(), 403, "CONNECT to a foreign host"),
        ("GET /debian/dists/testing/InRelease HTTP/1.1\r\nHost: x\r\n\r\n".into(), 404, "origin-form request"),
    ];
    for (raw, want, what) in cases {
        let raw = raw.replacen("\r\n\r\n", "\r\nConnection: close\r\n\r\n", 1);
        let answer = raw_exchange(proxy, raw.as_bytes(), Duration::from_secs(5)).await;
        let text = String::from_utf8_lossy(&answer);
        assert_eq!(first_status(&answer), want, "{what}: {text}");
        if want != 405 {
            assert!(text.contains("pkgproxy"), "{what}: the body says why: {text}");
        }
    }
    assert_eq!(origin.requests().len(), 0, "nothing refused reached the origin");
    let info = server.info().await;
    assert_eq!(info.upstream.get(UpstreamCounter::Connections), 0);
}

#[tokio::test(flavor = "multi_thread")]
async fn pipelined_requests_are_answered_in_order() {
    let (repo, origin, server) = origin_and_server().await;
    let names = ["pkgproxy-small2", "pkgproxy-hello", "pkgproxy-small1"];
    let mut raw = String::new();
    for name in names {
        raw += &format!("GET {}{} HTTP/1.1\r\nHost: x\r\n\r\n", origin.url(), repo.deb_url_path(name));
    }
    raw += &format!(
        "GET {}{} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n",
        origin.url(),
        repo.deb_url_path(names[0])
    );
    let answer = raw_exchange(server.proxy_addr(), raw.as_bytes(), Duration::from_secs(20)).await;
    // Find each body in the byte stream, in request order.
    let mut at = 0;
    for name in names.iter().chain([&names[0]]) {
        let deb = std::fs::read(repo.deb_path(name)).unwrap();
        let found = answer[at..].windows(deb.len()).position(|w| w == deb.as_slice());
        let offset = found.unwrap_or_else(|| panic!("{name} missing or out of order"));
        at += offset + deb.len();
    }
    assert_eq!(at, answer.len(), "nothing after the last answer");
}

#[tokio::test(flavor = "multi_thread")]
async fn connect_to_port_443_of_an_archive_host_is_a_blind_tunnel() {
    let repo = AptRepo::shared_default();
    let origin = Origin::serve(repo.root()).await;
    // deb.debian.org:443 is sent to the origin, which speaks plain HTTP: a
    // blind tunnel does not care what flows through it.
    let config = format!("[upstream]\nresolve = [\"deb.debian.org:443:{}\"]\n", origin.addr());
    let server = Server::start(Some(&config)).await;
    let raw = "CONNECT deb.debian.org:443 HTTP/1.1\r\nHost: deb.debian.org:443\r\n\r\n\
               GET /debian/dists/testing/Release HTTP/1.1\r\nHost: deb.debian.org\r\nConnection: close\r\n\r\n";
    let answer = raw_exchange(server.proxy_addr(), raw.as_bytes(), Duration::from_secs(10)).await;
    let text = String::from_utf8_lossy(&answer);
    assert_eq!(first_status(&answer), 200, "{text}");
    let release = std::fs::read_to_string(repo.repo_dir().join("dists/testing/Release")).unwrap();
    assert!(text.contains(&release), "the tunnel carried the origin's answer: {text}");
    let info = server.info().await;
    assert_eq!(info.upstream.get(UpstreamCounter::Tunnels), 1);
    assert_eq!(info.cache.get(CacheGauge::Entries), 0, "tunnels are not cached");
}

#[tokio::test(flavor = "multi_thread")]
async fn an_upstream_404_is_passed_on_and_not_cached() {
    let (_, origin, server) = origin_and_server().await;
    let url = format!("{}/debian/pool/main/nothing_1.0_all.deb", origin.url());
    for _ in 0..2 {
        let answer = proxy_get(server.proxy_addr(), &url, &[]).await;
        assert_eq!(answer.status, 404);
    }
    assert_eq!(origin.count_path("nothing_1.0"), 2);
}

#[tokio::test(flavor = "multi_thread")]
async fn an_unreachable_upstream_is_a_502_with_a_reason() {
    let refusing = RefusingPort::new();
    let port = refusing.port();
    let config = archive("gone", &[format!("http://127.0.0.1:{port}/debian")]);
    let server = Server::start(Some(&config)).await;
    let url = format!("http://127.0.0.1:{port}/debian/pool/main/a.deb");
    let answer = proxy_get(server.proxy_addr(), &url, &[]).await;
    assert_eq!(answer.status, 502);
    assert!(String::from_utf8_lossy(&answer.body).contains("connect"), "{:?}", answer.body);
}

#[tokio::test(flavor = "multi_thread")]
async fn a_stale_index_is_served_when_the_mirror_is_down_or_too_busy() {
    let (_, origin, server) = origin_and_server().await;
    let url = format!("{}/debian/dists/testing/InRelease", origin.url());
    let first = proxy_get(server.proxy_addr(), &url, &[]).await;
    assert_eq!(first.status, 200);
    for status in [503, 429] {
        origin.set_status_override("/debian/dists/testing/InRelease", Some(status));
        server.clock().advance(REVALIDATE_FLOOR);
        let again = proxy_get(server.proxy_addr(), &url, &[("cache-control", "max-age=0")]).await;
        assert_eq!(again.status, 200, "{status}");
        assert_eq!(again.header("x-pkgproxy-cache"), Some("stale"), "{status}");
        assert_eq!(sha256(&again.body), sha256(&first.body));
    }
}

/// `[server] revalidate_floor`: a fleet asking `max-age=0` or `no-cache`
/// shares one revalidation per floor, those asking while it is under way
/// wait for it, and the first past the floor revalidates again.
#[tokio::test(flavor = "multi_thread")]
async fn a_fleet_asking_for_fresh_copies_shares_one_revalidation_per_floor() {
    let (_, origin, server) = origin_and_server().await;
    let path = "/debian/dists/testing/InRelease";
    let url = format!("{}{path}", origin.url());
    let first = proxy_get(server.proxy_addr(), &url, &[]).await;
    assert_eq!(first.status, 200);
    let proxy = server.proxy_addr();
    let asked = || twenty_asking_for_a_fresh_copy(proxy, &url, &first.body);

    // Within the floor of the miss: twenty clients, no upstream request.
    origin.clear_requests();
    server.clock().advance(REVALIDATE_FLOOR - Duration::from_secs(1));
    assert!(asked().await.iter().all(|cache| cache == "hit"));
    assert_eq!(origin.count_path(path), 0);

    // Past it: twenty at once make one revalidation, then hits again.
    server.clock().advance(Duration::from_secs(1));
    let past = asked().await;
    assert_eq!(origin.count_path(path), 1, "{past:?}");
    assert!(past.iter().any(|cache| cache == "revalidated"), "{past:?}");
    server.clock().advance(REVALIDATE_FLOOR - Duration::from_secs(1));
    assert!(asked().await.iter().all(|cache| cache == "hit"));
    assert_eq!(origin.count_path(path), 1);

    // A floor of 0 (a reload): every such client revalidates.
    let config =
        format!("{}\n[server]\nrevalidate_floor = \"0s\"\n", archive("local", &[format!("{}/debian", origin.url())]));
    server.reload_with(&config).await;
    for expected in [2, 3] {
        let again = proxy_get(server.proxy_addr(), &url, &[("cache-control", "max-age=0")]).await;
        assert_eq!(again.header("x-pkgproxy-cache"), Some("revalidated"));
        assert_eq!(origin.count_path(path), expected);
    }
}

/// Twenty clients at once asking `url` for a fresh copy (`max-age=0` or
/// `no-cache`), each answered `body`: how each was answered
/// (`X-Pkgproxy-Cache`).
async fn twenty_asking_for_a_fresh_copy(proxy: &str, url: &str, body: &[u8]) -> Vec<String> {
    let answers = futures_util::future::join_all((0..20).map(|n| async move {
        let directive = if n % 2 == 0 { "max-age=0" } else { "no-cache" };
        proxy_get(proxy, url, &[("cache-control", directive)]).await
    }))
    .await;
    for answer in &answers {
        assert_eq!((answer.status, sha256(&answer.body)), (200, sha256(body)));
    }
    answers.iter().map(|answer| answer.header("x-pkgproxy-cache").unwrap_or_default().to_owned()).collect()
}

/// Writes `bytes` at `path` under `root`, dated `mtime`.
fn put_file(root: &std::path::Path, path: &str, bytes: &[u8], mtime: std::time::SystemTime) {
    let file = root.join(path);
    std::fs::create_dir_all(file.parent().unwrap()).unwrap();
    std::fs::write(&file, bytes).unwrap();
    std::fs::File::options().write(true).open(&file).unwrap().set_modified(mtime).unwrap();
}

/// RFC 9110 §8.8.2.2 and §13.1.5: an `If-Range` date resumes a file only
/// when it is a strong validator (the file was fetched at least a second
/// after that date) and the name cannot stand for other bytes; apt's index
/// files (by-hash ones included) are sent whole. A matching tag resumes all.
#[tokio::test(flavor = "multi_thread")]
async fn an_if_range_date_resumes_only_a_file_that_cannot_be_another() {
    let root = tempfile::tempdir().unwrap();
    let body: Vec<u8> = (0..200_000u32).map(|i| (i * 7 % 251) as u8).collect();
    let day_old = std::time::SystemTime::now() - Duration::from_secs(86_400);
    let old = "debian/pool/main/o/old_1_all.deb";
    let fresh = "debian/pool/main/f/fresh_1_all.deb";
    let by_hash = format!("debian/dists/testing/main/binary-all/by-hash/SHA256/{}", sha256(&body));
    put_file(root.path(), old, &body, day_old);
    put_file(root.path(), &by_hash, &body, day_old);
    let origin = Origin::serve(root.path()).await;
    let server = Server::start(Some(&archive("local", &[format!("{}/debian", origin.url())]))).await;
    let proxy = server.proxy_addr();
    // Written in the very second pkgproxy's clock says it fetches it.
    put_file(root.path(), fresh, &body, server.clock().now());

    for (path, by_date) in [(fresh, 200), (old, 206), (by_hash.as_str(), 200)] {
        let url = format!("{}/{path}", origin.url());
        let full = proxy_get(proxy, &url, &[]).await;
        assert_eq!((full.status, full.body.as_ref()), (200, body.as_slice()), "{path}");
        let last_modified = full.header("last-modified").expect("Last-Modified").to_string();
        let etag = full.header("etag").expect("ETag").to_string();

        let dated = proxy_get(proxy, &url, &[("range", "bytes=100-"), ("if-range", &last_modified)]).await;
        assert_eq!(dated.status, by_date, "{path}: If-Range: {last_modified}");
        let wanted = if by_date == 206 { &body[100..] } else { &body[..] };
        assert_eq!(dated.body.as_ref(), wanted, "{path}");

        let tagged = proxy_get(proxy, &url, &[("range", "bytes=100-"), ("if-range", &etag)]).await;
        assert_eq!(tagged.status, 206, "{path}: If-Range: {etag}");
        assert_eq!(tagged.body.as_ref(), &body[100..], "{path}");
    }
}

/// The same rule on a download still in progress.
#[tokio::test(flavor = "multi_thread")]
async fn an_if_range_date_on_a_download_in_progress_follows_the_same_rule() {
    let root = tempfile::tempdir().unwrap();
    let body: Vec<u8> = (0..300_000u32).map(|i| (i * 13 % 241) as u8).collect();
    let origin = Origin::serve(root.path()).await;
    let server = Server::start(Some(&archive("local", &[format!("{}/debian", origin.url())]))).await;
    let proxy = server.proxy_addr();
    origin.set_rate_limit(Some(200_000));
    let day_old = std::time::SystemTime::now() - Duration::from_secs(86_400);

    for (name, by_date) in [("fresh", 200), ("old", 206)] {
        let path = format!("debian/pool/main/x/{name}_1_all.deb");
        put_file(root.path(), &path, &body, if name == "old" { day_old } else { server.clock().now() });
        let url = format!("{}/{path}", origin.url());
        // The first client's miss starts the download, which takes about
        // a second and a half at the origin's pace.
        let first = pkgproxy_testkit::client::proxy_request(proxy, "GET", &url, &[]).await;
        let last_modified = first.headers()["last-modified"].to_str().unwrap().to_string();
        let dated = proxy_get(proxy, &url, &[("range", "bytes=100-"), ("if-range", &last_modified)]).await;
        assert_eq!(dated.header("x-pkgproxy-cache"), Some("miss"), "{name}: served from the download");
        assert_eq!(dated.status, by_date, "{name}: If-Range: {last_modified}");
        let wanted = if by_date == 206 { &body[100..] } else { &body[..] };
        assert_eq!(dated.body.as_ref(), wanted, "{name}");
        drop(first);
    }
}

/// The freshness window of an index file runs on pkgproxy's clock: moved
/// past the window, the next request is a revalidation; no test waits.
#[tokio::test(flavor = "multi_thread")]
async fn an_index_file_is_revalidated_once_its_window_has_passed_on_the_clock() {
    let (_, origin, server) = origin_and_server().await;
    let url = format!("{}/debian/dists/testing/InRelease", origin.url());
    assert_eq!(proxy_get(server.proxy_addr(), &url, &[]).await.header("x-pkgproxy-cache"), Some("miss"));
    server.clock().advance(Duration::from_secs(299));
    assert_eq!(proxy_get(server.proxy_addr(), &url, &[]).await.header("x-pkgproxy-cache"), Some("hit"));
    assert_eq!(origin.count_path("/InRelease"), 1, "fresh for the default window of 5 minutes");
    server.clock().advance(Duration::from_secs(2));
    let again = proxy_get(server.proxy_addr(), &url, &[]).await;
    assert_eq!(again.header("x-pkgproxy-cache"), Some("revalidated"));
    let asked = origin.requests_matching("/InRelease");
    assert_eq!(asked.len(), 2);
    assert!(asked[1].header("if-none-match").is_some() || asked[1].header("if-modified-since").is_some());
}

/// Answers read off one connection: each head's status and its body, by
/// its `Content-Length`.
fn answers_in(mut stream: &[u8]) -> Vec<(u16, Vec<u8>)> {
    let mut answers = Vec::new();
    while let Some(end) = stream.windows(4).position(|w| w == b"\r\n\r\n") {
        let head = String::from_utf8_lossy(&stream[..end]).to_ascii_lowercase();
        let status = head[9..12].parse().unwrap();
        let len: usize = head
            .lines()
            .find_map(|line| line.strip_prefix("content-length:"))
            .map_or(0, |len| len.trim().parse().unwrap());
        let body = stream[end + 4..end + 4 + len].to_vec();
        answers.push((status, body));
        stream = &stream[end + 4 + len..];
    }
    assert!(stream.is_empty(), "{} bytes after the last answer", stream.len());
    answers
}

/// The bytes the kernel has sent to `server`'s clients so far.
async fn kernel_sent(server: &Server) -> u64 {
    server.info().await.clients.get(ClientCounter::KernelSentBytes)
}

#[tokio::test(flavor = "multi_thread")]
async fn large_hits_and_their_ranges_pipelined_on_one_connection_are_the_files_bytes_in_order() {
    let (repo, origin, server) = origin_and_server().await;
    let big_url = format!("{}{}", origin.url(), repo.deb_url_path("pkgproxy-big"));
    let small_url = format!("{}{}", origin.url(), repo.deb_url_path("pkgproxy-small1"));
    let big = std::fs::read(repo.deb_path("pkgproxy-big")).unwrap();
    let small = std::fs::read(repo.deb_path("pkgproxy-small1")).unwrap();
    assert_eq!(proxy_get(server.proxy_addr(), &big_url, &[]).await.body, big, "the miss");
    assert_eq!(proxy_get(server.proxy_addr(), &small_url, &[]).await.body, small);
    origin.clear_requests();
    let before = kernel_sent(&server).await;
    assert_eq!(proxy_get(server.proxy_addr(), &small_url, &[]).await.body, small, "a small hit");
    assert_eq!(kernel_sent(&server).await, before, "a small hit is copied, not sent by the kernel");

    // Whole bodies and ranges of every length, large (sent by the kernel)
    // and small (copied), back to back, one of them across many frames.
    let last = big.len() - 1;
    let asked: Vec<(&str, Option<String>)> = vec![
        (&big_url, None),
        (&big_url, Some("bytes=1000-5000999".into())),
        (&small_url, None),
        (&big_url, Some(format!("bytes={}-", last - 40_000))),
        (&big_url, Some("bytes=7-70".into())),
        (&big_url, None),
    ];
    let mut raw = String::new();
    for (url, range) in &asked {
        raw += &format!("GET {url} HTTP/1.1\r\nHost: x\r\n");
        if let Some(range) = range {
            raw += &format!("Range: {range}\r\n");
        }
        raw += "\r\n";
    }
    raw += &format!("GET {small_url} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n");
    let stream = raw_exchange(server.proxy_addr(), raw.as_bytes(), Duration::from_secs(60)).await;
    let answers = answers_in(&stream);
    let expected: Vec<(u16, &[u8])> = vec![
        (200, &big),
        (206, &big[1000..5_001_000]),
        (200, &small),
        (206, &big[last - 40_000..]),
        (206, &big[7..71]),
        (200, &big),
        (200, &small),
    ];
    assert_eq!(answers.len(), expected.len());
    for (n, ((status, body), (want_status, want))) in answers.iter().zip(&expected).enumerate() {
        assert_eq!(*status, *want_status, "answer {n}");
        assert!(body.as_slice() == *want, "answer {n}: {} bytes, not the file's", body.len());
    }
    assert_eq!(origin.requests().len(), 0, "all hits");
    // The large ones (32 KiB or more) took the kernel's path, and only
    // they: a change that made hyper copy frames would fail here, not
    // only show in a slower bench.
    let large: usize = expected.iter().map(|(_, body)| body.len()).filter(|&len| len >= 32 * 1024).sum();
    assert_eq!(kernel_sent(&server).await - before, large as u64, "the large bodies' bytes, sent by the kernel");
}

#[tokio::test(flavor = "multi_thread")]
async fn a_cached_body_cut_short_on_disk_while_open_ends_the_answer_early_and_the_connection_with_it() {
    let (repo, origin, server) = origin_and_server().await;
    let url = format!("{}{}", origin.url(), repo.deb_url_path("pkgproxy-big"));
    let big = std::fs::read(repo.deb_path("pkgproxy-big")).unwrap();
    assert_eq!(proxy_get(server.proxy_addr(), &url, &[]).await.status, 200, "the miss");
    assert_eq!(proxy_get(server.proxy_addr(), &url, &[]).await.status, 200, "a hit: its file is open now");
    let blob = server.cache_dir().join("blobs/sha256").join(&sha256(&big)[..2]).join(sha256(&big));
    std::fs::OpenOptions::new().write(true).open(&blob).unwrap().set_len(big.len() as u64 / 2).unwrap();

    let raw = format!("GET {url} HTTP/1.1\r\nHost: x\r\n\r\n");
    let (stream, closed) = pkgproxy_testkit::client::raw_until_closed(
        pkgproxy_testkit::client::connect(server.proxy_addr()).await,
        raw.as_bytes(),
        Duration::from_secs(20),
    )
    .await;
    assert!(closed, "the connection ends: the client knows the body is short");
    let head_end = stream.windows(4).position(|w| w == b"\r\n\r\n").unwrap() + 4;
    let sent = &stream[head_end..];
    assert!(sent.len() < big.len(), "never more than the file holds");
    assert!(sent == &big[..sent.len()], "what was sent is the file's start");
}

/// What curl got for a `Range` of several ranges.
struct Curled {
    status: u16,
    heads: String,
    body: Vec<u8>,
}

impl Curled {
    fn header(&self, name: &str) -> Option<&str> {
        self.heads.lines().find_map(|line| {
            let (field, value) = line.split_once(':')?;
            field.eq_ignore_ascii_case(name).then(|| value.trim())
        })
    }
}

/// curl's `-r RANGES` of `url` through `proxy`, off the test's threads.
async fn curl_ranges(proxy: &str, url: &str, ranges: &str) -> Curled {
    let dir = tempfile::tempdir().unwrap();
    let (heads, body) = (dir.path().join("heads"), dir.path().join("body"));
    let mut command = tokio::process::Command::new("curl");
    command.args(["-sS", "-D"]).arg(&heads).arg("-o").arg(&body);
    command.args(["-x", &format!("http://{proxy}"), "-r", ranges, url]);
    let output = command.output().await.expect("curl runs");
    assert!(output.status.success(), "curl -r {ranges}: {}", String::from_utf8_lossy(&output.stderr));
    let heads = std::fs::read_to_string(&heads).unwrap();
    let status = heads[9..12].parse().unwrap();
    Curled { status, heads, body: std::fs::read(&body).unwrap() }
}

/// Asserts that `curled` is a `multipart/byteranges` body of `wanted`
/// (inclusive ranges of `file`), in order, each part of `part_type`: read
/// here, and by Python's email parser.
fn assert_parts(curled: &Curled, file: &[u8], wanted: &[(usize, usize)], part_type: &str) {
    let content_type = curled.header("content-type").expect("a Content-Type");
    let boundary = content_type.strip_prefix("multipart/byteranges; boundary=").expect(content_type);
    let expected: Vec<(String, String)> = wanted
        .iter()
        .map(|&(start, end)| (format!("bytes {start}-{end}/{}", file.len()), sha256(&file[start..=end])))
        .collect();
    let parts = byteranges(boundary, &curled.body);
    assert_eq!(parts.len(), wanted.len(), "{}", curled.heads);
    for ((range, bytes), (headers, part)) in expected.iter().zip(&parts) {
        assert!(headers.contains(&format!("Content-Range: {range}\r\n")), "{headers}");
        assert!(headers.contains(&format!("Content-Type: {part_type}\r\n")), "{headers}");
        assert_eq!(&sha256(part), bytes, "{range}");
    }
    let script = "import email, hashlib, json, sys\n\
                  message = email.message_from_bytes(sys.stdin.buffer.read())\n\
                  assert message.is_multipart() and message.get_content_type() == 'multipart/byteranges'\n\
                  parts = [(part['Content-Range'], hashlib.sha256(part.get_payload(decode=True)).hexdigest())\n\
                           for part in message.get_payload()]\n\
                  print(json.dumps(parts))";
    let mut message = format!("Content-Type: {content_type}\r\n\r\n").into_bytes();
    message.extend_from_slice(&curled.body);
    let python = run_with_input(std::process::Command::new("python3").args(["-c", script]), &message);
    let read: Vec<(String, String)> = serde_json::from_slice(&python).expect("Python's parts");
    assert_eq!(read, expected, "as Python's email parser reads it");
}

/// What `command` prints given `input`, asserting it succeeds.
fn run_with_input(command: &mut std::process::Command, input: &[u8]) -> Vec<u8> {
    use std::io::Write;
    use std::process::Stdio;
    let mut child = command.stdin(Stdio::piped()).stdout(Stdio::piped()).stderr(Stdio::piped()).spawn().unwrap();
    child.stdin.take().unwrap().write_all(input).unwrap();
    let output = child.wait_with_output().unwrap();
    assert!(output.status.success(), "{}", String::from_utf8_lossy(&output.stderr));
    output.stdout
}

/// The parts of a `multipart/byteranges` body with `boundary`: each one's
/// header block and its bytes, read by RFC 2046 §5.1.1's delimiters.
fn byteranges(boundary: &str, mut body: &[u8]) -> Vec<(String, Vec<u8>)> {
    let find = |haystack: &[u8], needle: &[u8]| haystack.windows(needle.len()).position(|w| w == needle);
    let (first, delimiter) = (format!("--{boundary}\r\n"), format!("\r\n--{boundary}"));
    assert!(body.starts_with(first.as_bytes()), "the body opens with the first delimiter");
    body = &body[first.len()..];
    let mut parts = Vec::new();
    loop {
        let headers_end = find(body, b"\r\n\r\n").expect("a part's header block") + 4;
        let headers = String::from_utf8(body[..headers_end].to_vec()).unwrap();
        let bytes_end = headers_end + find(&body[headers_end..], delimiter.as_bytes()).expect("a delimiter after it");
        parts.push((headers, body[headers_end..bytes_end].to_vec()));
        body = &body[bytes_end + delimiter.len()..];
        if body == b"--\r\n" {
            return parts;
        }
        body = body.strip_prefix(b"\r\n").expect("another part, or the close");
    }
}
