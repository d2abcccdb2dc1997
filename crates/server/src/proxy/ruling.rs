//! The fleet's policy asked about a release or a listing outside a
//! client's request: `pkgproxyctl policy why` (a release, its publish time
//! learnt as a client's request of one of its artifacts learns it),
//! `explain` and `check` (what is held alone: they fetch nothing). Each is
//! judged as the request path judges it (`gate.rs`), by the same side's
//! gating role and the policy in force, so what they say is what a client
//! would be told; none of it is counted as a client's refusal.

use std::sync::Arc;

use bytes::Bytes;
use pkgproxy_policy::{Ecosystem, Policy, Published, Release, Verdict};
use pkgproxy_sides::role::{Gated, Gating, Judge, Judged, ReleaseName};
use pkgproxy_sides::route::ROUTES;
use pkgproxy_sides::{CachedRequest, Side};

use super::cached::fetch_own;
use super::gate::{published, METADATA_LIMIT};
use crate::state::State;

/// What the policy says of one release now.
#[derive(Debug, Clone)]
pub struct Ruling {
    /// The release's ecosystem.
    pub ecosystem: Ecosystem,
    /// Its package, in the ecosystem's normal form.
    pub name: String,
    /// Its version.
    pub version: String,
    /// When it was published, as far as was learnt.
    pub published: Published,
    /// The verdict.
    pub verdict: Verdict,
}

impl Ruling {
    fn of(ecosystem: Ecosystem, release: &ReleaseName, published: Published, policy: &Policy, state: &State) -> Ruling {
        let named = Release { ecosystem, name: &release.name, version: &release.version };
        let verdict = policy.judge(&named, published, state.clock.now());
        Ruling { ecosystem, name: release.name.clone(), version: release.version.clone(), published, verdict }
    }

    /// The release, as the policy names it (`npm:left-pad@1.3.1`).
    pub fn release(&self) -> Release<'_> {
        Release { ecosystem: self.ecosystem, name: &self.name, version: &self.version }
    }

    /// The release and why it is refused (`npm:x@1.0.1 blocked by min_age
    /// until ...`), if it is.
    pub fn blocked(&self) -> Option<String> {
        match &self.verdict {
            Verdict::Blocked(blocked) => Some(format!("{} {}", self.release(), blocked.summary())),
            _ => None,
        }
    }
}

/// Why the policy does not judge a release at all.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NotJudged {
    /// No `[policy]`, and no malicious-package records taken in.
    NoPolicy,
    /// The side's registries publish no times: the policy judges none of
    /// its releases.
    SideNotGated,
    /// The side cannot name an artifact of that name and version.
    NoSuchRelease,
    /// Its registry is configured with `policy = false`.
    RegistryExempt,
}

impl NotJudged {
    /// Why, for people.
    pub fn as_str(self) -> &'static str {
        match self {
            NotJudged::NoPolicy => "no policy is in force",
            NotJudged::SideNotGated => "the policy judges npm, pypi, cargo, go, maven and rpm only",
            NotJudged::NoSuchRelease => "that is not a name and version of this side's releases",
            NotJudged::RegistryExempt => "its registry is configured with policy = false",
        }
    }
}

/// What the policy says now of `name` at `version` on `side`, judged as a
/// client's request of one of its artifacts ([`Gating::release_request`])
/// would be: its publish time read from held metadata, else fetched
/// through the cache for pkgproxy.
pub async fn why(state: &Arc<State>, side: &dyn Side, name: &str, version: &str) -> Result<Ruling, NotJudged> {
    let policy = state.gate.policy().ok_or(NotJudged::NoPolicy)?;
    let gating = side.roles().gating.ok_or(NotJudged::SideNotGated)?;
    let ecosystem = Ecosystem::of_side(side.id().as_str()).ok_or(NotJudged::SideNotGated)?;
    let request = gating.release_request(name, version).ok_or(NotJudged::NoSuchRelease)?;
    let Some(Gated::Artifact { release, times_from }) = gating.gated(&request) else {
        return Err(NotJudged::RegistryExempt);
    };
    let mount = ROUTES.iter().find(|(_, id)| *id == side.id()).map(|(mount, _)| *mount);
    let published = match (policy.needs_times(), mount) {
        (false, _) => Published::NotNeeded,
        (true, Some(mount)) => published(state, side, gating, &release, *times_from, mount, fetch_own).await,
        (true, None) => Published::Unknown,
    };
    Ok(Ruling::of(ecosystem, &release, published, &policy, state))
}

