//! The cache's page as HTML: whole from the server, so it reads and
//! searches without script (a form sending `?q=`); its script narrows the
//! rows as one types, then asks the server for the whole search.

use std::fmt::Write;

use pkgproxy_control::{Browse, BrowsePackage, BrowseSide};

use crate::html::{bytes, escape};

/// The page's style: the status page's look, one column that fits a
/// phone, each package a card there.
const STYLE: &str = include_str!("page.css");

/// The page's script: narrows as one types.
const SCRIPT: &str = include_str!("page.js");

/// The page for `browse` at `now` (Unix seconds), read by a browser that
/// reached pkgproxy as `host`.
pub fn render(browse: &Browse, host: &str, now: u64) -> String {
    let mut html = String::with_capacity(32 * 1024);
    let host = escape(host);
    let query = escape(&browse.query);
    let _ = write!(
        html,
        "<!doctype html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">\
         <meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\
         <title>Cache of pkgproxy on {host}</title><style>{STYLE}</style></head>\n<body>\n\
         <header><h1>pkgproxy <small>cache</small></h1>\
         <p>at <b>{host}</b> · <a href=\"/\">status</a> · <a href=\"/pkgproxy/v1/cache\">JSON</a></p></header>\n\
         <form method=\"get\" action=\"/cache/\" role=\"search\">\
         <input type=\"search\" id=\"q\" name=\"q\" value=\"{query}\" placeholder=\"Search by name\" \
         aria-label=\"Search by name\" autocomplete=\"off\" spellcheck=\"false\">\
         <button type=\"submit\">Search</button></form>\n<main id=\"listing\">\n"
    );
    top(&mut html, browse);
    let shown: Vec<&BrowseSide> = browse.sides.iter().filter(|side| side.entries > 0).collect();
    if shown.is_empty() {
        html.push_str("<p class=\"caption\">The cache holds nothing yet.</p>\n");
    }
    for side in shown {
        side_section(&mut html, side, &browse.query, now);
    }
    let _ = write!(html, "</main>\n<script>{SCRIPT}</script>\n</body></html>\n");
    html
}

/// The top clients and packages of the last day, side by side.
fn top(html: &mut String, browse: &Browse) {
    html.push_str("<section id=\"top\"><h2>Last day</h2><div class=\"pair\">");
    html.push_str("<div><h3>Top clients</h3>");
    match browse.top_clients.is_empty() {
        true => html.push_str("<p class=\"caption\">none yet</p>"),
        false => {
            html.push_str("<table id=\"top-clients\"><thead><tr><th>client</th><th>files</th></tr></thead><tbody>");
            for client in &browse.top_clients {
                let _ = write!(html, "<tr><td>{}</td><td>{}</td></tr>", escape(&client.address), client.requests);
            }
            html.push_str("</tbody></table>");
        }
    }
    html.push_str("</div><div><h3>Top packages</h3>");
    match browse.top_packages.is_empty() {
        true => html.push_str("<p class=\"caption\">none yet</p>"),
        false => {
            html.push_str("<table id=\"top-packages\"><thead><tr><th>package</th><th>files</th></tr></thead><tbody>");
            for package in &browse.top_packages {
                let _ = write!(
                    html,
                    "<tr><td>{} <small>{}</small></td><td>{}</td></tr>",
                    escape(&package.name),
                    escape(&package.side),
                    package.requests
                );
            }
            html.push_str("</tbody></table>");
        }
    }
    html.push_str("</div></div></section>\n");
}

