//! Who may open a connection to the proxy listener, and how many at once:
//! a client outside `[server] allow` is told `403`, one over its share of
//! connections (or over all of them) `503`, and the connection is closed.
//! Connections already open are never cut to make room.
//!
//! A client's share counts its HTTP/2 streams too: each stream being
//! answered takes a place beside its connection's own, as long as its
//! answer holds memory in pkgproxy ([`StreamBudget`]). A stream beyond the
//! share is answered `503`; one HTTP/1.1 connection answers one request at
//! a time, and its place covers it.

use parking_lot::Mutex;
use std::collections::HashMap;
use std::net::IpAddr;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use arc_swap::ArcSwap;
use pkgproxy_metrics::{ClientCounter, Counters};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

use crate::config::clients::ClientLimits;

/// How long a refused connection is given to read its answer.
const REFUSAL_TIME: Duration = Duration::from_secs(2);

/// The connections open, by client, against the limits.
#[derive(Debug)]
pub struct Admission {
    limits: ArcSwap<ClientLimits>,
    open: AtomicUsize,
    by_client: Mutex<HashMap<IpAddr, usize>>,
    /// Accepted, refused and timed-out connections.
    pub counters: Arc<Counters<ClientCounter>>,
}

/// Why a connection is not served.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Refusal {
    /// Its address is outside `[server] allow`.
    NotAllowed,
    /// `max_connections` are open.
    Full,
    /// `max_connections_per_client` are open from its address.
    ClientFull,
}

/// An admitted connection's place, given back when it is dropped.
#[derive(Debug)]
pub struct Ticket {
    admission: Arc<Admission>,
    client: IpAddr,
}

/// Where an HTTP/2 connection takes its streams' places: its client's
/// share.
#[derive(Debug, Clone)]
pub struct StreamBudget {
    admission: Arc<Admission>,
    client: IpAddr,
}

/// A stream's place in its client's share, given back when it is dropped.
#[derive(Debug)]
pub struct StreamPlace {
    budget: StreamBudget,
}

impl Admission {
    /// Admission under `limits`.
    pub fn new(limits: ClientLimits) -> Arc<Self> {
        Arc::new(Admission {
            limits: ArcSwap::from_pointee(limits),
            open: AtomicUsize::new(0),
            by_client: Mutex::new(HashMap::new()),
            counters: Arc::default(),
        })
    }

    /// The limits in force.
    pub fn limits(&self) -> Arc<ClientLimits> {
        self.limits.load_full()
    }

    /// Takes `limits` for the connections from now on (a reload).
    pub fn reconfigure(&self, limits: ClientLimits) {
        self.limits.store(Arc::new(limits));
    }

    /// Client connections open now.
    pub fn open(&self) -> usize {
        self.open.load(Ordering::Relaxed)
    }

    /// A place for a connection from `address`, or why there is none.
    pub fn admit(self: &Arc<Self>, address: IpAddr) -> Result<Ticket, Refusal> {
        let limits = self.limits.load();
        let client = limits.client_of(address);
        let refused = |refusal, counter| {
            self.counters.increment(counter);
            Err(refusal)
        };
        if !limits.allows(address) {
            return refused(Refusal::NotAllowed, ClientCounter::RefusedNotAllowed);
        }
        let mut by_client = self.by_client.lock();
        if self.open.load(Ordering::Relaxed) >= limits.max_connections {
            return refused(Refusal::Full, ClientCounter::RefusedFull);
        }
        let mine = by_client.entry(client).or_insert(0);
        if *mine >= limits.max_connections_per_client {
            return refused(Refusal::ClientFull, ClientCounter::RefusedClientFull);
        }
        *mine += 1;
        self.open.fetch_add(1, Ordering::Relaxed);
        self.counters.increment(ClientCounter::Accepted);
        Ok(Ticket { admission: Arc::clone(self), client })
    }
}

impl Ticket {
    /// Where the connection's HTTP/2 streams take their places.
    pub fn streams(&self) -> StreamBudget {
        StreamBudget { admission: Arc::clone(&self.admission), client: self.client }
    }
}

impl Drop for Ticket {
    fn drop(&mut self) {
        self.admission.give_back(self.client);
        self.admission.open.fetch_sub(1, Ordering::Relaxed);
    }
}

impl Admission {
    /// One place of `client`'s share is free again.
    fn give_back(&self, client: IpAddr) {
        let mut by_client = self.by_client.lock();
        if let Some(mine) = by_client.get_mut(&client) {
            *mine -= 1;
            if *mine == 0 {
                by_client.remove(&client);
            }
        }
    }
}

impl StreamBudget {
    /// A place for one more stream, or `None` when the client's
    /// connections and streams take its whole share.
    pub fn take(&self) -> Option<StreamPlace> {
        let limits = self.admission.limits.load();
        let mut by_client = self.admission.by_client.lock();
        let mine = by_client.entry(self.client).or_insert(0);
        if *mine >= limits.max_connections_per_client {
            drop(by_client);
            self.admission.counters.increment(ClientCounter::RefusedClientStreams);
            return None;
        }
        *mine += 1;
        Some(StreamPlace { budget: self.clone() })
    }
}

