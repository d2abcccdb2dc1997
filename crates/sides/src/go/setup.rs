//! The go command's client setup: `GOPROXY` for login shells, in
//! `/etc/profile.d/pkgproxy-go.sh`.

use crate::setup::{FilePlan, SetupClient, WholeFile};

/// The clients `pkgproxyctl setup` points at the go side.
pub const CLIENTS: &[SetupClient] = &[SetupClient { name: "go", about: "The go command", procedure: &WholeFile(plan) }];

fn plan(base: &str) -> FilePlan {
    let settings = format!("# go checks sums through it too (GOSUMDB keeps its default).\nexport GOPROXY={base}/go\n");
    FilePlan::new("/etc/profile.d/pkgproxy-go.sh", "#", &settings).noting(format!(
        "# Login shells read it from now on; in this one: export GOPROXY={base}/go\n# Services and CI runners do not read profile.d: give them GOPROXY in their own environment.\n"
    ))
}
