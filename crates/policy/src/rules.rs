//! `[policy]` as written, and its validation into a [`Policy`].

use std::path::{Path, PathBuf};

use crate::allow::Allowed;
use crate::osv::Malicious;
use crate::time::parse_time;
use crate::Policy;

/// `[policy]`, as written.
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Options {
    /// A release published less than this long ago is not served (`3d`).
    pub min_age: Option<String>,
    /// Nothing published after this instant is served (RFC 3339, or a
    /// date: its midnight UTC).
    pub not_after: Option<String>,
    /// `refuse` (the default) or `allow`.
    pub unknown_time: Option<String>,
    /// Break-glass entries.
    #[serde(default)]
    pub allow: Vec<String>,
    /// OSV sources: folders of JSON records, or `all.zip` files.
    #[serde(default)]
    pub osv: Vec<PathBuf>,
}

/// What becomes of a release whose publish time cannot be learnt, when a
/// time rule is set.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum UnknownTime {
    /// Not served (fail closed).
    #[default]
    Refuse,
    /// Served.
    Allow,
}

/// A `[policy]` key that cannot be used.
#[derive(Debug, thiserror::Error)]
#[error("policy.{key}: {reason}")]
pub struct PolicyError {
    /// The key at fault.
    pub key: &'static str,
    /// Why, for people.
    pub reason: String,
}

fn bad(key: &'static str, reason: impl Into<String>) -> PolicyError {
    PolicyError { key, reason: reason.into() }
}

impl Options {
    /// The policy these options give, its OSV records read from the
    /// sources written and from `taken_in` (what signed bundles brought,
    /// where present).
    pub fn policy(&self, taken_in: Option<&Path>) -> Result<Policy, PolicyError> {
        let min_age = self
            .min_age
            .as_deref()
            .map(|text| {
                humantime::parse_duration(text).map_err(|error| {
                    bad("min_age", format!("{text:?} is not a duration like \"3d\" or \"72h\": {error}"))
                })
            })
            .transpose()?;
        let not_after = self.not_after.as_deref().map(read_instant).transpose()?;
        let unknown_time = match self.unknown_time.as_deref() {
            None | Some("refuse") => UnknownTime::Refuse,
            Some("allow") => UnknownTime::Allow,
            Some(other) => return Err(bad("unknown_time", format!("{other:?}: write \"refuse\" or \"allow\""))),
        };
        let allow = self
            .allow
            .iter()
            .map(|entry| Allowed::parse(entry).map_err(|error| bad("allow", format!("{entry:?}: {error}"))))
            .collect::<Result<Vec<_>, _>>()?;
        let mut sources: Vec<&Path> = self.osv.iter().map(PathBuf::as_path).collect();
        for source in &sources {
            if !source.exists() {
                return Err(bad("osv", format!("{} cannot be read: it does not exist", source.display())));
            }
        }
        let taken_in = taken_in.filter(|dir| dir.is_dir());
        sources.extend(taken_in);
        let malicious = Malicious::read(&sources).map_err(|error| bad("osv", error.to_string()))?;
        Ok(Policy {
            min_age_text: min_age.map(|_| self.min_age.clone().unwrap_or_default()),
            min_age,
            not_after,
            unknown_time,
            allow,
            osv_sources: self.osv.clone(),
            malicious,
        })
    }
}

/// `not_after` as written: an RFC 3339 instant, or a date (its midnight,
/// UTC).
fn read_instant(text: &str) -> Result<std::time::SystemTime, PolicyError> {
    parse_time(text).or_else(|| parse_time(&format!("{text}T00:00:00Z"))).ok_or_else(|| {
        bad(
            "not_after",
            format!("{text:?} is not an instant like \"2025-09-14T00:00:00Z\" or a date like \"2025-09-14\""),
        )
    })
}