fn side_section(html: &mut String, side: &BrowseSide, query: &str, now: u64) {
    let name = escape(&side.side);
    let _ = writeln!(
        html,
        "<section class=\"side\" data-side=\"{name}\"><h2>{name} <small>{entries} · {bytes}</small></h2>",
        entries = counted(side.entries, "entry", "entries"),
        bytes = bytes(side.bytes),
    );
    if !side.itemised {
        html.push_str("<p class=\"caption\">This side's entries are not told apart by package here.</p></section>\n");
        return;
    }
    if side.packages.is_empty() {
        let none = match query.is_empty() {
            true => format!("no {}", escape(&side.noun)),
            false => format!("no {} named like “{}”", escape(&side.noun), escape(query)),
        };
        let _ = write!(html, "<p class=\"caption\">{none}</p>");
    } else {
        let _ = writeln!(
            html,
            "<table class=\"cards packages\"><thead><tr><th>{noun}</th><th>versions</th><th>size</th>\
             <th>hits</th><th>last use</th></tr></thead><tbody>",
            noun = escape(&side.noun),
        );
        for package in &side.packages {
            package_row(html, package, now);
        }
        html.push_str("</tbody></table>\n");
    }
    let mut notes = Vec::new();
    if side.more > 0 {
        notes.push(format!("and {} more {} (search to narrow)", thousands(side.more), escape(&side.noun)));
    }
    if side.other_entries > 0 {
        let entries = counted(side.other_entries, "entry", "entries");
        notes.push(format!("{}: {entries}, {}", escape(&side.other_noun), bytes(side.other_bytes)));
    }
    if side.ungrouped_entries > 0 {
        let entries = counted(side.ungrouped_entries, "entry", "entries");
        notes.push(format!("{entries} of further {}, not grouped here (search to narrow)", escape(&side.noun)));
    }
    if side.private_entries > 0 {
        notes.push(format!("{}, private: not listed", counted(side.private_entries, "entry", "entries")));
    }
    for note in notes {
        let _ = write!(html, "<p class=\"caption\">{note}</p>");
    }
    html.push_str("</section>\n");
}

fn package_row(html: &mut String, package: &BrowsePackage, now: u64) {
    let name = escape(&package.name);
    let mut versions = String::new();
    for version in &package.versions {
        let _ = write!(
            versions,
            "<span class=\"version\" title=\"used {used}\">{v} <small>{size} · {hits}</small></span> ",
            v = escape(&version.version),
            size = bytes(version.bytes),
            hits = counted(version.hits, "hit", "hits"),
            used = ago(now, version.last_use),
        );
    }
    if package.more_versions > 0 {
        let _ = write!(versions, "<span class=\"caption\">+{} more</span>", package.more_versions);
    }
    if package.versions.is_empty() {
        versions.push_str("<span class=\"caption\">metadata only</span>");
    }
    let _ = writeln!(
        html,
        "<tr data-package=\"{lower}\"><td class=\"name\" data-label=\"name\">{name}</td>\
         <td class=\"versions\" data-label=\"versions\">{versions}</td>\
         <td class=\"size\" data-label=\"size\">{size}</td><td class=\"hits\" data-label=\"hits\">{hits}</td>\
         <td class=\"used\" data-label=\"last use\">{used}</td></tr>",
        lower = escape(&package.name.to_lowercase()),
        size = bytes(package.bytes),
        hits = package.hits,
        used = ago(now, package.last_use),
    );
}

/// `count` and the word for one or for many.
fn counted(count: u64, one: &str, many: &str) -> String {
    match count {
        1 => format!("1 {one}"),
        _ => format!("{} {many}", thousands(count)),
    }
}

/// A count with a comma every three digits (`12,400`).
fn thousands(count: u64) -> String {
    let digits = count.to_string();
    let mut out = String::new();
    for (place, digit) in digits.chars().enumerate() {
        if place > 0 && (digits.len() - place).is_multiple_of(3) {
            out.push(',');
        }
        out.push(digit);
    }
    out
}

/// How long before `now` `then` was (Unix seconds), in its largest unit.
fn ago(now: u64, then: u64) -> String {
    if then == 0 {
        return "never".to_string();
    }
    let seconds = now.saturating_sub(then);
    match seconds {
        0..60 => "just now".to_string(),
        60..3_600 => format!("{} min ago", seconds / 60),
        3_600..86_400 => format!("{} h ago", seconds / 3_600),
        _ => format!("{} days ago", seconds / 86_400),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn figures_read_as_people_write_them() {
        assert_eq!(thousands(12_400), "12,400");
        assert_eq!(thousands(999), "999");
        assert_eq!(thousands(1_000_000), "1,000,000");
        assert_eq!(ago(1_000, 1_000 - 59), "just now");
        assert_eq!(ago(10_000, 10_000 - 120), "2 min ago");
        assert_eq!(ago(200_000, 200_000 - 2 * 86_400), "2 days ago");
        assert_eq!(ago(5, 0), "never");
    }

    #[test]
    fn a_package_s_name_reaches_the_page_escaped() {
        let package = BrowsePackage {
            name: "<script>x</script>".into(),
            bytes: 2048,
            metadata_bytes: 0,
            hits: 3,
            last_use: 10,
            versions: vec![],
            more_versions: 0,
        };
        let mut html = String::new();
        package_row(&mut html, &package, 10);
        assert!(!html.contains("<script>") && html.contains("&lt;script&gt;x"), "{html}");
    }
}
