//! `pkgproxyctl export`, `import` and `keygen`: a bundle of what builds
//! need, written by one pkgproxy and taken in by another (one that never
//! had network). The daemons do the work (see the server's `bundle`
//! module); this side turns the build's inputs into requests as `check`
//! does, streams the bundle between the daemon and the file, and signs it
//! on the way with the admin's key ([`signer`]).

mod signer;

use std::io::IsTerminal;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::Context;
use bytes::Bytes;
use clap::Parser;
use http_body::Frame;
use http_body_util::StreamBody;
use pkgproxy_control::{ControlClient, ExportRequest, Imported, EXPORT_PATH, IMPORT_PATH, IMPORT_TRUST_UNSIGNED};
use pkgproxy_server::signing::{self, SigningKey};
use tokio_util::io::ReaderStream;

use crate::needs::{self, Needs};

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
    /// `--sign`.
    pub sign: Option<PathBuf>,
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
                Socket::Sign => &mut found.sign,
            };
            *slot = Some(value);
            continue;
        }
        let starts_a_group = pkgproxy_sides::needs_readers().any(|(side, _)| side.as_str() == word);
        match (starts_a_group, groups.last_mut()) {
            (false, Some(group)) => group.push(word),
            (false, None) => anyhow::bail!("{word:?}: say first which side it is for ({})", side_names().join(", ")),
            (true, _) => groups.push(vec![word]),
        }
    }
    for group in groups {
        found.needs.push(Group::try_parse_from(group)?.needs);
    }
    Ok(found)
}

/// The words that start a group of `export`'s arguments: the sides that
/// read a build's files.
fn side_names() -> Vec<&'static str> {
    pkgproxy_sides::needs_readers().map(|(side, _)| side.as_str()).collect()
}

/// A flag taking a path that `export` reads among its groups.
enum Socket {
    Stats,
    Admin,
    /// Not a socket: the signing key.
    Sign,
}

/// `word` (and the word after it) as a control socket's flag, or
/// `--sign`.
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
        "--sign" => Socket::Sign,
        _ => return Ok(None),
    };
    let value = match inline {
        Some(value) => value,
        None => rest.next().with_context(|| format!("{name} takes a path"))?.clone(),
    };
    Ok(Some((socket, PathBuf::from(value))))
}

/// What a bundle carries besides the groups' requests.
#[derive(Debug, Clone, Copy, Default)]
pub struct Exported {
    /// Everything the cache holds (and the policy's records, when one is
    /// in force).
    pub all: bool,
    /// The fleet's malicious-package records in force.
    pub policy: bool,
}

/// Writes to `output` a bundle of what `groups` need (checked on the stats
/// socket), or of everything the cache holds with `all`, and the policy's
/// malicious-package records as `what` says, read from the admin socket (a
/// bundle carries the cache's content), signed with the key at `sign`;
/// refused (nothing written) when not everything is held.
pub async fn export(
    stats: &ControlClient,
    admin: &ControlClient,
    groups: &[Needs],
    what: Exported,
    output: &Path,
    sign: Option<&Path>,
) -> anyhow::Result<ExitCode> {
    // A key that cannot be read is said before anything is asked.
    let key = sign.map(SigningKey::read).transpose()?;
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
    let asked = ExportRequest { urls, all: what.all, records, policy: what.policy };
    let partial = part_of(output);
    let file = tokio::fs::File::create(&partial).await.with_context(|| format!("create {}", partial.display()))?;
    let signer = key.as_ref().map(|key| key.public());
    let written = match download(admin, &asked, file, key).await {
        Ok((written, file)) => {
            file.sync_all().await.with_context(|| format!("write {}", partial.display()))?;
            written
        }
        Err(error) => {
            let _ = std::fs::remove_file(&partial);
            return Err(error);
        }
    };
    std::fs::rename(&partial, output)
        .with_context(|| format!("rename {} to {}", partial.display(), output.display()))?;
    match signer {
        Some(signer) => println!("wrote {} ({}), signed by {signer}", output.display(), bytesize::ByteSize(written)),
        None => println!("wrote {} ({}), unsigned", output.display(), bytesize::ByteSize(written)),
    }
    Ok(ExitCode::SUCCESS)
}

/// The bundle `asked` for, written to `file` (signed with `key`): the
/// bytes the daemon sent, and the file.
async fn download(
    admin: &ControlClient,
    asked: &ExportRequest,
    mut file: tokio::fs::File,
    key: Option<SigningKey>,
) -> anyhow::Result<(u64, tokio::fs::File)> {
    let bar = std::io::stderr().is_terminal().then(bytes_spinner);
    let progress = |written: u64| {
        if let Some(bar) = &bar {
            bar.set_position(written);
        }
    };
    let body = Bytes::from(serde_json::to_vec(asked)?);
    let downloaded = match key {
        Some(key) => {
            let mut signing = signer::Signing::new(file, key);
            let written = admin.download(EXPORT_PATH, body, &mut signing, progress).await;
            written.map_err(anyhow::Error::from).and_then(|written| Ok((written, signing.finish()?)))
        }
        None => admin
            .download(EXPORT_PATH, body, &mut file, progress)
            .await
            .map(|written| (written, file))
            .map_err(Into::into),
    };
    if let Some(bar) = bar {
        bar.finish_and_clear();
    }
    downloaded
}

