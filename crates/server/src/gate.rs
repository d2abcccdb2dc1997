//! What the request path keeps for the fleet's policy (`[policy]`): the
//! rules in force (replaced whole on a reload or when a bundle brings
//! malicious-package records), the publish times read from held metadata,
//! listings already filtered, and what was refused, for `/metrics` and the
//! status page. The judging itself is the request path's
//! (`proxy/gate.rs`).

use std::collections::{BTreeMap, HashMap, VecDeque};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime};

use arc_swap::ArcSwapOption;
use parking_lot::Mutex;
use pkgproxy_control::{BlockedCount, BlockedRelease};
use pkgproxy_policy::{Options, Policy};
use pkgproxy_sides::role::{Filtered, Times};

/// How many held metadata's times are kept parsed.
const TIMES_KEPT: usize = 4096;
/// How many bytes of filtered listings are kept.
const LISTINGS_KEPT_BYTES: u64 = 64 * 1024 * 1024;
/// How long a filtered listing that read other metadata's times stands:
/// those change under their own names.
const BORROWED_TIMES_STAND: Duration = Duration::from_secs(60);
/// How often metadata that did not give a release's time is asked again
/// for it (the release may be new; one that does not exist must not send
/// every request upstream).
const ASK_AGAIN_EVERY: Duration = Duration::from_secs(10);
/// How many refusals the status page lists.
const RECENT_KEPT: usize = 20;

/// The policy's state.
pub struct Gate {
    policy: ArcSwapOption<Policy>,
    /// `[policy]` as written, for the policy made again when a bundle
    /// brings malicious-package records.
    written: Mutex<Option<Options>>,
    /// Counts the policies taken: a filtered listing is of one.
    generation: AtomicU64,
    times: Mutex<HashMap<String, (String, Arc<Times>)>>,
    listings: Mutex<Listings>,
    asked_again: Mutex<HashMap<String, Instant>>,
    refusals: Mutex<Refusals>,
}

impl Default for Gate {
    fn default() -> Self {
        Gate {
            policy: ArcSwapOption::empty(),
            written: Mutex::default(),
            generation: AtomicU64::new(0),
            times: Mutex::default(),
            listings: Mutex::default(),
            asked_again: Mutex::default(),
            refusals: Mutex::default(),
        }
    }
}

impl std::fmt::Debug for Gate {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Gate").field("policy", &self.policy.load().is_some()).finish_non_exhaustive()
    }
}

/// A listing as filtered for one stored body, policy and span of time.
#[derive(Debug, Clone)]
pub struct Listing {
    /// The stored body's SHA-256.
    pub sha256: String,
    /// The policy it was filtered under.
    pub generation: u64,
    /// When it was filtered: it stands from then on (a clock set back
    /// may make a served release young again).
    pub from: SystemTime,
    /// Until when it stands (a release the policy lets go by itself then).
    pub until: Option<SystemTime>,
    /// What the client is served.
    pub served: Filtered,
    /// A rewritten body as the cache serves a stored one: its own SHA-256
    /// and a file of it (unnamed, gone with the last handle), so that a
    /// side keeps compressed forms of it as of a stored body.
    pub stored: Option<pkgproxy_sides::StoredBody>,
    /// The entity tag (quoted) of a rewritten body: its bytes' own.
    pub etag: Option<String>,
    /// The reason phrase of a refusal.
    pub phrase: Option<String>,
}

impl Listing {
    /// The bytes it holds in memory.
    fn weight(&self) -> u64 {
        let served = match &self.served {
            Filtered::AsStored => 0,
            Filtered::Rewritten(body) => body.len(),
            Filtered::Refused(line) => line.len(),
        };
        let etag = self.etag.as_ref().map_or(0, String::len);
        let phrase = self.phrase.as_ref().map_or(0, String::len);
        (self.sha256.len() + served + etag + phrase) as u64 + 128
    }
}

/// Filtered listings by key, within a budget of bytes: the oldest kept go
/// first. (One listing may take most of the budget: npm's largest
/// documents run to tens of megabytes.)
#[derive(Debug, Default)]
struct Listings {
    by_key: HashMap<String, Listing>,
    order: VecDeque<String>,
    bytes: u64,
}

impl Listings {
    fn insert(&mut self, key: String, listing: Listing) {
        self.remove(&key);
        let weight = listing.weight() + key.len() as u64;
        if weight > LISTINGS_KEPT_BYTES {
            return;
        }
        while self.bytes + weight > LISTINGS_KEPT_BYTES {
            let Some(oldest) = self.order.pop_front() else { break };
            self.remove(&oldest);
        }
        self.bytes += weight;
        self.order.push_back(key.clone());
        self.by_key.insert(key, listing);
    }

    fn remove(&mut self, key: &str) {
        if let Some(listing) = self.by_key.remove(key) {
            self.bytes -= listing.weight() + key.len() as u64;
            self.order.retain(|kept| kept != key);
        }
    }

    fn clear(&mut self) {
        *self = Listings::default();
    }
}

/// What was refused: counts by side and rule, and the last few.
#[derive(Debug, Default)]
struct Refusals {
    counts: BTreeMap<(&'static str, &'static str), u64>,
    recent: VecDeque<Refused>,
}

