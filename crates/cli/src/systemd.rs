//! The daemon under systemd: `READY=1`, `STATUS=` and `STOPPING=1` on
//! `NOTIFY_SOCKET` (`Type=notify`), and the listening sockets systemd
//! passes (socket activation: `LISTEN_FDS`, `LISTEN_PID`,
//! `LISTEN_FDNAMES`). Without systemd, both are no-ops.

use std::os::fd::{FromRawFd, RawFd};
use std::os::unix::net::UnixListener;

use anyhow::{bail, Context};

/// The sockets systemd passed, by role. A socket named `stats` or `admin`
/// (`FileDescriptorName=` in the socket unit) is that control socket; any
/// other is the proxy listener, of which there may be one.
#[derive(Debug, Default)]
pub struct Passed {
    /// The proxy listener (`-addr` is not bound then).
    pub proxy: Option<std::net::TcpListener>,
    /// The stats socket.
    pub stats: Option<UnixListener>,
    /// The admin socket.
    pub admin: Option<UnixListener>,
}

/// Takes the sockets systemd passed to this process, if any.
pub fn passed_sockets() -> anyhow::Result<Passed> {
    let fds = sd_notify::listen_fds_with_names().context("the sockets passed by systemd")?;
    let mut passed = Passed::default();
    for (fd, name) in fds {
        match name.as_str() {
            "stats" => passed.stats = Some(unix_listener(fd, &name)?),
            "admin" => passed.admin = Some(unix_listener(fd, &name)?),
            _ if passed.proxy.is_some() => bail!("systemd passed more than one proxy socket (fd {fd}, {name:?})"),
            _ => passed.proxy = Some(tcp_listener(fd, &name)?),
        }
    }
    Ok(passed)
}

/// The socket at `fd`, checked to be a listening socket of `domain`.
fn listening(fd: RawFd, name: &str, domain: socket2::Domain) -> anyhow::Result<socket2::Socket> {
    // SAFETY: systemd passed `fd` to this process for it to own; it is
    // taken once, here. Owning an inherited descriptor is unsafe in every
    // wrapper (std's, rustix's, listenfd's inside), so it stays spelled here.
    #[allow(unsafe_code)]
    let socket = unsafe { socket2::Socket::from_raw_fd(fd) };
    let local = socket.local_addr().with_context(|| format!("passed socket {name:?} (fd {fd})"))?;
    let stream = socket.r#type().is_ok_and(|kind| kind == socket2::Type::STREAM);
    let of_domain =
        local.domain() == domain || (domain == socket2::Domain::IPV4 && local.domain() == socket2::Domain::IPV6);
    if !stream || !of_domain {
        bail!("passed socket {name:?} (fd {fd}) is not a listening stream socket of the kind expected");
    }
    socket.set_nonblocking(true).with_context(|| format!("passed socket {name:?}"))?;
    Ok(socket)
}

fn tcp_listener(fd: RawFd, name: &str) -> anyhow::Result<std::net::TcpListener> {
    Ok(listening(fd, name, socket2::Domain::IPV4)?.into())
}

fn unix_listener(fd: RawFd, name: &str) -> anyhow::Result<UnixListener> {
    Ok(listening(fd, name, socket2::Domain::UNIX)?.into())
}

/// Tells systemd the daemon serves, with a one-line summary.
pub fn ready(status: &str) {
    notify(&[sd_notify::NotifyState::Ready, sd_notify::NotifyState::Status(status)]);
}

/// Tells systemd the daemon is stopping.
pub fn stopping() {
    notify(&[sd_notify::NotifyState::Stopping, sd_notify::NotifyState::Status("stopping")]);
}

fn notify(states: &[sd_notify::NotifyState]) {
    if let Err(error) = sd_notify::notify(states) {
        tracing::warn!(%error, "cannot notify systemd");
    }
}
