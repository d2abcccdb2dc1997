//! The soak: pkgproxy killed with `SIGKILL` at random moments while many
//! clients download blobs, by digest, from an upstream that sometimes lies
//! (wrong bytes, short bodies, cut connections), restarted each time. In
//! the end every body any client got whole is the right one, `cache
//! verify` finds nothing bad, and no temporary file is left.
//!
//! The short form runs with the suite; the full form (50 kills, 50
//! clients) by hand: `bench/soak.sh`, or `SOAK_KILLS=50 SOAK_CLIENTS=50
//! cargo test --test it soak -- --ignored`.

use parking_lot::Mutex;
use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use sha2::{Digest, Sha256};

use crate::common::PKGPROXY;
use pkgproxy_testkit::client::try_get;
use pkgproxy_testkit::{Behaviour, ChaosUpstream, Daemon};

/// A small deterministic generator (xorshift), so a failing run can be
/// replayed from its seed.
struct Random(u64);

impl Random {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }

    fn below(&mut self, n: u64) -> u64 {
        self.next() % n.max(1)
    }
}

/// What a soak does.
struct Soak {
    kills: usize,
    clients: usize,
    blobs: usize,
    seed: u64,
}

/// What the clients saw.
#[derive(Default)]
struct Seen {
    complete: AtomicU64,
    failed: AtomicU64,
    wrong: Mutex<Vec<String>>,
}

fn setting(name: &str, default: usize) -> usize {
    std::env::var(name).ok().and_then(|value| value.parse().ok()).unwrap_or(default)
}

#[tokio::test(flavor = "multi_thread")]
async fn short_soak_kills_during_downloads_from_a_lying_upstream_serve_nothing_wrong() {
    run(Soak { kills: 3, clients: 100, blobs: 24, seed: 0x5eed_0001 }).await;
}

#[tokio::test(flavor = "multi_thread")]
#[ignore = "the full soak takes minutes: bench/soak.sh runs it"]
async fn full_soak() {
    let seed = setting("SOAK_SEED", 0x5eed_0002) as u64;
    run(Soak { kills: setting("SOAK_KILLS", 50), clients: setting("SOAK_CLIENTS", 50), blobs: 64, seed }).await;
}

async fn run(soak: Soak) {
    let mut random = Random(soak.seed);
    let chaos = Arc::new(ChaosUpstream::start().await);
    let mut blobs: HashMap<String, Vec<u8>> = HashMap::new();
    for _ in 0..soak.blobs {
        let size = 16 * 1024 + random.below(2 * 1024 * 1024) as usize;
        let bytes: Vec<u8> = (0..size).map(|_| random.next() as u8).collect();
        let digest = format!("sha256:{}", hex::encode(Sha256::digest(&bytes)));
        let path = format!("/v2/library/soak/blobs/{digest}");
        chaos.put(&path, bytes.clone());
        blobs.insert(path, bytes);
    }
    let paths: Arc<Vec<String>> = Arc::new(blobs.keys().cloned().collect());
    let blobs = Arc::new(blobs);
    let config = format!("[[registry.upstream]]\nname = \"docker.io\"\nmirrors = [\"{}\"]\n", chaos.url());
    let mut daemon = Daemon::start(PKGPROXY, Some(&config)).await;
    let address = Arc::new(Mutex::new(daemon.proxy_addr().to_string()));
    let (stop, seen) = (Arc::new(AtomicBool::new(false)), Arc::new(Seen::default()));

    let mut clients = Vec::new();
    for client in 0..soak.clients {
        let (address, stop, seen) = (Arc::clone(&address), Arc::clone(&stop), Arc::clone(&seen));
        let (paths, blobs) = (Arc::clone(&paths), Arc::clone(&blobs));
        let mut random = Random(soak.seed ^ (client as u64 + 1).wrapping_mul(0x9e37_79b9_7f4a_7c15));
        clients.push(tokio::spawn(async move {
            while !stop.load(Ordering::Relaxed) {
                let path = &paths[random.below(paths.len() as u64) as usize];
                let addr = address.lock().clone();
                let answer = tokio::time::timeout(Duration::from_secs(30), try_get(&addr, path)).await;
                match answer {
                    Ok(Some(answer)) if answer.status == 200 && answer.complete => {
                        seen.complete.fetch_add(1, Ordering::Relaxed);
                        if answer.body.as_ref() != blobs[path].as_slice() {
                            seen.wrong.lock().push(format!("{path}: {} bytes", answer.body.len()));
                        }
                    }
                    _ => {
                        seen.failed.fetch_add(1, Ordering::Relaxed);
                        tokio::time::sleep(Duration::from_millis(20)).await;
                    }
                }
            }
        }));
    }
    // The upstream lies about some blobs at a time, differently each round.
    let lies = [
        Behaviour::WrongBytes,
        Behaviour::ShortLength { declared: 1000 },
        Behaviour::ResetMidBody { after_bytes: 10_000 },
        Behaviour::BadChunks { after_bytes: 5_000 },
        Behaviour::Ok,
        Behaviour::Ok,
    ];
    for round in 0..soak.kills {
        for path in paths.iter() {
            chaos.set_path_behaviour(path, lies[random.below(lies.len() as u64) as usize].clone());
        }
        tokio::time::sleep(Duration::from_millis(200 + random.below(800))).await;
        daemon.kill9();
        tokio::time::sleep(Duration::from_millis(random.below(100))).await;
        daemon.start_again().await;
        *address.lock() = daemon.proxy_addr().to_string();
        assert!(seen.wrong.lock().is_empty(), "round {round}: {:?}", seen.wrong.lock());
    }
    // Honest at the end, so every blob can be had.
    for path in paths.iter() {
        chaos.clear_path_behaviour(path);
    }
    tokio::time::sleep(Duration::from_millis(500)).await;
    stop.store(true, Ordering::Relaxed);
    for client in clients {
        client.await.unwrap();
    }
    let wrong = seen.wrong.lock().clone();
    assert!(wrong.is_empty(), "wrong bodies served whole: {wrong:?}");
    let complete = seen.complete.load(Ordering::Relaxed);
    assert!(complete > soak.clients as u64, "downloads went on between kills: {complete}");
    eprintln!(
        "soak: {} kills, {complete} whole downloads right, {} cut or refused",
        soak.kills,
        seen.failed.load(Ordering::Relaxed)
    );

    // What the kills left: no temporary file, no entry whose body is wrong.
    daemon.kill9();
    daemon.start_again().await;
    let tmp = daemon.cache_dir().join("tmp");
    let left: Vec<_> = std::fs::read_dir(&tmp).map(|dir| dir.flatten().map(|e| e.path()).collect()).unwrap_or_default();
    assert!(left.is_empty(), "temporary files left after a restart: {left:?}");
    let (status, verified) = daemon.admin("POST", "/pkgproxy/v1/cache/verify", None).await;
    assert_eq!(status, 200, "{verified}");
    assert_eq!((verified["bad"].as_u64(), verified["entries_removed"].as_u64()), (Some(0), Some(0)), "{verified}");
    for path in paths.iter() {
        let answer = try_get(daemon.proxy_addr(), path).await.expect("served");
        assert_eq!((answer.status, answer.complete), (200, true), "{path}");
        assert!(answer.body.as_ref() == blobs[path].as_slice(), "{path}: the right bytes at the end");
    }
}
