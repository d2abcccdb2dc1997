//! The upstream's word that a credential may read content not everyone may
//! (a private repository's), remembered per grant for a few minutes so that
//! a pull of many blobs costs one confirmation, not one per blob. Only in
//! memory: after a restart every credential is confirmed again.

use parking_lot::Mutex;
use std::collections::HashMap;
use std::time::{Duration, Instant};

/// The most grants remembered; beyond it the oldest are forgotten (a
/// forgotten grant costs one confirmation upstream, nothing more).
const MOST: usize = 65_536;

/// When each grant was last confirmed.
#[derive(Debug, Default)]
pub struct Grants {
    confirmed: Mutex<HashMap<String, Instant>>,
}

impl Grants {
    /// Whether `grant` was confirmed within `within` of `now` (`None`: ever,
    /// for content served offline to credentials confirmed before).
    pub fn holds(&self, grant: &str, within: Option<Duration>, now: Instant) -> bool {
        let confirmed = self.confirmed.lock();
        match (confirmed.get(grant), within) {
            (None, _) => false,
            (Some(_), None) => true,
            (Some(at), Some(within)) => now.saturating_duration_since(*at) < within,
        }
    }

    /// `grant` was confirmed at `now`.
    pub fn confirm(&self, grant: &str, now: Instant) {
        let mut confirmed = self.confirmed.lock();
        if confirmed.len() >= MOST && !confirmed.contains_key(grant) {
            forget_oldest_half(&mut confirmed);
        }
        confirmed.insert(grant.to_string(), now);
    }
}

fn forget_oldest_half(confirmed: &mut HashMap<String, Instant>) {
    let mut times: Vec<Instant> = confirmed.values().copied().collect();
    times.sort_unstable();
    let cut = times[times.len() / 2];
    confirmed.retain(|_, at| *at > cut);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_grant_holds_for_its_time_and_offline_for_ever() {
        let (grants, start) = (Grants::default(), Instant::now());
        let five_minutes = Some(Duration::from_secs(300));
        assert!(!grants.holds("docker.io/secret/app alice", five_minutes, start));
        grants.confirm("docker.io/secret/app alice", start);
        assert!(grants.holds("docker.io/secret/app alice", five_minutes, start + Duration::from_secs(299)));
        assert!(!grants.holds("docker.io/secret/app alice", five_minutes, start + Duration::from_secs(300)));
        assert!(grants.holds("docker.io/secret/app alice", None, start + Duration::from_secs(86_400)));
        assert!(!grants.holds("docker.io/secret/app bob", None, start), "per credential");
    }

    #[test]
    fn a_full_memory_forgets_the_oldest() {
        let (grants, start) = (Grants::default(), Instant::now());
        for i in 0..MOST {
            grants.confirm(&i.to_string(), start + Duration::from_millis(i as u64));
        }
        grants.confirm("newest", start + Duration::from_secs(3600));
        let within = Some(Duration::from_secs(7200));
        assert!(grants.holds("newest", within, start + Duration::from_secs(3600)));
        assert!(grants.holds(&(MOST - 1).to_string(), within, start + Duration::from_secs(3600)));
        assert!(!grants.holds("0", within, start + Duration::from_secs(3600)));
        assert!(grants.confirmed.lock().len() <= MOST / 2 + 1);
    }
}
