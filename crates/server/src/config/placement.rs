//! Where a key the file has but nothing reads belongs: told with its line
//! and column, the section it landed in, and the section whose key it is,
//! or the name it likely misspells. An admin who uncomments one key of the
//! shipped file, every header commented out, learns which header to
//! uncomment too.
//!
//! The sections and their keys are those of [`EXAMPLE`], which uses every
//! key: a test parses it, so it names none that is not read.

use toml_edit::{ImDocument, Item, TableLike};

use super::EXAMPLE;

/// The tables whose subtables are named by the admin (`[mirror.NAME]`).
const NAMED: &[&str] = &["mirror"];

/// A key of the file, and the table it is in.
#[derive(Debug, Clone)]
struct Entry {
    /// The table's path: empty at the top of the file.
    table: Vec<String>,
    /// Whether that table is one of an array (`[[apt.archive]]`).
    in_array: bool,
    /// The key.
    key: String,
    /// Whether its value is a table of its own (a section).
    is_table: bool,
    /// Whether its value is an array of tables (`[[apt.archive]]`).
    is_array: bool,
    /// Where the key starts in the text.
    key_start: Option<usize>,
    /// Where it starts in the text: a section's header, or the key.
    start: Option<usize>,
}

impl Entry {
    /// The header of the table it is in, `None` at the top of the file.
    fn section(&self) -> Option<String> {
        (!self.table.is_empty()).then(|| header(&self.table, self.in_array))
    }

    /// The header of that table, with the names an admin gives
    /// replaced by `NAME`: as the example's tables are known.
    fn known_section(&self) -> Option<String> {
        (!self.table.is_empty()).then(|| header(&generic(&self.table), self.in_array))
    }

    /// The path of the section it is, if it is one.
    fn path(&self) -> Vec<String> {
        let mut path = self.table.clone();
        path.push(self.key.clone());
        path
    }
}

/// `[a.b]`, or `[[a.b]]` for a table of an array.
fn header(path: &[String], in_array: bool) -> String {
    match in_array {
        true => format!("[[{}]]", path.join(".")),
        false => format!("[{}]", path.join(".")),
    }
}

/// `path` with the names an admin gives (`mirror.shadow`) as `NAME`.
fn generic(path: &[String]) -> Vec<String> {
    let mut path = path.to_vec();
    if path.len() > 1 && NAMED.contains(&path[0].as_str()) {
        path[1] = "NAME".to_string();
    }
    path
}

/// Every key of `text`, in every table (none if it is not TOML).
fn entries(text: &str) -> Vec<Entry> {
    let mut found = Vec::new();
    if let Ok(document) = ImDocument::parse(text) {
        walk(document.as_table(), &[], false, &mut found);
    }
    found
}

/// The keys of `table`, at `path`, and those of the tables under it.
fn walk(table: &dyn TableLike, path: &[String], in_array: bool, found: &mut Vec<Entry>) {
    for (name, item) in table.iter() {
        let key_start = table.key(name).and_then(|key| key.span()).map(|span| span.start);
        let mut below = path.to_vec();
        below.push(name.to_string());
        let tables: Vec<&dyn TableLike> = match item {
            Item::ArrayOfTables(array) => array.iter().map(|table| table as &dyn TableLike).collect(),
            other => other.as_table_like().into_iter().collect(),
        };
        let header_start = match item {
            Item::Table(table) => table.span().map(|span| span.start),
            Item::ArrayOfTables(array) => array.iter().find_map(|table| table.span()).map(|span| span.start),
            _ => None,
        };
        let is_array = matches!(item, Item::ArrayOfTables(_));
        let is_table = !tables.is_empty() || is_array;
        let start = header_start.or(key_start);
        found.push(Entry {
            table: path.to_vec(),
            in_array,
            key: name.to_string(),
            is_table,
            is_array,
            key_start,
            start,
        });
        for inner in tables {
            walk(inner, &below, is_array, found);
        }
    }
}

/// A known section: its header and the keys read in it.
struct Section {
    header: String,
    keys: Vec<String>,
}

