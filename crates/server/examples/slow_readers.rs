//! Clients on slow links, for `bench/slow_readers.sh`: each one a
//! connection through the proxy asking for one URL and reading its answer at
//! a fixed rate with a small receive buffer. All of them run on one thread,
//! so that pacing thousands of readers takes little of the machine the proxy
//! is measured on.
//!
//!     slow_readers PROXY_PORT URL CLIENTS BYTES_A_SECOND SECONDS
//!
//! Prints how many readers got bytes, and the bytes a second read in all.

use std::net::{Ipv4Addr, SocketAddr};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpSocket;
use tokio::time::Instant;

/// The receive buffer a reader asks for, as a client on a slow link has.
const RECEIVE_BUFFER: u32 = 64 * 1024;
/// What one read takes at most.
const READ: usize = 16 * 1024;

struct Settings {
    proxy: SocketAddr,
    url: String,
    clients: usize,
    rate: u64,
    seconds: u64,
}

fn settings() -> Result<Settings, String> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let [port, url, clients, rate, seconds] = args.as_slice() else {
        return Err("usage: slow_readers PROXY_PORT URL CLIENTS BYTES_A_SECOND SECONDS".into());
    };
    let number = |what: &str, text: &str| text.parse::<u64>().map_err(|_| format!("{what}: not a number: {text}"));
    let port = u16::try_from(number("port", port)?).map_err(|_| format!("port out of range: {port}"))?;
    Ok(Settings {
        proxy: SocketAddr::from((Ipv4Addr::LOCALHOST, port)),
        url: url.clone(),
        clients: number("clients", clients)? as usize,
        rate: number("rate", rate)?.max(1),
        seconds: number("seconds", seconds)?,
    })
}

/// Reads `url` through the proxy at `rate` bytes a second until the answer
/// ends, counting what it read in `read`.
async fn read_slowly(proxy: SocketAddr, url: Arc<str>, rate: u64, read: Arc<AtomicU64>) -> std::io::Result<()> {
    let socket = TcpSocket::new_v4()?;
    socket.set_recv_buffer_size(RECEIVE_BUFFER)?;
    #[allow(clippy::disallowed_methods)] // a client of the proxy under measurement, not an upstream
    let mut stream = socket.connect(proxy).await?;
    stream.write_all(format!("GET {url} HTTP/1.1\r\nHost: slow-readers\r\n\r\n").as_bytes()).await?;
    let started = Instant::now();
    let mut buffer = vec![0; READ];
    let mut total = 0u64;
    loop {
        let got = stream.read(&mut buffer).await?;
        if got == 0 {
            return Ok(());
        }
        total += got as u64;
        read.fetch_add(got as u64, Ordering::Relaxed);
        tokio::time::sleep_until(started + Duration::from_secs_f64(total as f64 / rate as f64)).await;
    }
}

fn main() {
    let settings = match settings() {
        Ok(settings) => settings,
        Err(error) => {
            eprintln!("slow_readers: {error}");
            std::process::exit(2);
        }
    };
    let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().expect("a runtime");
    runtime.block_on(async {
        let url: Arc<str> = settings.url.into();
        let counters: Vec<Arc<AtomicU64>> = (0..settings.clients).map(|_| Arc::new(AtomicU64::new(0))).collect();
        for read in &counters {
            let (url, read) = (Arc::clone(&url), Arc::clone(read));
            tokio::spawn(async move {
                if let Err(error) = read_slowly(settings.proxy, url, settings.rate, read).await {
                    eprintln!("slow_readers: a reader stopped: {error}");
                }
            });
        }
        tokio::time::sleep(Duration::from_secs(settings.seconds)).await;
        let reading = counters.iter().filter(|read| read.load(Ordering::Relaxed) > 0).count();
        let bytes: u64 = counters.iter().map(|read| read.load(Ordering::Relaxed)).sum();
        let per_second = bytes as f64 / settings.seconds.max(1) as f64 / 1e6;
        println!("{reading} readers, {per_second:.1} MB/s in all");
    });
}
