//! Who wrote a bundle. The manifest names every blob by its SHA-256, so a
//! signature over the manifest's SHA-256 covers the whole bundle; it is an
//! Ed25519 signature by a key the exporting admin made (`pkgproxyctl
//! keygen`), checked by the importing pkgproxy against the public keys it
//! is told to trust (`[bundles] trusted_keys`). An unkeyed hash proves
//! only that nothing broke on the way: whoever changes a bundle on purpose
//! recomputes it. A signature cannot be recomputed without the key.
//!
//! The files: the private key is a PKCS#8 document in PEM (`-----BEGIN
//! PRIVATE KEY-----`, as openssl writes Ed25519 keys); the public key is
//! one line, `ed25519:<base64>`, which is also how a configuration names
//! it. The signature, `pkgproxy-bundle.json.sig` in the tar, is a small
//! JSON object naming the key and holding the signature.

use std::fmt;
use std::path::Path;

use base64::engine::general_purpose::STANDARD as BASE64;
use base64::Engine;
use ring::signature::{Ed25519KeyPair, KeyPair, UnparsedPublicKey, ED25519};
use serde::{Deserialize, Serialize};

/// What is signed: this, then the manifest's SHA-256 in lower-case hex.
const SIGNED_PREFIX: &str = "pkgproxy bundle manifest sha256 ";
/// How a public key is written.
const PUBLIC_PREFIX: &str = "ed25519:";
/// The PEM armour of a private key.
const PEM_BEGIN: &str = "-----BEGIN PRIVATE KEY-----";
const PEM_END: &str = "-----END PRIVATE KEY-----";
/// The largest signature entry read.
pub const SIGNATURE_LIMIT: u64 = 4096;

/// Why a key or a signature cannot be used.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SignatureError {
    /// A key that cannot be read.
    #[error("{0}")]
    Key(String),
    /// A signature entry that cannot be read.
    #[error("its signature cannot be read: {0}")]
    Unreadable(String),
    /// A signature that does not hold.
    #[error("its signature by {0} does not match its manifest: the bundle was changed after it was signed")]
    Forged(PublicKey),
    /// Signed by a key this pkgproxy does not trust.
    #[error("it is signed by {0}, which is not among [bundles] trusted_keys")]
    Untrusted(PublicKey),
    /// Not signed at all.
    #[error(
        "it is not signed: sign it (pkgproxyctl export --sign KEY), or take it on its word (import --trust-unsigned)"
    )]
    Unsigned,
}

/// A public key that checks bundles' signatures.
#[derive(Clone, PartialEq, Eq, Hash)]
pub struct PublicKey([u8; 32]);

impl PublicKey {
    /// `text` as written in a `.pub` file or a configuration:
    /// `ed25519:<base64 of the 32 bytes>`.
    pub fn parse(text: &str) -> Result<PublicKey, SignatureError> {
        let bad = || SignatureError::Key(format!("{:?} is not a public key (ed25519:<base64>)", short(text)));
        let encoded = text.trim().strip_prefix(PUBLIC_PREFIX).ok_or_else(bad)?;
        let bytes = BASE64.decode(encoded).map_err(|_| bad())?;
        Ok(PublicKey(bytes.try_into().map_err(|_| bad())?))
    }

    /// A trusted key as a configuration names it: the key itself, or the
    /// path of a file holding it (a `.pub` file `keygen` wrote).
    pub fn named(entry: &str) -> Result<PublicKey, SignatureError> {
        if entry.trim().starts_with(PUBLIC_PREFIX) {
            return PublicKey::parse(entry);
        }
        let text = std::fs::read_to_string(entry)
            .map_err(|error| SignatureError::Key(format!("cannot read the public key {entry}: {error}")))?;
        PublicKey::parse(&text).map_err(|_| SignatureError::Key(format!("{entry} holds no public key")))
    }

    fn verifies(&self, message: &[u8], signature: &[u8]) -> bool {
        UnparsedPublicKey::new(&ED25519, &self.0).verify(message, signature).is_ok()
    }
}

impl fmt::Display for PublicKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{PUBLIC_PREFIX}{}", BASE64.encode(self.0))
    }
}

impl fmt::Debug for PublicKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(self, f)
    }
}

/// A key that signs bundles.
pub struct SigningKey(Ed25519KeyPair);

impl fmt::Debug for SigningKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "SigningKey({})", self.public())
    }
}

/// A new key pair: the private key's PEM text, and its public key.
pub fn generate() -> Result<(String, PublicKey), SignatureError> {
    let random = ring::rand::SystemRandom::new();
    let document = Ed25519KeyPair::generate_pkcs8(&random)
        .map_err(|_| SignatureError::Key("the system's random numbers could not be read".to_owned()))?;
    let key = SigningKey::from_pkcs8(document.as_ref())?;
    Ok((pem(document.as_ref()), key.public()))
}

impl SigningKey {
    /// The key in the PEM file at `path`.
    pub fn read(path: &Path) -> Result<SigningKey, SignatureError> {
        let text = std::fs::read_to_string(path)
            .map_err(|error| SignatureError::Key(format!("cannot read the key {}: {error}", path.display())))?;
        let not_a_key = || SignatureError::Key(format!("{} is not an Ed25519 private key in PEM", path.display()));
        let inside = text.split_once(PEM_BEGIN).and_then(|(_, rest)| rest.split_once(PEM_END)).ok_or_else(not_a_key)?;
        let encoded: String = inside.0.split_whitespace().collect();
        let document = BASE64.decode(encoded).map_err(|_| not_a_key())?;
        SigningKey::from_pkcs8(&document).map_err(|_| not_a_key())
    }

