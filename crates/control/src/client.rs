//! The client of the control sockets: one HTTP/1.1 exchange per call over
//! a Unix socket, answers read into the typed messages.

use std::path::{Path, PathBuf};

use bytes::Bytes;
use http::{Method, Response, StatusCode};
use http_body_util::{BodyExt, Full};
use hyper::body::Incoming;
use hyper_util::rt::TokioIo;
use serde::de::DeserializeOwned;
use tokio::io::{AsyncWrite, AsyncWriteExt};

use crate::messages::{ErrorAnswer, Info, ModeRequest, OfflineReport};
use crate::{INFO_PATH, METRICS_PATH, OFFLINE_PATH};

/// Why a control request failed.
/// Why `socket` could not be reached, in words that say what to do.
fn unreachable(socket: &std::path::Path, error: &std::io::Error) -> String {
    let socket = socket.display();
    match error.kind() {
        std::io::ErrorKind::NotFound => {
            format!("no pkgproxy at {socket} (is it running, with its sockets there?): {error}")
        }
        std::io::ErrorKind::ConnectionRefused => {
            format!("nothing listens at {socket} (a socket left by a pkgproxy that stopped?): {error}")
        }
        std::io::ErrorKind::PermissionDenied => {
            format!("{socket} is not open to this user (the admin socket is root's: run with sudo): {error}")
        }
        _ => format!("cannot reach pkgproxy at {socket}: {error}"),
    }
}

#[derive(Debug, thiserror::Error)]
pub enum ControlError {
    /// The socket could not be reached: no daemon, or not this socket.
    #[error("{}", unreachable(socket, source))]
    Unreachable {
        /// The socket.
        socket: PathBuf,
        /// The operating system's error.
        #[source]
        source: std::io::Error,
    },
    /// The exchange broke off.
    #[error("{path}: {message}")]
    Exchange {
        /// The path asked for.
        path: String,
        /// What went wrong.
        message: String,
    },
    /// The daemon answered with an error.
    #[error("{path}: {status}: {message}")]
    Refused {
        /// The path asked for.
        path: String,
        /// The answer's status.
        status: StatusCode,
        /// The daemon's reason.
        message: String,
    },
    /// The answer is not the message expected.
    #[error("{path} did not answer as expected: {source}")]
    Unexpected {
        /// The path asked for.
        path: String,
        /// What did not fit.
        #[source]
        source: serde_json::Error,
    },
}

/// A client of one control socket.
#[derive(Debug, Clone)]
pub struct ControlClient {
    socket: PathBuf,
}

impl ControlClient {
    /// A client of the daemon listening on `socket`.
    pub fn new(socket: impl Into<PathBuf>) -> Self {
        ControlClient { socket: socket.into() }
    }

    /// The socket asked.
    pub fn socket(&self) -> &Path {
        &self.socket
    }

    /// `GET /pkgproxy/v1/info`.
    pub async fn info(&self) -> Result<Info, ControlError> {
        self.json(Method::GET, INFO_PATH, None).await
    }

    /// `GET /pkgproxy/v1/offline`.
    pub async fn offline(&self) -> Result<OfflineReport, ControlError> {
        self.json(Method::GET, OFFLINE_PATH, None).await
    }

    /// `PUT /pkgproxy/v1/offline` (on the admin socket).
    pub async fn set_offline(&self, request: &ModeRequest) -> Result<OfflineReport, ControlError> {
        let body = serde_json::to_vec(request).map_err(|source| unexpected(OFFLINE_PATH, source))?;
        self.json(Method::PUT, OFFLINE_PATH, Some(Bytes::from(body))).await
    }

    /// `GET /metrics`: the Prometheus text.
    pub async fn metrics(&self) -> Result<String, ControlError> {
        let (status, body) = self.send(Method::GET, METRICS_PATH, None).await?;
        if !status.is_success() {
            return Err(refused(METRICS_PATH, status, &body));
        }
        Ok(String::from_utf8_lossy(&body).into_owned())
    }

    /// A request answered with a JSON message; an error status is an error
    /// carrying the daemon's reason.
    pub async fn json<T: DeserializeOwned>(
        &self,
        method: Method,
        path: &str,
        body: Option<Bytes>,
    ) -> Result<T, ControlError> {
        let (status, body) = self.send(method, path, body).await?;
        if !status.is_success() {
            return Err(refused(path, status, &body));
        }
        serde_json::from_slice(&body).map_err(|source| unexpected(path, source))
    }

