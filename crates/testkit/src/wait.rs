//! Waiting for something another task or process will do: poll, with a
//! deadline that fails the test rather than hanging it. For effects that
//! happen off the client's path (a counter a copy's task bumps, an index
//! learnt after the answer was sent), never for time that a test could
//! control: tests of timers pause tokio's clock instead.

use std::future::Future;
use std::time::Duration;

/// How long [`eventually`] waits before it fails the test.
pub const PATIENCE: Duration = Duration::from_secs(20);

/// How often [`eventually`] looks.
const POLL: Duration = Duration::from_millis(20);

/// Polls `check` until it gives `Some`, and returns that; panics naming
/// `what` after [`PATIENCE`].
#[track_caller]
pub fn eventually<'a, T, F, Fut>(what: &'a str, mut check: F) -> impl Future<Output = T> + 'a
where
    F: FnMut() -> Fut + 'a,
    Fut: Future<Output = Option<T>> + 'a,
{
    let caller = std::panic::Location::caller();
    async move {
        let deadline = tokio::time::Instant::now() + PATIENCE;
        loop {
            if let Some(value) = check().await {
                return value;
            }
            assert!(tokio::time::Instant::now() < deadline, "{caller}: still waiting after {PATIENCE:?} for {what}");
            tokio::time::sleep(POLL).await;
        }
    }
}
