//! What the nodes of a cluster take from their clients and give each other:
//! a client cannot send a node anywhere but its peers, what goes between
//! nodes opens nothing else, and what only some clients may read reaches
//! no other client through the bucket or a peer.

use std::time::Duration;

use pkgproxy_testkit::client::{get, proxy_get, raw_exchange, send};
use pkgproxy_testkit::tls::{SelfSigned, TlsTrap};
use pkgproxy_testkit::{eventually, Daemon, FakeHub, GoModules, Image, Origin, Relay, S3Server};

use crate::cluster::{cluster_section, cluster_status};
use crate::common::PKGPROXY;
use crate::private_doors::alice;

/// What the stranger's server answers, were it ever asked.
const STRANGER_S: &[u8] = b"v6.6.6-stranger\n";

/// What the upstream lists of `example.com/hello`.
const LIST: &str = "v1.0.0\nv1.1.0\n";

fn text(body: &[u8]) -> &str {
    std::str::from_utf8(body).unwrap_or("(not UTF-8)")
}

/// The header lines of the first request in `sent` for `target`.
fn request_head<'a>(sent: &'a str, target: &str) -> Option<&'a str> {
    let start = sent.find(&format!("GET {target} HTTP/1.1\r\n"))?;
    let head = &sent[start..];
    Some(&head[..head.find("\r\n\r\n")?])
}

/// The value of header `name` in the request head `head`.
fn header<'a>(head: &'a str, name: &str) -> Option<&'a str> {
    head.lines().find_map(|line| {
        let (field, value) = line.split_once(':')?;
        field.eq_ignore_ascii_case(name).then(|| value.trim())
    })
}

#[tokio::test(flavor = "multi_thread")]
async fn a_client_cannot_send_an_offline_node_anywhere_and_what_it_tells_its_peer_opens_nothing_else() {
    let server = S3Server::start();
    let bucket = server.bucket("cluster-steer");
    let modules = GoModules::standard();
    let origin = Origin::serve(modules.root()).await;
    let config = |node: &str, extra: &str| {
        let go = format!("[go]\nproxies = [\"{}\"]\nsumdb = \"off\"\n", origin.url());
        format!("{go}{}offline_poll = \"200ms\"\n{extra}", cluster_section(&server.endpoint(), &bucket, node))
    };
    // The online node's peers reach it through a relay that shows what
    // goes over the wire.
    let wire = Relay::start().await;
    let online = Daemon::start(PKGPROXY, Some(&config("online", &format!("peer_url = \"{}\"\n", wire.url())))).await;
    wire.forward_to(online.proxy_addr());
    // A stranger's TLS server on another address, on the offline node's
    // port number, with a certificate the offline node trusts.
    let certificate = SelfSigned::for_names(&["127.0.0.2"]);
    let trusted = certificate.pem();
    let offline = Daemon::start_with_env(
        PKGPROXY,
        Some(&config("cut-off", "")),
        &["-offline"],
        &[("SSL_CERT_FILE", trusted.to_str().unwrap())],
    )
    .await;
    let node_port = offline.proxy_addr().rsplit_once(':').unwrap().1.parse::<u16>().unwrap();
    let stranger = TlsTrap::listen(certificate, ([127, 0, 0, 2], node_port).into(), STRANGER_S).await;

    let list = "/go/example.com/hello/@v/list";
    let authority = format!("127.0.0.2:{node_port}");
    // In absolute form with https: refused.
    let asked = format!("GET https://{authority}{list} HTTP/1.1\r\nHost: {authority}\r\nConnection: close\r\n\r\n");
    let answer = raw_exchange(offline.proxy_addr(), asked.as_bytes(), Duration::from_secs(20)).await;
    let answer = String::from_utf8_lossy(&answer);
    assert!(answer.starts_with("HTTP/1.1 400"), "{answer}");
    // In absolute form with http, naming the stranger: the node asks its
    // peer for the side's own path.
    let steered = proxy_get(offline.proxy_addr(), &format!("http://{authority}{list}"), &[]).await;
    assert_eq!((steered.status, text(&steered.body)), (200, LIST), "{}", offline.log());
    let victim = get(offline.proxy_addr(), list).await;
    assert_eq!(text(&victim.body), LIST, "the victim gets the upstream's list");
    assert_eq!(stranger.connections(), 0, "the stranger's server was never reached");
    assert_eq!(origin.count_path("/example.com/hello/@v/list"), 1, "the online node asked the origin");

    // What the offline node sent its peer proves that request, and opens
    // nothing else: not the peer endpoint, not another path.
    let sent = String::from_utf8_lossy(&wire.sent()).into_owned();
    let head = request_head(&sent, list).unwrap_or_else(|| panic!("the request to the peer: {sent}"));
    let seen: Vec<(&str, &str)> = ["x-pkgproxy-peer-time", "x-pkgproxy-peer-token"]
        .iter()
        .map(|name| (*name, header(head, name).unwrap_or_else(|| panic!("{name} in {head}"))))
        .collect();
    let tail = format!("{}?key=go%2Fexample.com%2Fhello%2F%40v%2Fv1.0.0.info", pkgproxy_cluster::peer::TAIL_PATH);
    let replayed = send(online.proxy_addr(), "GET", &tail, &seen, b"").await;
    assert_eq!(replayed.status, 403, "a credential seen on the wire opens no other request");
    let elsewhere = send(online.proxy_addr(), "GET", "/go/example.com/hello/@v/v1.1.0.info", &seen, b"").await;
    assert_eq!(elsewhere.status, 200, "another path is served as to any client");
    assert!(online.log().contains("/go/example.com/hello/@v/v1.1.0.info"));
}

