//! Checks of a module download before it is cached: a `.zip` must be a
//! module zip of its module and version, and a `.zip` or `.mod` must hash
//! to what the checksum database says, when it said anything.

use pkgproxy_cache::{BodyHashes, BodyReader, Verifier};
use std::io::Read;

use super::dirhash::{check_zip, hash_mod};

/// The most a `.mod` file may hold.
const MAX_MOD: u64 = 16 << 20;

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
