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
use pkgproxy_sides::Sides;

use crate::access_log::{CacheUse, Note};

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

impl Trouble {
    /// Notes `response`, the answer to a request for `uri` that the request
    /// path describes with `note`, at `now`: a failure (a `5xx`) or a
    /// refusal is kept, with its path where its side's paths are public.
    /// Nothing is done for any other answer. (Its side's counters counted
    /// it already.)
    pub fn observe<B>(
        &self,
        sides: &Sides,
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
        let reason = response.headers().get(crate::headers::REASON).and_then(|value| value.to_str().ok());
        let reason = reason.or_else(|| status.canonical_reason()).unwrap_or_default();
        let public = side.is_none_or(|side| sides.get(side).paths_are_public());
        self.keep(RecentTrouble {
            at: pkgproxy_cache::unix_secs(now),
            side: side.map(|side| side.to_string()),
            status: status.as_u16(),
            path: public.then(|| shown_path(&uri.to_string())),
            reason: reason.chars().take(REASON_LIMIT).collect(),
        });
    }
}

/// What the page shows of a public `path`: no query.
fn shown_path(path: &str) -> String {
    path.split('?').next().unwrap_or(path).chars().take(REASON_LIMIT).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_path_is_kept_without_its_query() {
        assert_eq!(
            shown_path("http://deb.debian.org/debian/pool/x.deb?token=1"),
            "http://deb.debian.org/debian/pool/x.deb"
        );
    }
}
