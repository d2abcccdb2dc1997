//! TLS on the proxy listener, beside plain HTTP on the same port: a
//! connection whose first byte is `0x16` (a TLS handshake record) is TLS,
//! anything else plain HTTP. Registry clients often want `https://`
//! mirrors, and `lxc remote add` takes only `https://` simplestreams
//! remotes; apt, go and snap keep working in clear on the same port.
//!
//! The certificate is `[server] tls_cert` and `tls_key` when given, else
//! one made at first start and kept in the state folder (`tls/cert.pem`,
//! `tls/key.pem`), self-signed for the name `pkgproxy`, `localhost`, this
//! host's name and the loopback addresses, so a client that pins it (setup
//! scripts fetch it from `GET /pkgproxy/v1/certificate.pem` in clear)
//! accepts it whatever address it reaches pkgproxy by.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use tokio_rustls::TlsAcceptor;

/// The first byte of a TLS connection: a handshake record.
pub const HANDSHAKE: u8 = 0x16;

/// Where the listener's certificate comes from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Source {
    /// Made at first start and kept under this folder.
    Kept(PathBuf),
    /// Given: the certificate chain and the key, PEM files.
    Given {
        /// The certificate chain.
        cert: PathBuf,
        /// The private key.
        key: PathBuf,
    },
}

/// TLS on the listener: the acceptor and the certificate, as PEM.
#[derive(Clone)]
pub struct ListenerTls {
    /// Accepts TLS connections.
    pub acceptor: TlsAcceptor,
    /// The certificate (chain), PEM, for clients to pin.
    pub certificate_pem: String,
}

impl std::fmt::Debug for ListenerTls {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ListenerTls").finish_non_exhaustive()
    }
}

/// TLS could not be set up.
#[derive(Debug, thiserror::Error)]
pub enum TlsError {
    /// A file could not be read or written.
    #[error("{action} {}: {source}", path.display())]
    Io {
        /// What was done.
        action: &'static str,
        /// The file.
        path: PathBuf,
        /// Why it failed.
        source: std::io::Error,
    },
    /// The certificate or key is not usable.
    #[error("the listener's certificate: {0}")]
    Certificate(String),
}

impl ListenerTls {
    /// The listener's TLS, from `source` (making the certificate if it is
    /// to be kept and is not yet). Blocking.
    pub fn open(source: &Source) -> Result<ListenerTls, TlsError> {
        let (cert_pem, key_pem) = match source {
            Source::Given { cert, key } => (read(cert)?, read(key)?),
            Source::Kept(dir) => kept(dir)?,
        };
        let chain: Vec<CertificateDer<'static>> = CertificateDer::pem_slice_iter(cert_pem.as_bytes())
            .collect::<Result<_, _>>()
            .map_err(|error| TlsError::Certificate(format!("cannot read the certificate: {error}")))?;
        if chain.is_empty() {
            return Err(TlsError::Certificate("the certificate file holds no certificate".into()));
        }
        let key = PrivateKeyDer::from_pem_slice(key_pem.as_bytes())
            .map_err(|error| TlsError::Certificate(format!("cannot read the key: {error}")))?;
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let mut config = rustls::ServerConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
            .map_err(|error| TlsError::Certificate(error.to_string()))?
            .with_no_client_auth()
            .with_single_cert(chain, key)
            .map_err(|error| TlsError::Certificate(error.to_string()))?;
        // HTTP/2 where the client offers it, else HTTP/1.1.
        config.alpn_protocols = vec![b"h2".to_vec(), b"http/1.1".to_vec()];
        Ok(ListenerTls { acceptor: TlsAcceptor::from(Arc::new(config)), certificate_pem: cert_pem })
    }
}

fn read(path: &Path) -> Result<String, TlsError> {
    std::fs::read_to_string(path).map_err(|source| TlsError::Io { action: "cannot read", path: path.into(), source })
}

/// The certificate and key kept under `dir`, made first if need be.
fn kept(dir: &Path) -> Result<(String, String), TlsError> {
    let (cert, key) = (dir.join("cert.pem"), dir.join("key.pem"));
    if cert.exists() && key.exists() {
        return Ok((read(&cert)?, read(&key)?));
    }
    let made = rcgen::generate_simple_self_signed(names()).map_err(|error| TlsError::Certificate(error.to_string()))?;
    let (cert_pem, key_pem) = (made.cert.pem(), made.signing_key.serialize_pem());
    let io = |action, path: &Path| {
        let path = path.to_path_buf();
        move |source| TlsError::Io { action, path, source }
    };
    std::fs::create_dir_all(dir).map_err(io("cannot create", dir))?;
    write_private(&key, &key_pem).map_err(io("cannot write", &key))?;
    std::fs::write(&cert, &cert_pem).map_err(io("cannot write", &cert))?;
    tracing::info!(cert = %cert.display(), "made the listener's TLS certificate");
    Ok((cert_pem, key_pem))
}

/// Writes `text` readable by its owner only.
fn write_private(path: &Path, text: &str) -> std::io::Result<()> {
    use std::io::Write;
    use std::os::unix::fs::OpenOptionsExt;
    let mut file = std::fs::OpenOptions::new().write(true).create(true).truncate(true).mode(0o600).open(path)?;
    file.write_all(text.as_bytes())?;
    file.sync_all()
}

/// The names the made certificate is for.
fn names() -> Vec<String> {
    let mut names = vec!["pkgproxy".to_string(), "localhost".to_string(), "127.0.0.1".to_string(), "::1".to_string()];
    if let Ok(host) = std::fs::read_to_string("/proc/sys/kernel/hostname") {
        let host = host.trim().to_ascii_lowercase();
        if !host.is_empty() && !names.contains(&host) {
            names.push(host);
        }
    }
    names
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_made_certificate_is_kept_and_the_same_one_is_used_after_a_restart() {
        let dir = tempfile::tempdir().unwrap();
        let first = ListenerTls::open(&Source::Kept(dir.path().join("tls"))).unwrap();
        let again = ListenerTls::open(&Source::Kept(dir.path().join("tls"))).unwrap();
        assert_eq!(first.certificate_pem, again.certificate_pem);
        assert!(first.certificate_pem.starts_with("-----BEGIN CERTIFICATE-----"));
        let mode = std::os::unix::fs::PermissionsExt::mode(
            &std::fs::metadata(dir.path().join("tls/key.pem")).unwrap().permissions(),
        );
        assert_eq!(mode & 0o777, 0o600, "the key is its owner's only");
    }

    #[test]
    fn a_given_certificate_is_used_and_a_broken_one_is_a_clear_error() {
        let dir = tempfile::tempdir().unwrap();
        let made = rcgen::generate_simple_self_signed(vec!["proxy.lan".into()]).unwrap();
        let (cert, key) = (dir.path().join("c.pem"), dir.path().join("k.pem"));
        std::fs::write(&cert, made.cert.pem()).unwrap();
        std::fs::write(&key, made.signing_key.serialize_pem()).unwrap();
        let given = ListenerTls::open(&Source::Given { cert: cert.clone(), key: key.clone() }).unwrap();
        assert_eq!(given.certificate_pem, made.cert.pem());
        std::fs::write(&key, "not a key").unwrap();
        let error = ListenerTls::open(&Source::Given { cert, key }).unwrap_err().to_string();
        assert!(error.contains("cannot read the key"), "{error}");
        let missing = ListenerTls::open(&Source::Given { cert: dir.path().join("none"), key: dir.path().join("none") });
        assert!(missing.unwrap_err().to_string().contains("cannot read"));
    }
}
