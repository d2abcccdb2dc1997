//! TLS to `https://` upstreams and shadow targets: rustls with the
//! system's root certificates (which honour `SSL_CERT_FILE` and
//! `SSL_CERT_DIR`), read on the first handshake, not at start.

use std::sync::{Arc, OnceLock};

use rustls::pki_types::ServerName;
use tokio::net::TcpStream;
use tokio_rustls::client::TlsStream;
use tokio_rustls::TlsConnector;

use crate::error::UpstreamError;

/// The client side of TLS, shared by every connection of a connector.
#[derive(Debug, Clone, Default)]
pub(crate) struct Tls {
    config: Arc<OnceLock<Arc<rustls::ClientConfig>>>,
}

impl Tls {
    fn config(&self) -> Arc<rustls::ClientConfig> {
        Arc::clone(self.config.get_or_init(|| Arc::new(client_config())))
    }

    /// Shakes hands with `host` over `stream`, verifying its certificate.
    pub(crate) async fn handshake(&self, host: &str, stream: TcpStream) -> Result<TlsStream<TcpStream>, UpstreamError> {
        let name = ServerName::try_from(host.to_string())
            .map_err(|_| UpstreamError::BadTarget { uri: host.to_string(), reason: "not a TLS server name" })?;
        TlsConnector::from(self.config())
            .connect(name, stream)
            .await
            .map_err(|source| UpstreamError::Tls { host: host.to_string(), source })
    }
}

fn client_config() -> rustls::ClientConfig {
    let mut roots = rustls::RootCertStore::empty();
    let found = rustls_native_certs::load_native_certs();
    for error in &found.errors {
        tracing::warn!(%error, "cannot read a root certificate");
    }
    let (added, ignored) = roots.add_parsable_certificates(found.certs);
    if added == 0 {
        tracing::warn!(ignored, "no root certificates found: https upstreams will fail verification");
    }
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let mut config = rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .expect("ring supports the default TLS versions")
        .with_root_certificates(roots)
        .with_no_client_auth();
    config.alpn_protocols = vec![b"http/1.1".to_vec()];
    config
}
