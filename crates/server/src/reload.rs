//! Reading the configuration again while serving (`SIGHUP`, or
//! `pkgproxyctl reload` through the admin socket), as nginx does: the new
//! settings are read and checked whole first; a file that does not parse,
//! or names something that cannot be used, is refused with the reason, and
//! the settings in use stay as they were.
//!
//! What a reload changes: each side's configuration (apt archives and
//! their mirrors, go proxies and windows, snap stores, registry upstreams,
//! LXD remotes), the upstream hosts trusted on local addresses and the
//! pinned addresses, the traffic mirrors, the cache's limits, the status
//! page and the cache's page, the keys whose signed bundles an import takes, the fleet's policy
//! (`[policy]`, its OSV sources read again), and the proxy
//! listener's client limits (`[server] allow`, the
//! connection caps and timeouts, for connections from then on), and
//! `[server] revalidate_floor`. Requests
//! under way finish on what they started with. The upstream
//! pools are made again on first use, their instances' health learnt
//! afresh. The access log is reopened (for log rotation). What is read only
//! at start: the listener, the cache's directory, TLS, the upstream
//! timeouts and keepalive, the offline mode (changed with `pkgproxyctl
//! offline`).

use std::sync::Arc;

use crate::config::Settings;
use crate::state::State;

/// Reads the settings again and takes them, or says why not; `why` names
/// what asked, for the log.
pub async fn reload(state: &Arc<State>, why: &str) -> Result<(), String> {
    let _one_at_a_time = state.reloading.lock().await;
    let Some(reread) = state.settings.reload.reread.clone() else {
        return Err("this pkgproxy cannot read its configuration again".to_string());
    };
    let result = match tokio::task::spawn_blocking(move || reread()).await {
        Ok(Ok(settings)) => take(state, settings),
        Ok(Err(error)) => Err(error),
        Err(error) => Err(format!("reading the configuration failed: {error}")),
    };
    match &result {
        Ok(()) => tracing::info!(asked_by = why, "configuration reloaded"),
        Err(error) => {
            tracing::error!(asked_by = why, %error, "configuration not reloaded; the one in use stays")
        }
    }
    result
}

/// Takes what can change of `new`; nothing at all when part of it cannot
/// be used.
fn take(state: &State, new: Settings) -> Result<(), String> {
    let shadows = state
        .shadows
        .load()
        .reconfigured(&new.shadows, &state.upstream.shadow_client)
        .map_err(|error| format!("mirror: {error}"))?;
    state.sides.reconfigure(&new.sides);
    state.upstream.reconfigure(&new.upstream);
    state.upstream.transport.forget_pools();
    state.shadows.store(Arc::new(shadows));
    state.cache.set_quota(new.quota);
    state.status_page.store(new.status_page, std::sync::atomic::Ordering::Relaxed);
    state.status_metrics.store(new.status_metrics, std::sync::atomic::Ordering::Relaxed);
    state.browsing.on.store(new.browse_page, std::sync::atomic::Ordering::Relaxed);
    state.admission.reconfigure(new.clients);
    state.trusted_keys.store(Arc::new(new.trusted_keys));
    state.revalidate_floor.set(new.revalidate_floor);
    state.gate.configure(new.policy_options, new.policy);
    state.access_log.reopen();
    Ok(())
}

/// Reopens the access log on every `SIGUSR1` (log rotation), reading no
/// configuration, until the server stops.
pub async fn on_reopen(state: Arc<State>) {
    let reopen = Arc::clone(&state.settings.reload.reopen);
    loop {
        reopen.notified().await;
        state.access_log.reopen();
        tracing::info!("access log reopened (SIGUSR1)");
    }
}

/// Reloads on every `SIGHUP` until the server stops.
pub async fn on_hangup(state: Arc<State>) {
    let hangup = Arc::clone(&state.settings.reload.hangup);
    loop {
        hangup.notified().await;
        let _ = reload(&state, "SIGHUP").await;
    }
}
