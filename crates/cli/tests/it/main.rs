//! pkgproxy end to end against fake upstreams on 127.0.0.1, one module per
//! concern, in two tiers: the request path in process ([`inproc`]), and the
//! real daemon binary for its flags, `kill -9` and the real `apt-get` and
//! `go` ([`pkgproxy_testkit::Daemon`]). One test binary, so the suite links
//! once.

mod access_log;
mod apt_client;
mod apt_integrity;
mod apt_mirrors;
mod architecture;
mod auto_offline;
mod bundle;
mod bundle_trust;
mod cargo_client;
mod cluster;
mod cluster_trust;
mod common;
mod daemon_files;
mod disk_full;
mod flags;
mod forwarded_bodies;
mod go_client;
mod health;
mod hostile_clients;
mod hostile_upstreams;
mod http2;
mod inproc;
mod lookup_agreement;
mod lxd_client;
mod npm_client;
mod offline;
mod parent;
mod private_doors;
mod private_spaces;
mod proxy_http;
mod pypi_client;
mod quota;
mod quota_apt;
mod readiness;
mod registry_client;
mod registry_pull_limit;
mod reload;
mod secrets;
mod setup_block;
mod setup_script;
mod setup_system;
mod shadow;
mod shared_fetch;
mod snap_client;
mod snap_package;
mod soak;
mod status_page;
mod stop;
mod systemd;
mod upstream_encoding;
mod upstream_pools;
mod why;
