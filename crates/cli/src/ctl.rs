//! `pkgproxyctl`: asks a running pkgproxy over its control sockets and prints
//! the answer for people (or as JSON with `--json`).

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Context;
use clap::{Parser, Subcommand};
use pkgproxy_control::{ControlClient, Explanation, Info, ModeRequest, OfflineReport, FROM_CONFIGURE_HOOK};
use pkgproxy_metrics::{CacheGauge, ShadowCounter, SideCounter, UpstreamCounter};

use pkgproxy_sides::setup::{Action, Details, Procedure, Scope, Setup, SetupClient, Target};
use pkgproxy_upstream::offline::Mode;

use crate::paths;

/// What `pkgproxyctl --help` closes with.
const EXAMPLES: &str = "\
Examples:
  pkgproxyctl info                                  what pkgproxy holds and has done
  pkgproxyctl explain http://deb.debian.org/debian/dists/bookworm/InRelease
  pkgproxyctl setup apt --addr cache.lan:3142 | sudo sh   point this machine's apt at it
  sudo pkgproxyctl setup docker --addr cache.lan:3142 --apply
  pkgproxyctl check go go.sum                       would this build work offline?
  sudo pkgproxyctl warm apt hello                   fetch what installing hello needs
  sudo pkgproxyctl offline offline                  serve only what is cached; back: offline online
  pkgproxyctl policy why npm left-pad 1.3.1         is this release served now, and why?
  sudo pkgproxyctl export -o build.tar --sign bundles.key go go.sum";

/// pkgproxyctl's flags.
#[derive(Debug, Parser)]
#[command(name = "pkgproxyctl", version, about = "Inspect and control a running pkgproxy.", after_help = EXAMPLES)]
pub(crate) struct Flags {
    // The variables are read by `run`, not by clap: clap would print a
    // socket given in the environment in every usage line, as if the flag
    // were required.
    /// The daemon's read-only control socket (default: $PKGPROXY_STATS_SOCKET_PATH,
    /// else /run/pkgproxy/stats.sock, or this user's own).
    #[arg(long, global = true, value_name = "PATH", help_heading = "Control sockets")]
    stats_socket_path: Option<PathBuf>,

