//! apt's client setup: its proxy line in `/etc/apt/apt.conf.d/01pkgproxy`.

use crate::setup::{FilePlan, SetupClient, WholeFile};

/// The clients `pkgproxyctl setup` points at the apt side.
pub const CLIENTS: &[SetupClient] = &[SetupClient { name: "apt", about: "apt", procedure: &WholeFile(plan) }];

fn plan(base: &str) -> FilePlan {
    FilePlan::new("/etc/apt/apt.conf.d/01pkgproxy", "//", &format!("Acquire::http::Proxy \"{base}/\";\n"))
}
