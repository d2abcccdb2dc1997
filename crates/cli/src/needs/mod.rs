//! `pkgproxyctl check` and `warm`: what a build needs, as the requests its
//! clients will make, asked of the daemon one by one: would it serve each
//! with the network gone ([`CHECK_PATH`]), and if not, fetch it now
//! ([`WARM_PATH`]). Each side reads the build's own files (a `go.sum`,
//! apt's sources, image references: its [`NeedsReader`]); what only the
//! cache can follow further (an install's dependencies, an image's layers)
//! the daemon follows ([`NEEDS_PATH`]). This side only reads the files.

use std::io::IsTerminal;
use std::process::ExitCode;

use anyhow::Context;
use bytes::Bytes;
use http::Method;
use pkgproxy_control::{
    ControlClient, ItemReadiness, NeededItem, Needs as Wanted, NeedsRequest, ReadinessRequest, CHECK_PATH, NEEDS_PATH,
    WARM_PATH,
};
use pkgproxy_sides::needs::{Asked, NeedsReader};
use pkgproxy_sides::SideId;

/// What a build needs of one side: `check SIDE ARGS...`, the arguments as
/// that side's reader takes them.
#[derive(Debug, Clone)]
pub struct Needs {
    side: SideId,
    matches: clap::ArgMatches,
}

impl Needs {
    /// The side's reader.
    fn reader(&self) -> &'static dyn NeedsReader {
        let mut readers = pkgproxy_sides::needs_readers();
        readers.find(|(id, _)| *id == self.side).map(|(_, reader)| reader).expect("parsed by a side's reader")
    }

    /// The side the arguments are for.
    #[cfg(test)]
    pub fn side(&self) -> SideId {
        self.side
    }

    /// The requests the build makes (the daemon finds what only the cache
    /// names); `Err` when they are none. With `warming`, the admin socket: the daemon may first ask
    /// an upstream what only its answer names (a snap's download).
    async fn wanted(&self, stats: &ControlClient, warming: Option<&ControlClient>) -> anyhow::Result<Wanted> {
        let mut wanted = match self.reader().read(&self.matches)? {
            Asked::Known(needs) => needs,
            Asked::Resolve(asked) => {
                let request = NeedsRequest { warm: warming.is_some(), asked };
                let body = Bytes::from(serde_json::to_vec(&request)?);
                let path = format!("{NEEDS_PATH}{}", self.side);
                let client = warming.unwrap_or(stats);
                client.json(Method::POST, &path, Some(body)).await.with_context(|| format!("{} needs", self.side))?
            }
        };
        let mut seen = std::collections::HashSet::new();
        wanted.items.retain(|item| seen.insert(item.url.clone()));
        // An empty or wrong file is not a build that needs nothing: a
        // check of it that passed would pass for any build.
        anyhow::ensure!(
            !wanted.items.is_empty() || !wanted.unknown.is_empty() || !wanted.records.is_empty(),
            "{}: what was given names nothing pkgproxy would serve: an empty file, one of local packages only, or not the build's own?",
            self.side
        );
        Ok(wanted)
    }
}

impl clap::FromArgMatches for Needs {
    fn from_arg_matches(matches: &clap::ArgMatches) -> Result<Self, clap::Error> {
        let Some((name, below)) = matches.subcommand() else {
            return Err(clap::Error::new(clap::error::ErrorKind::MissingSubcommand));
        };
        let side =
            SideId::from_name(name).ok_or_else(|| clap::Error::new(clap::error::ErrorKind::InvalidSubcommand))?;
        Ok(Needs { side, matches: below.clone() })
    }

    fn update_from_arg_matches(&mut self, matches: &clap::ArgMatches) -> Result<(), clap::Error> {
        *self = Needs::from_arg_matches(matches)?;
        Ok(())
    }
}

impl clap::Subcommand for Needs {
    fn augment_subcommands(command: clap::Command) -> clap::Command {
        command.subcommands(pkgproxy_sides::needs_readers().map(|(_, reader)| reader.command()))
    }

