//! Checks of a module download before it is cached: a `.zip` must be a
//! module zip of its module and version, and a `.zip` or `.mod` must hash
//! to what the checksum database says, when it said anything. What names
//! versions (`@v/list`, `.info`, `@latest`) has no hash to meet, but must
//! be what the protocol says it is, and small: a hostile proxy cannot fill
//! the cache with one request.

use pkgproxy_cache::{BodyHashes, BodyReader, Verifier};
use std::io::Read;

use super::dirhash::{check_zip, hash_mod};

/// The most a `.mod` file may hold.
const MAX_MOD: u64 = 16 << 20;
/// The most an `@v/list` may hold (a version a line: tens of thousands).
const MAX_LIST: u64 = 4 << 20;
/// The most a `.info` or `@latest` may hold (a version and a time, in JSON).
const MAX_INFO: u64 = 64 << 10;

/// The checks of a file that names versions.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum VersionsVerifier {
    /// `@v/list`: a version a line.
    List,
    /// `.info` or `@latest`: `{"Version": "v...", "Time": ...}`.
    Info,
}

impl Verifier for VersionsVerifier {
    /// Small files: the client waits for the verdict.
    fn judges_body(&self) -> bool {
        true
    }

    fn check(&self, body: &mut BodyReader<'_>, _hashes: &BodyHashes) -> Result<(), String> {
        let (limit, what) = match self {
            VersionsVerifier::List => (MAX_LIST, "an @v/list"),
            VersionsVerifier::Info => (MAX_INFO, "a version's .info"),
        };
        let mut content = Vec::new();
        body.take(limit + 1).read_to_end(&mut content).map_err(|e| e.to_string())?;
        if content.len() as u64 > limit {
            return Err(format!("{what} over {limit} bytes"));
        }
        let text = std::str::from_utf8(&content).map_err(|_| format!("{what} that is not UTF-8"))?;
        match self {
            VersionsVerifier::List => match text.lines().map(str::trim).find(|line| !is_version_line(line)) {
                Some(line) => Err(format!("{what} with a line that is not a version: {:?}", truncated(line))),
                None => Ok(()),
            },
            VersionsVerifier::Info => {
                let info: serde_json::Value =
                    serde_json::from_str(text).map_err(|_| format!("{what} that is not JSON"))?;
                match info.get("Version").and_then(serde_json::Value::as_str) {
                    Some(version) if is_version_line(version) && !version.is_empty() => Ok(()),
                    _ => Err(format!("{what} without a Version")),
                }
            }
        }
    }
}

/// Whether `line` of an `@v/list` is a version (`v1.2.3`, a pre-release,
/// `+incompatible`) or empty.
fn is_version_line(line: &str) -> bool {
    line.is_empty()
        || (line.starts_with('v')
            && line.len() <= 256
            && line.bytes().all(|b| b.is_ascii_alphanumeric() || b".-+_~".contains(&b)))
}

/// The first few characters of `text`, for an error.
fn truncated(text: &str) -> String {
    text.chars().take(40).collect()
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    Zip,
    GoMod,
}

/// The checks of one `.zip` or `.mod`.
#[derive(Debug, Clone)]
pub struct GoVerifier {
    module: String,
    version: String,
    kind: Kind,
    /// The `h1:` hash the checksum database gave.
    expected: Option<String>,
}

impl GoVerifier {
    /// For `module@version`'s zip.
    pub fn zip(module: String, version: String, expected: Option<String>) -> Self {
        GoVerifier { module, version, kind: Kind::Zip, expected }
    }

    /// For `module@version`'s `.mod`.
    pub fn gomod(module: String, version: String, expected: Option<String>) -> Self {
        GoVerifier { module, version, kind: Kind::GoMod, expected }
    }
}

impl Verifier for GoVerifier {
    /// The client waits for the verdict: the go command then gets a
    /// verified module or a clear error, never a transfer cut short.
    fn judges_body(&self) -> bool {
        true
    }

    fn check(&self, body: &mut BodyReader<'_>, _hashes: &BodyHashes) -> Result<(), String> {
        let actual = match self.kind {
            Kind::Zip => check_zip(body, &self.module, &self.version)?,
            Kind::GoMod => {
                let mut content = Vec::new();
                body.take(MAX_MOD + 1).read_to_end(&mut content).map_err(|e| e.to_string())?;
                if content.len() as u64 > MAX_MOD {
                    return Err(format!("a go.mod over {MAX_MOD} bytes"));
                }
                hash_mod(&content)
            }
        };
        match &self.expected {
            Some(expected) if *expected != actual => {
                tracing::warn!(
                    module = self.module,
                    version = self.version,
                    actual,
                    "a module file fails its checksum"
                );
                Err(format!(
                    "{}@{} does not hash to {expected}, as the checksum database says",
                    self.module, self.version
                ))
            }
            _ => Ok(()),
        }
    }
}

#[cfg(test)]
mod tests {
    use std::io::Write;

    use super::*;

    fn judged(verifier: VersionsVerifier, body: &[u8]) -> Result<(), String> {
        let mut file = tempfile::tempfile().unwrap();
        file.write_all(body).unwrap();
        let hashes = BodyHashes { sha256: String::new(), sha512: None, size: body.len() as u64 };
        verifier.check(&mut BodyReader::new(&file), &hashes)
    }

    #[test]
    fn a_list_is_versions_a_line_and_an_info_names_its_version() {
        assert!(judged(VersionsVerifier::List, b"v1.0.0\nv1.1.0-rc.1\nv2.0.0+incompatible\n").is_ok());
        assert!(judged(VersionsVerifier::List, b"").is_ok(), "a module with no tagged version");
        assert!(judged(VersionsVerifier::List, b"v1.0.0\n<html>oops</html>\n").is_err());
        assert!(judged(VersionsVerifier::List, &vec![b'v'; (MAX_LIST + 1) as usize]).is_err(), "bounded");
        let info = br#"{"Version":"v1.0.0","Time":"2024-01-01T00:00:00Z"}"#;
        assert!(judged(VersionsVerifier::Info, info).is_ok());
        assert!(judged(VersionsVerifier::Info, b"not json").is_err());
        assert!(judged(VersionsVerifier::Info, br#"{"Time":"2024-01-01T00:00:00Z"}"#).is_err());
        assert!(judged(VersionsVerifier::Info, br#"{"Version":"1.0 <script>"}"#).is_err());
        let padded = format!(r#"{{"Version":"v1.0.0","Pad":"{}"}}"#, "x".repeat(MAX_INFO as usize));
        assert!(judged(VersionsVerifier::Info, padded.as_bytes()).is_err(), "bounded");
    }
}
