//! Whether a store keeps the promises cluster mode rests on: of several
//! concurrent conditional creates of one object exactly one wins, and a
//! stale compare-and-swap fails. A store that ignores the headers (Garage)
//! or checks and then writes (s3s-fs) passes a sequential probe and fails
//! this one; a cluster on it would hand every node the same lease.

use std::sync::Arc;

use bytes::Bytes;
use object_store::path::Path;
use object_store::{ObjectStore, ObjectStoreExt, PutMode, PutOptions, PutPayload, UpdateVersion};

use crate::error::ClusterError;

/// Concurrent creates of the probe object.
const RACERS: usize = 8;

/// Runs the test on `store` with probe objects under `probe` (a fresh
/// name: `probe/<node>-<time>`), removing them after.
pub async fn check(store: Arc<dyn ObjectStore>, probe: &Path, endpoint: &str) -> Result<(), ClusterError> {
    let unfit = |reason: String| ClusterError::Unfit { endpoint: endpoint.to_owned(), reason };
    let racers = (0..RACERS).map(|i| {
        let (store, probe) = (Arc::clone(&store), probe.clone());
        tokio::spawn(async move {
            let options = PutOptions { mode: PutMode::Create, ..PutOptions::default() };
            store.put_opts(&probe, PutPayload::from(Bytes::from(format!("racer {i}"))), options).await
        })
    });
    let mut winners = Vec::new();
    for (i, racer) in racers.collect::<Vec<_>>().into_iter().enumerate() {
        match racer.await.map_err(|error| unfit(format!("the probe did not run: {error}")))? {
            Ok(result) => winners.push((i, result)),
            Err(object_store::Error::AlreadyExists { .. } | object_store::Error::Precondition { .. }) => {}
            Err(error) => return Err(ClusterError::store(format!("write the probe {probe}"), error)),
        }
    }
    let outcome = match winners.as_slice() {
        [(_, won)] => stale_swap_fails(&store, probe, UpdateVersion::from(won.clone())).await,
        [] => Err(unfit("no conditional create of the probe succeeded".into())),
        many => Err(unfit(format!(
            "{} of {RACERS} concurrent conditional creates of one object succeeded: it does not honour If-None-Match",
            many.len()
        ))),
    };
    let _ = store.delete(probe).await;
    outcome.map_err(|error| match error {
        ClusterError::Unfit { .. } | ClusterError::Store { .. } => error,
        other => unfit(other.to_string()),
    })
}

/// A compare-and-swap against the version the winner wrote succeeds once;
/// against that same, now stale, version it must fail.
async fn stale_swap_fails(store: &Arc<dyn ObjectStore>, probe: &Path, won: UpdateVersion) -> Result<(), ClusterError> {
    let update = |version: UpdateVersion| PutOptions { mode: PutMode::Update(version), ..PutOptions::default() };
    let endpoint = store.to_string();
    let unfit = |reason: &str| ClusterError::Unfit { endpoint: endpoint.clone(), reason: reason.to_owned() };
    match store.put_opts(probe, PutPayload::from_static(b"swapped"), update(won.clone())).await {
        Ok(_) => {}
        Err(object_store::Error::Precondition { .. }) => {
            return Err(unfit("a compare-and-swap against the current version failed"))
        }
        Err(error) => return Err(ClusterError::store(format!("swap the probe {probe}"), error)),
    }
    match store.put_opts(probe, PutPayload::from_static(b"stale"), update(won)).await {
        Err(object_store::Error::Precondition { .. }) => Ok(()),
        Ok(_) => Err(unfit("a compare-and-swap against a stale version succeeded: it does not honour If-Match")),
        Err(error) => Err(ClusterError::store(format!("swap the probe {probe} again"), error)),
    }
}
