//! Assertions: the signed documents snapd fetches by type and primary key
//! (`GET /v2/assertions/TYPE/KEY...?max-format=N`, and the pre-2.50
//! `/api/v1/snaps/assertions/...`), and the few of their headers pkgproxy
//! reads to know an assertion chain is complete.
//!
//! They are kept as the store sent them, byte for byte: pkgproxy checks no
//! signature (snapd does, against its own trusted keys), so it can serve a
//! stale one but never a forged one. How long each type is served without
//! asking the store follows how it changes: a `snap-revision` is named by
//! the snap's digest and never changes; an `account-key` may gain an end
//! date and an `account` a validation; a `snap-declaration` changes when
//! the store edits a snap's rules, so it is asked for every time and the
//! cached copy serves only when the store cannot be asked.

use std::time::Duration;

use pkgproxy_cache::Class;

use super::device::{key_part, Device};
use crate::decision::Refusal;

/// An assertion request, checked.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AssertionPath {
    /// Its type (`snap-revision`, `account-key`, ...).
    pub kind: String,
    /// The primary key's parts, as in the URL.
    pub primary_key: Vec<String>,
    /// The newest format the client reads.
    pub max_format: u32,
    /// For sequence-forming types, the sequence asked for (`latest` or a number).
    pub sequence: Option<String>,
}

impl AssertionPath {
    /// Parses `rest` (below `/v2/assertions/`) and the query.
    pub fn parse(rest: &str, query: Option<&str>) -> Result<AssertionPath, Refusal> {
        let mut parts = rest.split('/');
        let kind = parts.next().unwrap_or("");
        if kind.is_empty() || !kind.bytes().all(|b| b.is_ascii_lowercase() || b == b'-') {
            return Err(Refusal::not_found(format!("{kind:?} is not an assertion type")));
        }
        let primary_key: Vec<String> = parts.map(str::to_string).collect();
        if primary_key.is_empty() || !primary_key.iter().all(|part| is_key_part(part)) {
            return Err(Refusal::not_found("not an assertion's primary key"));
        }
        let (mut max_format, mut sequence) = (0, None);
        for (name, value) in query.unwrap_or("").split('&').filter_map(|pair| pair.split_once('=')) {
            match name {
                "max-format" => {
                    max_format = value.parse().map_err(|_| Refusal::bad_request("max-format must be a number"))?
                }
                "sequence" if value == "latest" || value.parse::<u64>().is_ok() => sequence = Some(value.to_string()),
                "sequence" => return Err(Refusal::bad_request("sequence must be a number or latest")),
                _ => {}
            }
        }
        Ok(AssertionPath { kind: kind.to_string(), primary_key, max_format, sequence })
    }

    /// The cache key, for `device`'s store: one per assertion, whatever the
    /// format the client reads (see [`crate::Acceptance`]).
    pub fn key(&self, device: &Device) -> String {
        let key = assertion_key(&device.scope(), &self.kind, &self.primary_key);
        match &self.sequence {
            Some(sequence) => format!("{key}?sequence={sequence}"),
            None => key,
        }
    }

    /// How the cached copy ages.
    pub fn class(&self) -> Class {
        match self.kind.as_str() {
            "snap-revision" => Class::Immutable,
            _ => Class::Revalidated,
        }
    }

    /// How long the cached copy is served without asking the store.
    pub fn fresh_for(&self) -> Duration {
        match (self.kind.as_str(), &self.sequence) {
            ("account-key", _) => ACCOUNT_KEY_TTL,
            ("account", _) => ACCOUNT_TTL,
            _ => Duration::ZERO,
        }
    }
}

/// How long an `account-key` is served without asking the store.
pub const ACCOUNT_KEY_TTL: Duration = Duration::from_secs(24 * 3600);
/// How long an `account` is served without asking the store.
pub const ACCOUNT_TTL: Duration = Duration::from_secs(3600);