    /// The daemon's read-write control socket, root's (default:
    /// $PKGPROXY_ADMIN_SOCKET_PATH, else admin.sock beside the stats socket).
    #[arg(long, global = true, value_name = "PATH", help_heading = "Control sockets")]
    admin_socket_path: Option<PathBuf>,

    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// The cache's entries: list, remove by pattern, evict now, verify
    /// against their hashes.
    Cache {
        #[command(subcommand)]
        command: crate::cache_cmd::CacheCommand,
    },
    /// Show the daemon's version, cache and counters.
    Info {
        /// Print the daemon's JSON answer as it is.
        #[arg(long)]
        json: bool,
    },
    /// Show the offline mode, or set it: online (ask upstream as needed),
    /// offline (serve what is cached, ask nothing upstream) or
    /// store-overloaded (leave a failing upstream alone for a while).
    Offline {
        /// The mode to put in effect; without it, the mode is shown.
        #[arg(value_parser = offline_modes())]
        mode: Option<String>,
        /// Re-apply the snap's offline-mode setting from its configure hook
        /// (an automatic offline override then stays in effect).
        #[arg(long, hide = true, requires = "mode")]
        configure_hook: bool,
        /// Set the mode for every node of the cluster (`[cluster]`), not
        /// this one only.
        #[arg(long, requires = "mode")]
        cluster: bool,
        /// Print the daemon's JSON answer as it is.
        #[arg(long)]
        json: bool,
    },
    /// Print what to set for a client to use this pkgproxy; `--apply`
    /// writes it and makes the client read it, `--undo` takes it back (a
    /// setup made through the client's own tool, as `lxc`, is done unless
    /// `--print` is given). A file that is not pkgproxy's is never
    /// written over; a service is restarted only when its file changed,
    /// and only if it runs. PKGPROXY_SETUP_ROOT=DIR: every path works
    /// under DIR instead of /, restarting nothing.
    Setup {
        /// The client.
        #[arg(value_parser = setup_clients())]
        client: String,
        /// The host clients reach pkgproxy at (default: from its listening
        /// address, or this machine's name when it listens on every address).
        #[arg(long, value_name = "HOST")]
        host: Option<String>,
        /// Where clients reach pkgproxy, HOST:PORT: no daemon here is asked
        /// then (lxd-remote asks the pkgproxy there for its remotes and
        /// certificate).
        #[arg(long, value_name = "HOST:PORT", conflicts_with = "host")]
        addr: Option<String>,
        /// Write the client's setup (as root, for the machine's); the
        /// client is restarted if the file changed and it runs.
        #[arg(long, conflicts_with = "undo")]
        apply: bool,
        /// Take the client's setup back (as root, for the machine's); the
        /// client is restarted if something was taken out and it runs.
        #[arg(long)]
        undo: bool,
        /// The root of the file system the setup is written under.
        #[arg(long, hide = true, default_value = "/")]
        root: PathBuf,
        /// Write or remove the setup only, restarting nothing.
        #[arg(long, hide = true)]
        no_restart: bool,
        /// The user's configuration (the default for cargo, npm, yarn and
        /// lxd-remote): pip's ~/.config/pip/pip.conf, uv's
        /// ~/.config/uv/uv.toml ($XDG_CONFIG_HOME for ~/.config).
        #[arg(long, conflicts_with = "system")]
        user: bool,
        /// The machine's configuration, every user's (the default for pip,
        /// uv and the rest): npm's $PREFIX/etc/npmrc (`npm config get
        /// globalconfig`), the LXD client's global one for lxd-remote
        /// (--global is the same). cargo and yarn are set up per user only.
        #[arg(long, alias = "global")]
        system: bool,
        /// lxd: the project whose default profile gets the settings
        /// (without it, a standalone `pkgproxy` profile).
        #[arg(long, value_name = "NAME")]
        project: Option<String>,
        /// lxd-remote, lxd, snapcraft: show what would be done (they are
        /// done otherwise); with --undo, for the others: print the script
        /// that takes the setup back.
        #[arg(long, conflicts_with = "apply")]
        print: bool,
    },
    /// Say, item by item, whether pkgproxy could serve what a build needs
    /// with the network gone; succeeds only when everything is there.
    Check {
        #[command(subcommand)]
        needs: crate::needs::Needs,
        /// Print the daemon's JSON answers.
        #[arg(long, global = true)]
        json: bool,
    },
    /// Fetch, through the daemon, what a build needs and pkgproxy does not
    /// hold yet; then report as `check` does.
    Warm {
        #[command(subcommand)]
        needs: crate::needs::Needs,
        /// Print the daemon's JSON answers.
        #[arg(long, global = true)]
        json: bool,
    },
    /// Write a bundle of what builds need (or of the whole cache) for
    /// another pkgproxy to import: GROUPS are what `check` takes, each
    /// starting with its side (`go go.sum registry alpine:3.20`).
    Export {
        /// The bundle to write (a tar).
        #[arg(short, long, value_name = "FILE")]
        output: PathBuf,
        /// Everything the cache holds that it could serve offline, and the
        /// fleet's malicious-package records when a policy is in force.
        #[arg(long, conflicts_with = "groups")]
        all: bool,
        /// The fleet's malicious-package records in force (those of
        /// `[policy] osv` and of bundles taken in), besides the groups or
        /// alone: the importing pkgproxy refuses what they name.
        #[arg(long)]
        policy: bool,
        /// Sign the bundle with this private key (`pkgproxyctl keygen`
        /// writes one); the importing pkgproxy trusts its public key.
        #[arg(long, value_name = "KEY")]
        sign: Option<PathBuf>,
        /// What to bundle: SIDE ARGS..., as `check SIDE ARGS...` takes them.
        #[arg(trailing_var_arg = true, allow_hyphen_values = true, required_unless_present_any = ["all", "policy"])]
        groups: Vec<String>,
    },
    /// Take in a bundle another pkgproxy exported, signed by a key of
    /// `[bundles] trusted_keys`: every item is checked as a fetch would be;
    /// those refused are named, the others taken in.
    Import {
        /// The bundle.
        bundle: PathBuf,
        /// Take a bundle that is not signed, or signed by a key not
        /// trusted, on its word.
        #[arg(long)]
        trust_unsigned: bool,
    },
    /// Write a new key pair for signing bundles: KEY (private, mode 0600)
    /// and KEY.pub (what `[bundles] trusted_keys` names where bundles are
    /// imported).
    Keygen {
        /// Where the private key goes.
        #[arg(short, long, value_name = "KEY")]
        output: PathBuf,
    },
    /// Say what pkgproxy would do for a GET of URL now, and why, without
    /// fetching: a hit, a fetch (not cached, expired, superseded), a
    /// refusal (offline, a breaker open, the side's policy). Exits 1 when
    /// the request would not be answered: refused, or a URL whose path at
    /// pkgproxy cannot be known.
    Explain {
        /// `http://deb.debian.org/debian/...` as apt asks through pkgproxy,
        /// a path of pkgproxy's (`/go/...`, `/snap/...`, `/v2/...`,
        /// `/lxd/...`, `/cargo/...`, `/pypi/...`, `/npm/...`, `/maven/...`,
        /// `/rpm/...`),
        /// or an upstream's URL as a lockfile names it
        /// (`https://registry.npmjs.org/...`,
        /// `https://files.pythonhosted.org/...`,
        /// `https://static.crates.io/crates/...`,
        /// `https://proxy.golang.org/...`,
        /// `https://repo.maven.apache.org/maven2/...`), explained at
        /// pkgproxy's path for it.
        url: String,
        /// Print the daemon's JSON answer as it is.
        #[arg(long)]
        json: bool,
    },
    /// The fleet's policy (`[policy]`): the rules in force, one per line, and
    /// what they refused, by side and rule; `policy why SIDE NAME VERSION`
    /// says whether one release is served now, and why.
    Policy {
        #[command(subcommand)]
        command: Option<crate::policy_cmd::PolicyCommand>,
        /// Print the daemon's JSON answer as it is.
        #[arg(long)]
        json: bool,
    },
    /// Make the daemon read its configuration file again, as on SIGHUP; a file
    /// it cannot use is refused with the reason, and the settings in use stay.
    Reload,
    /// Print pkgproxyctl's completion script for a shell (bash, zsh, fish, ...).
    Completions {
        /// The shell.
        shell: clap_complete::Shell,
    },
    /// Print a manual page, in roff: pkgproxy's (section 8) or pkgproxyctl's (1).
    #[command(hide = true)]
    Manpage {
        /// Whose page.
        program: Program,
    },
}

