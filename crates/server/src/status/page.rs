//! The status page as HTML: whole at first load, so it reads without
//! script; then its script ([`SCRIPT`]) polls the JSON and redraws the
//! figures, charts and tables in place, formatting them as this module
//! and [`super::chart`] do.

use std::fmt::Write;

use crate::html::{bytes, escape, ratio};
use pkgproxy_control::{PoolInfo, RecentTrouble, ShadowInfo, SideStatus, Status, StatusPolicy, UpstreamReport};
use pkgproxy_metrics::ShadowCounter;

/// The page's style: one column that fits a phone, tables that scroll
/// sideways rather than overflow.
const STYLE: &str = include_str!("page.css");

/// The page's script: polls the JSON and redraws what changed (the charts
/// drawn by `chart.js`, as [`super::chart`] draws them).
const SCRIPT: &str = concat!(include_str!("chart.js"), include_str!("page.js"));

/// How often the script asks again, in milliseconds.
const REFRESH_MS: u32 = 5_000;

/// The page for `status`, read by a browser that reached pkgproxy as `host`.
pub fn render(status: &Status, host: &str) -> String {
    let mut html = String::with_capacity(16 * 1024);
    let host = escape(host);
    let _ = write!(
        html,
        "<!doctype html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">\
         <meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\
         <title>pkgproxy on {host}</title><style>{STYLE}</style></head>\n<body>\n"
    );
    header(&mut html, status, &host);
    banner(&mut html, status);
    super::chart::charts(&mut html, &status.sides);
    traffic(&mut html, &status.sides);
    trouble(&mut html, &status.recent_trouble);
    if let Some(policy) = &status.policy {
        blocked(&mut html, policy);
    }
    cache(&mut html, status);
    upstreams(&mut html, &status.pools, &status.offline.upstreams);
    mirrors(&mut html, &status.mirrors);
    setup(&mut html, status);
    let _ = write!(html, "<script>const REFRESH_MS = {REFRESH_MS};\n{SCRIPT}</script>\n</body></html>\n");
    html
}

fn header(html: &mut String, status: &Status, host: &str) {
    let reason =
        status.offline.reason.as_deref().map(|r| format!(" (auto-offline: {})", escape(r))).unwrap_or_default();
    // The pages beside this one are linked from `#pages`, this one first.
    let _ = write!(
        html,
        "<header><h1>pkgproxy <small>{version}</small></h1>\
         <nav id=\"pages\"><a href=\"/\" aria-current=\"page\">Status</a></nav>\
         <p>at <b>{host}</b> · up <span id=\"uptime\">{uptime}</span> · \
         <span id=\"mode\" class=\"mode mode-{mode}\">{shown}</span><span id=\"mode-reason\">{reason}</span> · \
         <span id=\"refreshed\">as loaded</span> · <a href=\"/cache/\">cache</a></p></header>",
        version = escape(&status.version),
        uptime = duration(status.uptime_seconds),
        mode = escape(&status.offline.mode),
        shown = escape(mode_shown(&status.offline.mode)),
    );
}

/// The mode as the page names it (`page.js`'s `modeShown` too).
fn mode_shown(mode: &str) -> &str {
    match mode {
        "never" => "online",
        "offline" => "offline",
        "store-overloaded" => "leaving overloaded upstreams alone",
        other => other,
    }
}

/// A banner across the page while pkgproxy is not simply online: why,
/// since when, and how to go back (`page.js`'s `banner` too).
fn banner(html: &mut String, status: &Status) {
    let text = banner_text(&status.offline);
    let hidden = if text.is_empty() { " hidden" } else { "" };
    let _ = write!(html, "<div id=\"banner\" class=\"banner\"{hidden}>{}</div>", escape(&text));
}

fn banner_text(offline: &pkgproxy_control::StatusOffline) -> String {
    let why = match &offline.reason {
        Some(reason) => format!("auto-offline: {reason}"),
        None => "set by an admin".to_string(),
    };
    let since = offline
        .since
        .map(|at| {
            format!(" since {}", httpdate::fmt_http_date(std::time::UNIX_EPOCH + std::time::Duration::from_secs(at)))
        })
        .unwrap_or_default();
    match offline.mode.as_str() {
        "offline" => format!(
            "Offline ({why}){since}: only what the cache holds is served, nothing is asked upstream. Back online: sudo pkgproxyctl offline online"
        ),
        "store-overloaded" => format!(
            "Leaving overloaded upstreams alone ({why}){since}: an upstream that fails is rested, what is cached is served. Back to normal: sudo pkgproxyctl offline online"
        ),
        _ => String::new(),
    }
}

