//! The traffic charts of the status page, as HTML with inline SVG: per
//! side and span (the last hour by minutes, the last day by quarter
//! hours), the span's figures in words, requests per stretch (hits,
//! misses, refused or failed), and bytes from the cache against bytes
//! fetched, with the scale and the time axis written out. `chart.js`
//! draws the same from the JSON, with the same classes: a change here is
//! a change there.

use std::fmt::Write;

use pkgproxy_control::{SideStatus, Traffic, TrafficSeries};

use crate::html::{bytes, escape, ratio};

/// The charts of the sides that saw traffic in the last day or since the
/// start, busiest first, and one line naming the idle ones.
pub fn charts(html: &mut String, sides: &[SideStatus]) {
    html.push_str(
        "<section id=\"traffic\"><h2>Traffic</h2>\
         <input type=\"radio\" name=\"span\" id=\"span-hour\" checked><label for=\"span-hour\">last hour</label>\
         <input type=\"radio\" name=\"span\" id=\"span-day\"><label for=\"span-day\">last day</label>\
         <div id=\"charts\">",
    );
    let (busy, idle) = busy_first(sides);
    for side in &busy {
        let _ = write!(
            html,
            "<article class=\"side-chart\" data-side=\"{}\"><h3>{}</h3>",
            escape(&side.name),
            escape(&side.name)
        );
        span(html, "hour", &side.last_hour);
        span(html, "day", &side.last_day);
        html.push_str("</article>");
    }
    html.push_str("</div>");
    let _ =
        write!(html, "<p id=\"idle\" class=\"caption\">{}</p></section>", escape(&idle_line(&idle, busy.is_empty())));
    html.push('\n');
}

/// The sides with traffic, busiest in the last day first, and the names
/// of the others (`chart.js`'s `busyFirst` too).
fn busy_first(sides: &[SideStatus]) -> (Vec<&SideStatus>, Vec<&str>) {
    let day = |side: &SideStatus| side.last_day.stretches.iter().map(|stretch| stretch.requests).sum::<u64>();
    let (mut busy, idle): (Vec<&SideStatus>, Vec<&SideStatus>) =
        sides.iter().partition(|side| side.requests > 0 || day(side) > 0);
    busy.sort_by_key(|side| std::cmp::Reverse(day(side)));
    (busy, idle.into_iter().map(|side| side.name.as_str()).collect())
}

/// What the line under the charts says of the idle sides.
fn idle_line(idle: &[&str], none_busy: bool) -> String {
    match (idle.is_empty(), none_busy) {
        (true, _) => String::new(),
        (false, true) => format!("No traffic in the last day yet ({}).", idle.join(", ")),
        (false, false) => format!("No traffic in the last day: {}.", idle.join(", ")),
    }
}

/// One span's figures and charts (`chart.js`'s `span` too).
fn span(html: &mut String, class: &str, series: &TrafficSeries) {
    let total = sum(&series.stretches);
    let unit = if series.step_seconds == 60 { "a minute" } else { "a quarter hour" };
    let most = series.stretches.iter().map(|s| s.requests).max().unwrap_or(0);
    let most_bytes = series.stretches.iter().map(|s| s.bytes_from_cache.max(s.bytes_from_upstream)).max().unwrap_or(0);
    let _ = write!(
        html,
        "<figure class=\"span {class}\"><figcaption>{figures}</figcaption>\
         <div class=\"plot\"><span class=\"scale\">{most} requests {unit}</span>{requests}</div>\
         <div class=\"plot\"><span class=\"scale\">{most_bytes} {unit}</span>{bytes_chart}</div>\
         <div class=\"axis\"><span>{ago}</span><span>{half}</span><span>now</span></div>\
         <p class=\"legend\"><i class=\"key-hit\"></i>hits <i class=\"key-miss\"></i>misses \
         <i class=\"key-bad\"></i>refused or failed · <i class=\"key-cache\"></i>from cache \
         <i class=\"key-fetched\"></i>fetched</p></figure>",
        figures = figures(&total, class),
        requests = requests_chart(series, most),
        most_bytes = bytes(most_bytes),
        bytes_chart = bytes_chart(series, most_bytes),
        ago = ago(series, series.stretches.len()),
        half = ago(series, series.stretches.len() / 2),
    );
}

/// The span's traffic in words: "412 requests · 93.0 % hits · 1.2 GiB
/// from cache / 80.0 MiB fetched in the last hour".
fn figures(total: &Traffic, class: &str) -> String {
    let decided = total.hits + total.misses;
    let share = (decided > 0).then(|| total.hits as f64 / decided as f64);
    let mut text = format!(
        "<b class=\"requests\">{}</b> requests · <b class=\"ratio\">{}</b> hits · \
         <b class=\"from-cache\">{}</b> from cache / <b class=\"fetched\">{}</b> fetched",
        total.requests,
        ratio(share),
        bytes(total.bytes_from_cache),
        bytes(total.bytes_from_upstream),
    );
    if total.refused > 0 {
        let _ = write!(text, " · <b class=\"refused bad\">{}</b> refused", total.refused);
    }
    if total.failed > 0 {
        let _ = write!(text, " · <b class=\"failed bad\">{}</b> failed", total.failed);
    }
    let _ = write!(text, " in the last {class}");
    text
}

/// How long before now stretch `from_end` stretches back began.
fn ago(series: &TrafficSeries, from_end: usize) -> String {
    let seconds = series.step_seconds * from_end as u64;
    match seconds {
        s if s >= 3600 && series.step_seconds >= 900 => format!("{} h ago", s / 3600),
        s => format!("{} min ago", s / 60),
    }
}

