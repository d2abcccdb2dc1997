//! Bearer tokens for upstreams that ask for them: the OCI registries'
//! token dance (distribution's `docs/spec/auth/token.md`), as a client.
//!
//! An upstream answers `401` with `WWW-Authenticate: Bearer realm=..,
//! service=..,scope=..`; pkgproxy asks the realm for a token for the scope
//! (anonymously, or as the account configured for the upstream), keeps it until `issued + expires_in - 30 s` for every
//! request of that scope to that pool, and asks the upstream again once
//! with it. A realm is asked only when it is on the upstream's own domain
//! (the same host, or a host sharing its last two labels:
//! `auth.docker.io` for `registry-1.docker.io`), over the one transport.

use parking_lot::Mutex;
use std::collections::HashMap;
use std::time::Duration;

use http::header::{HeaderValue, ACCEPT, WWW_AUTHENTICATE};
use http::{HeaderMap, StatusCode, Uri};
use http_body_util::{BodyExt, Limited};
use percent_encoding::{utf8_percent_encode, NON_ALPHANUMERIC};
use pkgproxy_upstream::{PoolRequest, Transport};
use tokio::time::Instant;

/// How long a token without `expires_in` lasts (the token spec's default).
const DEFAULT_LIFETIME: Duration = Duration::from_secs(60);
/// How long before its end a token is no longer used.
const MARGIN: Duration = Duration::from_secs(30);
/// The largest token answer read.
const ANSWER_LIMIT: usize = 1024 * 1024;

/// The tokens pkgproxy holds, by pool and scope.
#[derive(Debug, Default)]
pub struct Tokens {
    held: Mutex<HashMap<(String, String), (HeaderValue, Instant)>>,
}

/// Who asks a realm for a token.
#[derive(Debug, Clone, Copy)]
pub struct Asker<'a> {
    /// The upstream pool the token is for.
    pub pool: &'a str,
    /// The base URL of its instance that challenged.
    pub base: &'a str,
    /// The scope pkgproxy asked under.
    pub scope: &'a str,
    /// The account pkgproxy pulls as (`user:password`), if any.
    pub credentials: Option<&'a str>,
}

/// A Bearer challenge.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Challenge {
    /// Where tokens are asked for.
    pub realm: String,
    /// The service to name.
    pub service: Option<String>,
    /// The scope the upstream wants.
    pub scope: Option<String>,
    /// Why a token sent was refused: `insufficient_scope` says a new
    /// token for the same scope and account would be refused too.
    pub error: Option<String>,
}

impl Challenge {
    /// The Bearer challenge among `headers`' `WWW-Authenticate`, if any.
    pub fn of(headers: &HeaderMap) -> Option<Challenge> {
        headers.get_all(WWW_AUTHENTICATE).iter().filter_map(|v| v.to_str().ok()).find_map(parse_bearer)
    }

    /// Whether the token sent was refused for what it may read, not for
    /// being stale or unknown.
    pub fn is_insufficient_scope(&self) -> bool {
        self.error.as_deref() == Some("insufficient_scope")
    }
}

/// Parses `Bearer k="v",k=v,...`.
fn parse_bearer(value: &str) -> Option<Challenge> {
    let (scheme, params) = value.trim().split_once(' ')?;
    if !scheme.eq_ignore_ascii_case("bearer") {
        return None;
    }
    let mut found: HashMap<String, String> = HashMap::new();
    let mut rest = params.trim();
    while !rest.is_empty() {
        let (name, after) = rest.split_once('=')?;
        let (value, after) = match after.strip_prefix('"') {
            Some(quoted) => {
                let end = quoted.find('"')?;
                (&quoted[..end], &quoted[end + 1..])
            }
            None => after.split_once(',').map_or((after, ""), |(value, after)| (value, after)),
        };
        found.insert(name.trim().to_ascii_lowercase(), value.to_string());
        rest = after.trim_start_matches([',', ' ']);
    }
    Some(Challenge {
        realm: found.remove("realm")?,
        service: found.remove("service"),
        scope: found.remove("scope"),
        error: found.remove("error"),
    })
}

impl Tokens {
    /// The token held for `scope` on `pool`, if still good.
    pub fn get(&self, pool: &str, scope: &str) -> Option<HeaderValue> {
        let held = self.held.lock();
        let (token, until) = held.get(&(pool.to_string(), scope.to_string()))?;
        (Instant::now() < *until).then(|| token.clone())
    }