/// Each side's counters since the start; the idle sides' rows are there
/// for the script, and hidden (`page.js`'s `draw` too).
fn traffic(html: &mut String, sides: &[SideStatus]) {
    html.push_str(
        "<section><h2>Since start</h2><div class=\"scroll\"><table class=\"cards\">\
         <thead><tr><th>side</th><th>requests</th><th>hits</th><th>misses</th><th>hit ratio</th>\
         <th>refused</th><th>failed</th><th>bytes from cache</th><th>fetched</th></tr></thead><tbody id=\"sides\">",
    );
    for side in sides {
        let _ = write!(
            html,
            "<tr data-side=\"{name}\"{idle}><td data-label=\"side\">{name}</td>\
             <td data-label=\"requests\" class=\"requests\">{requests}</td><td data-label=\"hits\" class=\"hits\">{hits}</td>\
             <td data-label=\"misses\" class=\"misses\">{misses}</td><td data-label=\"hit ratio\" class=\"ratio\">{ratio}</td>\
             <td data-label=\"refused\" class=\"refused\">{refused}</td><td data-label=\"failed\" class=\"failed{failing}\">{failed}</td>\
             <td data-label=\"from cache\" class=\"saved\">{saved}</td><td data-label=\"fetched\" class=\"fetched\">{fetched}</td></tr>",
            name = escape(&side.name),
            idle = if side.requests == 0 { " class=\"idle\"" } else { "" },
            requests = side.requests,
            hits = side.hits,
            misses = side.misses,
            ratio = ratio(side.hit_ratio),
            refused = side.refused,
            failed = side.failed,
            failing = if side.failed > 0 { " bad" } else { "" },
            saved = bytes(side.bytes_saved),
            fetched = bytes(side.bytes_fetched),
        );
    }
    html.push_str("</tbody></table></div></section>\n");
}

/// The last refusals and failed answers (`page.js`'s `trouble` too).
fn trouble(html: &mut String, recent: &[RecentTrouble]) {
    html.push_str(
        "<section><h2>Refused and failed lately</h2><div class=\"scroll\"><table class=\"cards\"><thead><tr>\
         <th>when</th><th>side</th><th>status</th><th>asked</th><th>why</th></tr></thead><tbody id=\"trouble\">",
    );
    for trouble in recent {
        let at = httpdate::fmt_http_date(std::time::UNIX_EPOCH + std::time::Duration::from_secs(trouble.at));
        let _ = write!(
            html,
            "<tr><td data-label=\"when\" title=\"{at}\">{when}</td><td data-label=\"side\">{side}</td>\
             <td data-label=\"status\" class=\"bad\">{status}</td><td data-label=\"asked\">{path}</td>\
             <td data-label=\"why\">{reason}</td></tr>",
            when = time_of_day(trouble.at),
            side = escape(trouble.side.as_deref().unwrap_or("–")),
            status = trouble.status,
            path = escape(trouble.path.as_deref().unwrap_or("–")),
            reason = escape(&trouble.reason),
        );
    }
    if recent.is_empty() {
        html.push_str("<tr><td colspan=\"5\">nothing refused or failed since start</td></tr>");
    }
    html.push_str("</tbody></table></div></section>\n");
}