/// The programs with a manual page.
#[derive(Debug, Clone, Copy, clap::ValueEnum)]
enum Program {
    Pkgproxy,
    Pkgproxyctl,
}

/// `command` as completions offer it: without its hidden commands and
/// flags (kept for tests and the snap's hooks, not for people to find).
fn offered(command: &clap::Command) -> clap::Command {
    let args = command.get_arguments().filter(|arg| !arg.is_hide_set()).cloned();
    let commands = command.get_subcommands().filter(|sub| !sub.is_hide_set()).map(offered);
    let offered = clap::Command::new(command.get_name().to_owned()).args(args).subcommands(commands);
    match command.get_about() {
        Some(about) => offered.about(about.clone()),
        None => offered,
    }
}

/// Writes the manual page of `program` to stdout.
fn manpage(program: Program) -> anyhow::Result<()> {
    let out = &mut std::io::stdout();
    match program {
        Program::Pkgproxy => crate::manual::pkgproxy(out)?,
        Program::Pkgproxyctl => crate::manual::pkgproxyctl(<Flags as clap::CommandFactory>::command(), out)?,
    }
    Ok(())
}

/// Runs pkgproxyctl.
pub fn main() -> ExitCode {
    let flags = Flags::parse_from(crate::args::normalise(std::env::args_os()));
    let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().expect("runtime");
    match runtime.block_on(run(flags)) {
        Ok(code) => code,
        Err(error) => {
            eprintln!("pkgproxyctl: {}", crate::report::said(&error));
            ExitCode::FAILURE
        }
    }
}