    /// Asks `challenge`'s realm for the token `asker` needs, through
    /// `transport`, with `headers` (those of every upstream request), and
    /// keeps it.
    pub async fn fetch(
        &self,
        transport: &Transport,
        asker: Asker<'_>,
        challenge: &Challenge,
        headers: HeaderMap,
    ) -> Result<HeaderValue, String> {
        let Asker { pool, base, scope, credentials } = asker;
        let realm: Uri =
            challenge.realm.parse().map_err(|_| format!("the token realm {:?} is not a URL", challenge.realm))?;
        let (Some(scheme @ ("http" | "https")), Some(authority)) = (realm.scheme_str(), realm.authority()) else {
            return Err(format!("the token realm {:?} is not an http(s) URL", challenge.realm));
        };
        if let Some(why) = realm_refused(&realm, base) {
            return Err(format!("the token realm {} is refused: {why}", challenge.realm));
        }
        let mut query: Vec<String> = realm.query().map(str::to_string).into_iter().collect();
        if let Some(service) = &challenge.service {
            query.push(format!("service={}", utf8_percent_encode(service, NON_ALPHANUMERIC)));
        }
        query.push(format!(
            "scope={}",
            utf8_percent_encode(challenge.scope.as_deref().unwrap_or(scope), NON_ALPHANUMERIC)
        ));
        if let Some((user, _)) = credentials.and_then(|c| c.split_once(':')) {
            query.push(format!("account={}", utf8_percent_encode(user, NON_ALPHANUMERIC)));
        }
        let path = format!("{}?{}", realm.path(), query.join("&"));
        let tokens = transport
            .pool(&format!("{pool} tokens"), &[format!("{scheme}://{authority}")])
            .map_err(|error| error.to_string())?;
        let mut headers = headers;
        headers.insert(ACCEPT, HeaderValue::from_static("application/json"));
        if let Some(credentials) = credentials {
            use base64::Engine;
            let basic = format!("Basic {}", base64::engine::general_purpose::STANDARD.encode(credentials));
            let value =
                HeaderValue::from_str(&basic).map_err(|_| "the credentials are not a header value".to_string())?;
            headers.insert(http::header::AUTHORIZATION, value);
        }
        let answer = tokens.send(PoolRequest::get(path, headers)).await.map_err(|error| error.to_string())?;
        if answer.response.status() != StatusCode::OK {
            return Err(format!("the token realm answered {}", answer.response.status()));
        }
        let body = Limited::new(answer.response.into_body(), ANSWER_LIMIT)
            .collect()
            .await
            .map_err(|error| format!("the token answer broke off: {error}"))?
            .to_bytes();
        let (token, lifetime) = parse_answer(&body)?;
        let value = HeaderValue::from_str(&format!("Bearer {token}"))
            .map_err(|_| "the token is not a header value".to_string())?;
        let until = Instant::now() + lifetime.saturating_sub(MARGIN);
        self.held.lock().insert((pool.to_string(), scope.to_string()), (value.clone(), until));
        Ok(value)
    }
}

/// The token and how long it lasts.
fn parse_answer(body: &[u8]) -> Result<(String, Duration), String> {
    let answer: serde_json::Value =
        serde_json::from_slice(body).map_err(|_| "the token answer is not JSON".to_string())?;
    let token = ["token", "access_token"]
        .iter()
        .find_map(|name| answer.get(*name).and_then(serde_json::Value::as_str))
        .filter(|token| !token.is_empty())
        .ok_or("the token answer holds no token")?;
    let lifetime =
        answer.get("expires_in").and_then(serde_json::Value::as_u64).map_or(DEFAULT_LIFETIME, Duration::from_secs);
    Ok((token.to_string(), lifetime))
}

