//! `pkgproxyctl export` and `import`: a bundle of what builds need, written
//! by one pkgproxy and taken in by another (one that never had network).
//! The daemons do the work (see the server's `bundle` module); this side
//! turns the build's inputs into requests as `check` does, and streams the
//! bundle between the daemon and the file.

use std::io::IsTerminal;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::Context;
use bytes::Bytes;
use clap::Parser;
use http_body::Frame;
use http_body_util::StreamBody;
use pkgproxy_control::{ControlClient, ExportRequest, Imported, EXPORT_PATH, IMPORT_PATH};
use tokio_util::io::ReaderStream;

use crate::needs::{self, Needs};

/// The words that start a group of `export`'s arguments.
const SIDES: [&str; 5] = ["apt", "go", "registry", "snap", "lxd"];

/// One group of `export`'s arguments, as `check` takes them.
#[derive(Debug, Parser)]
#[command(name = "export", no_binary_name = true)]
struct Group {
    #[command(subcommand)]
    needs: Needs,
}

/// `export`'s arguments: the groups, and the control sockets when they
/// were named among them (after the groups, where clap cannot see them).
#[derive(Debug, Default)]
pub struct Groups {
    /// What to bundle, group by group.
    pub needs: Vec<Needs>,
    /// `--stats-socket-path`.
    pub stats_socket: Option<PathBuf>,
    /// `--admin-socket-path`.
    pub admin_socket: Option<PathBuf>,
}

/// `export`'s arguments split into groups, each starting with a side's
/// name (`go go.sum registry alpine:3.20`), and read as `check` reads them.
pub fn groups(words: &[String]) -> anyhow::Result<Groups> {
    let mut found = Groups::default();
    let mut groups: Vec<Vec<&String>> = Vec::new();
    let mut words = words.iter();
    while let Some(word) = words.next() {
        if let Some((socket, value)) = socket_flag(word, &mut words)? {
            let slot = match socket {
                Socket::Stats => &mut found.stats_socket,
                Socket::Admin => &mut found.admin_socket,
            };
            *slot = Some(value);
            continue;
        }
        match (SIDES.contains(&word.as_str()), groups.last_mut()) {
            (false, Some(group)) => group.push(word),
            (false, None) => anyhow::bail!("{word:?}: say first which side it is for ({})", SIDES.join(", ")),
            (true, _) => groups.push(vec![word]),
        }
    }
    for group in groups {
        found.needs.push(Group::try_parse_from(group)?.needs);
    }
    Ok(found)
}

enum Socket {
    Stats,
    Admin,
}

/// `word` (and the word after it) as a control socket's flag.
fn socket_flag<'w>(
    word: &str,
    rest: &mut impl Iterator<Item = &'w String>,
) -> anyhow::Result<Option<(Socket, PathBuf)>> {
    let (name, inline) = match word.split_once('=') {
        Some((name, value)) => (name, Some(value.to_owned())),
        None => (word, None),
    };
    let socket = match name {
        "--stats-socket-path" => Socket::Stats,
        "--admin-socket-path" => Socket::Admin,
        _ => return Ok(None),
    };
    let value = match inline {
        Some(value) => value,
        None => rest.next().with_context(|| format!("{name} takes a path"))?.clone(),
    };
    Ok(Some((socket, PathBuf::from(value))))
}