async fn run(flags: Flags) -> anyhow::Result<ExitCode> {
    let socket = |flag: Option<PathBuf>, variable: &str, name: &str| {
        flag.or_else(|| std::env::var_os(variable).filter(|path| !path.is_empty()).map(PathBuf::from))
            .unwrap_or_else(|| paths::ctl_socket(name))
    };
    let stats = ControlClient::new(socket(flags.stats_socket_path, "PKGPROXY_STATS_SOCKET_PATH", "stats.sock"));
    let admin = ControlClient::new(socket(flags.admin_socket_path, "PKGPROXY_ADMIN_SOCKET_PATH", "admin.sock"));
    match flags.command {
        Command::Completions { shell } => {
            let mut command = offered(&<Flags as clap::CommandFactory>::command());
            clap_complete::generate(shell, &mut command, "pkgproxyctl", &mut std::io::stdout());
        }
        Command::Manpage { program } => manpage(program)?,
        Command::Offline { mode, json, configure_hook, cluster } => {
            let answer = match mode {
                Some(mode) => {
                    // The wire's name, which every pkgproxy version takes.
                    let mode = mode.parse::<Mode>().map_or(mode, |mode| mode.as_str().to_owned());
                    let from = configure_hook.then(|| FROM_CONFIGURE_HOOK.to_string());
                    admin.set_offline(&ModeRequest { mode, from, cluster }).await?
                }
                // The mode is read on the stats socket: any user may.
                None => stats.offline().await?,
            };
            if json {
                println!("{}", serde_json::to_string_pretty(&answer)?);
            } else {
                print!("{}", render_offline(&answer));
            }
            if let Some(error) = &answer.persist_error {
                eprintln!("pkgproxyctl: the mode applies now but was not saved: {error}");
                return Ok(ExitCode::FAILURE);
            }
        }
        Command::Setup { client, host, addr, apply, undo, root, no_restart, user, system, project, print } => {
            let wanted = Wanted { apply, undo, print, restart: !no_restart };
            let client = setup_client(&client)?;
            let asked = match (user, system) {
                (true, _) => Some(Scope::User),
                (_, true) => Some(Scope::System),
                _ => None,
            };
            let scope = Scope::chosen(asked, client.name, client.procedure)?;
            return setup(&stats, client, host.as_deref(), addr.as_deref(), wanted, &root, scope, project.as_deref())
                .await;
        }
        Command::Cache { command } => {
            if !crate::cache_cmd::run(command, &admin).await? {
                return Ok(ExitCode::FAILURE);
            }
        }
        Command::Reload => {
            let _: serde_json::Value = admin.json(http::Method::POST, pkgproxy_control::RELOAD_PATH, None).await?;
            println!("configuration reloaded");
        }
        Command::Policy { command, json } => return crate::policy_cmd::run(command, json, &stats).await,
        Command::Check { needs, json } => return crate::needs::check(&stats, &needs, json).await,
        Command::Warm { needs, json } => return crate::needs::warm(&stats, &admin, &needs, json).await,
        Command::Export { output, all, policy, sign, groups } => {
            let groups = crate::bundle::groups(&groups)?;
            let stats = groups.stats_socket.map_or(stats, ControlClient::new);
            let admin = groups.admin_socket.map_or(admin, ControlClient::new);
            let sign = groups.sign.or(sign);
            let what = crate::bundle::Exported { all, policy };
            return crate::bundle::export(&stats, &admin, &groups.needs, what, &output, sign.as_deref()).await;
        }
        Command::Import { bundle, trust_unsigned } => {
            return crate::bundle::import(&admin, &bundle, trust_unsigned).await
        }
        Command::Keygen { output } => return crate::bundle::keygen(&output),
        Command::Explain { url, json } => {
            let query = percent_encoding::utf8_percent_encode(&url, percent_encoding::NON_ALPHANUMERIC);
            let path = format!("{}?url={query}", pkgproxy_control::EXPLAIN_PATH);
            let told: Explanation = stats.json(http::Method::GET, &path, None).await?;
            if json {
                println!("{}", serde_json::to_string_pretty(&told)?);
            } else {
                print!("{}", render_explanation(&told));
            }
            if !answered(&told) {
                return Ok(ExitCode::FAILURE);
            }
        }
        Command::Info { json } => {
            let info = stats.info().await?;
            if json {
                println!("{}", serde_json::to_string_pretty(&info)?);
            } else {
                print!("{}", render_info(&info));
            }
        }
    }
    Ok(ExitCode::SUCCESS)
}