/// Writes a new key pair for signing bundles: the private key at `output`
/// (readable by its owner only), the public key beside it (`.pub`). Never
/// over a file that is there.
pub fn keygen(output: &Path) -> anyhow::Result<ExitCode> {
    let public_path = {
        let mut name = output.as_os_str().to_os_string();
        name.push(".pub");
        PathBuf::from(name)
    };
    for path in [output, public_path.as_path()] {
        anyhow::ensure!(
            !path.exists(),
            "{} is there already: pkgproxyctl keygen writes new files only",
            path.display()
        );
    }
    let (private, public) = signing::generate()?;
    write_new(output, private.as_bytes(), 0o600)?;
    if let Err(error) = write_new(&public_path, format!("{public}\n").as_bytes(), 0o644) {
        let _ = std::fs::remove_file(output);
        return Err(error);
    }
    println!(
        "wrote {} (the private key: keep it where bundles are exported) and {}",
        output.display(),
        public_path.display()
    );
    println!("where bundles are imported, trust it:\n[bundles]\ntrusted_keys = [\"{public}\"]");
    Ok(ExitCode::SUCCESS)
}

/// Writes `bytes` to a new file at `path` with `mode`.
fn write_new(path: &Path, bytes: &[u8], mode: u32) -> anyhow::Result<()> {
    use std::io::Write;
    use std::os::unix::fs::OpenOptionsExt;
    let mut file = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(mode)
        .open(path)
        .with_context(|| format!("create {}", path.display()))?;
    file.write_all(bytes).and_then(|()| file.sync_all()).with_context(|| format!("write {}", path.display()))
}

/// Where a bundle is written before it is whole.
fn part_of(output: &Path) -> PathBuf {
    let mut name = output.file_name().unwrap_or_default().to_os_string();
    name.push(".part");
    output.with_file_name(name)
}

/// Streams the bundle at `input` to the daemon, which takes it in: one
/// signed by a key it trusts, or any with `trust_unsigned`. Fails when an
/// item was refused (the others are taken all the same).
pub async fn import(admin: &ControlClient, input: &Path, trust_unsigned: bool) -> anyhow::Result<ExitCode> {
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
    let path = match trust_unsigned {
        true => format!("{IMPORT_PATH}?{IMPORT_TRUST_UNSIGNED}=true"),
        false => IMPORT_PATH.to_owned(),
    };
    let imported: Result<Imported, _> = admin.upload(&path, StreamBody::new(chunks)).await;
    if let Some(bar) = bar {
        bar.finish_and_clear();
    }
    let imported = imported?;
    print!("{}", render_imported(&imported));
    match imported.refused {
        0 => Ok(ExitCode::SUCCESS),
        _ => Ok(ExitCode::FAILURE),
    }
}

/// What an import says it did.
fn render_imported(imported: &Imported) -> String {
    let mut text = match &imported.signed_by {
        Some(key) => format!("signed by {key}\n"),
        None => "unsigned or signed by a key not trusted: taken on its word (--trust-unsigned)\n".to_owned(),
    };
    if let Some(records) = imported.malicious_records {
        text.push_str(&format!("the policy's malicious-package records taken in and in force: {records} records\n"));
    }
    text.push_str(&format!(
        "{} of {} items taken in ({}), {} held already",
        imported.imported,
        imported.items,
        bytesize::ByteSize(imported.bytes),
        imported.held
    ));
    if imported.refused > 0 {
        text.push_str(&format!(", {} refused:", imported.refused));
        for refusal in &imported.refusals {
            text.push_str(&format!("\n  {refusal}"));
        }
        if imported.refused > imported.refusals.len() {
            text.push_str(&format!("\n  and {} more", imported.refused - imported.refusals.len()));
        }
    }
    text.push('\n');
    text
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
        let sides: Vec<&str> = split.needs.iter().map(|needs| needs.side().as_str()).collect();
        assert_eq!(sides, ["go", "registry"]);
        assert_eq!(split.stats_socket, Some(PathBuf::from("/run/s.sock")));
        assert_eq!(split.admin_socket, Some(PathBuf::from("/run/a.sock")));
        assert_eq!(groups(&words("go go.sum --sign /k")).unwrap().sign, Some(PathBuf::from("/k")));
        assert!(groups(&words("go.sum")).unwrap_err().to_string().contains("which side"));
        assert!(groups(&words("go")).is_err(), "a go group needs its go.sum");
    }
}
