//! The offline modes, as flags, the admin socket and the snap option spell
//! them.

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

    /// The spelling of flags, the admin socket and the snap option.
    pub fn as_str(self) -> &'static str {
        match self {
            Mode::Never => "never",
            Mode::Offline => "offline",
            Mode::StoreOverloaded => "store-overloaded",
        }
    }
}

impl fmt::Display for Mode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A mode name that is not one.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0:?} is not an offline mode (never, offline, store-overloaded)")]
pub struct UnknownMode(pub String);

impl FromStr for Mode {
    type Err = UnknownMode;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Mode::ALL.into_iter().find(|m| m.as_str() == s).ok_or_else(|| UnknownMode(s.to_string()))
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
        assert!("online".parse::<Mode>().is_err());
        assert!("Offline".parse::<Mode>().is_err());
    }
}