/// Requests per stretch as stacked bars: hits, misses, then refused and
/// failed, on a scale of `most`.
fn requests_chart(series: &TrafficSeries, most: u64) -> String {
    let count = series.stretches.len().max(1);
    let mut svg = format!("<svg class=\"bars\" viewBox=\"0 0 {count} 40\" preserveAspectRatio=\"none\" role=\"img\">");
    let scale = |value: u64| value as f64 * 40.0 / most.max(1) as f64;
    for (at, stretch) in series.stretches.iter().enumerate() {
        if stretch.requests == 0 {
            continue;
        }
        let other = stretch.requests.saturating_sub(stretch.hits + stretch.misses);
        let mut top = 40.0;
        let _ = write!(svg, "<g><title>{}</title>", escape(&bar_title(series, at, stretch)));
        for (value, class) in [(stretch.hits, "hit"), (stretch.misses, "miss"), (other, "bad")] {
            if value > 0 {
                top -= scale(value);
                let _ = write!(
                    svg,
                    "<rect x=\"{at}.1\" y=\"{top:.2}\" width=\"0.8\" height=\"{:.2}\" class=\"{class}\"/>",
                    scale(value)
                );
            }
        }
        svg.push_str("</g>");
    }
    svg.push_str("<line x1=\"0\" y1=\"40\" x2=\"100%\" y2=\"40\" class=\"base\"/></svg>");
    svg
}

/// Bytes per stretch: from the cache above the line, fetched below it.
fn bytes_chart(series: &TrafficSeries, most: u64) -> String {
    let count = series.stretches.len().max(1);
    let mut svg = format!("<svg class=\"bytes\" viewBox=\"0 0 {count} 40\" preserveAspectRatio=\"none\" role=\"img\">");
    let scale = |value: u64| value as f64 * 20.0 / most.max(1) as f64;
    for (at, stretch) in series.stretches.iter().enumerate() {
        if stretch.bytes_from_cache + stretch.bytes_from_upstream == 0 {
            continue;
        }
        let (up, down) = (scale(stretch.bytes_from_cache), scale(stretch.bytes_from_upstream));
        let title = format!(
            "{}: {} from cache, {} fetched",
            ago(series, series.stretches.len() - at),
            bytes(stretch.bytes_from_cache),
            bytes(stretch.bytes_from_upstream)
        );
        let _ = write!(
            svg,
            "<g><title>{}</title><rect x=\"{at}.1\" y=\"{:.2}\" width=\"0.8\" height=\"{up:.2}\" class=\"cache\"/>\
             <rect x=\"{at}.1\" y=\"20\" width=\"0.8\" height=\"{down:.2}\" class=\"fetched\"/></g>",
            escape(&title),
            20.0 - up,
        );
    }
    svg.push_str("<line x1=\"0\" y1=\"20\" x2=\"100%\" y2=\"20\" class=\"base\"/></svg>");
    svg
}

/// A bar's tooltip: when, and what it is made of.
fn bar_title(series: &TrafficSeries, at: usize, stretch: &Traffic) -> String {
    format!(
        "{}: {} requests, {} hits, {} misses, {} refused, {} failed",
        ago(series, series.stretches.len() - at),
        stretch.requests,
        stretch.hits,
        stretch.misses,
        stretch.refused,
        stretch.failed
    )
}

/// The stretches added up.
fn sum(stretches: &[Traffic]) -> Traffic {
    stretches.iter().fold(Traffic::default(), |total, s| Traffic {
        requests: total.requests + s.requests,
        hits: total.hits + s.hits,
        misses: total.misses + s.misses,
        refused: total.refused + s.refused,
        failed: total.failed + s.failed,
        bytes_from_cache: total.bytes_from_cache + s.bytes_from_cache,
        bytes_from_upstream: total.bytes_from_upstream + s.bytes_from_upstream,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn side(name: &str, requests: u64, day: &[u64]) -> SideStatus {
        let stretches = day.iter().map(|requests| Traffic { requests: *requests, ..Traffic::default() }).collect();
        SideStatus {
            name: name.into(),
            requests,
            hits: 0,
            misses: 0,
            hit_ratio: None,
            bytes_saved: 0,
            bytes_fetched: 0,
            refused: 0,
            failed: 0,
            last_hour: TrafficSeries::default(),
            last_day: TrafficSeries { start: 0, step_seconds: 900, stretches },
        }
    }

    #[test]
    fn sides_with_traffic_come_first_busiest_first_and_the_idle_ones_are_named_in_one_line() {
        let sides = [side("apt", 0, &[0]), side("npm", 2, &[2]), side("pypi", 0, &[9]), side("go", 0, &[])];
        let (busy, idle) = busy_first(&sides);
        assert_eq!(busy.iter().map(|s| s.name.as_str()).collect::<Vec<_>>(), ["pypi", "npm"]);
        assert_eq!(idle_line(&idle, busy.is_empty()), "No traffic in the last day: apt, go.");
    }

    #[test]
    fn a_spans_figures_read_as_a_sentence() {
        let total = Traffic {
            requests: 412,
            hits: 372,
            misses: 28,
            refused: 12,
            failed: 0,
            bytes_from_cache: 1288490189,
            bytes_from_upstream: 80 * 1024 * 1024,
        };
        assert_eq!(
            figures(&total, "hour"),
            "<b class=\"requests\">412</b> requests · <b class=\"ratio\">93.0 %</b> hits · \
             <b class=\"from-cache\">1.2 GiB</b> from cache / <b class=\"fetched\">80.0 MiB</b> fetched · \
             <b class=\"refused bad\">12</b> refused in the last hour"
        );
    }
}