/// Every section of the example, with its keys, in the example's order.
fn known() -> Vec<Section> {
    let mut sections: Vec<Section> = Vec::new();
    for entry in entries(EXAMPLE) {
        if entry.is_table {
            let header = header(&generic(&entry.path()), entry.is_array);
            if !sections.iter().any(|section| section.header == header) {
                sections.push(Section { header, keys: Vec::new() });
            }
        } else if let Some(header) = entry.known_section() {
            if let Some(section) = sections.iter_mut().find(|section| section.header == header) {
                if !section.keys.contains(&entry.key) {
                    section.keys.push(entry.key);
                }
            }
        }
    }
    sections
}

/// What is wrong with the key (or section) starting at `offset` of `text`,
/// which the section it is in does not read; `None` if none starts there.
pub(super) fn unknown_key_at(text: &str, offset: usize) -> Option<String> {
    let at = Some(offset);
    let entry = entries(text).into_iter().find(|entry| entry.key_start == at || entry.start == at)?;
    Some(told(text, &entry))
}

/// What is wrong with `name`, at the top of `text`, which nothing reads;
/// `None` if `text` has no such key.
pub(super) fn unknown_at_top(text: &str, name: &str) -> Option<String> {
    let entry = entries(text).into_iter().find(|entry| entry.table.is_empty() && entry.key == name)?;
    Some(told(text, &entry))
}

/// The whole message: where, what, the hint, and the line itself, without
/// the credentials a URL on that line may carry (the message is logged,
/// and told on the admin socket after a reload).
fn told(text: &str, entry: &Entry) -> String {
    let start = entry.start.unwrap_or(0);
    let (line, column) = line_and_column(text, start);
    let what = match (entry.is_table, entry.section()) {
        (true, _) => format!("unknown section {}", header(&entry.path(), entry.is_array)),
        (false, None) => format!("unknown key `{}` above every section header", entry.key),
        (false, Some(section)) => format!("unknown key `{}` in {section}", entry.key),
    };
    let hint = match entry.is_table {
        true => section_hint(entry),
        false => key_hint(text, entry, line),
    };
    let shown = shown(text, line, column, entry);
    let hint = hint.map(|hint| format!(": {hint}")).unwrap_or_default();
    crate::redact::urls_in(&format!("line {line}, column {column}: {what}{hint}\n{shown}"))
}

/// "did you mean `[npm]`?", or the sections there are beside it.
fn section_hint(entry: &Entry) -> Option<String> {
    let sections = known();
    let parent = match entry.table.is_empty() {
        true => String::new(),
        false => format!("{}.", generic(&entry.table).join(".")),
    };
    let beside: Vec<(&str, &str)> = sections
        .iter()
        .filter_map(|section| {
            let path = section.header.trim_matches(['[', ']']);
            let name = path.strip_prefix(parent.as_str())?;
            (!name.contains('.')).then_some((section.header.as_str(), name))
        })
        .collect();
    let names: Vec<&str> = beside.iter().map(|(_, name)| *name).collect();
    if let Some(meant) = likely(&entry.key, &names) {
        let header = beside.iter().find(|(_, name)| *name == meant).map(|(header, _)| *header)?;
        return Some(format!("did you mean {header}?"));
    }
    let headers: Vec<&str> = beside.iter().map(|(header, _)| *header).collect();
    (!headers.is_empty()).then(|| format!("the sections are {}", headers.join(", ")))
}

