//! How dnf is told why pkgproxy cannot serve a file. librepo prints an
//! HTTP error as `Status code: 424 for URL`: neither the reason phrase
//! nor the body, but the URL it ended at after redirects. So what cannot
//! be had is a redirect to the same path with pkgproxy's reason in the
//! query, answered with the error itself:
//!
//! ```text
//! [MIRROR] hello-1.0-1.noarch.rpm: Status code: 424 for http://pkgproxy:3142/rpm/fedora/.../hello-1.0-1.noarch.rpm?pkgproxy=offline,not-held (IP: 10.0.0.5)
//! ```
//!
//! librepo follows it at once, and takes the `424` as final for that
//! mirror (it tries a mirror a few times in a row, never for minutes).

use http::header::{HeaderValue, LOCATION, RETRY_AFTER};
use http::StatusCode;

use crate::decision::LocalAnswer;

/// The query key that carries pkgproxy's reason.
const KEY: &str = "pkgproxy=";

/// `answer` (pkgproxy's error), given as a redirect to the asked path with
/// `why` in its query; answers without a reason to say are given as
/// they are.
pub fn redirected(answer: LocalAnswer, why: &str) -> LocalAnswer {
    let mut redirect = LocalAnswer::text(StatusCode::FOUND, &String::from_utf8_lossy(&answer.body));
    let Ok(location) = HeaderValue::from_str(&format!("?{KEY}{}", slug(why))) else { return answer };
    redirect.headers.insert(LOCATION, location);
    if let Some(retry_after) = answer.headers.get(RETRY_AFTER) {
        redirect.headers.insert(RETRY_AFTER, retry_after.clone());
    }
    redirect
}

/// The error a redirect of [`redirected`] leads to, if `query` is one.
pub fn answer_for(query: Option<&str>) -> Option<LocalAnswer> {
    let why = query?.split('&').find_map(|pair| pair.strip_prefix(KEY))?;
    let why = percent_encoding::percent_decode_str(why).decode_utf8_lossy();
    let words = why.replace([',', '-'], " ");
    let status = match why.starts_with("blocked") {
        true => StatusCode::FORBIDDEN,
        false => StatusCode::FAILED_DEPENDENCY,
    };
    Some(LocalAnswer::text(status, &format!("pkgproxy: {words}")))
}

/// `why` as a query value: words joined by `-`, clauses (broken at
/// parentheses and at a colon before a space) by `,`; times and rule names
/// (`min_age`, `2026-01-14T01:00Z`) kept as written.
fn slug(why: &str) -> String {
    let why = why.replace("(pkgproxy)", "");
    let mut clauses = vec![String::new()];
    let mut chars = why.chars().peekable();
    while let Some(c) = chars.next() {
        let breaks = matches!(c, '(' | ')' | ';') || (c == ':' && chars.peek().is_none_or(|next| next.is_whitespace()));
        match breaks {
            true => clauses.push(String::new()),
            false => clauses.last_mut().expect("one clause at least").push(c),
        }
    }
    let clauses = clauses.iter().map(|clause| {
        let words = clause.split_whitespace().map(|word| {
            let word: String =
                word.chars().filter(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '.' | '-' | ':')).collect();
            match word.bytes().all(|b| b.is_ascii_alphabetic()) {
                true => word.to_ascii_lowercase(),
                false => word,
            }
        });
        words.filter(|word| !word.is_empty()).collect::<Vec<_>>().join("-")
    });
    clauses.filter(|clause| !clause.is_empty()).collect::<Vec<_>>().join(",")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_reason_phrase_becomes_a_query_dnf_prints_and_its_answer() {
        assert_eq!(slug("Offline (pkgproxy): not held"), "offline,not-held");
        assert_eq!(slug("Not held (pkgproxy): the repository asks to wait"), "not-held,the-repository-asks-to-wait");
        let blocked = slug("Blocked by pkgproxy policy (min_age until 2026-01-14T01:00Z)");
        assert_eq!(blocked, "blocked-by-pkgproxy-policy,min_age-until-2026-01-14T01:00Z");
        let offline = LocalAnswer::text(StatusCode::FAILED_DEPENDENCY, "pkgproxy is offline")
            .because("Offline (pkgproxy): not held");
        let redirect = redirected(offline, "Offline (pkgproxy): not held");
        assert_eq!(redirect.status, StatusCode::FOUND);
        assert_eq!(redirect.headers[LOCATION], "?pkgproxy=offline,not-held");
        let answer = answer_for(Some("pkgproxy=offline,not-held")).unwrap();
        assert_eq!(answer.status, StatusCode::FAILED_DEPENDENCY);
        assert_eq!(answer.body, "pkgproxy: offline not held\n");
        assert_eq!(answer_for(Some(&format!("pkgproxy={blocked}"))).unwrap().status, StatusCode::FORBIDDEN);
        assert!(answer_for(Some("other=1")).is_none());
        assert!(answer_for(None).is_none());
    }
}
