//! Shared-fetch scenarios against a scripted upstream body.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use bytes::Bytes;
use http_body_util::{BodyExt, StreamBody};
use sha2::Digest;
use tokio::sync::mpsc;

use pkgproxy_testkit::eventually;

use super::*;
use crate::{Cache, SystemClock};

/// An upstream whose body the test feeds chunk by chunk.
struct ScriptedUpstream {
    chunks: mpsc::Sender<Result<Bytes, BoxError>>,
}

fn start_with(
    calls: &Arc<AtomicUsize>,
    content_length: Option<u64>,
) -> (ScriptedUpstream, impl FnOnce() -> StartFetch) {
    let (tx, rx) = mpsc::channel::<Result<Bytes, BoxError>>(64);
    let calls = Arc::clone(calls);
    let start = move || -> StartFetch {
        calls.fetch_add(1, Ordering::SeqCst);
        Box::pin(async move {
            let stream = futures_util::stream::unfold(rx, |mut rx| async move {
                rx.recv().await.map(|chunk| (chunk.map(http_body::Frame::data), rx))
            });
            let mut answer = http::Response::builder().status(200);
            if let Some(len) = content_length {
                answer = answer.header("content-length", len);
            }
            Ok(answer.body(StreamBody::new(stream).boxed()).unwrap().into())
        })
    };
    (ScriptedUpstream { chunks: tx }, start)
}

fn spec(key: &str, expected: Expected) -> FetchSpec {
    FetchSpec { key: key.into(), class: Class::Immutable, expected, revalidating: None, verifier: None }
}

async fn read_all(cache: &Cache, fetch: &Fetch) -> Result<Vec<u8>, BoxError> {
    let head = match fetch.answered().await {
        Phase::Streaming(head) => head,
        Phase::Checked { entry, body } => {
            let mut bytes = vec![0; entry.size as usize];
            std::os::unix::fs::FileExt::read_exact_at(body.as_ref(), &mut bytes, 0).unwrap();
            return Ok(bytes);
        }
        Phase::Done(entry) => return Ok(read_entry(cache, &entry)),
        Phase::Failed(error) => return Err(error.to_string().into()),
        other => panic!("expected a streaming fetch, got {}", other.as_str()),
    };
    let collected = fetch.body(&head, 0, None).collect().await?;
    Ok(collected.to_bytes().to_vec())
}

/// Reads a committed entry (the fetch finished before the reader looked).
fn read_entry(cache: &Cache, entry: &Entry) -> Vec<u8> {
    let mut body = Vec::new();
    std::io::Read::read_to_end(&mut cache.open_body(entry).unwrap(), &mut body).unwrap();
    body
}

#[tokio::test]
async fn concurrent_misses_make_one_upstream_request_and_all_get_the_bytes() {
    let dir = tempfile::tempdir().unwrap();
    let cache = Cache::open(dir.path(), Arc::new(SystemClock)).unwrap();
    let calls = Arc::new(AtomicUsize::new(0));
    let (upstream, start) = start_with(&calls, Some(6));
    let first = cache.fetch(spec("k", Expected::default()), start);
    assert!(first.started);
    let mut joined = vec![];
    for _ in 0..5 {
        let (_, never) = start_with(&calls, None);
        let j = cache.fetch(spec("k", Expected::default()), never);
        assert!(!j.started);
        joined.push(j.fetch);
    }
    let readers: Vec<_> = joined
        .into_iter()
        .chain([first.fetch])
        .map(|f| {
            let cache = cache.clone();
            tokio::spawn(async move { read_all(&cache, &f).await.unwrap() })
        })
        .collect();
    upstream.chunks.send(Ok(Bytes::from_static(b"abc"))).await.unwrap();
    upstream.chunks.send(Ok(Bytes::from_static(b"def"))).await.unwrap();
    drop(upstream);
    for reader in readers {
        assert_eq!(reader.await.unwrap(), b"abcdef");
    }
    assert_eq!(calls.load(Ordering::SeqCst), 1);
    let committed = || async { cache.lookup("k") };
    let entry = eventually("the body to be committed", committed).await;
    assert_eq!(entry.size, 6);
}