/// "it is a key of `[cache]`", with its commented-out header; "did you mean
/// `max_size`?"; or the keys of its section.
fn key_hint(text: &str, entry: &Entry, line: usize) -> Option<String> {
    let sections = known();
    let here = entry.known_section();
    let homes: Vec<&Section> = sections
        .iter()
        .filter(|section| Some(&section.header) != here.as_ref() && section.keys.contains(&entry.key))
        .collect();
    if !homes.is_empty() {
        let list: Vec<&str> = homes.iter().map(|section| section.header.as_str()).collect();
        let headers: Vec<String> = homes.iter().map(|section| section.header.clone()).collect();
        let commented = commented_header_above(text, line, &headers);
        return Some(match (commented, homes.len()) {
            (Some((_, at)), 1) => format!("it is a key of {}, whose header on line {at} is commented out", list[0]),
            (Some((header, at)), _) => {
                format!("it is a key of {}; the header {header} on line {at} is commented out", list.join(", "))
            }
            (None, _) => format!("it is a key of {}", list.join(", ")),
        });
    }
    let own = sections.iter().find(|section| Some(&section.header) == here.as_ref());
    fn keys(section: &Section) -> Vec<&str> {
        section.keys.iter().map(String::as_str).collect()
    }
    if let Some(meant) = own.and_then(|own| likely(&entry.key, &keys(own))) {
        return Some(format!("did you mean `{meant}`?"));
    }
    let elsewhere = sections.iter().find_map(|section| Some((likely(&entry.key, &keys(section))?, section)));
    if let Some((meant, section)) = elsewhere {
        return Some(format!("did you mean `{meant}`, a key of {}?", section.header));
    }
    let own = own?;
    let listed: Vec<String> = own.keys.iter().map(|key| format!("`{key}`")).collect();
    Some(format!("{} reads {}", own.header, listed.join(", ")))
}

/// The nearest line above `line` that is one of `headers` commented out
/// (`# [cache]`), and its number.
fn commented_header_above(text: &str, line: usize, headers: &[String]) -> Option<(String, usize)> {
    let above: Vec<&str> = text.lines().take(line.saturating_sub(1)).collect();
    above.iter().enumerate().rev().find_map(|(at, written)| {
        let uncommented = written.trim_start().strip_prefix('#')?.trim();
        let header = uncommented.split('#').next().unwrap_or_default().trim();
        headers.iter().find(|known| known.as_str() == header).map(|known| (known.clone(), at + 1))
    })
}

/// The name of `names` that `name` likely misspells: an edit off for each
/// three letters (one at least), a swap counting as one.
fn likely<'a>(name: &str, names: &[&'a str]) -> Option<&'a str> {
    let allowed = (name.chars().count() / 3).max(1);
    names
        .iter()
        .map(|known| (distance(name, known), *known))
        .filter(|(distance, _)| *distance <= allowed)
        .min_by_key(|(distance, _)| *distance)
        .map(|(_, known)| known)
}

/// The edits (a letter inserted, removed, changed, or two swapped) that
/// turn `a` into `b`.
fn distance(a: &str, b: &str) -> usize {
    let a: Vec<char> = a.chars().collect();
    let b: Vec<char> = b.chars().collect();
    let mut rows = vec![vec![0usize; b.len() + 1]; a.len() + 1];
    for (i, row) in rows.iter_mut().enumerate() {
        row[0] = i;
    }
    rows[0] = (0..=b.len()).collect();
    for i in 1..=a.len() {
        for j in 1..=b.len() {
            let changed = usize::from(a[i - 1] != b[j - 1]);
            let mut best = (rows[i - 1][j] + 1).min(rows[i][j - 1] + 1).min(rows[i - 1][j - 1] + changed);
            if i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1] {
                best = best.min(rows[i - 2][j - 2] + 1);
            }
            rows[i][j] = best;
        }
    }
    rows[a.len()][b.len()]
}

/// The line and column, from 1, of byte `offset` of `text`.
fn line_and_column(text: &str, offset: usize) -> (usize, usize) {
    let before = text.get(..offset).unwrap_or(text);
    let line = before.matches('\n').count() + 1;
    let column = before.rsplit('\n').next().unwrap_or_default().chars().count() + 1;
    (line, column)
}

