//! Generates a cache of many entries, for the scale benchmark
//! (`bench/scale.sh`): `generate_cache DIR ENTRIES URLS`. Each entry is
//! an apt package of the archive `bench` with a body of its own (a few
//! hundred bytes to a few kilobytes), written through the store as a
//! download would be (fsynced blob, then the index commit); `URLS` gets
//! the URL of every tenth entry, as a client asks for it through the
//! proxy, for `oha --urls-from-file`.

use std::io::Write;
use std::path::PathBuf;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use pkgproxy_cache::{Class, Record, Store, SystemClock, Validators};

/// Entries written per index commit.
const BATCH: usize = 500;
/// Writers at once: blob writes wait on fsync, not on the CPU.
const WRITERS: usize = 8;
/// Where the benchmark's configuration says the archive `bench` lives.
const MIRROR: &str = "http://127.0.0.1:9/debian";

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let [_, dir, entries, urls] = args.as_slice() else {
        eprintln!("usage: generate_cache DIR ENTRIES URLS");
        std::process::exit(2);
    };
    let entries: usize = entries.parse().expect("ENTRIES is a number");
    let store = Arc::new(Store::open(&PathBuf::from(dir), Arc::new(SystemClock)).expect("the cache opens"));
    let (done_before, _) = store.totals();
    let next = Arc::new(AtomicUsize::new(done_before));
    let started = std::time::Instant::now();
    let writers: Vec<_> = (0..WRITERS)
        .map(|_| {
            let (store, next) = (Arc::clone(&store), Arc::clone(&next));
            std::thread::spawn(move || write_batches(&store, &next, entries, started))
        })
        .collect();
    for writer in writers {
        writer.join().expect("a writer finished");
    }
    let mut file = std::fs::File::create(urls).expect("the URL file is created");
    for n in (0..entries).step_by(10) {
        writeln!(file, "{MIRROR}/{}", package_path(n)).expect("the URL file is written");
    }
    let (count, bytes) = store.totals();
    println!("{count} entries, {bytes} bytes, in {:.0?}", started.elapsed());
}

fn write_batches(store: &Store, next: &AtomicUsize, entries: usize, started: std::time::Instant) {
    loop {
        let first = next.fetch_add(BATCH, Ordering::Relaxed);
        if first >= entries {
            return;
        }
        let records = (first..entries.min(first + BATCH)).map(record).collect();
        store.put_all(records).expect("a batch is stored");
        if first % 50_000 < BATCH {
            eprintln!("{first} entries written, {:.0?}", started.elapsed());
        }
    }
}

/// The package path of entry `n` (within the archive).
fn package_path(n: usize) -> String {
    format!("pool/main/p/pkg{n}/pkg{n}_1.0-{}_amd64.deb", n % 7)
}

fn record(n: usize) -> Record {
    let size = 200 + (n * 7919) % 3800;
    let line = format!("package {n}\n");
    let body: Vec<u8> = line.bytes().cycle().take(size).collect();
    Record {
        key: format!("apt/bench/{}", package_path(n)),
        body: body.into(),
        headers: vec![("content-type".into(), "application/vnd.debian.binary-package".into())],
        validators: Validators { etag: Some(format!("\"{n:x}-{size:x}\"")), last_modified: None },
        class: Class::Immutable,
        fetched_at: None,
    }
}
