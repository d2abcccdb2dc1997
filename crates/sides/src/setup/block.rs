//! A client set up by a block of lines pkgproxy keeps in a file of the
//! user's own (cargo's `config.toml`, `.npmrc`, `.yarnrc.yml`, `pip.conf`,
//! `uv.toml`): the block between marker lines is pkgproxy's, put at the
//! end, replaced whole and taken out byte for byte; the rest of the file is
//! never touched. The block goes in only where it [`Fit`]s, decided on
//! the file as its client reads it; elsewhere the file is left as it is,
//! and what to add by hand is said.
//!
//! The printed script is run by `sh`, which can parse none of these
//! formats, so `pkgproxyctl setup` decides when it prints it, reading the
//! file on the machine it runs on (`pkgproxyctl setup cargo | sh`). The
//! script carries the decision with the POSIX `cksum` of the lines it was
//! made on (the file outside pkgproxy's block), and computes the same of
//! the file when it runs: the block goes in only at the end of those very
//! lines, which were read, found not to set what the block sets, and found
//! to read as the block says once it is there; or of none (no file, or
//! only pkgproxy's block), where the block alone is the file. A file
//! edited since, or another machine's, is left as it is, and the user told
//! to print the script again. The script thus writes exactly the text
//! pkgproxyctl checked, without a parser of its own, and never a file its
//! client cannot read.

use std::path::{Path, PathBuf};

use anyhow::Context;

use super::cksum::cksum;
use super::fit::{joined, Fit, Reading};
use super::{preamble, Action, Procedure, Setup, Target, MARKER};

/// A client set up by a block of pkgproxy's in a file of the user's own.
pub struct MarkedBlock {
    /// The file, as a shell expression (`${CARGO_HOME:-$HOME/.cargo}/config.toml`).
    pub file_sh: &'static str,
    /// The file, found as that expression finds it.
    pub file: fn() -> anyhow::Result<PathBuf>,
    /// The block's lines for pkgproxy at `http://HOST:PORT`.
    pub block: fn(&str) -> String,
    /// How the client reads the file, and what in it sets what the block
    /// sets.
    pub reading: Reading,
}

/// The first line of pkgproxy's block.
const BLOCK_BEGIN: &str = "# >>> pkgproxy";
/// The last line of pkgproxy's block.
const BLOCK_END: &str = "# <<< pkgproxy";

/// A file's lines outside pkgproxy's block, as the script's `awk` prints
/// them (a last line gets its newline): what the decision is made on.
type Outside = Vec<u8>;

impl MarkedBlock {
    /// The block, with its marker lines.
    fn marked(&self, base: &str) -> String {
        format!("{BLOCK_BEGIN} ({MARKER}: downloads go through pkgproxy)\n{}{BLOCK_END}\n", (self.block)(base))
    }

    /// The file under `target`.
    fn path(&self, target: &Target) -> anyhow::Result<PathBuf> {
        Ok(target.path(&(self.file)()?.to_string_lossy()))
    }

    /// What a file whose lines outside the block are `outside` makes of
    /// the block `marked`.
    fn fit(&self, client: &str, outside: &[u8], marked: &str) -> Fit {
        match std::str::from_utf8(outside) {
            Ok(outside) => self.reading.fit(client, outside, marked),
            Err(_) => Fit::Unreadable("it is not UTF-8 text".to_owned()),
        }
    }

    /// What the user is told when the block does not go in: why, then what
    /// to add by hand.
    fn refusal(why: &str, replaces: bool) -> String {
        let instead = if replaces { ", in place of its own" } else { "" };
        format!("{why}: left as it is. Add this to it by hand{instead}:")
    }

    fn script(&self, client: &str, base: &str, target: &Target) -> anyhow::Result<String> {
        let marked = self.marked(base);
        let cases = self.cases(client, &marked, &outside_of(&self.path(target)?));
        let mut text = preamble(client, &format!("Puts pkgproxy's block in {}", self.file_sh));
        text.push_str(&format!(
            "file=\"$root{file}\"\nwithout_block() {{ awk '/^{BLOCK_BEGIN}/ {{ skip = 1 }} !skip {{ print }} /^{BLOCK_END}/ {{ skip = 0 }}' \"$file\"; }}\nby_hand() {{\n  cat >&2 <<'EOF'\n{settings}EOF\n  exit 1\n}}\n# The file's lines outside pkgproxy's block, by their POSIX cksum. pkgproxyctl setup read them\n# as {format} when it printed this script: the block goes in at the end of those it found it fits,\n# or of none; any others are left as they are.\noutside=$(if [ -f \"$file\" ]; then without_block; fi | cksum)\ncase \"$outside\" in\n{cases}esac\nmkdir -p \"$(dirname \"$file\")\"\n{{ if [ -f \"$file\" ]; then without_block; fi; cat <<'EOF'\n{marked}EOF\n}} > \"$file.pkgproxy-new\"\nif [ -f \"$file\" ] && cmp -s \"$file.pkgproxy-new\" \"$file\"; then\n  rm -f \"$file.pkgproxy-new\"\n  echo \"$file is as it should be\"\nelse\n  mv \"$file.pkgproxy-new\" \"$file\"\n  echo \"wrote pkgproxy's block in $file\"\nfi\n",
            file = self.file_sh,
            settings = (self.block)(base),
            format = self.reading.format.as_str(),
        ));
        Ok(text)
    }

