//! Ports for tests that need a connection to be refused: bound on
//! 127.0.0.1 but never listening, and held for as long as the value lives,
//! so no other test (or process) can take the port meanwhile. A port that
//! was bound, dropped and then named is a race: anyone may have taken it.

use std::net::SocketAddr;

/// A port on 127.0.0.1 that refuses every connection while it lives.
#[derive(Debug)]
pub struct RefusingPort {
    /// Bound, not listening: a connection attempt is refused.
    socket: tokio::net::TcpSocket,
    addr: SocketAddr,
}

impl RefusingPort {
    /// Binds a fresh port.
    pub fn new() -> RefusingPort {
        let socket = tokio::net::TcpSocket::new_v4().expect("a TCP socket");
        socket.bind("127.0.0.1:0".parse().expect("an address")).expect("bind a port on 127.0.0.1");
        let addr = socket.local_addr().expect("the bound address");
        RefusingPort { socket, addr }
    }

    /// Binds `count` distinct ports.
    pub fn many(count: usize) -> Vec<RefusingPort> {
        (0..count).map(|_| RefusingPort::new()).collect()
    }

    /// `127.0.0.1:PORT`.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// The port.
    pub fn port(&self) -> u16 {
        self.addr.port()
    }

    /// `http://127.0.0.1:PORT`.
    pub fn url(&self) -> String {
        let _ = &self.socket;
        format!("http://{}", self.addr)
    }
}

impl Default for RefusingPort {
    fn default() -> Self {
        RefusingPort::new()
    }
}
