//! A client set up by a block of lines pkgproxy keeps in a file of the
//! user's own (cargo's `config.toml`, `.npmrc`, `.yarnrc.yml`, `pip.conf`,
//! `uv.toml`, Maven's `settings.xml`): the block between marker lines
//! (comments of the file's format) is pkgproxy's, put at the end (or, in a
//! `pip.conf`, at the end of the section its options are of; in a
//! `settings.xml`, in its `<mirrors>`), replaced whole and taken out byte
//! for byte; the rest of the file is never touched. What the block holds
//! may depend on the file (Maven's mirrors of the repositories it
//! declares). The block goes in only where it [`Fit`]s, decided on
//! the file as its client reads it; elsewhere the file is left as it is,
//! and what to add by hand is said. A client reading both a user's file
//! and the machine's has a file for each [`Scope`].
//!
//! The printed script is run by `sh`, which can parse none of these
//! formats, so `pkgproxyctl setup` decides when it prints it, reading the
//! file on the machine it runs on (`pkgproxyctl setup cargo | sh`). The
//! script carries the decision with the POSIX `cksum` of the lines it was
//! made on (the file outside pkgproxy's block), and computes the same of
//! the file when it runs: the block goes in only among those very lines,
//! after the line it was decided to follow, the lines having been read,
//! found not to set what the block sets, and found to read as the block
//! and they say once it is there; or into none (no file, or only
//! pkgproxy's block), where the block alone is the file. A file edited
//! since, or another machine's, is left as it is, and the user told to
//! print the script again. The script thus writes exactly the text
//! pkgproxyctl checked, without a parser of its own, and never a file its
//! client cannot read.

use std::path::{Path, PathBuf};

use anyhow::Context;

use serde_json::Value;

use super::cksum::cksum;
use super::fit::{Fit, Place, Placed, Reading};
use super::reading::Format;
use super::{preamble, Action, Procedure, Scope, Setup, Target};

/// A client set up by a block of pkgproxy's in a file of the user's own.
pub struct MarkedBlock {
    /// The file, in each place the client reads one, its default first.
    pub files: &'static [BlockFile],
    /// The block's lines for pkgproxy at `http://HOST:PORT`, in the file
    /// as its client reads it (`Value::Null` when there is none, or it
    /// cannot be read).
    pub block: fn(&str, &Value) -> String,
    /// How the client reads the file, what in it sets what the block
    /// sets, and where the block goes.
    pub reading: Reading,
    /// What else the user is told of the setup for pkgproxy at
    /// `http://HOST:PORT` in the file as its client reads it: comment
    /// lines of the script, printed by `--apply`.
    pub note: fn(&str, &Value) -> String,
}

/// A client's file, in one of its places.
pub struct BlockFile {
    /// Whose it is.
    pub scope: Scope,
    /// The file, as a shell expression (`${CARGO_HOME:-$HOME/.cargo}/config.toml`).
    pub sh: &'static str,
    /// The file, found as that expression finds it.
    pub path: fn() -> anyhow::Result<PathBuf>,
}

/// A file's lines outside pkgproxy's block, as the script's `awk` prints
/// them (a last line gets its newline): what the decision is made on.
type Outside = Vec<u8>;

/// What a setup decided for a file's lines outside the block.
struct Decided {
    /// Whether the block goes in.
    fit: Fit,
    /// Where it goes, or would.
    placed: Placed,
}

impl MarkedBlock {
    /// The client's file in `scope`.
    fn file(&self, scope: Scope) -> anyhow::Result<&BlockFile> {
        self.files.iter().find(|file| file.scope == scope).context("the client has no file there")
    }

    /// The file in `scope` under `target`.
    fn path(&self, scope: Scope, target: &Target) -> anyhow::Result<PathBuf> {
        Ok(target.path(&(self.file(scope)?.path)()?.to_string_lossy()))
    }

