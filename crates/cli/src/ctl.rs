//! `pkgproxyctl`: asks a running pkgproxy over its control sockets and prints
//! the answer for people (or as JSON with `-json`).

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::{bail, Context};
use bytes::Bytes;
use clap::{Parser, Subcommand};
use http::Method;
use http_body_util::{BodyExt, Full};
use hyper_util::rt::TokioIo;
use serde_json::Value;

use crate::paths;

/// pkgproxyctl's flags.
#[derive(Debug, Parser)]
#[command(name = "pkgproxyctl", version, about = "Inspect and control a running pkgproxy.")]
struct Flags {
    /// The daemon's read-only control socket (as the daemon's -stats-socket-path).
    #[arg(long, global = true, env = "PKGPROXY_STATS_SOCKET_PATH", value_name = "PATH")]
    stats_socket_path: Option<PathBuf>,

    /// The daemon's read-write control socket (as the daemon's -admin-socket-path).
    #[arg(long, global = true, env = "PKGPROXY_ADMIN_SOCKET_PATH", value_name = "PATH")]
    admin_socket_path: Option<PathBuf>,

    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Show the daemon's version, cache and counters.
    Info {
        /// Print the daemon's JSON answer as it is.
        #[arg(long)]
        json: bool,
    },
    /// Show the offline mode, or set it: never, offline or store-overloaded.
    Offline {
        /// The mode to put in effect; without it, the mode is shown.
        mode: Option<String>,
        /// Re-apply the snap's offline-mode setting from its configure hook
        /// (an automatic offline override then stays in effect).
        #[arg(long, hide = true, requires = "mode")]
        configure_hook: bool,
        /// Print the daemon's JSON answer as it is.
        #[arg(long)]
        json: bool,
    },
    /// Print what to set for a client to use this pkgproxy: `go` (the
    /// environment) or `apt` (a line for /etc/apt/apt.conf.d/).
    Setup {
        /// The client.
        client: Client,
        /// The host clients reach pkgproxy at (default: from its listening
        /// address, or this machine's name when it listens on every address).
        #[arg(long, value_name = "HOST")]
        host: Option<String>,
    },
}

/// The clients `setup` knows.
#[derive(Debug, Clone, Copy, clap::ValueEnum)]
enum Client {
    /// The go command.
    Go,
    /// apt.
    Apt,
}

/// Runs pkgproxyctl.
pub fn main() -> ExitCode {
    let flags = Flags::parse_from(crate::args::normalise(std::env::args_os()));
    let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().expect("runtime");
    match runtime.block_on(run(flags)) {
        Ok(code) => code,
        Err(error) => {
            eprintln!("pkgproxyctl: {error:#}");
            ExitCode::FAILURE
        }
    }
}

async fn run(flags: Flags) -> anyhow::Result<ExitCode> {
    let stats_socket = flags.stats_socket_path.unwrap_or_else(paths::default_stats_socket);
    let admin_socket = flags.admin_socket_path.unwrap_or_else(paths::default_admin_socket);
    match flags.command {
        Command::Offline { mode, json, configure_hook } => {
            let answer = match mode {
                Some(mode) => {
                    let body = match configure_hook {
                        true => serde_json::json!({ "mode": mode, "from": "configure-hook" }),
                        false => serde_json::json!({ "mode": mode }),
                    }
                    .to_string();
                    request(&admin_socket, Method::PUT, "/pkgproxy/v1/offline", Some(body)).await?
                }
                None => request(&admin_socket, Method::GET, "/pkgproxy/v1/offline", None).await?,
            };
            if json {
                println!("{}", serde_json::to_string_pretty(&answer)?);
            } else {
                print!("{}", render_offline(&answer));
            }
            if let Some(error) = answer["persist_error"].as_str() {
                eprintln!("pkgproxyctl: the mode applies now but was not saved: {error}");
                return Ok(ExitCode::FAILURE);
            }
            return Ok(ExitCode::SUCCESS);
        }
        Command::Setup { client, host } => {
            let info = get(&stats_socket, "/pkgproxy/v1/info").await?;
            let listen = info["listen_address"].as_str().context("the daemon did not say where it listens")?;
            print!("{}", setup(client, &base_url(listen, host.as_deref())?));
        }
        Command::Info { json } => {
            let info = get(&stats_socket, "/pkgproxy/v1/info").await?;
            if json {
                println!("{}", serde_json::to_string_pretty(&info)?);
            } else {
                print!("{}", render_info(&info));
            }
        }
    }
    Ok(ExitCode::SUCCESS)
}

