//! pkgproxy nodes sharing one S3 bucket (a real moto server): what one node
//! fetched reaches the others from the bucket without the origin, also on
//! a node that is offline; a store that cannot be reached at start leaves a
//! node serving alone, and it says so.

use crate::common::{archive, pkgproxyctl, upstream_counts, PKGPROXY};
use pkgproxy_cluster::members::{self, Member};
use pkgproxy_testkit::client::{get, proxy_get};
use pkgproxy_testkit::{eventually, AptRepo, AptSandbox, Daemon, Origin, RefusingPort, S3Server};

pub(crate) fn cluster_section(endpoint: &str, bucket: &str, node: &str) -> String {
    format!(
        "[cluster]\nendpoint = {endpoint:?}\nbucket = {bucket:?}\nnode_id = {node:?}\n\
         access_key_id = \"testing\"\nsecret_access_key = \"testing\"\n"
    )
}

/// What the nodes of one test share: a fresh bucket on an S3 server, and an
/// origin serving the test archive.
struct Fleet {
    server: S3Server,
    bucket: String,
    repo: &'static AptRepo,
    origin: Origin,
    /// The archive's URL, as apt's sources name it.
    source: String,
}

impl Fleet {
    async fn new(bucket: &str) -> Fleet {
        let server = S3Server::start();
        let bucket = server.bucket(bucket);
        let repo = AptRepo::shared_default();
        let origin = Origin::serve(repo.root()).await;
        let source = format!("{}/debian", origin.url());
        Fleet { server, bucket, repo, origin, source }
    }

    /// What a node of this fleet connects with, for a test that writes
    /// to the bucket as a node would.
    fn cluster_config(&self, node: &str) -> pkgproxy_cluster::ClusterConfig {
        pkgproxy_cluster::ClusterConfig {
            endpoint: self.server.endpoint(),
            bucket: self.bucket.clone(),
            prefix: "pkgproxy".to_owned(),
            region: "us-east-1".to_owned(),
            credentials: pkgproxy_cluster::Credentials {
                access_key_id: "testing".to_owned(),
                secret_access_key: "testing".to_owned(),
                session_token: None,
            },
            node_id: node.to_owned(),
            peer_url: None,
            lease_ttl: pkgproxy_cluster::DEFAULT_LEASE_TTL,
            peer_secret: None,
            offline_poll: pkgproxy_cluster::switch::DEFAULT_POLL,
        }
    }

    /// Node `node`'s configuration: the archive, and `[cluster]` with
    /// `extra` lines.
    fn config(&self, node: &str, extra: &str) -> String {
        let apt = archive("local", std::slice::from_ref(&self.source));
        format!("{apt}{}{extra}", cluster_section(&self.server.endpoint(), &self.bucket, node))
    }
}

/// A real `apt-get update` and `download` of `package` through `apt`,
/// which gets the repository's bytes.
fn updates_and_downloads_the_archive_s_bytes(apt: &AptSandbox, repo: &AptRepo, package: &str) {
    apt.update().assert_success();
    apt.download(&[package]).assert_success();
    assert_eq!(std::fs::read(apt.downloaded(package)).unwrap(), std::fs::read(repo.deb_path(package)).unwrap());
}

/// The `cluster` part of a node's status JSON.
pub(crate) async fn cluster_status(daemon: &Daemon) -> serde_json::Value {
    let status = get(daemon.proxy_addr(), "/pkgproxy/v1/status").await;
    assert_eq!(status.status, 200);
    let json: serde_json::Value = serde_json::from_slice(&status.body).expect("status JSON");
    json["cluster"].clone()
}

