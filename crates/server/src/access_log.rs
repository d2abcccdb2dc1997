//! The access log (`-access-log PATH`, or `-` for stderr): one JSON object
//! per request of the proxy listener, written when its answer's body has
//! been sent (or the client went away), so `bytes` and `duration_ms` are
//! what the client got.
//!
//! The request path never waits for it. Lines go through a bounded channel
//! to a thread of their own that writes them; when the channel is full
//! the line is dropped and counted (`pkgproxy_access_log_dropped_total`),
//! the request is served as ever. With the log off, the answer's body is
//! wrapped with nothing to record: one branch per frame.
//!
//! `SIGHUP` reopens the file, so a log rotated away is let go.

use std::fs::{File, OpenOptions};
use std::io::{BufWriter, Write};
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::pin::Pin;
use std::sync::mpsc::{self, Receiver, SyncSender, TrySendError};
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::{Instant, SystemTime};

use bytes::Bytes;
use http::{Method, Request, Response, Uri};
use http_body::{Body, Frame, SizeHint};
use pkgproxy_metrics::{AccessLogCounter, Counters};
use pkgproxy_sides::SideId;
use serde::Serialize;

use crate::body::ResponseBody;

/// Lines waiting for the writer; beyond, new ones are dropped.
const QUEUE: usize = 16 * 1024;

/// Where the access log goes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Target {
    /// Standard error (`-access-log -`).
    Stderr,
    /// A file, appended to.
    File(PathBuf),
}

/// How a request was served, as the log says it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum CacheUse {
    /// From the cache, fresh.
    Hit,
    /// From the upstream (or failed there).
    Miss,
    /// From the cache, once the upstream confirmed it.
    Revalidated,
    /// From the cache, stale: the upstream could not be asked or failed.
    Stale,
    /// Refused: by a side's policy, or offline with nothing cached.
    Refused,
    /// Passed to the upstream and back, never cached (a forwarded request,
    /// a tunnel).
    Passed,
    /// Answered by pkgproxy itself (the status page, a side's own answer).
    Local,
}

/// What the request path tells the log about an answer, handed to the
/// gateway beside the response.
#[derive(Debug, Clone)]
pub struct Note {
    /// The side that served it, if one did.
    pub side: Option<SideId>,
    /// How.
    pub cache: CacheUse,
    /// The upstream that answered (an instance's base URL, a cluster peer,
    /// a bundle), when one did.
    pub upstream: Option<Arc<str>>,
}

/// One line.
#[derive(Debug, Serialize)]
struct Line {
    time: String,
    client: String,
    method: String,
    side: Option<&'static str>,
    uri: String,
    cache: CacheUse,
    status: u16,
    bytes: u64,
    duration_ms: f64,
    upstream: Option<String>,
    /// Why the answer was not a plain hit (`X-Pkgproxy-Reason`).
    #[serde(skip_serializing_if = "Option::is_none")]
    reason: Option<String>,
}

enum Message {
    Line(Box<Line>),
    Reopen,
    Flush(mpsc::SyncSender<()>),
}

/// The log's sending end, shared by every request.
#[derive(Debug, Clone)]
pub struct AccessLog {
    sender: Option<SyncSender<Message>>,
    counters: Arc<Counters<AccessLogCounter>>,
}

/// The access log could not be opened.
#[derive(Debug, thiserror::Error)]
#[error("cannot open the access log {path}: {source}")]
pub struct OpenError {
    path: PathBuf,
    source: std::io::Error,
}

impl AccessLog {
    /// The log writing to `target`, or none. The file is opened now, so a
    /// path that cannot be written stops the start with a clear error.
    pub fn open(target: Option<&Target>) -> Result<AccessLog, OpenError> {
        let counters = Arc::new(Counters::default());
        let Some(target) = target else { return Ok(AccessLog { sender: None, counters }) };
        let output = Output::open(target).map_err(|source| OpenError { path: target.path(), source })?;
        let (sender, receiver) = mpsc::sync_channel(QUEUE);
        let writer = Writer { target: target.clone(), output, counters: Arc::clone(&counters) };
        let spawned =
            std::thread::Builder::new().name("pkgproxy-access-log".into()).spawn(move || writer.run(receiver));
        spawned.map_err(|source| OpenError { path: target.path(), source })?;
        Ok(AccessLog { sender: Some(sender), counters })
    }

