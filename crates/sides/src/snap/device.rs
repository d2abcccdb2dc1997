//! Who asks the store: the device headers that change its answers (series,
//! architecture, brand store, classic, capabilities), which every cache key
//! and record of this side carries, so a device never gets an answer meant
//! for another kind of device.
//!
//! snapd names them two ways: the v2 endpoints' `Snap-Device-*` headers and
//! the v1 level's `X-Ubuntu-*` ones (downloads, assertions, catalogues); one
//! device is the same key under both. Left out on purpose: the user agent,
//! the refresh reason, the CDN and location hints and the rotating device
//! macaroon, which name the device or the moment, not what it may see.

use http::{HeaderMap, HeaderName, HeaderValue};
use percent_encoding::{utf8_percent_encode, AsciiSet, NON_ALPHANUMERIC};

/// The device headers that change a store answer.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Device {
    /// `16` today.
    pub series: String,
    /// `amd64`, `arm64`, ...
    pub architecture: String,
    /// A brand store's id; empty for the global store.
    pub store: String,
    /// `true` on classic systems.
    pub classic: String,
    /// The capabilities, sorted.
    pub capabilities: Vec<String>,
}

/// What key parts keep as they are; the rest is percent-encoded, so no
/// header value can forge a `/` or `|` into a key.
const KEY_PART: &AsciiSet = &NON_ALPHANUMERIC.remove(b'-').remove(b'_').remove(b'.').remove(b'=');

/// `value`, safe to put in a cache key.
pub fn key_part(value: &str) -> String {
    utf8_percent_encode(value, KEY_PART).to_string()
}

/// The headers a cached request sends upstream on the client's behalf:
/// those that change the answer (and are in its key), what the client
/// accepts, and the device's own authorization, which a brand store needs
/// and which names no user.
const SENT_UPSTREAM: [&str; 16] = [
    "snap-device-series",
    "snap-device-architecture",
    "snap-device-store",
    "snap-classic",
    "snap-device-capabilities",
    "snap-accept-delta-format",
    "snap-device-authorization",
    "x-ubuntu-series",
    "x-ubuntu-architecture",
    "x-ubuntu-store",
    "x-ubuntu-classic",
    "x-ubuntu-wire-protocol",
    "x-device-authorization",
    "accept",
    "snap-cdn",
    "user-agent",
];

impl Device {
    /// The device that sent `headers`.
    pub fn of(headers: &HeaderMap) -> Device {
        let first = |names: [&str; 2]| {
            names.iter().find_map(|name| headers.get(*name)?.to_str().ok()).unwrap_or("").trim().to_string()
        };
        let mut capabilities: Vec<String> = headers
            .get_all("snap-device-capabilities")
            .iter()
            .filter_map(|value| value.to_str().ok())
            .flat_map(|value| value.split([',', ' ']))
            .filter(|cap| !cap.is_empty())
            .map(str::to_string)
            .collect();
        capabilities.sort();
        capabilities.dedup();
        Device {
            series: first(["snap-device-series", "x-ubuntu-series"]),
            architecture: first(["snap-device-architecture", "x-ubuntu-architecture"]),
            store: first(["snap-device-store", "x-ubuntu-store"]),
            classic: first(["snap-classic", "x-ubuntu-classic"]),
            capabilities,
        }
    }

    /// The device as a cache key part: `series/arch/store/classic/caps`.
    pub fn key(&self) -> String {
        format!(
            "{}/{}/{}/{}/{}",
            key_part(&self.series),
            key_part(&self.architecture),
            self.scope(),
            key_part(&self.classic),
            key_part(&self.capabilities.join(","))
        )
    }

    /// Which store's objects the device sees: `global`, or `store=ID` for a
    /// brand store (whose blobs and assertions are kept apart).
    pub fn scope(&self) -> String {
        match self.store.is_empty() {
            true => "global".to_string(),
            false => format!("store={}", key_part(&self.store)),
        }
    }

    /// The series, `16` when the client named none.
    pub fn series_or_default(&self) -> &str {
        if self.series.is_empty() {
            "16"
        } else {
            &self.series
        }
    }
}

/// The client's headers a shared, cached request sends upstream, asking
/// for an unencoded body (pkgproxy reads and rewrites JSON answers).
pub fn upstream_headers(client: &HeaderMap) -> HeaderMap {
    let mut headers = HeaderMap::new();
    for name in SENT_UPSTREAM {
        for value in client.get_all(name) {
            headers.append(HeaderName::from_static(name), value.clone());
        }
    }
    headers.insert(http::header::ACCEPT_ENCODING, HeaderValue::from_static("identity"));
    headers
}

/// True when the request carries a user's authorization: what it asks for
/// may be the user's own (a private snap, a purchase), so it is passed
/// through, never stored and never shared. The device's authorization
/// alone is not personal: every registered device sends it.
pub fn is_personal(headers: &HeaderMap) -> bool {
    headers.contains_key(http::header::AUTHORIZATION)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn headers(pairs: &[(&'static str, &'static str)]) -> HeaderMap {
        let mut headers = HeaderMap::new();
        for (name, value) in pairs {
            headers.append(*name, HeaderValue::from_static(value));
        }
        headers
    }

    #[test]
    fn v1_and_v2_headers_name_one_device() {
        let v2 = Device::of(&headers(&[
            ("snap-device-series", "16"),
            ("snap-device-architecture", "amd64"),
            ("snap-classic", "true"),
            ("snap-device-capabilities", "default-tracks"),
        ]));
        let v1 = Device::of(&headers(&[
            ("x-ubuntu-series", "16"),
            ("x-ubuntu-architecture", "amd64"),
            ("x-ubuntu-classic", "true"),
            ("snap-device-capabilities", "default-tracks"),
        ]));
        assert_eq!(v1.key(), v2.key());
        assert_eq!(v2.key(), "16/amd64/global/true/default-tracks");
    }

    #[test]
    fn what_changes_the_answer_changes_the_key_and_nothing_else_does() {
        let base = [("snap-device-series", "16"), ("snap-device-architecture", "amd64")];
        let key = Device::of(&headers(&base)).key();
        let arm = Device::of(&headers(&[("snap-device-series", "16"), ("snap-device-architecture", "arm64")]));
        assert_ne!(arm.key(), key);
        let brand = Device::of(&headers(&[base[0], base[1], ("snap-device-store", "acme/../x")]));
        assert_eq!(brand.scope(), "store=acme%2F..%2Fx", "no slash reaches a key");
        let noise = [base[0], base[1], ("user-agent", "snapd/2.57"), ("snap-refresh-reason", "scheduled")];
        assert_eq!(Device::of(&headers(&noise)).key(), key);
    }

    #[test]
    fn capabilities_in_any_order_are_one_set() {
        let a = Device::of(&headers(&[("snap-device-capabilities", "b, a")]));
        let b = Device::of(&headers(&[("snap-device-capabilities", "a,b")]));
        assert_eq!(a.capabilities, ["a", "b"]);
        assert_eq!(a.key(), b.key());
    }

    #[test]
    fn a_user_s_authorization_is_personal_and_the_device_s_is_not() {
        assert!(is_personal(&headers(&[("authorization", "Macaroon root=x")])));
        assert!(!is_personal(&headers(&[("snap-device-authorization", "Macaroon root=y")])));
    }
}
