//! The printed scripts (`pkgproxyctl setup dnf | sudo sh`, and with
//! `--undo --print`). `sh` cannot read dnf's ini, so `pkgproxyctl`
//! decides when it prints the script, on the files of the machine it runs
//! on, as the setups of a block in a user's file do: the script carries,
//! for each file it changes, the whole text to write and the POSIX
//! `cksum` of the file it was decided on, and writes the text only over
//! that very file (a file already as it should be is said to be). A file
//! edited since, or another machine's, is left as it is, and the user
//! told to print the script again. A file keeps its owner and mode.

use crate::setup::{cksum, sh_quoted};

use super::files::DnfFiles;
use super::plan::Unread;

/// A file the script writes: where (from `/`), the text it was decided
/// on and the text to write, and what is said once it is written (before
/// and after the file's name).
pub struct Put<'a> {
    pub shown: &'a str,
    pub from: &'a str,
    pub to: &'a str,
    pub done: (&'a str, String),
}

/// The script's shell function writing a file (`put FILE FROM TO ENDING
/// SAID AFTER`, the text on its input).
const PUT: &str = r#"failed=0
# put FILE FROM TO ENDING SAID AFTER: the text on the input becomes FILE (under the root) if the
# file's POSIX cksum is FROM, as when this script was printed, and SAID FILE AFTER is said; a file
# whose cksum is TO is as it should be; any other is left as it is. ENDING is "unended" when the
# text's last line has no line break.
put() {
  file="$root$1"
  if [ -f "$file" ]; then now="$(cksum < "$file")"; else now=none; fi
  if [ "$now" = "$3" ]; then
    cat > /dev/null
    echo "$file is as it should be"
  elif [ "$now" != "$2" ]; then
    cat > /dev/null
    echo "$file is not as it was when this script was printed: left as it is. Print the script again (pkgproxyctl setup dnf)" >&2
    failed=1
  else
    cp -p "$file" "$file.pkgproxy-new"
    if [ "$4" = unended ]; then
      awk '{ if (NR > 1) printf "\n"; printf "%s", $0 }' > "$file.pkgproxy-new"
    else
      cat > "$file.pkgproxy-new"
    fi
    mv "$file.pkgproxy-new" "$file"
    echo "$5$file$6"
  fi
}
"#;

/// A script writing `puts` on the machine `found` describes, saying
/// `what` it does, then each file left as it is and why (`unread`), and
/// `told`.
pub fn script(what: &str, found: &DnfFiles, puts: &[Put<'_>], unread: &[(&str, Unread)], told: &str) -> String {
    let mut text = opening(what, told);
    text.push_str(PUT);
    for said in &found.told {
        text.push_str(&format!("echo {} >&2\n", sh_quoted(said)));
    }
    if found.files.is_empty() {
        let folders = if found.folders.is_empty() { "none".to_owned() } else { found.folders.join(", ") };
        text.push_str(&format!("echo {}\n", sh_quoted(&format!("no repository file of dnf's (folders: {folders})"))));
    }
    for put in puts {
        text.push_str(&put_lines(put));
    }
    for (shown, why) in unread {
        let said = format!("{shown} {why}: left as it is");
        text.push_str(&format!("printf '%s%s\\n' \"$root\" {} >&2\nfailed=1\n", sh_quoted(&said)));
    }
    if !told.is_empty() {
        let end = delimiter(told);
        text.push_str(&format!("cat <<'{end}'\n{told}{end}\n"));
    }
    text.push_str("exit \"$failed\"\n");
    text
}

/// The script's opening: what it does, what else the user should know
/// (`note`'s lines, as comments), and the root it works under.
fn opening(what: &str, note: &str) -> String {
    let mut text = format!(
        "#!/bin/sh\n# {what} (run again, it changes nothing);\n# pkgproxyctl setup dnf --apply does the same, --undo takes it back. Only repositories at a\n# built-in repository's URL change: each gets pkgproxy's baseurl, its own baseurl, metalink and\n# mirrorlist lines commented out, pkgproxy's lines marked, every other line left byte for byte.\n# PKGPROXY_SETUP_ROOT=DIR works under DIR instead of /.\n"
    );
    for line in note.lines() {
        text.push_str(&format!("# {line}\n"));
    }
    text.push_str("set -eu\nroot=\"${PKGPROXY_SETUP_ROOT:-}\"\n");
    text
}

/// The script's call of `put` for `put`, its text as a here-document.
fn put_lines(put: &Put<'_>) -> String {
    let end = delimiter(put.to);
    let (ending, newline) = if put.to.is_empty() || put.to.ends_with('\n') { ("ended", "") } else { ("unended", "\n") };
    format!(
        "put {} '{}' '{}' {ending} {} {} <<'{end}'\n{}{newline}{end}\n",
        sh_quoted(put.shown),
        cksum(put.from.as_bytes()),
        cksum(put.to.as_bytes()),
        sh_quoted(put.done.0),
        sh_quoted(&put.done.1),
        put.to
    )
}

/// A here-document's delimiter no line of `text` is.
fn delimiter(text: &str) -> String {
    let taken = |end: &str| text.lines().any(|line| line == end);
    (0..).map(|n| format!("PKGPROXY_EOF{n}")).find(|end| !taken(end)).unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::{delimiter, put_lines, Put};

    #[test]
    fn a_text_is_put_as_a_here_document_its_delimiter_none_of_its_lines() {
        let done = ("wrote ", ": it's done".to_owned());
        let put = Put { shown: "/etc/yum.repos.d/a b.repo", from: "[a]\n", to: "[a]\nk=1", done };
        assert_eq!(
            put_lines(&put),
            "put '/etc/yum.repos.d/a b.repo' '1575889341 4' '2894497567 7' unended 'wrote ' ': it'\\''s done' <<'PKGPROXY_EOF0'\n[a]\nk=1\nPKGPROXY_EOF0\n"
        );
        assert_eq!(delimiter("[a]\nPKGPROXY_EOF0\nPKGPROXY_EOF1\n"), "PKGPROXY_EOF2");
    }
}
