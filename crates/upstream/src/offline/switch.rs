//! The offline switch: the mode in effect and, in store-overloaded mode, a
//! breaker per upstream host. The transport and the dialer ask it before any
//! name is resolved or socket opened, and tell it how each request ended.

use parking_lot::Mutex;
use std::collections::HashMap;
use std::sync::atomic::{AtomicU8, Ordering};
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use tokio::time::Instant;

use super::breaker::{Admission, Breaker, BreakerState, Outcome, Pass, Transition};
use super::mode::Mode;

/// A host whose breaker is not closed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UpstreamState {
    /// The host (breakers are per host, not per port).
    pub host: String,
    /// Where its breaker stands.
    pub state: BreakerState,
}

/// Why the switch refused a request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Refusal {
    /// Offline mode is in effect: asking again cannot help until the mode
    /// changes.
    Offline,
    /// Store-overloaded mode, and the host's breaker is open.
    BreakerOpen {
        /// How long until the host may be tried again.
        retry_after: Duration,
    },
}

impl Refusal {
    /// How long until asking again may help (`None` while offline).
    pub fn retry_after(self) -> Option<Duration> {
        match self {
            Refusal::Offline => None,
            Refusal::BreakerOpen { retry_after } => Some(retry_after),
        }
    }
}

impl std::fmt::Display for Refusal {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Refusal::Offline => f.write_str("pkgproxy is offline"),
            Refusal::BreakerOpen { retry_after } => {
                write!(f, "its breaker is open for {} s more", retry_after.as_secs_f64().ceil())
            }
        }
    }
}

/// Told when a host's breaker opens because the host asked for time (a
/// `429`, or a `503` with `Retry-After`) on a second path, and when it
/// closes again: a cluster's nodes share those (the host's limit is on the
/// cluster's address, not on one node), and keep the rest (connect errors,
/// slow answers) to themselves. One path's answer opens this node's breaker
/// only: what one client asks for (a path the host refuses on its own)
/// must not stop the whole cluster asking the host.
pub trait BreakerWatcher: Send + Sync + std::fmt::Debug {
    /// `host` asked to be left alone until `until`.
    fn opened(&self, host: &str, until: SystemTime);
    /// `host` answered a probe.
    fn closed(&self, host: &str);
}

#[derive(Debug, Default)]
struct Inner {
    mode: Mode,
    /// Bumped at every mode change, so tickets from before it say nothing.
    epoch: u64,
    breakers: HashMap<String, Breaker>,
    watcher: Option<Arc<dyn BreakerWatcher>>,
    /// For a host whose breaker it opened, the path whose answer asked for
    /// time (until the host answers again).
    asked_on: HashMap<String, Option<String>>,
    /// When the mode last changed, if it did since the start.
    since: Option<SystemTime>,
}

/// The switch, shared by the transport, the dialer and the admin socket.
#[derive(Debug, Clone, Default)]
pub struct Switch {
    inner: Arc<Mutex<Inner>>,
    /// The mode, also readable without the lock: every cache hit asks
    /// whether freshness is frozen.
    mode: Arc<AtomicU8>,
}

impl Switch {
    /// A switch in `mode`.
    pub fn new(mode: Mode) -> Self {
        let switch = Switch::default();
        switch.inner.lock().mode = mode;
        switch.mode.store(mode_code(mode), Ordering::Release);
        switch
    }

    /// The mode in effect.
    pub fn mode(&self) -> Mode {
        Mode::ALL[usize::from(self.mode.load(Ordering::Acquire))]
    }

    /// When the mode in effect was put in effect, if it changed since the
    /// start.
    pub fn since(&self) -> Option<SystemTime> {
        self.inner.lock().since
    }

    /// True when freshness is frozen (offline mode): no cached entry is old
    /// enough to revalidate.
    pub fn frozen(&self) -> bool {
        self.mode() == Mode::Offline
    }

    /// Puts `mode` in effect. The breakers are forgotten: a failure from
    /// before the change is no news of the upstream after it. Requests in
    /// flight finish normally; what they report is ignored.
    pub fn set_mode(&self, mode: Mode) {
        let mut inner = self.inner.lock();
        if inner.mode != mode {
            tracing::info!(from = inner.mode.as_str(), to = mode.as_str(), "offline mode changed");
            inner.since = Some(SystemTime::now());
        }
        inner.mode = mode;
        self.mode.store(mode_code(mode), Ordering::Release);
        inner.epoch += 1;
        inner.breakers.clear();
        inner.asked_on.clear();
    }

