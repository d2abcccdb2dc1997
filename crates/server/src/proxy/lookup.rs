//! What the cache holds for a request, decided in one place: the request
//! path serves by it, `explain` predicts by it, `check` and bundles judge
//! by it, and a generation or a tag starts from it. Each of them then does
//! what its own job asks (fetch, say, carry), but none of them decides
//! again whether an entry is usable or fresh, so what `explain` and
//! `check` say is what a client gets.
//!
//! The steps, in order:
//!
//! 1. an answer the side remembers for the request (a go "not found") is
//!    the answer;
//! 2. a cached entry is usable unless the side now expects other bytes
//!    (superseded) or the client cannot read it (a newer snap assertion
//!    format);
//! 3. a usable entry is fresh when it has the checksum the side expects
//!    (the index naming it was confirmed), or by the freshness rule (its
//!    window, frozen while offline, and the client's `Cache-Control`);
//!    bytes handed in (a bundle) replace any copy that is not expected;
//! 4. with no usable entry, the bytes the side expects may be held under
//!    another name (an index fetched by name whose by-hash copy is cached).
//!
//! It reads the cache and the side through [`Holdings`], and the time and
//! the mode from [`Moment`], so that it can be tested without I/O.

use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime};

use http::HeaderMap;
use pkgproxy_cache::{freshness, ClientDirectives, Entry, Freshness, PassedAnswer, Window};
use pkgproxy_sides::{Acceptance, CachedRequest, ClientCacheControl};

use super::reason::Reason;
use crate::context::Exchange;
use crate::state::State;

/// What the cache holds for a request.
#[derive(Debug, Clone)]
pub enum Lookup {
    /// An upstream answer the side remembers for the request: it is the
    /// answer, whatever is cached.
    Remembered(Arc<PassedAnswer>),
    /// A usable entry that is served without asking the upstream.
    Fresh(Arc<Entry>),
    /// The bytes the side expects, held under another name: served without
    /// asking the upstream, once adopted under the request's key.
    Adoptable {
        /// Their SHA-256.
        sha256: String,
        /// Their size.
        size: u64,
    },
    /// A usable entry that the upstream is asked to confirm first; served
    /// when it cannot be asked.
    Stale {
        /// The entry.
        entry: Arc<Entry>,
        /// Why it is not fresh.
        why: Reason,
    },
    /// Nothing usable is cached.
    Missing(Reason),
}

impl Lookup {
    /// The entry that answers the request when the upstream is not asked
    /// (offline, or it cannot answer): a fresh or a stale one.
    pub fn entry(&self) -> Option<&Arc<Entry>> {
        match self {
            Lookup::Fresh(entry) | Lookup::Stale { entry, .. } => Some(entry),
            Lookup::Remembered(_) | Lookup::Adoptable { .. } | Lookup::Missing(_) => None,
        }
    }
}

/// The moment a request is looked up at, and how it asks.
#[derive(Debug, Clone, Copy)]
pub struct Moment {
    /// The wall clock's time (the cache's clock): what entries' ages are
    /// measured against.
    pub now: SystemTime,
    /// The monotonic time: what a side's remembered answers age by.
    pub instant: Instant,
    /// Offline: time stands still for what the upstream could change.
    pub frozen: bool,
    /// The client's `Cache-Control`.
    pub directives: ClientDirectives,
    /// The bytes are handed in (a bundle being taken in): they replace a
    /// copy that nothing expects.
    pub supplied: bool,
    /// How recent a revalidation answers a client's `no-cache` or
    /// `max-age=0`: a fleet's clients asking for a fresh copy share one.
    pub revalidate_floor: Duration,
}

impl Moment {
    /// Now, for a request with `headers`, in the daemon's mode.
    pub fn now(state: &State, headers: &HeaderMap) -> Moment {
        Moment {
            now: state.clock.now(),
            instant: tokio::time::Instant::now().into_std(),
            frozen: state.upstream.switch.frozen(),
            directives: ClientDirectives::from_headers(headers),
            supplied: false,
            revalidate_floor: state.revalidate_floor.get(),
        }
    }

