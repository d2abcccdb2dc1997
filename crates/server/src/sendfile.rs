//! Cached files sent by the kernel: on a plain HTTP/1.1 connection a cached
//! body goes from its file to the socket with `sendfile(2)`, never through
//! pkgproxy's memory, as nginx sends its cache. Large hits then cost the
//! CPU of the kernel's copy alone, and a slow reader holds no buffer.
//!
//! hyper writes what a body's frames hold, so a frame cannot name a file.
//! A body sent this way yields stand-ins instead: slices of one block of
//! memory that is never written or read (its pages are never touched, so
//! it costs no memory), each as long as the range of the file it stands
//! for, whose range it queues on its connection ([`Ranges`]). The
//! connection's stream ([`KernelSent`]) knows a stand-in by its address:
//! asked to write one, it has the kernel send the range at the head of the
//! queue instead. hyper hands a connection's frames over in order and, with
//! vectored writes, without copying them (the gateway's connections are
//! built so), so stand-ins and ranges meet in the same order. A stand-in
//! that does not match the head of the queue, by its place in the block or
//! by its length, ends the connection: wrong bytes are never sent.
//!
//! TLS and HTTP/2 connections, downloads in progress and rewritten answers
//! keep the copy: their bytes pass through user space anyway.
//!
//! What the kernel sent is counted (`pkgproxy_clients_kernel_sent_bytes_total`)
//! where it is sent, so the count says that this path ran, not that it
//! should have.

use parking_lot::Mutex;
use std::collections::VecDeque;
use std::fs::File;
use std::io::IoSlice;
use std::pin::Pin;
use std::sync::{Arc, LazyLock};
use std::task::{ready, Context, Poll};

use bytes::Bytes;
use pkgproxy_metrics::{ClientCounter, Counters};
use tokio::io::{AsyncRead, AsyncWrite, Interest, ReadBuf};
use tokio::net::TcpStream;

/// The longest range one stand-in stands for: a frame's worth, as nginx's
/// `sendfile_max_chunk`, so one client's body does not keep its thread
/// from the others'.
pub const FRAME: usize = 2 << 20;

/// Bodies shorter than this are read and written with their head in one
/// write: for a few kilobytes that is one system call, where the kernel
/// would take two (the head, then the file) and two packets.
pub const MIN_LEN: u64 = 32 * 1024;

/// What a cached file shorter than its entry says, sent by the kernel or
/// copied: the answer ends there, and its connection with it.
pub const SHORT_FILE: &str = "cached file is shorter than its index entry";

/// The block the stand-ins are slices of: an anonymous mapping of its own,
/// read-only, whose pages the kernel provides only when touched, and
/// nothing touches them (zeroed memory from the allocator may be cleared
/// by hand, and then held). Should the mapping fail, a block from the
/// allocator does the same work at the cost of its memory.
static BLOCK: LazyLock<&'static [u8]> =
    LazyLock::new(|| match memmap2::MmapMut::map_anon(FRAME).and_then(memmap2::MmapMut::make_read_only) {
        Ok(mapped) => &Box::leak(Box::new(mapped))[..],
        Err(_) => Vec::leak(vec![0u8; FRAME]),
    });

/// The ranges of files a connection's stand-ins stand for, in the order
/// they were handed to hyper.
#[derive(Debug, Default)]
pub struct Ranges {
    queue: Mutex<VecDeque<Range>>,
}

#[derive(Debug)]
struct Range {
    file: Arc<File>,
    offset: u64,
    len: u64,
    /// Bytes of it the kernel sent so far.
    sent: u64,
}

impl Ranges {
    /// Queues up to [`FRAME`] bytes of `file` from `offset` (at most
    /// `len`); returns the stand-in for them, as long as the range queued.
    pub fn stand_in(&self, file: Arc<File>, offset: u64, len: u64) -> Bytes {
        let len = len.min(FRAME as u64);
        self.queue.lock().push_back(Range { file, offset, len, sent: 0 });
        Bytes::from_static(&BLOCK[..len as usize])
    }
}

