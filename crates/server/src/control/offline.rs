//! `GET`/`PUT /pkgproxy/v1/offline`: the offline mode at run time.
//!
//! A `PUT` puts the mode in effect at once (requests in flight finish
//! normally; the breakers are forgotten) and, inside pkgproxy's own snap,
//! also runs `snapctl set offline-mode=<mode>` so that the run-time switch
//! and `snap set` are one setting. Elsewhere nothing keeps a run-time switch
//! across a restart, and the answer says so (`persistent: false`).

use std::process::Command;
use std::time::Duration;

use pkgproxy_upstream::offline::{BreakerState, Mode, UpstreamState};
use serde::{Deserialize, Serialize};
use tokio::time::Instant;

use crate::config::Persistence;
use crate::state::State;

/// Saves `mode` as `persistence` says; the error is what `snapctl` said.
/// Blocking.
fn save(persistence: Persistence, mode: Mode) -> Result<(), String> {
    match persistence {
        Persistence::None => Ok(()),
        Persistence::Snap => {
            let output = Command::new("snapctl")
                .args(["set", &format!("offline-mode={mode}")])
                .output()
                .map_err(|e| format!("cannot run snapctl: {e}"))?;
            if output.status.success() {
                Ok(())
            } else {
                let said = String::from_utf8_lossy(&output.stderr).trim().to_string();
                Err(format!("snapctl set offline-mode={mode} failed ({}): {said}", output.status))
            }
        }
    }
}

/// A host whose breaker is not closed.
#[derive(Debug, Serialize, Deserialize, PartialEq, Eq)]
pub struct UpstreamReport {
    /// The host.
    pub host: String,
    /// `open` or `probing`.
    pub state: String,
    /// Seconds until the probe, while open.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub retry_after_seconds: Option<u64>,
}

/// The answer of `/pkgproxy/v1/offline`.
#[derive(Debug, Serialize)]
pub struct OfflineReport {
    /// The mode in effect.
    pub mode: &'static str,
    /// The hosts whose breaker is not closed.
    pub upstreams: Vec<UpstreamReport>,
    /// The mode pkgproxy will start in after a restart.
    pub restart_mode: &'static str,
    /// True when a run-time switch survives a restart.
    pub persistent: bool,
    /// What puts offline mode in effect automatically, spelt as the flag.
    pub auto_offline: &'static str,
    /// While auto-offline is in effect: the configured mode it overrides.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub configured_mode: Option<&'static str>,
    /// While auto-offline is in effect: why (`no-network`, `airplane-mode`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reason: Option<&'static str>,
    /// Why saving the mode failed (the mode applies anyway).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub persist_error: Option<String>,
}

/// The body of a `PUT`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ModeRequest {
    /// `never`, `offline` or `store-overloaded`.
    pub mode: String,
    /// `configure-hook` when the snap's configure hook re-applies the
    /// setting: an auto-offline override then stays in effect.
    #[serde(default)]
    pub from: Option<String>,
}

/// The upstreams as reported.
pub fn upstreams(state: &State) -> Vec<UpstreamReport> {
    state.upstream.switch.upstreams(Instant::now()).into_iter().map(report).collect()
}

fn report(upstream: UpstreamState) -> UpstreamReport {
    let (state, left) = match upstream.state {
        BreakerState::Open(left) => ("open", Some(left)),
        BreakerState::Probing => ("probing", None),
        BreakerState::Closed => ("closed", None),
    };
    let ceil = |d: Duration| d.as_secs() + u64::from(d.subsec_nanos() > 0);
    UpstreamReport { host: upstream.host, state: state.to_string(), retry_after_seconds: left.map(ceil) }
}

/// The report now.
pub fn current(state: &State, persist_error: Option<String>) -> OfflineReport {
    let restart_mode = *state.restart_mode.lock().unwrap_or_else(|p| p.into_inner());
    let auto = state.auto_offline.report();
    OfflineReport {
        auto_offline: auto.trigger.as_str(),
        configured_mode: auto.in_effect.map(|(mode, _)| mode.as_str()),
        reason: auto.in_effect.map(|(_, reason)| reason.as_str()),
        mode: state.upstream.switch.mode().as_str(),
        upstreams: upstreams(state),
        restart_mode: restart_mode.as_str(),
        persistent: state.settings.persistence == Persistence::Snap,
        persist_error,
    }
}

/// Applies a `PUT`: the mode takes effect whether or not saving it works.
/// An explicit switch ends an auto-offline override; the configure hook
/// re-applying the setting (`from_hook`) keeps it.
pub async fn set(state: &std::sync::Arc<State>, mode: Mode, from_hook: bool) -> OfflineReport {
    let apply = if from_hook {
        state.auto_offline.reconfigure(mode)
    } else {
        state.auto_offline.explicit(mode);
        true
    };
    if apply {
        state.upstream.switch.set_mode(mode);
    }
    let persistence = state.settings.persistence;
    let saved = tokio::task::spawn_blocking(move || save(persistence, mode))
        .await
        .unwrap_or_else(|e| Err(format!("saving the mode failed: {e}")));
    let persist_error = match saved {
        Ok(()) => {
            if persistence == Persistence::Snap {
                *state.restart_mode.lock().unwrap_or_else(|p| p.into_inner()) = mode;
            }
            None
        }
        Err(error) => {
            tracing::warn!(%error, "the offline mode applies but was not saved");
            Some(error)
        }
    };
    current(state, persist_error)
}