/// The cache key of the assertion `kind` with `primary_key` in `scope`.
pub fn assertion_key(scope: &str, kind: &str, primary_key: &[String]) -> String {
    let parts: Vec<String> = primary_key.iter().map(|part| key_part(part)).collect();
    format!("snap/assertion/{scope}/{kind}/{}", parts.join("/"))
}

/// A primary key part: what account ids, series, snap ids and unpadded
/// base64url digests are made of.
fn is_key_part(part: &str) -> bool {
    !part.is_empty()
        && part != "."
        && part != ".."
        && part.bytes().all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.' | b'=' | b'+' | b':'))
}

/// The format of the assertion whose text starts with `head` (`0` when it
/// names none, as assertions of the first format do).
pub fn format_of(head: &[u8]) -> u32 {
    header(head, "format").and_then(|value| value.parse().ok()).unwrap_or(0)
}

/// The value of the top-level header `name` of an assertion's text: its
/// headers come first, one `name: value` per line, up to an empty line.
pub fn header<'a>(text: &'a [u8], name: &str) -> Option<&'a str> {
    let text = std::str::from_utf8(headers_of(text)).ok()?;
    text.lines().find_map(|line| {
        let (key, value) = line.split_once(':')?;
        (key == name && !line.starts_with(' ')).then(|| value.trim())
    })
}

/// The headers part of an assertion's text.
fn headers_of(text: &[u8]) -> &[u8] {
    let end = text.windows(2).position(|pair| pair == b"\n\n").unwrap_or(text.len());
    &text[..end]
}

#[cfg(test)]
mod tests {
    use super::*;

    const DECLARATION: &[u8] = b"type: snap-declaration\nformat: 5\nauthority-id: canonical\nrevision: 3\nseries: 16\nsnap-id: abc\npublisher-id: dev1\nsign-key-sha3-384: KEY\n\nBODYSIG";

    #[test]
    fn paths_parse_into_type_key_and_format() {
        let path = AssertionPath::parse("snap-declaration/16/abc", Some("max-format=5")).unwrap();
        assert_eq!(
            (path.kind.as_str(), path.primary_key.clone(), path.max_format),
            ("snap-declaration", vec!["16".to_string(), "abc".to_string()], 5)
        );
        let device = Device::of(&http::HeaderMap::new());
        assert_eq!(path.key(&device), "snap/assertion/global/snap-declaration/16/abc");
        let latest = AssertionPath::parse("validation-set/16/acme/base", Some("sequence=latest&max-format=1")).unwrap();
        assert_eq!(latest.key(&device), "snap/assertion/global/validation-set/16/acme/base?sequence=latest");
    }

    #[test]
    fn hostile_paths_are_refused() {
        for (rest, query) in [
            ("", None),
            ("Snap-Revision/x", None),
            ("snap-revision", None),
            ("snap-revision/", None),
            ("account/..", None),
            ("account/a%2Fb", None),
            ("account/a", Some("max-format=x")),
            ("account/a", Some("sequence=../x")),
        ] {
            assert!(AssertionPath::parse(rest, query).is_err(), "{rest} {query:?}");
        }
    }

    #[test]
    fn each_type_ages_its_own_way() {
        let of = |rest| AssertionPath::parse(rest, None).unwrap();
        assert_eq!(of("snap-revision/x").class(), Class::Immutable);
        assert_eq!(of("account-key/x").fresh_for(), ACCOUNT_KEY_TTL);
        assert_eq!(of("account/x").fresh_for(), ACCOUNT_TTL);
        assert_eq!(
            (of("snap-declaration/16/x").class(), of("snap-declaration/16/x").fresh_for()),
            (Class::Revalidated, Duration::ZERO)
        );
    }

    #[test]
    fn headers_are_read_from_the_head_only() {
        assert_eq!(format_of(DECLARATION), 5);
        assert_eq!(format_of(b"type: account\n\nsig"), 0);
        assert_eq!(header(DECLARATION, "publisher-id"), Some("dev1"));
        assert_eq!(header(DECLARATION, "sign-key-sha3-384"), Some("KEY"));
        assert_eq!(header(b"type: x\n\npublisher-id: no", "publisher-id"), None, "the body is not a header");
    }
}
