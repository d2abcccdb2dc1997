//! A waiter's view of a download: the bytes of the temporary file, streamed
//! as the leader writes them, holding back the last byte until the body is
//! verified.

use std::fs::File;
use std::os::unix::fs::FileExt;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use bytes::Bytes;
use futures_util::stream::{self, BoxStream, StreamExt};
use http_body::{Body, Frame, SizeHint};
use tokio::sync::watch;

use super::spill::{Cursor, Spill};
use super::{BoxError, Phase, Progress};
use crate::error::FetchError;

/// Bytes read from the temporary file per frame.
const CHUNK: u64 = 256 * 1024;

/// The body a waiter sends to its client.
pub struct FetchBody {
    /// The reader, until the first poll makes it a stream of frames (its
    /// frame size can be set until then).
    reader: Option<Box<Reader>>,
    stream: Option<BoxStream<'static, Result<Bytes, BoxError>>>,
    remaining: Option<u64>,
}

impl std::fmt::Debug for FetchBody {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("FetchBody").field("remaining", &self.remaining).finish_non_exhaustive()
    }
}

struct Reader {
    progress: watch::Receiver<Progress>,
    file: Arc<File>,
    /// The try at the body `file` holds: once the fetch is at another, this
    /// reader's bytes are of a body that was refused.
    attempt: u32,
    pos: u64,
    end: Option<u64>,
    /// The most bytes read per frame.
    chunk: u64,
    /// Where this reader is, for a spill to keep what it still needs.
    cursor: Cursor,
}

/// What the reader may do next, judged from the fetch's progress.
enum Step {
    Read(u64),
    Finished,
    Wait,
    Fail(BoxError),
}

impl Reader {
    fn step(&self, progress: &Progress) -> Step {
        if progress.attempt != self.attempt {
            return Step::Fail(failure(&FetchError::Rejected("the body was refused and is asked again".into())));
        }
        let received = match &progress.spill {
            Some(spill) => spill.base + spill.len(),
            None => progress.written,
        };
        let (readable, total) = match &progress.phase {
            Phase::Streaming(_) => (received.saturating_sub(1), None),
            Phase::Checked { entry, .. } | Phase::Done(entry) => (entry.size, Some(entry.size)),
            Phase::Uncached { size, .. } => (*size, Some(*size)),
            Phase::Failed(error) => return Step::Fail(failure(error)),
            _ => return Step::Fail(failure(&FetchError::Abandoned)),
        };
        let readable = self.end.map_or(readable, |end| end.min(readable));
        if self.pos < readable {
            return Step::Read((readable - self.pos).min(self.chunk));
        }
        match (total, self.end) {
            (_, Some(end)) if self.pos >= end => Step::Finished,
            (Some(total), _) if self.pos >= total => Step::Finished,
            _ => Step::Wait,
        }
    }

    async fn next_chunk(&mut self) -> Option<Result<Bytes, BoxError>> {
        loop {
            let progress = self.progress.borrow_and_update().clone();
            match self.step(&progress) {
                Step::Read(len) => return Some(self.read(len, progress.spill.as_deref())),
                Step::Finished => return None,
                Step::Fail(error) => return Some(Err(error)),
                Step::Wait => {
                    if self.progress.changed().await.is_err() {
                        // The leader is gone: its last word decides.
                        let progress = self.progress.borrow().clone();
                        match self.step(&progress) {
                            Step::Read(len) => return Some(self.read(len, progress.spill.as_deref())),
                            Step::Finished => return None,
                            Step::Fail(error) => return Some(Err(error)),
                            Step::Wait => return Some(Err(failure(&FetchError::Abandoned))),
                        }
                    }
                }
            }
        }
    }

    /// Up to `len` bytes at the reader's position: from the file, or past
    /// where the disk had room, from `spill`.
    fn read(&mut self, len: u64, spill: Option<&Spill>) -> Result<Bytes, BoxError> {
        let len = match spill {
            Some(spill) if self.pos >= spill.base => {
                let Some(bytes) = spill.read(self.pos, len) else {
                    return Err(Box::new(std::io::Error::other(
                        "the body is passed through uncached and this part of it is no longer held: ask again",
                    )));
                };
                self.pos += bytes.len() as u64;
                self.cursor.moved_to(self.pos);
                return Ok(bytes);
            }
            Some(spill) => len.min(spill.base - self.pos),
            None => len,
        };
        let mut buf = vec![0; len as usize];
        let n = self.file.read_at(&mut buf, self.pos)?;
        if n == 0 {
            return Err(Box::new(std::io::Error::new(
                std::io::ErrorKind::UnexpectedEof,
                "cached download is shorter than its progress says",
            )));
        }
        buf.truncate(n);
        self.pos += n as u64;
        if spill.is_some() {
            self.cursor.moved_to(self.pos);
        }
        Ok(Bytes::from(buf))
    }
}

fn failure(error: &FetchError) -> BoxError {
    Box::new(std::io::Error::other(error.to_string()))
}

impl FetchBody {
    pub(super) fn new(
        progress: watch::Receiver<Progress>,
        file: Arc<File>,
        attempt: u32,
        start: u64,
        end: Option<u64>,
    ) -> Self {
        let cursor = progress.borrow().readers.join(start);
        let reader = Reader { progress, file, attempt, pos: start, end, chunk: CHUNK, cursor };
        FetchBody { reader: Some(Box::new(reader)), stream: None, remaining: end.map(|end| end.saturating_sub(start)) }
    }

    /// This body, giving frames of `max` bytes at most (an HTTP/2 stream
    /// whose client keeps it waiting holds one frame).
    pub fn in_frames_of(mut self, max: u64) -> Self {
        if let Some(reader) = &mut self.reader {
            reader.chunk = reader.chunk.min(max).max(1);
        }
        self
    }

    /// The stream of frames, made at the first poll.
    fn stream(&mut self) -> &mut BoxStream<'static, Result<Bytes, BoxError>> {
        if let Some(reader) = self.reader.take() {
            let stream = stream::unfold(*reader, |mut reader| async move {
                let chunk = reader.next_chunk().await?;
                Some((chunk, reader))
            });
            self.stream = Some(stream.boxed());
        }
        self.stream.get_or_insert_with(|| stream::empty().boxed())
    }
}

impl Body for FetchBody {
    type Data = Bytes;
    type Error = BoxError;

    fn poll_frame(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Result<Frame<Bytes>, BoxError>>> {
        match self.stream().poll_next_unpin(cx) {
            Poll::Ready(Some(Ok(bytes))) => {
                if let Some(remaining) = self.remaining.as_mut() {
                    *remaining = remaining.saturating_sub(bytes.len() as u64);
                }
                Poll::Ready(Some(Ok(Frame::data(bytes))))
            }
            Poll::Ready(Some(Err(e))) => Poll::Ready(Some(Err(e))),
            Poll::Ready(None) => Poll::Ready(None),
            Poll::Pending => Poll::Pending,
        }
    }

    fn size_hint(&self) -> SizeHint {
        match self.remaining {
            Some(n) => SizeHint::with_exact(n),
            None => SizeHint::default(),
        }
    }
}