    fn from_pkcs8(document: &[u8]) -> Result<SigningKey, SignatureError> {
        Ed25519KeyPair::from_pkcs8_maybe_unchecked(document)
            .map(SigningKey)
            .map_err(|_| SignatureError::Key("not an Ed25519 key".to_owned()))
    }

    /// Its public key.
    pub fn public(&self) -> PublicKey {
        let mut bytes = [0u8; 32];
        bytes.copy_from_slice(self.0.public_key().as_ref());
        PublicKey(bytes)
    }

    /// The signature entry of the bundle whose manifest has `sha256` (hex).
    pub fn sign(&self, sha256: &str) -> Vec<u8> {
        let signature = self.0.sign(&signed(sha256));
        let written = Written { key: self.public().to_string(), signature: BASE64.encode(signature.as_ref()) };
        serde_json::to_vec(&written).expect("a signature serializes")
    }
}

/// The signature entry as written.
#[derive(Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct Written {
    key: String,
    signature: String,
}

/// Which of `trusted` signed the bundle whose manifest has `sha256`, by
/// its signature entry `entry` (`None`: the bundle has none).
pub fn signer(entry: Option<&[u8]>, sha256: &str, trusted: &[PublicKey]) -> Result<PublicKey, SignatureError> {
    let entry = entry.ok_or(SignatureError::Unsigned)?;
    let written: Written =
        serde_json::from_slice(entry).map_err(|error| SignatureError::Unreadable(error.to_string()))?;
    let key = PublicKey::parse(&written.key).map_err(|error| SignatureError::Unreadable(error.to_string()))?;
    let signature =
        BASE64.decode(&written.signature).map_err(|_| SignatureError::Unreadable("not base64".to_owned()))?;
    if !key.verifies(&signed(sha256), &signature) {
        return Err(SignatureError::Forged(key));
    }
    match trusted.contains(&key) {
        true => Ok(key),
        false => Err(SignatureError::Untrusted(key)),
    }
}

fn signed(sha256: &str) -> Vec<u8> {
    format!("{SIGNED_PREFIX}{sha256}").into_bytes()
}

fn pem(document: &[u8]) -> String {
    let encoded = BASE64.encode(document);
    let lines: Vec<&str> = encoded.as_bytes().chunks(64).map(|line| std::str::from_utf8(line).unwrap_or("")).collect();
    format!("{PEM_BEGIN}\n{}\n{PEM_END}\n", lines.join("\n"))
}

/// The start of `text`, for an error message that must not quote a whole
/// file (or a secret pasted in the wrong place).
fn short(text: &str) -> String {
    text.trim().chars().take(16).collect::<String>() + if text.trim().chars().count() > 16 { "..." } else { "" }
}

#[cfg(test)]
mod tests {
    use super::*;

    const SUM: &str = "9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08";

    fn key() -> (tempfile::TempDir, SigningKey, PublicKey) {
        let dir = tempfile::tempdir().unwrap();
        let (pem, public) = generate().unwrap();
        std::fs::write(dir.path().join("key"), pem).unwrap();
        std::fs::write(dir.path().join("key.pub"), format!("{public}\n")).unwrap();
        let key = SigningKey::read(&dir.path().join("key")).unwrap();
        (dir, key, public)
    }

    #[test]
    fn a_signature_holds_for_its_manifest_under_a_trusted_key_only() {
        let (dir, key, public) = key();
        assert_eq!(key.public(), public);
        let by_path = PublicKey::named(dir.path().join("key.pub").to_str().unwrap()).unwrap();
        assert_eq!(by_path, public);
        assert_eq!(PublicKey::named(&public.to_string()).unwrap(), public);

        let entry = key.sign(SUM);
        assert_eq!(signer(Some(&entry), SUM, std::slice::from_ref(&public)), Ok(public.clone()));
        let other = "0".repeat(64);
        assert_eq!(
            signer(Some(&entry), &other, std::slice::from_ref(&public)),
            Err(SignatureError::Forged(public.clone()))
        );
        assert_eq!(signer(Some(&entry), SUM, &[]), Err(SignatureError::Untrusted(public.clone())));
        assert_eq!(signer(None, SUM, std::slice::from_ref(&public)), Err(SignatureError::Unsigned));
        let garbled = String::from_utf8(entry).unwrap().replace("\"signature\":\"", "\"signature\":\"AAAA");
        assert!(signer(Some(garbled.as_bytes()), SUM, &[public]).is_err());
        assert!(matches!(signer(Some(b"not json"), SUM, &[]), Err(SignatureError::Unreadable(_))));
    }

    #[test]
    fn what_is_not_a_key_is_refused_without_quoting_it_whole() {
        let refused = PublicKey::parse("ed25519:c2hvcnQ=").unwrap_err().to_string();
        assert!(refused.contains("is not a public key"), "{refused}");
        let long = format!("ed25519:{}", "A".repeat(100));
        assert!(!PublicKey::parse(&long).unwrap_err().to_string().contains(&"A".repeat(40)));
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("key"), "hello").unwrap();
        assert!(SigningKey::read(&dir.path().join("key")).is_err());
        assert!(PublicKey::named(dir.path().join("missing.pub").to_str().unwrap()).is_err());
        assert!(!format!("{:?}", key().1).contains("PRIVATE"));
    }
}