/// Whether `bytes` is (a part of) a stand-in.
fn is_stand_in(bytes: &[u8]) -> bool {
    let start = BLOCK.as_ptr() as usize;
    let at = bytes.as_ptr() as usize;
    !bytes.is_empty() && at >= start && at < start + BLOCK.len()
}

/// A client's TCP stream whose writes of stand-ins send the files they
/// stand for.
#[derive(Debug)]
pub struct KernelSent {
    inner: TcpStream,
    ranges: Arc<Ranges>,
    /// The clients' counters, where the bytes the kernel sent are added.
    counters: Arc<Counters<ClientCounter>>,
}

impl KernelSent {
    /// `inner`, sending the ranges `ranges` queues, counted in `counters`.
    pub fn new(inner: TcpStream, ranges: Arc<Ranges>, counters: Arc<Counters<ClientCounter>>) -> Self {
        KernelSent { inner, ranges, counters }
    }

    /// Sends the range at the head of the queue, which `stand_in` is
    /// hyper's view of.
    fn poll_send(&mut self, cx: &mut Context<'_>, stand_in: &[u8]) -> Poll<std::io::Result<usize>> {
        let mut queue = self.ranges.queue.lock();
        let Some(range) = queue.front_mut() else {
            return Poll::Ready(Err(out_of_step("no range is queued")));
        };
        let at = (stand_in.as_ptr() as usize - BLOCK.as_ptr() as usize) as u64;
        if at != range.sent || stand_in.len() as u64 != range.len - range.sent {
            return Poll::Ready(Err(out_of_step("the range queued is another")));
        }
        loop {
            ready!(self.inner.poll_write_ready(cx))?;
            let (file, mut offset, count) = (&range.file, range.offset + range.sent, stand_in.len());
            let socket = &self.inner;
            let sent = socket.try_io(Interest::WRITABLE, || {
                rustix::fs::sendfile(socket, file.as_ref(), Some(&mut offset), count).map_err(std::io::Error::from)
            });
            match sent {
                Ok(0) => return Poll::Ready(Err(std::io::Error::new(std::io::ErrorKind::UnexpectedEof, SHORT_FILE))),
                Ok(sent) => {
                    self.counters.add(ClientCounter::KernelSentBytes, sent as u64);
                    range.sent += sent as u64;
                    if range.sent == range.len {
                        queue.pop_front();
                    }
                    return Poll::Ready(Ok(sent));
                }
                Err(error) if error.kind() == std::io::ErrorKind::WouldBlock => continue,
                Err(error) => return Poll::Ready(Err(error)),
            }
        }
    }
}

fn out_of_step(why: &str) -> std::io::Error {
    std::io::Error::other(format!("a cached file's bytes are out of step with the answer: {why}"))
}

impl AsyncRead for KernelSent {
    fn poll_read(self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &mut ReadBuf<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.get_mut().inner).poll_read(cx, buf)
    }
}

impl AsyncWrite for KernelSent {
    fn poll_write(self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &[u8]) -> Poll<std::io::Result<usize>> {
        let this = self.get_mut();
        if is_stand_in(buf) {
            return this.poll_send(cx, buf);
        }
        Pin::new(&mut this.inner).poll_write(cx, buf)
    }

    /// Writes the buffers before the first stand-in, or that stand-in's
    /// range: a head and its file's bytes take two calls.
    fn poll_write_vectored(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[IoSlice<'_>],
    ) -> Poll<std::io::Result<usize>> {
        let this = self.get_mut();
        match bufs.iter().position(|buf| is_stand_in(buf)) {
            Some(0) => this.poll_send(cx, &bufs[0]),
            Some(first) => Pin::new(&mut this.inner).poll_write_vectored(cx, &bufs[..first]),
            None => Pin::new(&mut this.inner).poll_write_vectored(cx, bufs),
        }
    }

    fn is_write_vectored(&self) -> bool {
        true
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.get_mut().inner).poll_flush(cx)
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.get_mut().inner).poll_shutdown(cx)
    }
}