    /// Tells `watcher` of breakers the hosts themselves opened, and of
    /// their closing.
    pub fn watch_breakers(&self, watcher: Arc<dyn BreakerWatcher>) {
        self.inner.lock().watcher = Some(watcher);
    }

    /// Opens `host`'s breaker until `until`, as another node saw the host
    /// ask for time.
    pub fn impose(&self, host: &str, until: SystemTime) {
        let Ok(left) = until.duration_since(SystemTime::now()) else { return };
        let now = Instant::now();
        let mut inner = self.inner.lock();
        let breaker = inner.breakers.entry(host.to_ascii_lowercase()).or_default();
        if breaker.impose(now, now + left) {
            tracing::info!(
                host,
                seconds = left.as_secs(),
                "another node of the cluster was asked to leave this upstream alone"
            );
        }
    }

    /// Closes `host`'s breaker, as another node saw the host answer again.
    pub fn lift(&self, host: &str) {
        if let Some(breaker) = self.inner.lock().breakers.get_mut(&host.to_ascii_lowercase()) {
            breaker.lift();
        }
    }

    /// The hosts whose breaker is not closed, at `now`.
    pub fn upstreams(&self, now: Instant) -> Vec<UpstreamState> {
        let inner = self.inner.lock();
        let mut hosts: Vec<UpstreamState> = inner
            .breakers
            .iter()
            .map(|(host, breaker)| UpstreamState { host: host.clone(), state: breaker.state(now) })
            .filter(|u| u.state != BreakerState::Closed)
            .collect();
        hosts.sort_by(|a, b| a.host.cmp(&b.host));
        hosts
    }

    /// Asks to send a request to `host` at `now`.
    pub fn admit(&self, host: &str, now: Instant) -> Result<Ticket, Refusal> {
        let mut inner = self.inner.lock();
        let epoch = inner.epoch;
        match inner.mode {
            Mode::Never => Ok(Ticket::free()),
            Mode::Offline => Err(Refusal::Offline),
            Mode::StoreOverloaded => {
                let breaker = inner.breakers.entry(host.to_ascii_lowercase()).or_default();
                match breaker.admit(now) {
                    Admission::Pass(pass) => Ok(Ticket {
                        watched: Some(Watched {
                            switch: self.clone(),
                            host: host.to_ascii_lowercase(),
                            epoch,
                            pass,
                            path: None,
                        }),
                    }),
                    Admission::Refused { retry_after } => Err(Refusal::BreakerOpen { retry_after }),
                }
            }
        }
    }

    fn settle(&self, watched: &Watched, now: Instant, outcome: Option<Outcome>) {
        let mut inner = self.inner.lock();
        if inner.epoch != watched.epoch {
            return;
        }
        let Some(breaker) = inner.breakers.get_mut(&watched.host) else { return };
        let Some(outcome) = outcome else {
            breaker.abandon(now, watched.pass);
            return;
        };
        let asked = matches!(outcome, Outcome::Failure { retry_after: Some(_) });
        match breaker.record(now, watched.pass, outcome) {
            Transition::None => {}
            Transition::Opened(duration) => {
                tracing::warn!(
                    host = watched.host,
                    seconds = duration.as_secs(),
                    "upstream looks overloaded: leaving it alone (store-overloaded mode)"
                );
                if asked && inner.asked_on_another_path(watched) {
                    if let Some(watcher) = &inner.watcher {
                        watcher.opened(&watched.host, SystemTime::now() + duration);
                    }
                }
            }
            Transition::Closed => {
                tracing::info!(host = watched.host, "upstream answered again");
                inner.asked_on.remove(&watched.host);
                if let Some(watcher) = &inner.watcher {
                    watcher.closed(&watched.host);
                }
            }
        }
    }
}

impl Inner {
    /// Whether the host of `watched` asked for time on a path other than
    /// the one it asked on before (remembering this one otherwise): twice
    /// on one path is that path's business.
    fn asked_on_another_path(&mut self, watched: &Watched) -> bool {
        match self.asked_on.get(&watched.host) {
            Some(before) if before.is_none() || *before != watched.path => true,
            _ => {
                self.asked_on.insert(watched.host.clone(), watched.path.clone());
                false
            }
        }
    }
}

/// The index of `mode` in [`Mode::ALL`].
fn mode_code(mode: Mode) -> u8 {
    Mode::ALL.iter().position(|m| *m == mode).unwrap_or(0) as u8
}

