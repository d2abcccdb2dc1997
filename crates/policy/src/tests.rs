//! The rules judged together, in their order.

use std::time::{Duration, SystemTime};

use super::*;

fn at(text: &str) -> SystemTime {
    parse_time(text).unwrap()
}

fn policy(toml: &str) -> Policy {
    let options: Options = serde_json::from_str(toml).unwrap();
    options.policy(None).unwrap()
}

const LEFT_PAD: Release<'static> = Release { ecosystem: Ecosystem::Npm, name: "left-pad", version: "1.3.1" };

#[test]
fn min_age_refuses_until_the_release_is_old_enough_and_says_when() {
    let policy = policy(r#"{"min_age": "3d"}"#);
    let published = at("2026-12-03T10:00:00Z");
    let verdict = policy.judge(&LEFT_PAD, Published::At(published), at("2026-12-04T10:00:00Z"));
    let Verdict::Blocked(blocked) = verdict else { panic!("{verdict:?}") };
    assert_eq!(
        blocked.line(&LEFT_PAD),
        "npm:left-pad@1.3.1 is blocked by policy: published 2026-12-03T10:00Z, min_age 3d; allowed from 2026-12-06T10:00Z"
    );
    assert_eq!(blocked.phrase(), "Blocked by pkgproxy policy (min_age until 2026-12-06T10:00Z)");
    assert_eq!(blocked.summary(), "blocked by min_age until 2026-12-06T10:00Z");
    assert_eq!(policy.judge(&LEFT_PAD, Published::At(published), at("2026-12-06T10:00:00Z")), Verdict::Served);
}

#[test]
fn not_after_refuses_what_was_published_after_the_line() {
    let policy = policy(r#"{"not_after": "2025-09-14"}"#);
    let now = at("2026-01-01T00:00:00Z");
    assert!(policy.judge(&LEFT_PAD, Published::At(at("2025-09-13T23:59:59Z")), now).serves());
    let verdict = policy.judge(&LEFT_PAD, Published::At(at("2025-09-14T00:00:01Z")), now);
    assert!(matches!(verdict, Verdict::Blocked(Blocked { rule: Rule::NotAfter(_), until: None, .. })), "{verdict:?}");
    let Verdict::Blocked(blocked) = verdict else { unreachable!() };
    assert_eq!(blocked.summary(), "blocked by not_after 2025-09-14T00:00Z");
}

#[test]
fn an_unknown_time_is_refused_only_where_a_time_rule_reads_one() {
    let now = SystemTime::now();
    let refusing = policy(r#"{"min_age": "1h"}"#);
    let verdict = refusing.judge(&LEFT_PAD, Published::Unknown, now);
    assert!(matches!(&verdict, Verdict::Blocked(b) if b.rule == Rule::UnknownTime), "{verdict:?}");
    assert!(policy(r#"{"min_age": "1h", "unknown_time": "allow"}"#).judge(&LEFT_PAD, Published::Unknown, now).serves());
    assert!(policy(r#"{"allow": []}"#).judge(&LEFT_PAD, Published::Unknown, now).serves(), "no time rule");
    assert!(!policy(r#"{"allow": []}"#).needs_times());
}

#[test]
fn allow_lets_a_release_through_every_rule() {
    let dir = tempfile::tempdir().unwrap();
    let record =
        r#"{"id":"MAL-2026-9","affected":[{"package":{"ecosystem":"npm","name":"left-pad"},"versions":["1.3.1"]}]}"#;
    std::fs::write(dir.path().join("MAL-2026-9.json"), record).unwrap();
    let osv = serde_json::to_string(&dir.path()).unwrap();
    let denying = policy(&format!(r#"{{"osv": [{osv}], "min_age": "3d"}}"#));
    let now = at("2026-12-06T00:00:00Z");
    let old = Published::At(at("2020-01-01T00:00:00Z"));
    let verdict = denying.judge(&LEFT_PAD, old, now);
    assert!(matches!(&verdict, Verdict::Blocked(b) if b.rule == Rule::Malicious("MAL-2026-9".into())), "{verdict:?}");
    let Verdict::Blocked(blocked) = &verdict else { unreachable!() };
    assert_eq!(blocked.summary(), "blocked by MAL-2026-9");
    let neighbour = Release { version: "1.3.0", ..LEFT_PAD };
    assert!(denying.judge(&neighbour, old, now).serves());
    let allowing = policy(&format!(r#"{{"osv": [{osv}], "min_age": "3d", "allow": ["npm:left-pad@1.3.*"]}}"#));
    assert_eq!(
        allowing.judge(&LEFT_PAD, Published::At(now - Duration::from_secs(60)), now),
        Verdict::Allowed("npm:left-pad@1.3.*".into())
    );
}

#[test]
fn bad_rules_name_their_key() {
    for (json, says) in [
        (r#"{"min_age": "three days"}"#, "policy.min_age"),
        (r#"{"not_after": "last week"}"#, "policy.not_after"),
        (r#"{"unknown_time": "maybe"}"#, "policy.unknown_time"),
        (r#"{"allow": ["gem:rails"]}"#, "policy.allow"),
        (r#"{"osv": ["/nonexistent/osv"]}"#, "policy.osv"),
    ] {
        let options: Options = serde_json::from_str(json).unwrap();
        let error = options.policy(None).unwrap_err().to_string();
        assert!(error.starts_with(says), "{json}: {error}");
    }
}
