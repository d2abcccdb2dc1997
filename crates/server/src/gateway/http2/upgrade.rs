//! The upgrade to HTTP/2 of a plain connection whose first request asks
//! for `h2c` (what cargo's libcurl asks for over `http://`). RFC 9113 §3.1
//! defines `h2c` as HTTP/2 in clear: over TLS, HTTP/2 comes by ALPN alone,
//! and this module is never asked.
//!
//! hyper's HTTP/2 server cannot take over a connection upgraded from
//! HTTP/1.1, whose first request the server must answer as stream 1. So
//! the upgrade is done here: after `101 Switching Protocols`, the client's
//! preface and first `SETTINGS` frame are read, and the upgrade request is
//! placed right after them as the `HEADERS` frame of stream 1, as if the
//! client had sent it in HTTP/2 (its header block written with literal
//! fields only, which leave the client's compression table untouched).

use std::future::Future;
use std::sync::Arc;

use bytes::Bytes;
use http::{Request, Response};
use hyper::body::Incoming;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio_util::sync::CancellationToken;

use super::{serve, Limits, PREFACE};
use crate::gateway::rewind::Rewind;

/// The answer that switches a connection to HTTP/2.
const SWITCHING: &[u8] = b"HTTP/1.1 101 Switching Protocols\r\nConnection: Upgrade\r\nUpgrade: h2c\r\n\r\n";

/// The largest frame a peer may send before settings say otherwise: the
/// upgrade request's header block must fit in one.
const DEFAULT_MAX_FRAME: usize = 16_384;

/// The most a client may send after the `101` before its `SETTINGS` frame
/// ends: the preface and one frame.
const SETTINGS_LIMIT: usize = PREFACE.len() + 9 + DEFAULT_MAX_FRAME;

/// Headers an upgrade request carries that are about the HTTP/1.1
/// connection, not the request.
const CONNECTION_HEADERS: [&str; 8] =
    ["connection", "upgrade", "http2-settings", "keep-alive", "proxy-connection", "transfer-encoding", "te", "host"];

/// An `Upgrade: h2c` request, ready to be answered in HTTP/2.
#[derive(Debug, PartialEq, Eq)]
pub struct Upgrade {
    /// How many of the connection's first bytes its head took.
    head_len: usize,
    /// Its `HEADERS` frame on stream 1.
    frame: Vec<u8>,
}

/// The upgrade to HTTP/2 that `start` (a connection's first bytes, a whole
/// request head) asks for, when it may be made: a `GET` or `HEAD` in
/// origin form, with a `Host`, no body, `Upgrade: h2c`, one
/// `HTTP2-Settings` and both named in `Connection`. Any other request is
/// answered in HTTP/1.1, as a server without HTTP/2 would.
pub fn upgrade_asked(start: &[u8]) -> Option<Upgrade> {
    let mut headers = [httparse::EMPTY_HEADER; 64];
    let mut request = httparse::Request::new(&mut headers);
    let head_len = match request.parse(start) {
        Ok(httparse::Status::Complete(len)) => len,
        _ => return None,
    };
    let method = request.method?;
    let path = request.path?;
    let fields: &[httparse::Header<'_>] = request.headers;
    let named = |name: &'static str| fields.iter().filter(move |h| h.name.eq_ignore_ascii_case(name));
    let has_token = |name: &'static str, token: &str| {
        named(name).any(|h| String::from_utf8_lossy(h.value).split(',').any(|t| t.trim().eq_ignore_ascii_case(token)))
    };
    let bodiless = named("transfer-encoding").next().is_none()
        && named("content-length").all(|h| h.value.iter().all(|b| *b == b'0'));
    let wanted = matches!(method, "GET" | "HEAD")
        && path.starts_with('/')
        && request.version == Some(1)
        && bodiless
        && has_token("upgrade", "h2c")
        && has_token("connection", "upgrade")
        && has_token("connection", "http2-settings")
        && named("http2-settings").count() == 1;
    let host = named("host").next()?.value;
    if !wanted {
        return None;
    }
    let mut block = Vec::new();
    for (name, value) in [(":method", method.as_bytes()), (":scheme", b"http"), (":path", path.as_bytes())] {
        literal(&mut block, name.as_bytes(), value);
    }
    literal(&mut block, b":authority", host);
    for header in fields {
        let name = header.name.to_ascii_lowercase();
        if !CONNECTION_HEADERS.contains(&name.as_str()) {
            literal(&mut block, name.as_bytes(), header.value);
        }
    }
    if block.len() > DEFAULT_MAX_FRAME {
        return None;
    }
    Some(Upgrade { head_len, frame: headers_frame(&block) })
}