    fn augment_subcommands_for_update(command: clap::Command) -> clap::Command {
        Needs::augment_subcommands(command)
    }

    fn has_subcommand(name: &str) -> bool {
        pkgproxy_sides::needs_readers().any(|(id, _)| id.as_str() == name)
    }
}

/// URLs per request to the daemon: a check takes many at once; a warm a
/// few, so that progress shows between them.
const CHECK_BATCH: usize = 500;
const WARM_BATCH: usize = 8;

/// What a build needs, and whether the daemon would serve each request
/// with the network gone.
pub struct Checked {
    wanted: Wanted,
    told: Vec<ItemReadiness>,
}

impl Checked {
    /// Whether every request would be served with the network gone, as
    /// far as the cache goes (what the fleet's policy refuses is the
    /// importing pkgproxy's to judge: a bundle carries it all the same).
    pub fn ready(&self) -> bool {
        self.wanted.unknown.is_empty() && self.told.iter().all(|item| item.ready)
    }

    /// The requests, in the order the build makes them (what proves an
    /// item first).
    pub fn urls(&self) -> impl Iterator<Item = &str> {
        self.wanted.items.iter().map(|item| item.url.as_str())
    }

    /// The recorded answers the requests need replayed offline, by key.
    pub fn records(&self) -> &[String] {
        &self.wanted.records
    }

    /// Prints the table `check` prints; success only when all is ready.
    pub fn report(&self, json: bool) -> anyhow::Result<ExitCode> {
        report(&self.wanted, &self.told, json)
    }
}

/// Asks the daemon about each request `needs` makes.
pub async fn checked(stats: &ControlClient, needs: &Needs) -> anyhow::Result<Checked> {
    let wanted = needs.wanted(stats, None).await?;
    let mut told = Vec::with_capacity(wanted.items.len());
    for batch in wanted.items.chunks(CHECK_BATCH) {
        told.extend(ask(stats, CHECK_PATH, batch, &[]).await?);
    }
    Ok(Checked { wanted, told })
}

/// `check`: prints whether each request would be served offline; success
/// only when every one would.
pub async fn check(stats: &ControlClient, needs: &Needs, json: bool) -> anyhow::Result<ExitCode> {
    checked(stats, needs).await?.report(json)
}

/// `warm`: fetches, through the daemon, each request that is not ready;
/// then reports as `check` does. What could not be known before (apt's
/// packages before their indexes were held, an image's layers before its
/// manifest) is asked again once what names it is warm.
pub async fn warm(stats: &ControlClient, admin: &ControlClient, needs: &Needs, json: bool) -> anyhow::Result<ExitCode> {
    let mut wanted = needs.wanted(stats, Some(admin)).await?;
    let mut told = warm_items(admin, &wanted).await?;
    // Each round may make known what the last one fetched names (an index,
    // then the manifest it lists, then that manifest's layers).
    for _ in 0..3 {
        if wanted.unknown.is_empty() {
            break;
        }
        let again = needs.wanted(stats, Some(admin)).await?;
        if again == wanted {
            break;
        }
        told = warm_items(admin, &again).await?;
        wanted = again;
    }
    report(&wanted, &told, json)
}

async fn warm_items(admin: &ControlClient, wanted: &Wanted) -> anyhow::Result<Vec<ItemReadiness>> {
    let items = &wanted.items;
    let bar = std::io::stderr().is_terminal().then(|| progress_bar(items.len() as u64));
    let mut told = Vec::with_capacity(items.len());
    let mut bytes = 0;
    for batch in items.chunks(WARM_BATCH) {
        let warmed = ask(admin, WARM_PATH, batch, &wanted.headers).await?;
        bytes += warmed.iter().filter_map(|item| item.size).sum::<u64>();
        if let Some(bar) = &bar {
            bar.inc(warmed.len() as u64);
            bar.set_message(bytesize::ByteSize(bytes).to_string());
        }
        told.extend(warmed);
    }
    if let Some(bar) = bar {
        bar.finish_and_clear();
    }
    Ok(told)
}

