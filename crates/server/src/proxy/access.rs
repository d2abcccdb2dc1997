//! Cached content that not every client may read (a private repository's,
//! or content the upstream has not yet said a name holds): before any of it
//! is served, the upstream confirms that this client may read it, with a
//! `HEAD` carrying the request's authorisation. A confirmation is taken
//! for its grant's time ([`crate::kept::grants`]); the side is told, so it can
//! record what no longer needs confirming. The upstream's refusal reaches
//! the client in the side's words with the upstream's challenge, so the
//! client can answer it with its own credentials.
//!
//! Offline, nothing can be confirmed: such content is refused, unless the
//! side lets a credential confirmed before be served.

use std::sync::Arc;

use http::header::{HeaderValue, USER_AGENT, WWW_AUTHENTICATE};
use http::{HeaderMap, StatusCode};
use pkgproxy_cache::PassedAnswer;
use pkgproxy_sides::{Access, CachedRequest, Failure, Refusal, Side};

use super::fetching;
use super::outcome::{Failed, Outcome};
use crate::context::Exchange;
use crate::state::State;

/// Whether `request`'s client may be served its content: `Err` with what
/// the client is told instead.
pub async fn confirmed(
    state: &Arc<State>,
    exchange: &Exchange<'_>,
    side: &dyn Side,
    request: &CachedRequest,
) -> Result<(), Outcome> {
    let Some(access) = request.access.as_deref() else { return Ok(()) };
    let now = tokio::time::Instant::now().into_std();
    let within = match (state.upstream.switch.frozen(), access.offline) {
        (false, _) => Some(access.lasting),
        (true, true) => None,
        (true, false) => return Err(Failed::Offline.into()),
    };
    if state.kept.grants.holds(&access.grant, within, now) {
        return Ok(());
    }
    // Boxed: a hit granted already would otherwise carry (and copy) the
    // state of a request upstream.
    Box::pin(asked_upstream(state, exchange, side, request, access, now)).await
}

/// Whether the upstream lets the client of `exchange` read `request`,
/// asked with its credentials (`access`); remembered as a grant when it
/// does.
async fn asked_upstream(
    state: &Arc<State>,
    exchange: &Exchange<'_>,
    side: &dyn Side,
    request: &CachedRequest,
    access: &Access,
    now: std::time::Instant,
) -> Result<(), Outcome> {
    let agent = exchange.headers.get(USER_AGENT).cloned();
    let asked = match &access.confirmed_at {
        Some(origin) => &CachedRequest { origin: origin.clone(), ..request.clone() },
        None => request,
    };
    let (status, headers) = fetching::head(state, asked, agent).await.map_err(|error| Failed::of_fetch(&error))?;
    if status.is_success() || status.is_redirection() {
        granted(state, side, request).await;
        return Ok(());
    }
    Err(match status {
        StatusCode::UNAUTHORIZED | StatusCode::FORBIDDEN | StatusCode::NOT_FOUND => {
            let passed = Arc::new(PassedAnswer { status, headers: listed(&headers), body: Default::default() });
            if let Some(remembering) = side.roles().remembering {
                remembering.remember(request, &passed, now);
            }
            denied(side, access, status, &headers)
        }
        _ => Failed::rate_limited(status, &headers, state.clock.now())
            .unwrap_or_else(|| {
                Failed::Upstream(format!("the upstream answered {status} when asked whether this client may read it"))
            })
            .into(),
    })
}

/// The upstream confirmed that `request`'s client may read its content, or
/// served it to the fetch the request started: taken for the grant's time,
/// and the side records it.
pub async fn granted(state: &Arc<State>, side: &dyn Side, request: &CachedRequest) {
    let Some(access) = request.access.as_deref() else { return };
    state.kept.grants.confirm(&access.grant, tokio::time::Instant::now().into_std());
    let (shared, request) = (Arc::clone(state), request.clone());
    let recorded = tokio::task::spawn_blocking(move || {
        if let Some(private) = shared.sides.get(request.side).roles().private {
            private.granted(&request);
        }
    });
    let recorded = recorded.await;
    if recorded.is_err() {
        tracing::warn!(side = ?side.id(), "recording an access the upstream confirmed stopped");
    }
}

/// The upstream's refusal, in the side's words, with its challenge.
fn denied(side: &dyn Side, access: &Access, status: StatusCode, headers: &HeaderMap) -> Outcome {
    let (code, reason) = match status {
        StatusCode::UNAUTHORIZED => ("UNAUTHORIZED", "the upstream wants this client's own credentials for it"),
        StatusCode::FORBIDDEN => ("DENIED", "the upstream does not let this client read it"),
        _ => (access.unknown_code, "the upstream does not hold it under this name"),
    };
    let refusal = Refusal::new(status, reason).with_code(code);
    let mut answer = side.failure_answer(&Failure::Refused(&refusal));
    for challenge in headers.get_all(WWW_AUTHENTICATE) {
        answer.headers.append(WWW_AUTHENTICATE, challenge.clone());
    }
    Outcome::Local(answer)
}

/// `headers` as a passed answer lists them.
pub(super) fn listed(headers: &HeaderMap) -> Vec<(String, String)> {
    let text = |value: &HeaderValue| value.to_str().ok().map(str::to_string);
    headers.iter().filter_map(|(name, value)| Some((name.to_string(), text(value)?))).collect()
}
