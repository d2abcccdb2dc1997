//! The instances of one upstream (the mirrors of an apt archive, a list of
//! module proxies) and how a request is carried out over them, so that a
//! failing instance costs the client nothing while another one works and a
//! total outage fails fast.
//!
//! The rules (`docs/upstream-pools.md`):
//! - **Spread.** Among the healthy instances, power of two choices (two
//!   distinct ones) on a "peak EWMA" score: the time to first byte averaged
//!   with a decay, or the age of the instance's oldest request still
//!   waiting for its head when that is longer, times the requests in flight
//!   plus one. A request stays in flight until its body has ended, so a
//!   long download is load on its instance. Downloads of very unequal
//!   length make "least requests" alone a poor guide, and latency alone
//!   herds everyone onto the fastest mirror; the product favours the faster
//!   instance without starving the other. The "peak" stops an instance that
//!   went silent from drawing requests before a timeout has even penalised
//!   it. An instance never measured is assumed as fast as the best, so a
//!   new or equal peer gets tried.
//! - **Fail fast.** An attempt on a healthy instance has `connect` to open
//!   its connection and `first_byte` from its start to the answer head. The
//!   body then takes as long as it needs while bytes keep coming; a body
//!   that sends nothing for `body_idle` fails. The last instance a request
//!   has left to try gets the patient `retry` limit instead: with nowhere to
//!   move on to, failing fast gains nothing (a pool of one slow mirror still
//!   works).
//! - **Move on.** A connect error, a timeout, a connection closed or reset
//!   before the head, or a `429`, `500`, `502`, `503` or `504` answer fails
//!   the attempt, and the request moves at once to the next instance. A
//!   `404` or `410` moves it on too, without faulting the instance: one
//!   mirror may lag behind another's sync. No instance is tried twice for
//!   one request: once every instance has been tried, the request fails
//!   (see "Give up"), or gets the last instance's own answer.
//! - **Penalty.** A failed attempt takes its instance out of the pool for a
//!   penalty that doubles with each consecutive failure, from
//!   `penalty_base` up to `penalty_max`, with jitter. One outage raises it
//!   once: the failure of an attempt that started before the current
//!   penalty began says nothing new (fifty requests caught by one outage
//!   raise it once). A penalty drops the instance's idle pooled connections
//!   (a firewall may have killed them), and requests waiting for a head from
//!   that instance move on at once when they have another instance to try. A body failing half way penalises its
//!   instance too. A success ends the penalty and resets the count. A
//!   re-admitted instance is on probation: one request tries it while the
//!   others keep away, so one request per penalty period pays for an
//!   instance that is still dead.
//! - **Failing state.** Penalised instances are tried only when no healthy
//!   untried one is left, soonest-recovered first, with the less aggressive
//!   `retry` timeout: in a disaster, waiting a little longer is better than
//!   failing.
//! - **Give up.** A request's attempts are bounded by its `deadline` (the
//!   body excepted). When every instance has been tried, or the deadline ran
//!   out, the request fails with [`UpstreamError::AllFailed`], naming each
//!   attempt — unless the last attempt got an answer (a `503` with its
//!   `Retry-After`, say), which is then passed on as the upstream's word.
//! - **Stale connections.** A request that fails on a reused pooled
//!   connection (the upstream closed it while it sat idle) is sent once
//!   more on a fresh connection to the same instance, with no penalty: that
//!   failure says nothing of the instance. Idle pooled connections are
//!   closed after `pool_idle`, and hyper checks a pooled connection is still
//!   open before reusing it.
//! - **Requests that are not idempotent** (a `POST` with a body) are never
//!   sent twice: only a failure to connect (nothing was sent) moves one on
//!   to the next instance; any answer, a `503` included, is passed on; a
//!   failure once it may have been sent ends it; and it is not sent again
//!   after a stale connection. A request whose body is streamed from its
//!   client ([`Payload`]) is treated so whatever its method; its attempt's
//!   limit for the head runs from the body's end, and a body that passes
//!   nothing for `body_idle` ends the attempt without faulting the
//!   instance.
//!
//! Interplay with store-overloaded mode: the per-host breakers stay exactly
//! as `docs/offline-mode.md` says, and every attempt reports to its host's
//! breaker as before. A host whose breaker is open counts as penalised: the
//! request skips it without an attempt (and without raising its penalty).
//! When every instance is skipped that way the request is refused as the
//! breaker says, with the shortest `Retry-After`. The pool's penalties never
//! open a breaker by themselves. In offline mode nothing is attempted.

mod attempt;
mod body;
mod payload;
mod rules;
mod shared;

use std::sync::Arc;

use parking_lot::{Mutex, MutexGuard};
use std::time::Duration;

use http::{HeaderMap, Method};
use tokio::sync::watch;
use tokio::time::Instant;

pub use body::PoolBody;
pub use payload::{Payload, Streamed};
pub use rules::{Attempt, Choice, InstanceReport, Penalties, Rules};
pub(crate) use shared::Shared;

