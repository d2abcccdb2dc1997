//! `GET`/`PUT /pkgproxy/v1/offline`: the offline mode at run time.
//!
//! A `PUT` puts the mode in effect at once (requests in flight finish
//! normally; the breakers are forgotten) and, inside pkgproxy's own snap,
//! also runs `snapctl set offline-mode=<mode>` so that the run-time switch
//! and `snap set` are one setting. Elsewhere nothing keeps a run-time switch
//! across a restart, and the answer says so (`persistent: false`).

use std::process::Command;

use pkgproxy_control::OfflineReport;
use pkgproxy_upstream::offline::Mode;

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

/// The report now.
pub fn current(state: &State, persist_error: Option<String>) -> OfflineReport {
    let restart_mode = *state.restart_mode.lock();
    let auto = state.auto_offline.report();
    OfflineReport {
        auto_offline: auto.trigger.as_str().to_string(),
        configured_mode: auto.in_effect.map(|(mode, _)| mode.as_str().to_string()),
        reason: auto.in_effect.map(|(_, reason)| reason.as_str().to_string()),
        mode: state.upstream.switch.mode().as_str().to_string(),
        upstreams: crate::report::upstreams(state),
        restart_mode: restart_mode.as_str().to_string(),
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
                *state.restart_mode.lock() = mode;
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
