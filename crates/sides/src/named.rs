//! What the sides that serve registries named in their section beside a
//! built-in one share (cargo's `[[cargo.registry]]`, pypi's
//! `[[pypi.index]]`, npm's `[[npm.registry]]`): how such a registry may be
//! named, and how long their remembered answers stand. Each name is a path
//! segment and a part of cache keys, so all three check it alike.

use std::time::Duration;

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
pub fn is_registry_name(name: &str, reserved: &[&str]) -> bool {
    !name.is_empty()
        && name.len() <= 64
        && name.bytes().all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-' || b == b'_')
        && !reserved.contains(&name)
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
