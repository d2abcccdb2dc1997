//! The recording role: answers to forwarded requests (snap's store
//! actions) kept so that they can be replayed when the upstream cannot be
//! asked, carried in bundles, and matched to what a client accepts. Every
//! hook is needed for replay to hold together, so all are written.

use crate::decision::{Acceptance, LocalAnswer, Record};
use crate::failure::Failure;

/// Answers to forwarded requests, kept for replay.
pub trait Recording: Send + Sync {
    /// Keeps what `record` asks for of a forwarded request whose body was
    /// `sent` and whose successful answer is `answer`. Blocking.
    fn record(&self, record: &Record, sent: &[u8], answer: &[u8]);

    /// The answer to a forwarded request whose body was `sent`, from what
    /// `record` kept, when the upstream could not answer as `failure` says;
    /// `None`: nothing to replay, the failure stands. Blocking.
    fn replay(&self, record: &Record, sent: &[u8], failure: &Failure<'_>) -> Option<LocalAnswer>;

    /// Whether a cached body starting with `head` answers a request that
    /// `accepts` it (a snap assertion no newer than the client reads).
    fn accepts(&self, accepts: Acceptance, head: &[u8]) -> bool;

    /// Where the side keeps its records (the prefix of their keys).
    fn record_prefix(&self) -> &'static str;

    /// The requests (paths below the side's mount) whose answers the
    /// records under `keys` name: what a bundle carries with them.
    fn named_by_records(&self, keys: &[String]) -> Vec<String>;

    /// Keeps `body`, which another pkgproxy recorded under `key` (an answer
    /// replayed offline, carried in a bundle), once the side has read it
    /// as one. Blocking.
    fn take_record(&self, key: &str, body: &[u8]) -> Result<(), String>;
}
