//! Drives an [`AutoOffline`] from the real host: a look every second (the
//! settle timer and the rfkill files need one anyway), and at once when the
//! kernel announces a route change over rtnetlink.

use std::os::fd::OwnedFd;
use std::sync::Arc;
use std::time::Duration;

use tokio::io::unix::AsyncFd;
use tokio::time::Instant;

use super::{AutoOffline, HostProbe};

/// How often the host is looked at without a route announcement.
const POLL: Duration = Duration::from_secs(1);

/// Watches the host until the task is dropped.
pub async fn watch(auto: Arc<AutoOffline>, probe: impl HostProbe) {
    let routes = match route_announcements() {
        Ok(fd) => Some(fd),
        Err(error) => {
            tracing::info!(%error, "no rtnetlink route announcements; looking every second");
            None
        }
    };
    loop {
        auto.observe(Instant::now(), probe.look());
        match &routes {
            Some(fd) => {
                tokio::select! {
                    _ = tokio::time::sleep(POLL) => {}
                    ready = fd.readable() => {
                        if let Ok(mut guard) = ready {
                            drain(fd.get_ref());
                            guard.clear_ready();
                        }
                    }
                }
            }
            None => tokio::time::sleep(POLL).await,
        }
    }
}

/// A netlink socket subscribed to IPv4 and IPv6 route changes.
fn route_announcements() -> std::io::Result<AsyncFd<OwnedFd>> {
    use rustix::net::{bind, netlink, socket_with, AddressFamily, SocketFlags, SocketType};
    let flags = SocketFlags::NONBLOCK | SocketFlags::CLOEXEC;
    // rtnetlink is netlink's protocol 0, which rustix spells `None`.
    let fd = socket_with(AddressFamily::NETLINK, SocketType::RAW, flags, None)?;
    let groups = (libc::RTMGRP_IPV4_ROUTE | libc::RTMGRP_IPV6_ROUTE) as u32;
    bind(&fd, &netlink::SocketAddrNetlink::new(0, groups))?;
    // SAFETY: the AsyncFd takes the OwnedFd itself, so the descriptor is
    // open, and the same one, for as long as the reactor watches it.
    #[allow(unsafe_code)]
    let registered = unsafe { AsyncFd::register_with_interest(fd, tokio::io::Interest::READABLE) };
    registered.map_err(std::io::Error::from)
}

/// Reads and discards the pending announcements: which route changed does
/// not matter, the next look decides.
fn drain(fd: &OwnedFd) {
    let mut buf = [0u8; 8192];
    while let Ok((_, 1..)) = rustix::net::recv(fd, &mut buf, rustix::net::RecvFlags::DONTWAIT) {}
}
