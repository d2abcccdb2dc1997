//! The cache's upkeep, in the background, off the request path: every few
//! seconds, eviction down to the quota (or to the free space kept on the
//! disk), and a line in the log when the disk comes under pressure or out of
//! it (once, not per request); every minute, and at shutdown, the uses hits
//! recorded in memory written into the index, and the traffic history
//! into its file.

use std::sync::Arc;
use std::time::Duration;

use tokio_util::sync::CancellationToken;

use crate::state::State;

/// How often the cache is checked against its quota.
const EVICT_EVERY: Duration = Duration::from_secs(5);
/// How often recorded uses are written.
const PERSIST_EVERY: Duration = Duration::from_secs(60);

/// Keeps the cache until `token` is cancelled, then writes what uses are
/// left.
pub async fn run(state: Arc<State>, token: CancellationToken) {
    let mut evict = tokio::time::interval(EVICT_EVERY);
    let mut persist = tokio::time::interval(PERSIST_EVERY);
    let mut under_pressure = false;
    loop {
        tokio::select! {
            _ = evict.tick() => {
                blocking(&state, evict_now).await;
                under_pressure = report_pressure(&state.cache, under_pressure);
                look_at_traffic(&state);
            }
            _ = persist.tick() => blocking(&state, persist_now).await,
            _ = token.cancelled() => break,
        }
    }
    blocking(&state, persist_now).await;
}

async fn blocking(state: &Arc<State>, work: fn(&State)) {
    let state = Arc::clone(state);
    if tokio::task::spawn_blocking(move || work(&state)).await.is_err() {
        tracing::warn!("the cache's upkeep stopped");
    }
}

/// Evicts down to the quota, when the cache is over it.
pub fn evict_now(state: &State) {
    if let Err(error) = state.cache.evict(&state.cache.quota(), &state.sides) {
        tracing::warn!(%error, "eviction failed");
    }
}

/// Whether the cache's file system is short of its kept free space now,
/// said in the log when that changes from `was`.
fn report_pressure(cache: &pkgproxy_cache::Cache, was: bool) -> bool {
    let (usage, quota) = (cache.usage(), cache.quota());
    let kept = quota.min_free.bytes(usage.total);
    let now = usage.free < kept;
    match (was, now) {
        (false, true) => tracing::warn!(
            free = usage.free,
            kept,
            "disk pressure: the cache's file system is short of free space even after eviction"
        ),
        (true, false) => tracing::info!(free = usage.free, "disk pressure is over"),
        _ => {}
    }
    now
}

/// Keeps what each side's counters moved for the charts of the last hour
/// and day.
pub fn look_at_traffic(state: &State) {
    let sides = pkgproxy_sides::SideId::ALL.iter().map(|side| state.stats.side(*side).snapshot()).collect();
    state.history.look(pkgproxy_cache::unix_secs(state.clock.now()), sides);
}

fn persist_now(state: &State) {
    if let Err(error) = state.cache.persist_recency() {
        tracing::warn!(%error, "cannot write when entries were last used");
    }
    look_at_traffic(state);
    if let Err(error) = crate::history::save(&state.settings.state_dir, &state.history.kept()) {
        tracing::warn!(%error, "the charts will not show this traffic after a restart");
    }
}