#[tokio::test(flavor = "multi_thread")]
async fn what_one_node_fetched_is_served_by_the_others_from_the_bucket_even_offline() {
    let fleet = Fleet::new("cluster-share").await;
    let (repo, origin) = (fleet.repo, &fleet.origin);
    let config = |node: &str| fleet.config(node, "");
    let first = Daemon::start(PKGPROXY, Some(&config("first"))).await;
    let second = Daemon::start(PKGPROXY, Some(&config("second"))).await;
    let offline = Daemon::start_with(PKGPROXY, Some(&config("offline")), &["-offline"]).await;

    let path = repo.deb_url_path("pkgproxy-hello");
    let url = format!("{}{path}", origin.url());
    let fetched = proxy_get(first.proxy_addr(), &url, &[]).await;
    assert_eq!((fetched.status, fetched.header("x-pkgproxy-cache")), (200, Some("miss")));
    assert_eq!(origin.count_path(&path), 1);
    eventually("the first node publishes", || async {
        (cluster_status(&first).await["published"].as_u64() >= Some(1)).then_some(())
    })
    .await;

    for node in [&second, &offline] {
        let shared = proxy_get(node.proxy_addr(), &url, &[]).await;
        assert_eq!(shared.status, 200, "{}", node.log());
        assert!(shared.complete);
        assert_eq!(shared.body, fetched.body, "the same bytes");
        let status = cluster_status(node).await;
        assert_eq!(
            (status["shared_hits"].as_u64(), status["state"].as_str()),
            (Some(1), Some("connected")),
            "{status}"
        );
        let again = proxy_get(node.proxy_addr(), &url, &[]).await;
        assert_eq!(again.header("x-pkgproxy-cache"), Some("hit"), "cached locally from then on");
    }
    assert_eq!(origin.count_path(&path), 1, "only the first node asked the origin");
    // The peer endpoint answers only nodes of the cluster.
    let key = format!("apt/local{}", path.trim_start_matches("/debian"));
    let tail = format!("{}?key={}", pkgproxy_cluster::peer::TAIL_PATH, key.replace('/', "%2F"));
    assert_eq!(get(first.proxy_addr(), &tail).await.status, 403, "no token, no body");
    let page = get(second.proxy_addr(), "/").await;
    let page = String::from_utf8_lossy(&page.body);
    assert!(page.contains("cluster node <b>second</b>") && page.contains(">connected</span>"), "{page}");
    let metrics = second.metrics().await;
    assert!(metrics.contains("pkgproxy_cluster_shared_hits_total 1"), "{metrics}");
    assert!(metrics.contains("pkgproxy_cluster_degraded 0"), "{metrics}");
}

#[tokio::test(flavor = "multi_thread")]
async fn a_node_whose_store_cannot_be_reached_starts_and_serves_alone() {
    let repo = AptRepo::shared_default();
    let origin = Origin::serve(repo.root()).await;
    let closed = RefusingPort::new();
    let config = format!(
        "{}{}",
        archive("local", &[format!("{}/debian", origin.url())]),
        cluster_section(&closed.url(), "nowhere", "alone")
    );
    let node = Daemon::start(PKGPROXY, Some(&config)).await;
    let path = repo.deb_url_path("pkgproxy-small1");
    let answer = proxy_get(node.proxy_addr(), &format!("{}{path}", origin.url()), &[]).await;
    assert_eq!(answer.status, 200, "{}", node.log());
    assert_eq!(cluster_status(&node).await["state"].as_str(), Some("degraded"));
    assert!(node.log().contains("cluster store unreachable"), "{}", node.log());
    let info = pkgproxyctl(&node, &["info"]);
    let said = String::from_utf8_lossy(&info.stdout);
    assert!(said.contains("cluster: node alone on") && said.contains(": degraded;"), "{said}");
    // The peer endpoint answers only nodes of the cluster.
    let tail = format!("{}?key=apt%2Flocal%2Fpool%2Fx.deb", pkgproxy_cluster::peer::TAIL_PATH);
    assert_eq!(get(node.proxy_addr(), &tail).await.status, 404, "not connected: nothing to serve");
    assert!(node.metrics().await.contains("pkgproxy_cluster_degraded 1"));
}

