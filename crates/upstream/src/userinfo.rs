//! Credentials written into an instance's URL (`https://user:token@host/`,
//! as GOPROXY takes them for a private Athens or Artifactory): taken out of
//! the URL when the pool is made, so that the URL a pool shows, logs,
//! counts and names in its errors never carries them, and sent as that
//! instance's Basic authorization, to it alone (a redirect elsewhere and
//! every other instance go without).

use base64::Engine;
use http::HeaderValue;
use percent_encoding::percent_decode_str;

/// An instance URL with its credentials apart.
#[derive(Clone, PartialEq, Eq)]
pub struct InstanceUrl {
    /// The URL without user information: what may be shown.
    pub url: String,
    /// `Basic` of the user information, if the URL had any (marked
    /// sensitive: never logged by the HTTP stack).
    pub authorization: Option<HeaderValue>,
}

impl std::fmt::Debug for InstanceUrl {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let authorization = self.authorization.as_ref().map(|_| "<redacted>");
        f.debug_struct("InstanceUrl").field("url", &self.url).field("authorization", &authorization).finish()
    }
}

/// `url` with its user information taken out, as Basic credentials:
/// `user:password`, each percent-decoded (a token may hold `@` or `:`
/// written as `%40`, `%3A`).
pub fn split(url: &str) -> InstanceUrl {
    let Some((scheme, rest)) = url.split_once("://") else {
        return InstanceUrl { url: url.to_string(), authorization: None };
    };
    let authority_end = rest.find(['/', '?', '#']).unwrap_or(rest.len());
    let (authority, path) = rest.split_at(authority_end);
    let Some((userinfo, host)) = authority.rsplit_once('@') else {
        return InstanceUrl { url: url.to_string(), authorization: None };
    };
    let (user, password) = userinfo.split_once(':').unwrap_or((userinfo, ""));
    let decoded = |part: &str| percent_decode_str(part).decode_utf8_lossy().into_owned();
    let basic = base64::engine::general_purpose::STANDARD.encode(format!("{}:{}", decoded(user), decoded(password)));
    let authorization = HeaderValue::from_str(&format!("Basic {basic}")).ok().map(|mut value| {
        value.set_sensitive(true);
        value
    });
    InstanceUrl { url: format!("{scheme}://{host}{path}"), authorization }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn basic(credentials: &str) -> HeaderValue {
        let encoded = base64::engine::general_purpose::STANDARD.encode(credentials);
        HeaderValue::from_str(&format!("Basic {encoded}")).unwrap()
    }

    #[test]
    fn user_information_becomes_basic_credentials_and_leaves_the_url() {
        let split = split("https://gouser:GO-TOKEN@proxy.corp.example:8443/goproxy");
        assert_eq!(split.url, "https://proxy.corp.example:8443/goproxy");
        assert_eq!(split.authorization, Some(basic("gouser:GO-TOKEN")));
        assert!(split.authorization.unwrap().is_sensitive());
        assert!(!format!("{:?}", self::split("http://u:SECRET@h/")).contains("SECRET"));
    }

    #[test]
    fn encoded_tokens_a_user_alone_and_urls_without_credentials() {
        let encoded = split("http://ci%40corp:to%3Aken%40x@mirror.lan/debian?x=@y");
        assert_eq!(encoded.url, "http://mirror.lan/debian?x=@y");
        assert_eq!(encoded.authorization, Some(basic("ci@corp:to:ken@x")));
        assert_eq!(split("http://token@mirror.lan").authorization, Some(basic("token:")));
        let plain = split("http://mirror.lan/a@b");
        assert_eq!((plain.url.as_str(), plain.authorization), ("http://mirror.lan/a@b", None));
    }
}
