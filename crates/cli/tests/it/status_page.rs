//! The status page at `/`, read by the real Chromium after real `apt-get`
//! traffic: the counters and the charts that traffic changed, the setup
//! lines filled in with the host and port the browser used, the offline
//! mode, what was refused (named unless private), the day's traffic after
//! a restart, and a layout that fits a phone. `[status] page = false`
//! leaves the plain hint.

use std::path::PathBuf;
use std::time::Duration;

use crate::common::{archive, origin_and_daemon, PKGPROXY};
use pkgproxy_metrics::SideCounter;
use pkgproxy_testkit::browser::Chromium;
use pkgproxy_testkit::client::get;
use pkgproxy_testkit::{AptSandbox, Daemon};

/// Where the screenshots are kept for people to look at.
fn artefact(name: &str) -> PathBuf {
    let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("artefacts");
    std::fs::create_dir_all(&dir).unwrap();
    dir.join(name)
}

/// The cell `class` of the traffic row of `side` in `dom`.
fn side_cell(dom: &str, side: &str, class: &str) -> String {
    let row_start = dom.find(&format!("<tr data-side=\"{side}\"")).unwrap_or_else(|| panic!("no row for {side}"));
    let row = &dom[row_start..row_start + dom[row_start..].find("</tr>").unwrap()];
    let cell = format!("class=\"{class}\">");
    let start = row.find(&cell).unwrap_or_else(|| panic!("no {class} in {row}")) + cell.len();
    row[start..start + row[start..].find('<').unwrap()].to_string()
}

