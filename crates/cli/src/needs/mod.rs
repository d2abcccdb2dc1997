//! `pkgproxyctl check` and `warm`: what a build needs, as the requests its
//! clients will make (from a `go.sum`, apt's sources and package names or
//! `--print-uris`, image references), asked of the
//! daemon one by one: would it serve each with the network gone
//! ([`CHECK_PATH`]), and if not, fetch it now ([`WARM_PATH`]). The daemon
//! answers from its cache and fetches through its own request path; this
//! side only reads the build's files.

mod apt;
mod go;
mod lxd;
mod registry;
mod snap;

use std::io::IsTerminal;
use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Context;
use bytes::Bytes;
use clap::Subcommand;
use http::Method;
use pkgproxy_control::{
    AptNeeds, AptNeedsRequest, ControlClient, ItemReadiness, LxdNeeds, LxdNeedsRequest, ReadinessRequest,
    RegistryNeeds, RegistryNeedsRequest, SnapNeeds, SnapNeedsRequest, APT_NEEDS_PATH, CHECK_PATH, LXD_NEEDS_PATH,
    REGISTRY_NEEDS_PATH, SNAP_NEEDS_PATH, WARM_PATH,
};

/// What a build needs, by the side that serves it.
#[derive(Debug, Subcommand)]
pub enum Needs {
    /// Go modules: every module version a go.sum lists (`.info`, `.mod`,
    /// `.zip`; `.mod` alone for a `/go.mod` line).
    Go {
        /// The module's go.sum.
        go_sum: PathBuf,
        /// Its go.mod: each module it requires also needs its `@v/list`.
        #[arg(long, value_name = "GO.MOD")]
        go_mod: Option<PathBuf>,
    },
    /// apt: the packages an install of PACKAGE... from the --sources
    /// downloads (they and their dependencies, as the indexes pkgproxy
    /// holds say), with the indexes `apt-get update` reads; or the packages
    /// of an `apt-get install --print-uris` run.
    Apt {
        /// apt's sources: a sources.list (one-line) or a deb822 .sources.
        #[arg(long, value_name = "FILE", requires = "packages", required_unless_present = "uris")]
        sources: Option<PathBuf>,
        /// The packages to install (with --sources).
        packages: Vec<String>,
        /// The machine's architecture (default: dpkg's).
        #[arg(long, value_name = "ARCH")]
        arch: Option<String>,
        /// Instead: a file of `apt-get --print-uris` lines (`'URL' FILE SIZE
        /// SHA256:...`).
        #[arg(long, value_name = "FILE", conflicts_with_all = ["sources", "packages"])]
        uris: Option<PathBuf>,
    },
    /// Container images: each reference's manifest, the platform's
    /// manifest an index names, its config and layers.
    Registry {
        /// Image references: `alpine:3.20`, `ghcr.io/o/i@sha256:...`.
        #[arg(required = true)]
        images: Vec<String>,
        /// The platform pulled (default: this machine's, `linux/amd64`).
        #[arg(long, value_name = "OS/ARCH[/VARIANT]")]
        platform: Option<String>,
    },
    /// LXD images: what `lxc launch REMOTE:ALIAS` (or `lxc image export`)
    /// needs: the remote's index and products files, and the image's
    /// files of the newest version listed for the alias.
    Lxd {
        /// REMOTE:ALIAS, the remote as pkgproxy mounts it (`ubuntu:24.04`).
        #[arg(required = true, value_name = "REMOTE:ALIAS")]
        images: Vec<String>,
        /// Virtual-machine images rather than containers'.
        #[arg(long)]
        vm: bool,
        /// The machine's architecture (default: dpkg's).
        #[arg(long, value_name = "ARCH")]
        arch: Option<String>,
    },
    /// Snaps: what `snap download NAME --channel CHANNEL` (or a classic
    /// machine's install) needs: the store's answer, the .snap and its
    /// assertions (snap-revision, snap-declaration, account, account-key).
    Snap {
        /// NAME or NAME=CHANNEL, the channel as `snap --channel` takes it
        /// (default: stable).
        #[arg(required = true, value_name = "NAME[=CHANNEL]")]
        snaps: Vec<String>,
        /// The machine's architecture (default: dpkg's).
        #[arg(long, value_name = "ARCH")]
        arch: Option<String>,
    },
}

/// One request a build makes, and what people call it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Item {
    /// As the client asks pkgproxy for it.
    pub url: String,
    /// For people: `example.com/hello v1.0.0 .zip`, `hello_2.10_amd64.deb`.
    pub label: String,
}

/// What a build needs: the requests to ask about, and what cannot even
/// be asked about (a package no index held offers, an index not held).
#[derive(Debug, Default, PartialEq, Eq)]
struct Wanted {
    items: Vec<Item>,
    unknown: Vec<String>,
    /// What will work now but not after a while offline (a Release about
    /// to expire).
    warnings: Vec<String>,
    /// Recorded answers replayed offline, by key (a snap's store answer):
    /// a bundle carries them besides the requests.
    records: Vec<String>,
    /// The headers the client sends with its requests, where they change
    /// what the upstream serves (a snap device's): a warm sends them too.
    headers: Vec<(String, String)>,
}

