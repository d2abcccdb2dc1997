//! One run of a piece of work per key, however many ask at once: the
//! first asker's future runs, every concurrent asker gets its result (50
//! clients pulling one tag cost one `HEAD` upstream). Nothing is kept once
//! the run is over.

use parking_lot::Mutex;
use std::collections::HashMap;
use std::future::Future;

use futures_util::future::{BoxFuture, FutureExt, Shared};

/// Runs in progress, by key.
pub struct SingleFlight<V: Clone> {
    inflight: Mutex<HashMap<String, Shared<BoxFuture<'static, V>>>>,
}

impl<V: Clone> Default for SingleFlight<V> {
    fn default() -> Self {
        SingleFlight { inflight: Mutex::default() }
    }
}

impl<V: Clone> std::fmt::Debug for SingleFlight<V> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let inflight = self.inflight.lock().len();
        f.debug_struct("SingleFlight").field("inflight", &inflight).finish()
    }
}

impl<V: Clone + Send + Sync + 'static> SingleFlight<V> {
    /// The result of the run for `key` in progress, or of a new one made
    /// by `make`.
    pub async fn run<F>(&self, key: &str, make: impl FnOnce() -> F) -> V
    where
        F: Future<Output = V> + Send + 'static,
    {
        let run = {
            let mut inflight = self.inflight.lock();
            inflight.entry(key.to_string()).or_insert_with(|| make().boxed().shared()).clone()
        };
        let value = run.clone().await;
        let mut inflight = self.inflight.lock();
        if inflight.get(key).is_some_and(|current| current.ptr_eq(&run)) {
            inflight.remove(key);
        }
        value
    }
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::sync::Arc;

    use super::*;

    #[tokio::test]
    async fn concurrent_askers_share_one_run_and_a_later_one_runs_again() {
        let flights = Arc::new(SingleFlight::<usize>::default());
        let runs = Arc::new(AtomicUsize::new(0));
        let (release, released) = tokio::sync::watch::channel(false);
        let ask = |flights: Arc<SingleFlight<usize>>,
                   runs: Arc<AtomicUsize>,
                   mut released: tokio::sync::watch::Receiver<bool>| async move {
            flights
                .run("tag", || async move {
                    let n = runs.fetch_add(1, Ordering::SeqCst) + 1;
                    let _ = released.wait_for(|go| *go).await;
                    n
                })
                .await
        };
        let askers: Vec<_> =
            (0..10).map(|_| tokio::spawn(ask(Arc::clone(&flights), Arc::clone(&runs), released.clone()))).collect();
        tokio::task::yield_now().await;
        release.send(true).unwrap();
        for asker in askers {
            assert_eq!(asker.await.unwrap(), 1, "every asker got the one run's result");
        }
        assert_eq!(ask(Arc::clone(&flights), Arc::clone(&runs), released.clone()).await, 2, "a later ask runs again");
    }
}