#[tokio::test(flavor = "multi_thread")]
async fn chromium_shows_the_traffic_apt_made_and_the_setup_for_the_host_it_used() {
    let (repo, origin, daemon) = origin_and_daemon().await;
    let source = format!("{}/debian", origin.url());
    for _ in 0..2 {
        let apt = AptSandbox::new(Some(&daemon.proxy_url()), &source, repo.keyring());
        apt.update().assert_success();
        apt.download(&["pkgproxy-hello", "pkgproxy-small1"]).assert_success();
    }
    let apt = daemon.info().await.sides["apt"].clone();
    assert!(apt.get(SideCounter::Hits) >= 2 && apt.get(SideCounter::Misses) >= 2, "{apt:?}");

    // By name, as a person on the LAN would: the setup lines follow it.
    let port = daemon.proxy_addr().rsplit(':').next().unwrap().to_string();
    let url = format!("http://localhost:{port}/");
    let chromium = Chromium::new();
    let dom = tokio::task::spawn_blocking({
        let url = url.clone();
        move || Chromium::new().dump_dom(&url, Duration::from_secs(3))
    })
    .await
    .unwrap();
    assert!(dom.contains("id=\"refreshed\">updated"), "the script redrew the page from its JSON:\n{dom}");
    assert_eq!(side_cell(&dom, "apt", "requests"), apt.get(SideCounter::Requests).to_string());
    assert_eq!(side_cell(&dom, "apt", "hits"), apt.get(SideCounter::Hits).to_string());
    assert_eq!(side_cell(&dom, "apt", "misses"), apt.get(SideCounter::Misses).to_string());
    assert_ne!(side_cell(&dom, "apt", "saved"), "0 B", "hits saved bytes");
    assert_eq!(side_cell(&dom, "go", "requests"), "0");
    let hits = apt.get(SideCounter::Hits) as f64;
    let ratio = hits / (hits + apt.get(SideCounter::Misses) as f64);
    assert_eq!(side_cell(&dom, "apt", "ratio"), format!("{:.1} %", ratio * 100.0));
    for line in [
        format!("Acquire::http::Proxy \"http://localhost:{port}/\";"),
        format!("export GOPROXY=http://localhost:{port}/go"),
        format!("SNAPPY_FORCE_API_URL=http://localhost:{port}/snap/"),
        format!("pkgproxyctl setup docker --addr localhost:{port} | sudo sh"),
        format!("pkgproxyctl setup lxd-remote --addr localhost:{port}"),
    ] {
        assert!(dom.contains(&line), "{line} missing from:\n{dom}");
    }
    assert!(!dom.contains(" -addr"), "flags are spelt --addr, as everywhere: {dom}");
    assert!(dom.contains("mode-never"), "online");
    assert!(dom.contains(&format!("{}/debian", origin.url())), "the archive's instance is listed");

    let (desktop, phone) = (artefact("status-page-desktop.png"), artefact("status-page-phone.png"));
    let layout = tokio::task::spawn_blocking({
        let url = url.clone();
        move || {
            chromium.screenshot(&url, (1280, 1400), &desktop);
            chromium.screenshot(&url, pkgproxy_testkit::browser::PHONE, &phone);
            chromium.evaluate_on_phone(
                &url,
                "document.getElementById('refreshed').textContent.startsWith('updated')",
                "({ page: document.documentElement.scrollWidth, screen: window.innerWidth, \
                   setup: [...document.querySelectorAll('pre')].every(p => getComputedStyle(p).whiteSpace === 'pre'), \
                   cells: Math.max(...[...document.querySelectorAll('#sides td')].map(td => td.getBoundingClientRect().right)), \
                   charts: Math.max(...[...document.querySelectorAll('#charts figure')].map(f => f.getBoundingClientRect().right)), \
                   first: document.querySelector('#charts .side-chart').dataset.side, \
                   idle: document.getElementById('idle').textContent, \
                   hour: Object.fromEntries(['requests', 'ratio', 'from-cache', 'fetched'].map(c => \
                     [c, document.querySelector('#charts [data-side=apt] .hour .' + c).textContent])), \
                   bars: document.querySelectorAll('#charts [data-side=apt] .hour svg.bars rect').length, \
                   chartTop: document.querySelector('#charts [data-side=apt] .hour svg.bars').getBoundingClientRect().top, \
                   chartWidth: document.querySelector('#charts [data-side=apt] .hour svg.bars').getBoundingClientRect().width })",
            )
        }
    })
    .await
    .unwrap();
    assert_eq!(layout["screen"], 390, "a phone's width: {layout}");
    assert!(layout["page"].as_u64() <= layout["screen"].as_u64(), "nothing sticks out sideways on a phone: {layout}");
    assert_eq!(layout["setup"], true, "a setup line is one line, never two that look like two commands: {layout}");
    assert!(
        layout["cells"].as_f64() <= layout["screen"].as_f64(),
        "every column of the traffic is on screen: {layout}"
    );
    // The chart of the last hour says, in figures, the traffic apt made.
    let hour = &layout["hour"];
    assert_eq!(hour["requests"], apt.get(SideCounter::Requests).to_string(), "{layout}");
    assert_eq!(hour["ratio"], format!("{:.1} %", ratio * 100.0), "{layout}");
    assert_eq!(hour["from-cache"], side_cell(&dom, "apt", "saved"), "{layout}");
    assert_eq!(hour["fetched"], side_cell(&dom, "apt", "fetched"), "{layout}");
    assert!(layout["bars"].as_u64() >= Some(1), "the minutes with traffic have bars: {layout}");
    assert_eq!(layout["first"], "apt", "the side with traffic comes first: {layout}");
    assert!(
        layout["idle"].as_str().unwrap().contains("go, snap, registry, lxd"),
        "the idle sides in one line: {layout}"
    );
    assert!(layout["charts"].as_f64() <= layout["screen"].as_f64(), "the charts fit a phone: {layout}");
    assert!(layout["chartWidth"].as_f64() >= Some(300.0), "a chart as wide as the phone: {layout}");
    assert!(layout["chartTop"].as_f64() <= Some(844.0), "apt's chart on the first screen of a phone: {layout}");
}

#[tokio::test(flavor = "multi_thread")]
async fn a_public_package_refused_is_named_on_the_page_and_one_asked_with_a_token_is_not() {
    let daemon = Daemon::start_with(PKGPROXY, None, &["-offline-mode", "offline"]).await;
    let send = |path: &'static str, headers: &'static [(&'static str, &'static str)]| {
        pkgproxy_testkit::client::send(daemon.proxy_addr(), "GET", path, headers, b"")
    };
    assert_eq!(send("/npm/is-odd", &[]).await.status, 424);
    assert_eq!(send("/pypi/simple/six/?format=json", &[]).await.status, 424);
    let private = send("/npm/@corp%2fsecret-tool", &[("authorization", "Bearer npm_s3cr3t")]).await;
    assert_eq!(private.status, 424);

    let json: pkgproxy_control::Status =
        serde_json::from_slice(&get(daemon.proxy_addr(), pkgproxy_control::STATUS_PATH).await.body).unwrap();
    let paths: Vec<Option<&str>> = json.recent_trouble.iter().map(|trouble| trouble.path.as_deref()).collect();
    assert_eq!(
        paths,
        [None, Some("/pypi/simple/six/"), Some("/npm/is-odd")],
        "newest first: {:?}",
        json.recent_trouble
    );
    let url = daemon.proxy_url();
    let dom =
        tokio::task::spawn_blocking(move || Chromium::new().dump_dom(&url, Duration::from_secs(3))).await.unwrap();
    let trouble = &dom[dom.find("id=\"trouble\"").unwrap()..];
    let trouble = &trouble[..trouble.find("</tbody>").unwrap()];
    assert!(trouble.contains(">/npm/is-odd<") && trouble.contains(">/pypi/simple/six/<"), "{trouble}");
    assert!(!dom.contains("secret-tool") && !dom.contains("npm_s3cr3t") && !dom.contains("format=json"), "{trouble}");
}