#[derive(Debug)]
struct Watched {
    switch: Switch,
    host: String,
    epoch: u64,
    pass: Pass,
    /// What was asked of the host (`None`: a tunnel's connection).
    path: Option<String>,
}

/// A request's permission to go upstream. Report how it ended with
/// [`Ticket::answered`] or [`Ticket::failed`]; dropped unreported (the client
/// left), it says nothing of the host, and a probe's slot is freed.
#[derive(Debug)]
pub struct Ticket {
    watched: Option<Watched>,
}

impl Ticket {
    /// A ticket nothing watches (mode never).
    fn free() -> Self {
        Ticket { watched: None }
    }

    /// The same ticket, for a request of `path` (its path and query).
    pub fn on_path(mut self, path: &str) -> Self {
        if let Some(watched) = self.watched.as_mut() {
            watched.path = Some(path.split('?').next().unwrap_or(path).to_owned());
        }
        self
    }

    /// The host answered.
    pub fn answered(mut self) {
        self.settle(Some(Outcome::Answer));
    }

    /// The request failed (transport error, timeout, dial failure, or a
    /// 429/502/503/504 answer), with the `Retry-After` it carried.
    pub fn failed(mut self, retry_after: Option<Duration>) {
        self.settle(Some(Outcome::Failure { retry_after }));
    }

    /// Reports an HTTP answer, classified by [`outcome_of`].
    pub fn answered_with(self, status: http::StatusCode, headers: &http::HeaderMap) {
        match outcome_of(status, headers, SystemTime::now()) {
            Outcome::Answer => self.answered(),
            Outcome::Failure { retry_after } => self.failed(retry_after),
        }
    }

    fn settle(&mut self, outcome: Option<Outcome>) {
        if let Some(watched) = self.watched.take() {
            watched.switch.settle(&watched, Instant::now(), outcome);
        }
    }
}

impl Drop for Ticket {
    fn drop(&mut self) {
        self.settle(None);
    }
}

/// What an HTTP answer says of its host: 429, 502, 503 and 504 are failures
/// (a 429 or 503 with a readable `Retry-After`, in seconds or as an HTTP
/// date, opens the breaker at once); everything else, 500 and 501 included,
/// is an answer (they are about that request, not the host).
pub fn outcome_of(status: http::StatusCode, headers: &http::HeaderMap, now: SystemTime) -> Outcome {
    match status.as_u16() {
        429 | 503 => Outcome::Failure { retry_after: retry_after(headers, now) },
        502 | 504 => Outcome::Failure { retry_after: None },
        _ => Outcome::Answer,
    }
}

/// A `Retry-After` value as a duration from `now`; `None` when absent or
/// unreadable.
fn retry_after(headers: &http::HeaderMap, now: SystemTime) -> Option<Duration> {
    let value = headers.get(http::header::RETRY_AFTER)?.to_str().ok()?.trim();
    if let Ok(secs) = value.parse::<u64>() {
        return Some(Duration::from_secs(secs));
    }
    let date = httpdate::parse_http_date(value).ok()?;
    Some(date.duration_since(now).unwrap_or(Duration::ZERO))
}

#[cfg(test)]
mod tests {
    use super::*;
    use http::{HeaderMap, HeaderValue, StatusCode};

    fn headers(retry_after: &str) -> HeaderMap {
        let mut h = HeaderMap::new();
        h.insert(http::header::RETRY_AFTER, HeaderValue::from_str(retry_after).unwrap());
        h
    }

    #[test]
    fn statuses_are_classified_as_the_breaker_rules_say() {
        let now = SystemTime::now();
        let none = HeaderMap::new();
        for failure in [429, 502, 503, 504] {
            let status = StatusCode::from_u16(failure).unwrap();
            assert_eq!(outcome_of(status, &none, now), Outcome::Failure { retry_after: None }, "{failure}");
        }
        for answer in [200, 304, 404, 500, 501] {
            assert_eq!(outcome_of(StatusCode::from_u16(answer).unwrap(), &none, now), Outcome::Answer, "{answer}");
        }
    }

