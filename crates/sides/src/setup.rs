//! How a side's clients are pointed at pkgproxy: what `pkgproxyctl setup
//! CLIENT` prints, writes (`--apply`) and takes back (`--undo`). Each side
//! lists its clients ([`SetupClient`]) in the list of sides; most are a
//! file pkgproxy writes whole ([`WholeFile`]), some a block of pkgproxy's
//! in a file of the user's own ([`MarkedBlock`]: cargo, npm, yarn, pip,
//! uv), the others carry their own [`Procedure`] (dockerd's `daemon.json`
//! merged into, LXD's remotes and profiles set through `lxc`, dnf's
//! repository files edited line by line).
//!
//! A client whose configuration is both the user's and the machine's is set
//! up in either ([`Scope`]: `--user`, `--system`), by default where it
//! always was; asked for a place the client does not read, `setup` says so
//! and does nothing. A file pkgproxy writes whole is the machine's
//! ([`WholeFile`]), or the user's ([`UsersFile`]: Gradle's init script).
//!
//! A file pkgproxy writes whole carries a marker line: `--undo` removes
//! only such a file, and neither `--apply` nor the printed script ever
//! writes over a file without it (what to add by hand is said instead, and
//! it carries no marker: an undo never takes an admin's file for
//! pkgproxy's). A service is restarted only when its file changed, and only
//! if it runs (a stopped service stays stopped). `PKGPROXY_SETUP_ROOT=DIR`
//! makes every path (script, `--apply`, `--undo`) work under DIR instead
//! of `/`, and restart nothing.

mod block;
mod cksum;
mod dnf_ini;
mod fit;
mod npmrc;
mod pip_conf;
mod reading;
mod settings_xml;

use std::path::{Path, PathBuf};
use std::process::Command;

use anyhow::Context;

pub(crate) use block::sh_quoted;
pub use block::{BlockFile, MarkedBlock};
pub use cksum::cksum;
pub use dnf_ini::{Ini, IniError, IniFault, Item, Section};
pub use fit::{Fit, Own, Place, Reading};
pub use reading::{first_held, Format};

/// The line marking a file as pkgproxy's.
pub const MARKER: &str = "Written by pkgproxyctl setup";

/// A client `pkgproxyctl setup NAME` points at pkgproxy.
pub struct SetupClient {
    /// Its name on the command line (`apt`, `docker`, `lxd-remote`).
    pub name: &'static str,
    /// What it is, for `--help`.
    pub about: &'static str,
    /// How it is set up.
    pub procedure: &'static dyn Procedure,
}

/// What `setup` was asked to do.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Action {
    /// Show the setup (a script, or the commands).
    Print,
    /// Show what takes it back.
    PrintUndo,
    /// Do it.
    Apply,
    /// Take it back.
    Undo,
}

/// Whose configuration a setup changes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Scope {
    /// The user's who runs it (`--user`).
    User,
    /// The machine's, every user's (`--system`).
    System,
}

impl Scope {
    /// How the user is told of it: "per user", "machine-wide".
    pub fn as_str(self) -> &'static str {
        match self {
            Scope::User => "per user",
            Scope::System => "machine-wide",
        }
    }

    /// The flag asking for it.
    pub fn flag(self) -> &'static str {
        match self {
            Scope::User => "--user",
            Scope::System => "--system",
        }
    }

    /// The place `client`, set up by `procedure`, is set up in when
    /// `asked` (or nothing, its default); refused, saying where its setup
    /// goes, when the client has no such place.
    pub fn chosen(asked: Option<Scope>, client: &str, procedure: &dyn Procedure) -> anyhow::Result<Scope> {
        let scopes = procedure.scopes();
        let default = scopes.first().copied().unwrap_or(Scope::System);
        match asked {
            None => Ok(default),
            Some(asked) if scopes.contains(&asked) => Ok(asked),
            Some(asked) => anyhow::bail!("{}: {client} is set up {} only", asked.flag(), default.as_str()),
        }
    }
}

/// The pkgproxy a client is set up for, and where.
#[derive(Debug, Clone)]
pub struct Setup<'a> {
    /// `http://HOST:PORT`, as the client reaches pkgproxy.
    pub base: &'a str,
    /// The file system written under.
    pub target: &'a Target,
    /// Whose configuration, among the client's [`Procedure::scopes`].
    pub scope: Scope,
    /// The project set up, where a client has projects.
    pub project: Option<&'a str>,
    /// What pkgproxy says of itself, for a procedure that
    /// [`Procedure::wants_details`].
    pub details: Option<&'a Details>,
}