    /// Now, for the request `exchange` carries.
    pub fn of(state: &State, exchange: &Exchange<'_>) -> Moment {
        Moment { supplied: exchange.supply.is_some(), ..Moment::now(state, exchange.headers) }
    }

    /// Now, as if the network were gone: what `check` and bundles judge by.
    pub fn offline(state: &State) -> Moment {
        Moment { frozen: true, ..Moment::now(state, &HeaderMap::new()) }
    }
}

/// What the lookup reads of the cache and the side.
pub trait Holdings {
    /// The entry cached under `key`.
    fn entry(&self, key: &str) -> Option<Arc<Entry>>;
    /// When eviction took what was cached under `key` (Unix seconds).
    fn evicted_at(&self, key: &str) -> Option<u64>;
    /// Whether the store holds these bytes under any name.
    fn holds(&self, sha256: &str, size: u64) -> bool;
    /// Whether `entry`'s body says of itself what `request` accepts.
    fn accepts(&self, entry: &Entry, request: &CachedRequest) -> bool;
    /// An upstream answer the side remembers for `request`.
    fn remembered(&self, request: &CachedRequest, now: Instant, frozen: bool) -> Option<Arc<PassedAnswer>>;
}

/// What the cache holds for `request` at `moment`.
pub fn look(holdings: &dyn Holdings, request: &CachedRequest, moment: &Moment) -> Lookup {
    if let Some(answer) = holdings.remembered(request, moment.instant, moment.frozen) {
        return Lookup::Remembered(answer);
    }
    match usable(holdings, request) {
        Ok(entry) => match stale_reason(request, &entry, moment) {
            None => Lookup::Fresh(entry),
            Some(why) => Lookup::Stale { entry, why },
        },
        Err(why) => match adoptable(holdings, request) {
            Some((sha256, size)) => Lookup::Adoptable { sha256, size },
            None => Lookup::Missing(why),
        },
    }
}

/// The cached entry, unless what the side now expects of the key says it
/// is superseded (a newer `Release` lists other bytes), or it is not one
/// this client can read: such an entry is never served, not even stale,
/// since the client would reject it. Else why there is none to serve.
fn usable(holdings: &dyn Holdings, request: &CachedRequest) -> Result<Arc<Entry>, Reason> {
    let Some(entry) = holdings.entry(&request.key) else {
        return Err(match holdings.evicted_at(&request.key) {
            Some(at) => Reason::Evicted { at },
            None => Reason::NotCached,
        });
    };
    if request.wanted.accepts != Acceptance::Any && !holdings.accepts(&entry, request) {
        tracing::debug!(key = request.key, "cached entry is not one this client reads");
        return Err(Reason::NotReadable);
    }
    let expected = &request.wanted.expected;
    let sha_ok = expected.sha256.as_ref().is_none_or(|sha| sha.eq_ignore_ascii_case(&entry.sha256));
    let size_ok = expected.size.is_none_or(|size| size == entry.size);
    if sha_ok && size_ok {
        return Ok(entry);
    }
    tracing::debug!(key = request.key, "cached entry superseded by what the index now expects");
    let by = request.wanted.expected_from.clone().unwrap_or_else(|| "what the index now lists".to_owned());
    Err(Reason::Superseded { by })
}

/// Why the usable `entry` may not be served without asking the upstream;
/// `None` when it may. An entry with the checksum the side expects is
/// current by definition (the index naming it was confirmed).
fn stale_reason(request: &CachedRequest, entry: &Entry, moment: &Moment) -> Option<Reason> {
    if request.wanted.expected.sha256.is_some() {
        return None;
    }
    let age = || moment.now.duration_since(entry.fetched_at_time()).unwrap_or_default();
    let directives = match request.wanted.client_cache_control {
        ClientCacheControl::Honoured => floored(moment.directives, age(), moment.revalidate_floor),
        ClientCacheControl::Ignored => ClientDirectives::default(),
    };
    // Bytes handed in replace a copy found older by when each was
    // fetched, whatever the mode: offline freezes what the upstream could
    // change, not what an import brings.
    if moment.supplied {
        return Some(Reason::stale(age(), request.wanted.fresh_for, directives));
    }
    let window = match moment.frozen {
        true => Window::Frozen,
        false => Window::For(request.wanted.fresh_for),
    };
    match freshness(entry, moment.now, window, directives) {
        Freshness::Fresh => None,
        _ => Some(Reason::stale(age(), request.wanted.fresh_for, directives)),
    }
}

