//! `pkgproxyctl cache`: the cache's entries listed, removed by pattern, or
//! evicted down to the quota's low-water mark, by the daemon itself over
//! its control sockets (so nothing races its own writes).

use std::io::IsTerminal;
use std::time::Duration;

use http::Method;
use pkgproxy_control::{
    CacheEntry, CacheVerified, ControlClient, Removed, VerifyProgress, CACHE_ENTRIES_PATH, CACHE_GC_PATH,
    CACHE_VERIFY_PATH,
};

/// The sides' names, as `--side` takes them (and completes them).
fn side_names() -> clap::builder::PossibleValuesParser {
    clap::builder::PossibleValuesParser::new(pkgproxy_sides::SideId::ALL.iter().map(|side| side.as_str()))
}

/// What `pkgproxyctl cache` does.
#[derive(Debug, clap::Subcommand)]
pub enum CacheCommand {
    /// List entries: side, size, last use, class, key (least recently used first).
    Ls {
        /// Only this side's.
        #[arg(long, value_parser = side_names())]
        side: Option<String>,
        /// Only keys matching it whole, `*` for any run of characters.
        pattern: Option<String>,
        /// Print the daemon's JSON answer as it is.
        #[arg(long)]
        json: bool,
    },
    /// Remove the entries whose key matches PATTERN (`*` for any run).
    /// Exits 1 when none does.
    Rm {
        /// The keys to remove.
        pattern: String,
    },
    /// Evict the least recently used entries now, down to the low-water mark.
    Gc,
    /// Read every cached body back and check it against its hash; drop damaged
    /// entries, delete left-over files. Exits 1 when it found damage.
    Verify,
}

/// Runs `command` against the daemon's admin socket (every cache command
/// reads or changes what only the admin may see); `false` when it found
/// something wrong.
pub async fn run(command: CacheCommand, admin: &ControlClient) -> anyhow::Result<bool> {
    match command {
        CacheCommand::Ls { side, pattern, json } => {
            let mut query = Vec::new();
            query.extend(side.map(|side| format!("side={}", encoded(&side))));
            query.extend(pattern.map(|pattern| format!("pattern={}", encoded(&pattern))));
            let path = format!("{CACHE_ENTRIES_PATH}?{}", query.join("&"));
            // The keys name private repositories: listed on the admin socket.
            let entries: Vec<CacheEntry> = admin.json(Method::GET, &path, None).await?;
            match json {
                true => println!("{}", serde_json::to_string_pretty(&entries)?),
                false => print!("{}", render(&entries, now())),
            }
        }
        CacheCommand::Rm { pattern } => {
            let path = format!("{CACHE_ENTRIES_PATH}?pattern={}", encoded(&pattern));
            let removed: Removed = admin.json(Method::DELETE, &path, None).await?;
            // A pattern that matched nothing is most often a mistyped one.
            if removed.entries == 0 {
                eprintln!("pkgproxyctl: no entry matches {pattern:?} (pkgproxyctl cache ls lists the keys)");
                return Ok(false);
            }
            println!("removed {} entries, {} freed", removed.entries, size(removed.bytes));
        }
        CacheCommand::Gc => {
            let removed: Removed = admin.json(Method::POST, CACHE_GC_PATH, None).await?;
            println!("evicted {} entries, {} freed", removed.entries, size(removed.bytes));
        }
        CacheCommand::Verify => {
            eprintln!("reading every cached body back (hits are served meanwhile)...");
            let found = match std::io::stderr().is_terminal() {
                true => verify_with_progress_bar(admin).await?,
                false => admin.json(Method::POST, CACHE_VERIFY_PATH, None).await?,
            };
            println!(
                "checked {} bodies: {} bad ({} entries dropped), {} left-over bodies and {} temporary files deleted, {} freed",
                found.checked,
                found.bad,
                found.entries_removed,
                found.orphans_removed,
                found.temps_removed,
                size(found.bytes_freed)
            );
            return Ok(found.bad + found.orphans_removed + found.temps_removed == 0);
        }
    }
    Ok(true)
}

/// Runs the verify, drawing how far it is on the terminal as it goes.
async fn verify_with_progress_bar(admin: &ControlClient) -> anyhow::Result<CacheVerified> {
    let style =
        indicatif::ProgressStyle::with_template("{bar:40} {percent:>3}% {bytes}/{total_bytes}, {msg}, {eta} left")?;
    let bar = indicatif::ProgressBar::new(0).with_style(style);
    let verify = admin.json::<CacheVerified>(Method::POST, CACHE_VERIFY_PATH, None);
    tokio::pin!(verify);
    let mut tick = tokio::time::interval(Duration::from_millis(200));
    loop {
        tokio::select! {
            found = &mut verify => {
                bar.finish_and_clear();
                return Ok(found?);
            }
            _ = tick.tick() => {
                let progress = admin.json::<VerifyProgress>(Method::GET, CACHE_VERIFY_PATH, None).await;
                if let Ok(Some(progress)) = progress.as_ref().map(|p| p.running.then_some(p)) {
                    bar.set_length(progress.bytes_total);
                    bar.set_position(progress.bytes_read);
                    bar.set_message(format!("{} bodies", progress.checked));
                }
            }
        }
    }
}

fn encoded(text: &str) -> String {
    percent_encoding::utf8_percent_encode(text, percent_encoding::NON_ALPHANUMERIC).to_string()
}

fn now() -> u64 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_secs())
}

/// `entries` as a table, their last use as a time ago from `now`.
fn render(entries: &[CacheEntry], now: u64) -> String {
    let mut out = format!("{:<9} {:>10} {:>12} {:<11} KEY\n", "SIDE", "SIZE", "LAST USE", "CLASS");
    for entry in entries {
        let ago = humantime::format_duration(std::time::Duration::from_secs(now.saturating_sub(entry.last_use)));
        let ago = ago.to_string().split(' ').take(2).collect::<Vec<_>>().join(" ");
        out += &format!("{:<9} {:>10} {:>12} {:<11} {}\n", entry.side, size(entry.size), ago, entry.class, entry.key);
    }
    out += &format!("{} entries, {}\n", entries.len(), size(entries.iter().map(|e| e.size).sum()));
    out
}

fn size(bytes: u64) -> String {
    bytesize::ByteSize::b(bytes).to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn entries_are_listed_with_their_age_and_size() {
        let entry = CacheEntry {
            key: "apt/debian/pool/main/h/hello/hello_2.10_amd64.deb".into(),
            side: "apt".into(),
            size: 2048,
            last_use: 1000,
            class: "immutable".into(),
        };
        let table = render(&[entry], 1000 + 3 * 3600 + 5);
        assert!(table.contains("apt") && table.contains("3h 5s") && table.contains("hello_2.10_amd64.deb"), "{table}");
        assert!(table.ends_with("1 entries, 2.0 KiB\n"), "{table}");
    }
}
