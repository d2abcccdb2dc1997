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
    /// Ranges of a file and bytes in between: as a side pieced them, or
    /// the parts of a multipart answer from a cached file.
    Pieced(Box<PiecedBody>),
    /// Bodies one after another (the parts of a multipart answer from a
    /// download in progress).
    Chained(Box<ChainedBody>),
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
            ResponseBody::Chained(mut body) => {
                let max = body.frames_of.map_or(max, |before| before.min(max));
                body.frames_of = Some(max);
                body.current = std::mem::replace(&mut body.current, ResponseBody::Empty).in_frames_of(max);
                ResponseBody::Chained(body)
            }
            other => other,
        }
    }

    /// This body, with its cached file's bytes sent by the kernel through
    /// `ranges` when it is one, and long enough to gain from it (for a
    /// pieced body: each of its ranges that is).
    pub fn sent_by_kernel(self, ranges: &Arc<Ranges>) -> Self {
        match self {
            ResponseBody::File(mut file) if file.remaining >= sendfile::MIN_LEN => {
                file.kernel = Some(Arc::clone(ranges));
                ResponseBody::File(file)
            }
            ResponseBody::Pieced(mut body) => {
                body.kernel = Some(Arc::clone(ranges));
                ResponseBody::Pieced(body)
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
    /// Where the kernel is told what to send, on a connection where it
    /// sends the ranges long enough to gain from it.
    kernel: Option<Arc<Ranges>>,
}

impl std::fmt::Debug for PiecedBody {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PiecedBody").finish_non_exhaustive()
    }
}

impl PiecedBody {
    /// The body `pieced` stands for.
    pub fn new(pieced: Pieced) -> Self {
        PiecedBody::of(pieced.file, pieced.pieces)
    }

    /// The body `pieces` of `file` make.
    pub fn of(file: Arc<File>, pieces: Box<dyn Iterator<Item = Piece> + Send>) -> Self {
        PiecedBody { file, pieces, current: None, chunk: PIECE_CHUNK, kernel: None }
    }

    fn next_frame(&mut self) -> Option<Result<Bytes, BoxError>> {
        loop {
            if let Some(range) = self.current.as_mut().filter(|range| range.remaining > 0) {
                return Some(range.next_chunk());
            }
            match self.pieces.next()? {
                Piece::Bytes(bytes) if bytes.is_empty() => {}
                Piece::Bytes(bytes) => return Some(Ok(bytes)),
                Piece::File { offset, len } => self.current = Some(self.range(offset, len)),
            }
        }
    }

    /// `len` bytes of the file from `offset`, read in this body's frames,
    /// or sent by the kernel when it may and they are long enough.
    fn range(&self, offset: u64, len: u64) -> FileBody {
        let mut range = FileBody::new(Arc::clone(&self.file), offset, len);
        range.chunk = self.chunk;
        range.kernel = self.kernel.as_ref().filter(|_| len >= sendfile::MIN_LEN).map(Arc::clone);
        range
    }
}

/// Bodies sent one after another, each made when the one before it has
/// ended: the parts of a multipart answer from a download in progress each
/// wait for their own bytes, and hold nothing before their turn.
pub struct ChainedBody {
    bodies: Box<dyn Iterator<Item = ResponseBody> + Send>,
    /// The body being sent.
    current: ResponseBody,
    /// The most bytes per frame, once [`ResponseBody::in_frames_of`] said.
    frames_of: Option<u64>,
}

impl std::fmt::Debug for ChainedBody {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ChainedBody").field("current", &self.current).finish_non_exhaustive()
    }
}

impl ChainedBody {
    /// The body `bodies` make, one after another.
    pub fn new(bodies: impl Iterator<Item = ResponseBody> + Send + 'static) -> Self {
        ChainedBody { bodies: Box::new(bodies.fuse()), current: ResponseBody::Empty, frames_of: None }
    }

    fn poll_frame(&mut self, cx: &mut Context<'_>) -> Poll<Option<Result<Frame<Bytes>, BoxError>>> {
        loop {
            match Pin::new(&mut self.current).poll_frame(cx) {
                Poll::Ready(None) => {}
                other => return other,
            }
            // A body that has ended is not polled again (a download's
            // stream must not be).
            let Some(next) = self.bodies.next() else {
                self.current = ResponseBody::Empty;
                return Poll::Ready(None);
            };
            self.current = match self.frames_of {
                Some(max) => next.in_frames_of(max),
                None => next,
            };
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
            ResponseBody::Chained(body) => body.poll_frame(cx),
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
            ResponseBody::Pieced(_) | ResponseBody::Chained(_) => false,
        }
    }

    fn size_hint(&self) -> SizeHint {
        match self {
            ResponseBody::Empty => SizeHint::with_exact(0),
            ResponseBody::Full(bytes) => SizeHint::with_exact(bytes.as_ref().map_or(0, |b| b.len() as u64)),
            ResponseBody::File(file) => SizeHint::with_exact(file.remaining),
            ResponseBody::Fetch(fetch) => fetch.size_hint(),
            ResponseBody::Upstream(body) => body.size_hint(),
            ResponseBody::Rewritten(_) | ResponseBody::Pieced(_) | ResponseBody::Chained(_) => SizeHint::default(),
        }
    }
}

#[cfg(test)]
mod tests {
    use http_body_util::BodyExt;

    use super::*;

    #[tokio::test]
    async fn a_chained_body_is_its_bodies_in_order_in_its_frames_and_ends_once() {
        let bodies =
            [ResponseBody::full("head "), ResponseBody::Empty, ResponseBody::full("part"), ResponseBody::full("")];
        let body = ResponseBody::Chained(Box::new(ChainedBody::new(bodies.into_iter())));
        let mut body = body.in_frames_of(4);
        let mut frames = Vec::new();
        while let Some(frame) = body.frame().await {
            frames.push(frame.unwrap().into_data().unwrap());
        }
        assert_eq!(frames.concat(), b"head part");
        assert!(body.frame().await.is_none(), "an ended chain stays ended");
    }

    #[tokio::test]
    async fn a_pieced_body_reads_its_file_ranges_between_its_bytes_in_its_frames() {
        use std::io::Write;
        let mut file = tempfile::tempfile().unwrap();
        file.write_all(b"0123456789").unwrap();
        let pieces = [
            Piece::Bytes(Bytes::from_static(b"<")),
            Piece::File { offset: 2, len: 5 },
            Piece::Bytes(Bytes::from_static(b">")),
        ];
        let body = ResponseBody::Pieced(Box::new(PiecedBody::of(Arc::new(file), Box::new(pieces.into_iter()))));
        let mut body = body.in_frames_of(2);
        let mut frames = Vec::new();
        while let Some(frame) = body.frame().await {
            frames.push(frame.unwrap().into_data().unwrap());
        }
        assert_eq!(frames, ["<", "23", "45", "6", ">"]);
    }
}