/// The fleet's policy: the rules in force, and the last releases it
/// refused (`page.js`'s `blocked` too). Only there when a policy is.
fn blocked(html: &mut String, policy: &StatusPolicy) {
    html.push_str("<section id=\"policy\"><h2>Blocked by policy</h2><ul id=\"policy-rules\">");
    for rule in &policy.rules {
        let _ = write!(html, "<li>{}</li>", escape(rule));
    }
    if policy.rules.is_empty() {
        html.push_str("<li>no rule: every release is served</li>");
    }
    html.push_str(
        "</ul><div class=\"scroll\"><table class=\"cards\"><thead><tr>\
         <th>when</th><th>release</th><th>why</th></tr></thead><tbody id=\"policy-blocked\">",
    );
    for refused in &policy.recent {
        let at = httpdate::fmt_http_date(std::time::UNIX_EPOCH + std::time::Duration::from_secs(refused.at));
        let _ = write!(
            html,
            "<tr><td data-label=\"when\" title=\"{at}\">{when}</td><td data-label=\"release\">{release}</td>\
             <td data-label=\"why\">{because}</td></tr>",
            when = time_of_day(refused.at),
            release = escape(&refused.release),
            because = escape(&refused.because),
        );
    }
    if policy.recent.is_empty() {
        html.push_str("<tr><td colspan=\"3\">nothing blocked since start</td></tr>");
    }
    html.push_str("</tbody></table></div></section>\n");
}

fn cache(html: &mut String, status: &Status) {
    let cache = &status.cache;
    let limit = cache.max_size_bytes.map_or_else(|| "no size limit".to_string(), |max| format!("of {}", bytes(max)));
    let _ = write!(
        html,
        "<section><h2>Cache</h2><p>The cache holds <b id=\"cache-size\">{size}</b> (<span id=\"cache-limit\">{limit}</span>) \
         in <span id=\"cache-entries\">{entries}</span> entries · its file system has <span id=\"disk-free\">{free}</span> free</p>",
        size = bytes(cache.size_bytes),
        entries = cache.entries,
        free = bytes(cache.free_bytes),
    );
    let (value, max, caption) = meter(cache);
    let _ = write!(
        html,
        "<meter id=\"cache-meter\" min=\"0\" max=\"{max}\" value=\"{value}\"></meter>\
         <p class=\"caption\" id=\"meter-caption\">{caption}</p>"
    );
    if let Some(cluster) = &status.cluster {
        html.push_str(&cluster_line(cluster));
    }
    for suite in &status.apt_valid_until {
        let when = httpdate::fmt_http_date(std::time::UNIX_EPOCH + std::time::Duration::from_secs(suite.valid_until));
        let _ = write!(html, "<p class=\"warning\">{}</p>", escape(&suite.warning(&when)));
    }
    html.push_str("</section>");
}

/// Where the node stands in its cluster (`page.js`'s `draw` too).
fn cluster_line(cluster: &pkgproxy_control::ClusterInfo) -> String {
    format!(
        "<p id=\"cluster\">cluster node <b>{node}</b> on {bucket}: <span id=\"cluster-state\" class=\"state-{state}\">{state}</span> · \
         <span id=\"cluster-shared\">{shared}</span> fetches answered from the store · \
         <span id=\"cluster-published\">{published}</span> published</p>",
        node = escape(&cluster.node),
        bucket = escape(&cluster.bucket),
        state = escape(&cluster.state),
        shared = cluster.shared_hits,
        published = cluster.published,
    )
}

/// What the meter shows: the cache against its limit, or without one, the
/// file system it is on, said as such: a full disk is not a full cache
/// (`page.js`'s `meter` too).
fn meter(cache: &pkgproxy_control::CacheStatus) -> (u64, u64, String) {
    let (value, max, of) = match cache.max_size_bytes {
        Some(max) => (cache.size_bytes, max, "of its size limit used by the cache"),
        None => (
            cache.filesystem_bytes.saturating_sub(cache.free_bytes),
            cache.filesystem_bytes,
            "of the cache's file system in use (by the cache and all else on it)",
        ),
    };
    let share = if max == 0 { 0.0 } else { value as f64 / max as f64 };
    (value, max, format!("{:.0} % {of}", share * 100.0))
}

