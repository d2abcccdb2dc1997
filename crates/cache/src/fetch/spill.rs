//! The part of a body the disk had no room for, held in memory for the
//! waiters to read as it arrives, so the body is still passed through
//! whole. Memory is bounded by a window: chunks every reader has passed
//! are dropped, and while the slowest reader is a window behind, the
//! download waits for it (the upstream is read no faster than the slowest
//! client reads). A client that joins once the start of the spill is gone
//! is told so, not served a body with a hole.
//!
//! Each chunk is kept with the body offset it ends at, so a read finds its
//! chunk by binary search.

use parking_lot::Mutex;
use std::collections::VecDeque;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Weak};
use std::time::Duration;

use bytes::Bytes;
use tokio::sync::Notify;

/// The most bytes a spill holds at once.
pub(super) const WINDOW: u64 = 64 * 1024 * 1024;

/// How often a waiting download looks again even if no reader said it
/// moved (a reader that stalls for good is not waited for any longer
/// than its client's connection lasts).
const RECHECK: Duration = Duration::from_millis(500);

/// The body from byte `base` on, in memory.
#[derive(Debug, Default)]
pub(crate) struct Spill {
    pub(super) base: u64,
    window: Mutex<Window>,
}

#[derive(Debug, Default)]
struct Window {
    /// The chunks held, each with the offset it ends at.
    chunks: VecDeque<(u64, Bytes)>,
    /// Where the bytes received end.
    end: u64,
    /// Where the bytes held start (before: dropped).
    start: u64,
}

impl Spill {
    /// A spill from byte `base` on.
    pub(super) fn at(base: u64) -> Spill {
        Spill { base, window: Mutex::new(Window { chunks: VecDeque::new(), end: base, start: base }) }
    }

    /// Holds `chunk`, the next bytes of the body.
    pub(super) fn push(&self, chunk: Bytes) {
        let mut window = self.window.lock();
        window.end += chunk.len() as u64;
        let end = window.end;
        window.chunks.push_back((end, chunk));
    }

    /// Bytes received into the spill (held or dropped).
    pub(super) fn len(&self) -> u64 {
        self.window.lock().end - self.base
    }

    /// Bytes held now.
    fn held(&self) -> u64 {
        let window = self.window.lock();
        window.end - window.start
    }

    /// The bytes `from` (at or after `base`) on, at most `len`; `None`
    /// when they were dropped already.
    pub(super) fn read(&self, from: u64, len: u64) -> Option<Bytes> {
        let window = self.window.lock();
        if from < window.start {
            return None;
        }
        let index = window.chunks.partition_point(|(end, _)| *end <= from);
        let Some((end, chunk)) = window.chunks.get(index) else { return Some(Bytes::new()) };
        let start = (from - (end - chunk.len() as u64)) as usize;
        let stop = (start as u64 + len).min(chunk.len() as u64) as usize;
        Some(chunk.slice(start..stop))
    }

    /// Drops chunks from the front while more than `keep` bytes are held
    /// and the chunk ends at or before `offset`.
    fn drop_until(&self, offset: u64, keep: u64) {
        let mut window = self.window.lock();
        while let Some((end, _)) = window.chunks.front() {
            if *end > offset || window.end - window.start <= keep {
                break;
            }
            window.start = *end;
            window.chunks.pop_front();
        }
    }

    /// Whether the start of the spill was dropped: a client joining now
    /// could not be given the whole body.
    pub(super) fn lost_its_start(&self) -> bool {
        self.window.lock().start > self.base
    }
}

/// Where each reader of a fetch is, so a spill keeps what the slowest
/// still needs.
#[derive(Debug, Default)]
pub(crate) struct Readers {
    positions: Mutex<Vec<Weak<AtomicU64>>>,
    moved: Notify,
}

/// One reader's position, counted while it is held.
#[derive(Debug)]
pub(crate) struct Cursor {
    position: Arc<AtomicU64>,
    readers: Arc<Readers>,
}

impl Readers {
    /// A reader starting at `at`.
    pub(super) fn join(self: &Arc<Self>, at: u64) -> Cursor {
        let position = Arc::new(AtomicU64::new(at));
        let mut positions = self.positions.lock();
        positions.retain(|held| held.strong_count() > 0);
        positions.push(Arc::downgrade(&position));
        Cursor { position, readers: Arc::clone(self) }
    }

    /// The position of the slowest reader still reading, if any.
    fn slowest(&self) -> Option<u64> {
        let mut positions = self.positions.lock();
        positions.retain(|held| held.strong_count() > 0);
        positions.iter().filter_map(Weak::upgrade).map(|position| position.load(Ordering::Acquire)).min()
    }
}

