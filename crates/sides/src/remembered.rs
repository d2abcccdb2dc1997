//! Answers of the upstream remembered for a short while and served again
//! without asking, and while offline mode is in effect for as long as they
//! are held: the go side's "not found" (the go command probes the parent
//! paths of every module it resolves and expects `404` or `410` there), a
//! registry's refusal of pkgproxy's own token for a private repository
//! (every anonymous pull of it would ask again). Time is passed in, so the
//! rules are tested without a clock.

use parking_lot::Mutex;
use std::collections::HashMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use pkgproxy_cache::PassedAnswer;

/// The most answers held; the oldest go first beyond it.
const CAPACITY: usize = 10_000;

/// Remembered answers by key.
#[derive(Debug, Default)]
pub struct RememberedAnswers {
    answers: Mutex<HashMap<String, (Arc<PassedAnswer>, Instant)>>,
}

impl RememberedAnswers {
    /// Remembers `answer` for `key` for `ttl` from `now`.
    pub fn remember(&self, key: &str, answer: Arc<PassedAnswer>, ttl: Duration, now: Instant) {
        let mut answers = self.answers.lock();
        if answers.len() >= CAPACITY {
            answers.retain(|_, (_, until)| *until > now);
        }
        if answers.len() >= CAPACITY {
            let oldest = answers.iter().min_by_key(|(_, (_, until))| *until).map(|(key, _)| key.clone());
            if let Some(oldest) = oldest {
                answers.remove(&oldest);
            }
        }
        answers.insert(key.to_string(), (answer, now + ttl));
    }

    /// The answer remembered for `key`, unless it expired by `now`
    /// (`frozen`: time stands still, offline).
    pub fn get(&self, key: &str, now: Instant, frozen: bool) -> Option<Arc<PassedAnswer>> {
        let mut answers = self.answers.lock();
        let (answer, until) = answers.get(key)?;
        if frozen || *until > now {
            return Some(Arc::clone(answer));
        }
        answers.remove(key);
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn not_found() -> Arc<PassedAnswer> {
        Arc::new(PassedAnswer { status: http::StatusCode::NOT_FOUND, headers: vec![], body: "gone\n".into() })
    }

    #[test]
    fn answers_are_remembered_for_their_time_and_while_frozen() {
        let cache = RememberedAnswers::default();
        let start = Instant::now();
        let at = |secs| start + Duration::from_secs(secs);
        cache.remember("k", not_found(), Duration::from_secs(60), start);
        assert!(cache.get("k", start, false).is_some());
        assert!(cache.get("k", at(59), false).is_some());
        assert!(cache.get("k", at(61), true).is_some(), "offline, time stands still");
        assert!(cache.get("k", at(61), false).is_none(), "expired");
        assert!(cache.get("k", at(61), true).is_none(), "and forgotten");
    }

    #[test]
    fn the_oldest_go_first_beyond_the_capacity() {
        let cache = RememberedAnswers::default();
        let now = Instant::now();
        for i in 0..=CAPACITY {
            cache.remember(&format!("k{i}"), not_found(), Duration::from_secs(60 + i as u64), now);
        }
        assert!(cache.get("k0", now, false).is_none());
        assert!(cache.get(&format!("k{CAPACITY}"), now, false).is_some());
    }
}
