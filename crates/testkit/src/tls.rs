//! A self-signed certificate for 127.0.0.1, for test servers that speak
//! TLS, and the PEM file a client trusts it by (e.g. with `SSL_CERT_FILE`).

use std::path::PathBuf;
use std::sync::Arc;

use tokio_rustls::TlsAcceptor;

/// A fresh certificate and the server side of TLS with it.
pub struct SelfSigned {
    /// Accepts TLS connections with the certificate.
    pub acceptor: TlsAcceptor,
    folder: tempfile::TempDir,
}

impl SelfSigned {
    /// A new certificate for 127.0.0.1.
    pub fn new() -> SelfSigned {
        let certified = rcgen::generate_simple_self_signed(vec!["127.0.0.1".to_string()]).expect("a certificate");
        let folder = tempfile::tempdir().expect("temp dir");
        std::fs::write(folder.path().join("ca.pem"), certified.cert.pem()).expect("write the certificate");
        let key = rustls::pki_types::PrivateKeyDer::Pkcs8(certified.signing_key.serialize_der().into());
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let config = rustls::ServerConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
            .expect("TLS versions")
            .with_no_client_auth()
            .with_single_cert(vec![certified.cert.der().clone()], key)
            .expect("a server certificate");
        SelfSigned { acceptor: TlsAcceptor::from(Arc::new(config)), folder }
    }

    /// The certificate as a PEM file.
    pub fn pem(&self) -> PathBuf {
        self.folder.path().join("ca.pem")
    }
}

impl Default for SelfSigned {
    fn default() -> Self {
        Self::new()
    }
}
