//! What Prometheus scrapes after real traffic: each side's request and
//! upstream timings as histograms whose count is the requests served and
//! whose buckets are cumulative up to `+Inf`, `pkgproxy_build_info` naming
//! this version, alike on the listener and the stats socket, in a text
//! Prometheus' own `promtool` accepts (when the machine has it; `test.sh`
//! installs it).

use std::collections::BTreeMap;
use std::io::Write;
use std::process::{Command, Stdio};

use pkgproxy_testkit::client::get;
use pkgproxy_testkit::{project_with_dependencies, Daemon, FakeNpm, TarballHost};

use crate::common::PKGPROXY;

/// The value of the sample `name{labels}` (labels as written), if any.
fn sample(text: &str, series: &str) -> Option<f64> {
    let line = text.lines().find(|line| line.rsplit_once(' ').is_some_and(|(head, _)| head == series))?;
    line.rsplit_once(' ')?.1.parse().ok()
}

/// The `le` bounds and counts of a histogram's buckets for `side`, in the
/// order written.
fn buckets(text: &str, name: &str, side: &str) -> Vec<(String, f64)> {
    let prefix = format!("{name}_bucket{{side=\"{side}\",le=\"");
    let rows = text.lines().filter_map(|line| line.strip_prefix(&prefix));
    rows.filter_map(|rest| {
        let (le, value) = rest.split_once("\"} ")?;
        Some((le.to_string(), value.parse().ok()?))
    })
    .collect()
}

/// `promtool check metrics` on `text`: `None` when promtool is not there.
fn promtool_check(text: &str) -> Option<(bool, String)> {
    let mut child = Command::new("promtool")
        .args(["check", "metrics"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .ok()?;
    child.stdin.take()?.write_all(text.as_bytes()).ok()?;
    let output = child.wait_with_output().ok()?;
    let said = format!("{}{}", String::from_utf8_lossy(&output.stdout), String::from_utf8_lossy(&output.stderr));
    Some((output.status.success(), said))
}

#[tokio::test(flavor = "multi_thread")]
async fn a_scrape_after_requests_has_each_sides_timings_counting_them_and_the_build_and_promtool_accepts_it() {
    let fake = FakeNpm::start(&project_with_dependencies()).await;
    fake.set_tarball_host(TarballHost::Registry);
    let config = format!("[status]\nmetrics = true\n[npm]\nmirrors = [\"{}\"]\n", fake.url());
    let daemon = Daemon::start(PKGPROXY, Some(&config)).await;
    let asked = ["/npm/a", "/npm/a", "/npm/b", "/npm/a/-/a-1.0.0.tgz", "/npm/a/-/a-1.0.0.tgz", "/npm/no-such-package"];
    let mut statuses = BTreeMap::<u16, usize>::new();
    for path in asked {
        *statuses.entry(get(daemon.proxy_addr(), path).await.status).or_default() += 1;
    }
    assert_eq!(statuses.get(&200), Some(&5), "{statuses:?}");

    let on_the_listener = get(daemon.proxy_addr(), "/metrics").await;
    assert_eq!(on_the_listener.status, 200);
    let on_the_listener = String::from_utf8_lossy(&on_the_listener.body).into_owned();
    let on_the_socket = daemon.metrics().await;
    for text in [&on_the_listener, &on_the_socket] {
        let requests = "pkgproxy_request_duration_seconds";
        assert!(text.contains(&format!("# TYPE {requests} histogram")), "{text}");
        let count = sample(text, &format!("{requests}_count{{side=\"npm\"}}"));
        assert_eq!(count, Some(asked.len() as f64), "every request timed once: {text}");
        assert_eq!(count, sample(text, "pkgproxy_requests_total{side=\"npm\"}"), "as the requests are counted");
        let rows = buckets(text, requests, "npm");
        assert_eq!(rows.first().map(|(le, _)| le.as_str()), Some("0.0001"), "{rows:?}");
        assert_eq!(rows.last(), Some(&("+Inf".to_string(), asked.len() as f64)), "{rows:?}");
        assert!(rows.windows(2).all(|pair| pair[0].1 <= pair[1].1), "cumulative: {rows:?}");
        let sum = sample(text, &format!("{requests}_sum{{side=\"npm\"}}")).unwrap_or(-1.0);
        assert!(sum > 0.0 && sum < 60.0, "{sum}");
        assert_eq!(sample(text, &format!("{requests}_count{{side=\"apt\"}}")), Some(0.0), "an idle side is there");

        let upstream = "pkgproxy_upstream_duration_seconds";
        let fetched = sample(text, "pkgproxy_upstream_requests_total").unwrap_or(0.0);
        assert!(fetched >= 3.0, "{text}");
        let timed = sample(text, &format!("{upstream}_count{{side=\"npm\"}}"));
        assert_eq!(timed, Some(fetched), "every upstream request was npm's, and answered: {text}");
        let rows = buckets(text, upstream, "npm");
        assert_eq!(rows.last(), Some(&("+Inf".to_string(), fetched)), "{rows:?}");
        assert!(rows.windows(2).all(|pair| pair[0].1 <= pair[1].1), "cumulative: {rows:?}");

        let build = format!("pkgproxy_build_info{{version=\"{}\",commit=\"", env!("CARGO_PKG_VERSION"));
        let build = text.lines().find(|line| line.starts_with(&build));
        assert!(build.is_some_and(|line| line.ends_with("\"} 1")), "{text}");
    }
    if let Some((accepted, said)) = promtool_check(&on_the_socket) {
        assert!(accepted, "promtool check metrics: {said}");
    }
}
