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
        Self::for_names(&["127.0.0.1"])
    }

    /// A new certificate for `names` (host names or IP addresses).
    pub fn for_names(names: &[&str]) -> SelfSigned {
        let names: Vec<String> = names.iter().map(|name| name.to_string()).collect();
        let certified = rcgen::generate_simple_self_signed(names).expect("a certificate");
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

/// A TLS server with a certificate its clients trust, standing for a
/// stranger's server: it counts the connections it gets and answers every
/// request with the same bytes.
pub struct TlsTrap {
    certificate: SelfSigned,
    connections: Arc<std::sync::atomic::AtomicUsize>,
    accepting: tokio::task::JoinHandle<()>,
}

impl TlsTrap {
    /// Listens on `addr` (any loopback address) with `certificate` (made
    /// before, so that a client can be told to trust it before it knows
    /// the port), answering `body` to every request.
    pub async fn listen(certificate: SelfSigned, addr: std::net::SocketAddr, body: &'static [u8]) -> TlsTrap {
        use tokio::io::{AsyncReadExt, AsyncWriteExt};
        let listener = tokio::net::TcpListener::bind(addr).await.expect("bind the trap");
        let connections = Arc::new(std::sync::atomic::AtomicUsize::new(0));
        let (acceptor, counted) = (certificate.acceptor.clone(), Arc::clone(&connections));
        let accepting = tokio::spawn(async move {
            while let Ok((stream, _)) = listener.accept().await {
                counted.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
                let acceptor = acceptor.clone();
                tokio::spawn(async move {
                    let Ok(mut tls) = acceptor.accept(stream).await else { return };
                    let mut head = vec![0u8; 64 * 1024];
                    let _ = tls.read(&mut head).await;
                    let answer = format!("HTTP/1.1 200 OK\r\nContent-Length: {}\r\n\r\n", body.len());
                    let _ = tls.write_all(&[answer.as_bytes(), body].concat()).await;
                    let _ = tls.shutdown().await;
                });
            }
        });
        TlsTrap { certificate, connections, accepting }
    }

    /// The certificate to trust (e.g. with `SSL_CERT_FILE`).
    pub fn pem(&self) -> PathBuf {
        self.certificate.pem()
    }

    /// How many connections it got.
    pub fn connections(&self) -> usize {
        self.connections.load(std::sync::atomic::Ordering::SeqCst)
    }
}

impl Drop for TlsTrap {
    fn drop(&mut self) {
        self.accepting.abort();
    }
}