/// What a pkgproxy says of itself beyond its address.
#[derive(Debug, Clone, Default)]
pub struct Details {
    /// Its listener's certificate, PEM, for clients that pin it.
    pub certificate_pem: String,
    /// The names of the upstreams it mounts by name (LXD's remotes).
    pub remotes: Vec<String>,
}

/// How a client is set up.
pub trait Procedure: Sync {
    /// Does `action` for the client called `client`.
    fn run(&self, client: &str, action: Action, setup: &Setup<'_>) -> anyhow::Result<()>;

    /// What is done when no action is named: most print, those changing
    /// a user's own configuration through its tool (`lxc`) do it.
    fn unasked(&self) -> Action {
        Action::Print
    }

    /// Whose configuration the client's setup can change, its default
    /// first: most clients' is the machine's only.
    fn scopes(&self) -> Vec<Scope> {
        vec![Scope::System]
    }

    /// Whether it needs pkgproxy's [`Details`].
    fn wants_details(&self) -> bool {
        false
    }

    /// The host the client reaches pkgproxy at when none is given and
    /// pkgproxy's own address is not it (containers reach the host on
    /// their bridge).
    fn default_host(&self) -> Option<String> {
        None
    }
}

/// A client set up by one file pkgproxy writes whole, the machine's, for
/// pkgproxy at `http://HOST:PORT`.
pub struct WholeFile(pub fn(&str) -> FilePlan);

impl Procedure for WholeFile {
    fn run(&self, client: &str, action: Action, setup: &Setup<'_>) -> anyhow::Result<()> {
        (self.0)(setup.base).run(client, action, setup.target)
    }
}

/// A client set up by one file pkgproxy writes whole among the user's
/// own configuration (its plan [`FilePlan::found_by`] the user's
/// environment), for pkgproxy at `http://HOST:PORT`: per user only.
pub struct UsersFile(pub fn(&str) -> FilePlan);

impl Procedure for UsersFile {
    fn run(&self, client: &str, action: Action, setup: &Setup<'_>) -> anyhow::Result<()> {
        (self.0)(setup.base).run(client, action, setup.target)
    }

    fn scopes(&self) -> Vec<Scope> {
        vec![Scope::User]
    }
}

/// A file a client's setup writes, and what then makes the client read it.
pub struct FilePlan {
    /// Where, from the file system's root: a path, or a shell expression
    /// naming the file through the environment
    /// (`${GRADLE_USER_HOME:-$HOME/.gradle}/init.d/pkgproxy.gradle`).
    path: &'static str,
    /// How the file that expression names is found (`None`: `path` is
    /// the path).
    found: Option<fn() -> anyhow::Result<PathBuf>>,
    /// Its content: the marker line, then [`FilePlan::settings`].
    content: String,
    /// What makes the client read it once changed.
    restart: Restart,
    /// What else to tell the user.
    note: String,
}

impl FilePlan {
    /// The file at `path` holding `settings`, its marker line a comment
    /// opening with `comment` (`#`, `//`).
    pub fn new(path: &'static str, comment: &str, settings: &str) -> FilePlan {
        let content = format!("{comment} {MARKER}: downloads go through pkgproxy.\n{settings}");
        FilePlan { path, found: None, content, restart: Restart::NOTHING, note: String::new() }
    }

    /// The file `path`, a shell expression, names, found by `found` as
    /// that expression finds it.
    pub fn found_by(self, found: fn() -> anyhow::Result<PathBuf>) -> FilePlan {
        FilePlan { found: Some(found), ..self }
    }

    /// Does `action` for the client called `client`, under `target`.
    fn run(&self, client: &str, action: Action, target: &Target) -> anyhow::Result<()> {
        match action {
            Action::Print => print!("{}", self.script(client)),
            Action::PrintUndo => print!("{}", self.undo_script(client)),
            Action::Apply => self.apply(target)?,
            Action::Undo => self.undo(target)?,
        }
        Ok(())
    }

    /// The file under `target`.
    fn path_under(&self, target: &Target) -> anyhow::Result<PathBuf> {
        match self.found {
            Some(found) => Ok(target.path(&found()?.to_string_lossy())),
            None => Ok(target.path(self.path)),
        }
    }

    /// What makes the client read the file once it changed.
    pub fn restarting(self, restart: Restart) -> FilePlan {
        FilePlan { restart, ..self }
    }

    /// What else the user is told.
    pub fn noting(self, note: impl Into<String>) -> FilePlan {
        FilePlan { note: note.into(), ..self }
    }