/// `http://HOST:PORT` for a daemon listening on `listen`: `host` if given,
/// else the listening address, or this machine's name for a wildcard one.
/// What `setup` was asked to do.
#[derive(Debug, Clone, Copy)]
struct Wanted {
    apply: bool,
    undo: bool,
    print: bool,
    restart: bool,
}

/// The modes `offline` takes, as people say them; `never`, the original's
/// word for online, is taken too but neither offered nor shown.
fn offline_modes() -> clap::builder::PossibleValuesParser {
    let said = Mode::ALL.into_iter().map(|mode| clap::builder::PossibleValue::new(mode.word()));
    let hidden = clap::builder::PossibleValue::new(Mode::Never.as_str()).hide(true);
    clap::builder::PossibleValuesParser::new(said.chain([hidden]))
}

/// The clients `setup` knows, each side's, with what each is.
fn setup_clients() -> clap::builder::PossibleValuesParser {
    let clients = pkgproxy_sides::setup_clients();
    clap::builder::PossibleValuesParser::new(
        clients.map(|client| clap::builder::PossibleValue::new(client.name).help(client.about)),
    )
}

/// The client `setup` was asked for, by its name.
fn setup_client(name: &str) -> anyhow::Result<&'static SetupClient> {
    pkgproxy_sides::setup_clients().find(|client| client.name == name).with_context(|| format!("no client {name:?}"))
}

/// What the flags ask `procedure` to do.
fn setup_action(procedure: &dyn Procedure, wanted: Wanted) -> Action {
    match (wanted.apply, wanted.undo, wanted.print) {
        (true, _, _) => Action::Apply,
        (_, true, true) => Action::PrintUndo,
        (_, true, false) => Action::Undo,
        (_, false, true) => Action::Print,
        (_, false, false) => procedure.unasked(),
    }
}

/// `setup CLIENT`: for pkgproxy at `--addr` (no daemon asked, but for a
/// client that wants pkgproxy's details, which the pkgproxy there tells),
/// or at the daemon's own address.
#[allow(clippy::too_many_arguments)]
async fn setup(
    stats: &ControlClient,
    client: &SetupClient,
    host: Option<&str>,
    addr: Option<&str>,
    wanted: Wanted,
    root: &std::path::Path,
    scope: Scope,
    project: Option<&str>,
) -> anyhow::Result<ExitCode> {
    let procedure = client.procedure;
    let info = match addr {
        Some(_) => None,
        None => Some(stats.info().await?),
    };
    let base = match (addr, &info) {
        (Some(addr), _) => given_base(addr)?,
        (None, Some(info)) => {
            let host = host.map(str::to_owned).or_else(|| procedure.default_host());
            base_url(&info.listen_address, host.as_deref())?
        }
        (None, None) => unreachable!("a daemon was asked when no address was given"),
    };
    let details = match (procedure.wants_details(), &info, addr) {
        (false, _, _) => None,
        (true, Some(info), _) => {
            Some(Details { certificate_pem: info.certificate_pem.clone(), remotes: info.lxd_remotes.clone() })
        }
        (true, None, Some(addr)) => Some(crate::listener::details(addr).await?),
        (true, None, None) => unreachable!("a daemon was asked when no address was given"),
    };
    let target = Target::new(root, !wanted.restart);
    let setup = Setup { base: &base, target: &target, scope, project, details: details.as_ref() };
    procedure.run(client.name, setup_action(procedure, wanted), &setup)?;
    Ok(ExitCode::SUCCESS)
}