fn upstreams(html: &mut String, pools: &[PoolInfo], breakers: &[UpstreamReport]) {
    html.push_str(
        "<section><h2>Upstreams</h2><div class=\"scroll\"><table><thead><tr><th>pool</th><th>instance</th>\
         <th>state</th><th>failures</th><th>in flight</th></tr></thead><tbody id=\"pools\">",
    );
    for pool in pools {
        for instance in &pool.instances {
            let _ = write!(
                html,
                "<tr><td>{pool}</td><td>{url}</td><td class=\"state-{state}\">{state}</td><td>{failures}</td><td>{in_flight}</td></tr>",
                pool = escape(&pool.name),
                url = escape(&instance.url),
                state = escape(&instance.state),
                failures = instance.failures,
                in_flight = instance.in_flight,
            );
        }
    }
    if pools.is_empty() {
        html.push_str("<tr><td colspan=\"5\">none asked yet</td></tr>");
    }
    html.push_str("</tbody></table></div><ul id=\"breakers\">");
    for breaker in breakers {
        let _ = write!(html, "<li>{}</li>", breaker_line(breaker));
    }
    html.push_str("</ul></section>\n");
}

fn breaker_line(breaker: &UpstreamReport) -> String {
    let retry = breaker.retry_after_seconds.map(|s| format!(", tried again in {}", duration(s))).unwrap_or_default();
    format!("{}: breaker {}{retry}", escape(&breaker.host), escape(&breaker.state))
}

fn mirrors(html: &mut String, mirrors: &[ShadowInfo]) {
    if mirrors.is_empty() {
        return;
    }
    html.push_str(
        "<section><h2>Traffic mirrors</h2><div class=\"scroll\"><table><thead><tr><th>name</th><th>target</th>\
         <th>sent</th><th>answered</th><th>failed</th><th>not copied</th></tr></thead><tbody id=\"mirrors\">",
    );
    for mirror in mirrors {
        let _ = write!(
            html,
            "<tr><td>{name}</td><td>{target}</td><td>{sent}</td><td>{answered}</td><td>{failed}</td><td>{skipped}</td></tr>",
            name = escape(&mirror.name),
            target = escape(&mirror.target),
            sent = mirror.get(ShadowCounter::Sent),
            failed = mirror.get(ShadowCounter::Failed),
            answered = mirror.get(ShadowCounter::Answered),
            skipped = [ShadowCounter::SkippedInflight, ShadowCounter::SkippedSize, ShadowCounter::SkippedOffline]
                .into_iter()
                .map(|counter| mirror.get(counter))
                .sum::<u64>(),
        );
    }
    html.push_str("</tbody></table></div></section>\n");
}

fn setup(html: &mut String, status: &Status) {
    html.push_str("<section id=\"setup\"><h2>Point your clients here</h2>");
    for client in &status.setup {
        let _ = write!(html, "<h3>{} <small>{}</small></h3><pre>", escape(&client.side), escape(&client.clients));
        for line in &client.lines {
            let _ = writeln!(html, "{}", escape(line));
        }
        html.push_str("</pre>");
    }
    html.push_str("</section>\n");
}

/// The time of day of `unix_secs`, `03:41:21 UTC` (`page.js` shows the
/// browser's own time of day).
fn time_of_day(unix_secs: u64) -> String {
    let seconds = unix_secs % 86_400;
    format!("{:02}:{:02}:{:02} UTC", seconds / 3600, seconds / 60 % 60, seconds % 60)
}

/// Seconds as the two largest units (`3d 4h`, `5m 12s`).
fn duration(seconds: u64) -> String {
    let (days, hours, minutes) = (seconds / 86_400, seconds / 3_600 % 24, seconds / 60 % 60);
    match (days, hours, minutes) {
        (0, 0, 0) => format!("{seconds}s"),
        (0, 0, _) => format!("{minutes}m {}s", seconds % 60),
        (0, _, _) => format!("{hours}h {minutes}m"),
        _ => format!("{days}d {hours}h"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn figures_read_as_people_write_them() {
        assert_eq!(duration(42), "42s");
        assert_eq!(duration(312), "5m 12s");
        assert_eq!(duration(3 * 3600 + 120), "3h 2m");
        assert_eq!(duration(3 * 86_400 + 4 * 3600), "3d 4h");
        assert_eq!(time_of_day(1_800_000_000 + 3 * 3600 + 41 * 60 + 21 - 1_800_000_000 % 86_400), "03:41:21 UTC");
    }

    #[test]
    fn what_reaches_the_page_is_escaped() {
        assert_eq!(
            escape("<script>\"a\" & 'b'</script>"),
            "&lt;script&gt;&quot;a&quot; &amp; &#39;b&#39;&lt;/script&gt;"
        );
    }
}