#[tokio::test(flavor = "multi_thread")]
async fn the_days_traffic_is_on_the_page_again_after_a_restart() {
    let mut daemon = Daemon::start_with(PKGPROXY, None, &["-offline-mode", "offline"]).await;
    for _ in 0..3 {
        let refused = pkgproxy_testkit::client::get(daemon.proxy_addr(), "/npm/is-odd").await;
        assert_eq!(refused.status, 424);
    }
    let day = |status: &pkgproxy_control::Status| {
        let npm = status.sides.iter().find(|side| side.name == "npm").unwrap();
        npm.last_day.stretches.iter().map(|stretch| stretch.requests).sum::<u64>()
    };
    let status = || async {
        let answer = get(daemon.proxy_addr(), pkgproxy_control::STATUS_PATH).await;
        serde_json::from_slice::<pkgproxy_control::Status>(&answer.body).unwrap()
    };
    assert_eq!(day(&status().await), 3);
    assert!(daemon.stop().is_some_and(|exit| exit.success()), "a clean stop");
    daemon.start_again().await;
    let after = get(daemon.proxy_addr(), pkgproxy_control::STATUS_PATH).await;
    let after: pkgproxy_control::Status = serde_json::from_slice(&after.body).unwrap();
    let npm = after.sides.iter().find(|side| side.name == "npm").unwrap();
    assert_eq!(npm.requests, 0, "the counters start again");
    assert_eq!(day(&after), 3, "the day's traffic before the restart: {:?}", npm.last_day);
    let url = daemon.proxy_url();
    let dom =
        tokio::task::spawn_blocking(move || Chromium::new().dump_dom(&url, Duration::from_secs(3))).await.unwrap();
    let chart = &dom[dom.find("data-side=\"npm\"><h3>").expect("npm's chart, as it had traffic today")..];
    let day_figures = &chart[chart.find("class=\"span day\"").unwrap()..];
    assert!(day_figures.contains("<b class=\"requests\">3</b> requests"), "{day_figures}");
}

#[tokio::test(flavor = "multi_thread")]
async fn the_page_of_an_offline_pkgproxy_says_so() {
    let daemon = Daemon::start_with(PKGPROXY, None, &["-offline-mode", "offline"]).await;
    let url = daemon.proxy_url();
    let dom =
        tokio::task::spawn_blocking(move || Chromium::new().dump_dom(&url, Duration::from_secs(2))).await.unwrap();
    assert!(dom.contains("class=\"mode mode-offline\">offline</span>"), "{dom}");
    let json: pkgproxy_control::Status =
        serde_json::from_slice(&get(daemon.proxy_addr(), pkgproxy_control::STATUS_PATH).await.body).unwrap();
    assert_eq!(json.offline.mode, "offline");
}

#[tokio::test(flavor = "multi_thread")]
async fn with_the_page_off_the_root_answers_the_hint_and_the_json_is_gone() {
    let config = format!("{}[status]\npage = false\n", archive("local", &["http://127.0.0.1:9/debian".into()]));
    let daemon = Daemon::start(PKGPROXY, Some(&config)).await;
    let root = get(daemon.proxy_addr(), "/").await;
    assert_eq!(root.status, 404);
    assert!(String::from_utf8_lossy(&root.body).contains("Acquire::http::Proxy"), "the hint");
    assert_eq!(get(daemon.proxy_addr(), pkgproxy_control::STATUS_PATH).await.status, 404);
}

