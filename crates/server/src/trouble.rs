//! What went wrong lately, for the status page: each side's failed answers
//! counted, and the last refusals and failures kept with their reason. An
//! admin opening the page after a complaint sees what the client saw, not
//! only totals since start.
//!
//! The page is read by every client the listener serves: a failure is kept
//! by its side, status and reason, and by its path (never its query) unless
//! that request was private: it carried a client's credentials (an
//! `Authorization`, a cookie, a token header, a user in its URL), or its
//! side serves it from a space only some clients may read
//! ([`pkgproxy_sides::role::Private::serves_privately`]). Whether a path is shown
//! is decided request by request, so a public npm package or PyPI project
//! is named and a private one never is.

use parking_lot::Mutex;
use std::collections::VecDeque;

use http::{HeaderMap, Response, Uri};
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
        self.recent.lock().iter().rev().cloned().collect()
    }

    fn keep(&self, trouble: RecentTrouble) {
        let mut recent = self.recent.lock();
        if recent.len() == KEPT {
            recent.pop_front();
        }
        recent.push_back(trouble);
    }
}

impl Trouble {
    /// Notes `response`, the answer to `asked` that the request path
    /// describes with `note`, at `now`: a failure (a `5xx`) or a refusal is
    /// kept, with its path unless the request was private. Nothing is done
    /// for any other answer. (Its side's counters counted it already.)
    pub fn observe<B>(
        &self,
        sides: &Sides,
        now: std::time::SystemTime,
        asked: &Asked,
        response: &Response<B>,
        note: &Note,
    ) {
        let (status, refused) = (response.status(), note.cache == CacheUse::Refused);
        if !status.is_server_error() && !refused {
            return;
        }
        let side = note.side;
        let reason = response.headers().get(crate::headers::REASON).and_then(|value| value.to_str().ok());
        let reason = reason.or_else(|| status.canonical_reason()).unwrap_or_default();
        self.keep(RecentTrouble {
            at: pkgproxy_cache::unix_secs(now),
            side: side.map(|side| side.to_string()),
            status: status.as_u16(),
            path: asked.shown(sides, side),
            reason: reason.chars().take(REASON_LIMIT).collect(),
        });
    }
}

/// What a request asked, as far as the trouble table may tell it: its URI,
/// and whether it carried a client's credentials. Taken before the request
/// is answered (its headers go with it).
#[derive(Debug, Clone)]
pub struct Asked {
    uri: Uri,
    with_credentials: bool,
}

impl Asked {
    /// What `uri`, asked with `headers`, may be shown as.
    pub fn of(uri: &Uri, headers: &HeaderMap) -> Asked {
        let in_url = uri.authority().is_some_and(|authority| authority.as_str().contains('@'));
        Asked { uri: uri.clone(), with_credentials: in_url || headers.keys().any(is_credential) }
    }

    /// The path shown for a request `side` answered: none for a private
    /// one, and never the query (a signed URL's, a token's).
    fn shown(&self, sides: &Sides, side: Option<pkgproxy_sides::SideId>) -> Option<String> {
        if self.with_credentials {
            return None;
        }
        let private = side.is_some_and(|side| {
            let below = match pkgproxy_sides::route::prefix_of(side) {
                Some(prefix) => pkgproxy_sides::route::below(pkgproxy_sides::Mount::Prefix(prefix), self.uri.path()),
                None => self.uri.path(),
            };
            sides.get(side).roles().private.is_some_and(|private| private.serves_privately(below, self.uri.query()))
        });
        (!private).then(|| shown_path(&self.uri.to_string()))
    }
}

/// Whether a header named `name` carries a client's credentials: the
/// standard ones, a cookie, and the token and key headers registries and
/// package servers take (`X-Auth-Token`, `Private-Token`, `X-Api-Key`).
fn is_credential(name: &http::HeaderName) -> bool {
    let name = name.as_str();
    matches!(name, "authorization" | "proxy-authorization" | "cookie")
        || ["token", "api-key", "apikey", "secret", "password"].iter().any(|word| name.contains(word))
}

/// What the page shows of a public `path`: no query.
fn shown_path(path: &str) -> String {
    path.split('?').next().unwrap_or(path).chars().take(REASON_LIMIT).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_request_with_a_clients_credentials_is_kept_without_its_path() {
        let uri: Uri = "/npm/@corp%2fsecret".parse().unwrap();
        for header in ["authorization", "cookie", "x-auth-token", "private-token", "x-api-key"] {
            let mut headers = HeaderMap::new();
            headers.insert(http::HeaderName::from_static(header), "x".parse().unwrap());
            assert!(Asked::of(&uri, &headers).with_credentials, "{header}");
        }
        let with_user: Uri = "http://user:pass@deb.example/debian/pool/x.deb".parse().unwrap();
        assert!(Asked::of(&with_user, &HeaderMap::new()).with_credentials);
        let mut public = HeaderMap::new();
        public.insert(http::header::USER_AGENT, "npm/10".parse().unwrap());
        public.insert(http::header::ACCEPT, "application/json".parse().unwrap());
        assert!(!Asked::of(&uri, &public).with_credentials);
    }

    #[test]
    fn a_path_is_kept_without_its_query() {
        assert_eq!(
            shown_path("http://deb.debian.org/debian/pool/x.deb?token=1"),
            "http://deb.debian.org/debian/pool/x.deb"
        );
    }
}
