//! A SHA-1 made as a body streams, for what is given only a SHA-1 to be
//! checked against (an old npm version's `shasum`, a Maven repository's
//! `.sha1`).

use pkgproxy_cache::StreamingCheck;
use sha1::{Digest, Sha1};

/// The check of a body whose SHA-1 must be `expected`.
pub struct Sha1Check {
    expected: String,
    hasher: Sha1,
    /// What the body is, for the error (`left@1.0.0`).
    name: String,
    /// Who gave the SHA-1, for the error (`its document`).
    given_by: &'static str,
}

impl Sha1Check {
    /// A check that the body of `name` hashes to `expected` (lower-case
    /// hex), as `given_by` says.
    pub fn new(expected: String, name: String, given_by: &'static str) -> Sha1Check {
        Sha1Check { expected, hasher: Sha1::new(), name, given_by }
    }
}

impl StreamingCheck for Sha1Check {
    fn update(&mut self, bytes: &[u8]) {
        self.hasher.update(bytes);
    }

    fn verdict(self: Box<Self>) -> Result<(), String> {
        let got = hex::encode(self.hasher.finalize());
        match got == self.expected {
            true => Ok(()),
            false => Err(format!("{} has SHA-1 {got}, {} says {}", self.name, self.given_by, self.expected)),
        }
    }
}
