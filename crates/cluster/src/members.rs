//! Who is in the cluster, and online: each node that others can reach
//! announces itself in `nodes/<node>.json` (where it is reached, whether it
//! may ask its upstreams, when it last said so), again whenever that
//! changes and at least every [`BEAT`]. A node that cannot ask its own
//! upstreams (offline by its own switch, as when auto-offline saw its
//! uplink go) sends its misses to one that can.

use std::sync::Weak;

use parking_lot::Mutex;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use bytes::Bytes;
use futures_util::StreamExt;
use object_store::{ObjectStore, ObjectStoreExt, PutPayload};
use serde::{Deserialize, Serialize};

use crate::tier::SharedTier;

/// How often a node announces itself when nothing changed.
pub const BEAT: Duration = Duration::from_secs(10);

/// An announcement older than this is a node gone.
const LAPSE: Duration = Duration::from_secs(3 * BEAT.as_secs());

/// How long a node's view of the others is reused.
const VIEW_FOR: Duration = Duration::from_secs(2);

/// One node's announcement.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Member {
    /// Its name.
    pub node: String,
    /// Where its proxy listener is reached.
    pub peer_url: String,
    /// Whether it asks its upstreams (it is not offline).
    pub online: bool,
    /// When it said so (Unix milliseconds).
    pub at_ms: u64,
}

fn now_ms() -> u64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| d.as_millis() as u64)
}

/// Announces this node every `every` it changed, or every [`BEAT`], with
/// `online` saying whether it asks its upstreams, until the tier is
/// dropped. A node no other can reach (no `peer_url`) stays silent.
pub async fn keep_announcing(tier: Weak<SharedTier>, every: Duration, online: impl Fn() -> bool) {
    let mut said: Option<(bool, Instant)> = None;
    loop {
        let Some(tier) = tier.upgrade() else { return };
        let Some(peer_url) = tier.identity().peer_url.clone() else { return };
        let now = online();
        let due = said.is_none_or(|(was, at)| was != now || at.elapsed() >= BEAT);
        if due {
            let member = Member { node: tier.node().to_owned(), peer_url, online: now, at_ms: now_ms() };
            match announce(&tier, &member).await {
                Ok(()) => said = Some((now, Instant::now())),
                Err(error) => tracing::debug!(%error, "this node's announcement was not written"),
            }
        }
        drop(tier);
        tokio::time::sleep(every).await;
    }
}

/// Writes `member`'s announcement.
pub async fn announce(tier: &SharedTier, member: &Member) -> Result<(), object_store::Error> {
    let json = Bytes::from(serde_json::to_vec(member).expect("a member serialises"));
    tier.store().put(&tier.layout().member(&member.node), PutPayload::from_bytes(json)).await.map(|_| ())
}

/// A node's view of the others, read from the bucket at most every
/// [`VIEW_FOR`].
#[derive(Debug, Default)]
pub struct Members {
    seen: Mutex<Option<(Instant, Vec<Member>)>>,
}

impl Members {
    /// The other nodes that announced, lately, that they ask their
    /// upstreams.
    pub async fn online_peers(&self, tier: &SharedTier) -> Vec<Member> {
        if let Some((at, members)) = &*self.seen.lock() {
            if at.elapsed() < VIEW_FOR {
                return members.clone();
            }
        }
        let members = read_members(tier).await;
        let now = now_ms();
        let online: Vec<Member> = members
            .into_iter()
            .filter(|m| m.online && m.node != tier.node() && now.saturating_sub(m.at_ms) < LAPSE.as_millis() as u64)
            .collect();
        *self.seen.lock() = Some((Instant::now(), online.clone()));
        online
    }
}

/// The most announcements read: more nodes than a cluster has.
const MEMBERS_READ: usize = 1024;

async fn read_members(tier: &SharedTier) -> Vec<Member> {
    let listed: Vec<_> = tier.store().list(Some(&tier.layout().members())).take(MEMBERS_READ).collect().await;
    let mut members = Vec::new();
    for meta in listed.into_iter().flatten() {
        if meta.size > crate::small::Small::Member.limit() {
            continue;
        }
        let Ok(found) = tier.store().get(&meta.location).await else { continue };
        let Ok(bytes) = crate::small::read(found, crate::small::Small::Member).await else { continue };
        if let Ok(member) = serde_json::from_slice::<Member>(&bytes) {
            members.push(member);
        }
    }
    members
}
