//! The fleet's malicious-package records a bundle carries
//! ([`super::MALICIOUS`]), once staged and checked against the signed
//! manifest: kept where bundles' records are kept (the state directory's
//! `policy/`), replacing what an earlier bundle brought, and put in force
//! at once with `[policy]` as written.

use std::io::Read;
use std::path::Path;
use std::sync::Arc;

use super::MALICIOUS;
use crate::state::State;

/// Keeps the malicious-package index staged at `staged` where bundles'
/// records are kept (replacing what an earlier bundle brought), and puts
/// the policy made again with it in force: how many records are then in
/// force.
pub async fn take(state: &Arc<State>, staged: &Path) -> Result<usize, String> {
    let (state, staged) = (Arc::clone(state), staged.to_path_buf());
    let taken = tokio::task::spawn_blocking(move || {
        let mut head = vec![0; pkgproxy_policy::INDEX_HEADER.len()];
        let read = std::fs::File::open(&staged).and_then(|mut file| file.read_exact(&mut head));
        if read.is_err() || head != pkgproxy_policy::INDEX_HEADER.as_bytes() {
            return Err(format!("{MALICIOUS} is not a malicious-package index pkgproxy wrote"));
        }
        let dir = crate::config::taken_in_records(&state.settings.state_dir);
        let kept = dir.join("malicious.tsv");
        let part = dir.join("malicious.tsv.part");
        let kept_now = std::fs::create_dir_all(&dir)
            .and_then(|()| std::fs::copy(&staged, &part))
            .and_then(|_| std::fs::rename(&part, &kept));
        kept_now.map_err(|error| format!("{} cannot be written: {error}", kept.display()))?;
        let policy = crate::config::policy(state.gate.written().as_ref(), &state.settings.state_dir)
            .map_err(|error| error.to_string())?;
        let records = policy.as_ref().map_or(0, |policy| policy.malicious.stats().records);
        state.gate.take(policy);
        tracing::info!(records, "malicious-package records taken in from a bundle and in force");
        Ok(records)
    });
    taken.await.unwrap_or_else(|_| Err("taking them in stopped".to_owned()))
}
