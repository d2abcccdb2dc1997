//! The network the way out connects over: the system's TCP/IP stack, or an
//! in-memory network of byte pipes that a test hands in.
//!
//! Only the byte pipe is swapped. Names still go through the
//! [`Resolver`](crate::Resolver), the address policy still judges the
//! addresses, and the counters, the offline switch, the breakers and the
//! pools see a memory connection exactly as they see a socket. That is why
//! the memory network is keyed by socket address (`ip:port`), not by name:
//! a test pins a name to an address with [`Resolver::pin`](crate::Resolver::pin)
//! or uses an address literal, as it would with a real server.
//!
//! Why here and not in the testkit: the memory network is one of the ways
//! out, so it lives with the one place that connects. Servers on it (the
//! testkit's chaos upstream) need no type of this crate: a
//! [`MemoryListener`] turns into a plain tokio channel of
//! [`DuplexStream`]s ([`MemoryListener::into_incoming`]), so the testkit,
//! a dev-dependency of this crate, does not depend back on it.
//!
//! This module opens no socket and reads no clock: a connection is a
//! [`tokio::io::duplex`] pair whose server half is queued to the listener.

use parking_lot::{Mutex, MutexGuard};
use std::collections::HashMap;
use std::io;
use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;

use tokio::io::DuplexStream;
use tokio::sync::mpsc;

/// Bytes a pipe holds in each direction before a writer waits for its
/// reader: about a socket buffer's worth, so a server that outruns its
/// client is held back as on TCP.
const PIPE_BUFFER: usize = 64 * 1024;

/// The first port handed out for a listen on port 0 (the start of the
/// IANA dynamic range, where kernels pick ephemeral ports too).
const FIRST_FREE_PORT: u16 = 49152;

/// Where upstream connections go.
#[derive(Debug, Clone, Default)]
pub enum Network {
    /// The system's TCP/IP stack: real sockets, with TCP keepalive and
    /// `TCP_NODELAY` (see [`Keepalive`](crate::Keepalive)), and TLS for
    /// `https://`.
    #[default]
    System,
    /// An in-memory network (tests): no socket, no kernel, no wait that is
    /// not the program's own, so a test on tokio's paused clock never races
    /// bytes in flight. It carries plain HTTP only: an `https://` upstream
    /// fails its handshake with [`io::ErrorKind::Unsupported`], and so does
    /// a CONNECT tunnel, which needs a TCP socket to hand to its client.
    Memory(MemoryNetwork),
}

/// An in-memory network: listeners by socket address, and connections
/// made of [`tokio::io::duplex`] pipes. Clones share the same network.
///
/// A connection to an address nobody listens on (or whose listener was
/// dropped) is refused like a TCP connect to a closed port, with
/// [`io::ErrorKind::ConnectionRefused`]. A connection is established as
/// soon as it is queued for its listener, like one in a TCP backlog.
/// Either end dropping its stream closes the pipe: the other end reads
/// what was already written, then end of file, and its writes fail with
/// [`io::ErrorKind::BrokenPipe`]. There are no resets.
#[derive(Debug, Clone, Default)]
pub struct MemoryNetwork {
    listeners: Arc<Mutex<Listeners>>,
}

/// The listening addresses of a memory network.
#[derive(Debug, Default)]
struct Listeners {
    /// Where each listening address queues the server halves of its new
    /// connections.
    by_address: HashMap<SocketAddr, mpsc::UnboundedSender<DuplexStream>>,
}

impl Listeners {
    /// True when a live listener has `address` (one whose listener was
    /// dropped has given it up).
    fn taken(&self, address: &SocketAddr) -> bool {
        self.by_address.get(address).is_some_and(|queue| !queue.is_closed())
    }

    /// A port of `ip` nobody listens on, counting up from
    /// [`FIRST_FREE_PORT`].
    fn free_port(&self, ip: IpAddr) -> Option<u16> {
        (FIRST_FREE_PORT..=u16::MAX).find(|&port| !self.taken(&SocketAddr::new(ip, port)))
    }
}

/// Why a memory network would not listen on an address.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum ListenError {
    /// A live listener already has the address.
    #[error("{address} is already listened on in the memory network")]
    InUse {
        /// The address asked for.
        address: SocketAddr,
    },
    /// Port 0 was asked for and every dynamic port of the IP is taken.
    #[error("no free port left on {ip} in the memory network")]
    NoFreePort {
        /// The IP asked for.
        ip: IpAddr,
    },
}

impl MemoryNetwork {
    /// An empty network.
    pub fn new() -> Self {
        MemoryNetwork::default()
    }

