//! apt's needs: the packages an `apt-get install --print-uris` run names,
//! one line each: `'URL' FILE SIZE SHA256:HEX` (the URL as apt asks
//! pkgproxy for it, its forward proxy); or apt's sources (one-line
//! `sources.list` or deb822 `.sources`) and package names, whose
//! dependencies the daemon follows in the indexes it holds.

use pkgproxy_control::{AptNeeds, AptSource};

use super::Item;

/// The requests the `--print-uris` lines in `text` make.
pub fn items(text: &str) -> anyhow::Result<Vec<Item>> {
    let mut items = Vec::new();
    for (number, line) in text.lines().enumerate() {
        let Some(rest) = line.trim().strip_prefix('\'') else { continue };
        let (url, rest) =
            rest.split_once('\'').ok_or_else(|| anyhow::anyhow!("line {}: the URL is not closed", number + 1))?;
        anyhow::ensure!(
            url.starts_with("http://"),
            "line {}: {url}: only http:// sources go through pkgproxy's cache",
            number + 1
        );
        let file = rest.split_whitespace().next().unwrap_or(url).to_owned();
        items.push(Item { url: url.to_owned(), label: file });
    }
    anyhow::ensure!(!items.is_empty(), "no 'URL' FILE SIZE HASH lines: is this apt-get's --print-uris output?");
    Ok(items)
}

/// The requests an install needs, as the daemon found them: the indexes,
/// then the packages; and what it could not find.
pub fn wanted(needs: AptNeeds) -> super::Wanted {
    let tail = |url: &str| url.split("/dists/").nth(1).map_or_else(|| url.to_owned(), |rest| format!("dists/{rest}"));
    let indexes = needs.indexes.iter().map(|url| Item { url: url.clone(), label: tail(url) });
    let packages = needs.packages.iter().map(|package| Item { url: package.url.clone(), label: package.name.clone() });
    let missing = needs.missing.iter().map(|name| format!("{name}: no index pkgproxy holds offers it"));
    // An expired Release breaks `apt-get update`: not ready. One about to
    // expire works now: a warning.
    let (expired, expiring): (Vec<_>, Vec<_>) = needs.valid_until.iter().partition(|suite| suite.expired);
    let warn = |suite: &&pkgproxy_control::SuiteValidity| suite.warning(&crate::when::utc(suite.valid_until));
    super::Wanted {
        items: indexes.chain(packages).collect(),
        unknown: missing.chain(needs.unresolved).chain(expired.iter().map(warn)).collect(),
        warnings: expiring.iter().map(warn).collect(),
        records: Vec::new(),
        headers: Vec::new(),
    }
}

/// The machine's architecture, as dpkg says (`amd64` when it cannot).
pub fn architecture() -> String {
    let asked = std::process::Command::new("dpkg").arg("--print-architecture").output();
    let said = asked.ok().filter(|output| output.status.success()).map(|output| output.stdout);
    let said = said.map(|out| String::from_utf8_lossy(&out).trim().to_owned()).filter(|arch| !arch.is_empty());
    said.unwrap_or_else(|| "amd64".to_owned())
}

/// The binary sources of a `sources.list` (`deb [options] URI SUITE
/// COMPONENT...`) or a deb822 `.sources` file (`Types: deb`, `URIs:`,
/// `Suites:`, `Components:`).
pub fn sources(text: &str) -> anyhow::Result<Vec<AptSource>> {
    let deb822 = text.lines().any(|line| line.trim_start().to_ascii_lowercase().starts_with("types:"));
    let found = if deb822 { deb822_sources(text) } else { one_line_sources(text) };
    anyhow::ensure!(!found.is_empty(), "no deb sources found");
    Ok(found)
}

fn one_line_sources(text: &str) -> Vec<AptSource> {
    let mut found = Vec::new();
    for line in text.lines() {
        let line = line.split('#').next().unwrap_or("").trim();
        let Some(rest) = line.strip_prefix("deb ") else { continue };
        // Options come in brackets: `[signed-by=/k.gpg arch=amd64]`.
        let rest = match rest.trim_start().strip_prefix('[') {
            Some(options) => options.split_once(']').map_or("", |(_, rest)| rest),
            None => rest,
        };
        let mut words = rest.split_whitespace();
        if let (Some(uri), Some(suite)) = (words.next(), words.next()) {
            let components = words.map(str::to_owned).collect();
            found.push(AptSource { uri: uri.to_owned(), suite: suite.to_owned(), components });
        }
    }
    found
}

fn deb822_sources(text: &str) -> Vec<AptSource> {
    let mut found = Vec::new();
    for stanza in text.split("\n\n") {
        let field = |name: &str| {
            stanza.lines().find_map(|line| {
                let (key, value) = line.split_once(':')?;
                key.trim().eq_ignore_ascii_case(name).then(|| value.split_whitespace().map(str::to_owned).collect())
            })
        };
        let (types, uris, suites): (Vec<String>, Vec<String>, Vec<String>) = (
            field("Types").unwrap_or_default(),
            field("URIs").unwrap_or_default(),
            field("Suites").unwrap_or_default(),
        );
        let components: Vec<String> = field("Components").unwrap_or_default();
        let enabled = field("Enabled").is_none_or(|value: Vec<String>| value.first().is_none_or(|v| v != "no"));
        if !types.iter().any(|t| t == "deb") || !enabled {
            continue;
        }
        for uri in &uris {
            for suite in &suites {
                found.push(AptSource { uri: uri.clone(), suite: suite.clone(), components: components.clone() });
            }
        }
    }
    found
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn both_sources_formats_give_uri_suite_and_components() {
        let one_line = "# comment\ndeb [signed-by=/k.gpg] http://deb.debian.org/debian bookworm main contrib\n\
                        deb-src http://deb.debian.org/debian bookworm main\n";
        let parsed = sources(one_line).unwrap();
        assert_eq!(parsed.len(), 1);
        assert_eq!((parsed[0].uri.as_str(), parsed[0].suite.as_str()), ("http://deb.debian.org/debian", "bookworm"));
        assert_eq!(parsed[0].components, ["main", "contrib"]);
        let deb822 = "Types: deb deb-src\nURIs: http://deb.debian.org/debian\nSuites: bookworm bookworm-updates\n\
                      Components: main\nSigned-By: /k.gpg\n\nTypes: deb\nURIs: http://x/y\nSuites: s\nComponents: c\nEnabled: no\n";
        let parsed = sources(deb822).unwrap();
        let suites: Vec<&str> = parsed.iter().map(|s| s.suite.as_str()).collect();
        assert_eq!(suites, ["bookworm", "bookworm-updates"]);
        assert!(sources("nothing\n").is_err());
    }

    #[test]
    fn print_uris_lines_give_their_urls_and_files() {
        let text = "Reading package lists...\n\
                    'http://deb.debian.org/debian/pool/main/h/hello/hello_2.10-3_amd64.deb' hello_2.10-3_amd64.deb 53000 SHA256:ab\n";
        let items = items(text).unwrap();
        assert_eq!(items[0].url, "http://deb.debian.org/debian/pool/main/h/hello/hello_2.10-3_amd64.deb");
        assert_eq!(items[0].label, "hello_2.10-3_amd64.deb");
        assert!(super::items("nothing here\n").is_err());
        assert!(super::items("'https://x/y.deb' y.deb 1 SHA256:00\n").is_err());
    }
}