impl Drop for StreamPlace {
    fn drop(&mut self) {
        self.budget.admission.give_back(self.budget.client);
    }
}

/// Tells a refused client why, closes its connection, and reads what it
/// sent meanwhile so the close does not reset the answer away.
pub async fn refuse(mut stream: TcpStream, refusal: Refusal) {
    let (status, reason, retry) = match refusal {
        Refusal::NotAllowed => ("403 Forbidden", "pkgproxy: this address is not in [server] allow", ""),
        Refusal::Full => ("503 Service Unavailable", "pkgproxy: too many connections; try again", "Retry-After: 1\r\n"),
        Refusal::ClientFull => (
            "503 Service Unavailable",
            "pkgproxy: too many connections from this address; try again",
            "Retry-After: 1\r\n",
        ),
    };
    let answer = format!(
        "HTTP/1.1 {status}\r\nContent-Type: text/plain; charset=utf-8\r\nContent-Length: {}\r\nConnection: close\r\n{retry}\r\n{reason}\n",
        reason.len() + 1
    );
    let _ = tokio::time::timeout(REFUSAL_TIME, async {
        stream.write_all(answer.as_bytes()).await?;
        stream.shutdown().await?;
        let mut sink = [0u8; 4096];
        while stream.read(&mut sink).await? > 0 {}
        std::io::Result::Ok(())
    })
    .await;
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::clients::ClientLimits;

    fn admission(max: usize, per_client: usize) -> Arc<Admission> {
        let section = crate::config::ServerSection {
            max_connections: Some(max),
            max_connections_per_client: Some(per_client),
            allow: Some(vec!["127.0.0.0/8".into()]),
            ..Default::default()
        };
        Admission::new(ClientLimits::new(&section).unwrap())
    }

    #[test]
    fn a_client_over_its_share_is_refused_and_others_are_not_until_all_are_taken() {
        let admission = admission(3, 2);
        let (one, two) = ("127.0.0.1".parse().unwrap(), "127.0.0.2".parse().unwrap());
        let first = admission.admit(one).unwrap();
        let _second = admission.admit(one).unwrap();
        assert_eq!(admission.admit(one).unwrap_err(), Refusal::ClientFull);
        let _other = admission.admit(two).unwrap();
        assert_eq!(admission.admit(two).unwrap_err(), Refusal::Full);
        drop(first);
        assert!(admission.admit(one).is_ok(), "a place given back is taken again");
        assert_eq!(admission.admit("192.168.1.1".parse().unwrap()).unwrap_err(), Refusal::NotAllowed);
        assert_eq!(admission.counters.get(ClientCounter::RefusedClientFull), 1);
        assert_eq!(admission.counters.get(ClientCounter::RefusedNotAllowed), 1);
    }

    #[test]
    fn a_client_s_streams_take_places_of_its_share_beside_its_connections() {
        let admission = admission(10, 4);
        let (one, two) = ("127.0.0.1".parse().unwrap(), "127.0.0.2".parse().unwrap());
        let connection = admission.admit(one).unwrap();
        let streams = connection.streams();
        let places: Vec<StreamPlace> = (0..3).map(|_| streams.take().expect("a place")).collect();
        assert!(streams.take().is_none(), "one connection and three streams take the share of four");
        assert_eq!(admission.admit(one).unwrap_err(), Refusal::ClientFull, "no connection either");
        let _other = admission.admit(two).expect("another client's share is its own");
        assert_eq!(admission.open(), 2, "streams are not connections");
        drop(places);
        assert!(streams.take().is_some(), "places given back are taken again");
        drop(connection);
        assert_eq!(admission.counters.get(ClientCounter::RefusedClientStreams), 1);
    }

    #[test]
    fn ipv6_addresses_of_one_network_count_as_one_client() {
        let section = crate::config::ServerSection {
            max_connections_per_client: Some(2),
            allow: Some(vec!["fd00::/8".into()]),
            ..Default::default()
        };
        let admission = Admission::new(ClientLimits::new(&section).unwrap());
        let _one = admission.admit("fd00::1".parse().unwrap()).unwrap();
        let _two = admission.admit("fd00::2".parse().unwrap()).unwrap();
        assert_eq!(admission.admit("fd00::3".parse().unwrap()).unwrap_err(), Refusal::ClientFull, "the same /64");
        assert!(admission.admit("fd00:0:0:1::1".parse().unwrap()).is_ok(), "another /64");

        let per_address = crate::config::ServerSection { ipv6_client_prefix: Some(128), ..section };
        let admission = Admission::new(ClientLimits::new(&per_address).unwrap());
        let _one = admission.admit("fd00::1".parse().unwrap()).unwrap();
        let _two = admission.admit("fd00::1".parse().unwrap()).unwrap();
        assert!(admission.admit("fd00::3".parse().unwrap()).is_ok(), "configured: each address its own");
    }

    #[test]
    fn an_ipv4_client_of_a_dual_stack_listener_counts_as_itself() {
        let admission = admission(10, 1);
        let _plain = admission.admit("127.0.0.1".parse().unwrap()).unwrap();
        assert_eq!(admission.admit("::ffff:127.0.0.1".parse().unwrap()).unwrap_err(), Refusal::ClientFull);
    }
}
