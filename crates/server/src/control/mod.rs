//! The control sockets: `stats.sock` (read-only) and `admin.sock`
//! (read-write). Both speak HTTP/1.1 with JSON bodies under `/pkgproxy/v1/`.

mod info;

use std::sync::Arc;

use http::header::{HeaderValue, CONTENT_TYPE};
use http::{Method, Request, Response, StatusCode};
use hyper::body::Incoming;
use serde::Serialize;

pub use info::Info;

use crate::body::ResponseBody;
use crate::state::State;

/// Which socket a request came in on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Role {
    /// `stats.sock`: reads only.
    Stats,
    /// `admin.sock`: reads and changes.
    Admin,
}

/// Answers a control request.
pub async fn handle(state: Arc<State>, role: Role, request: Request<Incoming>) -> Response<ResponseBody> {
    let path = request.uri().path();
    match (request.method(), path) {
        (&Method::GET, "/pkgproxy/v1/info") => json(StatusCode::OK, &Info::gather(&state)),
        (_, "/pkgproxy/v1/info") => error(StatusCode::METHOD_NOT_ALLOWED, "use GET"),
        _ => {
            let what = match role {
                Role::Stats => "stats socket",
                Role::Admin => "admin socket",
            };
            error(StatusCode::NOT_FOUND, &format!("no such endpoint on the {what}: {path}"))
        }
    }
}

fn json(status: StatusCode, value: &impl Serialize) -> Response<ResponseBody> {
    let mut body = serde_json::to_vec_pretty(value).unwrap_or_else(|_| b"{}".to_vec());
    body.push(b'\n');
    let mut response = Response::new(ResponseBody::full(body));
    *response.status_mut() = status;
    response.headers_mut().insert(CONTENT_TYPE, HeaderValue::from_static("application/json"));
    response
}

fn error(status: StatusCode, message: &str) -> Response<ResponseBody> {
    #[derive(Serialize)]
    struct Error<'a> {
        error: &'a str,
    }
    json(status, &Error { error: message })
}