/// `http://HOST:PORT` from `--addr HOST:PORT`.
fn given_base(addr: &str) -> anyhow::Result<String> {
    let (host, port) = addr.rsplit_once(':').with_context(|| format!("--addr {addr:?}: give HOST:PORT"))?;
    anyhow::ensure!(
        !host.is_empty() && port.parse::<u16>().is_ok_and(|port| port > 0),
        "--addr {addr:?}: give HOST:PORT, e.g. 192.168.1.10:3142"
    );
    // It is written into shell scripts and configuration files: a host
    // name, an IPv4 address or a bracketed IPv6 one, nothing else.
    let name = |c: char| c.is_ascii_alphanumeric() || c == '.' || c == '-';
    let host_ok = match host.strip_prefix('[').and_then(|rest| rest.strip_suffix(']')) {
        Some(ipv6) => ipv6.parse::<std::net::Ipv6Addr>().is_ok(),
        None => host.chars().all(name),
    };
    anyhow::ensure!(host_ok, "--addr {addr:?}: {host:?} is not a host name or IP address");
    Ok(format!("http://{addr}"))
}

fn base_url(listen: &str, host: Option<&str>) -> anyhow::Result<String> {
    let address: std::net::SocketAddr = listen.parse().with_context(|| format!("listen address {listen:?}"))?;
    let host = match host {
        Some(host) => host.to_string(),
        None if address.ip().is_unspecified() => std::fs::read_to_string("/proc/sys/kernel/hostname")
            .map(|name| name.trim().to_string())
            .unwrap_or_else(|_| "localhost".to_string()),
        None if address.is_ipv6() => format!("[{}]", address.ip()),
        None => address.ip().to_string(),
    };
    Ok(format!("http://{host}:{}", address.port()))
}

fn render_offline(answer: &OfflineReport) -> String {
    let mut out = format!("offline mode: {}\n", Mode::word_for(&answer.mode));
    if answer.upstreams.is_empty() {
        out += "every upstream's breaker is closed\n";
    }
    for upstream in &answer.upstreams {
        let left = upstream.retry_after_seconds.map(|s| format!(", {s} s left")).unwrap_or_default();
        out += &format!("  {}: {}{left}\n", upstream.host, upstream.state);
    }
    match answer.persistent {
        true => out += &format!("after a restart: {}\n", Mode::word_for(&answer.restart_mode)),
        false => {
            out += &format!(
                "after a restart: {} (nothing keeps a run-time switch outside pkgproxy's snap: set --offline-mode to keep one)\n",
                Mode::word_for(&answer.restart_mode)
            )
        }
    }
    out
}

