//! One vocabulary in every text people read: each list of what pkgproxy
//! serves names every side (checked against the sides' own list, so a new
//! side left out of one text fails here), a flag is spelt with two dashes
//! (`--addr`; the original's `-addr` is taken, not printed), and going back
//! online is `online`, the word `pkgproxyctl offline` takes.

use std::path::{Path, PathBuf};
use std::process::Command;

use pkgproxy_sides::route::{Mount, ROUTES};
use pkgproxy_sides::SideId;

use crate::common::PKGPROXY;

const PKGPROXYCTL: &str = env!("CARGO_BIN_EXE_pkgproxyctl");

/// The repository's root.
fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn read(path: &str) -> String {
    std::fs::read_to_string(repo().join(path)).unwrap_or_else(|error| panic!("{path}: {error}"))
}

/// What `program ARGS` prints on stdout.
fn printed(program: &str, args: &[&str]) -> String {
    let output = Command::new(program).args(args).output().unwrap();
    assert!(output.status.success(), "{program} {args:?}: {}", String::from_utf8_lossy(&output.stderr));
    String::from_utf8(output.stdout).unwrap()
}

/// A manual page as its reader sees the words: roff's `\-` is a dash.
fn manual(program: &str) -> String {
    printed(PKGPROXYCTL, &["manpage", program]).replace("\\-", "-").replace("\\*(Aq", "'").replace("\\e", "\\")
}

/// The lines of `text` from `start` to the first empty line.
fn paragraph<'a>(text: &'a str, start: &str) -> &'a str {
    let at = text.find(start).unwrap_or_else(|| panic!("no {start:?} in {text}"));
    let rest = &text[at..];
    &rest[..rest.find("\n\n").unwrap_or(rest.len())]
}

/// A manual page's section `title`, up to the next.
fn section<'a>(man: &'a str, title: &str) -> &'a str {
    let start = format!(".SH {title}\n");
    let at = man.find(&start).unwrap_or_else(|| panic!("no section {title} in {man}")) + start.len();
    let rest = &man[at..];
    &rest[..rest.find("\n.SH ").unwrap_or(rest.len())]
}

/// Whether `text` has `word` as a word of its own (not inside another),
/// whatever the case and however the lines are broken (a TOML string's
/// `\` at a line's end too).
fn names(text: &str, word: &str) -> bool {
    let text = text.replace("\\\n", "\n");
    let text = text.split_whitespace().collect::<Vec<_>>().join(" ").to_lowercase();
    let word = word.to_lowercase();
    let apart = |c: Option<char>| c.is_none_or(|c| !c.is_alphanumeric());
    text.match_indices(&word)
        .any(|(at, _)| apart(text[..at].chars().next_back()) && apart(text[at + word.len()..].chars().next()))
}

/// The sides that ship (a test tree's toy side names no clients).
fn shipped() -> impl Iterator<Item = SideId> {
    SideId::ALL.iter().copied().filter(|side| !side.clients().is_empty())
}

/// The sides a long list (a sentence, a help text) leaves out: every
/// client of every side is named.
fn left_out_of_long(text: &str) -> Vec<&'static str> {
    shipped().flat_map(|side| side.clients()).copied().filter(|client| !names(text, client)).collect()
}

/// The sides a short list (a one-line description) leaves out.
fn left_out_of_short(text: &str) -> Vec<&'static str> {
    shipped().map(SideId::short_name).filter(|name| !names(text, name)).collect()
}

