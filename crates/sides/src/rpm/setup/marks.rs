//! pkgproxy's lines in a `.repo` file, and taking them out byte for byte.
//! A repository pointed at pkgproxy gets its `baseurl` in a block between
//! marker lines (comments, as in the other setups' files), and each line
//! of its own `baseurl`, `metalink` and `mirrorlist` (a value's lines
//! too) is commented out by a prefix of pkgproxy's: taking the block out
//! and the prefixes off gives the file back as it was. Both are whole
//! lines, so no line of the file's own changes but for its prefix, and
//! every line pkgproxy adds ends with its own line break.
//!
//! The block holds exactly its `baseurl` line: one whose lines were
//! edited (a marker line gone, a line added) is not taken for pkgproxy's,
//! and the file is left as it is rather than lose an admin's line.

use std::ops::Range;

use crate::setup::MARKER;

/// What the block's first line opens with.
const BEGIN: &str = "# >>> pkgproxy";

/// What the block's last line opens with.
const END: &str = "# <<< pkgproxy";

/// What opens a line pkgproxy commented out.
pub const OFF: &str = "#pkgproxy-off: ";

/// A repository's change: its `baseurl` at pkgproxy, put in before the
/// line at `at`, and the runs of lines commented out.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Change {
    /// The line the block goes before, by index.
    pub at: usize,
    /// The `baseurl` line's value.
    pub baseurl: String,
    /// The lines commented out.
    pub off: Vec<Range<usize>>,
}

/// Why a file's lines of pkgproxy's cannot be taken out.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Broken {
    #[error("pkgproxy's block opening on line {0} does not end")]
    Unended(usize),
    #[error("pkgproxy's block opening on line {0} was edited")]
    Edited(usize),
    #[error("line {0} ends a block of pkgproxy's that does not open")]
    Unopened(usize),
}

/// The block setting `baseurl`.
fn block(baseurl: &str) -> String {
    format!("{BEGIN} ({MARKER}: downloads go through pkgproxy)\nbaseurl={baseurl}\n{END}\n")
}

/// The file of `lines` (outside pkgproxy's) with `changes` made.
pub fn put(lines: &[&str], changes: &[Change]) -> String {
    let mut text = String::new();
    for (at, line) in lines.iter().enumerate() {
        for change in changes.iter().filter(|change| change.at == at) {
            text.push_str(&block(&change.baseurl));
        }
        if changes.iter().any(|change| change.off.iter().any(|off| off.contains(&at))) {
            text.push_str(OFF);
        }
        text.push_str(line);
    }
    text
}

/// Whether `text` holds a line of pkgproxy's.
pub fn holds_any(text: &str) -> bool {
    text.split_inclusive('\n').any(|line| line.starts_with(BEGIN) || line.starts_with(END) || line.starts_with(OFF))
}

/// `text` without pkgproxy's lines, its own as they were; why not, when
/// pkgproxy's block is not as pkgproxy wrote it.
pub fn outside(text: &str) -> Result<String, Broken> {
    let mut kept = String::new();
    // The line a block being read opened on (from 1), and how many of its
    // lines were read.
    let mut open: Option<(usize, usize)> = None;
    for (number, line) in text.split_inclusive('\n').enumerate().map(|(at, line)| (at + 1, line)) {
        match open {
            Some((opened, 1)) if line.starts_with("baseurl=") && line.ends_with('\n') => open = Some((opened, 2)),
            Some((_, 2)) if line.starts_with(END) => open = None,
            Some((opened, _)) => return Err(Broken::Edited(opened)),
            None if line.starts_with(BEGIN) => open = Some((number, 1)),
            None if line.starts_with(END) => return Err(Broken::Unopened(number)),
            None => kept.push_str(line.strip_prefix(OFF).unwrap_or(line)),
        }
    }
    match open {
        Some((opened, _)) => Err(Broken::Unended(opened)),
        None => Ok(kept),
    }
}

#[cfg(test)]
mod tests {
    use std::ops::Range;

    use super::{holds_any, outside, put, Broken, Change};

    const OWN: &str = "[a]\nname=A\nmetalink=https://m/\n  more\nenabled=1\n[b]\nbaseurl=http://b/";

    fn lines(text: &str) -> Vec<&str> {
        text.split_inclusive('\n').collect()
    }

    /// A change's lines commented out: one run.
    fn off(lines: Range<usize>) -> Vec<Range<usize>> {
        vec![lines]
    }

    #[test]
    fn the_block_goes_before_its_line_and_the_lines_taken_are_commented_out() {
        let changes = [
            Change { at: 2, baseurl: "http://p/rpm/a/".to_owned(), off: off(2..4) },
            Change { at: 6, baseurl: "http://p/rpm/b/".to_owned(), off: off(6..7) },
        ];
        let text = put(&lines(OWN), &changes);
        assert_eq!(
            text,
            "[a]\nname=A\n# >>> pkgproxy (Written by pkgproxyctl setup: downloads go through pkgproxy)\n\
             baseurl=http://p/rpm/a/\n# <<< pkgproxy\n#pkgproxy-off: metalink=https://m/\n#pkgproxy-off:   more\n\
             enabled=1\n[b]\n# >>> pkgproxy (Written by pkgproxyctl setup: downloads go through pkgproxy)\n\
             baseurl=http://p/rpm/b/\n# <<< pkgproxy\n#pkgproxy-off: baseurl=http://b/"
        );
        assert!(holds_any(&text) && !holds_any(OWN));
        assert_eq!(outside(&text).unwrap(), OWN, "byte for byte, a last line without its line break too");
    }

    #[test]
    fn a_block_edited_is_not_taken_for_pkgproxy_s() {
        let set_up = put(&lines(OWN), &[Change { at: 2, baseurl: "http://p/".to_owned(), off: off(2..4) }]);
        let with = |from: &str, to: &str| set_up.replacen(from, to, 1);
        assert_eq!(outside(&with("# <<< pkgproxy\n", "")), Err(Broken::Edited(3)));
        assert_eq!(outside(&with("baseurl=http://p/\n", "baseurl=http://p/\nproxy=_none_\n")), Err(Broken::Edited(3)));
        assert_eq!(outside(&with("# >>> pkgproxy", "# >> pkgproxy")), Err(Broken::Unopened(5)));
        let unended = set_up.split_inclusive('\n').take(4).collect::<String>();
        assert_eq!(outside(&unended), Err(Broken::Unended(3)));
        assert_eq!(
            outside(&with("\nbaseurl=http://p/\n", "\nbaseurl=http://q/\n")).unwrap(),
            OWN,
            "its value is pkgproxy's"
        );
    }
}