fn render_info(info: &Info) -> String {
    let mut out = String::new();
    out += &format!(
        "pkgproxy {}, up {}, listening on {}\n",
        info.version,
        humantime::format_duration(std::time::Duration::from_secs(info.uptime_seconds)),
        info.listen_address,
    );
    out += &format!(
        "cache:    {}: {} entries, {}, {} fetches in progress\n",
        info.cache_dir,
        info.cache.get(CacheGauge::Entries),
        size(info.cache.get(CacheGauge::SizeBytes)),
        info.cache.get(CacheGauge::FetchesInProgress),
    );
    let quota = match info.cache.get(CacheGauge::MaxSizeBytes) {
        0 => "no quota".to_string(),
        max => format!("quota {}", size(max)),
    };
    let pressure = match info.cache.get(CacheGauge::DiskPressure) {
        0 => "",
        _ => ", DISK PRESSURE: downloads may be passed through uncached",
    };
    out += &format!(
        "disk:     {} on disk, {quota}, {} free{pressure}
",
        size(info.cache.get(CacheGauge::DiskBytes)),
        size(info.cache.get(CacheGauge::FreeBytes)),
    );
    for (name, side) in &info.sides {
        let n = |counter| side.get(counter);
        out += &format!(
            "{:<9} {} requests: {} hits, {} misses, {} revalidated, {} stale, {} refused, {} failed; {} from cache, {} from upstream\n",
            format!("{name}:"),
            n(SideCounter::Requests),
            n(SideCounter::Hits),
            n(SideCounter::Misses),
            n(SideCounter::Revalidations),
            n(SideCounter::StaleServed),
            n(SideCounter::Refused),
            n(SideCounter::Failed),
            size(n(SideCounter::BytesFromCache)),
            size(n(SideCounter::BytesFromUpstream)),
        );
        if let Some(own) = info.own_requests.get(name).filter(|own| own.get(SideCounter::Requests) > 0) {
            let n = |counter| own.get(counter);
            out += &format!(
                "{:<9} and {} of pkgproxy's own (check, warm, fetch-ahead): {} hits, {} misses, {} refused, {} failed\n",
                "",
                n(SideCounter::Requests),
                n(SideCounter::Hits),
                n(SideCounter::Misses),
                n(SideCounter::Refused),
                n(SideCounter::Failed),
            );
        }
    }
    for (group, counts) in &info.learned {
        let counts: Vec<String> =
            counts.iter().map(|(name, value)| format!("{value} {}", name.replace('_', " "))).collect();
        out += &format!("{}: {}\n", group.replace('_', " "), counts.join(", "));
    }
    out += &format!("offline mode: {}\n", Mode::word_for(&info.offline.mode));
    if let Some(cluster) = &info.cluster {
        out += &format!(
            "cluster: node {} on {} bucket {}: {}; {} fetches answered from the store, {} bodies published, {} damaged bodies removed, {} store errors\n",
            cluster.node,
            cluster.endpoint,
            cluster.bucket,
            cluster.state,
            cluster.shared_hits,
            cluster.published,
            cluster.corrupt,
            cluster.errors,
        );
    }
    for suite in &info.apt_valid_until {
        out += &format!("warning: {}\n", suite.warning_utc());
    }
    let upstream = |counter| info.upstream.get(counter);
    out += &format!(
        "upstream: {} requests over {} connections, {} tunnels, {} refused by address policy\n",
        upstream(UpstreamCounter::Requests),
        upstream(UpstreamCounter::Connections),
        upstream(UpstreamCounter::Tunnels),
        upstream(UpstreamCounter::Refused),
    );
    for shadow in &info.mirrors {
        let n = |counter| shadow.counters.get(counter);
        out += &format!(
            "mirror {} -> {}: {} sent, {} answered, {} failed; skipped {} (in flight), {} (size), {} (offline); {} compared, {} differing\n",
            shadow.name,
            shadow.target,
            n(ShadowCounter::Sent),
            n(ShadowCounter::Answered),
            n(ShadowCounter::Failed),
            n(ShadowCounter::SkippedInflight),
            n(ShadowCounter::SkippedSize),
            n(ShadowCounter::SkippedOffline),
            n(ShadowCounter::Compared),
            n(ShadowCounter::Differing),
        );
    }
    for pool in &info.pools {
        out += &format!("pool {}:\n", pool.name);
        for instance in &pool.instances {
            let state = match instance.penalised_for_ms {
                Some(ms) => format!("penalised for {:.1} s", ms as f64 / 1000.0),
                None => "healthy".to_string(),
            };
            let failures = match instance.failures {
                0 => "no failures".to_string(),
                1 => "failed once".to_string(),
                times => format!("failed {times} times in a row"),
            };
            out += &format!("  {}: {state}, {failures}, {} in flight\n", instance.url, instance.in_flight);
        }
    }
    out
}

/// A byte count for people.
fn size(bytes: u64) -> String {
    const UNITS: [&str; 5] = ["B", "KiB", "MiB", "GiB", "TiB"];
    let mut value = bytes as f64;
    let mut unit = 0;
    while value >= 1024.0 && unit < UNITS.len() - 1 {
        value /= 1024.0;
        unit += 1;
    }
    if unit == 0 {
        format!("{bytes} B")
    } else {
        format!("{value:.1} {}", UNITS[unit])
    }
}

/// Whether the request `told` of would be answered: not refused, and
/// known.
fn answered(told: &Explanation) -> bool {
    !matches!(told.action.as_str(), "refuse" | "unknown")
}