/// A client's `directives` against an entry revalidated `age` ago: within
/// `floor`, its demand for a fresh copy is met by that revalidation (a
/// `no-cache` waived, a `max-age` raised to the floor).
fn floored(directives: ClientDirectives, age: Duration, floor: Duration) -> ClientDirectives {
    match age < floor {
        true => ClientDirectives { no_cache: false, max_age: directives.max_age.map(|max_age| max_age.max(floor)) },
        false => directives,
    }
}

/// The bytes `request` expects, when the store holds them under another
/// name.
fn adoptable(holdings: &dyn Holdings, request: &CachedRequest) -> Option<(String, u64)> {
    let (Some(sha256), Some(size)) = (&request.wanted.expected.sha256, request.wanted.expected.size) else {
        return None;
    };
    holdings.holds(sha256, size).then(|| (sha256.clone(), size))
}

/// What the daemon holds: its cache, and what its sides remember.
pub struct Held<'a>(pub &'a State);

impl Holdings for Held<'_> {
    fn entry(&self, key: &str) -> Option<Arc<Entry>> {
        self.0.cache.lookup(key)
    }

    fn evicted_at(&self, key: &str) -> Option<u64> {
        self.0.cache.evicted_at(key)
    }

    fn holds(&self, sha256: &str, size: u64) -> bool {
        self.0.cache.holds(sha256, size)
    }

    /// A small positioned read of the body's head: only requests that ask
    /// for it pay for it.
    fn accepts(&self, entry: &Entry, request: &CachedRequest) -> bool {
        use std::os::unix::fs::FileExt;
        const HEAD: u64 = 64 * 1024;
        let Ok(file) = self.0.cache.open_body(entry) else { return false };
        let mut head = vec![0; entry.size.min(HEAD) as usize];
        file.read_exact_at(&mut head, 0).is_ok()
            && match self.0.sides.get(request.side).roles().recording {
                Some(recording) => recording.accepts(request.wanted.accepts, &head),
                None => request.wanted.accepts == pkgproxy_sides::Acceptance::Any,
            }
    }

    fn remembered(&self, request: &CachedRequest, now: Instant, frozen: bool) -> Option<Arc<PassedAnswer>> {
        self.0.sides.get(request.side).roles().remembering?.remembered(request, now, frozen)
    }
}

/// What the cache holds for `request`, now, for a request with `headers`.
pub fn now(state: &State, request: &CachedRequest, headers: &HeaderMap) -> Lookup {
    look(&Held(state), request, &Moment::now(state, headers))
}

/// An entry for stored bytes known by their hash alone (held under another
/// name): enough to open them.
pub fn by_hash(sha256: String, size: u64, class: pkgproxy_cache::Class) -> Entry {
    Entry { sha256, size, headers: Vec::new(), validators: Default::default(), fetched_at: 0, class, last_used_ns: 0 }
}

#[cfg(test)]
mod tests {
    use std::collections::HashMap;
    use std::time::Duration;

    use http::StatusCode;
    use pkgproxy_cache::Class;
    use pkgproxy_sides::{Origin, SideId};

    use super::*;

    /// What a test says the cache and the side hold.
    #[derive(Default)]
    struct Fake {
        entries: HashMap<String, Arc<Entry>>,
        evicted: HashMap<String, u64>,
        blobs: Vec<(String, u64)>,
        readable: bool,
        remembered: Option<Arc<PassedAnswer>>,
    }