#[tokio::test]
async fn waiters_get_bytes_before_the_download_completes() {
    let dir = tempfile::tempdir().unwrap();
    let cache = Cache::open(dir.path(), Arc::new(SystemClock)).unwrap();
    let calls = Arc::new(AtomicUsize::new(0));
    let (upstream, start) = start_with(&calls, Some(8));
    let joined = cache.fetch(spec("k", Expected::default()), start);
    upstream.chunks.send(Ok(Bytes::from_static(b"first"))).await.unwrap();
    let Phase::Streaming(head) = joined.fetch.answered().await else { panic!("not streaming") };
    let mut body = joined.fetch.body(&head, 0, None);
    let frame = tokio::time::timeout(Duration::from_secs(5), body.frame()).await.unwrap().unwrap().unwrap();
    // Everything but the held-back last byte arrives while the upstream is
    // still sending.
    assert_eq!(frame.into_data().unwrap(), Bytes::from_static(b"firs"));
    upstream.chunks.send(Ok(Bytes::from_static(b"end"))).await.unwrap();
    drop(upstream);
    let rest = body.collect().await.unwrap().to_bytes();
    assert_eq!(rest, Bytes::from_static(b"tend"));
}

/// A client waits for its body to be checked, not for the disk: the
/// commit (its flushes) runs on a blocking thread, held busy here, while
/// the waiters read the whole body and new clients join as hits.
#[test]
fn waiters_have_the_whole_body_before_it_is_committed() {
    let runtime = tokio::runtime::Builder::new_current_thread().max_blocking_threads(1).enable_all().build().unwrap();
    runtime.block_on(async {
        let dir = tempfile::tempdir().unwrap();
        let cache = Cache::open(dir.path(), Arc::new(SystemClock)).unwrap();
        let (release, held) = std::sync::mpsc::channel::<()>();
        let busy = tokio::task::spawn_blocking(move || held.recv());
        let calls = Arc::new(AtomicUsize::new(0));
        let (upstream, start) = start_with(&calls, Some(6));
        let joined = cache.fetch(spec("k", Expected::default()), start);
        upstream.chunks.send(Ok(Bytes::from_static(b"abcdef"))).await.unwrap();
        drop(upstream);

        let body = tokio::time::timeout(Duration::from_secs(5), read_all(&cache, &joined.fetch)).await;
        assert_eq!(body.unwrap().unwrap(), b"abcdef");
        assert!(matches!(joined.fetch.checked().await, Phase::Checked { .. }));
        assert!(cache.lookup("k").is_none(), "the commit waits for the blocking thread");
        assert_eq!(cache.read_small("k", 6).as_deref(), Some(&b"abcdef"[..]), "a side reads it whole already");
        assert_eq!(cache.read_small("k", 5), None, "within its limit only");
        let (_, never) = start_with(&calls, None);
        let late = cache.fetch(spec("k", Expected::default()), never);
        assert!(!late.started && late.held, "a client arriving now joins the whole body");
        assert_eq!(read_all(&cache, &late.fetch).await.unwrap(), b"abcdef");

        release.send(()).unwrap();
        assert!(cache.settled_on("k").await, "a request for it waits for its commit");
        assert_eq!(cache.lookup("k").unwrap().size, 6, "committed once the disk is free");
        busy.await.unwrap().unwrap();
        assert!(matches!(joined.fetch.finished().await, Phase::Done(_)));
        assert_eq!(calls.load(Ordering::SeqCst), 1);
    });
}