#[test]
fn every_list_of_what_pkgproxy_serves_names_every_side() {
    let short_help = printed(PKGPROXY, &["-h"]);
    let long_help = printed(PKGPROXY, &["--help"]);
    let man = manual("pkgproxy");
    let readme = read("README.md");
    let cargo_toml = read("crates/cli/Cargo.toml");
    let unit = read("dist/systemd/pkgproxy.service");
    let snap = read("snap/snapcraft.yaml");
    let long = [
        ("pkgproxy -h", paragraph(&short_help, "A caching proxy")),
        ("pkgproxy --help", paragraph(&long_help, "A caching proxy")),
        ("pkgproxy(8) NAME", section(&man, "NAME")),
        ("the README's opening", paragraph(&readme, "One caching proxy")),
        ("the package's extended-description", paragraph(&cargo_toml, "extended-description")),
        ("the snap's description", paragraph(&snap, "description:")),
    ];
    let short = [
        ("the unit's Description=", paragraph(&unit, "Description=")),
        ("the package's description", paragraph(&cargo_toml, "description = ")),
        ("the snap's summary", paragraph(&snap, "summary:")),
    ];
    let mut stale = Vec::new();
    for (text, said) in long {
        let left_out = left_out_of_long(said);
        if !left_out.is_empty() {
            stale.push(format!("{text} leaves out {left_out:?}: {said}"));
        }
    }
    for (text, said) in short {
        let left_out = left_out_of_short(said);
        if !left_out.is_empty() {
            stale.push(format!("{text} leaves out {left_out:?}: {said}"));
        }
    }
    // Where a text lists the clients `setup` takes, it lists them all.
    let clients: Vec<&str> = pkgproxy_sides::setup_clients().map(|client| client.name).collect();
    for (text, said) in [
        ("pkgproxy -h", paragraph(&short_help, "Point a client at it")),
        ("pkgproxy(8) CLIENTS", section(&man, "CLIENTS")),
    ] {
        let left_out: Vec<&&str> = clients.iter().filter(|client| !names(said, client)).collect();
        if !left_out.is_empty() {
            stale.push(format!("{text} leaves out the setup of {left_out:?}: {said}"));
        }
    }
    // explain takes a path of every side that has one.
    let explain = printed(PKGPROXYCTL, &["explain", "--help"]);
    for (mount, side) in ROUTES {
        if let Mount::Prefix(prefix) = mount {
            if !explain.contains(&format!("`{prefix}/...`")) {
                stale.push(format!("explain --help leaves out {side}'s paths ({prefix}/...): {explain}"));
            }
        }
    }
    assert!(stale.is_empty(), "{}", stale.join("\n\n"));
}

/// The long flags of both programs, as their help prints them.
fn long_flags() -> Vec<String> {
    let mut helps = vec![printed(PKGPROXY, &["--help"]), printed(PKGPROXYCTL, &["--help"])];
    for command in ["offline", "setup", "check", "warm", "export", "import", "explain", "info", "cache"] {
        helps.push(printed(PKGPROXYCTL, &[command, "--help"]));
    }
    let mut flags: Vec<String> = helps
        .iter()
        .flat_map(|help| help.split(|c: char| !(c.is_ascii_alphanumeric() || c == '-')))
        .filter_map(|word| word.strip_prefix("--"))
        .filter(|flag| flag.len() > 1 && flag.chars().next().is_some_and(|c| c.is_ascii_lowercase()))
        .map(str::to_owned)
        .collect();
    flags.sort();
    flags.dedup();
    flags
}

/// The places in `text` that spell one of `flags` with one dash.
fn one_dash(text: &str, flags: &[String]) -> Vec<String> {
    let mut found = Vec::new();
    for line in text.lines() {
        for flag in flags {
            let single = format!("-{flag}");
            let spelt = line.match_indices(&single).any(|(at, _)| {
                let before = line[..at].chars().next_back();
                let after = line[at + single.len()..].chars().next();
                before.is_none_or(|c| c.is_whitespace() || "`(['\"".contains(c))
                    && after.is_none_or(|c| !(c.is_alphanumeric() || c == '-'))
            });
            if spelt {
                found.push(line.trim().to_owned());
            }
        }
    }
    found
}