/// What a client sets to use pkgproxy at `base` (`http://HOST:PORT`).
fn setup(client: Client, base: &str) -> String {
    match client {
        Client::Go => format!(
            "# Go modules through pkgproxy; go checks sums through it too (GOSUMDB keeps its default)\nexport GOPROXY={base}/go\n"
        ),
        Client::Apt => format!("Acquire::http::Proxy \"{base}/\";\n"),
    }
}

/// `http://HOST:PORT` for a daemon listening on `listen`: `host` if given,
/// else the listening address, or this machine's name for a wildcard one.
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

/// `GET path` on a control socket, answered with JSON.
async fn get(socket: &Path, path: &str) -> anyhow::Result<Value> {
    request(socket, Method::GET, path, None).await
}

/// A request on a control socket, answered with JSON.
async fn request(socket: &Path, method: Method, path: &str, body: Option<String>) -> anyhow::Result<Value> {
    let stream = tokio::net::UnixStream::connect(socket)
        .await
        .with_context(|| format!("cannot reach pkgproxy at {} (is it running?)", socket.display()))?;
    let (mut sender, connection) = hyper::client::conn::http1::handshake(TokioIo::new(stream)).await?;
    tokio::spawn(connection);
    let request = http::Request::builder()
        .method(method)
        .uri(path)
        .header("host", "pkgproxy")
        .header("content-type", "application/json")
        .body(Full::new(Bytes::from(body.unwrap_or_default())))?;
    let response = sender.send_request(request).await?;
    let status = response.status();
    let body = response.into_body().collect().await?.to_bytes();
    let value: Value = serde_json::from_slice(&body).with_context(|| format!("{path} did not answer JSON"))?;
    if !status.is_success() {
        bail!("{path}: {status}: {}", value["error"].as_str().unwrap_or("no reason given"));
    }
    Ok(value)
}

fn render_offline(answer: &Value) -> String {
    let text = |v: &Value| v.as_str().unwrap_or("?").to_string();
    let mut out = format!("offline mode: {}\n", text(&answer["mode"]));
    let upstreams = answer["upstreams"].as_array().cloned().unwrap_or_default();
    if upstreams.is_empty() {
        out += "every upstream's breaker is closed\n";
    }
    for upstream in upstreams {
        let left = upstream["retry_after_seconds"].as_u64().map(|s| format!(", {s} s left")).unwrap_or_default();
        out += &format!("  {}: {}{left}\n", text(&upstream["host"]), text(&upstream["state"]));
    }
    if answer["persistent"].as_bool() == Some(true) {
        out += &format!("after a restart: {}\n", text(&answer["restart_mode"]));
    } else {
        out += &format!(
            "after a restart: {} (nothing keeps a run-time switch outside pkgproxy's snap: set -offline-mode to keep one)\n",
            text(&answer["restart_mode"])
        );
    }
    out
}