/// An origin serving one big package at `path` (under `/debian/pool/`),
/// `mib` MiB of bytes no two runs of a test share with another test, paced
/// at `pace` bytes a second per connection so a download takes a while.
async fn paced_origin(path: &str, mib: u32, seed: u32, pace: u64) -> (tempfile::TempDir, Origin, Vec<u8>) {
    let root = tempfile::tempdir().unwrap();
    let body: Vec<u8> = (0..mib * 1024 * 1024).map(|i| (i.wrapping_mul(seed) >> 13) as u8).collect();
    let file = root.path().join(path.trim_start_matches('/'));
    std::fs::create_dir_all(file.parent().unwrap()).unwrap();
    std::fs::write(&file, &body).unwrap();
    let origin = Origin::serve(root.path()).await;
    origin.set_rate_limit(Some(pace));
    (root, origin, body)
}

#[tokio::test(flavor = "multi_thread")]
async fn thirty_clients_on_three_nodes_make_one_upstream_fetch_and_all_get_the_right_bytes() {
    use sha2::Digest;
    let server = S3Server::start();
    let bucket = server.bucket("cluster-fan-out");
    let path = "/debian/pool/main/b/big/big_1.0_all.deb";
    // A download lasting about two seconds: every node misses while it runs.
    let (_root, origin, body) = paced_origin(path, 32, 2_654_435_761, 16 * 1024 * 1024).await;
    let apt = archive("local", &[format!("{}/debian", origin.url())]);
    let config =
        |node: &str| format!("{apt}{}lease_ttl = \"2s\"\n", cluster_section(&server.endpoint(), &bucket, node));
    let nodes = [
        Daemon::start(PKGPROXY, Some(&config("one"))).await,
        Daemon::start(PKGPROXY, Some(&config("two"))).await,
        Daemon::start(PKGPROXY, Some(&config("three"))).await,
    ];
    let url = format!("{}{path}", origin.url());
    let clients: Vec<_> = (0..30)
        .map(|i| {
            let (proxy, url) = (nodes[i % 3].proxy_addr().to_string(), url.clone());
            tokio::spawn(async move { proxy_get(&proxy, &url, &[]).await })
        })
        .collect();
    let want = sha2::Sha256::digest(&body);
    for (i, client) in clients.into_iter().enumerate() {
        let answer = client.await.unwrap();
        assert_eq!(answer.status, 200, "client {i} of node {}: {}", i % 3, nodes[i % 3].log());
        assert!(answer.complete, "client {i}");
        assert_eq!(sha2::Sha256::digest(&answer.body), want, "client {i}: the right bytes");
    }
    assert_eq!(origin.count_path(path), 1, "one upstream fetch for the cluster");
    let mut peers_streamed = 0;
    for node in &nodes {
        let log = node.log();
        peers_streamed += usize::from(log.contains(pkgproxy_cluster::peer::TAIL_PATH));
    }
    assert!(peers_streamed >= 1, "the others streamed the body from the node fetching it");
    // The one way out still holds: the store and the peers are a way of
    // their own, and every request and connection the origin saw came
    // through the nodes' counted transports.
    let (mut requests, mut connections) = (0, 0);
    for node in &nodes {
        let (sent, opened) = upstream_counts(node).await;
        (requests, connections) = (requests + sent, connections + opened);
    }
    assert_eq!(requests, origin.requests().len() as u64);
    assert_eq!(connections, origin.connections());
}

/// The bytes of the partial downloads in `daemon`'s cache.
fn partial_bytes(daemon: &Daemon) -> u64 {
    std::fs::read_dir(daemon.cache_dir().join("tmp"))
        .map(|dir| dir.flatten().filter_map(|file| file.metadata().ok()).map(|meta| meta.len()).sum())
        .unwrap_or(0)
}