    /// The file's content, its marker line first.
    pub fn content(&self) -> &str {
        &self.content
    }

    /// The content without its marker line: what an admin adds by hand to
    /// a file of their own.
    fn settings(&self) -> &str {
        self.content.split_once('\n').map_or("", |(_, rest)| rest)
    }

    /// The plan as a POSIX shell script to pipe to `sh` as root
    /// (`pkgproxyctl setup snap | sudo sh`): it writes the file whole unless
    /// a file that is not pkgproxy's is there, and restarts the client only
    /// when the file changed.
    fn script(&self, client: &str) -> String {
        let dir = self.path.rsplit_once('/').map_or("/", |(dir, _)| dir);
        let mut text = preamble(client, &format!("Writes {}", self.path), "");
        text.push_str(&format!(
            "file=\"$root{path}\"\nif [ -f \"$file\" ] && ! grep -q '{MARKER}' \"$file\"; then\n  echo \"$file is there and is not pkgproxy's: left as it is. Add this to it by hand:\" >&2\n  cat >&2 <<'EOF'\n{settings}EOF\n  exit 1\nfi\nmkdir -p \"$root{dir}\"\ncat > \"$file.pkgproxy-new\" <<'EOF'\n{content}EOF\nif cmp -s \"$file.pkgproxy-new\" \"$file\"; then\n  rm -f \"$file.pkgproxy-new\"\n  changed=0\nelse\n  mv \"$file.pkgproxy-new\" \"$file\"\n  changed=1\n  echo \"wrote $file\"\nfi\n",
            path = self.path,
            settings = self.settings(),
            content = self.content
        ));
        text.push_str(&restart_script(&self.restart));
        text.push_str(&self.note);
        text
    }

    /// The reverse of [`FilePlan::script`]: removes the file if pkgproxy
    /// wrote it.
    fn undo_script(&self, client: &str) -> String {
        let mut text = preamble(client, &format!("Removes {} if pkgproxyctl setup wrote it", self.path), "");
        text.push_str(&format!(
            "file=\"$root{path}\"\nchanged=0\nif [ -f \"$file\" ] && grep -q '{MARKER}' \"$file\"; then\n  rm -f \"$file\"\n  changed=1\n  echo \"removed $file\"\nelif [ -f \"$file\" ]; then\n  echo \"$file is not pkgproxy's: left as it is\" >&2\n  exit 1\nfi\n",
            path = self.path
        ));
        text.push_str(&restart_script(&self.restart));
        text
    }

    /// Writes the file under `target`, then, if it changed, makes the
    /// client read it.
    fn apply(&self, target: &Target) -> anyhow::Result<()> {
        let path = self.path_under(target)?;
        let existing = match std::fs::read_to_string(&path) {
            Ok(existing) => Some(existing),
            Err(error) if error.kind() == std::io::ErrorKind::NotFound => None,
            Err(error) => return Err(error).with_context(|| format!("cannot read {}", path.display())),
        };
        if let Some(existing) = &existing {
            anyhow::ensure!(
                existing.contains(MARKER),
                "{} is there and is not pkgproxy's: left as it is. Add this to it by hand:\n{}",
                path.display(),
                self.settings()
            );
        }
        if existing.as_deref() == Some(self.content.as_str()) {
            println!("{} is as it should be", path.display());
        } else {
            let dir = path.parent().context("the file's folder")?;
            std::fs::create_dir_all(dir).with_context(|| format!("cannot create {}", dir.display()))?;
            std::fs::write(&path, &self.content).with_context(|| format!("cannot write {}", path.display()))?;
            println!("wrote {}", path.display());
            target.restart(&self.restart)?;
        }
        print!("{}", self.note);
        Ok(())
    }

