//! The fleet's policy on the control sockets: the rules in force and what
//! they refused ([`pkgproxy_control::POLICY_PATH`]), and whether one
//! release is served now and why ([`pkgproxy_control::POLICY_WHY_PATH`]),
//! judged as a client's request of it would be (`proxy/ruling.rs`).

use std::sync::Arc;
use std::time::{SystemTime, UNIX_EPOCH};

use pkgproxy_control::{PolicyReport, PolicyWhy};
use pkgproxy_policy::{Published, Verdict};
use pkgproxy_sides::SideId;

use super::Role;
use crate::proxy::ruling::{self, NotJudged, Ruling};
use crate::state::State;

/// The rules in force, the refusals counted by side and rule, and the last
/// releases refused; on the stats socket, without those asked for in a
/// client's own space.
pub fn report(state: &State, role: Role) -> PolicyReport {
    let policy = state.gate.policy();
    PolicyReport {
        in_force: policy.is_some(),
        rules: policy.map(|policy| policy.describe()).unwrap_or_default(),
        blocked: state.gate.blocked_counts(),
        recent: state.gate.recent_blocked(role == Role::Admin),
    }
}

/// Whether `name` at `version` of the side named `side` is served now, and
/// why. `Err`: what was asked names no release.
pub async fn why(state: &Arc<State>, side: &str, name: &str, version: &str) -> Result<PolicyWhy, String> {
    let Some(id) = SideId::from_name(side) else { return Err(format!("no side is called {side:?}")) };
    let asked = format!("{side}:{name}@{version}");
    match ruling::why(state, state.sides.get(id), name, version).await {
        Ok(ruling) => Ok(told(&ruling)),
        Err(NotJudged::NoSuchRelease) => Err(format!("{asked}: {}", NotJudged::NoSuchRelease.as_str())),
        Err(not_judged) => Ok(PolicyWhy {
            release: asked,
            served: true,
            why: format!("served: {}", not_judged.as_str()),
            rule: None,
            published: None,
            until: None,
            line: None,
        }),
    }
}

/// What `ruling` says, as `policy why` tells it.
fn told(ruling: &Ruling) -> PolicyWhy {
    let published = match ruling.published {
        Published::At(at) => Some(unix(at)),
        Published::Unknown | Published::NotNeeded => None,
    };
    let release = ruling.release();
    let told = PolicyWhy {
        release: release.to_string(),
        served: ruling.verdict.serves(),
        why: String::new(),
        rule: None,
        published,
        until: None,
        line: None,
    };
    match &ruling.verdict {
        Verdict::Served => PolicyWhy { why: "served: no rule refuses it".to_owned(), ..told },
        Verdict::Allowed(entry) => {
            PolicyWhy { why: format!("served: allowed by allow entry {entry}"), rule: Some("allow".to_owned()), ..told }
        }
        Verdict::Blocked(blocked) => PolicyWhy {
            why: blocked.summary(),
            rule: Some(blocked.rule.name().to_owned()),
            until: blocked.until.map(unix),
            line: Some(blocked.line(&release)),
            ..told
        },
    }
}

fn unix(at: SystemTime) -> u64 {
    at.duration_since(UNIX_EPOCH).map_or(0, |since| since.as_secs())
}
