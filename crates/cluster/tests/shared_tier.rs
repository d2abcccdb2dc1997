//! The shared tier against a real S3 server (moto): what one node fetched
//! reaches the others from the bucket, verified; a damaged object is never
//! delivered whole; a bucket that is down costs sharing, not answers; and a
//! store that does not honour conditional writes is refused.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use bytes::Bytes;
use futures_util::stream::BoxStream;
use http_body_util::{BodyExt, Full};
use object_store::memory::InMemory;
use object_store::path::Path;
use object_store::{
    CopyOptions, GetOptions, GetResult, ListResult, MultipartUpload, ObjectMeta, ObjectStore, ObjectStoreExt, PutMode,
    PutMultipartOptions, PutOptions, PutPayload, PutResult,
};
use pkgproxy_cache::{Cache, Class, Expected, FetchSpec, Phase, Source, StartFetch, SystemClock};
use pkgproxy_cluster::{selftest, ClusterConfig, Credentials, Publisher, SharedFirst, SharedTier, DEFAULT_LEASE_TTL};
use pkgproxy_testkit::{eventually, S3Server};
use sha2::{Digest, Sha256};

const PREFIX: &str = "pkgproxy";

/// An upstream that answers every request with `status` and `body`,
/// counting them.
struct Upstream {
    status: u16,
    body: Bytes,
    calls: Arc<AtomicUsize>,
}

impl Source for Upstream {
    fn start(&self) -> StartFetch {
        self.calls.fetch_add(1, Ordering::SeqCst);
        let (status, body) = (self.status, self.body.clone());
        Box::pin(async move {
            Ok(http::Response::builder()
                .status(status)
                .header("content-length", body.len())
                .header("content-type", "application/vnd.debian.binary-package")
                .body(Full::new(body).map_err(|never| match never {}).boxed())
                .expect("a response")
                .into())
        })
    }
}

/// One pkgproxy node's cache and its view of the bucket.
struct Node {
    cache: Cache,
    tier: Arc<SharedTier>,
    publisher: Arc<Publisher>,
    _dir: tempfile::TempDir,
}

fn config(server: &S3Server, bucket: &str, node: &str) -> ClusterConfig {
    ClusterConfig {
        endpoint: server.endpoint(),
        bucket: bucket.to_owned(),
        prefix: PREFIX.to_owned(),
        region: "us-east-1".to_owned(),
        credentials: Credentials {
            access_key_id: "testing".to_owned(),
            secret_access_key: "testing".to_owned(),
            session_token: None,
        },
        node_id: node.to_owned(),
        peer_url: None,
        lease_ttl: DEFAULT_LEASE_TTL,
        peer_secret: None,
        offline_poll: pkgproxy_cluster::switch::DEFAULT_POLL,
    }
}

fn node(server: &S3Server, bucket: &str, name: &str) -> Node {
    node_with_clock(server, bucket, name, Arc::new(SystemClock))
}

fn node_with_clock(server: &S3Server, bucket: &str, name: &str, clock: Arc<dyn pkgproxy_cache::Clock>) -> Node {
    node_configured(config(server, bucket, name), clock)
}

fn node_configured(config: ClusterConfig, clock: Arc<dyn pkgproxy_cache::Clock>) -> Node {
    let dir = tempfile::tempdir().expect("a cache directory");
    let cache = Cache::open(dir.path(), clock).expect("a cache");
    let tier = SharedTier::new(config.store().expect("an S3 client"), PREFIX, config.identity(), peer_client());
    let publisher = Publisher::new();
    publisher.connect(Arc::clone(&tier));
    cache.on_commit(Arc::clone(&publisher) as Arc<dyn pkgproxy_cache::Committed>);
    Node { cache, tier, publisher, _dir: dir }
}

/// The peer client of a node with the default upstream settings.
fn peer_client() -> pkgproxy_upstream::PeerClient {
    pkgproxy_upstream::Upstream::new(pkgproxy_upstream::UpstreamConfig::default()).peers
}

