//! CONNECT: a blind tunnel to port 443 of an allowed host (apt over HTTPS).
//! Nothing is cached; the upstream side is opened by the one dialer, before
//! the client is told `200`, so a failure is a clean `502`.

use std::sync::Arc;

use http::{Request, Response, StatusCode};
use hyper::body::Incoming;
use hyper_util::rt::TokioIo;

use super::{answer, refuse};
use crate::body::ResponseBody;
use crate::offline::RefusalNote;
use crate::state::State;
use pkgproxy_sides::Refusal;

/// Answers a CONNECT request and, once upgraded, relays bytes both ways.
pub async fn handle(state: &Arc<State>, request: Request<Incoming>, note: &RefusalNote) -> Response<ResponseBody> {
    let Some(authority) = request.uri().authority().cloned() else {
        return refuse(&Refusal::bad_request("CONNECT needs host:port"));
    };
    let Some(port) = authority.port_u16() else {
        return refuse(&Refusal::bad_request("CONNECT needs host:port"));
    };
    let host = authority.host().trim_start_matches('[').trim_end_matches(']').to_ascii_lowercase();
    if let Err(refusal) = state.apt.side().allows_tunnel(&host, port) {
        return refuse(&refusal);
    }
    let upstream = match state.upstream.dialer.dial(&host, port).await {
        Ok(stream) => stream,
        Err(error) => {
            if let Some(refusal) = error.refusal() {
                note.refused(refusal.retry_after());
            }
            tracing::info!(host, port, %error, "tunnel refused upstream");
            return answer::text(StatusCode::BAD_GATEWAY, &format!("pkgproxy: {error}"));
        }
    };
    tokio::spawn(async move {
        let upgraded = match hyper::upgrade::on(request).await {
            Ok(upgraded) => upgraded,
            Err(error) => {
                tracing::debug!(%error, "CONNECT client left before the tunnel opened");
                return;
            }
        };
        let mut client = TokioIo::new(upgraded);
        let mut upstream = upstream;
        if let Err(error) = tokio::io::copy_bidirectional(&mut client, &mut upstream).await {
            tracing::debug!(%error, "tunnel ended with an error");
        }
    });
    Response::new(ResponseBody::Empty)
}