/// Why the token realm `realm` may not be asked for a registry instance at
/// `base`, if it may not: a realm is asked on the instance's own origin
/// (scheme, host and port), or over https on the instance's own site (the
/// same registrable domain, by the public suffix list: `auth.docker.io`
/// for `registry-1.docker.io`, never any `*.co.uk` for
/// `registry.example.co.uk`); never over plain http for an https registry.
fn realm_refused(realm: &Uri, base: &str) -> Option<&'static str> {
    let Ok(base) = base.parse::<Uri>() else { return Some("the registry's own URL cannot be read") };
    let origin = |uri: &Uri| {
        let scheme = uri.scheme_str()?.to_ascii_lowercase();
        let default = if scheme == "https" { 443 } else { 80 };
        Some((scheme, uri.host()?.to_ascii_lowercase(), uri.port_u16().unwrap_or(default)))
    };
    let (Some(realm_origin), Some(base_origin)) = (origin(realm), origin(&base)) else {
        return Some("it is not an http(s) URL");
    };
    if base_origin.0 == "https" && realm_origin.0 != "https" {
        return Some("it is plain http for an https registry");
    }
    if realm_origin == base_origin {
        return None;
    }
    if realm_origin.0 != "https" {
        return Some("it is on another origin over plain http");
    }
    let site = |host: &str| {
        let is_ip = host.trim_start_matches('[').trim_end_matches(']').parse::<std::net::IpAddr>().is_ok();
        (!is_ip).then(|| psl::domain_str(host)).flatten().map(str::to_owned)
    };
    match (site(&realm_origin.1), site(&base_origin.1)) {
        (Some(realm_site), Some(base_site)) if realm_site == base_site => None,
        _ => Some("it is not on the registry's own site"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_bearer_challenge_is_read_with_quoted_and_bare_parameters() {
        let mut headers = HeaderMap::new();
        headers.append(WWW_AUTHENTICATE, HeaderValue::from_static("Basic realm=\"x\""));
        headers.append(
            WWW_AUTHENTICATE,
            HeaderValue::from_static("Bearer realm=\"https://auth.docker.io/token\",service=\"registry.docker.io\",scope=\"repository:library/hello:pull,push\""),
        );
        let challenge = Challenge::of(&headers).unwrap();
        assert_eq!(challenge.realm, "https://auth.docker.io/token");
        assert_eq!(challenge.service.as_deref(), Some("registry.docker.io"));
        assert_eq!(challenge.scope.as_deref(), Some("repository:library/hello:pull,push"));
        assert_eq!(parse_bearer("bearer realm=http://h/t,service=s").unwrap().service.as_deref(), Some("s"));
        assert!(parse_bearer("Bearer service=\"s\"").is_none(), "no realm");
    }

    #[test]
    fn a_token_answer_gives_its_token_and_lifetime() {
        assert_eq!(
            parse_answer(br#"{"token": "t", "expires_in": 300}"#).unwrap(),
            ("t".into(), Duration::from_secs(300))
        );
        assert_eq!(parse_answer(br#"{"access_token": "a"}"#).unwrap(), ("a".into(), DEFAULT_LIFETIME));
        assert!(parse_answer(br#"{"token": ""}"#).is_err());
        assert!(parse_answer(b"<html>").is_err());
    }

    #[test]
    fn a_realm_is_asked_only_on_the_registry_s_origin_or_over_https_on_its_site() {
        let allowed = |realm: &str, base: &str| realm_refused(&realm.parse().unwrap(), base).is_none();
        assert!(allowed("https://auth.docker.io/token", "https://registry-1.docker.io"));
        assert!(allowed("https://ghcr.io/token", "https://ghcr.io"));
        assert!(allowed("http://127.0.0.1:5010/token", "http://127.0.0.1:5010"));
        assert!(allowed("https://auth.example.co.uk/token", "https://registry.example.co.uk"));
        assert!(!allowed("https://evil.co.uk/token", "https://registry.example.co.uk"), "a public suffix is no site");
        assert!(!allowed("https://evil.example/token", "https://registry-1.docker.io"));
        assert!(!allowed("https://docker.io.evil.example/token", "https://registry-1.docker.io"));
        assert!(!allowed("http://127.0.0.2:5010/token", "http://127.0.0.1:5010"));
        assert!(!allowed("http://127.0.0.1:9999/token", "http://127.0.0.1:5010"), "another port of the host");
        assert!(!allowed("http://auth.docker.io/token", "https://registry-1.docker.io"), "in clear");
        assert!(!allowed("http://registry-1.docker.io/token", "https://registry-1.docker.io"), "in clear");
        assert!(!allowed("http://auth.lan/token", "http://registry.lan:5000"), "another origin in clear");
    }

    #[tokio::test(start_paused = true)]
    async fn a_held_token_is_given_until_its_margin_before_the_end() {
        let tokens = Tokens::default();
        let value = HeaderValue::from_static("Bearer t");
        let until = Instant::now() + Duration::from_secs(300).saturating_sub(MARGIN);
        tokens.held.lock().insert(("hub".into(), "repository:x:pull".into()), (value.clone(), until));
        assert_eq!(tokens.get("hub", "repository:x:pull"), Some(value));
        assert_eq!(tokens.get("hub", "repository:y:pull"), None, "another scope");
        tokio::time::advance(Duration::from_secs(271)).await;
        assert_eq!(tokens.get("hub", "repository:x:pull"), None);
    }
}