#[tokio::test(flavor = "multi_thread")]
async fn the_json_holds_no_credentials_and_only_get_and_head_are_answered() {
    let registry = "[[registry.upstream]]\nname = \"registry.lan:5000\"\nmirrors = [\"http://127.0.0.1:9\"]\nusername = \"puller\"\npassword = \"s3cret-pass\"\n";
    let config = format!("{}{registry}", archive("local", &["http://mirror:hunter2@127.0.0.1:9/debian".into()]));
    let daemon = Daemon::start(PKGPROXY, Some(&config)).await;
    // A request through the archive, so its pool and instance are listed.
    let failed =
        pkgproxy_testkit::client::proxy_get(daemon.proxy_addr(), "http://127.0.0.1:9/debian/pool/main/a.deb", &[])
            .await;
    assert_eq!(failed.status, 502);
    let status = get(daemon.proxy_addr(), pkgproxy_control::STATUS_PATH).await;
    assert_eq!(status.header("content-type"), Some("application/json"));
    let text = String::from_utf8_lossy(&status.body).into_owned();
    assert!(text.contains("http://127.0.0.1:9/debian"), "the instance, without its user: {text}");
    for secret in ["hunter2", "s3cret-pass", daemon.cache_dir().to_str().unwrap()] {
        assert!(!text.contains(secret), "{secret} leaked: {text}");
    }
    let posted = pkgproxy_testkit::client::send(daemon.proxy_addr(), "POST", "/", &[], b"x").await;
    assert_eq!((posted.status, posted.header("allow")), (405, Some("GET, HEAD")));
}

#[tokio::test(flavor = "multi_thread")]
async fn the_page_shows_what_was_refused_and_what_failed_and_a_banner_while_offline() {
    let gone = pkgproxy_testkit::RefusingPort::new();
    let config = archive("local", &[format!("{}/debian", gone.url())]);
    let daemon = Daemon::start(PKGPROXY, Some(&config)).await;
    let failed = format!("{}/debian/pool/main/h/hello/hello_1.0_all.deb", gone.url());
    let answer = pkgproxy_testkit::client::proxy_get(daemon.proxy_addr(), &failed, &[]).await;
    assert_eq!(answer.status, 502);
    let refused = pkgproxy_testkit::client::proxy_get(daemon.proxy_addr(), "http://unknown.example/x", &[]).await;
    assert_eq!(refused.status, 403);
    daemon.set_offline_mode("offline").await;

    let url = daemon.proxy_url();
    let dom = tokio::task::spawn_blocking({
        let url = url.clone();
        move || Chromium::new().dump_dom(&url, Duration::from_secs(3))
    })
    .await
    .unwrap();
    assert!(dom.contains("id=\"refreshed\">updated"), "{dom}");
    let banner = dom.find("id=\"banner\"").map(|at| &dom[at..at + dom[at..].find("</div>").unwrap()]).unwrap();
    assert!(!banner.contains("hidden"), "shown: {banner}");
    assert!(
        banner.contains("Offline (set by an admin) since")
            && banner.contains("Back online: sudo pkgproxyctl offline online"),
        "{banner}"
    );
    assert!(dom.contains("class=\"mode mode-offline\">offline</span>"));
    assert_eq!(side_cell(&dom, "apt", "failed bad"), "1", "the failed answer is counted");
    let trouble = &dom[dom.find("id=\"trouble\"").unwrap()..];
    let trouble = &trouble[..trouble.find("</tbody>").unwrap()];
    assert!(trouble.contains(">502<") && trouble.contains("/debian/pool/main/h/hello/hello_1.0_all.deb"), "{trouble}");
    assert!(trouble.contains(">403<") && trouble.contains("unknown.example"), "{trouble}");
    assert!(dom.contains("<svg class=\"bars\""), "a chart of the last hour: {dom}");

    let phone = artefact("status-page-trouble-phone.png");
    let layout = tokio::task::spawn_blocking(move || {
        let chromium = Chromium::new();
        chromium.screenshot(&url, pkgproxy_testkit::browser::PHONE, &phone);
        chromium.evaluate_on_phone(
            &url,
            "document.getElementById('refreshed').textContent.startsWith('updated')",
            "({ screen: window.innerWidth, page: document.documentElement.scrollWidth, \
               right: Math.max(...[...document.querySelectorAll('#trouble td, #sides td')].map(td => td.getBoundingClientRect().right)) })",
        )
    })
    .await
    .unwrap();
    assert!(layout["page"].as_u64() <= layout["screen"].as_u64(), "{layout}");
    assert!(layout["right"].as_f64() <= layout["screen"].as_f64(), "every column shows on a phone: {layout}");
}
