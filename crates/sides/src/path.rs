//! Request-path hygiene shared by every side: a path that could climb out of
//! its archive or smuggle bytes is refused before any side looks at it.

use percent_encoding::percent_decode_str;

use crate::decision::Refusal;

/// The longest request path accepted, in bytes (Debian's longest pool paths
/// are a few hundred bytes).
pub const MAX_PATH_LEN: usize = 2048;

/// Checks a raw (percent-encoded) path and returns it decoded.
///
/// Refused with `400`: paths over [`MAX_PATH_LEN`], not starting with `/`,
/// containing a NUL or a backslash (raw or encoded), `.` or `..` segments
/// (raw or encoded, e.g. `%2e%2e`), empty segments, or bytes that do not
/// decode to UTF-8.
pub fn checked_path(raw: &str) -> Result<String, Refusal> {
    if raw.len() > MAX_PATH_LEN {
        return Err(Refusal::bad_request(format!("request path longer than {MAX_PATH_LEN} bytes")));
    }
    if !raw.starts_with('/') {
        return Err(Refusal::bad_request("request path must start with '/'"));
    }
    let decoded = percent_decode_str(raw)
        .decode_utf8()
        .map_err(|_| Refusal::bad_request("request path is not valid UTF-8 once decoded"))?;
    if decoded.contains('\0') {
        return Err(Refusal::bad_request("request path contains a NUL byte"));
    }
    if decoded.contains('\\') {
        return Err(Refusal::bad_request("request path contains a backslash"));
    }
    let segments: Vec<&str> = decoded[1..].split('/').collect();
    let last = segments.len() - 1;
    for (i, segment) in segments.iter().enumerate() {
        match *segment {
            "." | ".." => return Err(Refusal::bad_request("request path contains a '.' or '..' segment")),
            "" if i != last => return Err(Refusal::bad_request("request path contains an empty segment")),
            _ => {}
        }
    }
    Ok(decoded.into_owned())
}

/// An upstream's base URL as configured (`http[s]://host[:port][/prefix]`),
/// without its trailing slash; `Err` says what is wrong with it.
pub fn base_url(url: &str) -> Result<String, &'static str> {
    let uri: http::Uri = url.parse().map_err(|_| "is not a URL")?;
    if !matches!(uri.scheme_str(), Some("http" | "https")) {
        return Err("must start with http:// or https://");
    }
    if uri.host().is_none_or(str::is_empty) {
        return Err("has no host");
    }
    if uri.query().is_some() {
        return Err("must not have a query");
    }
    Ok(url.trim_end_matches('/').to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ordinary_archive_paths_pass_decoded() {
        assert_eq!(
            checked_path("/debian/pool/main/g/gcc/libgcc_12.2.0-14%2bdeb12u1_amd64.deb").unwrap(),
            "/debian/pool/main/g/gcc/libgcc_12.2.0-14+deb12u1_amd64.deb"
        );
        assert_eq!(checked_path("/debian/dists/").unwrap(), "/debian/dists/");
    }

    #[test]
    fn climbing_and_smuggling_paths_are_refused() {
        for raw in [
            "/debian/../etc/passwd",
            "/debian/%2e%2e/etc/passwd",
            "/debian/%2E%2e/x",
            "/debian/./pool",
            "/debian/pool/a%00b",
            "/debian//pool",
            "/debian/pool\\x",
            "/debian/%5c",
            "/debian/%ff",
            "relative",
        ] {
            let refusal = checked_path(raw).unwrap_err();
            assert_eq!(refusal.status, 400, "{raw}");
        }
    }

    #[test]
    fn over_long_paths_are_refused() {
        let long = format!("/debian/pool/{}", "a".repeat(MAX_PATH_LEN));
        assert_eq!(checked_path(&long).unwrap_err().status, 400);
    }
}
