//! A registry's `config.json`: what the upstream's says (where its crates
//! are downloaded, its API, whether it wants credentials), and the one
//! pkgproxy serves in its place, whose `dl` points at pkgproxy and names
//! each crate's SHA-256, so every download says what it must be.

use serde_json::{json, Value};

use crate::decision::Origin;

/// The markers a `dl` template may hold; with none, cargo appends
/// `/{crate}/{version}/download`.
const MARKERS: [&str; 5] = ["{crate}", "{version}", "{prefix}", "{lowerprefix}", "{sha256-checksum}"];

/// What a registry's own `config.json` says.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UpstreamConfig {
    /// Where its crates are downloaded: a URL, or a template of one.
    pub dl: String,
    /// Its web API (publish, search, owners), passed on as it is.
    pub api: Option<String>,
    /// Whether cargo must send credentials with every request.
    pub auth_required: bool,
}

impl UpstreamConfig {
    /// `body`, a registry's `config.json`; `None` when it is not one (no
    /// `dl`, or a `dl` that is not an `http(s)` URL).
    pub fn parse(body: &[u8]) -> Option<UpstreamConfig> {
        let config: Value = serde_json::from_slice(body).ok()?;
        let dl = config.get("dl")?.as_str()?.trim().to_owned();
        if !(dl.starts_with("https://") || dl.starts_with("http://")) {
            return None;
        }
        let api = config.get("api").and_then(Value::as_str).map(str::to_owned);
        let auth_required = config.get("auth-required").and_then(Value::as_bool).unwrap_or(false);
        Some(UpstreamConfig { dl, api, auth_required })
    }

    /// Where the upstream serves version `version` of crate `name` (as the
    /// index names it) of SHA-256 `sha256`, for the pool `pool`: the `dl`
    /// template expanded as cargo expands it.
    pub fn download(&self, pool: &str, name: &str, version: &str, sha256: &str) -> Option<Origin> {
        let url = match MARKERS.iter().any(|marker| self.dl.contains(marker)) {
            true => self
                .dl
                .replace("{crate}", name)
                .replace("{version}", version)
                .replace("{prefix}", &index_prefix(name))
                .replace("{lowerprefix}", &index_prefix(&name.to_ascii_lowercase()))
                .replace("{sha256-checksum}", sha256),
            false => format!("{}/{name}/{version}/download", self.dl.trim_end_matches('/')),
        };
        let (scheme, rest) = url.split_once("://")?;
        let (authority, path) = match rest.find('/') {
            Some(slash) => (&rest[..slash], &rest[slash..]),
            None => (rest, "/"),
        };
        if authority.is_empty() {
            return None;
        }
        Some(Origin {
            pool: pool.to_owned(),
            instances: vec![format!("{scheme}://{authority}")],
            path: path.to_owned(),
        })
    }
}

/// The folder of the index that holds crate `name`'s file, as cargo's
/// `{prefix}` marker names it: `1`, `2`, `3/a`, `ab/cd`.
pub fn index_prefix(name: &str) -> String {
    match name.len() {
        1 => "1".to_owned(),
        2 => "2".to_owned(),
        3 => format!("3/{}", &name[..1]),
        _ => format!("{}/{}", &name[..2], &name[2..4]),
    }
}

/// The `config.json` pkgproxy serves for a registry mounted at `base`
/// (`http://HOST:PORT/cargo`, or `.../cargo/NAME`), with what the
/// upstream's says of its API and credentials, when known.
pub fn served(base: &str, upstream: Option<&UpstreamConfig>) -> Vec<u8> {
    let mut config = json!({ "dl": format!("{base}/crates/{{crate}}/{{version}}/{{sha256-checksum}}") });
    if let Some(api) = upstream.and_then(|upstream| upstream.api.as_ref()) {
        config["api"] = json!(api);
    }
    if upstream.is_some_and(|upstream| upstream.auth_required) {
        config["auth-required"] = json!(true);
    }
    let mut body = serde_json::to_vec_pretty(&config).unwrap_or_default();
    body.push(b'\n');
    body
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_registry_s_config_says_where_crates_are_and_what_it_wants() {
        let crates_io = UpstreamConfig::parse(br#"{"dl":"https://static.crates.io/crates","api":"https://crates.io"}"#);
        let crates_io = crates_io.unwrap();
        assert_eq!(crates_io.api.as_deref(), Some("https://crates.io"));
        assert!(!crates_io.auth_required);
        let private = br#"{"dl":"https://corp.example/dl/{crate}","auth-required":true}"#;
        assert!(UpstreamConfig::parse(private).unwrap().auth_required);
        for bad in [&b"{}"[..], br#"{"dl":"ftp://x/y"}"#, b"not json", br#"{"dl":7}"#] {
            assert_eq!(UpstreamConfig::parse(bad), None);
        }
    }

    #[test]
    fn a_download_url_is_the_template_expanded_as_cargo_expands_it() {
        let plain = UpstreamConfig { dl: "https://static.crates.io/crates/".into(), api: None, auth_required: false };
        let origin = plain.download("p", "Serde", "1.0.0", "ab").unwrap();
        assert_eq!(origin.instances, ["https://static.crates.io"]);
        assert_eq!(origin.path, "/crates/Serde/1.0.0/download");
        let template = UpstreamConfig {
            dl: "http://127.0.0.1:9/c/{lowerprefix}/{prefix}/{crate}-{version}.crate?sha={sha256-checksum}".into(),
            api: None,
            auth_required: false,
        };
        let origin = template.download("p", "Serde", "1.0.0", "ab").unwrap();
        assert_eq!(origin.instances, ["http://127.0.0.1:9"]);
        assert_eq!(origin.path, "/c/se/rd/Se/rd/Serde-1.0.0.crate?sha=ab");
        assert_eq!(index_prefix("a"), "1");
        assert_eq!(index_prefix("ab"), "2");
        assert_eq!(index_prefix("abc"), "3/a");
        assert_eq!(index_prefix("abcd"), "ab/cd");
    }

    #[test]
    fn pkgproxy_s_config_points_at_itself_and_keeps_the_api_and_credentials() {
        let upstream = UpstreamConfig {
            dl: "https://corp.example/dl".into(),
            api: Some("https://corp.example".into()),
            auth_required: true,
        };
        let served: Value =
            serde_json::from_slice(&served("http://cache.lan:3142/cargo/corp", Some(&upstream))).unwrap();
        assert_eq!(served["dl"], "http://cache.lan:3142/cargo/corp/crates/{crate}/{version}/{sha256-checksum}");
        assert_eq!(served["api"], "https://corp.example");
        assert_eq!(served["auth-required"], true);
        let alone: Value = serde_json::from_slice(&super::served("http://h/cargo", None)).unwrap();
        assert_eq!(alone, json!({"dl": "http://h/cargo/crates/{crate}/{version}/{sha256-checksum}"}));
    }
}