impl Needs {
    /// The requests the build makes (the daemon finds apt's dependencies).
    /// With `warming`, the admin socket: the daemon first asks upstream
    /// what only an upstream answer names (a snap's download).
    async fn wanted(&self, stats: &ControlClient, warming: Option<&ControlClient>) -> anyhow::Result<Wanted> {
        let read = |path: &PathBuf| std::fs::read_to_string(path).with_context(|| format!("read {}", path.display()));
        let mut wanted = match self {
            Needs::Go { go_sum, go_mod } => {
                let go_mod = go_mod.as_ref().map(read).transpose()?;
                Wanted { items: go::items(&read(go_sum)?, go_mod.as_deref()), ..Wanted::default() }
            }
            Needs::Apt { uris: Some(uris), .. } => Wanted { items: apt::items(&read(uris)?)?, ..Wanted::default() },
            Needs::Apt { sources, packages, arch, .. } => {
                let sources = sources.as_ref().context("--sources or --uris")?;
                let asked = AptNeedsRequest {
                    sources: apt::sources(&read(sources)?)?,
                    packages: packages.clone(),
                    architecture: arch.clone().unwrap_or_else(apt::architecture),
                };
                let body = Bytes::from(serde_json::to_vec(&asked)?);
                let needs: AptNeeds = stats.json(Method::POST, APT_NEEDS_PATH, Some(body)).await?;
                apt::wanted(needs)
            }
            Needs::Registry { images, platform } => {
                let asked = RegistryNeedsRequest {
                    manifests: images.iter().map(|image| registry::manifest_url(image)).collect::<Result<_, _>>()?,
                    platform: platform.clone().unwrap_or_else(registry::platform),
                };
                let body = Bytes::from(serde_json::to_vec(&asked)?);
                let needs: RegistryNeeds = stats.json(Method::POST, REGISTRY_NEEDS_PATH, Some(body)).await?;
                let label = |url: &String| url.strip_prefix("/v2/").unwrap_or(url).to_owned();
                let items = needs.urls.iter().map(|url| Item { url: url.clone(), label: label(url) }).collect();
                Wanted { items, unknown: needs.unresolved, ..Wanted::default() }
            }
            Needs::Lxd { images, vm, arch } => {
                let asked = LxdNeedsRequest {
                    images: images.iter().map(|image| lxd::image(image, *vm)).collect::<Result<_, _>>()?,
                    architecture: arch.clone().unwrap_or_else(apt::architecture),
                };
                let body = Bytes::from(serde_json::to_vec(&asked)?);
                let needs: LxdNeeds = stats.json(Method::POST, LXD_NEEDS_PATH, Some(body)).await?;
                let items = needs.urls.iter().map(|url| Item { url: url.clone(), label: lxd::label(url) }).collect();
                Wanted { items, unknown: needs.unresolved, ..Wanted::default() }
            }
            Needs::Snap { snaps, arch } => {
                let asked = SnapNeedsRequest {
                    snaps: snaps.iter().map(|argument| snap::wanted(argument)).collect::<Result<_, _>>()?,
                    architecture: arch.clone().unwrap_or_else(apt::architecture),
                    refresh: warming.is_some(),
                };
                let body = Bytes::from(serde_json::to_vec(&asked)?);
                let needs: SnapNeeds = warming.unwrap_or(stats).json(Method::POST, SNAP_NEEDS_PATH, Some(body)).await?;
                let items = needs.urls.iter().map(|url| Item { url: url.clone(), label: snap::label(url) }).collect();
                let (unknown, records, headers) = (needs.unresolved, needs.records, needs.headers);
                Wanted { items, unknown, records, headers, ..Wanted::default() }
            }
        };
        let mut seen = std::collections::HashSet::new();
        wanted.items.retain(|item| seen.insert(item.url.clone()));
        Ok(wanted)
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
    /// Whether every request would be served.
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
    batch: &[Item],
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
    let ready = told.iter().filter(|item| item.ready).count();
    if json {
        let unknown: Vec<ItemReadiness> = wanted
            .unknown
            .iter()
            .map(|what| ItemReadiness { url: String::new(), ready: false, reason: Some(what.clone()), size: None })
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
        println!("{ready} of {} ready", told.len() + wanted.unknown.len());
    }
    let all = ready == told.len() && wanted.unknown.is_empty();
    Ok(if all { ExitCode::SUCCESS } else { ExitCode::FAILURE })
}

fn table(items: &[Item], told: &[ItemReadiness]) -> String {
    let width = items.iter().map(|item| item.label.len()).max().unwrap_or(0);
    let mut out = String::new();
    for (item, told) in items.iter().zip(told) {
        let state = if told.ready { "ready  " } else { "missing" };
        let why = told.reason.as_deref().map(|why| format!("  {why}")).unwrap_or_default();
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
            Item { url: "/go/a/@v/v1.zip".into(), label: "a v1 .zip".into() },
            Item { url: "/go/bb/@v/v2.zip".into(), label: "bb v2 .zip".into() },
        ];
        let told = [
            ItemReadiness { url: items[0].url.clone(), ready: true, reason: None, size: Some(3) },
            ItemReadiness { url: items[1].url.clone(), ready: false, reason: Some("not cached".into()), size: None },
        ];
        assert_eq!(table(&items, &told), "ready    a v1 .zip\nmissing  bb v2 .zip  not cached\n");
    }
}
