//! Drives an [`AutoOffline`] from the real host: a look every second (the
//! settle timer and the rfkill files need one anyway), and at once when the
//! kernel announces a route change over rtnetlink.

use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
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
    // SAFETY: plain socket(2) and bind(2) calls with a zeroed, then filled,
    // sockaddr_nl of the right size; the descriptor is owned from here on,
    // and registered with the reactor for as long as the AsyncFd holds it.
    unsafe {
        let raw = libc::socket(
            libc::AF_NETLINK,
            libc::SOCK_RAW | libc::SOCK_NONBLOCK | libc::SOCK_CLOEXEC,
            libc::NETLINK_ROUTE,
        );
        if raw < 0 {
            return Err(std::io::Error::last_os_error());
        }
        let fd = OwnedFd::from_raw_fd(raw);
        let mut address: libc::sockaddr_nl = std::mem::zeroed();
        address.nl_family = libc::AF_NETLINK as libc::sa_family_t;
        address.nl_groups = (libc::RTMGRP_IPV4_ROUTE | libc::RTMGRP_IPV6_ROUTE) as u32;
        let bound = libc::bind(
            fd.as_raw_fd(),
            &address as *const libc::sockaddr_nl as *const libc::sockaddr,
            std::mem::size_of::<libc::sockaddr_nl>() as libc::socklen_t,
        );
        if bound < 0 {
            return Err(std::io::Error::last_os_error());
        }
        // The descriptor is owned by the AsyncFd and stays open as long as it.
        AsyncFd::register_with_interest(fd, tokio::io::Interest::READABLE).map_err(std::io::Error::from)
    }
}

/// Reads and discards the pending announcements: which route changed does
/// not matter, the next look decides.
fn drain(fd: &OwnedFd) {
    let mut buf = [0u8; 8192];
    loop {
        // SAFETY: recv(2) into a stack buffer of the length given.
        let n = unsafe { libc::recv(fd.as_raw_fd(), buf.as_mut_ptr().cast(), buf.len(), libc::MSG_DONTWAIT) };
        if n <= 0 {
            return;
        }
    }
}