/// Appends a header field to an HPACK block as a literal without
/// indexing, its name literal too, neither Huffman-coded: it changes no
/// compression table.
fn literal(block: &mut Vec<u8>, name: &[u8], value: &[u8]) {
    block.push(0);
    string(block, name);
    string(block, value);
}

/// An HPACK string literal: its length as a 7-bit-prefix integer, then
/// its bytes.
fn string(block: &mut Vec<u8>, bytes: &[u8]) {
    let mut length = bytes.len();
    if length < 127 {
        block.push(length as u8);
    } else {
        block.push(127);
        length -= 127;
        while length >= 128 {
            block.push((length % 128) as u8 | 0x80);
            length /= 128;
        }
        block.push(length as u8);
    }
    block.extend_from_slice(bytes);
}

/// A `HEADERS` frame on stream 1 ending the stream and its headers.
fn headers_frame(block: &[u8]) -> Vec<u8> {
    const HEADERS: u8 = 0x1;
    const END_STREAM_AND_HEADERS: u8 = 0x1 | 0x4;
    let length = block.len() as u32;
    let mut frame = length.to_be_bytes()[1..].to_vec();
    frame.extend_from_slice(&[HEADERS, END_STREAM_AND_HEADERS, 0, 0, 0, 1]);
    frame.extend_from_slice(block);
    frame
}

/// How many of `got`'s bytes the preface and the first frame take, once
/// all are there; an error when they are not an HTTP/2 preface and a
/// `SETTINGS` frame.
fn preface_and_settings(got: &[u8]) -> Result<Option<usize>, &'static str> {
    let checked = got.len().min(PREFACE.len());
    if got[..checked] != PREFACE[..checked] {
        return Err("no HTTP/2 preface after the upgrade");
    }
    if got.len() < PREFACE.len() + 9 {
        return Ok(None);
    }
    let frame = &got[PREFACE.len()..];
    const SETTINGS: u8 = 0x4;
    if frame[3] != SETTINGS {
        return Err("the HTTP/2 preface is not followed by SETTINGS");
    }
    let length = u32::from_be_bytes([0, frame[0], frame[1], frame[2]]) as usize;
    let total = PREFACE.len() + 9 + length;
    if total > SETTINGS_LIMIT {
        return Err("the client's SETTINGS frame is too long");
    }
    Ok((got.len() >= total).then_some(total))
}

/// Switches `stream`, whose first bytes `start` asked for `upgrade`, to
/// HTTP/2 and serves it until it ends or `shutdown`.
pub async fn upgrade<S, H, F, B>(
    mut stream: S,
    start: Bytes,
    upgrade: Upgrade,
    handler: Arc<H>,
    limits: Limits,
    shutdown: CancellationToken,
) where
    S: AsyncRead + AsyncWrite + Unpin + Send + 'static,
    H: Fn(Request<Incoming>) -> F + Send + Sync + 'static,
    F: Future<Output = Response<B>> + Send + 'static,
    B: http_body::Body<Data = Bytes> + Send + Unpin + 'static,
    B::Error: Into<Box<dyn std::error::Error + Send + Sync>>,
{
    if let Err(error) = async {
        stream.write_all(SWITCHING).await?;
        stream.flush().await
    }
    .await
    {
        tracing::debug!(%error, "the upgrade to HTTP/2 could not be answered");
        return;
    }
    let mut got = start[upgrade.head_len..].to_vec();
    let opened = loop {
        match preface_and_settings(&got) {
            Ok(Some(opened)) => break opened,
            Ok(None) => {}
            Err(why) => {
                tracing::debug!(why, "the upgrade to HTTP/2 failed");
                return;
            }
        }
        let mut more = [0u8; 4096];
        match stream.read(&mut more).await {
            Ok(0) | Err(_) => return,
            Ok(n) => got.extend_from_slice(&more[..n]),
        }
    };
    let mut unread = got[..opened].to_vec();
    unread.extend_from_slice(&upgrade.frame);
    unread.extend_from_slice(&got[opened..]);
    serve(Rewind { unread: unread.into(), inner: stream }, handler, limits, shutdown).await;
}