    /// One exchange: the answer's status and body, whatever they are.
    pub async fn send(
        &self,
        method: Method,
        path: &str,
        body: Option<Bytes>,
    ) -> Result<(StatusCode, Bytes), ControlError> {
        let response = self.exchange(method, path, JSON, Full::new(body.unwrap_or_default())).await?;
        let status = response.status();
        let body = response.into_body().collect().await.map_err(|e| broke(path, &e))?.to_bytes();
        Ok((status, body))
    }

    /// A `POST` of `body` whose answer, when a success, is a stream written
    /// to `to` as it arrives (a bundle); `progress` is told the bytes
    /// written so far. The bytes written, all told.
    pub async fn download<W: AsyncWrite + Unpin>(
        &self,
        path: &str,
        body: Bytes,
        to: &mut W,
        mut progress: impl FnMut(u64),
    ) -> Result<u64, ControlError> {
        let response = self.exchange(Method::POST, path, JSON, Full::new(body)).await?;
        let status = response.status();
        let mut body = response.into_body();
        if !status.is_success() {
            let body = body.collect().await.map_err(|e| broke(path, &e))?.to_bytes();
            return Err(refused(path, status, &body));
        }
        let mut written = 0;
        while let Some(frame) = body.frame().await {
            let frame = frame.map_err(|e| broke(path, &format!("the answer broke off after {written} bytes: {e}")))?;
            if let Ok(data) = frame.into_data() {
                to.write_all(&data).await.map_err(|e| broke(path, &e))?;
                written += data.len() as u64;
                progress(written);
            }
        }
        to.flush().await.map_err(|e| broke(path, &e))?;
        Ok(written)
    }

    /// A `POST` whose body, a bundle (a tar), is streamed from `body`,
    /// answered with a JSON message.
    pub async fn upload<T, B>(&self, path: &str, body: B) -> Result<T, ControlError>
    where
        T: DeserializeOwned,
        B: http_body::Body<Data = Bytes> + Send + 'static,
        B::Error: Into<Box<dyn std::error::Error + Send + Sync>>,
    {
        let response = self.exchange(Method::POST, path, "application/x-tar", body).await?;
        let status = response.status();
        let body = response.into_body().collect().await.map_err(|e| broke(path, &e))?.to_bytes();
        if !status.is_success() {
            return Err(refused(path, status, &body));
        }
        serde_json::from_slice(&body).map_err(|source| unexpected(path, source))
    }

    /// Sends one request on a connection of its own; the answer's body is
    /// still to be read.
    async fn exchange<B>(
        &self,
        method: Method,
        path: &str,
        content_type: &'static str,
        body: B,
    ) -> Result<Response<Incoming>, ControlError>
    where
        B: http_body::Body<Data = Bytes> + Send + 'static,
        B::Error: Into<Box<dyn std::error::Error + Send + Sync>>,
    {
        let stream = tokio::net::UnixStream::connect(&self.socket)
            .await
            .map_err(|source| ControlError::Unreachable { socket: self.socket.clone(), source })?;
        let (mut sender, connection) =
            hyper::client::conn::http1::handshake(TokioIo::new(stream)).await.map_err(|e| broke(path, &e))?;
        tokio::spawn(connection);
        let request = http::Request::builder()
            .method(method)
            .uri(path)
            .header(http::header::HOST, "pkgproxy")
            .header(http::header::CONTENT_TYPE, content_type)
            .body(body)
            .map_err(|e| broke(path, &e))?;
        sender.send_request(request).await.map_err(|e| broke(path, &e))
    }
}

/// What the control sockets' requests carry, but bundles.
const JSON: &str = "application/json";

fn broke(path: &str, error: &dyn std::fmt::Display) -> ControlError {
    ControlError::Exchange { path: path.to_string(), message: error.to_string() }
}

fn refused(path: &str, status: StatusCode, body: &[u8]) -> ControlError {
    let message = match serde_json::from_slice::<ErrorAnswer>(body) {
        Ok(answer) => answer.error,
        Err(_) => String::from_utf8_lossy(body).trim().to_string(),
    };
    ControlError::Refused { path: path.to_string(), status, message }
}

fn unexpected(path: &str, source: serde_json::Error) -> ControlError {
    ControlError::Unexpected { path: path.to_string(), source }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_unreachable_socket_is_told_by_what_went_wrong_and_the_error_once() {
        let socket = std::path::Path::new("/run/pkgproxy/admin.sock");
        let denied = unreachable(socket, &std::io::Error::from_raw_os_error(libc_eacces()));
        assert!(denied.contains("root's: run with sudo") && !denied.contains("is it running"), "{denied}");
        let missing = std::io::Error::from_raw_os_error(2);
        let told = unreachable(socket, &missing);
        assert_eq!(told.matches(&missing.to_string()).count(), 1, "{told}");
    }

    /// EACCES, on Linux.
    fn libc_eacces() -> i32 {
        13
    }
}