use crate::error::UpstreamError;
use crate::offline::Refusal;
use attempt::{Elsewhere, Sent, Tried, Wait};
use shared::Client;

/// A request to send to one of a pool's instances.
#[derive(Debug, Clone)]
pub struct PoolRequest {
    /// The method; one that is not idempotent is never sent twice.
    pub method: Method,
    /// The path (and query) below an instance's base URL, starting with `/`.
    pub path: String,
    /// The request's headers (`Host` is set per instance).
    pub headers: HeaderMap,
    /// The request's body: held whole (empty for none), or streamed.
    pub body: Payload,
    /// An instance not to try unless it is the only one (the instance whose
    /// body just broke, when resuming).
    pub avoid: Option<usize>,
}

impl PoolRequest {
    /// A `GET` of `path` with `headers` and no body.
    pub fn get(path: impl Into<String>, headers: HeaderMap) -> Self {
        PoolRequest { method: Method::GET, path: path.into(), headers, body: Payload::default(), avoid: None }
    }

    /// Whether sending the request twice is harmless (RFC 9110 §9.2.2)
    /// and possible (a streamed body goes once).
    fn is_idempotent(&self) -> bool {
        self.method.is_idempotent() && self.body.can_send_again()
    }
}

/// A pool's answer: the response head, its body, and who sent it.
#[derive(Debug)]
pub struct PoolAnswer {
    /// The response; its body reports to the pool as it streams.
    pub response: http::Response<PoolBody>,
    /// Which instance answered (an index into the pool's instances).
    pub instance: usize,
}

/// One instance: where it is and its own connections.
#[derive(Debug)]
struct Instance {
    /// The base URL, without a trailing slash or user information: what
    /// the pool shows, logs and names in errors.
    url: String,
    /// The Basic credentials the configured URL carried, sent to this
    /// instance alone ([`crate::userinfo`]).
    authorization: Option<http::HeaderValue>,
    /// Its host, as the breakers know it (for an endpoint of a parent
    /// pkgproxy, the host and the endpoint's path: see
    /// [`Shared::breaker_key`]).
    host: String,
    /// Its pooled connections. Replaced on a penalty, which drops the idle
    /// ones.
    client: Mutex<Client>,
    /// A client that never pools, for the one retry after a stale
    /// connection.
    fresh: Client,
    /// Counts penalties: requests waiting for a head from this instance
    /// watch it and move on when it changes.
    penalties: watch::Sender<u64>,
}

/// The instances of one upstream and their state.
#[derive(Debug)]
pub struct Pool {
    name: String,
    instances: Vec<Instance>,
    rules: Mutex<Rules>,
    shared: Arc<Shared>,
}

/// What `/pkgproxy/v1/info` shows of a pool.
#[derive(Debug, Clone, PartialEq)]
pub struct PoolReport {
    /// The pool's name.
    pub name: String,
    /// Each instance's base URL and state.
    pub instances: Vec<(String, InstanceReport)>,
}

impl Pool {
    /// A pool named `name` over the base URLs `urls` (at least one, each
    /// `http://host[:port][/prefix]`).
    pub(crate) fn new(name: &str, urls: &[String], shared: Arc<Shared>) -> Result<Self, UpstreamError> {
        if urls.is_empty() {
            return Err(UpstreamError::BadTarget { uri: name.to_string(), reason: "a pool needs an instance" });
        }
        let instances = urls
            .iter()
            .map(|url| {
                let split = crate::userinfo::split(url.trim_end_matches('/'));
                let uri: http::Uri = split
                    .url
                    .parse()
                    .map_err(|_| UpstreamError::BadTarget { uri: split.url.clone(), reason: "not a URL" })?;
                Ok(Instance {
                    host: shared.breaker_key(&uri)?,
                    url: split.url,
                    authorization: split.authorization,
                    client: Mutex::new(shared.pooled_client()),
                    fresh: shared.fresh_client(),
                    penalties: watch::channel(0).0,
                })
            })
            .collect::<Result<Vec<_>, UpstreamError>>()?;
        let rules = Rules::new(instances.len(), shared.settings.penalties);
        Ok(Pool { name: name.to_string(), instances, rules: Mutex::new(rules), shared })
    }

    /// When every instance's breaker is open at `now`: the one that closes
    /// first and how long it stays open (what a request would be told).
    /// Asks nothing of the breakers: no probe is taken.
    pub fn all_breakers_open(&self, now: tokio::time::Instant) -> Option<(String, std::time::Duration)> {
        if self.shared.switch.mode() != crate::offline::Mode::StoreOverloaded {
            return None;
        }
        let open = self.shared.switch.upstreams(now);
        let mut waits = Vec::with_capacity(self.instances.len());
        for instance in &self.instances {
            let state = open.iter().find(|u| u.host == instance.host).map(|u| u.state);
            match state {
                Some(crate::offline::BreakerState::Open(left)) => waits.push((instance.host.clone(), left)),
                Some(crate::offline::BreakerState::Probing) => {
                    waits.push((instance.host.clone(), std::time::Duration::from_secs(1)))
                }
                _ => return None,
            }
        }
        waits.into_iter().min_by_key(|(_, left)| *left)
    }

