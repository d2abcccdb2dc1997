//! What a pkgproxy says of itself on its proxy listener, for the setups
//! that need more than its address when `-addr` names it and no daemon is
//! at hand here: the remotes it mounts by name (from its status JSON) and
//! its listener's certificate, which clients pin.

use anyhow::Context;
use bytes::Bytes;
use http_body_util::{BodyExt, Empty};
use hyper_util::rt::TokioIo;
use pkgproxy_control::{Status, CERTIFICATE_PATH, STATUS_PATH};
use pkgproxy_sides::setup::Details;

/// The most of an answer read: a status or a certificate is a few KB.
const ANSWER_LIMIT: usize = 1024 * 1024;

/// The remotes and the certificate of the pkgproxy at `addr`.
pub async fn details(addr: &str) -> anyhow::Result<Details> {
    let status = get(addr, STATUS_PATH).await.context("its status (is its [status] page on?)")?;
    let status: Status =
        serde_json::from_slice(&status).with_context(|| format!("{addr}{STATUS_PATH} is not pkgproxy's status"))?;
    let pem = get(addr, CERTIFICATE_PATH).await.context("its certificate")?;
    let pem = String::from_utf8(pem).context("the certificate is not text")?;
    anyhow::ensure!(pem.contains("-----BEGIN CERTIFICATE-----"), "{addr} answered no certificate");
    Ok(Details { certificate_pem: pem, remotes: status.lxd_remotes })
}

/// The body of `GET path` from the pkgproxy listening at `addr`.
async fn get(addr: &str, path: &str) -> anyhow::Result<Vec<u8>> {
    // pkgproxyctl asking a pkgproxy, not the daemon going upstream: the
    // one way out is the daemon's, this is a client of it.
    #[allow(clippy::disallowed_methods)]
    let stream =
        tokio::net::TcpStream::connect(addr).await.with_context(|| format!("cannot reach pkgproxy at {addr}"))?;
    let (mut sender, connection) = hyper::client::conn::http1::handshake(TokioIo::new(stream)).await?;
    tokio::spawn(connection);
    let request = http::Request::get(path).header(http::header::HOST, addr).body(Empty::<Bytes>::new())?;
    let answer = sender.send_request(request).await.with_context(|| format!("GET http://{addr}{path}"))?;
    let status = answer.status();
    let body = http_body_util::Limited::new(answer.into_body(), ANSWER_LIMIT)
        .collect()
        .await
        .map_err(|error| anyhow::anyhow!("GET http://{addr}{path}: {error}"))?
        .to_bytes();
    anyhow::ensure!(status.is_success(), "GET http://{addr}{path}: {status}");
    Ok(body.to_vec())
}