#[tokio::test]
async fn a_waiter_leaving_does_not_cancel_the_fetch() {
    let dir = tempfile::tempdir().unwrap();
    let cache = Cache::open(dir.path(), Arc::new(SystemClock)).unwrap();
    let calls = Arc::new(AtomicUsize::new(0));
    let (upstream, start) = start_with(&calls, None);
    let joined = cache.fetch(spec("k", Expected::default()), start);
    upstream.chunks.send(Ok(Bytes::from_static(b"part one "))).await.unwrap();
    let Phase::Streaming(head) = joined.fetch.answered().await else { panic!("not streaming") };
    drop(joined.fetch.body(&head, 0, None));
    drop(joined);
    upstream.chunks.send(Ok(Bytes::from_static(b"part two"))).await.unwrap();
    drop(upstream);
    let cached = || async { cache.lookup("k") };
    assert_eq!(eventually("the fetch to be committed without its waiters", cached).await.size, 17);
}

#[tokio::test]
async fn an_upstream_failure_reaches_every_waiter_and_nothing_is_cached() {
    let dir = tempfile::tempdir().unwrap();
    let cache = Cache::open(dir.path(), Arc::new(SystemClock)).unwrap();
    let calls = Arc::new(AtomicUsize::new(0));
    let (upstream, start) = start_with(&calls, Some(100));
    let a = cache.fetch(spec("k", Expected::default()), start).fetch;
    let (_, never) = start_with(&calls, None);
    let b = cache.fetch(spec("k", Expected::default()), never).fetch;
    let readers: Vec<_> = [a, b]
        .into_iter()
        .map(|f| {
            let cache = cache.clone();
            tokio::spawn(async move { read_all(&cache, &f).await })
        })
        .collect();
    upstream.chunks.send(Ok(Bytes::from_static(b"some"))).await.unwrap();
    upstream.chunks.send(Err("connection reset".into())).await.unwrap();
    for reader in readers {
        assert!(reader.await.unwrap().is_err());
    }
    assert!(cache.lookup("k").is_none());
    assert_eq!(std::fs::read_dir(dir.path().join("tmp")).unwrap().count(), 0);
}

#[tokio::test]
async fn a_short_body_is_an_error_not_a_cached_entry() {
    let dir = tempfile::tempdir().unwrap();
    let cache = Cache::open(dir.path(), Arc::new(SystemClock)).unwrap();
    let calls = Arc::new(AtomicUsize::new(0));
    let (upstream, start) = start_with(&calls, Some(10));
    let fetch = cache.fetch(spec("k", Expected::default()), start).fetch;
    upstream.chunks.send(Ok(Bytes::from_static(b"12345"))).await.unwrap();
    drop(upstream);
    assert!(read_all(&cache, &fetch).await.is_err());
    assert!(cache.lookup("k").is_none());
}

#[tokio::test]
async fn a_body_failing_its_checksum_never_completes_for_a_waiter() {
    let dir = tempfile::tempdir().unwrap();
    let cache = Cache::open(dir.path(), Arc::new(SystemClock)).unwrap();
    let calls = Arc::new(AtomicUsize::new(0));
    let (upstream, start) = start_with(&calls, None);
    let expected = Expected { sha256: Some(hex::encode(sha2::Sha256::digest(b"right"))), ..Expected::default() };
    let fetch = cache.fetch(spec("k", expected.clone()), start).fetch;
    upstream.chunks.send(Ok(Bytes::from_static(b"wrong"))).await.unwrap();
    drop(upstream);
    assert!(read_all(&cache, &fetch).await.is_err());
    assert!(cache.lookup("k").is_none());

    // The same bytes that do match are cached.
    let (upstream, start) = start_with(&calls, None);
    let fetch = cache.fetch(spec("k", expected), start).fetch;
    upstream.chunks.send(Ok(Bytes::from_static(b"right"))).await.unwrap();
    drop(upstream);
    assert_eq!(read_all(&cache, &fetch).await.unwrap(), b"right");
    assert!(matches!(fetch.finished().await, Phase::Done(_)));
    assert!(cache.lookup("k").is_some());
}

