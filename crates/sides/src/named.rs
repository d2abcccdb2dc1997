//! What the sides that serve registries named in their section beside a
//! built-in one share (cargo's `[[cargo.registry]]`, pypi's
//! `[[pypi.index]]`, npm's `[[npm.registry]]`): how such a registry may be
//! named, and how long their remembered answers stand. Each name is a path
//! segment and a part of cache keys, so all three check it alike.

use std::time::Duration;

use crate::config::ConfigError;
use crate::id::SideId;
use crate::instances::Instances;

/// How long a registry's "no such package" is remembered.
pub const NEGATIVE_TTL: Duration = Duration::from_secs(60);

/// How often a package's listing (a crate's index file, a project's page,
/// a package's document) that did not list what a client asked for may be
/// fetched again: the version may be new, but a client asking for one that
/// does not exist must not make every request go upstream.
pub const REFRESH_EVERY: Duration = Duration::from_secs(10);

/// Whether `name` may name a configured registry: 1 to 64 lower-case
/// letters, digits, `-` and `_`, and none of `reserved` (the side's own
/// paths and its built-in registry's name).
fn is_registry_name(name: &str, reserved: &[&str]) -> bool {
    !name.is_empty()
        && name.len() <= 64
        && name.bytes().all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-' || b == b'_')
        && !reserved.contains(&name)
}

/// One registry a side serves, validated.
#[derive(Debug, Clone)]
pub struct Named {
    /// Its name in keys and pools (the built-in one's, or the configured one).
    pub name: String,
    /// Where it is mounted below the side's path: `""` for the built-in
    /// one, `/NAME` for a configured one.
    pub mount: String,
    /// Its instances.
    pub mirrors: Instances,
}

/// How a side's section writes its registries, and what it is told when
/// one cannot be used.
#[derive(Debug)]
pub struct Naming {
    /// The side whose section it is.
    pub side: SideId,
    /// The name of each table of the list (`registry` in `[[cargo.registry]]`).
    pub table: &'static str,
    /// The key of a table's URLs (`index`, `mirrors`), which is also the
    /// section's key of the built-in registry's URLs.
    pub urls: &'static str,
    /// The built-in registry's name.
    pub built_in: &'static str,
    /// Its URLs when none are configured.
    pub default_url: &'static str,
    /// Names no configured registry may take, beside the built-in one's:
    /// the side's own paths.
    pub reserved: &'static [&'static str],
    /// Whether a name is refused for a reason of the side's own, beside
    /// the rule every such name follows.
    pub refused: fn(&str) -> bool,
    /// What a refused name is told, after the name (`a registry's name
    /// is lower-case letters, ...`).
    pub rule: &'static str,
    /// What a configured registry without URLs is told.
    pub no_urls: &'static str,
}

impl Naming {
    /// The built-in registry at `urls` (its default when empty), then each
    /// of `configured` (a name and its URLs) at `/NAME`: named once each,
    /// by the rule, and with URLs of its own.
    pub fn registries<'o>(
        &self,
        urls: &[String],
        configured: impl IntoIterator<Item = (&'o String, &'o [String])>,
    ) -> Result<Vec<Named>, ConfigError> {
        let bad = |key: &dyn std::fmt::Display, reason: String| ConfigError::new(self.side, key, reason);
        let instances = |urls: &[String], built_in, key: &dyn std::fmt::Display| {
            Instances::new(urls, built_in).map_err(|reason| bad(key, reason))
        };
        let built_in = self.built_in.to_owned();
        let mirrors = instances(urls, Some(self.default_url), &self.urls)?;
        let mut registries = vec![Named { name: built_in, mount: String::new(), mirrors }];
        let name_key = format!("{}.name", self.table);
        for (name, urls) in configured {
            let reserved = [self.reserved, &[self.built_in]].concat();
            if !is_registry_name(name, &reserved) || (self.refused)(name) {
                return Err(bad(&name_key, format!("{name:?}: {}", self.rule)));
            }
            if registries.iter().any(|known| &known.name == name) {
                return Err(bad(&name_key, format!("{name:?} is named twice")));
            }
            let urls_key = format!("{}.{name}.{}", self.table, self.urls);
            if urls.is_empty() {
                return Err(bad(&urls_key, self.no_urls.to_owned()));
            }
            let mirrors = instances(urls, None, &urls_key)?;
            registries.push(Named { name: name.clone(), mount: format!("/{name}"), mirrors });
        }
        Ok(registries)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_registry_name_is_a_lower_case_path_segment_not_a_reserved_one() {
        assert!(is_registry_name("corp_2-internal", &["index"]));
        for bad in ["", "Corp", "a/b", "a.b", "index", &"x".repeat(65)] {
            assert!(!is_registry_name(bad, &["index"]), "{bad:?}");
        }
    }
}
