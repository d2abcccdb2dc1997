//! The counters an admin reads (`pkgproxyctl info`, `/metrics`, the status
//! page) add up: every request a side served is one hit, miss, refusal or
//! failure; a `424` offline is a refusal, as the page's table of refusals
//! says; and what pkgproxy asks of itself (`warm`) is counted apart, so the
//! clients' hits and bytes from the cache are theirs alone.

use pkgproxy_control::{Info, Status, STATUS_PATH};
use pkgproxy_metrics::{SideCounter, Snapshot};
use pkgproxy_testkit::client::get;
use pkgproxy_testkit::{project_with_dependencies, Daemon, FakeNpm, NodeClient, NodeSandbox, TarballHost};

use crate::common::PKGPROXY;
use crate::readiness::ctl;

fn npm(info: &Info) -> Snapshot<SideCounter> {
    info.sides["npm"].clone()
}

fn npm_own(info: &Info) -> Snapshot<SideCounter> {
    info.own_requests["npm"].clone()
}

/// Whether `counters` add up: every request one hit, miss, refusal or
/// failure.
fn adds_up(counters: &Snapshot<SideCounter>) -> bool {
    let endings = [SideCounter::Hits, SideCounter::Misses, SideCounter::Refused, SideCounter::Failed];
    counters.get(SideCounter::Requests) == endings.iter().map(|ending| counters.get(*ending)).sum::<u64>()
}

#[tokio::test(flavor = "multi_thread")]
async fn a_warm_is_counted_apart_from_clients_and_an_offline_424_is_a_refusal_the_table_agrees_with() {
    let fake = FakeNpm::start(&project_with_dependencies()).await;
    fake.set_tarball_host(TarballHost::Registry);
    let daemon = Daemon::start(PKGPROXY, Some(&format!("[npm]\nmirrors = [\"{}\"]\n", fake.url()))).await;
    let registry = format!("http://{}/npm", daemon.proxy_addr());
    let npm_client = NodeSandbox::new(NodeClient::Npm, &[("a", "^1.0.0")]);
    let installed = npm_client.install(&registry);
    assert!(installed.success, "{}", installed.output);
    let after_install = npm(&daemon.info().await);
    assert!(after_install.get(SideCounter::Misses) >= 4, "{after_install:?}");
    assert!(adds_up(&after_install), "{after_install:?}");

    // The tarballs forgotten, then warmed again from the lockfile: the
    // clients' counters do not move, pkgproxy's own do.
    assert!(ctl(&daemon, &["cache", "rm", "npm/*tarball*"]).0);
    let lock = npm_client.lockfile();
    let (warmed, printed) = ctl(&daemon, &["warm", "npm", lock.to_str().unwrap()]);
    assert!(warmed, "{printed}");
    let info = daemon.info().await;
    assert_eq!(npm(&info), after_install, "a warm is not a client's traffic");
    let own = npm_own(&info);
    assert!(own.get(SideCounter::Misses) >= 4 && adds_up(&own), "{own:?}");
    let metrics = daemon.metrics().await;
    let own_misses = metrics.lines().find(|line| line.starts_with("pkgproxy_own_misses_total{side=\"npm\"}"));
    assert!(own_misses.is_some_and(|line| !line.ends_with(" 0")), "{metrics}");

    // A fresh client served from the cache: hits, and bytes, of its own.
    npm_client.forget();
    let again = npm_client.install_locked(&registry);
    assert!(again.success, "{}", again.output);
    let after_hits = npm(&daemon.info().await);
    let hits = after_hits.get(SideCounter::Hits) - after_install.get(SideCounter::Hits);
    assert!(hits >= 4, "{after_hits:?}");
    assert!(after_hits.get(SideCounter::BytesFromCache) > 0);
    assert!(adds_up(&after_hits), "{after_hits:?}");

    // Offline, a package never seen: npm is told 424, counted as refused,
    // as many as the status page's table lists.
    assert!(ctl(&daemon, &["offline", "offline"]).0);
    let never = NodeSandbox::new(NodeClient::Npm, &[("never-seen", "^1.0.0")]).install(&registry);
    assert!(!never.success && never.output.contains("424"), "{}", never.output);
    let offline = npm(&daemon.info().await);
    assert!(offline.get(SideCounter::Refused) >= 1, "{offline:?}");
    assert_eq!(offline.get(SideCounter::Failed), 0, "{offline:?}");
    assert!(adds_up(&offline), "{offline:?}");
    let status: Status = serde_json::from_slice(&get(daemon.proxy_addr(), STATUS_PATH).await.body).unwrap();
    let listed = status.recent_trouble.iter().filter(|row| row.side.as_deref() == Some("npm")).count() as u64;
    assert_eq!(listed, offline.get(SideCounter::Refused), "{:#?}", status.recent_trouble);
    let shown = status.sides.iter().find(|side| side.name == "npm").expect("the npm side");
    assert_eq!(shown.refused, offline.get(SideCounter::Refused));
}