fn progress_bar(items: u64) -> indicatif::ProgressBar {
    let style = indicatif::ProgressStyle::with_template("{bar:40} {pos}/{len} items, {msg}, {eta} left")
        .unwrap_or_else(|_| indicatif::ProgressStyle::default_bar());
    indicatif::ProgressBar::new(items).with_style(style)
}

async fn ask(
    client: &ControlClient,
    path: &str,
    batch: &[NeededItem],
    headers: &[(String, String)],
) -> anyhow::Result<Vec<ItemReadiness>> {
    let urls = batch.iter().map(|item| item.url.clone()).collect();
    let request = ReadinessRequest { urls, headers: headers.to_vec() };
    let body = Bytes::from(serde_json::to_vec(&request)?);
    let told: Vec<ItemReadiness> = client.json(Method::POST, path, Some(body)).await?;
    anyhow::ensure!(told.len() == batch.len(), "the daemon answered for {} of {} items", told.len(), batch.len());
    Ok(told)
}

/// Prints a line per item (ready or missing, and why) and the count;
/// success only when all are ready and nothing is unknown.
fn report(wanted: &Wanted, told: &[ItemReadiness], json: bool) -> anyhow::Result<ExitCode> {
    let ready = told.iter().filter(|item| item.ready && item.blocked.is_none()).count();
    if json {
        let unknown: Vec<ItemReadiness> = wanted
            .unknown
            .iter()
            .map(|what| ItemReadiness {
                url: String::new(),
                ready: false,
                reason: Some(what.clone()),
                size: None,
                blocked: None,
            })
            .collect();
        println!("{}", serde_json::to_string_pretty(&[told, &unknown].concat())?);
    } else {
        print!("{}", table(&wanted.items, told));
        for what in &wanted.unknown {
            println!("missing  {what}");
        }
        for warning in &wanted.warnings {
            println!("warning  {warning}");
        }
        for note in &wanted.notes {
            println!("note     {note}");
        }
        let blocked = told.iter().filter(|item| item.blocked.is_some()).count();
        match blocked {
            0 => println!("{ready} of {} ready", told.len() + wanted.unknown.len()),
            _ => println!("{ready} of {} ready, {blocked} blocked by policy", told.len() + wanted.unknown.len()),
        }
    }
    let all = ready == told.len() && wanted.unknown.is_empty();
    Ok(if all { ExitCode::SUCCESS } else { ExitCode::FAILURE })
}

fn table(items: &[NeededItem], told: &[ItemReadiness]) -> String {
    let width = items.iter().map(|item| item.label.len()).max().unwrap_or(0);
    let mut out = String::new();
    for (item, told) in items.iter().zip(told) {
        let (state, why) = match (&told.blocked, told.ready) {
            (Some(blocked), _) => ("blocked", Some(blocked.as_str())),
            (None, true) => ("ready  ", told.reason.as_deref()),
            (None, false) => ("missing", told.reason.as_deref()),
        };
        let why = why.map(|why| format!("  {why}")).unwrap_or_default();
        out.push_str(format!("{state}  {:width$}{why}", item.label).trim_end());
        out.push('\n');
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_table_names_each_item_and_why_it_is_missing() {
        let items = [
            NeededItem { url: "/go/a/@v/v1.zip".into(), label: "a v1 .zip".into() },
            NeededItem { url: "/go/bb/@v/v2.zip".into(), label: "bb v2 .zip".into() },
        ];
        let told = [
            ItemReadiness { url: items[0].url.clone(), ready: true, reason: None, size: Some(3), blocked: None },
            ItemReadiness {
                url: items[1].url.clone(),
                ready: false,
                reason: Some("not cached".into()),
                size: None,
                blocked: None,
            },
        ];
        assert_eq!(table(&items, &told), "ready    a v1 .zip\nmissing  bb v2 .zip  not cached\n");
        let blocked = ItemReadiness { blocked: Some("blocked by MAL-2025-1".into()), ..told[0].clone() };
        assert_eq!(table(&items[..1], &[blocked]), "blocked  a v1 .zip  blocked by MAL-2025-1\n");
    }
}
