//! snapd's client setup: a drop-in for `snapd.service` setting
//! `SNAPPY_FORCE_API_URL` (as snapd's own test suite points it at a fake
//! store), a reload and a restart; and the same variable for the `snap`
//! command users run, which reads its own environment. Never
//! `SNAPPY_FORCE_SAS_URL`.

use crate::setup::{FilePlan, Restart, SetupClient, WholeFile};

/// The clients `pkgproxyctl setup` points at the snap side.
pub const CLIENTS: &[SetupClient] =
    &[SetupClient { name: "snap", about: "snapd and the snap command", procedure: &WholeFile(plan) }];

fn plan(base: &str) -> FilePlan {
    let settings = format!("[Service]\nEnvironment=SNAPPY_FORCE_API_URL={base}/snap/\n");
    FilePlan::new("/etc/systemd/system/snapd.service.d/pkgproxy.conf", "#", &settings)
        .restarting(Restart { daemon_reload: true, units: &["snapd.service"] })
        .noting(format!("# The snap command run by users (snap download, snap known --remote) reads its own environment:\n# export SNAPPY_FORCE_API_URL={base}/snap/\n"))
}