    /// The file whose lines outside the block are `outside` as its client
    /// reads it; `Value::Null` when it cannot.
    fn read(&self, outside: &[u8]) -> Value {
        let text = std::str::from_utf8(outside).ok();
        text.and_then(|text| self.reading.format.read(text).ok()).unwrap_or(Value::Null)
    }

    /// What the file whose lines outside the block are `outside` makes of
    /// the block for pkgproxy at `base`, and where it would go.
    fn decided(&self, client: &str, outside: &[u8], base: &str) -> Decided {
        let settings = (self.block)(base, &self.read(outside));
        match std::str::from_utf8(outside) {
            Ok(outside) => Decided {
                fit: self.reading.fit(client, outside, &settings),
                placed: self.reading.placed(outside, &settings),
            },
            Err(_) => Decided {
                fit: Fit::Unreadable("it is not UTF-8 text".to_owned()),
                placed: Placed { at: outside.len(), lines: self.reading.alone(&settings), within: None },
            },
        }
    }

    /// What to add by hand to a file not read (another than the one the
    /// script was printed for, or one that could not be read), said after
    /// "Add this": the block as a file of its own, where it goes in one.
    fn by_hand_unread(&self, base: &str) -> (String, String) {
        let lines = self.reading.alone(&(self.block)(base, &Value::Null));
        let into = match self.reading.place {
            Place::PipSection(name) => format!("to it by hand (the options into its own [{name}], if it has one)"),
            Place::XmlList { list, .. } => {
                format!("to it by hand (what its <{list}> holds into its own <{list}>, if it has one)")
            }
            Place::End => "to it by hand".to_owned(),
        };
        (lines, into)
    }

    /// What the user is told when the block does not go in: why, then
    /// where to add what by hand.
    fn refusal(why: &str, decided: &Decided) -> String {
        let into = decided.placed.within.as_deref().map_or("to it".to_owned(), |section| format!("to {section}"));
        format!("{why}: left as it is. Add this {into} by hand{}:", decided.fit.with_their_own())
    }

    fn script(&self, client: &str, base: &str, scope: Scope, target: &Target) -> anyhow::Result<String> {
        let file = self.file(scope)?;
        let format = self.reading.format;
        let found = outside_of(&self.path(scope, target)?, format);
        let cases = self.cases(client, base, &found);
        let read = found.as_deref().map_or(Value::Null, |outside| self.read(outside));
        let mut text = preamble(client, &format!("Puts pkgproxy's block in {}", file.sh), &(self.note)(base, &read));
        text.push_str(&format!(
            "file=\"$root{file}\"\nwithout_block() {{ {awk} \"$file\"; }}\noutside() {{ if [ -f \"$file\" ]; then without_block; fi; }}\nby_hand() {{\n  cat >&2\n  exit 1\n}}\n# The file's lines outside pkgproxy's block, by their POSIX cksum. pkgproxyctl setup read them\n# as {format} when it printed this script: the block goes in after the line of those it found\n# it fits (at), or into none; any others are left as they are.\ncase \"$(outside | cksum)\" in\n{cases}esac\nmkdir -p \"$(dirname \"$file\")\"\n{{ outside | awk -v at=\"$at\" 'NR <= at'; block; outside | awk -v at=\"$at\" 'NR > at'; }} > \"$file.pkgproxy-new\"\nif [ -f \"$file\" ] && cmp -s \"$file.pkgproxy-new\" \"$file\"; then\n  rm -f \"$file.pkgproxy-new\"\n  echo \"$file is as it should be\"\nelse\n  mv \"$file.pkgproxy-new\" \"$file\"\n  echo \"wrote pkgproxy's block in $file\"\nfi\n",
            file = file.sh,
            awk = without_block_awk(format),
            format = format.as_str(),
        ));
        Ok(text)
    }

