//! pkgproxy end to end: the real daemon binary (and the real `apt-get` and
//! `go`) against fake upstreams on 127.0.0.1, one module per concern. One
//! test binary, so the suite links once.

mod apt_client;
mod apt_integrity;
mod apt_mirrors;
mod auto_offline;
mod common;
mod disk_full;
mod flags;
mod go_client;
mod offline;
mod proxy_http;
mod shadow;
mod shared_fetch;
mod upstream_pools;
