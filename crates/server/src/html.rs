//! What the pages pkgproxy draws for people (the status page, the cache's
//! page) share: text made safe for HTML, and figures written as people
//! write them. Pure functions: no state, no I/O.

/// `text` safe inside an element or a quoted attribute.
pub fn escape(text: &str) -> String {
    let mut escaped = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '&' => escaped.push_str("&amp;"),
            '<' => escaped.push_str("&lt;"),
            '>' => escaped.push_str("&gt;"),
            '"' => escaped.push_str("&quot;"),
            '\'' => escaped.push_str("&#39;"),
            c => escaped.push(c),
        }
    }
    escaped
}

/// Bytes in binary units, one decimal (`page.js`'s `bytes` too).
pub fn bytes(count: u64) -> String {
    const UNITS: [&str; 6] = ["B", "KiB", "MiB", "GiB", "TiB", "PiB"];
    let mut value = count as f64;
    let mut unit = 0;
    while value >= 1024.0 && unit + 1 < UNITS.len() {
        value /= 1024.0;
        unit += 1;
    }
    match unit {
        0 => format!("{count} B"),
        _ => format!("{value:.1} {}", UNITS[unit]),
    }
}

/// A share as a percentage, one decimal; a dash before there is one.
pub fn ratio(share: Option<f64>) -> String {
    share.map_or_else(|| "–".to_string(), |share| format!("{:.1} %", share * 100.0))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn figures_read_as_people_write_them() {
        assert_eq!(bytes(512), "512 B");
        assert_eq!(bytes(1536), "1.5 KiB");
        assert_eq!(bytes(5 * 1024 * 1024 * 1024), "5.0 GiB");
        assert_eq!(ratio(None), "–");
        assert_eq!(ratio(Some(0.5)), "50.0 %");
    }

    #[test]
    fn markup_in_text_is_shown_not_run() {
        assert_eq!(escape("<a href=\"x\">&'</a>"), "&lt;a href=&quot;x&quot;&gt;&amp;&#39;&lt;/a&gt;");
    }
}