    /// The script's `case` on the cksum of the file's lines outside the
    /// block: for those found to fit (`found`, as the file is now, and
    /// none), the line the block goes after and the block; for any
    /// others, refused, why and what to add by hand.
    fn cases(&self, client: &str, base: &str, found: &Result<Outside, String>) -> String {
        let mut arms = vec![(b"".to_vec(), self.decided(client, b"", base))];
        if let Ok(outside) = found {
            if !outside.is_empty() {
                arms.push((outside.clone(), self.decided(client, outside, base)));
            }
        }
        let by_hand = |lines: &str, told: &str| {
            format!("    printf '%s%s\\n' \"$file\" {} >&2\n    by_hand <<'EOF'\n{lines}EOF\n    ;;\n", sh_quoted(told))
        };
        let mut cases = String::new();
        for (outside, decided) in &arms {
            cases.push_str(&format!("  '{}')\n", cksum(outside)));
            match decided.fit.why(client) {
                None => {
                    let at = outside[..decided.placed.at].iter().filter(|byte| **byte == b'\n').count();
                    cases.push_str(&format!(
                        "    at={at}\n    block() {{\n      cat <<'EOF'\n{}EOF\n    }}\n    ;;\n",
                        self.reading.format.marked(&decided.placed.lines)
                    ));
                }
                Some(why) => {
                    cases.push_str(&by_hand(&decided.placed.lines, &format!(" {}", Self::refusal(&why, decided))))
                }
            }
        }
        let (lines, into) = self.by_hand_unread(base);
        let otherwise = match found {
            Ok(_) => format!(" is not as it was when this script was printed: left as it is. Print the script again (pkgproxyctl setup {client}), or add this {into}:"),
            Err(why) => format!(" could not be read when this script was printed ({why}): left as it is. Add this {into}:"),
        };
        cases.push_str("  *)\n");
        cases.push_str(&by_hand(&lines, &otherwise));
        cases
    }

    fn undo_script(&self, client: &str, scope: Scope) -> anyhow::Result<String> {
        let file = self.file(scope)?;
        let format = self.reading.format;
        let mut text = preamble(client, &format!("Takes pkgproxy's block out of {}", file.sh), "");
        text.push_str(&format!(
            "file=\"$root{file}\"\nif [ ! -f \"$file\" ] || ! grep -q '^{begin}' \"$file\"; then\n  echo \"$file holds no block of pkgproxy's\"\n  exit 0\nfi\n{awk} \"$file\" > \"$file.pkgproxy-new\"\nif [ -s \"$file.pkgproxy-new\" ] && grep -q '[^[:space:]]' \"$file.pkgproxy-new\"; then\n  mv \"$file.pkgproxy-new\" \"$file\"\n  echo \"took pkgproxy's block out of $file\"\nelse\n  rm -f \"$file.pkgproxy-new\" \"$file\"\n  echo \"removed $file: it held pkgproxy's block only\"\nfi\n",
            file = file.sh,
            begin = format.block_begin(),
            awk = without_block_awk(format),
        ));
        Ok(text)
    }

    fn apply(&self, client: &str, base: &str, scope: Scope, target: &Target) -> anyhow::Result<()> {
        let path = self.path(scope, target)?;
        let existing = read_if_there(&path).map_err(|why| {
            let (lines, into) = self.by_hand_unread(base);
            anyhow::anyhow!("{} could not be read ({why}): left as it is. Add this {into}:\n{lines}", path.display())
        })?;
        let format = self.reading.format;
        let outside = existing.as_deref().map(|text| without_block(text, format)).unwrap_or_default();
        let decided = self.decided(client, &outside, base);
        if let Some(why) = decided.fit.why(client) {
            anyhow::bail!("{} {}\n{}", path.display(), Self::refusal(&why, &decided), decided.placed.lines);
        }
        let content = self.reading.joined(&String::from_utf8_lossy(&outside), &decided.placed);
        if existing.as_deref() == Some(content.as_bytes()) {
            println!("{} is as it should be", path.display());
        } else {
            let dir = path.parent().context("the file's folder")?;
            std::fs::create_dir_all(dir).with_context(|| format!("cannot create {}", dir.display()))?;
            std::fs::write(&path, content).with_context(|| format!("cannot write {}", path.display()))?;
            println!("wrote pkgproxy's block in {}", path.display());
        }
        print!("{}", (self.note)(base, &self.read(&outside)));
        Ok(())
    }

