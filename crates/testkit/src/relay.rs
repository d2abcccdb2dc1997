//! A TCP relay that keeps what its clients send: put between two parties
//! (a node and its peer), it shows what went over the wire, as someone
//! watching the network would see it.

// The relay stands between test parties; the one-way-out rule is about the
// daemon's own traffic.
#![allow(clippy::disallowed_methods)]

use parking_lot::Mutex;
use std::net::SocketAddr;
use std::sync::Arc;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

/// Relays connections on 127.0.0.1 to a target set once it is known.
pub struct Relay {
    addr: SocketAddr,
    target: Arc<Mutex<Option<String>>>,
    sent: Arc<Mutex<Vec<u8>>>,
    accepting: tokio::task::JoinHandle<()>,
}

impl Relay {
    /// Listens on a fresh port; connections wait for [`Relay::forward_to`].
    pub async fn start() -> Relay {
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind the relay");
        let addr = listener.local_addr().expect("the relay's address");
        let (target, sent) = (Arc::new(Mutex::new(None::<String>)), Arc::new(Mutex::new(Vec::new())));
        let (to, kept) = (Arc::clone(&target), Arc::clone(&sent));
        let accepting = tokio::spawn(async move {
            while let Ok((client, _)) = listener.accept().await {
                let Some(target) = to.lock().clone() else { continue };
                tokio::spawn(relay(client, target, Arc::clone(&kept)));
            }
        });
        Relay { addr, target, sent, accepting }
    }

    /// Where connections go from now on (`HOST:PORT`).
    pub fn forward_to(&self, target: &str) {
        *self.target.lock() = Some(target.to_owned());
    }

    /// `http://127.0.0.1:PORT`.
    pub fn url(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// Everything the relay's clients sent so far.
    pub fn sent(&self) -> Vec<u8> {
        self.sent.lock().clone()
    }
}

impl Drop for Relay {
    fn drop(&mut self) {
        self.accepting.abort();
    }
}

/// Copies `client` to `target` (keeping what it sends) and back.
async fn relay(client: TcpStream, target: String, kept: Arc<Mutex<Vec<u8>>>) {
    let Ok(server) = TcpStream::connect(&target).await else { return };
    let (mut client_read, mut client_write) = client.into_split();
    let (mut server_read, mut server_write) = server.into_split();
    let upward = async move {
        let mut buffer = vec![0u8; 16 * 1024];
        while let Ok(read) = client_read.read(&mut buffer).await {
            if read == 0 || server_write.write_all(&buffer[..read]).await.is_err() {
                break;
            }
            kept.lock().extend_from_slice(&buffer[..read]);
        }
        let _ = server_write.shutdown().await;
    };
    let downward = async move {
        let _ = tokio::io::copy(&mut server_read, &mut client_write).await;
        let _ = client_write.shutdown().await;
    };
    tokio::join!(upward, downward);
}
