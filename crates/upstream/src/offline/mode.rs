//! The offline modes, as flags, the admin socket and the snap option spell
//! them, and the one word people read for each: going back online is
//! `online` in every text, the command, the help and the status page;
//! `never`, the original's name, stays the name on the wire (the control
//! API, the metrics' label, a saved mode) and is taken wherever a mode is.

use std::fmt;
use std::str::FromStr;

/// How pkgproxy treats the network.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum Mode {
    /// Go online as needed (the default).
    #[default]
    Never,
    /// Nothing goes upstream; what is cached is served, frozen.
    Offline,
    /// Online, but an upstream showing trouble is left alone for a while
    /// (a circuit breaker per host).
    StoreOverloaded,
}

impl Mode {
    /// Every mode, in the order help texts list them.
    pub const ALL: [Mode; 3] = [Mode::Never, Mode::Offline, Mode::StoreOverloaded];

    /// The name on the wire: the control API's answers, the metrics'
    /// label, the saved mode and the snap option. Texts for people say
    /// [`Mode::word`].
    pub fn as_str(self) -> &'static str {
        match self {
            Mode::Never => "never",
            Mode::Offline => "offline",
            Mode::StoreOverloaded => "store-overloaded",
        }
    }

    /// The word people read, and `pkgproxyctl offline` and the flags take:
    /// `online` for the default, so that going back online is said one way.
    pub fn word(self) -> &'static str {
        match self {
            Mode::Never => "online",
            other => other.as_str(),
        }
    }

    /// How `name`, as the wire names a mode, reads for people; a name that
    /// is not a mode's is left as it is.
    pub fn word_for(name: &str) -> &str {
        name.parse::<Mode>().map_or(name, |mode| mode.word())
    }
}

impl fmt::Display for Mode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A mode name that is not one.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0:?} is not an offline mode (online, offline, store-overloaded)")]
pub struct UnknownMode(pub String);

impl FromStr for Mode {
    type Err = UnknownMode;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Mode::ALL.into_iter().find(|m| m.as_str() == s || m.word() == s).ok_or_else(|| UnknownMode(s.to_string()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn modes_read_back() {
        for mode in Mode::ALL {
            assert_eq!(mode.as_str().parse::<Mode>(), Ok(mode));
        }
        assert!("Offline".parse::<Mode>().is_err());
    }

    #[test]
    fn going_back_online_is_said_online_and_never_is_still_taken() {
        assert_eq!("online".parse::<Mode>(), Ok(Mode::Never));
        assert_eq!("never".parse::<Mode>(), Ok(Mode::Never));
        assert_eq!(Mode::Never.word(), "online");
        assert_eq!(Mode::word_for("never"), "online");
        assert_eq!(Mode::word_for("store-overloaded"), "store-overloaded");
        assert_eq!(Mode::word_for("sometimes"), "sometimes");
        let refused = "sometimes".parse::<Mode>().unwrap_err().to_string();
        assert!(refused.contains("(online, offline, store-overloaded)"), "{refused}");
    }
}