    impl Holdings for Fake {
        fn entry(&self, key: &str) -> Option<Arc<Entry>> {
            self.entries.get(key).cloned()
        }
        fn evicted_at(&self, key: &str) -> Option<u64> {
            self.evicted.get(key).copied()
        }
        fn holds(&self, sha256: &str, size: u64) -> bool {
            self.blobs.iter().any(|(sha, held)| sha == sha256 && *held == size)
        }
        fn accepts(&self, _: &Entry, _: &CachedRequest) -> bool {
            self.readable
        }
        fn remembered(&self, _: &CachedRequest, _: Instant, frozen: bool) -> Option<Arc<PassedAnswer>> {
            self.remembered.clone().filter(|_| !frozen)
        }
    }

    const EPOCH: u64 = 1_800_000_000;
    const KEY: &str = "apt/debian/dists/stable/main/binary-amd64/Packages.xz";

    fn at(seconds: u64) -> Moment {
        Moment {
            now: SystemTime::UNIX_EPOCH + Duration::from_secs(EPOCH + seconds),
            instant: Instant::now(),
            frozen: false,
            directives: ClientDirectives::default(),
            supplied: false,
            revalidate_floor: crate::config::DEFAULT_REVALIDATE_FLOOR,
        }
    }

    fn request(fresh_for: u64) -> CachedRequest {
        let origin = Origin { pool: "p".into(), instances: vec!["http://127.0.0.1:1".into()], path: "/x".into() };
        let mut request = CachedRequest::new(SideId::Apt, KEY.into(), origin, Class::Revalidated);
        request.wanted.fresh_for = Duration::from_secs(fresh_for);
        request
    }

    fn holding(sha256: &str, size: u64) -> Fake {
        let entry = Entry { fetched_at: EPOCH, ..by_hash(sha256.into(), size, Class::Revalidated) };
        Fake { entries: HashMap::from([(KEY.to_owned(), Arc::new(entry))]), ..Fake::default() }
    }

    fn expecting(mut request: CachedRequest, sha256: &str, size: u64) -> CachedRequest {
        request.wanted.expected.sha256 = Some(sha256.into());
        request.wanted.expected.size = Some(size);
        request.wanted.expected_from = Some("Release of 2027-01-15 08:00 UTC".into());
        request
    }

    #[test]
    fn an_entry_within_its_window_is_fresh_and_after_it_stale_with_its_age() {
        let cache = holding("aa", 10);
        assert!(matches!(look(&cache, &request(60), &at(59)), Lookup::Fresh(_)));
        let Lookup::Stale { why, .. } = look(&cache, &request(60), &at(61)) else { panic!("not stale") };
        assert_eq!(why, Reason::Expired { age: Duration::from_secs(61), window: Duration::from_secs(60) });
    }

    #[test]
    fn offline_nothing_is_too_old() {
        let frozen = Moment { frozen: true, ..at(86_400) };
        assert!(matches!(look(&holding("aa", 10), &request(60), &frozen), Lookup::Fresh(_)));
    }

    #[test]
    fn a_client_asking_for_a_fresher_answer_makes_a_fresh_entry_stale_past_the_floor() {
        let asked = Moment { directives: ClientDirectives { no_cache: true, max_age: None }, ..at(11) };
        let Lookup::Stale { why, .. } = look(&holding("aa", 10), &request(60), &asked) else { panic!("not stale") };
        assert_eq!(why, Reason::ClientAsked("no-cache".into()));
    }

    #[test]
    fn within_the_floor_a_revalidation_answers_every_client_asking_for_a_fresh_copy() {
        let cache = holding("aa", 10);
        for directives in [
            ClientDirectives { no_cache: true, max_age: None },
            ClientDirectives { no_cache: false, max_age: Some(Duration::ZERO) },
        ] {
            let within = Moment { directives, ..at(9) };
            assert!(matches!(look(&cache, &request(60), &within), Lookup::Fresh(_)), "{directives:?}");
            let past = Moment { directives, ..at(10) };
            assert!(matches!(look(&cache, &request(60), &past), Lookup::Stale { .. }), "{directives:?}");
        }
        // A window shorter than the floor still ends the entry's freshness.
        assert!(matches!(look(&cache, &request(5), &at(9)), Lookup::Stale { .. }));
        // No floor: every such client revalidates.
        let unfloored = Moment {
            directives: ClientDirectives { no_cache: true, max_age: None },
            revalidate_floor: Duration::ZERO,
            ..at(1)
        };
        assert!(matches!(look(&cache, &request(60), &unfloored), Lookup::Stale { .. }));
    }