#[tokio::test(flavor = "multi_thread")]
async fn when_the_fetching_node_is_killed_another_takes_over_and_resumes_with_a_range() {
    use sha2::Digest;
    let server = S3Server::start();
    let bucket = server.bucket("cluster-takeover");
    let path = "/debian/pool/main/b/big/big_2.0_all.deb";
    let (_root, origin, body) = paced_origin(path, 16, 2_246_822_519, 4 * 1024 * 1024).await;
    let apt = archive("local", &[format!("{}/debian", origin.url())]);
    let config =
        |node: &str| format!("{apt}{}lease_ttl = \"2s\"\n", cluster_section(&server.endpoint(), &bucket, node));
    let mut fetching = Daemon::start(PKGPROXY, Some(&config("fetching"))).await;
    let others =
        [Daemon::start(PKGPROXY, Some(&config("second"))).await, Daemon::start(PKGPROXY, Some(&config("third"))).await];
    let url = format!("{}{path}", origin.url());

    // The first node takes the lease; the others' clients stream from it.
    let first_client = tokio::spawn({
        let (proxy, url) = (fetching.proxy_addr().to_string(), url.clone());
        async move { proxy_get(&proxy, &url, &[]).await }
    });
    eventually("the first node is fetching", || async { (partial_bytes(&fetching) > 0).then_some(()) }).await;
    let clients: Vec<_> = (0..6)
        .map(|i| {
            let (proxy, url) = (others[i % 2].proxy_addr().to_string(), url.clone());
            tokio::spawn(async move { proxy_get(&proxy, &url, &[]).await })
        })
        .collect();
    let forty_percent = body.len() as u64 * 2 / 5;
    eventually("40 % downloaded", || async { (partial_bytes(&fetching) >= forty_percent).then_some(()) }).await;
    fetching.kill9();
    let cut = first_client.await.unwrap();
    assert!(!cut.complete || cut.status != 200, "the killed node's client never gets a whole body");

    let want = sha2::Sha256::digest(&body);
    for (i, client) in clients.into_iter().enumerate() {
        let answer = client.await.unwrap();
        assert_eq!(answer.status, 200, "client {i}: {}", others[i % 2].log());
        assert!(answer.complete, "client {i}");
        assert_eq!(sha2::Sha256::digest(&answer.body), want, "client {i}: the right bytes");
    }
    let asked: Vec<_> = origin.requests_matching(path);
    let ranged = asked.iter().filter(|request| request.header("range").is_some()).count();
    assert_eq!((asked.len(), ranged), (2, 1), "one full request and one resumed with a Range: {asked:?}");
    let took_over = others.iter().filter(|node| node.log().contains("took over the fetch")).count();
    assert_eq!(took_over, 1, "one node took the fetch over");
}

/// A node's offline mode, as its status says.
async fn mode_of(daemon: &Daemon) -> String {
    let status = get(daemon.proxy_addr(), "/pkgproxy/v1/status").await;
    let json: serde_json::Value = serde_json::from_slice(&status.body).expect("status JSON");
    json["offline"]["mode"].as_str().unwrap_or_default().to_owned()
}

#[tokio::test(flavor = "multi_thread")]
async fn the_cluster_s_offline_switch_takes_every_node_offline_and_the_bucket_still_serves() {
    let fleet = Fleet::new("cluster-offline").await;
    let (repo, origin) = (fleet.repo, &fleet.origin);
    let config = |node: &str| fleet.config(node, "offline_poll = \"200ms\"\n");
    let (one, two) =
        (Daemon::start(PKGPROXY, Some(&config("one"))).await, Daemon::start(PKGPROXY, Some(&config("two"))).await);
    let shared = repo.deb_url_path("pkgproxy-hello");
    let unseen = repo.deb_url_path("pkgproxy-small2");
    let url = |path: &str| format!("{}{path}", origin.url());
    assert_eq!(proxy_get(one.proxy_addr(), &url(&shared), &[]).await.status, 200);
    eventually("the first node publishes", || async {
        (cluster_status(&one).await["published"].as_u64() >= Some(1)).then_some(())
    })
    .await;

    let set = pkgproxyctl(&one, &["offline", "offline", "--cluster"]);
    assert!(set.status.success(), "{}", String::from_utf8_lossy(&set.stderr));
    eventually("the other node follows", || async { (mode_of(&two).await == "offline").then_some(()) }).await;
    assert_eq!(mode_of(&one).await, "offline");
    let from_bucket = proxy_get(two.proxy_addr(), &url(&shared), &[]).await;
    assert_eq!(from_bucket.status, 200, "what the bucket holds is served offline: {}", two.log());
    for node in [&one, &two] {
        let refused = proxy_get(node.proxy_addr(), &url(&unseen), &[]).await;
        assert_ne!(refused.status, 200);
    }
    assert_eq!((origin.count_path(&shared), origin.count_path(&unseen)), (1, 0), "nothing upstream while offline");

    let back = pkgproxyctl(&two, &["offline", "never", "--cluster"]);
    assert!(back.status.success(), "{}", String::from_utf8_lossy(&back.stderr));
    eventually("the first node follows back", || async { (mode_of(&one).await == "never").then_some(()) }).await;
    assert_eq!(proxy_get(one.proxy_addr(), &url(&unseen), &[]).await.status, 200);

    // A node that is not part of a cluster says so.
    let alone = Daemon::start(PKGPROXY, None).await;
    let refused = pkgproxyctl(&alone, &["offline", "offline", "--cluster"]);
    assert!(!refused.status.success());
    assert!(String::from_utf8_lossy(&refused.stderr).contains("not connected to a cluster"), "{refused:?}");
}