/// Writes to `output` a bundle of what `groups` need (checked on the stats
/// socket), or of everything the cache holds with `all`, read from the
/// admin socket (a bundle carries the cache's content); refused (nothing
/// written) when not everything is held.
pub async fn export(
    stats: &ControlClient,
    admin: &ControlClient,
    groups: &[Needs],
    all: bool,
    output: &Path,
) -> anyhow::Result<ExitCode> {
    let (mut urls, mut records) = (Vec::new(), Vec::new());
    let mut seen = std::collections::HashSet::new();
    for group in groups {
        let checked = needs::checked(stats, group).await?;
        if !checked.ready() {
            checked.report(false)?;
            eprintln!("pkgproxyctl: not everything is held: warm it first (pkgproxyctl warm ...), then export");
            return Ok(ExitCode::FAILURE);
        }
        urls.extend(checked.urls().filter(|url| seen.insert(url.to_string())).map(str::to_owned));
        records.extend(checked.records().iter().filter(|key| seen.insert(key.to_string())).cloned());
    }
    let asked = ExportRequest { urls, all, records };
    let partial = part_of(output);
    let mut file = tokio::fs::File::create(&partial).await.with_context(|| format!("create {}", partial.display()))?;
    let bar = std::io::stderr().is_terminal().then(bytes_spinner);
    let progress = |written: u64| {
        if let Some(bar) = &bar {
            bar.set_position(written);
        }
    };
    let written = admin.download(EXPORT_PATH, Bytes::from(serde_json::to_vec(&asked)?), &mut file, progress).await;
    if let Some(bar) = bar {
        bar.finish_and_clear();
    }
    let written = match written {
        Ok(written) => written,
        Err(error) => {
            let _ = std::fs::remove_file(&partial);
            return Err(error.into());
        }
    };
    file.sync_all().await.with_context(|| format!("write {}", partial.display()))?;
    std::fs::rename(&partial, output)
        .with_context(|| format!("rename {} to {}", partial.display(), output.display()))?;
    println!("wrote {} ({})", output.display(), bytesize::ByteSize(written));
    Ok(ExitCode::SUCCESS)
}

/// Where a bundle is written before it is whole.
fn part_of(output: &Path) -> PathBuf {
    let mut name = output.file_name().unwrap_or_default().to_os_string();
    name.push(".part");
    output.with_file_name(name)
}

/// Streams the bundle at `input` to the daemon, which takes it in.
pub async fn import(admin: &ControlClient, input: &Path) -> anyhow::Result<ExitCode> {
    let file = tokio::fs::File::open(input).await.with_context(|| format!("open {}", input.display()))?;
    let size = file.metadata().await.with_context(|| format!("read {}", input.display()))?.len();
    let bar = std::io::stderr().is_terminal().then(|| bytes_bar(size));
    let counted = bar.clone();
    let chunks = futures_util::StreamExt::map(ReaderStream::with_capacity(file, 256 * 1024), move |chunk| {
        if let (Ok(chunk), Some(bar)) = (&chunk, &counted) {
            bar.inc(chunk.len() as u64);
        }
        chunk.map(Frame::data)
    });
    let imported: Result<Imported, _> = admin.upload(IMPORT_PATH, StreamBody::new(chunks)).await;
    if let Some(bar) = bar {
        bar.finish_and_clear();
    }
    let imported = imported?;
    println!(
        "{} of {} items taken in ({}), {} held already",
        imported.imported,
        imported.items,
        bytesize::ByteSize(imported.bytes),
        imported.held
    );
    Ok(ExitCode::SUCCESS)
}

fn bytes_bar(total: u64) -> indicatif::ProgressBar {
    let style = indicatif::ProgressStyle::with_template("{bar:40} {bytes}/{total_bytes}, {eta} left")
        .unwrap_or_else(|_| indicatif::ProgressStyle::default_bar());
    indicatif::ProgressBar::new(total).with_style(style)
}

fn bytes_spinner() -> indicatif::ProgressBar {
    let style = indicatif::ProgressStyle::with_template("{spinner} {bytes} written, {bytes_per_sec}")
        .unwrap_or_else(|_| indicatif::ProgressStyle::default_spinner());
    indicatif::ProgressBar::new_spinner().with_style(style)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn words(line: &str) -> Vec<String> {
        line.split_whitespace().map(str::to_owned).collect()
    }

    #[test]
    fn export_arguments_split_at_each_side() {
        let line = "go go.sum --go-mod go.mod registry alpine:3.20 hello:v1 --platform linux/arm64 \
                    --stats-socket-path /run/s.sock --admin-socket-path=/run/a.sock";
        let split = groups(&words(line)).unwrap();
        assert_eq!(split.needs.len(), 2);
        assert!(matches!(&split.needs[0], Needs::Go { go_mod: Some(_), .. }));
        assert!(matches!(&split.needs[1], Needs::Registry { images, platform: Some(_) } if images.len() == 2));
        assert_eq!(split.stats_socket, Some(PathBuf::from("/run/s.sock")));
        assert_eq!(split.admin_socket, Some(PathBuf::from("/run/a.sock")));
        assert!(groups(&words("go.sum")).unwrap_err().to_string().contains("which side"));
        assert!(groups(&words("go")).is_err(), "a go group needs its go.sum");
    }
}
