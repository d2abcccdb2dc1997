//! The body of every answer the gateway sends: small texts, cached files,
//! downloads in progress and forwarded answers, without boxing on the hit
//! path.
//!
//! A cached file is read with positioned reads on the async thread: from the
//! page cache that takes microseconds, where a round trip through the
//! blocking pool (as `tokio::fs` does) costs context switches on every hit.

use std::fs::File;
use std::os::unix::fs::FileExt;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use bytes::Bytes;
use http_body::{Body, Frame, SizeHint};
use pkgproxy_cache::{FetchBody, UpstreamBody};

type BoxError = Box<dyn std::error::Error + Send + Sync>;

/// Bytes read from a cached file per frame.
const FILE_CHUNK: u64 = 256 * 1024;

/// An answer's body.
#[derive(Debug)]
pub enum ResponseBody {
    /// Nothing (`HEAD`, `304`, CONNECT).
    Empty,
    /// A body held in memory (error texts, passed-on answers).
    Full(Option<Bytes>),
    /// A byte range of a cached file.
    File(FileBody),
    /// A download in progress.
    Fetch(FetchBody),
    /// An upstream answer's body passed on as it arrives (a forwarded
    /// request's answer).
    Upstream(UpstreamBody),
}

impl ResponseBody {
    /// A text or byte body.
    pub fn full(bytes: impl Into<Bytes>) -> Self {
        ResponseBody::Full(Some(bytes.into()))
    }
}

/// `len` bytes of a file from `offset`.
#[derive(Debug)]
pub struct FileBody {
    file: Arc<File>,
    offset: u64,
    remaining: u64,
}

impl FileBody {
    /// The bytes `offset..offset + len` of `file`.
    pub fn new(file: Arc<File>, offset: u64, len: u64) -> Self {
        FileBody { file, offset, remaining: len }
    }

    fn next_chunk(&mut self) -> Result<Bytes, BoxError> {
        let len = self.remaining.min(FILE_CHUNK) as usize;
        let mut buf = vec![0; len];
        let n = self.file.read_at(&mut buf, self.offset)?;
        if n == 0 {
            return Err("cached file is shorter than its index entry".into());
        }
        buf.truncate(n);
        self.offset += n as u64;
        self.remaining -= n as u64;
        Ok(Bytes::from(buf))
    }
}

impl Body for ResponseBody {
    type Data = Bytes;
    type Error = BoxError;

    fn poll_frame(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Result<Frame<Bytes>, BoxError>>> {
        match self.get_mut() {
            ResponseBody::Empty => Poll::Ready(None),
            ResponseBody::Full(bytes) => Poll::Ready(bytes.take().map(|b| Ok(Frame::data(b)))),
            ResponseBody::File(file) if file.remaining == 0 => Poll::Ready(None),
            ResponseBody::File(file) => Poll::Ready(Some(file.next_chunk().map(Frame::data))),
            ResponseBody::Fetch(fetch) => Pin::new(fetch).poll_frame(cx),
            ResponseBody::Upstream(body) => Pin::new(body).poll_frame(cx),
        }
    }

    fn is_end_stream(&self) -> bool {
        match self {
            ResponseBody::Empty => true,
            ResponseBody::Full(bytes) => bytes.is_none(),
            ResponseBody::File(file) => file.remaining == 0,
            ResponseBody::Fetch(fetch) => fetch.is_end_stream(),
            ResponseBody::Upstream(body) => body.is_end_stream(),
        }
    }

    fn size_hint(&self) -> SizeHint {
        match self {
            ResponseBody::Empty => SizeHint::with_exact(0),
            ResponseBody::Full(bytes) => SizeHint::with_exact(bytes.as_ref().map_or(0, |b| b.len() as u64)),
            ResponseBody::File(file) => SizeHint::with_exact(file.remaining),
            ResponseBody::Fetch(fetch) => fetch.size_hint(),
            ResponseBody::Upstream(body) => body.size_hint(),
        }
    }
}
