//! Test support for pkgproxy: fake upstreams and real-client drivers.
//!
//! Owns everything tests need around the proxy, and nothing the proxy itself
//! uses: [`origin`] is a fake upstream HTTP server with request recording
//! and fault switches, [`aptrepo`] builds a real signed Debian repository
//! with the Debian tools, and [`aptclient`] drives a real `apt-get` in a
//! sandbox, [`daemon`] runs the real pkgproxy binary and [`client`] talks to
//! it as a proxy client, and [`chaos`] is an upstream that misbehaves on
//! demand (for connection management; over TCP or over in-memory streams
//! handed to it), [`snapstore`] is a fake Snap Store, [`hub`] a fake
//! Docker Hub, [`pypi`] a fake Python index, [`maven`] a fake Maven repository, [`npm`] a fake npm registry
//! and the npm-family clients, [`simplestreams`] a fake LXD image server and [`lxc`] the
//! real `lxc` in a sandbox, [`browser`] the real Chromium, headless,
//! [`tree`] lists a folder's files, [`tarball`] makes and reads tars, [`ports`] gives ports that refuse
//! connections, [`relay`] shows what goes over a connection, and [`wait`] polls for what happens off a client's path.
//! Everything here listens on or talks to loopback addresses only.

pub mod aptclient;
pub mod aptrepo;
pub mod browser;
pub mod chaos;
pub mod client;
pub mod containerd;
pub mod crates;
pub mod daemon;
mod fake;
pub mod golang;
pub mod hub;
pub mod lxc;
pub mod maven;
pub mod npm;
pub mod origin;
pub mod ports;
pub mod pypi;
pub mod relay;
pub mod rpmrepo;
pub mod s3;
pub mod shadow;
pub mod simplestreams;
pub mod skopeo;
pub mod snapclient;
pub mod snapstore;
pub mod sumdb;
pub mod tarball;
pub mod tls;
pub mod tree;
pub mod wait;

pub use aptclient::{AptOutput, AptSandbox};
pub use aptrepo::{AptRepo, AptRepoBuilder, Package, PackageSpec};
pub use chaos::{Behaviour, ChaosUpstream};
pub use crates::{CargoOutput, CargoSandbox, CrateVersion, FakeCrates};
pub use daemon::Daemon;
pub use golang::{GoModules, GoOutput, GoSandbox};
pub use hub::{FakeHub, Image};
pub use lxc::{LxcOutput, LxcSandbox};
pub use maven::{FakeMaven, MavenArtifact};
pub use npm::{
    node_tool, npm_project, project_with_dependencies, FakeNpm, NodeClient, NodeOutput, NodeSandbox, NpmPackage,
    PathClass, TarballHost,
};
pub use origin::{Origin, RecordedRequest};
pub use ports::RefusingPort;
pub use pypi::{project_with_a_dependency, python_tool, Distribution, FakePypi};
pub use relay::Relay;
pub use rpmrepo::{DnfOutput, DnfSandbox, RpmPackage};
pub use s3::S3Server;
pub use shadow::{ShadowHit, ShadowMode, ShadowRecorder};
pub use simplestreams::{FakeSimplestreams, LxdImage};
pub use skopeo::{SkopeoOutput, SkopeoSandbox};
pub use snapclient::{SnapOutput, SnapSandbox};
pub use snapstore::FakeStore;
pub use wait::eventually;