    /// Whether lines are written at all.
    pub fn is_on(&self) -> bool {
        self.sender.is_some()
    }

    /// The counts of lines written and dropped.
    pub fn snapshot(&self) -> pkgproxy_metrics::Snapshot<AccessLogCounter> {
        self.counters.snapshot()
    }

    /// Opens the file again (after a rotation).
    pub fn reopen(&self) {
        if let Some(sender) = &self.sender {
            let _ = sender.send(Message::Reopen);
        }
    }

    /// Waits until every line sent so far is written out (at a stop).
    pub fn flush(&self) {
        if let Some(sender) = &self.sender {
            let (done, wait) = mpsc::sync_channel(1);
            if sender.send(Message::Flush(done)).is_ok() {
                let _ = wait.recv();
            }
        }
    }

    /// What to note of `request` from `client`, before it is served.
    pub fn begin<B>(&self, request: &Request<B>, client: SocketAddr) -> Option<Begun> {
        self.sender.as_ref()?;
        Some(Begun {
            started: Instant::now(),
            time: SystemTime::now(),
            client,
            method: request.method().clone(),
            uri: request.uri().clone(),
        })
    }

    /// `response`, which the request path describes with `note`, with its
    /// body wrapped to write the line once it is sent.
    pub fn attach(&self, begun: Option<Begun>, response: Response<ResponseBody>, note: Note) -> Response<LoggedBody> {
        let pending = begun.map(|begun| {
            Box::new(Pending {
                log: self.clone(),
                line: Line {
                    time: humantime::format_rfc3339_millis(begun.time).to_string(),
                    client: begun.client.ip().to_string(),
                    method: begun.method.to_string(),
                    side: note.side.map(SideId::as_str),
                    uri: crate::redact::without_user(&begun.uri.to_string()),
                    cache: note.cache,
                    status: response.status().as_u16(),
                    bytes: 0,
                    duration_ms: 0.0,
                    upstream: note.upstream.as_deref().map(str::to_owned),
                    reason: response
                        .headers()
                        .get(crate::headers::REASON)
                        .and_then(|reason| reason.to_str().ok())
                        .map(str::to_owned),
                },
                started: begun.started,
            })
        });
        response.map(|inner| LoggedBody { inner, pending })
    }

    fn send(&self, line: Line) {
        let Some(sender) = &self.sender else { return };
        match sender.try_send(Message::Line(Box::new(line))) {
            Ok(()) => {}
            Err(TrySendError::Full(_) | TrySendError::Disconnected(_)) => {
                self.counters.increment(AccessLogCounter::Dropped);
            }
        }
    }
}

impl Target {
    fn path(&self) -> PathBuf {
        match self {
            Target::Stderr => PathBuf::from("-"),
            Target::File(path) => path.clone(),
        }
    }
}

/// A request noted before it is served.
#[derive(Debug)]
pub struct Begun {
    started: Instant,
    time: SystemTime,
    client: SocketAddr,
    method: Method,
    uri: Uri,
}

/// A line waiting for its body to be sent.
#[derive(Debug)]
struct Pending {
    log: AccessLog,
    line: Line,
    started: Instant,
}

/// An answer's body that writes its request's line once it is sent or
/// dropped.
#[derive(Debug)]
pub struct LoggedBody {
    inner: ResponseBody,
    pending: Option<Box<Pending>>,
}

impl Body for LoggedBody {
    type Data = Bytes;
    type Error = <ResponseBody as Body>::Error;

    fn poll_frame(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Result<Frame<Bytes>, Self::Error>>> {
        let this = self.get_mut();
        let polled = Pin::new(&mut this.inner).poll_frame(cx);
        if let (Some(pending), Poll::Ready(Some(Ok(frame)))) = (&mut this.pending, &polled) {
            pending.line.bytes += frame.data_ref().map_or(0, |data| data.len() as u64);
        }
        polled
    }

    fn is_end_stream(&self) -> bool {
        self.inner.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.inner.size_hint()
    }
}

impl Drop for LoggedBody {
    fn drop(&mut self) {
        if let Some(mut pending) = self.pending.take() {
            pending.line.duration_ms = (pending.started.elapsed().as_secs_f64() * 1e6).round() / 1e3;
            pending.log.send(pending.line);
        }
    }
}

/// Where the writer writes.
enum Output {
    Stderr(std::io::Stderr),
    File(BufWriter<File>),
}

impl Output {
    fn open(target: &Target) -> std::io::Result<Output> {
        match target {
            Target::Stderr => Ok(Output::Stderr(std::io::stderr())),
            Target::File(path) => Ok(Output::File(BufWriter::new(append(path)?))),
        }
    }