/// One refusal, as the status page lists it.
#[derive(Debug, Clone, serde::Serialize)]
pub struct Refused {
    /// When, in seconds since the epoch.
    pub at: u64,
    /// The side's name.
    pub side: &'static str,
    /// The release (`npm:left-pad@1.3.1`).
    pub release: String,
    /// The rule's name.
    pub rule: &'static str,
    /// Why, in words.
    pub because: String,
    /// Whether it was asked for in a client's own space (with its token):
    /// its name is then not shown to everyone (the status page).
    pub private: bool,
}

impl Gate {
    /// A gate with `policy`, made of `written` (`[policy]` as written),
    /// in force (none: everything is served as without one).
    pub fn new(written: Option<Options>, policy: Option<Arc<Policy>>) -> Gate {
        let gate = Gate::default();
        gate.configure(written, policy);
        gate
    }

    /// Puts `policy`, made of `written`, in force from the next request
    /// on (a reload).
    pub fn configure(&self, written: Option<Options>, policy: Option<Arc<Policy>>) {
        *self.written.lock() = written;
        self.take(policy);
    }

    /// `[policy]` as written, as the policy in force was made of it.
    pub fn written(&self) -> Option<Options> {
        self.written.lock().clone()
    }

    /// The policy in force, if any.
    pub fn policy(&self) -> Option<Arc<Policy>> {
        self.policy.load_full()
    }

    /// Puts `policy` in force from the next request on.
    pub fn take(&self, policy: Option<Arc<Policy>>) {
        self.policy.store(policy);
        self.generation.fetch_add(1, Ordering::SeqCst);
        self.listings.lock().clear();
    }

    /// Which policy is in force, as filtered listings remember it.
    pub fn generation(&self) -> u64 {
        self.generation.load(Ordering::SeqCst)
    }

    /// The times read from the held body `sha256` of `key`, if parsed.
    pub fn held_times(&self, key: &str, sha256: &str) -> Option<Arc<Times>> {
        let times = self.times.lock();
        times.get(key).filter(|(held, _)| held == sha256).map(|(_, times)| Arc::clone(times))
    }

    /// Keeps the times of the held body `sha256` of `key`.
    pub fn keep_times(&self, key: &str, sha256: &str, times: Arc<Times>) {
        let mut kept = self.times.lock();
        if kept.len() >= TIMES_KEPT && !kept.contains_key(key) {
            kept.clear();
        }
        kept.insert(key.to_owned(), (sha256.to_owned(), times));
    }

    /// Whether metadata `key` may be asked again for a release it did not
    /// give (once every few seconds).
    pub fn may_ask_again(&self, key: &str) -> bool {
        let now = Instant::now();
        let mut asked = self.asked_again.lock();
        asked.retain(|_, at| now.duration_since(*at) < ASK_AGAIN_EVERY);
        asked.insert(key.to_owned(), now).is_none()
    }

    /// The filtered listing kept for `key`, if it is of `sha256` under the
    /// policy in force and stands at `now`.
    pub fn listing(&self, key: &str, sha256: &str, now: SystemTime) -> Option<Listing> {
        let listing = self.listings.lock().by_key.get(key).cloned()?;
        let stands = listing.sha256 == sha256
            && listing.generation == self.generation()
            && listing.from <= now
            && listing.until.is_none_or(|until| now < until);
        stands.then_some(listing)
    }

    /// Keeps a filtered listing; `borrowed` says it read times of other
    /// metadata, so it stands a short while only.
    pub fn keep_listing(&self, key: &str, mut listing: Listing, borrowed: bool, now: SystemTime) {
        if borrowed {
            let short = now + BORROWED_TIMES_STAND;
            listing.until = Some(listing.until.map_or(short, |until| until.min(short)));
        }
        self.listings.lock().insert(key.to_owned(), listing);
    }

    /// Notes a refusal.
    pub fn refused(&self, refused: Refused) {
        let mut refusals = self.refusals.lock();
        *refusals.counts.entry((refused.side, refused.rule)).or_default() += 1;
        refusals.recent.retain(|kept| kept.release != refused.release);
        if refusals.recent.len() >= RECENT_KEPT {
            refusals.recent.pop_back();
        }
        refusals.recent.push_front(refused);
    }

    /// Refusals so far, by side and rule.
    pub fn counts(&self) -> Vec<(&'static str, &'static str, u64)> {
        self.refusals.lock().counts.iter().map(|((side, rule), count)| (*side, *rule, *count)).collect()
    }

    /// The last refusals, the newest first.
    pub fn recent(&self) -> Vec<Refused> {
        self.refusals.lock().recent.iter().cloned().collect()
    }

    /// Refusals so far, by side and rule, as the control sockets and
    /// `/metrics` tell them.
    pub fn blocked_counts(&self) -> Vec<BlockedCount> {
        let count =
            |(side, rule, count): (&str, &str, u64)| BlockedCount { side: side.into(), rule: rule.into(), count };
        self.counts().into_iter().map(count).collect()
    }

    /// The last releases refused, the newest first, as the control sockets
    /// and the status page tell them; those asked for in a client's own
    /// space only when `private` may be shown.
    pub fn recent_blocked(&self, private: bool) -> Vec<BlockedRelease> {
        let shown = self.recent().into_iter().filter(|refused| private || !refused.private);
        let told = |refused: Refused| BlockedRelease {
            at: refused.at,
            side: refused.side.to_owned(),
            release: refused.release,
            rule: refused.rule.to_owned(),
            because: refused.because,
        };
        shown.map(told).collect()
    }
}
