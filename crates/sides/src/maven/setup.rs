//! Maven's and Gradle's client setups.

use crate::setup::SetupClient;

/// The clients `pkgproxyctl setup` points at the Maven side.
pub const CLIENTS: &[SetupClient] = &[];