#[cfg(test)]
mod tests {
    use std::io::Write;

    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    use super::*;

    /// A connected pair: the server's end sending through `ranges`, and
    /// the client's (a test's own socket on 127.0.0.1, not a way out).
    #[allow(clippy::disallowed_methods)]
    async fn pair() -> (KernelSent, Arc<Ranges>, TcpStream) {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let client = TcpStream::connect(listener.local_addr().unwrap()).await.unwrap();
        let (server, _) = listener.accept().await.unwrap();
        let ranges = Arc::new(Ranges::default());
        (KernelSent::new(server, Arc::clone(&ranges), Arc::default()), ranges, client)
    }

    fn file_of(bytes: &[u8]) -> Arc<File> {
        let mut file = tempfile::tempfile().unwrap();
        file.write_all(bytes).unwrap();
        Arc::new(file)
    }

    #[tokio::test]
    async fn stand_ins_between_other_bytes_are_sent_as_the_file_ranges_they_stand_for() {
        let (mut server, ranges, mut client) = pair().await;
        let content: Vec<u8> = (0..3 * FRAME + 5).map(|n| (n % 251) as u8).collect();
        let file = file_of(&content);
        let head = Bytes::from_static(b"HEAD\r\n");
        let first = ranges.stand_in(Arc::clone(&file), 10, 100);
        let second = ranges.stand_in(Arc::clone(&file), 1000, 3 * FRAME as u64);
        assert_eq!(second.len(), FRAME, "one frame at most");
        let tail = Bytes::from_static(b"TAIL");
        let mut pending: Vec<Bytes> = vec![head, first, second, tail];
        let counters = Arc::clone(&server.counters);
        let writing = tokio::spawn(async move {
            // As hyper flushes its queue: vectored, advancing by what was written.
            while !pending.is_empty() {
                let slices: Vec<IoSlice<'_>> = pending.iter().map(|b| IoSlice::new(b)).collect();
                let mut n = server.write_vectored(&slices).await.unwrap();
                while n > 0 {
                    let step = n.min(pending[0].len());
                    bytes::Buf::advance(&mut pending[0], step);
                    n -= step;
                    if pending[0].is_empty() {
                        pending.remove(0);
                    }
                }
            }
            server.shutdown().await.unwrap();
        });
        let mut got = Vec::new();
        client.read_to_end(&mut got).await.unwrap();
        writing.await.unwrap();
        let mut expected = b"HEAD\r\n".to_vec();
        expected.extend_from_slice(&content[10..110]);
        expected.extend_from_slice(&content[1000..1000 + FRAME]);
        expected.extend_from_slice(b"TAIL");
        assert_eq!(got.len(), expected.len());
        assert!(got == expected, "the file's bytes, in order, between the others");
        assert!(ranges.queue.lock().is_empty());
        let by_kernel = counters.get(ClientCounter::KernelSentBytes);
        assert_eq!(by_kernel, 100 + FRAME as u64, "the stand-ins' ranges, not the bytes between them");
    }

    #[tokio::test]
    async fn a_stand_in_without_its_range_ends_the_write_instead_of_sending_zeros() {
        let (mut server, ranges, _client) = pair().await;
        let stand_in = ranges.stand_in(file_of(b"abc"), 0, 3);
        ranges.queue.lock().clear();
        let error = server.write(&stand_in).await.unwrap_err();
        assert!(error.to_string().contains("out of step"), "{error}");

        let other = ranges.stand_in(file_of(b"abcdef"), 0, 6);
        let error = server.write(&other[..3]).await.unwrap_err();
        assert!(error.to_string().contains("out of step"), "a shorter stand-in than its range: {error}");
    }

    #[tokio::test]
    async fn a_file_shorter_than_its_range_fails_the_write() {
        let (mut server, ranges, _client) = pair().await;
        let stand_in = ranges.stand_in(file_of(b"abc"), 3, 10);
        let error = server.write(&stand_in).await.unwrap_err();
        assert_eq!(error.kind(), std::io::ErrorKind::UnexpectedEof, "{error}");
    }
}