/// Line `line` of `text`, `entry` marked from `column`: the key, or the
/// section's header.
fn shown(text: &str, line: usize, column: usize, entry: &Entry) -> String {
    let written = text.lines().nth(line - 1).unwrap_or_default();
    let from: String = written.chars().skip(column - 1).collect();
    let width = match entry.is_table && from.starts_with('[') {
        true => from.find(']').map(|end| end + from[end..].len() - from[end..].trim_start_matches(']').len()),
        false => None,
    };
    let width = width.unwrap_or_else(|| entry.key.chars().count());
    let margin = " ".repeat(line.to_string().len());
    let mark = format!("{}{}", " ".repeat(column - 1), "^".repeat(width.max(1)));
    format!("{margin} |\n{line} | {written}\n{margin} | {mark}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_example_knows_every_section_and_its_keys() {
        let sections = known();
        let keys = |header: &str| sections.iter().find(|section| section.header == header).map(|s| s.keys.clone());
        assert_eq!(keys("[cache]").unwrap(), ["max_size", "min_free", "max_object_size"]);
        assert!(keys("[[apt.archive]]").unwrap().contains(&"mirrors".to_string()));
        assert!(keys("[mirror.NAME]").unwrap().contains(&"max_inflight".to_string()));
        assert!(keys("[npm]").unwrap().contains(&"tarball_urls".to_string()));
    }

    #[test]
    fn a_key_above_every_header_is_sent_to_its_section() {
        let text = "# [cache]\nmax_size = \"50GiB\"\n";
        let told = unknown_at_top(text, "max_size").unwrap();
        assert!(told.starts_with("line 2, column 1: unknown key `max_size` above every section header: it is a key of [cache], whose header on line 1 is commented out\n"), "{told}");
        assert!(told.ends_with("2 | max_size = \"50GiB\"\n  | ^^^^^^^^"), "{told}");
    }

    #[test]
    fn a_key_in_a_named_or_arrayed_table_is_placed() {
        let text = "[mirror.s]\ntarget = \"http://x\"\nmax_inflite = 3\n";
        let told = unknown_key_at(text, text.find("max_inflite").unwrap()).unwrap();
        assert!(
            told.starts_with("line 3, column 1: unknown key `max_inflite` in [mirror.s]: did you mean `max_inflight`?"),
            "{told}"
        );
        let text = "[[apt.archive]]\nname = \"x\"\nindex_ttl = \"5m\"\n";
        let told = unknown_key_at(text, text.find("index_ttl").unwrap()).unwrap();
        assert!(told.contains("in [[apt.archive]]: it is a key of [apt], [lxd], [cargo], [pypi], [npm]"), "{told}");
    }

    #[test]
    fn a_url_on_the_line_shown_keeps_its_credentials() {
        let text = "[go]\nproxis = [\"https://puller:s3cret@proxy.lan\"]\n";
        let told = unknown_key_at(text, 5).unwrap();
        assert!(told.contains("did you mean `proxies`?") && !told.contains("s3cret"), "{told}");
    }

    #[test]
    fn a_misspelt_section_is_matched_and_a_strange_one_shown_the_list() {
        assert!(unknown_at_top("[nmp]\n", "nmp")
            .unwrap()
            .starts_with("line 1, column 1: unknown section [nmp]: did you mean [npm]?"));
        assert!(unknown_at_top("[[pypy.index]]\nname = \"x\"\n", "pypy").unwrap().contains("did you mean [pypi]?"));
        let text = "[[apt.archvie]]\nname = \"x\"\n";
        let told = unknown_key_at(text, 6).unwrap();
        assert!(
            told.starts_with("line 1, column 1: unknown section [[apt.archvie]]: did you mean [[apt.archive]]?\n"),
            "{told}"
        );
        assert!(told.ends_with("1 | [[apt.archvie]]\n  | ^^^^^^^^^^^^^^^"), "{told}");
        let told = unknown_at_top("[zebra]\n", "zebra").unwrap();
        assert!(told.contains("the sections are [cache], [apt], "), "{told}");
    }

    #[test]
    fn distances_count_a_swap_as_one_edit() {
        assert_eq!(distance("nmp", "npm"), 1);
        assert_eq!(distance("max_szie", "max_size"), 1);
        assert_eq!(distance("npmm", "npm"), 1);
        assert_eq!(distance("go", "apt"), 3);
        assert_eq!(likely("go", &["go", "apt"]), Some("go"));
        assert_eq!(likely("cache", &["npm", "apt"]), None);
    }
}