    /// Listens on `address`; port 0 picks a free port of its IP from the
    /// dynamic range (49152 up), as a TCP bind does. Dropping the listener
    /// frees the address.
    pub fn listen(&self, address: SocketAddr) -> Result<MemoryListener, ListenError> {
        let mut listeners = self.listeners();
        let address = match address.port() {
            0 => {
                let port = listeners.free_port(address.ip()).ok_or(ListenError::NoFreePort { ip: address.ip() })?;
                SocketAddr::new(address.ip(), port)
            }
            _ if listeners.taken(&address) => return Err(ListenError::InUse { address }),
            _ => address,
        };
        let (queue, incoming) = mpsc::unbounded_channel();
        listeners.by_address.insert(address, queue);
        Ok(MemoryListener { address, incoming })
    }

    /// Connects to `address`: the client half of a new pipe, whose server
    /// half waits for the listener's next accept.
    pub(crate) fn connect(&self, address: SocketAddr) -> io::Result<DuplexStream> {
        let mut listeners = self.listeners();
        let Some(queue) = listeners.by_address.get(&address) else {
            return Err(refused(address));
        };
        let (client, server) = tokio::io::duplex(PIPE_BUFFER);
        if queue.send(server).is_err() {
            listeners.by_address.remove(&address);
            return Err(refused(address));
        }
        Ok(client)
    }

    fn listeners(&self) -> MutexGuard<'_, Listeners> {
        self.listeners.lock()
    }
}

/// What a TCP connect to a closed port says.
fn refused(address: SocketAddr) -> io::Error {
    io::Error::new(io::ErrorKind::ConnectionRefused, format!("nobody listens on {address} in the memory network"))
}

/// A listening address of a [`MemoryNetwork`]: each connection made to it
/// arrives as the server half of its pipe.
#[derive(Debug)]
pub struct MemoryListener {
    address: SocketAddr,
    incoming: mpsc::UnboundedReceiver<DuplexStream>,
}

impl MemoryListener {
    /// The address it listens on (with the port picked for port 0).
    pub fn local_addr(&self) -> SocketAddr {
        self.address
    }

    /// The next connection; `None` once the network is gone and every
    /// queued connection was taken.
    pub async fn accept(&mut self) -> Option<DuplexStream> {
        self.incoming.recv().await
    }

    /// The connections as a plain tokio channel, for a server that knows
    /// nothing of this crate. Dropping the receiver stops listening.
    pub fn into_incoming(self) -> mpsc::UnboundedReceiver<DuplexStream> {
        self.incoming
    }
}

#[cfg(test)]
mod tests {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    use super::*;

    fn addr(text: &str) -> SocketAddr {
        text.parse().unwrap()
    }

    #[tokio::test]
    async fn a_connection_carries_bytes_both_ways_and_ends_with_end_of_file() {
        let network = MemoryNetwork::new();
        let mut listener = network.listen(addr("127.0.0.1:80")).unwrap();
        let mut client = network.connect(addr("127.0.0.1:80")).unwrap();
        let mut server = listener.accept().await.unwrap();
        client.write_all(b"ping").await.unwrap();
        let mut got = [0u8; 4];
        server.read_exact(&mut got).await.unwrap();
        assert_eq!(&got, b"ping");
        server.write_all(b"last words").await.unwrap();
        drop(server);
        let mut rest = Vec::new();
        client.read_to_end(&mut rest).await.unwrap();
        assert_eq!(rest, b"last words", "what was written before the close still arrives");
        assert_eq!(client.write_all(b"more").await.unwrap_err().kind(), io::ErrorKind::BrokenPipe);
    }

    #[test]
    fn nobody_listening_refuses_like_a_closed_port() {
        let network = MemoryNetwork::new();
        let error = network.connect(addr("127.0.0.1:80")).unwrap_err();
        assert_eq!(error.kind(), io::ErrorKind::ConnectionRefused);
        let listener = network.listen(addr("127.0.0.1:80")).unwrap();
        drop(listener);
        let error = network.connect(addr("127.0.0.1:80")).unwrap_err();
        assert_eq!(error.kind(), io::ErrorKind::ConnectionRefused, "a dropped listener gave its address up");
        assert!(network.listen(addr("127.0.0.1:80")).is_ok(), "and it can be listened on again");
    }

    #[test]
    fn port_zero_picks_distinct_free_ports_and_taken_addresses_are_refused() {
        let network = MemoryNetwork::new();
        let first = network.listen(addr("127.0.0.1:0")).unwrap();
        let second = network.listen(addr("127.0.0.1:0")).unwrap();
        assert_ne!(first.local_addr(), second.local_addr());
        assert_eq!(first.local_addr().ip(), addr("127.0.0.1:1").ip());
        assert_eq!(network.listen(first.local_addr()).unwrap_err(), ListenError::InUse { address: first.local_addr() });
    }
}