    /// The pool's name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The base URL of instance `index`.
    pub fn url(&self, index: usize) -> Option<&str> {
        self.instances.get(index).map(|i| i.url.as_str())
    }

    fn rules(&self) -> MutexGuard<'_, Rules> {
        self.rules.lock()
    }

    /// Each instance's state now.
    pub fn report(&self) -> PoolReport {
        let states = self.rules().report(Instant::now());
        let instances = self.instances.iter().map(|i| i.url.clone()).zip(states).collect();
        PoolReport { name: self.name.clone(), instances }
    }

    /// Sends `request` to the pool's instances by the rules above until one
    /// answers, every one has been tried, or the deadline runs out.
    pub async fn send(self: &Arc<Self>, request: PoolRequest) -> Result<PoolAnswer, UpstreamError> {
        let timeouts = self.shared.settings.timeouts;
        let deadline = Instant::now() + timeouts.deadline;
        let mut tried = vec![false; self.instances.len()];
        if let Some(avoid) = request.avoid.filter(|&i| i < tried.len() && tried.len() > 1) {
            tried[avoid] = true;
        }
        let mut attempts: Vec<String> = Vec::new();
        let mut breaker_waits: Vec<Duration> = Vec::new();
        let mut last_answer = None;
        loop {
            let now = Instant::now();
            let random = self.shared.random_pair();
            let (index, failing) = match self.rules().choose(now, &tried, random) {
                Choice::Healthy(index) => (index, false),
                Choice::Failing(index) => (index, true),
                Choice::Exhausted => break,
            };
            tried[index] = true;
            let elsewhere = match tried.iter().all(|&t| t) {
                true => Elsewhere::Exhausted,
                false => Elsewhere::Untried,
            };
            let limit = match (failing, elsewhere) {
                (false, Elsewhere::Untried) => timeouts.first_byte,
                _ => timeouts.retry,
            };
            let instance = &self.instances[index];
            let ticket = match self.shared.switch.admit(&instance.host, now) {
                Ok(ticket) => ticket.on_path(&request.path),
                Err(refusal @ Refusal::Offline) => {
                    return Err(UpstreamError::Refused { host: instance.host.clone(), refusal });
                }
                Err(Refusal::BreakerOpen { retry_after }) => {
                    attempts.push(format!("{}: its breaker is open for {}s", instance.url, retry_after.as_secs()));
                    breaker_waits.push(retry_after);
                    continue;
                }
            };
            let left = deadline.saturating_duration_since(now);
            if left.is_zero() {
                attempts.push(format!("{}: not tried, the {:?} deadline ran out", instance.url, timeouts.deadline));
                break;
            }
            last_answer = None;
            let wait = match limit > left {
                true => Wait::Deadline(left),
                false => Wait::Own(limit),
            };
            match self.attempt(index, &request, wait, elsewhere, ticket).await {
                Tried::Answered(answer) => return Ok(answer),
                Tried::Refused(answer, _) if !request.is_idempotent() => return Ok(answer),
                Tried::Refused(answer, why) => {
                    attempts.push(why);
                    last_answer = Some(answer);
                }
                Tried::Failed(why, Sent::Maybe) if !request.is_idempotent() => {
                    attempts.push(why);
                    break;
                }
                Tried::Failed(why, _) => attempts.push(why),
                Tried::Fatal(error) => return Err(error),
            }
        }
        if let Some(answer) = last_answer {
            return Ok(answer);
        }
        if let Some(retry_after) = breaker_waits.iter().min().filter(|_| breaker_waits.len() == attempts.len()) {
            let host = self.instances[0].host.clone();
            return Err(UpstreamError::Refused { host, refusal: Refusal::BreakerOpen { retry_after: *retry_after } });
        }
        Err(UpstreamError::AllFailed { pool: self.name.clone(), attempts })
    }

    /// Records a failure of `attempt` (at its head or in its body): a new
    /// failure raises the instance's penalty, drops its idle connections and
    /// moves on the requests waiting for its heads.
    fn penalise(&self, attempt: Attempt) {
        let jitter = self.shared.random_jitter();
        let raised = self.rules().failed(attempt, Instant::now(), jitter);
        let Some(penalty) = raised else { return };
        let instance = &self.instances[attempt.instance];
        tracing::warn!(pool = self.name, instance = instance.url, ?penalty, "upstream instance penalised");
        let fresh = self.shared.pooled_client();
        *instance.client.lock() = fresh;
        instance.penalties.send_modify(|count| *count += 1);
    }

    fn end(&self, attempt: Attempt) {
        self.rules().end(attempt);
    }
}