/// Fetches `key` through `node`, the bucket first: the body, or the error
/// the fetch failed with.
async fn fetch(node: &Node, key: &str, upstream: Upstream) -> Result<Vec<u8>, String> {
    let tier = Arc::clone(&node.tier);
    let source = move || Box::new(SharedFirst::new(tier, key, Expected::default(), Box::new(upstream))) as _;
    fetched(node, key, Class::Immutable, source).await
}

/// Fetches `key`, whose content changes, through `node`: the bucket's
/// entry when `fresh` says so of it.
async fn fetch_changing(
    node: &Node,
    key: &str,
    upstream: Upstream,
    fresh: impl Fn(&pkgproxy_cache::Entry) -> bool + Send + Sync + 'static,
) -> Result<Vec<u8>, String> {
    let tier = Arc::clone(&node.tier);
    let source = move || Box::new(SharedFirst::changing(tier, key, Arc::new(fresh), Box::new(upstream))) as _;
    fetched(node, key, Class::Revalidated, source).await
}

async fn fetched(
    node: &Node,
    key: &str,
    class: Class,
    source: impl FnOnce() -> Box<dyn Source>,
) -> Result<Vec<u8>, String> {
    let spec = FetchSpec { key: key.into(), class, expected: Expected::default(), revalidating: None, verifier: None };
    let joined = node.cache.fetch_from(spec, source);
    match joined.fetch.finished().await {
        Phase::Done(entry) => {
            let file = node.cache.open_body(&entry).expect("the committed body");
            let mut body = vec![0; entry.size as usize];
            std::os::unix::fs::FileExt::read_exact_at(&*file, &mut body, 0).expect("read the body");
            Ok(body)
        }
        Phase::Failed(error) => Err(error.to_string()),
        other => Err(format!("the fetch ended {}", other.as_str())),
    }
}

fn upstream(body: &Bytes) -> (Upstream, Arc<AtomicUsize>) {
    let calls = Arc::new(AtomicUsize::new(0));
    (Upstream { status: 200, body: body.clone(), calls: Arc::clone(&calls) }, calls)
}

fn random_body(len: usize) -> Bytes {
    let mut state = 0x2545_f491_4f6c_dd1d_u64 ^ len as u64;
    Bytes::from_iter((0..len).map(|_| {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        state as u8
    }))
}

