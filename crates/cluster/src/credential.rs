//! How the nodes of a cluster prove themselves to each other: a credential
//! per request, an HMAC under the cluster's peer key of the request's
//! method, target and time, good for [`MAX_SKEW`] either way of the
//! receiver's clock. A credential seen in passing opens that one request,
//! for minutes, and nothing else; a new peer secret changes them all.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use http::{HeaderMap, HeaderName, HeaderValue, Method};

/// The header carrying the credential.
pub const TOKEN_HEADER: HeaderName = HeaderName::from_static("x-pkgproxy-peer-token");
/// The header carrying when the credential was made (Unix seconds).
pub const TIME_HEADER: HeaderName = HeaderName::from_static("x-pkgproxy-peer-time");
/// How far apart the sender's and the receiver's clocks may be.
pub const MAX_SKEW: Duration = Duration::from_secs(120);

/// The key a cluster's nodes sign their requests to each other with.
#[derive(Clone)]
pub struct PeerKey(ring::hmac::Key);

impl std::fmt::Debug for PeerKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("PeerKey(<redacted>)")
    }
}

impl PeerKey {
    /// The key of the cluster in `bucket` whose peer secret is `secret`:
    /// it differs per cluster, and never shows the secret.
    pub fn derive(secret: &str, bucket: &str) -> PeerKey {
        let outer = ring::hmac::Key::new(ring::hmac::HMAC_SHA256, secret.as_bytes());
        let derived = ring::hmac::sign(&outer, format!("pkgproxy cluster peer {bucket}").as_bytes());
        PeerKey(ring::hmac::Key::new(ring::hmac::HMAC_SHA256, derived.as_ref()))
    }

    /// The headers proving a request of `method` for `target` (its path and
    /// query, or for a request through a peer as a proxy its absolute URI,
    /// as the peer receives it) made at `now`.
    pub fn credential(&self, method: &Method, target: &str, now: SystemTime) -> [(HeaderName, HeaderValue); 2] {
        let time = now.duration_since(UNIX_EPOCH).map_or(0, |d| d.as_secs());
        let token = hex::encode(ring::hmac::sign(&self.0, &signed(method, target, time)).as_ref());
        let token = HeaderValue::try_from(token).expect("hex is a valid header value");
        [(TIME_HEADER, HeaderValue::from(time)), (TOKEN_HEADER, token)]
    }

    /// Whether `headers` prove a request of `method` for `target` made by a
    /// node of this cluster, received at `now` (compared in constant time).
    pub fn verify(&self, method: &Method, target: &str, headers: &HeaderMap, now: SystemTime) -> bool {
        let read = |name: &HeaderName| headers.get(name).and_then(|v| v.to_str().ok());
        let (Some(time), Some(token)) = (read(&TIME_HEADER).and_then(|t| t.parse::<u64>().ok()), read(&TOKEN_HEADER))
        else {
            return false;
        };
        let made = UNIX_EPOCH + Duration::from_secs(time);
        let skew = now.duration_since(made).or_else(|error| Ok::<_, ()>(error.duration())).unwrap_or_default();
        let Ok(token) = hex::decode(token) else { return false };
        skew <= MAX_SKEW && ring::hmac::verify(&self.0, &signed(method, target, time), &token).is_ok()
    }
}

fn signed(method: &Method, target: &str, time: u64) -> Vec<u8> {
    format!("{time}\n{method}\n{target}").into_bytes()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn headers(credential: [(HeaderName, HeaderValue); 2]) -> HeaderMap {
        credential.into_iter().collect()
    }

    #[test]
    fn a_credential_opens_its_own_request_for_minutes_and_nothing_else() {
        let key = PeerKey::derive("secret", "bucket");
        let now = UNIX_EPOCH + Duration::from_secs(1_800_000_000);
        let target = "/pkgproxy/v1/peer/tail?key=go%2Fx";
        let made = headers(key.credential(&Method::GET, target, now));
        assert!(key.verify(&Method::GET, target, &made, now));
        assert!(key.verify(&Method::GET, target, &made, now + MAX_SKEW), "a clock a little behind");
        assert!(key.verify(&Method::GET, target, &made, now - MAX_SKEW), "or ahead");
        assert!(!key.verify(&Method::GET, target, &made, now + MAX_SKEW + Duration::from_secs(1)), "expired");
        assert!(!key.verify(&Method::GET, "/pkgproxy/v1/peer/tail?key=other", &made, now), "another request");
        assert!(!key.verify(&Method::HEAD, target, &made, now), "another method");
        assert!(!PeerKey::derive("rotated", "bucket").verify(&Method::GET, target, &made, now), "a new secret");
        assert!(!PeerKey::derive("secret", "other").verify(&Method::GET, target, &made, now), "another cluster");
        assert!(!key.verify(&Method::GET, target, &HeaderMap::new(), now));
        let mut forged = made.clone();
        forged.insert(TIME_HEADER, HeaderValue::from(1_800_000_001u64));
        assert!(!key.verify(&Method::GET, target, &forged, now), "the time is signed");
        assert!(!format!("{key:?}").contains("secret"));
    }
}
