//! The names whose upstream asked to be left alone (a `429`, a `503` with
//! `Retry-After`, a breaker opened by them), and until when. While a name
//! is held, a client asking for it again gets the name's last content (or
//! the same refusal) without a request upstream: Docker Hub counts every
//! manifest `GET`, and a client retrying a failed pull would spend the
//! quota it waits for, one `HEAD` and one `GET` a retry.
//!
//! The time is the wall clock's, passed in (the freshness windows read the
//! same clock): tests move it.

use parking_lot::Mutex;
use std::collections::HashMap;
use std::time::{Duration, SystemTime};

use crate::failed::Failed;

/// The longest an upstream is left alone for one answer (a breaker's
/// longest opening): a `Retry-After` of a day is not taken at its word.
pub const LONGEST: Duration = Duration::from_secs(600);

/// The most names held at once: past it, the holds that ended are
/// dropped, and a new one is not taken while none has (its name is asked
/// as before; nothing is lost but the saving).
pub const MOST: usize = 4096;

/// One name's hold.
#[derive(Debug, Clone)]
struct Hold {
    until: SystemTime,
    failed: Failed,
}

/// The names held, by cache key.
#[derive(Debug, Default)]
pub struct Holds {
    held: Mutex<HashMap<String, Hold>>,
}

impl Holds {
    /// `key`'s upstream failed with `failed` at `now`: held for as long as
    /// it asked, when it asked.
    pub fn hold(&self, key: &str, now: SystemTime, failed: &Failed) {
        let Some(window) = failed.leave_alone_for().map(|window| window.min(LONGEST)) else { return };
        if window.is_zero() {
            return;
        }
        let mut held = self.held.lock();
        if held.len() >= MOST && !held.contains_key(key) {
            held.retain(|_, hold| hold.until > now);
            if held.len() >= MOST {
                return;
            }
        }
        held.insert(key.to_string(), Hold { until: now + window, failed: failed.clone() });
    }

    /// The failure `key` is held for at `now`, with the time it has left;
    /// `None` when it is not held (a hold that ended is dropped).
    pub fn current(&self, key: &str, now: SystemTime) -> Option<Failed> {
        let mut held = self.held.lock();
        let hold = held.get(key)?;
        match hold.until.duration_since(now) {
            Ok(left) if !left.is_zero() => Some(hold.failed.with_time_left(left)),
            _ => {
                held.remove(key);
                None
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn limited(secs: u64) -> Failed {
        Failed::RateLimited { status: http::StatusCode::TOO_MANY_REQUESTS, retry_after: Duration::from_secs(secs) }
    }

    fn left(holds: &Holds, key: &str, now: SystemTime) -> Option<Duration> {
        holds.current(key, now).and_then(|failed| failed.leave_alone_for())
    }

    #[test]
    fn a_name_is_held_for_the_time_its_upstream_asked_and_then_asked_again() {
        let (holds, start) = (Holds::default(), SystemTime::UNIX_EPOCH + Duration::from_secs(1_800_000_000));
        holds.hold("tag", start, &limited(30));
        assert_eq!(left(&holds, "tag", start), Some(Duration::from_secs(30)));
        assert_eq!(left(&holds, "tag", start + Duration::from_secs(29)), Some(Duration::from_secs(1)));
        assert_eq!(left(&holds, "other", start), None, "one name's limit holds that name");
        assert_eq!(left(&holds, "tag", start + Duration::from_secs(30)), None, "over when the window is");
        assert_eq!(left(&holds, "tag", start), None, "and forgotten");
    }

    #[test]
    fn only_a_request_to_wait_holds_and_never_longer_than_the_longest() {
        let (holds, now) = (Holds::default(), SystemTime::UNIX_EPOCH + Duration::from_secs(1_800_000_000));
        holds.hold("failed", now, &Failed::Upstream("reset".into()));
        holds.hold("offline", now, &Failed::Offline);
        holds.hold("zero", now, &limited(0));
        assert!(["failed", "offline", "zero"].iter().all(|key| holds.current(key, now).is_none()));
        holds.hold("a day", now, &limited(86_400));
        assert_eq!(left(&holds, "a day", now), Some(LONGEST));
        let open = Failed::Overloaded { host: Some("hub".into()), retry_after: Duration::from_secs(12) };
        holds.hold("breaker", now, &open);
        assert!(matches!(
            holds.current("breaker", now + Duration::from_secs(2)),
            Some(Failed::Overloaded { host: Some(host), retry_after }) if host == "hub" && retry_after.as_secs() == 10
        ));
    }

    #[test]
    fn with_the_most_names_held_ended_holds_make_room_and_live_ones_are_kept() {
        let (holds, now) = (Holds::default(), SystemTime::UNIX_EPOCH + Duration::from_secs(1_800_000_000));
        for i in 0..MOST {
            holds.hold(&format!("short{i}"), now, &limited(if i % 2 == 0 { 5 } else { 60 }));
        }
        let later = now + Duration::from_secs(10);
        holds.hold("new", later, &limited(30));
        assert!(left(&holds, "new", later).is_some(), "the ended holds made room");
        assert!(left(&holds, "short1", later).is_some(), "a live hold is kept");
        for i in 0..MOST {
            holds.hold(&format!("more{i}"), later, &limited(60));
        }
        assert!(holds.held.lock().len() <= MOST);
        assert!(left(&holds, "new", later).is_some());
    }
}
