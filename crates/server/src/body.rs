//! The body of every answer the gateway sends: small texts, cached files,
//! downloads in progress and forwarded answers, without boxing on the hit
//! path.
//!
//! A cached file is read with positioned reads on the async thread: from the
//! page cache that takes microseconds, where a round trip through the
//! blocking pool (as `tokio::fs` does) costs context switches on every hit.
//! On a connection that can, a long one is not read at all: the kernel
//! sends it ([`crate::sendfile`]).

use std::fs::File;
use std::os::unix::fs::FileExt;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use bytes::Bytes;
use http_body::{Body, Frame, SizeHint};
use pkgproxy_cache::{FetchBody, UpstreamBody};
use pkgproxy_sides::{Piece, Pieced, StreamRewriter};

use crate::sendfile::{self, Ranges};

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
    /// Another body, rewritten by its side as it streams.
    Rewritten(Box<RewrittenBody>),
    /// Ranges of a file and bytes in between, as a side pieced them.
    Pieced(Box<PiecedBody>),
}

impl ResponseBody {
    /// A text or byte body.
    pub fn full(bytes: impl Into<Bytes>) -> Self {
        ResponseBody::Full(Some(bytes.into()))
    }

    /// This body, giving frames of `max` bytes at most where it reads them
    /// itself (from a cached file or a download's temporary file): on a
    /// connection where each of many answers may hold a frame while its
    /// client keeps it waiting (HTTP/2), that frame is all it holds.
    pub fn in_frames_of(self, max: u64) -> Self {
        match self {
            ResponseBody::File(mut file) => {
                file.chunk = file.chunk.min(max);
                ResponseBody::File(file)
            }
            ResponseBody::Fetch(fetch) => ResponseBody::Fetch(fetch.in_frames_of(max)),
            ResponseBody::Rewritten(mut body) => {
                body.inner = std::mem::replace(&mut body.inner, ResponseBody::Empty).in_frames_of(max);
                ResponseBody::Rewritten(body)
            }
            ResponseBody::Pieced(mut body) => {
                body.chunk = body.chunk.min(max);
                ResponseBody::Pieced(body)
            }
            other => other,
        }
    }

    /// This body, with its cached file's bytes sent by the kernel through
    /// `ranges` when it is one, and long enough to gain from it.
    pub fn sent_by_kernel(self, ranges: &Arc<Ranges>) -> Self {
        match self {
            ResponseBody::File(mut file) if file.remaining >= sendfile::MIN_LEN => {
                file.kernel = Some(Arc::clone(ranges));
                ResponseBody::File(file)
            }
            other => other,
        }
    }
}

/// `len` bytes of a file from `offset`.
#[derive(Debug)]
pub struct FileBody {
    file: Arc<File>,
    offset: u64,
    remaining: u64,
    /// The most bytes read per frame.
    chunk: u64,
    /// Where the kernel is told what to send, on a connection where it
    /// sends this body.
    kernel: Option<Arc<Ranges>>,
}

impl FileBody {
    /// The bytes `offset..offset + len` of `file`.
    pub fn new(file: Arc<File>, offset: u64, len: u64) -> Self {
        FileBody { file, offset, remaining: len, chunk: FILE_CHUNK, kernel: None }
    }

    fn next_chunk(&mut self) -> Result<Bytes, BoxError> {
        let Some(ranges) = &self.kernel else { return self.next_chunk_of(self.chunk) };
        let stand_in = ranges.stand_in(Arc::clone(&self.file), self.offset, self.remaining);
        self.offset += stand_in.len() as u64;
        self.remaining -= stand_in.len() as u64;
        Ok(stand_in)
    }

    /// The next bytes, at most `chunk` of them.
    fn next_chunk_of(&mut self, chunk: u64) -> Result<Bytes, BoxError> {
        let len = self.remaining.min(chunk) as usize;
        let mut buf = vec![0; len];
        let n = self.file.read_at(&mut buf, self.offset)?;
        if n == 0 {
            return Err(sendfile::SHORT_FILE.into());
        }
        buf.truncate(n);
        self.offset += n as u64;
        self.remaining -= n as u64;
        Ok(Bytes::from(buf))
    }
}