#[cfg(test)]
mod tests {
    use super::*;

    const UPGRADE: &[u8] = b"GET /cargo/index/config.json HTTP/1.1\r\nHost: cache.lan:3142\r\nUser-Agent: cargo/1.95\r\n\
        Accept: */*\r\nConnection: Upgrade, HTTP2-Settings\r\nUpgrade: h2c\r\nHTTP2-Settings: AAMAAABkAAQCAAAAAAIAAAAA\r\n\r\n";

    /// The header block's fields, decoded from literals without indexing.
    fn fields(frame: &[u8]) -> Vec<(String, String)> {
        assert_eq!(&frame[3..9], &[1, 5, 0, 0, 0, 1], "HEADERS, END_STREAM | END_HEADERS, stream 1");
        let mut block = &frame[9..];
        let mut out = Vec::new();
        fn take(block: &mut &[u8]) -> String {
            let length = block[0] as usize;
            assert!(length < 127, "short strings here");
            let text = String::from_utf8(block[1..1 + length].to_vec()).unwrap();
            *block = &block[1 + length..];
            text
        }
        while !block.is_empty() {
            assert_eq!(block[0], 0, "a literal without indexing, new name");
            block = &block[1..];
            let name = take(&mut block);
            let value = take(&mut block);
            out.push((name, value));
        }
        out
    }

    #[test]
    fn an_upgrade_request_becomes_stream_one_without_its_connection_headers() {
        let upgrade = upgrade_asked(UPGRADE).unwrap();
        assert_eq!(upgrade.head_len, UPGRADE.len());
        let fields = fields(&upgrade.frame);
        let expected = [
            (":method", "GET"),
            (":scheme", "http"),
            (":path", "/cargo/index/config.json"),
            (":authority", "cache.lan:3142"),
            ("user-agent", "cargo/1.95"),
            ("accept", "*/*"),
        ];
        let expected: Vec<(String, String)> = expected.iter().map(|(n, v)| (n.to_string(), v.to_string())).collect();
        assert_eq!(fields, expected);
    }

    #[test]
    fn requests_that_cannot_be_upgraded_stay_http1() {
        let text = String::from_utf8(UPGRADE.to_vec()).unwrap();
        let cases = [
            text.replace("GET /cargo", "POST /cargo").replace("\r\n\r\n", "\r\nContent-Length: 3\r\n\r\n"),
            text.replace("GET /cargo", "GET http://cache.lan:3142/cargo"),
            text.replace("Upgrade: h2c", "Upgrade: websocket"),
            text.replace("Connection: Upgrade, HTTP2-Settings", "Connection: Upgrade"),
            text.replace("Host: cache.lan:3142\r\n", ""),
            text.replace("\r\n\r\n", "\r\n"),
        ];
        for case in cases {
            assert_eq!(upgrade_asked(case.as_bytes()), None, "{case}");
        }
    }

    #[test]
    fn long_strings_take_a_multi_byte_length() {
        let mut block = Vec::new();
        string(&mut block, &[b'a'; 300]);
        assert_eq!(&block[..3], &[127, 128 | 45, 1], "300 = 127 + 45 + 1 * 128");
        assert_eq!(block.len(), 3 + 300);
    }

    #[test]
    fn the_preface_and_settings_are_found_whole_or_refused() {
        let settings = [0, 0, 6, 4, 0, 0, 0, 0, 0, 0, 3, 0, 0, 0, 100];
        let whole = [PREFACE, &settings[..]].concat();
        assert_eq!(preface_and_settings(&whole[..20]), Ok(None));
        assert_eq!(preface_and_settings(&whole[..30]), Ok(None));
        assert_eq!(preface_and_settings(&whole), Ok(Some(whole.len())));
        assert!(preface_and_settings(b"GET / HTTP/1.1\r\n").is_err());
        let ping = [PREFACE, &[0, 0, 8, 6, 0, 0, 0, 0, 0][..]].concat();
        assert!(preface_and_settings(&ping).is_err());
    }
}