    fn undo(&self, scope: Scope, target: &Target) -> anyhow::Result<()> {
        let path = self.path(scope, target)?;
        let existing = read_if_there(&path).map_err(|why| anyhow::anyhow!("cannot read {}: {why}", path.display()))?;
        let Some(existing) = existing else {
            println!("{} is not there", path.display());
            return Ok(());
        };
        let kept = without_block_exactly(&existing, self.reading.format);
        if kept == existing {
            println!("{} holds no block of pkgproxy's", path.display());
            return Ok(());
        }
        if String::from_utf8_lossy(&kept).trim().is_empty() {
            std::fs::remove_file(&path).with_context(|| format!("cannot remove {}", path.display()))?;
            println!("removed {}: it held pkgproxy's block only", path.display());
        } else {
            std::fs::write(&path, kept).with_context(|| format!("cannot write {}", path.display()))?;
            println!("took pkgproxy's block out of {}", path.display());
        }
        Ok(())
    }
}

impl Procedure for MarkedBlock {
    fn run(&self, client: &str, action: Action, setup: &Setup<'_>) -> anyhow::Result<()> {
        match action {
            Action::Print => print!("{}", self.script(client, setup.base, setup.scope, setup.target)?),
            Action::PrintUndo => print!("{}", self.undo_script(client, setup.scope)?),
            Action::Apply => self.apply(client, setup.base, setup.scope, setup.target)?,
            Action::Undo => self.undo(setup.scope, setup.target)?,
        }
        Ok(())
    }

    fn scopes(&self) -> Vec<Scope> {
        self.files.iter().map(|file| file.scope).collect()
    }
}

/// The script's `awk` printing the lines of a file in `format` outside
/// pkgproxy's block, as [`without_block`] keeps them.
fn without_block_awk(format: Format) -> String {
    format!(
        "awk '/^{}/ {{ skip = 1 }} !skip {{ print }} /^{}/ {{ skip = 0 }}'",
        format.block_begin(),
        format.block_end()
    )
}

/// `text`, in `format`, without pkgproxy's block, byte for byte.
fn without_block_exactly(text: &[u8], format: Format) -> Vec<u8> {
    let (begin, end) = (format.block_begin(), format.block_end());
    let mut kept = Vec::new();
    let mut inside = false;
    for line in text.split_inclusive(|byte| *byte == b'\n') {
        if line.starts_with(begin.as_bytes()) {
            inside = true;
        }
        if !inside {
            kept.extend_from_slice(line);
        }
        if line.starts_with(end.as_bytes()) {
            inside = false;
        }
    }
    kept
}

/// `text`'s lines outside pkgproxy's block as the script's `awk` prints
/// them: a last line gets its newline.
fn without_block(text: &[u8], format: Format) -> Outside {
    let mut kept = without_block_exactly(text, format);
    if kept.last().is_some_and(|last| *last != b'\n') {
        kept.push(b'\n');
    }
    kept
}

/// The lines outside pkgproxy's block of the file in `format` at `path`
/// (none when there is no file), or why it cannot be read.
fn outside_of(path: &Path, format: Format) -> Result<Outside, String> {
    Ok(read_if_there(path)?.as_deref().map(|text| without_block(text, format)).unwrap_or_default())
}

/// The file at `path`, or `None` when there is none; why it cannot be
/// read.
fn read_if_there(path: &Path) -> Result<Option<Vec<u8>>, String> {
    match std::fs::read(path) {
        Ok(bytes) => Ok(Some(bytes)),
        Err(error) if error.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(error) => Err(error.to_string()),
    }
}

/// `text` as one single-quoted shell word, on one line.
pub(crate) fn sh_quoted(text: &str) -> String {
    let line: String = text.chars().map(|c| if c.is_control() { ' ' } else { c }).collect();
    format!("'{}'", line.replace('\'', "'\\''"))
}