    #[test]
    fn retry_after_in_seconds_or_as_a_date_and_unreadable_ones_ignored() {
        let now = SystemTime::UNIX_EPOCH + Duration::from_secs(1_700_000_000);
        let s = |secs| Outcome::Failure { retry_after: Some(Duration::from_secs(secs)) };
        assert_eq!(outcome_of(StatusCode::TOO_MANY_REQUESTS, &headers("120"), now), s(120));
        let date = httpdate::fmt_http_date(now + Duration::from_secs(90));
        assert_eq!(outcome_of(StatusCode::SERVICE_UNAVAILABLE, &headers(&date), now), s(90));
        let plain = Outcome::Failure { retry_after: None };
        assert_eq!(outcome_of(StatusCode::TOO_MANY_REQUESTS, &headers("soon"), now), plain);
        // 502 and 504 do not honour Retry-After.
        assert_eq!(outcome_of(StatusCode::BAD_GATEWAY, &headers("120"), now), plain);
    }

    #[tokio::test(start_paused = true)]
    async fn offline_refuses_everything_and_never_refuses_nothing() {
        let now = Instant::now();
        assert!(Switch::new(Mode::Never).admit("deb.debian.org", now).is_ok());
        let refusal = Switch::new(Mode::Offline).admit("deb.debian.org", now).unwrap_err();
        assert_eq!(refusal.retry_after(), None);
    }

    #[tokio::test(start_paused = true)]
    async fn breakers_are_per_host_and_a_mode_change_forgets_them() {
        let switch = Switch::new(Mode::StoreOverloaded);
        for _ in 0..3 {
            switch.admit("a.example", Instant::now()).unwrap().failed(None);
        }
        assert!(switch.admit("a.example", Instant::now()).is_err());
        assert!(switch.admit("b.example", Instant::now()).is_ok(), "another host is not affected");
        assert_eq!(switch.upstreams(Instant::now()).len(), 1);

        // A ticket from before the change reports into nothing.
        let old = switch.admit("b.example", Instant::now()).unwrap();
        switch.set_mode(Mode::StoreOverloaded);
        assert!(switch.upstreams(Instant::now()).is_empty());
        assert!(switch.admit("a.example", Instant::now()).is_ok());
        old.failed(None);
        assert!(switch.upstreams(Instant::now()).is_empty());
    }

    /// Records what a cluster is told.
    #[derive(Debug, Default)]
    struct Told(parking_lot::Mutex<Vec<String>>);

    impl BreakerWatcher for Told {
        fn opened(&self, host: &str, _: SystemTime) {
            self.0.lock().push(format!("opened {host}"));
        }
        fn closed(&self, host: &str) {
            self.0.lock().push(format!("closed {host}"));
        }
    }

    #[tokio::test(start_paused = true)]
    async fn a_host_asking_for_time_on_one_path_is_shared_only_once_it_asks_on_another() {
        let switch = Switch::new(Mode::StoreOverloaded);
        let told = Arc::new(Told::default());
        switch.watch_breakers(told.clone());
        let busy = headers("60");
        let ask = |path: &str| {
            let ticket = switch.admit("a.example", Instant::now()).expect("admitted").on_path(path);
            ticket.answered_with(StatusCode::SERVICE_UNAVAILABLE, &busy);
        };
        ask("/refused/by/itself?x=1");
        assert!(switch.admit("a.example", Instant::now()).is_err(), "this node leaves the host alone");
        assert!(told.0.lock().is_empty(), "the cluster is not told of one path");
        tokio::time::advance(Duration::from_secs(60)).await;
        ask("/refused/by/itself?x=2");
        assert!(told.0.lock().is_empty(), "the same path again");
        tokio::time::advance(Duration::from_secs(120)).await;
        ask("/another/path");
        assert_eq!(*told.0.lock(), ["opened a.example"], "two paths: the host is busy");
    }

    #[tokio::test(start_paused = true)]
    async fn time_left_counts_down_with_the_clock() {
        let switch = Switch::new(Mode::StoreOverloaded);
        switch.admit("a.example", Instant::now()).unwrap().failed(Some(Duration::from_secs(120)));
        tokio::time::advance(Duration::from_secs(100)).await;
        let refusal = switch.admit("a.example", Instant::now()).unwrap_err();
        assert_eq!(refusal.retry_after(), Some(Duration::from_secs(20)));
        tokio::time::advance(Duration::from_secs(20)).await;
        let probe = switch.admit("a.example", Instant::now()).unwrap();
        assert!(switch.admit("a.example", Instant::now()).is_err(), "one probe at a time");
        drop(probe);
        let next = switch.admit("a.example", Instant::now()).expect("an abandoned probe frees the slot");
        next.answered();
        assert!(switch.upstreams(Instant::now()).is_empty());
    }
}