    /// The script's `case` on the cksum of the file's lines outside the
    /// block: the block goes in after those found to fit (`found`, as the
    /// file is now, and none), and is refused, with why, after any others.
    fn cases(&self, client: &str, marked: &str, found: &Result<Outside, String>) -> String {
        let mut arms = vec![(cksum(b""), self.fit(client, b"", marked))];
        if let Ok(outside) = found {
            let sum = cksum(outside);
            if sum != arms[0].0 {
                arms.push((sum, self.fit(client, outside, marked)));
            }
        }
        let fitting: Vec<String> =
            arms.iter().filter(|(_, fit)| fit.fits()).map(|(sum, _)| format!("'{sum}'")).collect();
        let mut cases = String::new();
        if !fitting.is_empty() {
            cases.push_str(&format!("  {}) ;;\n", fitting.join("|")));
        }
        let refused = |pattern: &str, told: &str| {
            format!("  {pattern})\n    printf '%s%s\\n' \"$file\" {} >&2\n    by_hand ;;\n", sh_quoted(told))
        };
        for (sum, fit) in &arms {
            if let Some(why) = fit.why(client) {
                cases.push_str(&refused(
                    &format!("'{sum}'"),
                    &format!(" {}", Self::refusal(&why, fit.replaces_their_own())),
                ));
            }
        }
        let otherwise = match found {
            Ok(_) => format!(" is not as it was when this script was printed: left as it is. Print the script again (pkgproxyctl setup {client}), or add this to it by hand:"),
            Err(why) => format!(" could not be read when this script was printed ({why}): left as it is. Add this to it by hand:"),
        };
        cases.push_str(&refused("*", &otherwise));
        cases
    }

    fn undo_script(&self, client: &str) -> String {
        let mut text = preamble(client, &format!("Takes pkgproxy's block out of {}", self.file_sh));
        text.push_str(&format!(
            "file=\"$root{file}\"\nif [ ! -f \"$file\" ] || ! grep -q '^{BLOCK_BEGIN}' \"$file\"; then\n  echo \"$file holds no block of pkgproxy's\"\n  exit 0\nfi\nawk '/^{BLOCK_BEGIN}/ {{ skip = 1 }} !skip {{ print }} /^{BLOCK_END}/ {{ skip = 0 }}' \"$file\" > \"$file.pkgproxy-new\"\nif [ -s \"$file.pkgproxy-new\" ] && grep -q '[^[:space:]]' \"$file.pkgproxy-new\"; then\n  mv \"$file.pkgproxy-new\" \"$file\"\n  echo \"took pkgproxy's block out of $file\"\nelse\n  rm -f \"$file.pkgproxy-new\" \"$file\"\n  echo \"removed $file: it held pkgproxy's block only\"\nfi\n",
            file = self.file_sh,
        ));
        text
    }

    fn apply(&self, client: &str, base: &str, target: &Target) -> anyhow::Result<()> {
        let path = self.path(target)?;
        let marked = self.marked(base);
        let by_hand = |why: &str, replaces: bool| {
            anyhow::anyhow!("{} {}\n{}", path.display(), Self::refusal(why, replaces), (self.block)(base))
        };
        let existing = read_if_there(&path).map_err(|why| by_hand(&format!("could not be read ({why})"), false))?;
        let outside = existing.as_deref().map(without_block).unwrap_or_default();
        let fit = self.fit(client, &outside, &marked);
        if let Some(why) = fit.why(client) {
            return Err(by_hand(&why, fit.replaces_their_own()));
        }
        let content = joined(&String::from_utf8_lossy(&outside), &marked);
        if existing.as_deref() == Some(content.as_bytes()) {
            println!("{} is as it should be", path.display());
            return Ok(());
        }
        let dir = path.parent().context("the file's folder")?;
        std::fs::create_dir_all(dir).with_context(|| format!("cannot create {}", dir.display()))?;
        std::fs::write(&path, content).with_context(|| format!("cannot write {}", path.display()))?;
        println!("wrote pkgproxy's block in {}", path.display());
        Ok(())
    }

    fn undo(&self, target: &Target) -> anyhow::Result<()> {
        let path = self.path(target)?;
        let existing = read_if_there(&path).map_err(|why| anyhow::anyhow!("cannot read {}: {why}", path.display()))?;
        let Some(existing) = existing else {
            println!("{} is not there", path.display());
            return Ok(());
        };
        let kept = without_block_exactly(&existing);
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
            Action::Print => print!("{}", self.script(client, setup.base, setup.target)?),
            Action::PrintUndo => print!("{}", self.undo_script(client)),
            Action::Apply => self.apply(client, setup.base, setup.target)?,
            Action::Undo => self.undo(setup.target)?,
        }
        Ok(())
    }
}

/// `text` without pkgproxy's block, byte for byte.
fn without_block_exactly(text: &[u8]) -> Vec<u8> {
    let mut kept = Vec::new();
    let mut inside = false;
    for line in text.split_inclusive(|byte| *byte == b'\n') {
        if line.starts_with(BLOCK_BEGIN.as_bytes()) {
            inside = true;
        }
        if !inside {
            kept.extend_from_slice(line);
        }
        if line.starts_with(BLOCK_END.as_bytes()) {
            inside = false;
        }
    }
    kept
}

/// `text`'s lines outside pkgproxy's block as the script's `awk` prints
/// them: a last line gets its newline.
fn without_block(text: &[u8]) -> Outside {
    let mut kept = without_block_exactly(text);
    if kept.last().is_some_and(|last| *last != b'\n') {
        kept.push(b'\n');
    }
    kept
}

/// The lines outside pkgproxy's block of the file at `path` (none when
/// there is no file), or why it cannot be read.
fn outside_of(path: &Path) -> Result<Outside, String> {
    Ok(read_if_there(path)?.as_deref().map(without_block).unwrap_or_default())
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
fn sh_quoted(text: &str) -> String {
    let line: String = text.chars().map(|c| if c.is_control() { ' ' } else { c }).collect();
    format!("'{}'", line.replace('\'', "'\\''"))
}
