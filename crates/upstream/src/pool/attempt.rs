//! One attempt of a request on one instance: send, wait for the head within
//! the attempt's limit (or until the instance is penalised by another
//! request), retry once on a fresh connection after a stale pooled one, and
//! report the outcome to the rules and to the host's breaker.

use std::sync::Arc;
use std::time::Duration;

use http::StatusCode;
use hyper::body::Incoming;
use tokio::time::Instant;

use super::{Instance, Pool, PoolAnswer, PoolBody, PoolRequest};
use crate::connect::ConnectionUses;
use crate::counters::UpstreamCounter;
use crate::error::UpstreamError;
use crate::offline::Ticket;
use crate::pool::payload::AttemptBody;
use crate::pool::shared::Client;

/// How an attempt ended.
pub(super) enum Tried {
    /// An answer to pass on.
    Answered(PoolAnswer),
    /// An answer that sends the request on to the next instance (a `503`,
    /// or a `404` another mirror may not give), but that the client gets if
    /// this was the last attempt.
    Refused(PoolAnswer, String),
    /// No answer; says what happened, and whether the request may have
    /// reached the instance.
    Failed(String, Sent),
    /// The request itself cannot be sent (a forbidden target): no other
    /// instance would help.
    Fatal(UpstreamError),
}

/// Whether a failed attempt may have delivered its request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Sent {
    /// No connection was made: sending it elsewhere is safe for any method.
    Nothing,
    /// It may have arrived and been acted on.
    Maybe,
}

/// How long an attempt waits for its head, and what running out means.
#[derive(Debug, Clone, Copy)]
pub(super) enum Wait {
    /// The attempt's own limit: running out faults the instance.
    Own(Duration),
    /// What is left of the request's deadline, shorter than the attempt's
    /// own limit: running out says nothing of the instance.
    Deadline(Duration),
}

impl Wait {
    fn limit(self) -> Duration {
        match self {
            Wait::Own(limit) | Wait::Deadline(limit) => limit,
        }
    }
}

/// Whether another instance is left for the request to try.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Elsewhere {
    /// Yes: a penalty of this instance by another request ends the wait.
    Untried,
    /// No: this is the last one, worth waiting for.
    Exhausted,
}

/// What ended the wait for a head.
enum Waited {
    Head(Result<http::Response<Incoming>, hyper_util::client::legacy::Error>),
    TimedOut,
    Penalised,
    /// The request's streamed body stopped passing.
    BodyStalled,
}

/// Statuses that fail an attempt: the instance is overloaded or broken, and
/// another instance may well answer.
fn fails(status: StatusCode) -> bool {
    matches!(status.as_u16(), 429 | 500 | 502 | 503 | 504)
}

/// Why an answer of `status` to `request` cannot be passed on as the
/// upstream's word, when it cannot: an interim status (a `101` would
/// leave the client's connection, and the requests pipelined on it, to a
/// protocol it never asked for), a status HTTP does not have, or a `304`
/// to a request that asked nothing conditional.
fn not_final(status: StatusCode, request: &PoolRequest) -> Option<String> {
    use http::header::{IF_MATCH, IF_MODIFIED_SINCE, IF_NONE_MATCH, IF_RANGE, IF_UNMODIFIED_SINCE};
    let conditional = [IF_NONE_MATCH, IF_MODIFIED_SINCE, IF_MATCH, IF_UNMODIFIED_SINCE, IF_RANGE]
        .iter()
        .any(|name| request.headers.contains_key(name));
    match status.as_u16() {
        100..=199 => Some(format!("answered {}, an interim status, as its answer", status.as_u16())),
        600.. => Some(format!("answered {}, not an HTTP status", status.as_u16())),
        304 if !conditional => Some("answered 304 to a request that was not conditional".to_string()),
        _ => None,
    }
}

/// Statuses that say the instance does not have the file, which another
/// may have (a mirror lagging behind a sync): the request moves on, but the
/// instance is not at fault.
fn lacks(status: StatusCode) -> bool {
    matches!(status, StatusCode::NOT_FOUND | StatusCode::GONE)
}

