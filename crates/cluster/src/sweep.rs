//! What nodes that died leave in the bucket: multipart uploads begun and
//! never finished (a node killed while publishing a large body) cost
//! storage until aborted, and leases of fetches it never ended slow every
//! listing. Bucket lifecycle rules do that where the store has them; this
//! sweep does it everywhere: the uploads under pkgproxy's prefix begun
//! longer ago than any upload takes are aborted, and leases nobody renewed
//! for ten lease lives are removed.

use std::time::{Duration, SystemTime};

use object_store::aws::AmazonS3;
use object_store::multipart::MultipartStore;
use object_store::path::Path;
use object_store::signer::{SignedUrlOptions, Signer};
use serde::Deserialize;

use crate::error::ClusterError;

/// The uploads the store lists (`ListMultipartUploads`).
#[derive(Debug, Deserialize)]
#[serde(rename_all = "PascalCase")]
struct Listed {
    #[serde(default, rename = "Upload")]
    uploads: Vec<Upload>,
}

/// One upload in progress.
#[derive(Debug, Deserialize)]
#[serde(rename_all = "PascalCase")]
struct Upload {
    key: String,
    upload_id: String,
    /// When it began (RFC 3339).
    initiated: String,
}

/// Aborts the uploads under `prefix` begun more than `older_than` ago;
/// returns how many. `client` sends the listing (object_store has no call
/// for it; the request is signed by the store's own signer).
pub async fn sweep(
    store: &AmazonS3,
    client: &reqwest::Client,
    prefix: &str,
    older_than: Duration,
) -> Result<usize, ClusterError> {
    let options = SignedUrlOptions::new().with_query([("uploads", ""), ("prefix", prefix.trim_matches('/'))]);
    let url = store
        .signed_url_opts(http::Method::GET, &Path::from(""), Duration::from_secs(60), &options)
        .await
        .map_err(|error| ClusterError::store("sign the listing of uploads", error))?;
    let malformed = |reason: String| ClusterError::Malformed { what: "the listing of uploads".into(), reason };
    let answer = client.get(url).send().await.map_err(|error| malformed(error.to_string()))?;
    if !answer.status().is_success() {
        return Err(malformed(format!("answered {}", answer.status())));
    }
    let text = answer.text().await.map_err(|error| malformed(error.to_string()))?;
    let listed: Listed = quick_xml::de::from_str(&text).map_err(|error| malformed(error.to_string()))?;
    let cutoff = SystemTime::now() - older_than;
    let mut aborted = 0;
    for upload in listed.uploads {
        let begun = listed_time(&upload.initiated);
        if begun.is_some_and(|begun| begun <= cutoff) {
            let path = Path::from(upload.key.as_str());
            match store.abort_multipart(&path, &upload.upload_id).await {
                Ok(()) => aborted += 1,
                Err(error) => tracing::warn!(key = upload.key, %error, "an unfinished upload was not aborted"),
            }
        }
    }
    if aborted > 0 {
        tracing::info!(aborted, "aborted unfinished uploads left in the cluster store");
    }
    Ok(aborted)
}

/// How long an upload may run before the sweep takes it for abandoned.
pub const ABANDONED_AFTER: Duration = Duration::from_secs(24 * 3600);

/// How often a node sweeps.
pub const EVERY: Duration = Duration::from_secs(3600);

/// Sweeps the store `config` names every [`EVERY`], for as long as the
/// node (its `tier`) runs: every node does, and aborting or removing twice
/// is harmless.
pub async fn keep_swept(config: crate::ClusterConfig, tier: std::sync::Weak<crate::SharedTier>) {
    let Ok(store) = config.store() else { return };
    let client = crate::config::cluster_http_client();
    loop {
        if let Err(error) = sweep(&store, &client, &config.prefix, ABANDONED_AFTER).await {
            tracing::debug!(%error, "the cluster store's unfinished uploads were not swept");
        }
        let Some(tier) = tier.upgrade() else { return };
        match crate::lease::sweep(&tier, SystemTime::now()).await {
            Ok(0) => {}
            Ok(removed) => tracing::info!(removed, "removed leases left in the cluster store by nodes that died"),
            Err(error) => tracing::debug!(%error, "the cluster store's leases were not swept"),
        }
        drop(tier);
        tokio::time::sleep(EVERY).await;
    }
}

/// `2026-12-01T10:00:00.000Z` as a time (what S3 lists).
fn listed_time(text: &str) -> Option<SystemTime> {
    humantime::parse_rfc3339_weak(text.trim()).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_listing_s_dates_are_read() {
        let time = listed_time("2026-12-01T10:00:05.000Z").unwrap();
        assert_eq!(time.duration_since(SystemTime::UNIX_EPOCH).unwrap().as_secs(), 1_796_119_205);
        assert!(listed_time("yesterday").is_none());
    }
}