#[tokio::test]
async fn a_range_of_a_download_in_progress_is_streamed() {
    let dir = tempfile::tempdir().unwrap();
    let cache = Cache::open(dir.path(), Arc::new(SystemClock)).unwrap();
    let calls = Arc::new(AtomicUsize::new(0));
    let (upstream, start) = start_with(&calls, Some(10));
    let fetch = cache.fetch(spec("k", Expected::default()), start).fetch;
    upstream.chunks.send(Ok(Bytes::from_static(b"0123456789"))).await.unwrap();
    let Phase::Streaming(head) = fetch.answered().await else { panic!("not streaming") };
    drop(upstream);
    let part = fetch.body(&head, 3, Some(7)).collect().await.unwrap().to_bytes();
    assert_eq!(part, Bytes::from_static(b"3456"));
}

/// A verifier that expects a size, refuses bodies starting with `old`, and
/// records what it learnt.
#[derive(Debug, Default)]
struct Judge {
    learnt: parking_lot::Mutex<Vec<String>>,
}

impl Verifier for Judge {
    fn expected(&self) -> Expected {
        Expected { size: Some(5), ..Expected::default() }
    }

    fn check(&self, body: &mut BodyReader<'_>, _: &crate::BodyHashes) -> Result<(), String> {
        let mut text = String::new();
        std::io::Read::read_to_string(body, &mut text).unwrap();
        if text.starts_with("old") {
            Err("older than the one held".into())
        } else {
            Ok(())
        }
    }

    fn learns(&self) -> bool {
        true
    }

    fn committed(&self, body: &mut BodyReader<'_>, _: &crate::BodyHashes) {
        let mut text = String::new();
        std::io::Read::read_to_string(body, &mut text).unwrap();
        self.learnt.lock().push(text);
    }
}

#[tokio::test]
async fn a_side_s_verifier_expects_checks_and_learns() {
    let dir = tempfile::tempdir().unwrap();
    let cache = Cache::open(dir.path(), Arc::new(SystemClock)).unwrap();
    let calls = Arc::new(AtomicUsize::new(0));
    let judge = Arc::new(Judge::default());
    let with_judge =
        |key: &str| FetchSpec { verifier: Some(judge.clone() as Arc<dyn Verifier>), ..spec(key, Expected::default()) };

    for (key, body, cached) in [("a", "old!!", false), ("b", "toolong", false), ("c", "new!!", true)] {
        let (upstream, start) = start_with(&calls, None);
        let fetch = cache.fetch(with_judge(key), start).fetch;
        upstream.chunks.send(Ok(Bytes::from(body))).await.unwrap();
        drop(upstream);
        let result = read_all(&cache, &fetch).await;
        assert_eq!(result.is_ok(), cached, "{key}: {body}");
        fetch.finished().await;
        assert_eq!(cache.lookup(key).is_some(), cached, "{key}");
    }
    let learnt = || async { Some(judge.learnt.lock().clone()).filter(|learnt| !learnt.is_empty()) };
    assert_eq!(eventually("the committed body to be learnt", learnt).await, ["new!!"]);
}

/// A verifier whose streaming check wants the bytes `want`, counting what
/// it was fed.
#[derive(Debug)]
struct Streamed {
    want: &'static [u8],
}

struct Collect {
    want: &'static [u8],
    seen: Vec<u8>,
}

impl crate::StreamingCheck for Collect {
    fn update(&mut self, bytes: &[u8]) {
        self.seen.extend_from_slice(bytes);
    }

    fn verdict(self: Box<Self>) -> Result<(), String> {
        match self.seen == self.want {
            true => Ok(()),
            false => Err(format!("streamed {:?}", String::from_utf8_lossy(&self.seen))),
        }
    }
}

impl Verifier for Streamed {
    fn streaming_check(&self) -> Option<Box<dyn crate::StreamingCheck>> {
        Some(Box::new(Collect { want: self.want, seen: Vec::new() }))
    }
}

