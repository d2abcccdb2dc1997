//! What is done to an answer of the cache path for its client, in one place
//! and in this order:
//!
//! 1. the side's rewrite (the stored bytes stay the upstream's), then,
//!    when neither the cache nor the upstream could answer, the side's
//!    fallback, if it has one (an answer it writes itself, saying why);
//! 2. the headers the side puts on every answer, then, on an answer that
//!    carries the content (`2xx`, `304`), those describing it;
//! 3. why it is not a plain hit, unless it says so already (a stale answer
//!    says why the upstream could not confirm it);
//! 4. which upstream answered, for the access log.
//!
//! The headers saying how it was served and why are written later, once,
//! from what is noted here ([`super::outcome::respond`]).

use std::sync::Arc;

use http::{HeaderMap, StatusCode};
use pkgproxy_sides::{CachedRequest, Fallback, Rewrite, Side};

use super::held::Offline;
use super::outcome::Outcome;
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
        let outcome = match self.rewrite.take() {
            Some(rewrite) => rewritten(side, &rewrite, exchange, outcome).await,
            None => outcome,
        };
        // After the rewrite: the fallback is the side's own, not an
        // upstream's to rewrite.
        let outcome = match (outcome, self.fallback.take()) {
            (Outcome::Failed(failed), Some(fallback)) if !failed.is_refusal() => {
                let state = Arc::clone(state);
                let made = tokio::task::spawn_blocking(move || fallback.answer(&Offline(&state))).await;
                match made {
                    Ok(Some(answer)) => {
                        let mut response = super::outcome::local(answer);
                        response.extensions_mut().insert(Reason::from(&failed));
                        Outcome::Answered(response)
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
        let Outcome::Answered(mut response) = outcome else { return outcome };
        let carries_content = response.status().is_success() || response.status() == StatusCode::NOT_MODIFIED;
        replace(response.headers_mut(), self.reply);
        if carries_content {
            replace(response.headers_mut(), self.content);
        }
        if let (Some(reason), None) = (self.reason, response.extensions().get::<Reason>()) {
            response.extensions_mut().insert(reason);
        }
        if let Some(by) = self.answered_by {
            response.extensions_mut().insert(pkgproxy_cache::AnsweredBy(by));
        }
        Outcome::Answered(response)
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