const KEY: &str = "apt/deb.example/debian/pool/main/h/hello/hello_1.0_amd64.deb";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn what_one_node_fetched_reaches_another_from_the_bucket_without_the_upstream() {
    let server = S3Server::start();
    let bucket = server.bucket("shared-one");
    let body = random_body(3 * 1024 * 1024 + 17);
    let (a, b) = (node(&server, &bucket, "a"), node(&server, &bucket, "b"));

    let (first, first_calls) = upstream(&body);
    assert_eq!(fetch(&a, KEY, first).await.expect("node a fetches"), body);
    assert_eq!(first_calls.load(Ordering::SeqCst), 1);
    eventually("node a publishes", || async { (a.tier.counters().published == 1).then_some(()) }).await;

    let (second, second_calls) = upstream(&body);
    assert_eq!(fetch(&b, KEY, second).await.expect("node b fetches"), body);
    assert_eq!(second_calls.load(Ordering::SeqCst), 0, "node b never asked the upstream");
    assert_eq!(b.tier.counters().shared_hits, 1);
    let entry = b.cache.lookup(KEY).expect("node b cached it");
    assert_eq!(entry.sha256, hex::encode(Sha256::digest(&body)));
    assert!(
        entry.headers.iter().any(|(name, value)| name == "content-type" && value.contains("debian")),
        "{:?}",
        entry.headers
    );
    // What came from the bucket is not published again.
    assert_eq!(b.tier.counters().published, 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_body_damaged_in_the_bucket_is_never_delivered_whole_and_is_removed() {
    let server = S3Server::start();
    let bucket = server.bucket("shared-damaged");
    let body = random_body(200_000);
    let a = node(&server, &bucket, "a");
    let (first, _) = upstream(&body);
    fetch(&a, KEY, first).await.expect("node a fetches");
    eventually("node a publishes", || async { (a.tier.counters().published == 1).then_some(()) }).await;

    let sha = hex::encode(Sha256::digest(&body));
    let blob = format!("{PREFIX}/blobs/sha256/{}/{sha}", &sha[..2]);
    let mut damaged = body.to_vec();
    damaged[150_000] ^= 0xff;
    let behind_its_back = config(&server, &bucket, "someone").store().expect("an S3 client");
    let blob = Path::from(blob);
    behind_its_back.put(&blob, PutPayload::from(damaged)).await.expect("the body is overwritten");

    let b = node(&server, &bucket, "b");
    let (second, second_calls) = upstream(&body);
    let error = fetch(&b, KEY, second).await.expect_err("a damaged body is not taken");
    assert!(error.contains("SHA256") || error.contains("sha256") || error.contains("checksum"), "{error}");
    assert!(b.cache.lookup(KEY).is_none(), "nothing cached");
    assert_eq!(second_calls.load(Ordering::SeqCst), 0);
    eventually("the damaged body is removed", || async {
        matches!(behind_its_back.head(&blob).await, Err(object_store::Error::NotFound { .. })).then_some(())
    })
    .await;
    assert_eq!(b.tier.counters().corrupt, 1);

    let (third, third_calls) = upstream(&body);
    assert_eq!(fetch(&b, KEY, third).await.expect("the next miss goes upstream"), body);
    assert_eq!(third_calls.load(Ordering::SeqCst), 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn with_the_bucket_down_misses_are_fetched_upstream_and_published_once_it_is_back() {
    let mut server = S3Server::start();
    let bucket = server.bucket("shared-down");
    let a = node(&server, &bucket, "a");
    server.stop();

    let body = random_body(50_000);
    let (first, first_calls) = upstream(&body);
    assert_eq!(fetch(&a, KEY, first).await.expect("served with the bucket down"), body);
    assert_eq!(first_calls.load(Ordering::SeqCst), 1);
    assert!(a.tier.is_degraded(), "the node says it works alone");

    eventually("remembered for later", || async { (a.publisher.waiting() == 1).then_some(()) }).await;

    server.resume();
    server.bucket(&bucket);
    // The store rests a few seconds after a failure before it is asked
    // again; a hit after that publishes what waited.
    eventually("a hit publishes what waited", || async {
        let entry = a.cache.lookup(KEY).expect("cached locally");
        a.publisher.accessed(KEY, &entry, || a.cache.open_body(&entry));
        (a.tier.counters().published == 1).then_some(())
    })
    .await;
    assert_eq!(a.publisher.waiting(), 0);
    let b = node(&server, &bucket, "b");
    let (from_bucket, calls) = upstream(&body);
    assert_eq!(fetch(&b, KEY, from_bucket).await.expect("node b fetches"), body);
    assert_eq!(calls.load(Ordering::SeqCst), 0, "from the bucket");

    let other = random_body(60_000);
    let (second, _) = upstream(&other);
    fetch(&a, "go/example.com/m/@v/v1.0.0.zip", second).await.expect("the next miss");
    eventually("published once the bucket is back", || async { (a.tier.counters().published == 2).then_some(()) })
        .await;
    assert!(!a.tier.is_degraded());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_self_test_passes_on_moto_and_refuses_a_store_where_every_create_wins() {
    let server = S3Server::start();
    let bucket = server.bucket("shared-selftest");
    let store: Arc<dyn ObjectStore> = config(&server, &bucket, "a").store().expect("an S3 client");
    selftest::check(Arc::clone(&store), &Path::from("probe/a"), &server.endpoint())
        .await
        .expect("moto keeps its promises");

    let careless: Arc<dyn ObjectStore> = Arc::new(Careless(InMemory::new()));
    let refused = selftest::check(careless, &Path::from("probe/a"), "careless").await.expect_err("refused");
    assert!(refused.to_string().contains("8 of 8 concurrent conditional creates"), "{refused}");
}

/// A store that checks nothing: every conditional create wins, as on a
/// store that ignores `If-None-Match`.
#[derive(Debug)]
struct Careless(InMemory);

impl std::fmt::Display for Careless {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("careless")
    }
}

#[async_trait::async_trait]
impl ObjectStore for Careless {
    async fn put_opts(
        &self,
        location: &Path,
        payload: PutPayload,
        mut opts: PutOptions,
    ) -> object_store::Result<PutResult> {
        if opts.mode == PutMode::Create {
            opts.mode = PutMode::Overwrite;
        }
        self.0.put_opts(location, payload, opts).await
    }

    async fn put_multipart_opts(
        &self,
        location: &Path,
        opts: PutMultipartOptions,
    ) -> object_store::Result<Box<dyn MultipartUpload>> {
        self.0.put_multipart_opts(location, opts).await
    }

    async fn get_opts(&self, location: &Path, options: GetOptions) -> object_store::Result<GetResult> {
        self.0.get_opts(location, options).await
    }

    fn delete_stream(
        &self,
        locations: BoxStream<'static, object_store::Result<Path>>,
    ) -> BoxStream<'static, object_store::Result<Path>> {
        self.0.delete_stream(locations)
    }

    fn list(&self, prefix: Option<&Path>) -> BoxStream<'static, object_store::Result<ObjectMeta>> {
        self.0.list(prefix)
    }

    async fn list_with_delimiter(&self, prefix: Option<&Path>) -> object_store::Result<ListResult> {
        self.0.list_with_delimiter(prefix).await
    }

    async fn copy_opts(&self, from: &Path, to: &Path, options: CopyOptions) -> object_store::Result<()> {
        self.0.copy_opts(from, to, options).await
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_upload_a_killed_node_left_unfinished_is_swept_and_others_are_not() {
    use object_store::ObjectStoreExt;
    let server = S3Server::start();
    let bucket = server.bucket("shared-sweep");
    let s3 = config(&server, &bucket, "a").store().expect("an S3 client");
    let begin = |key: &'static str| {
        let s3 = Arc::clone(&s3);
        async move {
            let mut upload = s3.put_multipart(&Path::from(key)).await.expect("an upload begins");
            upload.put_part(PutPayload::from(vec![7u8; 5 * 1024 * 1024])).await.expect("a part");
            // The node dies here: the upload is never completed nor aborted.
            std::mem::forget(upload);
        }
    };
    begin("pkgproxy/blobs/sha256/ab/abandoned").await;
    begin("someone-else/their-upload").await;
    #[allow(clippy::disallowed_methods, reason = "the test talks to the store as the cluster's own client does")]
    let client = reqwest::Client::new();
    // moto dates every upload 2010-11-10: how old one must be is not
    // tested here, only which are swept.
    let swept = pkgproxy_cluster::sweep::sweep(&s3, &client, PREFIX, std::time::Duration::ZERO).await;
    assert_eq!(swept.expect("listed"), 1);
    assert_eq!(pkgproxy_cluster::sweep::sweep(&s3, &client, PREFIX, std::time::Duration::ZERO).await.unwrap(), 0);
    let theirs = pkgproxy_cluster::sweep::sweep(&s3, &client, "someone-else", std::time::Duration::ZERO).await;
    assert_eq!(theirs.unwrap(), 1, "outside pkgproxy's prefix it was left alone");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn what_changes_under_its_name_is_replaced_only_by_a_newer_fetch_and_served_while_fresh() {
    let server = S3Server::start();
    let bucket = server.bucket("shared-changing");
    const IN_RELEASE: &str = "apt/deb.example/debian/dists/stable/InRelease";
    let start = std::time::UNIX_EPOCH + std::time::Duration::from_secs(1_800_000_000);
    let at = |secs: u64| Arc::new(pkgproxy_cache::ManualClock::new(start + std::time::Duration::from_secs(secs)));
    let (newer, older, newest) =
        (Bytes::from("Date: 12:03\n"), Bytes::from("Date: 11:00\n"), Bytes::from("Date: 13:00\n"));
    let sha = |body: &Bytes| hex::encode(Sha256::digest(body));
    let published = |tier: Arc<SharedTier>| async move { tier.lookup(IN_RELEASE).await.unwrap().unwrap().entry };

    // Node a fetches at 100 s and publishes.
    let a = node_with_clock(&server, &bucket, "a", at(100));
    assert_eq!(fetch_changing(&a, IN_RELEASE, upstream(&newer).0, |_| false).await.unwrap(), newer);
    eventually("node a publishes", || async { (a.tier.counters().published == 1).then_some(()) }).await;
    // Node b fetched an older answer (at 40 s): it never replaces the newer.
    let b = node_with_clock(&server, &bucket, "b", at(40));
    assert_eq!(fetch_changing(&b, IN_RELEASE, upstream(&older).0, |_| false).await.unwrap(), older);
    eventually("node b is done publishing", || async { (b.tier.counters().published == 1).then_some(()) }).await;
    assert_eq!(published(Arc::clone(&b.tier)).await.sha256, sha(&newer), "never older over newer");

    // Node c takes the published entry while it is fresh, with its age.
    let c = node_with_clock(&server, &bucket, "c", at(160));
    let (never_asked, calls) = upstream(&newest);
    assert_eq!(fetch_changing(&c, IN_RELEASE, never_asked, |_| true).await.unwrap(), newer);
    assert_eq!(calls.load(Ordering::SeqCst), 0);
    let entry = c.cache.lookup(IN_RELEASE).unwrap();
    assert_eq!(entry.fetched_at, pkgproxy_cache::unix_secs(start) + 100, "as old as where it was fetched");
    // Node d finds it stale, and the upstream failing: the stale entry
    // serves.
    let d = node_with_clock(&server, &bucket, "d", at(500));
    let failing = Upstream { status: 503, body: Bytes::from("busy"), calls: Arc::default() };
    assert_eq!(fetch_changing(&d, IN_RELEASE, failing, |_| false).await.unwrap(), newer);
    // Node e fetches a newer answer at 600 s: it replaces the published one.
    let e = node_with_clock(&server, &bucket, "e", at(600));
    assert_eq!(fetch_changing(&e, IN_RELEASE, upstream(&newest).0, |_| false).await.unwrap(), newest);
    eventually("node e replaces it", || async {
        (published(Arc::clone(&e.tier)).await.sha256 == sha(&newest)).then_some(())
    })
    .await;
}

/// The object at `path` of the bucket, as someone else writes it.
async fn put_behind_its_back(server: &S3Server, bucket: &str, path: &str, bytes: Vec<u8>) {
    let store = config(server, bucket, "someone").store().expect("an S3 client");
    store.put(&Path::from(path), PutPayload::from(bytes)).await.expect("written");
}

/// The path of `key`'s lease (or index object, `kind` "idx") in the bucket.
fn object_of(kind: &str, key: &str) -> String {
    format!("{PREFIX}/{kind}/{}.json", hex::encode(Sha256::digest(key.as_bytes())))
}

async fn exists(server: &S3Server, bucket: &str, path: &str) -> bool {
    let store = config(server, bucket, "someone").store().expect("an S3 client");
    store.head(&Path::from(path)).await.is_ok()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_miss_that_brings_no_body_leaves_no_lease_and_the_sweep_removes_dead_nodes_leases() {
    let server = S3Server::start();
    let bucket = server.bucket("lease-gone");
    let a = node(&server, &bucket, "a");
    let missing = "apt/deb.example/debian/pool/main/m/missing/missing_1.0_amd64.deb";
    let not_found = Upstream { status: 404, body: Bytes::from_static(b"no\n"), calls: Arc::default() };
    assert!(fetch(&a, missing, not_found).await.is_err(), "a 404 is not stored");
    assert!(!exists(&server, &bucket, &object_of("lease", missing)).await, "its lease is gone with it");

    // A lease its node left behind when it died.
    let left = "apt/deb.example/debian/pool/main/l/left/left_1.0_amd64.deb";
    let lease = br#"{"node":"dead","peer_url":null,"expires_ms":1}"#.to_vec();
    put_behind_its_back(&server, &bucket, &object_of("lease", left), lease).await;
    let now = std::time::SystemTime::now();
    assert_eq!(pkgproxy_cluster::lease::sweep(&a.tier, now).await.unwrap(), 0, "too young to be swept");
    let later = now + DEFAULT_LEASE_TTL * 11;
    assert_eq!(pkgproxy_cluster::lease::sweep(&a.tier, later).await.unwrap(), 1);
    assert!(!exists(&server, &bucket, &object_of("lease", left)).await);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lease_held_by_a_node_that_does_not_answer_is_taken_over_at_once_whatever_it_claims() {
    let server = S3Server::start();
    let bucket = server.bucket("lease-unreachable");
    // Leases of an hour: a miss that waited one out would not end.
    let hour = std::time::Duration::from_secs(3600);
    let b = node_configured(ClusterConfig { lease_ttl: hour, ..config(&server, &bucket, "b") }, Arc::new(SystemClock));
    let gone = pkgproxy_testkit::RefusingPort::new();
    let ten_years = std::time::SystemTime::now() + std::time::Duration::from_secs(10 * 365 * 24 * 3600);
    let expires_ms = ten_years.duration_since(std::time::UNIX_EPOCH).unwrap().as_millis();
    let lease = format!(r#"{{"node":"gone","peer_url":"{}","expires_ms":{expires_ms}}}"#, gone.url());
    put_behind_its_back(&server, &bucket, &object_of("lease", KEY), lease.into_bytes()).await;

    let body = random_body(10_000);
    let (fetching, calls) = upstream(&body);
    let fetched = tokio::time::timeout(std::time::Duration::from_secs(60), fetch(&b, KEY, fetching));
    assert_eq!(fetched.await.expect("not waiting the lease out").expect("fetched"), body);
    assert_eq!(calls.load(Ordering::SeqCst), 1, "node b fetched it itself");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn objects_of_the_bucket_larger_than_their_kind_may_be_are_not_read() {
    let server = S3Server::start();
    let bucket = server.bucket("oversized");
    let hour = std::time::Duration::from_secs(3600);
    let a = node_configured(ClusterConfig { lease_ttl: hour, ..config(&server, &bucket, "a") }, Arc::new(SystemClock));

    // An index object of 2 MB: malformed, and the miss asks the upstream.
    let huge = format!(r#"{{"key":"{}"}}"#, "A".repeat(2 << 20)).into_bytes();
    put_behind_its_back(&server, &bucket, &object_of("idx", KEY), huge).await;
    let refused = a.tier.lookup(KEY).await.expect_err("too large to read");
    assert!(refused.to_string().contains("beyond"), "{refused}");
    let body = random_body(5_000);
    let (fetching, calls) = upstream(&body);
    assert_eq!(fetch(&a, KEY, fetching).await.expect("fetched"), body);
    assert_eq!(calls.load(Ordering::SeqCst), 1);

    // A lease of 1 MB is nobody's: taken over at once.
    let other = "apt/deb.example/debian/pool/main/o/other/other_1.0_amd64.deb";
    let padded =
        format!(r#"{{"node":"x","peer_url":"http://127.0.0.1:9","expires_ms":99999999999999{}}}"#, " ".repeat(1 << 20));
    put_behind_its_back(&server, &bucket, &object_of("lease", other), padded.into_bytes()).await;
    let (fetching, calls) = upstream(&body);
    let fetched = tokio::time::timeout(std::time::Duration::from_secs(60), fetch(&a, other, fetching));
    assert_eq!(fetched.await.expect("not waiting").expect("fetched"), body);
    assert_eq!(calls.load(Ordering::SeqCst), 1);

    // The offline switch, valid but padded to 1 MB: not applied; the next
    // one, of its size, is.
    let seen = Arc::new(parking_lot::Mutex::new(Vec::new()));
    let switch = format!("{PREFIX}/cluster/offline.json");
    let padded = format!(r#"{{"mode":"offline","set_by":"x","at_ms":1}}{}"#, " ".repeat(1 << 20));
    put_behind_its_back(&server, &bucket, &switch, padded.into_bytes()).await;
    let applied = Arc::clone(&seen);
    let apply = move |mode: &pkgproxy_cluster::switch::ClusterMode| applied.lock().push(mode.mode.clone());
    let every = std::time::Duration::from_millis(50);
    tokio::spawn(pkgproxy_cluster::switch::watch(Arc::downgrade(&a.tier), every, apply));
    let proper = br#"{"mode":"store-overloaded","set_by":"y","at_ms":2}"#.to_vec();
    tokio::task::yield_now().await;
    put_behind_its_back(&server, &bucket, &switch, proper).await;
    eventually("the switch is read", || async { (!seen.lock().is_empty()).then_some(()) }).await;
    assert_eq!(seen.lock().first().map(String::as_str), Some("store-overloaded"), "the padded one never");
}
