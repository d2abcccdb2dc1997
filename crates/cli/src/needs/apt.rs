//! apt's needs: the packages an `apt-get install --print-uris` run names,
//! one line each: `'URL' FILE SIZE SHA256:HEX` (the URL as apt asks
//! pkgproxy for it, its forward proxy).

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

#[cfg(test)]
mod tests {
    use super::*;

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
