//! What went wrong lately, for the status page: each side's failed answers
//! counted, and the last refusals and failures kept with their reason. An
//! admin opening the page after a complaint sees what the client saw, not
//! only totals since start.
//!
//! The page is read by every client the listener serves: a failure is kept
//! by its side, status and reason, and by its path only where the path
//! names nothing private (apt's archives, snaps, LXD images: not a go
//! module or a registry repository, which may be private).

use std::collections::VecDeque;
use std::sync::Mutex;

use http::Response;
use pkgproxy_control::RecentTrouble;
use pkgproxy_metrics::SideCounter;
use pkgproxy_sides::SideId;

use crate::access_log::{CacheUse, Note};
use crate::stats::Stats;

/// How many refusals and failures are kept.
pub const KEPT: usize = 20;

/// The longest reason kept.
const REASON_LIMIT: usize = 240;

/// The last refusals and failures, newest last.
#[derive(Debug, Default)]
pub struct Trouble {
    recent: Mutex<VecDeque<RecentTrouble>>,
}

impl Trouble {
    /// The ones kept, newest first.
    pub fn recent(&self) -> Vec<RecentTrouble> {
        self.lock().iter().rev().cloned().collect()
    }

    fn keep(&self, trouble: RecentTrouble) {
        let mut recent = self.lock();
        if recent.len() == KEPT {
            recent.pop_front();
        }
        recent.push_back(trouble);
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, VecDeque<RecentTrouble>> {
        self.recent.lock().unwrap_or_else(|p| p.into_inner())
    }
}

/// Notes `response`, the answer to a request for `uri` that the request
/// path describes with `note`, at `now`: a failure (a `5xx`) is counted
/// for its side in `stats`, and it or a refusal kept. Nothing is done for
/// any other answer.
pub fn observe<B>(
    trouble: &Trouble,
    stats: &Stats,
    now: std::time::SystemTime,
    uri: &http::Uri,
    response: &Response<B>,
    note: Note,
) {
    let (status, refused) = (response.status(), note.cache == CacheUse::Refused);
    if !status.is_server_error() && !refused {
        return;
    }
    let side = note.side;
    if let (Some(side), true) = (side, status.is_server_error()) {
        stats.side(side).increment(SideCounter::Failed);
    }
    let reason = response.headers().get(crate::headers::REASON).and_then(|value| value.to_str().ok());
    let reason = reason.or_else(|| status.canonical_reason()).unwrap_or_default();
    trouble.keep(RecentTrouble {
        at: pkgproxy_cache::unix_secs(now),
        side: side.map(|side| side.to_string()),
        status: status.as_u16(),
        path: shown_path(side, &uri.to_string()),
        reason: reason.chars().take(REASON_LIMIT).collect(),
    });
}

/// What the page shows of `path`: nothing of a side whose paths may name
/// something private, no query anywhere.
fn shown_path(side: Option<SideId>, path: &str) -> Option<String> {
    match side {
        Some(SideId::Go | SideId::Registry) => None,
        _ => Some(path.split('?').next().unwrap_or(path).chars().take(REASON_LIMIT).collect()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_path_that_may_name_something_private_is_not_kept() {
        assert_eq!(shown_path(Some(SideId::Go), "/go/corp.example/secret/@v/list"), None);
        assert_eq!(shown_path(Some(SideId::Registry), "/v2/team/app/manifests/v1"), None);
        let apt = shown_path(Some(SideId::Apt), "http://deb.debian.org/debian/pool/x.deb?token=1");
        assert_eq!(apt.as_deref(), Some("http://deb.debian.org/debian/pool/x.deb"));
    }
}