impl Pool {
    /// Tries `request` on instance `index`, waiting for its head as `wait`
    /// says.
    pub(super) async fn attempt(
        self: &Arc<Self>,
        index: usize,
        request: &PoolRequest,
        wait: Wait,
        elsewhere: Elsewhere,
        ticket: Ticket,
    ) -> Tried {
        let instance = &self.instances[index];
        let uri = match format!("{}{}", instance.url, request.path).parse::<http::Uri>() {
            Ok(uri) => uri,
            Err(_) => {
                let uri = format!("{}{}", instance.url, request.path);
                return Tried::Fatal(UpstreamError::BadTarget { uri, reason: "not a valid URL" });
            }
        };
        let request = &instance.authorised(request);
        let started = Instant::now();
        let attempt = self.rules().start(index, started);
        match self.wait_for_head(instance, request, &uri, wait.limit(), elsewhere).await {
            Waited::Head(Ok(response)) => {
                if let Some(why) = not_final(response.status(), request) {
                    // A broken instance: its answer is not passed on.
                    ticket.failed(None);
                    self.penalise(attempt);
                    self.end(attempt);
                    return Tried::Failed(format!("{}: {why}", instance.url), Sent::Maybe);
                }
                if let Some(uses) = response.extensions().get::<ConnectionUses>() {
                    uses.answered();
                }
                ticket.answered_with(response.status(), response.headers());
                let status = response.status();
                let failed = fails(status);
                if failed {
                    self.penalise(attempt);
                } else {
                    self.rules().succeeded(attempt, started.elapsed());
                }
                let idle = self.shared.settings.timeouts.body_idle;
                let response = response.map(|body| PoolBody::new(body, Arc::clone(self), attempt, idle, failed));
                let answer = PoolAnswer { response, instance: index };
                match failed || lacks(status) {
                    true => Tried::Refused(answer, format!("{}: answered {status}", instance.url)),
                    false => Tried::Answered(answer),
                }
            }
            Waited::Head(Err(error)) => {
                let sent = if error.is_connect() { Sent::Nothing } else { Sent::Maybe };
                let error = crate::error::from_client(instance.host.clone(), error);
                if error.is_forbidden() {
                    self.end(attempt);
                    return Tried::Fatal(error);
                }
                ticket.failed(None);
                self.penalise(attempt);
                self.end(attempt);
                Tried::Failed(format!("{}: {error}", instance.url), sent)
            }
            Waited::TimedOut => {
                ticket.failed(None);
                if let Wait::Own(_) = wait {
                    self.penalise(attempt);
                }
                self.end(attempt);
                Tried::Failed(format!("{}: no answer within {:?}", instance.url, wait.limit()), Sent::Maybe)
            }
            Waited::Penalised => {
                // Another request's failure penalised the instance: this
                // attempt moves on, reporting nothing new.
                drop(ticket);
                self.end(attempt);
                Tried::Failed(format!("{}: penalised while waiting for its answer", instance.url), Sent::Maybe)
            }
            Waited::BodyStalled => {
                // The client, or the instance reading it, stopped: which
                // is not known, so nothing is held against the instance.
                drop(ticket);
                self.end(attempt);
                let idle = self.shared.settings.timeouts.body_idle;
                Tried::Failed(format!("{}: the request body stopped passing for {idle:?}", instance.url), Sent::Maybe)
            }
        }
    }

    async fn wait_for_head(
        &self,
        instance: &Instance,
        request: &PoolRequest,
        uri: &http::Uri,
        limit: Duration,
        elsewhere: Elsewhere,
    ) -> Waited {
        let mut penalties = instance.penalties.subscribe();
        penalties.borrow_and_update();
        let client = instance.client.lock().clone();
        let head = self.exchange(&client, &instance.fresh, request, uri);
        // The limit runs once the body has gone: a streamed one takes as
        // long as its client sends it.
        let timer = async {
            match request.body.sent(self.shared.settings.timeouts.body_idle).await {
                Ok(()) => {
                    tokio::time::sleep(limit).await;
                    Waited::TimedOut
                }
                Err(_) => Waited::BodyStalled,
            }
        };
        let penalised = async {
            match elsewhere {
                Elsewhere::Untried => penalties.changed().await.ok(),
                Elsewhere::Exhausted => std::future::pending().await,
            }
        };
        tokio::select! {
            head = head => Waited::Head(head),
            waited = timer => waited,
            Some(()) = penalised => Waited::Penalised,
        }
    }

    /// Sends the request on a pooled connection; if that fails on a
    /// connection that had carried answers before (the upstream closed it
    /// while idle), sends it once more on a fresh connection, unless it is
    /// not idempotent.
    async fn exchange(
        &self,
        pooled: &Client,
        fresh: &Client,
        request: &PoolRequest,
        uri: &http::Uri,
    ) -> Result<http::Response<Incoming>, hyper_util::client::legacy::Error> {
        self.shared.counters.increment(UpstreamCounter::Requests);
        match pooled.request(build(request, uri)).await {
            Err(error) if was_reused(&error) && request.is_idempotent() => {
                tracing::debug!(%uri, %error, "a reused upstream connection failed; retrying on a fresh one");
                self.shared.counters.increment(UpstreamCounter::Requests);
                fresh.request(build(request, uri)).await
            }
            other => other,
        }
    }
}

fn was_reused(error: &hyper_util::client::legacy::Error) -> bool {
    let Some(connected) = error.connect_info() else { return false };
    let mut extensions = http::Extensions::new();
    connected.get_extras(&mut extensions);
    extensions.get::<ConnectionUses>().is_some_and(ConnectionUses::reused)
}

impl Instance {
    /// `request` as sent to this instance: with the credentials its
    /// configured URL carried, unless it has an authorization of its own
    /// (a client's, a token).
    fn authorised<'r>(&self, request: &'r PoolRequest) -> std::borrow::Cow<'r, PoolRequest> {
        match &self.authorization {
            Some(basic) if !request.headers.contains_key(http::header::AUTHORIZATION) => {
                let mut request = request.clone();
                request.headers.insert(http::header::AUTHORIZATION, basic.clone());
                std::borrow::Cow::Owned(request)
            }
            _ => std::borrow::Cow::Borrowed(request),
        }
    }
}

fn build(request: &PoolRequest, uri: &http::Uri) -> http::Request<AttemptBody> {
    let mut built = http::Request::new(request.body.for_attempt());
    *built.method_mut() = request.method.clone();
    *built.uri_mut() = uri.clone();
    *built.headers_mut() = request.headers.clone();
    built
}
