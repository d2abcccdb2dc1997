//! What the control sockets say of the fleet's policy (`[policy]`): the
//! rules in force and what they refused (`pkgproxyctl policy`), whether
//! one release is served and why (`pkgproxyctl policy why`), and the part
//! of the status page and of `/metrics` that shows it.

use serde::{Deserialize, Serialize};

/// The answer of [`crate::POLICY_PATH`].
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct PolicyReport {
    /// Whether a policy is in force (`[policy]`, or malicious-package
    /// records a bundle brought); without one every release is served as
    /// its registry gives it.
    pub in_force: bool,
    /// The rules in force, one per line, for people.
    pub rules: Vec<String>,
    /// Refusals since start, by side and rule.
    pub blocked: Vec<BlockedCount>,
    /// The last releases refused, the newest first.
    pub recent: Vec<BlockedRelease>,
}

/// How many requests the policy refused, of one side, by one rule.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct BlockedCount {
    /// The side (`npm`, `pypi`, `cargo`, `go`).
    pub side: String,
    /// The rule: `malicious`, `not_after`, `min_age` or `unknown_time`.
    pub rule: String,
    /// Requests refused.
    pub count: u64,
}

/// A release the policy refused to a client.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct BlockedRelease {
    /// When (Unix seconds, by pkgproxy's clock).
    pub at: u64,
    /// The side.
    pub side: String,
    /// The release (`npm:left-pad@1.3.1`).
    pub release: String,
    /// The rule's name.
    pub rule: String,
    /// Why, in words (`published ..., min_age 3d; allowed from ...`).
    pub because: String,
}

/// The query parameters of [`crate::POLICY_WHY_PATH`]: `side`, `name`,
/// `version`.
pub const POLICY_WHY_QUERY: [&str; 3] = ["side", "name", "version"];

/// The answer of [`crate::POLICY_WHY_PATH`]: whether a release is served
/// now, and why.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PolicyWhy {
    /// The release, as the policy names it (`npm:left-pad@1.3.1`).
    pub release: String,
    /// Whether a client is served it.
    pub served: bool,
    /// Why, in a few words: `blocked by min_age until ...`, `blocked by
    /// MAL-2025-1234`, `allowed by allow entry npm:x@1.0.1`, `served: no
    /// rule refuses it`, `served: no policy is in force`.
    pub why: String,
    /// The rule that decided, when one did (`min_age`, `malicious`,
    /// `not_after`, `unknown_time`, `allow`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rule: Option<String>,
    /// When it was published (Unix seconds), when that was learnt.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub published: Option<u64>,
    /// When it will be served by itself (`min_age`), in Unix seconds.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub until: Option<u64>,
    /// The line a client asking for it is told, when it is refused.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub line: Option<String>,
}

/// The policy as the status page shows it (open to every client of the
/// proxy: the rules as words, no paths).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct StatusPolicy {
    /// The rules in force, one per line.
    pub rules: Vec<String>,
    /// The last releases refused, the newest first.
    pub recent: Vec<BlockedRelease>,
}