    /// Takes the file back under `target`.
    fn undo(&self, target: &Target) -> anyhow::Result<()> {
        let path = self.path_under(target)?;
        match std::fs::read_to_string(&path) {
            Ok(existing) if !existing.contains(MARKER) => {
                anyhow::bail!("{} is not pkgproxy's: left as it is", path.display())
            }
            Ok(_) => std::fs::remove_file(&path).with_context(|| format!("cannot remove {}", path.display()))?,
            Err(error) if error.kind() == std::io::ErrorKind::NotFound => {
                println!("{} was not there", path.display());
                return Ok(());
            }
            Err(error) => return Err(error).with_context(|| format!("cannot read {}", path.display())),
        }
        println!("removed {}", path.display());
        target.restart(&self.restart)
    }
}

/// The script's opening: what it does, what else the user should know
/// (`note`'s lines, as comments), and the root it works under.
pub fn preamble(client: &str, what: &str, note: &str) -> String {
    let mut text = format!(
        "#!/bin/sh\n# {what} (run again, it changes nothing);\n# pkgproxyctl setup {client} --apply does the same, --undo takes it back. A file that is\n# not pkgproxy's is never written over. PKGPROXY_SETUP_ROOT=DIR works under DIR instead of /,\n# and restarts nothing.\n"
    );
    for line in note.lines() {
        text.push_str(&format!("# {line}\n"));
    }
    text.push_str("set -eu\nroot=\"${PKGPROXY_SETUP_ROOT:-}\"\n");
    text
}

/// The script's lines restarting what reads the file once `changed`.
pub fn restart_script(restart: &Restart) -> String {
    if restart.is_nothing() {
        return String::new();
    }
    let mut text = "if [ \"$changed\" = 1 ]; then\n  if [ -z \"$root\" ]; then\n".to_string();
    text.push_str(&restart.script("    "));
    text.push_str(&format!(
        "  else\n    echo \"under $root: restarting nothing ({})\"\n  fi\nfi\n",
        restart.units.join(", ")
    ));
    text
}

/// The services that read a setup's file, restarted when it changed.
#[derive(Debug, Clone, Copy)]
pub struct Restart {
    /// Whether systemd reads the file itself (a unit's drop-in):
    /// `daemon-reload` first.
    pub daemon_reload: bool,
    /// The units to restart, each only if it runs (a node runs one of
    /// k3s's server and agent).
    pub units: &'static [&'static str],
}

impl Restart {
    /// Nothing reads the file but the client, when it next runs.
    pub const NOTHING: Restart = Restart { daemon_reload: false, units: &[] };

    fn is_nothing(&self) -> bool {
        !self.daemon_reload && self.units.is_empty()
    }

    /// The shell lines doing it (as root, on the real system).
    fn script(&self, indent: &str) -> String {
        let mut text = String::new();
        if self.daemon_reload {
            text.push_str(&format!(
                "{indent}systemctl daemon-reload
"
            ));
        }
        for unit in self.units {
            text.push_str(&format!(
                "{indent}if systemctl is-active --quiet {unit}; then systemctl try-restart {unit}; echo \"restarted {unit}\"; fi\n"
            ));
        }
        text
    }
}

/// Where a setup is written: the file system's root, or the folder
/// standing for it (`PKGPROXY_SETUP_ROOT`), where nothing is restarted.
#[derive(Debug, Clone)]
pub struct Target {
    /// The root.
    pub root: PathBuf,
    /// Whether services are restarted (the real root, and not asked not to).
    pub restarts: bool,
}

impl Target {
    /// The root `PKGPROXY_SETUP_ROOT` names, else `root`; restarting only
    /// on the real root, unless `no_restart`.
    pub fn new(root: &Path, no_restart: bool) -> Target {
        let root = std::env::var_os("PKGPROXY_SETUP_ROOT")
            .filter(|value| !value.is_empty())
            .map_or_else(|| root.to_path_buf(), PathBuf::from);
        let restarts = !no_restart && root == Path::new("/");
        Target { root, restarts }
    }

    /// `path`, from the file system's root, under the root.
    pub fn path(&self, path: &str) -> PathBuf {
        self.root.join(path.trim_start_matches('/'))
    }

    /// Restarts what `restart` names, if it runs, or says it does not.
    pub fn restart(&self, restart: &Restart) -> anyhow::Result<()> {
        if restart.is_nothing() {
            return Ok(());
        }
        if !self.restarts {
            println!("under {}: restarting nothing ({})", self.root.display(), restart.units.join(", "));
            return Ok(());
        }
        if restart.daemon_reload {
            run(&["systemctl", "daemon-reload"])?;
        }
        let mut restarted = false;
        for unit in restart.units {
            let runs = Command::new("systemctl").args(["is-active", "--quiet", unit]).status();
            if runs.is_ok_and(|status| status.success()) {
                run(&["systemctl", "try-restart", unit])?;
                restarted = true;
            }
        }
        if !restarted {
            println!("{} not running: read when it starts", restart.units.join(", "));
        }
        Ok(())
    }
}

/// Runs `command`, failing when it does.
pub fn run(command: &[&str]) -> anyhow::Result<()> {
    let status =
        Command::new(command[0]).args(&command[1..]).status().with_context(|| format!("cannot run {}", command[0]))?;
    anyhow::ensure!(status.success(), "{} failed: {status}", command.join(" "));
    println!("ran {}", command.join(" "));
    Ok(())
}