impl Cursor {
    /// The reader is at `position` now.
    pub(super) fn moved_to(&self, position: u64) {
        self.position.store(position, Ordering::Release);
        self.readers.moved.notify_waiters();
    }
}

impl Drop for Cursor {
    fn drop(&mut self) {
        // Its client is gone: it holds nothing back any more.
        self.position.store(u64::MAX, Ordering::Release);
        self.readers.moved.notify_waiters();
    }
}

/// Waits until `spill` holds at most `window` bytes, dropping, oldest
/// first, only what every reader has passed: the download goes on as fast
/// as its slowest reader. Within the window nothing is dropped, so a client
/// that joins late still gets the whole body.
pub(super) async fn keep_within(spill: &Spill, readers: &Readers, window: u64) {
    loop {
        if spill.held() <= window {
            return;
        }
        let moved = readers.moved.notified();
        tokio::pin!(moved);
        // Registered before looking, so a move in between is not missed.
        moved.as_mut().enable();
        spill.drop_until(readers.slowest().unwrap_or(u64::MAX), window);
        if spill.held() <= window {
            return;
        }
        let _ = tokio::time::timeout(RECHECK, moved).await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_spill_reads_back_what_it_holds_from_any_offset() {
        let spill = Spill::at(100);
        spill.push(Bytes::from_static(b"abc"));
        spill.push(Bytes::from_static(b"defg"));
        assert_eq!(spill.len(), 7);
        assert_eq!(spill.read(100, 10).unwrap(), "abc");
        assert_eq!(spill.read(101, 1).unwrap(), "b");
        assert_eq!(spill.read(103, 10).unwrap(), "defg");
        assert_eq!(spill.read(105, 10).unwrap(), "fg");
        assert_eq!(spill.read(107, 10).unwrap(), "", "nothing past the end yet");
        spill.drop_until(104, 0);
        assert_eq!(spill.read(100, 10), None, "dropped");
        assert_eq!(spill.read(104, 10).unwrap(), "efg", "a chunk goes only once passed whole");
        spill.drop_until(107, 0);
        assert_eq!((spill.read(105, 10), spill.len(), spill.held()), (None, 7, 0));
    }

    #[tokio::test(start_paused = true)]
    async fn the_download_waits_for_the_slowest_reader_and_memory_stays_within_the_window() {
        let readers = Arc::new(Readers::default());
        let spill = Arc::new(Spill::at(0));
        let (fast, slow) = (readers.join(0), readers.join(0));
        let body: Vec<u8> = (0..100u8).collect();
        let download = {
            let (spill, readers, body) = (Arc::clone(&spill), Arc::clone(&readers), body.clone());
            tokio::spawn(async move {
                let mut most_held = 0;
                for chunk in body.chunks(10) {
                    spill.push(Bytes::copy_from_slice(chunk));
                    keep_within(&spill, &readers, 30).await;
                    most_held = most_held.max(spill.held());
                }
                most_held
            })
        };
        // Each reader reads what is there, the slow one a tenth as often.
        let (mut fast_read, mut slow_read) = (Vec::new(), Vec::new());
        for tick in 0..2_000 {
            tokio::time::sleep(Duration::from_millis(1)).await;
            let at = fast_read.len() as u64;
            let bytes = spill.read(at, 1_000).expect("the fast reader's bytes are held");
            fast_read.extend_from_slice(&bytes);
            fast.moved_to(fast_read.len() as u64);
            if tick % 10 == 0 {
                let bytes = spill.read(slow_read.len() as u64, 5).expect("the slow reader's bytes are held");
                slow_read.extend_from_slice(&bytes);
                slow.moved_to(slow_read.len() as u64);
            }
            if slow_read.len() == body.len() {
                break;
            }
        }
        assert_eq!((fast_read, &slow_read), (body.clone(), &body), "both read the whole body");
        assert!(download.await.unwrap() <= 30, "never more than the window held");

        // Within the window nothing goes, for clients that join late; a
        // reader that goes away holds nothing back.
        let spill = Spill::at(0);
        let gone = readers.join(0);
        drop((fast, slow));
        for _ in 0..5 {
            spill.push(Bytes::from_static(&[0; 10]));
        }
        keep_within(&spill, &readers, 50).await;
        assert!(!spill.lost_its_start());
        spill.push(Bytes::from_static(&[0; 10]));
        drop(gone);
        keep_within(&spill, &readers, 50).await;
        assert_eq!(spill.held(), 50, "only what is over the window");
        assert!(spill.lost_its_start());
    }
}
