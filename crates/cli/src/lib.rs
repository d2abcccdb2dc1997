//! The thin binaries: `pkgproxy` (flags, environment, sockets, signals, then
//! `pkgproxy_server::run`) and `pkgproxyctl` (a client of the control
//! sockets). Everything they share about the command line lives here too.

// Two calls have no safe wrapper: mallopt (`daemon::limit_malloc_arenas`) and
// taking ownership of a socket systemd passed (`systemd::listening`). They
// are allowed where they are, with their SAFETY comments; nothing else may be.
#![deny(unsafe_code)]

pub mod args;
mod bundle;
mod cache_cmd;
pub mod ctl;
pub mod daemon;
mod listener;
mod manual;
mod needs;
mod paths;
mod policy_cmd;
mod report;
mod systemd;