/// What the policy says now of `request`, a client's, from what is held
/// alone (nothing is fetched: blocking): a publish time the held metadata
/// does not give counts as `missing` (`Unknown` for what is served with
/// the network gone; `NotNeeded` where a fetch would learn it first, so
/// that only what needs no time is said). `None`: the policy judges no
/// artifact there.
pub fn held(state: &State, side: &dyn Side, request: &CachedRequest, missing: Published) -> Option<Ruling> {
    let policy = state.gate.policy()?;
    let gating = side.roles().gating?;
    let ecosystem = Ecosystem::of_side(side.id().as_str())?;
    let Gated::Artifact { release, times_from } = gating.gated(request)? else { return None };
    let published = match policy.needs_times() {
        false => Published::NotNeeded,
        true => held_times(state, gating, &times_from)
            .and_then(|times| times.get(&release.timed_as).copied())
            .map_or(missing, Published::At),
    };
    Some(Ruling::of(ecosystem, &release, published, &policy, state))
}

/// The times the held answer to `source` gives, parsed once per body.
fn held_times(state: &State, gating: &dyn Gating, source: &CachedRequest) -> Option<Arc<pkgproxy_sides::role::Times>> {
    let entry = state.cache.lookup(&source.key)?;
    if let Some(times) = state.gate.held_times(&source.key, &entry.sha256) {
        return Some(times);
    }
    let body = state.cache.read_small(&source.key, METADATA_LIMIT)?;
    let times = Arc::new(gating.times(source, &body));
    state.gate.keep_times(&source.key, &entry.sha256, Arc::clone(&times));
    Some(times)
}

/// The releases the policy takes out of the held listing `request` asks
/// for, as it would be served now, each with its rule (`npm:x@1.0.1
/// blocked by min_age until ...`); what a filter would fetch is read from
/// what is held (blocking). Empty when nothing is taken out, or the
/// listing is not held.
pub fn withheld(state: &State, side: &dyn Side, request: &CachedRequest) -> Vec<String> {
    let (Some(policy), Some(gating)) = (state.gate.policy(), side.roles().gating) else { return Vec::new() };
    let Some(ecosystem) = Ecosystem::of_side(side.id().as_str()) else { return Vec::new() };
    if !matches!(gating.gated(request), Some(Gated::Listing)) {
        return Vec::new();
    }
    let Some(body) = state.cache.read_small(&request.key, METADATA_LIMIT) else { return Vec::new() };
    let mut noting = Noting { policy, ecosystem, state, withheld: Vec::new() };
    let _ = gating.filtered(request, &body, &mut noting);
    noting.withheld
}

/// The policy as a listing's filter asks it, noting what it refuses, the
/// metadata it asks for read from what is held.
struct Noting<'s> {
    policy: Arc<Policy>,
    ecosystem: Ecosystem,
    state: &'s State,
    withheld: Vec<String>,
}

impl Judge for Noting<'_> {
    fn needs_times(&self) -> bool {
        self.policy.needs_times()
    }

    fn judge(&mut self, name: &str, version: &str, published: Option<std::time::SystemTime>) -> Judged {
        let release = Release { ecosystem: self.ecosystem, name, version };
        let published = match (self.policy.needs_times(), published) {
            (false, _) => Published::NotNeeded,
            (true, Some(at)) => Published::At(at),
            (true, None) => Published::Unknown,
        };
        match self.policy.judge(&release, published, self.state.clock.now()) {
            Verdict::Blocked(blocked) => {
                self.withheld.push(format!("{release} {}", blocked.summary()));
                Judged::Blocked(blocked.line(&release))
            }
            _ => Judged::Served,
        }
    }

    fn fetch(&mut self, requests: Vec<CachedRequest>) -> Vec<Option<Bytes>> {
        let held = |request: &CachedRequest| self.state.cache.read_small(&request.key, METADATA_LIMIT).map(Bytes::from);
        requests.iter().map(held).collect()
    }
}
