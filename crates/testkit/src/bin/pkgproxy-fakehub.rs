//! The test kit's fake Docker Hub as a program, for the registry
//! benchmark: publishes `library/big:v1`, an image with one layer of the
//! size given in MiB, prints `HUB URL LAYER-DIGEST LAYER-BYTES CDN-URL`, and
//! serves until killed. `GET /_counts` says what was asked of it.

use pkgproxy_testkit::{FakeHub, Image};

#[tokio::main]
async fn main() {
    let mib: usize = std::env::args().nth(1).and_then(|arg| arg.parse().ok()).unwrap_or(100);
    let hub = FakeHub::start().await;
    let image = Image::build("big", Some(mib * 1024 * 1024));
    hub.publish("library/big", "v1", &image);
    println!("HUB {} {} {} {}", hub.url(), image.layer.digest, image.layer.bytes.len(), hub.cdn_url());
    std::future::pending::<()>().await;
}