#[tokio::test(flavor = "multi_thread")]
async fn a_host_that_asks_one_node_for_time_on_two_paths_is_left_alone_by_every_node_and_probed_once() {
    let fleet = Fleet::new("cluster-breakers").await;
    let (repo, origin) = (fleet.repo, &fleet.origin);
    // The others wait two polls and a second past the time for the asked
    // node's word: polls of a second leave a loaded machine room for it.
    let config = |node: &str| fleet.config(node, "offline_poll = \"1s\"\n");
    let overloaded = ["-offline-mode", "store-overloaded"];
    let nodes = [
        Daemon::start_with(PKGPROXY, Some(&config("asked")), &overloaded).await,
        Daemon::start_with(PKGPROXY, Some(&config("second")), &overloaded).await,
        Daemon::start_with(PKGPROXY, Some(&config("third")), &overloaded).await,
    ];
    let url = |name: &str| format!("{}{}", origin.url(), repo.deb_url_path(name));
    let (busy, other) = (repo.deb_url_path("pkgproxy-hello"), repo.deb_url_path("pkgproxy-small1"));

    let busy_too = repo.deb_url_path("pkgproxy-small2");
    origin.set_status_override(&busy, Some(429));
    origin.set_status_override(&busy_too, Some(429));
    origin.set_retry_after(Some("3"));
    assert_eq!(proxy_get(nodes[0].proxy_addr(), &url("pkgproxy-hello"), &[]).await.status, 429);
    // One path's refusal is that path's: the host is taken for busy once it
    // asks for time on another, the probe after the first time is up.
    eventually("the asked node's probe of another path", || async {
        (proxy_get(nodes[0].proxy_addr(), &url("pkgproxy-small2"), &[]).await.status == 429).then_some(())
    })
    .await;
    origin.set_status_override(&busy, None);
    origin.set_status_override(&busy_too, None);
    for node in &nodes[1..] {
        eventually("the other nodes leave the host alone too", || async {
            let status = get(node.proxy_addr(), "/pkgproxy/v1/status").await;
            let json: serde_json::Value = serde_json::from_slice(&status.body).expect("status JSON");
            (json["offline"]["upstreams"].as_array().is_some_and(|open| !open.is_empty())).then_some(())
        })
        .await;
        let refused = proxy_get(node.proxy_addr(), &url("pkgproxy-small1"), &[]).await;
        assert_eq!(refused.status, 503, "{}", node.log());
    }
    assert_eq!(origin.count_path(&other), 0, "nothing reached the host while it asked for time");

    // Once the time is up, the asked node probes; the others wait for its
    // word, and then serve again, without a probe of their own.
    let mut statuses = [0u16; 3];
    let started = std::time::Instant::now();
    while statuses.iter().any(|status| *status != 200) {
        assert!(started.elapsed() < std::time::Duration::from_secs(20), "still refused: {statuses:?}");
        for (i, node) in nodes.iter().enumerate() {
            statuses[i] = proxy_get(node.proxy_addr(), &url("pkgproxy-small1"), &[]).await.status;
        }
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
    assert_eq!(origin.count_path(&other), 1, "one probe from the cluster, and the others had it from the bucket");
    assert_eq!(origin.count_path(&busy), 1);
}

#[tokio::test(flavor = "multi_thread")]
async fn with_the_store_stopped_a_node_serves_alone_and_publishes_on_the_next_access_once_it_is_back() {
    let mut server = S3Server::start();
    let bucket = server.bucket("cluster-stopped");
    let repo = AptRepo::shared_default();
    let origin = Origin::serve(repo.root()).await;
    let apt = archive("local", &[format!("{}/debian", origin.url())]);
    let endpoint = server.endpoint();
    let config = |node: &str| format!("{apt}{}", cluster_section(&endpoint, &bucket, node));
    let node = Daemon::start(PKGPROXY, Some(&config("alone-for-a-while"))).await;
    let path = repo.deb_url_path("pkgproxy-hello");
    let url = format!("{}{path}", origin.url());

    server.stop();
    let miss = proxy_get(node.proxy_addr(), &url, &[]).await;
    assert_eq!((miss.status, miss.header("x-pkgproxy-cache")), (200, Some("miss")), "{}", node.log());
    let hit = proxy_get(node.proxy_addr(), &url, &[]).await;
    assert_eq!((hit.status, hit.header("x-pkgproxy-cache")), (200, Some("hit")));
    eventually("the node says it works alone", || async {
        (cluster_status(&node).await["state"].as_str() == Some("degraded")).then_some(())
    })
    .await;

    server.resume();
    server.bucket(&bucket);
    eventually("a hit publishes what waited", || async {
        assert_eq!(proxy_get(node.proxy_addr(), &url, &[]).await.status, 200, "no client error");
        (cluster_status(&node).await["published"].as_u64() == Some(1)).then_some(())
    })
    .await;
    assert_eq!(cluster_status(&node).await["state"].as_str(), Some("connected"));
    let other = Daemon::start(PKGPROXY, Some(&config("other"))).await;
    assert_eq!(proxy_get(other.proxy_addr(), &url, &[]).await.body, miss.body);
    assert_eq!(origin.count_path(&path), 1, "the other node had it from the bucket");
}

#[tokio::test(flavor = "multi_thread")]
async fn apt_update_and_install_work_on_an_offline_node_that_never_fetched_anything() {
    let fleet = Fleet::new("cluster-indexes").await;
    let (repo, origin, source) = (fleet.repo, &fleet.origin, &fleet.source);
    let config = |node: &str| fleet.config(node, "");
    let online = Daemon::start(PKGPROXY, Some(&config("online"))).await;
    let apt = AptSandbox::new(Some(&online.proxy_url()), source, repo.keyring());
    apt.update().assert_success();
    apt.download(&["pkgproxy-hello"]).assert_success();
    let fetched = online.info().await.upstream.get(pkgproxy_metrics::UpstreamCounter::Requests);
    let entries = online.info().await.cache.get(pkgproxy_metrics::CacheGauge::Entries);
    assert!(entries >= 3, "the Release, an index and the package: {entries}");
    eventually("the online node publishes every entry: the indexes and the package", || async {
        (cluster_status(&online).await["published"].as_u64() >= Some(entries)).then_some(())
    })
    .await;
    let asked = origin.requests().len();

    // A node that has been offline from its start, with an empty cache.
    let offline = Daemon::start_with(PKGPROXY, Some(&config("offline")), &["-offline"]).await;
    let apt = AptSandbox::new(Some(&offline.proxy_url()), source, repo.keyring());
    updates_and_downloads_the_archive_s_bytes(&apt, repo, "pkgproxy-hello");
    assert_eq!(origin.requests().len(), asked, "the origin saw nothing of the offline node");
    assert_eq!(offline.info().await.upstream.get(pkgproxy_metrics::UpstreamCounter::Requests), 0);
    assert!(fetched > 0);
}

#[tokio::test(flavor = "multi_thread")]
async fn a_node_offline_on_its_own_asks_an_online_node_for_its_misses() {
    let fleet = Fleet::new("cluster-through-peer").await;
    let (repo, origin, source) = (fleet.repo, &fleet.origin, &fleet.source);
    let config = |node: &str| fleet.config(node, "offline_poll = \"200ms\"\n");
    let online = Daemon::start(PKGPROXY, Some(&config("online"))).await;
    // Offline by its own switch (as auto-offline makes a node whose uplink
    // went), its cache and the bucket empty.
    let offline = Daemon::start_with(PKGPROXY, Some(&config("cut-off")), &["-offline"]).await;

    let apt = AptSandbox::new(Some(&offline.proxy_url()), source, repo.keyring());
    updates_and_downloads_the_archive_s_bytes(&apt, repo, "pkgproxy-hello");
    let deb = repo.deb_url_path("pkgproxy-hello");
    assert_eq!(origin.count_path(&deb), 1, "the online node fetched it");
    let requests = pkgproxy_metrics::UpstreamCounter::Requests;
    assert_eq!(offline.info().await.upstream.get(requests), 0, "the offline node sent nothing upstream");
    let from_online = online.info().await.upstream.get(requests);
    assert_eq!(from_online, origin.requests().len() as u64, "the origin saw the online node's requests only");
    let again = proxy_get(offline.proxy_addr(), &format!("{}{deb}", origin.url()), &[]).await;
    assert_eq!(again.header("x-pkgproxy-cache"), Some("hit"), "the offline node kept what it got");

    // With the whole cluster offline, nobody asks the origin.
    let unseen = repo.deb_url_path("pkgproxy-small2");
    let set = pkgproxyctl(&online, &["offline", "offline", "--cluster"]);
    assert!(set.status.success(), "{}", String::from_utf8_lossy(&set.stderr));
    let refused = proxy_get(offline.proxy_addr(), &format!("{}{unseen}", origin.url()), &[]).await;
    assert_eq!(refused.status, 503);
    assert_eq!(origin.count_path(&unseen), 0);
}

#[tokio::test(flavor = "multi_thread")]
async fn two_offline_nodes_that_take_each_other_for_online_never_send_a_request_back_and_forth() {
    let fleet = Fleet::new("cluster-no-ping-pong").await;
    let config = |node: &str| fleet.config(node, "");
    let nodes = [
        Daemon::start_with(PKGPROXY, Some(&config("left")), &["-offline"]).await,
        Daemon::start_with(PKGPROXY, Some(&config("right")), &["-offline"]).await,
    ];
    // Each says it is online, as a node does just before it goes offline.
    let tier = pkgproxy_cluster::connect(
        &fleet.cluster_config("test"),
        pkgproxy_upstream::Upstream::new(Default::default()).peers,
    )
    .await
    .expect("the store");
    let later = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_millis() + 600_000;
    for (node, name) in nodes.iter().zip(["left", "right"]) {
        let peer_url = format!("http://{}", node.proxy_addr());
        let member = Member { node: name.to_owned(), peer_url, online: true, at_ms: later as u64 };
        members::announce(&tier, &member).await.expect("announced");
    }
    let url = format!("{}{}", fleet.origin.url(), fleet.repo.deb_url_path("pkgproxy-hello"));
    let asked = tokio::time::timeout(std::time::Duration::from_secs(20), proxy_get(nodes[0].proxy_addr(), &url, &[]));
    let answer = asked.await.expect("an answer, not two nodes waiting for each other");
    assert_eq!(answer.status, 503, "offline, and the other node is too");
    assert!(nodes[1].log().contains("pkgproxy-hello"), "the other node was asked");
    assert_eq!(fleet.origin.requests().len(), 0);
}
