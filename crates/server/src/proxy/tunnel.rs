//! CONNECT: a blind tunnel to port 443 of a host a side's clients use (apt
//! over HTTPS). Nothing is cached; the upstream side is opened by the one
//! dialer, before the client is told `200`, so a failure is a clean answer.

use std::sync::Arc;

use http::{Request, Response};
use hyper::body::Incoming;
use hyper_util::rt::TokioIo;
use pkgproxy_sides::Refusal;

use super::outcome::{Answer, Failed, Outcome};
use crate::body::ResponseBody;
use crate::state::State;

/// Answers a CONNECT request and, once upgraded, relays bytes both ways.
pub async fn handle(state: &Arc<State>, request: Request<Incoming>) -> Outcome {
    let Some(authority) = request.uri().authority().cloned() else {
        return Failed::Refused(Refusal::bad_request("CONNECT needs host:port")).into();
    };
    let Some(port) = authority.port_u16() else {
        return Failed::Refused(Refusal::bad_request("CONNECT needs host:port")).into();
    };
    let host = authority.host().trim_start_matches('[').trim_end_matches(']').to_ascii_lowercase();
    if let Err(refusal) = state.sides.allows_tunnel(&host, port) {
        return Failed::Refused(refusal).into();
    }
    let upstream = match state.upstream.dialer.dial(&host, port).await {
        Ok(stream) => stream,
        Err(error) => {
            tracing::info!(host, port, %error, "tunnel refused upstream");
            return Failed::of_upstream(&error).into();
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
    Outcome::Answered(Answer::new(Response::new(ResponseBody::Empty)))
}
