//! What is done to an answer of the cache path for its client, in one place
//! and in this order:
//!
//! 1. on a listing, the fleet's policy: what it refuses taken out;
//! 2. the side's rewrite (the stored bytes stay the upstream's), then,
//!    when neither the cache nor the upstream could answer, the side's
//!    fallback, if it has one (an answer it writes itself, saying why);
//! 3. the headers the side puts on every answer, then, on an answer that
//!    carries the content (`2xx`, `304`), those describing it;
//! 4. why it is not a plain hit, unless it says so already (a stale answer
//!    says why the upstream could not confirm it);
//! 5. which upstream answered, for the access log.
//!
//! What is noted here goes on the [`super::outcome::Answer`]'s own fields;
//! the headers saying how it was served and why are written later, once,
//! from them ([`super::outcome::Answer::into_response`]).

use std::sync::Arc;

use http::{HeaderMap, StatusCode};
use pkgproxy_sides::{CachedRequest, Fallback, Rewrite, Side};

use super::for_sides::CacheForSides;
use super::gate::FetchOwn;
use super::outcome::{Answer, Outcome};
use super::reason::Reason;
use super::rewrite::rewritten;
use crate::context::Exchange;
use crate::state::State;

/// What is done to an answer after the cache.
#[derive(Debug, Default)]
pub struct Finish {
    fallback: Option<Arc<dyn Fallback>>,
    rewrite: Option<Rewrite>,
    reply: HeaderMap,
    content: HeaderMap,
    reason: Option<Reason>,
    answered_by: Option<Arc<str>>,
    /// The listing request whose answers the fleet's policy filters, and
    /// how the metadata its filter reads is fetched.
    listing: Option<(CachedRequest, FetchOwn)>,
}

impl Finish {
    /// What `request` asks to be done to its answers.
    pub fn of(request: &CachedRequest) -> Finish {
        Finish {
            fallback: request.reply.fallback.clone(),
            rewrite: request.reply.rewrite.clone(),
            reply: request.reply.headers.clone(),
            content: request.reply.content_headers.clone(),
            ..Finish::default()
        }
    }

    /// Filters the answer, a listing of `request`, by the fleet's policy,
    /// before anything else is done to it, fetching what the filter reads
    /// with `fetch`.
    pub fn filtered_as(self, request: CachedRequest, fetch: FetchOwn) -> Finish {
        Finish { listing: Some((request, fetch)), ..self }
    }

    /// Says `reason` unless the answer says why already.
    pub fn because(self, reason: Option<Reason>) -> Finish {
        Finish { reason, ..self }
    }

    /// Notes the upstream that answered the fetch, when one did.
    pub fn answered_by(self, answered_by: Option<Arc<str>>) -> Finish {
        Finish { answered_by, ..self }
    }

    /// `outcome`, finished for the client of `exchange`.
    pub async fn apply(
        mut self,
        state: &Arc<State>,
        side: &dyn Side,
        exchange: &Exchange<'_>,
        outcome: Outcome,
    ) -> Outcome {
        let outcome = match self.listing.take() {
            // Boxed, as the rewrite: a plain hit's task would otherwise
            // carry (and copy) their state on every request.
            Some((listing, fetch)) => {
                Box::pin(super::gate::filtered(state, exchange, side, &listing, fetch, outcome)).await
            }
            None => outcome,
        };
        let outcome = match self.rewrite.take() {
            Some(rewrite) => Box::pin(rewritten(side, &rewrite, exchange, outcome)).await,
            None => outcome,
        };
        // After the rewrite: the fallback is the side's own, not an
        // upstream's to rewrite.
        let outcome = match (outcome, self.fallback.take()) {
            (Outcome::Failed(failed), Some(fallback)) if !failed.is_refusal() => {
                let state = Arc::clone(state);
                let made = tokio::task::spawn_blocking(move || fallback.answer(&CacheForSides(&state))).await;
                match made {
                    Ok(Some(answer)) => {
                        let reason = Some(Reason::from(&failed));
                        Outcome::Answered(Answer { reason, ..Answer::new(super::outcome::local(answer)) })
                    }
                    _ => Outcome::Failed(failed),
                }
            }
            (outcome, _) => outcome,
        };
        self.noted(outcome)
    }

    /// `outcome` with all but the rewrite: the side's headers, why, and
    /// who answered.
    pub fn noted(self, outcome: Outcome) -> Outcome {
        let Outcome::Answered(mut answer) = outcome else { return outcome };
        let status = answer.status();
        let carries_content = status.is_success() || status == StatusCode::NOT_MODIFIED;
        replace(answer.response.headers_mut(), self.reply);
        if carries_content {
            replace(answer.response.headers_mut(), self.content);
        }
        answer.reason = answer.reason.or(self.reason);
        if self.answered_by.is_some() {
            answer.answered_by = self.answered_by;
        }
        Outcome::Answered(answer)
    }
}

/// `headers` with each header of `set`, in place of any of that name.
fn replace(headers: &mut HeaderMap, set: HeaderMap) {
    for name in set.keys() {
        headers.remove(name);
    }
    for (name, value) in &set {
        headers.append(name, value.clone());
    }
}