#[tokio::test]
async fn a_streaming_check_sees_every_byte_in_order_and_its_verdict_decides() {
    let dir = tempfile::tempdir().unwrap();
    let cache = Cache::open(dir.path(), Arc::new(SystemClock)).unwrap();
    let calls = Arc::new(AtomicUsize::new(0));
    for (key, chunks, cached) in [("right", ["abc", "def"], true), ("wrong", ["abc", "xyz"], false)] {
        let verifier = Arc::new(Streamed { want: b"abcdef" }) as Arc<dyn Verifier>;
        let (upstream, start) = start_with(&calls, None);
        let fetch = cache.fetch(FetchSpec { verifier: Some(verifier), ..spec(key, Expected::default()) }, start).fetch;
        for chunk in chunks {
            upstream.chunks.send(Ok(Bytes::from(chunk))).await.unwrap();
        }
        drop(upstream);
        let result = read_all(&cache, &fetch).await;
        assert_eq!(result.is_ok(), cached, "{key}");
        if !cached {
            let error = result.unwrap_err().to_string();
            assert!(error.contains("streamed \"abcxyz\""), "{error}");
        }
        fetch.finished().await;
        assert_eq!(cache.lookup(key).is_some(), cached, "{key}");
    }
}

/// Two instances: the first answers `old!!`, the other `new!!`.
struct TwoMirrors {
    asked: Arc<parking_lot::Mutex<Vec<&'static str>>>,
}

impl TwoMirrors {
    fn answer(&self, who: &'static str, body: &'static str) -> StartFetch {
        self.asked.lock().push(who);
        Box::pin(async move {
            let answer = http::Response::builder().status(200).header("content-length", body.len());
            let body = http_body_util::Full::new(Bytes::from(body)).map_err(|never| match never {}).boxed();
            Ok(answer.body(body).unwrap().into())
        })
    }
}

impl Source for TwoMirrors {
    fn start(&self) -> StartFetch {
        self.answer("behind", "old!!")
    }

    fn elsewhere(&self) -> Option<StartFetch> {
        Some(self.answer("current", "new!!"))
    }
}

/// [`Judge`], judging whole bodies before any client is given them.
#[derive(Debug, Default)]
struct WholeJudge(Judge);

impl Verifier for WholeJudge {
    fn judges_body(&self) -> bool {
        true
    }

    fn check(&self, body: &mut BodyReader<'_>, hashes: &crate::BodyHashes) -> Result<(), String> {
        self.0.check(body, hashes)
    }
}

#[tokio::test]
async fn a_body_its_check_refuses_is_asked_of_another_instance_once_when_no_client_had_it() {
    let dir = tempfile::tempdir().unwrap();
    let cache = Cache::open(dir.path(), Arc::new(SystemClock)).unwrap();
    let judging = |key: &str, verifier: Arc<dyn Verifier>| FetchSpec {
        verifier: Some(verifier),
        ..spec(key, Expected::default())
    };

    let asked = Arc::new(parking_lot::Mutex::new(Vec::new()));
    let source = TwoMirrors { asked: Arc::clone(&asked) };
    let fetch = cache.fetch_from(judging("whole", Arc::new(WholeJudge::default())), || Box::new(source)).fetch;
    // Its clients wait for the verdict, as the server makes them.
    let Phase::Checked { entry, body } = fetch.checked().await else { panic!("the current body is checked") };
    let mut bytes = vec![0; entry.size as usize];
    std::os::unix::fs::FileExt::read_exact_at(body.as_ref(), &mut bytes, 0).unwrap();
    assert_eq!(bytes, b"new!!");
    fetch.finished().await;
    assert_eq!(*asked.lock(), ["behind", "current"]);
    assert!(cache.lookup("whole").is_some(), "the current body is cached");

    // A body streamed to its clients as it came is not asked again: what
    // they were given cannot be taken back.
    let asked = Arc::new(parking_lot::Mutex::new(Vec::new()));
    let source = TwoMirrors { asked: Arc::clone(&asked) };
    let fetch = cache.fetch_from(judging("streamed", Arc::new(Judge::default())), || Box::new(source)).fetch;
    assert!(read_all(&cache, &fetch).await.is_err());
    fetch.finished().await;
    assert_eq!(*asked.lock(), ["behind"]);
    assert!(cache.lookup("streamed").is_none());
}