    fn writer(&mut self) -> &mut dyn Write {
        match self {
            Output::Stderr(stderr) => stderr,
            Output::File(file) => file,
        }
    }
}

fn append(path: &Path) -> std::io::Result<File> {
    OpenOptions::new().create(true).append(true).open(path)
}

/// The thread that writes lines.
struct Writer {
    target: Target,
    output: Output,
    counters: Arc<Counters<AccessLogCounter>>,
}

impl Writer {
    fn run(mut self, receiver: Receiver<Message>) {
        while let Ok(message) = receiver.recv() {
            self.handle(message);
            // Whatever else is waiting goes out in the same write.
            while let Ok(message) = receiver.try_recv() {
                self.handle(message);
            }
            self.flush();
        }
        self.flush();
    }

    fn handle(&mut self, message: Message) {
        match message {
            Message::Line(line) => self.write(&line),
            Message::Reopen => self.reopen(),
            Message::Flush(done) => {
                self.flush();
                let _ = done.send(());
            }
        }
    }

    fn write(&mut self, line: &Line) {
        let mut text = serde_json::to_vec(line).unwrap_or_default();
        text.push(b'\n');
        match self.output.writer().write_all(&text) {
            Ok(()) => _ = self.counters.increment(AccessLogCounter::Written),
            Err(error) => {
                self.counters.increment(AccessLogCounter::Dropped);
                tracing::warn!(%error, "cannot write the access log");
            }
        }
    }

    fn flush(&mut self) {
        if let Err(error) = self.output.writer().flush() {
            tracing::warn!(%error, "cannot write the access log");
        }
    }

    fn reopen(&mut self) {
        self.flush();
        match Output::open(&self.target) {
            Ok(output) => self.output = output,
            Err(error) => {
                tracing::warn!(path = %self.target.path().display(), %error, "cannot reopen the access log; writing on to the one open")
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn line(uri: &str) -> Line {
        Line {
            time: String::new(),
            client: "127.0.0.1".into(),
            method: "GET".into(),
            side: None,
            uri: uri.into(),
            cache: CacheUse::Hit,
            status: 200,
            bytes: 0,
            duration_ms: 0.0,
            upstream: None,
            reason: None,
        }
    }

    #[test]
    fn a_full_queue_drops_and_counts_lines_without_waiting() {
        let (sender, receiver) = mpsc::sync_channel(2);
        let log = AccessLog { sender: Some(sender), counters: Arc::default() };
        for n in 0..5 {
            log.send(line(&format!("/{n}")));
        }
        assert_eq!(log.snapshot().get(AccessLogCounter::Dropped), 3);
        let kept: Vec<String> = receiver
            .try_iter()
            .map(|message| match message {
                Message::Line(line) => line.uri,
                _ => String::new(),
            })
            .collect();
        assert_eq!(kept, ["/0", "/1"], "the first lines, in order");
    }

    #[test]
    fn lines_are_written_and_the_file_is_reopened_after_a_rotation() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("access.log");
        let log = AccessLog::open(Some(&Target::File(path.clone()))).unwrap();
        log.send(line("/before"));
        log.flush();
        std::fs::rename(&path, dir.path().join("access.log.1")).unwrap();
        log.reopen();
        log.send(line("/after"));
        log.flush();
        let rotated = std::fs::read_to_string(dir.path().join("access.log.1")).unwrap();
        let current = std::fs::read_to_string(&path).unwrap();
        assert!(rotated.contains("\"uri\":\"/before\"") && !rotated.contains("/after"), "{rotated}");
        assert!(current.contains("\"uri\":\"/after\""), "{current}");
        assert_eq!(log.snapshot().get(AccessLogCounter::Written), 2);
    }
}
