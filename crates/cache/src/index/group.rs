//! Group commit: a write that comes while another is being committed
//! waits, and goes into the next commit with every other write that came
//! meanwhile. Many downloads finishing at once then cost one commit (one
//! `fsync` of the index) between them, not one each in a queue.

use parking_lot::{Condvar, Mutex};
use std::collections::HashMap;

/// Writes of `W`, each answered with an `R`.
pub(super) struct Group<W, R> {
    queue: Mutex<Queue<W, R>>,
    changed: Condvar,
}

struct Queue<W, R> {
    /// Writes not yet taken into a commit, by ticket.
    waiting: Vec<(u64, W)>,
    /// Results of committed writes whose callers have not yet woken.
    done: HashMap<u64, R>,
    /// Whether a caller is committing.
    writing: bool,
    next_ticket: u64,
}

impl<W, R> Default for Group<W, R> {
    fn default() -> Self {
        let queue = Queue { waiting: Vec::new(), done: HashMap::new(), writing: false, next_ticket: 0 };
        Group { queue: Mutex::new(queue), changed: Condvar::new() }
    }
}

impl<W, R> Group<W, R> {
    /// Has `work` committed and returns its result. When no commit is under
    /// way, the caller commits every waiting write with `commit` (which
    /// returns their results in order); otherwise it waits for the commit
    /// that takes its write. Blocking.
    pub(super) fn submit(&self, work: W, commit: impl FnOnce(Vec<W>) -> Vec<R>) -> R {
        let mut queue = self.queue.lock();
        let ticket = queue.next_ticket;
        queue.next_ticket += 1;
        queue.waiting.push((ticket, work));
        let mut commit = Some(commit);
        loop {
            if let Some(result) = queue.done.remove(&ticket) {
                return result;
            }
            // A caller whose write is still waiting when no commit is under
            // way commits: its own write is in what it takes, so it does
            // this once.
            if let Some(commit) = commit.take_if(|_| !queue.writing) {
                queue.writing = true;
                let (tickets, batch): (Vec<u64>, Vec<W>) = std::mem::take(&mut queue.waiting).into_iter().unzip();
                drop(queue);
                let results = commit(batch);
                queue = self.queue.lock();
                queue.done.extend(tickets.into_iter().zip(results));
                queue.writing = false;
                self.changed.notify_all();
                continue;
            }
            self.changed.wait(&mut queue);
        }
    }
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::sync::{Arc, Barrier};

    use super::*;

    #[test]
    fn a_write_alone_is_committed_by_its_caller() {
        let group = Group::default();
        assert_eq!(group.submit(2, |batch: Vec<i32>| batch.iter().map(|w| w * 10).collect()), 20);
    }

    #[test]
    fn writes_that_come_during_a_commit_share_the_next_and_each_gets_its_own_result() {
        let group = Arc::new(Group::<usize, usize>::default());
        let commits = Arc::new(AtomicUsize::new(0));
        let committing = Arc::new(Barrier::new(2));
        let commit = |commits: &Arc<AtomicUsize>, batch: Vec<usize>| {
            commits.fetch_add(1, Ordering::SeqCst);
            batch.iter().map(|w| w + 100).collect::<Vec<_>>()
        };
        // The first caller's commit lasts until eight more writes wait.
        let first = {
            let (group, commits, committing) = (Arc::clone(&group), Arc::clone(&commits), Arc::clone(&committing));
            std::thread::spawn(move || {
                let waiting = Arc::clone(&group);
                group.submit(0, |batch| {
                    committing.wait();
                    while waiting.queue.lock().waiting.len() < 8 {
                        std::thread::yield_now();
                    }
                    commit(&commits, batch)
                })
            })
        };
        committing.wait();
        let others: Vec<_> = (1..=8)
            .map(|work| {
                let (group, commits) = (Arc::clone(&group), Arc::clone(&commits));
                std::thread::spawn(move || group.submit(work, |batch| commit(&commits, batch)))
            })
            .collect();
        assert_eq!(first.join().unwrap(), 100);
        for (work, other) in (1..=8).zip(others) {
            assert_eq!(other.join().unwrap(), work + 100);
        }
        assert_eq!(commits.load(Ordering::SeqCst), 2);
    }
}
