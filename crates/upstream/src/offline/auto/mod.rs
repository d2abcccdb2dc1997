//! Automatic offline: offline mode in effect while the host is offline,
//! over whatever mode is configured (`-auto-offline`).
//!
//! - `network` (the default on Linux): offline while there is no usable
//!   default route; rfkill only names the reason (`airplane-mode` when the
//!   airplane rule holds, `no-network` otherwise).
//! - `airplane-mode`: offline while GNOME's airplane rule holds.
//! - `off`: nothing watched.
//!
//! A change must hold for [`SETTLE`] before it counts, and only edges move
//! the switch: an explicit switch wins until the host next goes offline.
//! The override is never persisted. The controller is a state machine with
//! time passed in; [`watch()`] drives it from the real host.

mod host;
mod watch;

use parking_lot::Mutex;
use std::time::Duration;

use tokio::time::Instant;

pub use host::{HostLook, HostProbe, SystemProbe};
pub use watch::watch;

use super::{Mode, Switch};

/// How long a change of the host must hold before it counts.
pub const SETTLE: Duration = Duration::from_secs(5);

/// What puts offline mode in effect automatically.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Trigger {
    /// Nothing does: the configured mode holds.
    Off,
    /// No usable default route.
    Network,
    /// At least one radio, none unblocked.
    AirplaneMode,
}

impl Trigger {
    /// The default: `network` on Linux, `off` elsewhere.
    pub fn platform_default() -> Trigger {
        if cfg!(target_os = "linux") {
            Trigger::Network
        } else {
            Trigger::Off
        }
    }

    /// Spelt as the flag and the snap option spell it.
    pub fn as_str(self) -> &'static str {
        match self {
            Trigger::Off => "off",
            Trigger::Network => "network",
            Trigger::AirplaneMode => "airplane-mode",
        }
    }

    /// Parses the flag's value; outside Linux only `off` is accepted.
    pub fn parse(value: &str) -> Result<Trigger, String> {
        let trigger = match value {
            "off" => Trigger::Off,
            "network" => Trigger::Network,
            "airplane-mode" => Trigger::AirplaneMode,
            _ => return Err(format!("{value:?} is not off, network or airplane-mode")),
        };
        if trigger != Trigger::Off && !cfg!(target_os = "linux") {
            return Err(format!("{value} is watched on Linux only; use off"));
        }
        Ok(trigger)
    }
}

/// Why auto-offline put offline mode in effect.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Reason {
    /// No usable default route.
    NoNetwork,
    /// The airplane rule holds.
    AirplaneMode,
}

impl Reason {
    /// As reported.
    pub fn as_str(self) -> &'static str {
        match self {
            Reason::NoNetwork => "no-network",
            Reason::AirplaneMode => "airplane-mode",
        }
    }
}

/// What auto-offline reports.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AutoReport {
    /// What puts offline mode in effect automatically.
    pub trigger: Trigger,
    /// While auto-offline is in effect: the configured mode it overrides
    /// and why.
    pub in_effect: Option<(Mode, Reason)>,
}

#[derive(Debug)]
struct Control {
    /// The host is taken to be offline (after settling).
    offline: bool,
    /// A change seen, and since when.
    pending: Option<(bool, Instant)>,
    /// Set while the override is in effect: the mode it overrides, and why.
    overriding: Option<(Mode, Reason)>,
}

/// The auto-offline controller of one switch.
#[derive(Debug)]
pub struct AutoOffline {
    trigger: Trigger,
    switch: Switch,
    control: Mutex<Control>,
}

impl AutoOffline {
    /// A controller for `switch`; the host is taken to be online at start,
    /// so a host that starts offline is an edge once it has settled.
    pub fn new(trigger: Trigger, switch: Switch) -> Self {
        AutoOffline {
            trigger,
            switch,
            control: Mutex::new(Control { offline: false, pending: None, overriding: None }),
        }
    }

    /// What puts offline mode in effect automatically.
    pub fn trigger(&self) -> Trigger {
        self.trigger
    }

    /// Takes one look at the host at `now`; moves the switch on a settled edge.
    pub fn observe(&self, now: Instant, look: HostLook) {
        let offline = match self.trigger {
            Trigger::Off => return,
            Trigger::Network => !look.default_route,
            Trigger::AirplaneMode => look.airplane,
        };
        let mut control = self.control.lock();
        if offline == control.offline {
            control.pending = None;
            return;
        }
        match control.pending {
            Some((seen, since)) if seen == offline => {
                if now.saturating_duration_since(since) < SETTLE {
                    return;
                }
            }
            _ => {
                control.pending = Some((offline, now));
                return;
            }
        }
        control.offline = offline;
        control.pending = None;
        if offline {
            let reason = if look.airplane { Reason::AirplaneMode } else { Reason::NoNetwork };
            let configured = control.overriding.map_or_else(|| self.switch.mode(), |(mode, _)| mode);
            control.overriding = Some((configured, reason));
            tracing::warn!(reason = reason.as_str(), "the host is offline: serving from the cache only");
            self.switch.set_mode(Mode::Offline);
        } else if let Some((configured, _)) = control.overriding.take() {
            tracing::info!(mode = configured.as_str(), "the host is online again");
            self.switch.set_mode(configured);
        }
    }

    /// An explicit switch to `mode` (the admin socket): it wins until the
    /// host next goes offline. The caller puts the mode in effect.
    pub fn explicit(&self, _mode: Mode) {
        self.control.lock().overriding = None;
    }

    /// The snap's configure hook re-applying `offline-mode`: while the
    /// override is in effect it only changes the mode returned to when the
    /// host is back (the override stays); otherwise it puts `mode` in effect.
    /// Returns true when the caller should put `mode` in effect.
    pub fn reconfigure(&self, mode: Mode) -> bool {
        let mut control = self.control.lock();
        match control.overriding.as_mut() {
            Some((configured, _)) => {
                *configured = mode;
                false
            }
            None => true,
        }
    }

    /// What to report.
    pub fn report(&self) -> AutoReport {
        AutoReport { trigger: self.trigger, in_effect: self.control.lock().overriding }
    }
}

#[cfg(test)]
mod tests;
