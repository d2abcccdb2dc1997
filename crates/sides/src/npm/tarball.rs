//! What a tarball must hash to: its version's `dist.integrity` (SHA-512,
//! as Subresource Integrity writes it) or, for versions published before
//! integrity existed, `dist.shasum` (SHA-1). The strongest hash given is
//! checked; a tarball no document gives a hash for is not kept.

use base64::Engine;
use pkgproxy_cache::{BodyHashes, BodyReader, Expected, StreamingCheck, Verifier};

use crate::sha1_check::Sha1Check;

use super::document::Dist;

/// What a tarball must hash to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Integrity {
    /// Hex SHA-512.
    Sha512(String),
    /// Hex SHA-1.
    Sha1(String),
}

impl Integrity {
    /// The strongest hash `dist` gives.
    pub fn of(dist: &Dist) -> Option<Integrity> {
        let sri = dist.integrity.as_deref().unwrap_or_default();
        let hashes: Vec<(&str, Vec<u8>)> = sri
            .split_ascii_whitespace()
            .filter_map(|item| {
                let (algorithm, digest) = item.split_once('-')?;
                let digest = digest.split('?').next()?;
                Some((algorithm, base64::engine::general_purpose::STANDARD.decode(digest).ok()?))
            })
            .collect();
        let sri_hash = |algorithm: &str, len: usize| {
            hashes
                .iter()
                .find(|(named, digest)| *named == algorithm && digest.len() == len)
                .map(|(_, d)| hex::encode(d))
        };
        if let Some(sha512) = sri_hash("sha512", 64) {
            return Some(Integrity::Sha512(sha512));
        }
        let shasum = dist.shasum.as_deref().filter(|sum| sum.len() == 40 && hex::decode(sum).is_ok());
        shasum.map(str::to_ascii_lowercase).or_else(|| sri_hash("sha1", 20)).map(Integrity::Sha1)
    }
}

/// The checks of a tarball: the hash its version's document gives.
#[derive(Debug)]
pub struct TarballVerifier {
    /// What it must hash to; `None`: no document said, so it is not kept.
    pub integrity: Option<Integrity>,
    /// The tarball, for the reason of a refusal.
    pub name: String,
}

impl Verifier for TarballVerifier {
    fn expected(&self) -> Expected {
        match &self.integrity {
            Some(Integrity::Sha512(sha512)) => Expected { sha512: Some(sha512.clone()), ..Expected::default() },
            _ => Expected::default(),
        }
    }

    fn streaming_check(&self) -> Option<Box<dyn StreamingCheck>> {
        match &self.integrity {
            Some(Integrity::Sha1(sha1)) => {
                Some(Box::new(Sha1Check::new(sha1.clone(), self.name.clone(), "its document")))
            }
            _ => None,
        }
    }

    fn check(&self, _body: &mut BodyReader<'_>, _hashes: &BodyHashes) -> Result<(), String> {
        match self.integrity {
            Some(_) => Ok(()),
            None => Err(format!("no document of its registry gives {}'s integrity", self.name)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use sha1::{Digest, Sha1};

    fn dist(integrity: Option<&str>, shasum: Option<&str>) -> Dist {
        Dist { tarball: None, integrity: integrity.map(str::to_owned), shasum: shasum.map(str::to_owned) }
    }

    #[test]
    fn the_strongest_hash_given_is_the_one_checked() {
        let sha512 = [7u8; 64];
        let sri = format!("sha1-AAAA sha512-{}", base64::engine::general_purpose::STANDARD.encode(sha512));
        let sum = "a".repeat(40);
        assert_eq!(Integrity::of(&dist(Some(&sri), Some(&sum))), Some(Integrity::Sha512(hex::encode(sha512))));
        assert_eq!(Integrity::of(&dist(None, Some(&sum.to_uppercase()))), Some(Integrity::Sha1(sum.clone())));
        let sha1_sri = format!("sha1-{}", base64::engine::general_purpose::STANDARD.encode([1u8; 20]));
        assert_eq!(Integrity::of(&dist(Some(&sha1_sri), None)), Some(Integrity::Sha1(hex::encode([1u8; 20]))));
        assert_eq!(Integrity::of(&dist(Some("sha512-notbase64!"), Some("short"))), None);
    }

    #[test]
    fn a_sha1_is_checked_as_the_tarball_streams() {
        let verifier =
            TarballVerifier { integrity: Some(Integrity::Sha1(hex::encode(Sha1::digest(b"ab")))), name: "t".into() };
        let mut check = verifier.streaming_check().unwrap();
        check.update(b"a");
        check.update(b"b");
        assert!(check.verdict().is_ok());
        let mut check = verifier.streaming_check().unwrap();
        check.update(b"ac");
        assert!(check.verdict().unwrap_err().contains("SHA-1"));
    }
}