/// A body rewritten by its side as it streams: what the side holds back
/// is all that is held.
#[derive(Debug)]
pub struct RewrittenBody {
    inner: ResponseBody,
    rewriter: Box<dyn StreamRewriter>,
    finished: bool,
}

impl RewrittenBody {
    /// `inner`, rewritten by `rewriter`.
    pub fn new(inner: ResponseBody, rewriter: Box<dyn StreamRewriter>) -> Self {
        RewrittenBody { inner, rewriter, finished: false }
    }

    fn poll_frame(&mut self, cx: &mut Context<'_>) -> Poll<Option<Result<Frame<Bytes>, BoxError>>> {
        loop {
            if self.finished {
                return Poll::Ready(None);
            }
            let mut output = Vec::new();
            match Pin::new(&mut self.inner).poll_frame(cx) {
                Poll::Pending => return Poll::Pending,
                Poll::Ready(Some(Err(error))) => return Poll::Ready(Some(Err(error))),
                Poll::Ready(Some(Ok(frame))) => match frame.into_data() {
                    Ok(data) => self.rewriter.feed(&data, &mut output),
                    Err(other) => return Poll::Ready(Some(Ok(other))),
                },
                Poll::Ready(None) => {
                    self.finished = true;
                    self.rewriter.finish(&mut output);
                }
            }
            if !output.is_empty() {
                return Poll::Ready(Some(Ok(Frame::data(Bytes::from(output)))));
            }
        }
    }
}

/// Bytes read from a file per frame of a pieced body: a side's compressed
/// documents are sent to a hundred clients at once, each holding a frame.
const PIECE_CHUNK: u64 = 64 * 1024;

/// A body of ranges of a file and bytes in between, made as it is sent.
pub struct PiecedBody {
    file: Arc<File>,
    pieces: Box<dyn Iterator<Item = Piece> + Send>,
    /// The range of the file being sent.
    current: Option<FileBody>,
    /// The most bytes of the file read per frame.
    chunk: u64,
}

impl std::fmt::Debug for PiecedBody {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PiecedBody").finish_non_exhaustive()
    }
}

impl PiecedBody {
    /// The body `pieced` stands for.
    pub fn new(pieced: Pieced) -> Self {
        PiecedBody { file: pieced.file, pieces: pieced.pieces, current: None, chunk: PIECE_CHUNK }
    }

    fn next_frame(&mut self) -> Option<Result<Bytes, BoxError>> {
        loop {
            if let Some(range) = self.current.as_mut().filter(|range| range.remaining > 0) {
                return Some(range.next_chunk_of(self.chunk));
            }
            match self.pieces.next()? {
                Piece::Bytes(bytes) if bytes.is_empty() => {}
                Piece::Bytes(bytes) => return Some(Ok(bytes)),
                Piece::File { offset, len } => self.current = Some(FileBody::new(Arc::clone(&self.file), offset, len)),
            }
        }
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
            ResponseBody::Rewritten(body) => body.poll_frame(cx),
            ResponseBody::Pieced(body) => Poll::Ready(body.next_frame().map(|frame| frame.map(Frame::data))),
        }
    }

    fn is_end_stream(&self) -> bool {
        match self {
            ResponseBody::Empty => true,
            ResponseBody::Full(bytes) => bytes.is_none(),
            ResponseBody::File(file) => file.remaining == 0,
            ResponseBody::Fetch(fetch) => fetch.is_end_stream(),
            ResponseBody::Upstream(body) => body.is_end_stream(),
            ResponseBody::Rewritten(body) => body.finished,
            ResponseBody::Pieced(_) => false,
        }
    }

    fn size_hint(&self) -> SizeHint {
        match self {
            ResponseBody::Empty => SizeHint::with_exact(0),
            ResponseBody::Full(bytes) => SizeHint::with_exact(bytes.as_ref().map_or(0, |b| b.len() as u64)),
            ResponseBody::File(file) => SizeHint::with_exact(file.remaining),
            ResponseBody::Fetch(fetch) => fetch.size_hint(),
            ResponseBody::Upstream(body) => body.size_hint(),
            ResponseBody::Rewritten(_) | ResponseBody::Pieced(_) => SizeHint::default(),
        }
    }
}
