//! The fleet's gate: which releases pkgproxy serves, whatever client asks.
//!
//! A release (an ecosystem's package at one version) is judged by the
//! rules of `[policy]`, in this order:
//!
//! 1. `allow` (break-glass): a release it names is served, whatever else
//!    holds;
//! 2. a malicious-package record (an OSV record whose id starts `MAL-`)
//!    naming the release refuses it, whatever its age;
//! 3. `not_after`: a release published after that instant is refused (the
//!    line in the sand during a worm);
//! 4. `min_age`: a release younger than that is refused, until it is old
//!    enough;
//! 5. a release whose publish time cannot be learnt is refused when a time
//!    rule is set and `unknown_time = "refuse"` (fail closed).
//!
//! The rules know nothing of HTTP or the cache: the sides say which
//! release a request is of and when it was published; the request path
//! asks [`Policy::judge`] and refuses or filters.

mod allow;
mod ecosystem;
mod osv;
mod rules;
mod time;
mod version;

use std::time::{Duration, SystemTime};

pub use allow::{AllowError, Allowed};
pub use ecosystem::Ecosystem;
pub use osv::{Malicious, OsvError, OsvStats, INDEX_HEADER};
pub use rules::{Options, PolicyError, UnknownTime};
pub use time::{format_minute, parse_time};
pub use version::rpmvercmp;

/// The rules in force, validated, with the malicious-package records they
/// read.
#[derive(Debug)]
pub struct Policy {
    /// A release younger than this is refused.
    pub min_age: Option<Duration>,
    /// `min_age` as written, for messages.
    pub min_age_text: Option<String>,
    /// A release published after this is refused.
    pub not_after: Option<SystemTime>,
    /// What becomes of a release whose time is unknown.
    pub unknown_time: UnknownTime,
    /// Break-glass: what is served whatever the other rules say.
    pub allow: Vec<Allowed>,
    /// The OSV sources, as written.
    pub osv_sources: Vec<std::path::PathBuf>,
    /// The malicious-package records read from them.
    pub malicious: Malicious,
}

/// A release, as the policy names it.
#[derive(Debug, Clone, Copy)]
pub struct Release<'a> {
    /// Its ecosystem.
    pub ecosystem: Ecosystem,
    /// Its package's name, in the ecosystem's normal form.
    pub name: &'a str,
    /// Its version.
    pub version: &'a str,
}

impl std::fmt::Display for Release<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}:{}@{}", self.ecosystem, self.name, self.version)
    }
}

/// When a release was published, as far as pkgproxy could learn.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Published {
    /// At this instant, as its registry says.
    At(SystemTime),
    /// Not known: the registry gives none, or its metadata could not be had.
    Unknown,
    /// Not asked: no rule in force reads times.
    NotNeeded,
}

/// What the policy says of a release.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Verdict {
    /// Served: no rule refuses it.
    Served,
    /// Served by break-glass: `allow` names it (the entry, as written).
    Allowed(String),
    /// Refused.
    Blocked(Blocked),
}

impl Verdict {
    /// Whether the release is served.
    pub fn serves(&self) -> bool {
        !matches!(self, Verdict::Blocked(_))
    }
}

/// A refusal: the rule that refuses, and what it read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Blocked {
    /// The rule.
    pub rule: Rule,
    /// When the release was published, if known.
    pub published: Option<SystemTime>,
    /// When it will be served, if the rule lets it go by itself
    /// (`min_age`).
    pub until: Option<SystemTime>,
}

/// The rule that refused a release.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Rule {
    /// A malicious-package record: its id.
    Malicious(String),
    /// `not_after`.
    NotAfter(SystemTime),
    /// `min_age`, as written.
    MinAge(String),
    /// Its time is unknown and `unknown_time = "refuse"`.
    UnknownTime,
}

impl Rule {
    /// The rule's name, for counters and metrics: `malicious`,
    /// `not_after`, `min_age`, `unknown_time`.
    pub fn name(&self) -> &'static str {
        match self {
            Rule::Malicious(_) => "malicious",
            Rule::NotAfter(_) => "not_after",
            Rule::MinAge(_) => "min_age",
            Rule::UnknownTime => "unknown_time",
        }
    }
}

impl Blocked {
    /// What the rule says, in a few words: `published 2026-12-03T10:00Z,
    /// min_age 3d; allowed from 2026-12-06T10:00Z`, `named by
    /// MAL-2025-1234`.
    pub fn because(&self) -> String {
        let published = self.published.map(|at| format!("published {}, ", format_minute(at))).unwrap_or_default();
        match &self.rule {
            Rule::Malicious(id) => format!("named by {id}, a malicious-package record"),
            Rule::NotAfter(line) => format!("{published}after not_after {}", format_minute(*line)),
            Rule::MinAge(age) => match self.until {
                Some(until) => format!("{published}min_age {age}; allowed from {}", format_minute(until)),
                None => format!("{published}min_age {age}"),
            },
            Rule::UnknownTime => {
                "its publish time cannot be learnt (the registry gives none, or its metadata cannot be had), \
                 and unknown_time is \"refuse\""
                    .to_owned()
            }
        }
    }