    #[test]
    fn the_expected_checksum_makes_an_entry_fresh_at_any_age_and_another_one_superseded() {
        let cache = holding("aa", 10);
        assert!(matches!(look(&cache, &expecting(request(0), "AA", 10), &at(86_400)), Lookup::Fresh(_)));
        let Lookup::Missing(why) = look(&cache, &expecting(request(0), "bb", 10), &at(0)) else { panic!("usable") };
        assert_eq!(why, Reason::Superseded { by: "Release of 2027-01-15 08:00 UTC".into() });
        let Lookup::Missing(why) = look(&cache, &expecting(request(0), "aa", 11), &at(0)) else { panic!("usable") };
        assert!(matches!(why, Reason::Superseded { .. }), "{why:?}");
    }

    #[test]
    fn expected_bytes_held_under_another_name_are_adoptable_instead_of_missing() {
        let mut cache = holding("aa", 10);
        cache.blobs.push(("bb".into(), 20));
        let Lookup::Adoptable { sha256, size } = look(&cache, &expecting(request(0), "bb", 20), &at(0)) else {
            panic!("not adoptable")
        };
        assert_eq!((sha256.as_str(), size), ("bb", 20));
        assert!(matches!(look(&Fake::default(), &expecting(request(0), "cc", 1), &at(0)), Lookup::Missing(_)));
    }

    #[test]
    fn nothing_cached_says_whether_eviction_took_it() {
        let Lookup::Missing(why) = look(&Fake::default(), &request(0), &at(0)) else { panic!("held") };
        assert_eq!(why, Reason::NotCached);
        let evicted = Fake { evicted: HashMap::from([(KEY.to_owned(), 7)]), ..Fake::default() };
        let Lookup::Missing(why) = look(&evicted, &request(0), &at(0)) else { panic!("held") };
        assert_eq!(why, Reason::Evicted { at: 7 });
    }

    #[test]
    fn an_entry_the_client_cannot_read_is_not_usable() {
        let mut asking = request(60);
        asking.wanted.accepts = Acceptance::AssertionFormatAtMost(1);
        let Lookup::Missing(why) = look(&holding("aa", 10), &asking, &at(0)) else { panic!("usable") };
        assert_eq!(why, Reason::NotReadable);
        let readable = Fake { readable: true, ..holding("aa", 10) };
        assert!(matches!(look(&readable, &asking, &at(0)), Lookup::Fresh(_)));
    }

    #[test]
    fn a_remembered_answer_comes_before_what_is_cached() {
        let answer = PassedAnswer { status: StatusCode::NOT_FOUND, headers: Vec::new(), body: "gone".into() };
        let cache = Fake { remembered: Some(Arc::new(answer)), ..holding("aa", 10) };
        assert!(matches!(look(&cache, &request(60), &at(0)), Lookup::Remembered(_)));
        let frozen = Moment { frozen: true, ..at(0) };
        assert!(matches!(look(&cache, &request(60), &frozen), Lookup::Fresh(_)), "the side forgets it frozen");
    }

    #[test]
    fn bytes_handed_in_replace_a_copy_nothing_expects_and_not_an_expected_one() {
        let supplied = Moment { supplied: true, frozen: true, ..at(1) };
        assert!(matches!(look(&holding("aa", 10), &request(60), &supplied), Lookup::Stale { .. }));
        let expected = expecting(request(60), "aa", 10);
        assert!(matches!(look(&holding("aa", 10), &expected, &supplied), Lookup::Fresh(_)));
    }
}