/// What `explain` prints: the action and why, then the details.
fn render_explanation(told: &Explanation) -> String {
    let mut out = match (told.action.as_str(), told.reason.as_deref()) {
        // A side's refusal says "refused: " itself.
        ("refuse", Some(reason)) => format!("refused: {}\n", reason.strip_prefix("refused: ").unwrap_or(reason)),
        (action, Some(reason)) => format!("{action}: {reason}\n"),
        (action, None) => format!("{action}\n"),
    };
    let lines = [
        ("side", told.side.clone()),
        ("served at", told.served_at.clone()),
        ("key", told.key.clone()),
        ("answer", told.cache.clone()),
    ];
    for (name, value) in lines {
        if let Some(value) = value {
            out.push_str(&format!("  {name}: {value}\n"));
        }
    }
    if !told.upstream.is_empty() && told.action != "hit" {
        out.push_str(&format!("  upstream: {}\n", told.upstream.join(", ")));
    }
    for withheld in &told.withheld {
        out.push_str(&format!("  served without: {withheld}\n"));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_read_well() {
        assert_eq!(size(512), "512 B");
        assert_eq!(size(1536), "1.5 KiB");
        assert_eq!(size(20 * 1024 * 1024), "20.0 MiB");
    }

    #[test]
    fn info_renders_every_side_line() {
        let json = serde_json::json!({
            "version": "0.1.0", "uptime_seconds": 61, "listen_address": "[::]:3142", "cache_dir": "/c",
            "cache": {"entries": 2, "size_bytes": 2048, "fetches_in_progress": 0, "disk_bytes": 4096,
                      "max_size_bytes": 0, "free_bytes": 1000000, "disk_pressure": 0},
            "sides": {"apt": {"requests": 3, "hits": 2, "misses": 1, "revalidations": 0, "stale_served": 0,
                              "refused": 0, "failed": 0, "bytes_from_cache": 10, "bytes_from_upstream": 20}},
            "upstream": {"requests": 1, "connections": 1, "tunnels": 0, "refused": 0,
                         "mirror_requests": 0, "mirror_connections": 0, "peer_requests": 0, "peer_connections": 0},
            "pools": [], "mirrors": [], "offline": {"mode": "never", "upstreams": []},
            "apt_index": {"suites": 1, "pool_files": 4}
        });
        let info: Info = serde_json::from_value(json).unwrap();
        let text = render_info(&info);
        assert!(text.contains("apt:      3 requests: 2 hits, 1 misses"), "{text}");
        assert!(text.contains("2 entries, 2.0 KiB"), "{text}");
        assert!(text.contains("disk:     4.0 KiB on disk, no quota"), "{text}");
        assert!(text.contains("up 1m 1s"), "{text}");
        assert!(text.contains("apt index: 4 pool files, 1 suites"), "{text}");
    }

    #[test]
    fn a_refusal_says_refused_once_and_an_upstream_s_url_where_pkgproxy_serves_it() {
        let told = Explanation {
            url: "https://registry.npmjs.org/ms/-/ms-2.1.3.tgz".into(),
            side: Some("npm".into()),
            served_at: Some("/npm/ms/-/ms-2.1.3.tgz".into()),
            key: Some("npm/npm/tarball/ms/ms-2.1.3.tgz".into()),
            action: "refuse".into(),
            cache: None,
            reason: Some("offline".into()),
            upstream: Vec::new(),
            withheld: Vec::new(),
        };
        let text = render_explanation(&told);
        assert!(text.starts_with("refused: offline\n  side: npm\n  served at: /npm/ms/-/ms-2.1.3.tgz\n"), "{text}");
        let told = Explanation { reason: Some("refused: not a known archive host".into()), ..told };
        assert!(render_explanation(&told).starts_with("refused: not a known archive host\n"));
        assert!(!answered(&told));
        assert!(answered(&Explanation { action: "fetch".into(), ..told }));
    }

    #[test]
    fn info_missing_a_counter_is_an_error_not_a_zero() {
        let json = serde_json::json!({
            "version": "0.1.0", "uptime_seconds": 61, "listen_address": "[::]:3142", "cache_dir": "/c",
            "cache": {"entries": 2, "size_bytes": 2048, "fetches_in_progress": 0, "disk_bytes": 4096,
                      "max_size_bytes": 0, "free_bytes": 1000000, "disk_pressure": 0},
            "sides": {"apt": {"requests": 3}},
            "upstream": {"requests": 1, "connections": 1, "tunnels": 0, "refused": 0,
                         "mirror_requests": 0, "mirror_connections": 0, "peer_requests": 0, "peer_connections": 0},
            "pools": [], "mirrors": [], "offline": {"mode": "never", "upstreams": []}
        });
        let error = serde_json::from_value::<Info>(json).unwrap_err().to_string();
        assert!(error.contains("hits"), "{error}");
    }
}
