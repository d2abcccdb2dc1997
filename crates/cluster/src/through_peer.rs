//! A miss on a node that cannot ask its upstreams (offline by its own
//! switch, as when auto-offline saw its uplink go) while other nodes of
//! the cluster can: the request goes to one of them, as a client of it
//! would send it, and its answer is this node's upstream answer, checked as
//! any other. The node it asked fetches, caches and publishes; this node
//! caches what it verified. With no online node to ask, the upstream source
//! is used, which refuses as offline.

use std::sync::Arc;

use parking_lot::Mutex;

use http::header::{IF_RANGE, RANGE};
use http::{HeaderMap, HeaderValue};
use pkgproxy_cache::{FetchError, Source, StartFetch, Validators};

use crate::members::{Member, Members};
use crate::peer;
use crate::peer::Asked;
use crate::tier::SharedTier;

/// The source of a miss, fetched through an online node.
pub struct ThroughPeer {
    tier: Arc<SharedTier>,
    members: Arc<Members>,
    /// What the peer is asked for, as the side decided it.
    target: Asked,
    /// What pkgproxy would send the upstream (conditionals included).
    headers: HeaderMap,
    upstream: Arc<dyn Source>,
    /// The node that answered, asked again to resume.
    asked: Arc<Mutex<Option<Member>>>,
}

impl ThroughPeer {
    /// `target` with `headers` asked of an online node, or of `upstream`
    /// when there is none.
    pub fn new(
        tier: Arc<SharedTier>,
        members: Arc<Members>,
        target: Asked,
        headers: HeaderMap,
        upstream: Box<dyn Source>,
    ) -> Self {
        ThroughPeer { tier, members, target, headers, upstream: Arc::from(upstream), asked: Arc::default() }
    }
}

/// The first online node that answers `target` (two are tried).
async fn ask(
    tier: &SharedTier,
    members: &Members,
    target: &Asked,
    headers: &HeaderMap,
) -> Option<(Member, pkgproxy_cache::Sourced)> {
    for member in members.online_peers(tier).await.into_iter().take(2) {
        match peer::ask_through(tier, &member, target, headers).await {
            Ok(answer) => return Some((member, answer)),
            Err(error) => tracing::debug!(%error, ?target, "an online node did not answer for this offline one"),
        }
    }
    None
}

impl Source for ThroughPeer {
    fn start(&self) -> StartFetch {
        let (tier, target, headers) = (Arc::clone(&self.tier), self.target.clone(), self.headers.clone());
        let (members, upstream, asked) =
            (Arc::clone(&self.members), Arc::clone(&self.upstream), Arc::clone(&self.asked));
        Box::pin(async move {
            match ask(&tier, &members, &target, &headers).await {
                Some((member, answer)) => {
                    tracing::debug!(?target, node = member.node, "offline: asked an online node of the cluster");
                    *asked.lock() = Some(member);
                    Ok(answer)
                }
                None => upstream.start().await,
            }
        })
    }

    fn resume(&self, from: u64, validators: &Validators) -> Option<StartFetch> {
        let member = self.asked.lock().clone();
        let Some(member) = member else { return self.upstream.resume(from, validators) };
        let (tier, target) = (Arc::clone(&self.tier), self.target.clone());
        let mut headers = self.headers.clone();
        headers.insert(RANGE, HeaderValue::try_from(format!("bytes={from}-")).expect("digits are a valid value"));
        if let Some(validator) = validators.etag.as_deref().or(validators.last_modified.as_deref()) {
            if let Ok(value) = HeaderValue::try_from(validator) {
                headers.insert(IF_RANGE, value);
            }
        }
        Some(Box::pin(async move {
            peer::ask_through(&tier, &member, &target, &headers)
                .await
                .map_err(|error| FetchError::Rejected(error.to_string()))
        }))
    }
}