    /// The rule and what it reads, in a few words, as `check`, `explain`,
    /// `policy why` and the access log name it: `blocked by min_age until
    /// 2026-12-06T10:00Z`, `blocked by MAL-2025-1234`, `blocked by
    /// not_after 2025-09-14T00:00Z`, `blocked by unknown_time`.
    pub fn summary(&self) -> String {
        match (&self.rule, self.until) {
            (Rule::Malicious(id), _) => format!("blocked by {id}"),
            (Rule::MinAge(_), Some(until)) => format!("blocked by min_age until {}", format_minute(until)),
            (Rule::NotAfter(line), _) => format!("blocked by not_after {}", format_minute(*line)),
            (Rule::UnknownTime, _) => "blocked by unknown_time (its publish time cannot be learnt)".to_owned(),
            (rule, None) => format!("blocked by {}", rule.name()),
        }
    }

    /// The whole line a client is told: `npm:left-pad@1.3.1 is blocked by
    /// policy: published ..., min_age 3d; allowed from ...`.
    pub fn line(&self, release: &Release<'_>) -> String {
        format!("{release} is blocked by policy: {}", self.because())
    }

    /// A short form for an HTTP reason phrase, which some clients print
    /// alone: `Blocked by pkgproxy policy (min_age until
    /// 2026-12-06T10:00Z)`.
    pub fn phrase(&self) -> String {
        match (&self.rule, self.until) {
            (Rule::Malicious(id), _) => format!("Blocked by pkgproxy policy ({id})"),
            (Rule::MinAge(_), Some(until)) => {
                format!("Blocked by pkgproxy policy (min_age until {})", format_minute(until))
            }
            (rule, _) => format!("Blocked by pkgproxy policy ({})", rule.name()),
        }
    }
}

impl Policy {
    /// Whether a rule in force reads publish times: without one, no time
    /// is looked for and none is missed.
    pub fn needs_times(&self) -> bool {
        self.min_age.is_some() || self.not_after.is_some()
    }

    /// What the policy says of `release`, published `published`, at `now`.
    pub fn judge(&self, release: &Release<'_>, published: Published, now: SystemTime) -> Verdict {
        if let Some(allowed) = self.allow.iter().find(|allowed| allowed.names(release)) {
            return Verdict::Allowed(allowed.as_written().to_owned());
        }
        if let Some(id) = self.malicious.naming(release) {
            let published = match published {
                Published::At(at) => Some(at),
                _ => None,
            };
            return Verdict::Blocked(Blocked { rule: Rule::Malicious(id), published, until: None });
        }
        if !self.needs_times() {
            return Verdict::Served;
        }
        let at = match published {
            Published::At(at) => at,
            Published::NotNeeded => return Verdict::Served,
            Published::Unknown => {
                return match self.unknown_time {
                    UnknownTime::Allow => Verdict::Served,
                    UnknownTime::Refuse => {
                        Verdict::Blocked(Blocked { rule: Rule::UnknownTime, published: None, until: None })
                    }
                };
            }
        };
        if let Some(line) = self.not_after.filter(|line| at > *line) {
            return Verdict::Blocked(Blocked { rule: Rule::NotAfter(line), published: Some(at), until: None });
        }
        if let Some(min_age) = self.min_age {
            let until = at + min_age;
            if now < until {
                let age = self.min_age_text.clone().unwrap_or_else(|| humantime::format_duration(min_age).to_string());
                return Verdict::Blocked(Blocked { rule: Rule::MinAge(age), published: Some(at), until: Some(until) });
            }
        }
        Verdict::Served
    }

    /// The rules in force, one per line, for `pkgproxyctl policy`.
    pub fn describe(&self) -> Vec<String> {
        let mut lines = Vec::new();
        if let Some(age) = &self.min_age_text {
            lines.push(format!("min_age {age}: a release published less than {age} ago is not served"));
        }
        if let Some(line) = self.not_after {
            lines.push(format!("not_after {}: nothing published after it is served", format_minute(line)));
        }
        if self.needs_times() {
            lines.push(
                match self.unknown_time {
                    UnknownTime::Refuse => "unknown_time refuse: a release whose publish time is unknown is not served",
                    UnknownTime::Allow => "unknown_time allow: a release whose publish time is unknown is served",
                }
                .to_owned(),
            );
        }
        for allowed in &self.allow {
            lines.push(format!("allow {}: served whatever the other rules say", allowed.as_written()));
        }
        let stats = self.malicious.stats();
        if !self.osv_sources.is_empty() || stats.records > 0 {
            lines.push(format!(
                "osv: {} malicious-package records naming {} packages, from {}",
                stats.records,
                stats.packages,
                match self.osv_sources.len() {
                    0 => "bundles taken in".to_owned(),
                    n => format!("{n} source(s)"),
                }
            ));
        }
        lines
    }
}

#[cfg(test)]
mod tests;