#[test]
fn texts_spell_flags_with_two_dashes_and_say_online_for_going_back_online() {
    let flags = long_flags();
    assert!(flags.iter().any(|flag| flag == "addr") && flags.iter().any(|flag| flag == "offline-mode"), "{flags:?}");
    let mut texts: Vec<(String, String)> = vec![
        ("pkgproxy --help".into(), printed(PKGPROXY, &["--help"])),
        ("pkgproxyctl --help".into(), printed(PKGPROXYCTL, &["--help"])),
        ("pkgproxyctl offline --help".into(), printed(PKGPROXYCTL, &["offline", "--help"])),
        ("pkgproxy(8)".into(), manual("pkgproxy")),
        ("pkgproxyctl(1)".into(), manual("pkgproxyctl")),
        ("pkgproxyctl's bash completion".into(), printed(PKGPROXYCTL, &["completions", "bash"])),
    ];
    for file in [
        "README.md",
        "dist/deb/README.Debian",
        "dist/systemd/pkgproxy.service",
        "dist/systemd/pkgproxy.socket",
        "snap/snapcraft.yaml",
    ] {
        texts.push((file.into(), read(file)));
    }
    for entry in std::fs::read_dir(repo().join("docs")).unwrap() {
        let path = entry.unwrap().path();
        if path.extension().is_some_and(|extension| extension == "md") {
            let name = format!("docs/{}", path.file_name().unwrap().to_string_lossy());
            texts.push((name, std::fs::read_to_string(&path).unwrap()));
        }
    }
    let mut wrong = Vec::new();
    for (name, text) in &texts {
        // The one sentence that says the original's spelling is taken.
        let text: String = text.lines().filter(|line| !line.contains("is taken too")).collect::<Vec<_>>().join("\n");
        for line in one_dash(&text, &flags) {
            wrong.push(format!("{name}: {line}"));
        }
        for never in ["offline never", "offline mode: never", "(never, offline", "never|offline"] {
            if text.contains(never) {
                wrong.push(format!("{name} says {never:?}, not online"));
            }
        }
    }
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
}

/// The words bash offers after `pkgproxyctl COMMAND` (`setup`,
/// `check__subcmd__rpm` for `check rpm`).
fn offered_after<'b>(bash: &'b str, command: &str) -> &'b str {
    let case = format!("        pkgproxyctl__subcmd__{command})\n");
    let at = bash.find(&case).unwrap_or_else(|| panic!("no completions for {command}:\n{bash}")) + case.len();
    bash[at..].lines().next().unwrap_or_default()
}

#[test]
fn completions_offer_neither_hidden_flags_nor_hidden_commands() {
    let bash = printed(PKGPROXYCTL, &["completions", "bash"]);
    for hidden in ["--no-restart", "--configure-hook", "manpage"] {
        assert!(!bash.contains(hidden), "{hidden} offered:\n{bash}");
    }
    // setup's --root is hidden; check rpm's, a repository's root, is not.
    assert!(!offered_after(&bash, "setup").contains("--root"), "{}", offered_after(&bash, "setup"));
    assert!(offered_after(&bash, "check__subcmd__rpm").contains("--root"), "{bash}");
    for offered in ["--apply", "--addr", "online", "store-overloaded", "explain"] {
        assert!(bash.contains(offered), "{offered} not offered");
    }
    assert!(!bash.contains(" never "), "the old word for online is taken, not offered");
}

/// A socket given in the environment (as a shell profile or the snap
/// sets it) is used, and usage lines do not show it as a flag one must give.
#[test]
fn a_socket_in_the_environment_is_used_and_not_shown_as_a_required_flag() {
    let dir = tempfile::tempdir().unwrap();
    let socket = dir.path().join("stats.sock");
    let output = Command::new(PKGPROXYCTL)
        .args(["cache", "rm"])
        .env("PKGPROXY_STATS_SOCKET_PATH", &socket)
        .env("PKGPROXY_ADMIN_SOCKET_PATH", dir.path().join("admin.sock"))
        .output()
        .unwrap();
    let told = String::from_utf8_lossy(&output.stderr);
    assert!(told.contains("Usage: pkgproxyctl cache rm <PATTERN>\n"), "{told}");
    assert!(!told.contains("--stats-socket-path <PATH>") && !told.contains("--admin-socket-path <PATH>"), "{told}");
    let output = Command::new(PKGPROXYCTL).arg("info").env("PKGPROXY_STATS_SOCKET_PATH", &socket).output().unwrap();
    let told = String::from_utf8_lossy(&output.stderr);
    assert!(!output.status.success() && told.contains(socket.to_str().unwrap()), "the variable's socket: {told}");
}