/// A credential a node of the cluster in `bucket` (the fleet's secret)
/// sends for `GET target` now.
fn signed_by_a_node(bucket: &str, target: &str) -> Vec<(String, String)> {
    let key = pkgproxy_cluster::peer::PeerKey::derive("testing", bucket);
    let made = key.credential(&http::Method::GET, target, std::time::SystemTime::now());
    made.iter().map(|(name, value)| (name.to_string(), value.to_str().unwrap().to_owned())).collect()
}

#[tokio::test(flavor = "multi_thread")]
async fn private_content_one_node_holds_reaches_no_other_client_through_the_bucket_or_a_peer() {
    let server = S3Server::start();
    let bucket = server.bucket("cluster-private");
    let hub = FakeHub::start().await;
    let (secret, public) = (Image::build("secret", None), Image::build("public", None));
    hub.publish("secret/app", "v1", &secret);
    hub.make_private("secret/app", "alice:pw");
    hub.publish("library/hello", "v1", &public);
    let config =
        |node: &str| format!("{}{}", hub.config("docker.io"), cluster_section(&server.endpoint(), &bucket, node));
    let holder = Daemon::start(PKGPROXY, Some(&config("holder"))).await;
    let other = Daemon::start(PKGPROXY, Some(&config("other"))).await;

    let secret_layer = format!("/v2/secret/app/blobs/{}", secret.layer.digest);
    let alice = alice(&hub).await;
    let pulled = send(holder.proxy_addr(), "GET", &secret_layer, &[("authorization", &alice)], b"").await;
    assert_eq!((pulled.status, pulled.body.clone()), (200, secret.layer.bytes.clone()), "{}", holder.log());
    let tag = send(holder.proxy_addr(), "GET", "/v2/library/hello/manifests/v1", &[], b"").await;
    assert_eq!(tag.status, 200);
    let public_layer = format!("/v2/library/hello/blobs/{}", public.layer.digest);
    assert_eq!(send(holder.proxy_addr(), "GET", &public_layer, &[], b"").await.body, public.layer.bytes);
    eventually("the holder publishes both layers", || async {
        (cluster_status(&holder).await["published"].as_u64() >= Some(2)).then_some(())
    })
    .await;

    // Another node's anonymous clients: under the private name, or under a
    // public one that does not hold it.
    for path in [secret_layer.clone(), format!("/v2/library/hello/blobs/{}", secret.layer.digest)] {
        let anonymous = send(other.proxy_addr(), "GET", &path, &[], b"").await;
        assert!(matches!(anonymous.status, 401 | 403 | 404), "{path}: {}", anonymous.status);
        assert_ne!(anonymous.body, secret.layer.bytes, "{path}");
    }
    // Alice on the other node: served, the hub having said yes to her.
    let as_alice = send(other.proxy_addr(), "GET", &secret_layer, &[("authorization", &alice)], b"").await;
    assert_eq!((as_alice.status, as_alice.body.clone()), (200, secret.layer.bytes.clone()), "{}", other.log());

    // The holder's peer endpoint, asked by a node of the cluster: what
    // anyone may read, yes; the private layer, no.
    let tail = |digest: &str| {
        let key = format!("registry/blob/sha256/{}", digest.trim_start_matches("sha256:"));
        format!("{}?key={}", pkgproxy_cluster::peer::TAIL_PATH, key.replace('/', "%2F"))
    };
    for (digest, status) in [(&public.layer.digest, 200), (&secret.layer.digest, 403)] {
        let target = tail(digest);
        let signed = signed_by_a_node(&bucket, &target);
        let headers: Vec<(&str, &str)> = signed.iter().map(|(n, v)| (n.as_str(), v.as_str())).collect();
        let asked = send(holder.proxy_addr(), "GET", &target, &headers, b"").await;
        assert_eq!(asked.status, status, "{digest}");
        assert_ne!(asked.body, secret.layer.bytes, "{digest}");
    }
}