fn render_info(info: &Value) -> String {
    let n = |v: &Value| v.as_u64().unwrap_or(0);
    let mut out = String::new();
    out += &format!(
        "pkgproxy {}, up {}, listening on {}\n",
        info["version"].as_str().unwrap_or("?"),
        humantime::format_duration(std::time::Duration::from_secs(n(&info["uptime_seconds"]))),
        info["listen_address"].as_str().unwrap_or("?"),
    );
    let cache = &info["cache"];
    out += &format!(
        "cache:    {}: {} entries, {}, {} fetches in progress\n",
        info["cache_dir"].as_str().unwrap_or("?"),
        n(&cache["entries"]),
        size(n(&cache["size_bytes"])),
        n(&cache["fetches_in_progress"]),
    );
    if let Some(sides) = info["sides"].as_object() {
        for (name, side) in sides {
            out += &format!(
                "{:<9} {} requests: {} hits, {} misses, {} revalidated, {} stale, {} refused; {} from cache, {} from upstream\n",
                format!("{name}:"),
                n(&side["requests"]),
                n(&side["hits"]),
                n(&side["misses"]),
                n(&side["revalidations"]),
                n(&side["stale_served"]),
                n(&side["refused"]),
                size(n(&side["bytes_from_cache"])),
                size(n(&side["bytes_from_upstream"])),
            );
        }
    }
    let apt_index = &info["apt_index"];
    out +=
        &format!("apt index: {} suites, {} pool files known\n", n(&apt_index["suites"]), n(&apt_index["pool_files"]));
    out += &format!("offline mode: {}\n", info["offline"]["mode"].as_str().unwrap_or("?"));
    let upstream = &info["upstream"];
    out += &format!(
        "upstream: {} requests over {} connections, {} tunnels, {} refused by address policy\n",
        n(&upstream["requests"]),
        n(&upstream["connections"]),
        n(&upstream["tunnels"]),
        n(&upstream["refused"]),
    );
    for mirror in info["mirrors"].as_array().into_iter().flatten() {
        out += &format!(
            "mirror {} -> {}: {} sent, {} answered, {} failed; skipped {} (in flight), {} (size), {} (offline); {} compared, {} differing\n",
            mirror["name"].as_str().unwrap_or("?"),
            mirror["target"].as_str().unwrap_or("?"),
            n(&mirror["sent"]),
            n(&mirror["answered"]),
            n(&mirror["failed"]),
            n(&mirror["skipped_inflight"]),
            n(&mirror["skipped_size"]),
            n(&mirror["skipped_offline"]),
            n(&mirror["compared"]),
            n(&mirror["differing"]),
        );
    }
    for pool in info["pools"].as_array().into_iter().flatten() {
        out += &format!("pool {}:\n", pool["name"].as_str().unwrap_or("?"));
        for instance in pool["instances"].as_array().into_iter().flatten() {
            let state = match instance["penalised_for_ms"].as_u64() {
                Some(ms) => format!("penalised for {:.1} s", ms as f64 / 1000.0),
                None => "healthy".to_string(),
            };
            let failures = match n(&instance["failures"]) {
                0 => "no failures".to_string(),
                1 => "failed once".to_string(),
                times => format!("failed {times} times in a row"),
            };
            out += &format!(
                "  {}: {state}, {failures}, {} in flight\n",
                instance["url"].as_str().unwrap_or("?"),
                n(&instance["in_flight"]),
            );
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
        let info = serde_json::json!({
            "version": "0.1.0", "uptime_seconds": 61, "listen_address": "[::]:3142", "cache_dir": "/c",
            "cache": {"entries": 2, "size_bytes": 2048, "fetches_in_progress": 0},
            "sides": {"apt": {"requests": 3, "hits": 2, "misses": 1, "bytes_from_cache": 10, "bytes_from_upstream": 20}},
            "upstream": {"requests": 1, "connections": 1, "tunnels": 0, "refused": 0}
        });
        let text = render_info(&info);
        assert!(text.contains("apt:      3 requests: 2 hits, 1 misses"), "{text}");
        assert!(text.contains("2 entries, 2.0 KiB"), "{text}");
        assert!(text.contains("up 1m 1s"), "{text}");
    }
}
