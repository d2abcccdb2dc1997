//! `[cluster]`: where the shared tier is and who this node is.

use std::sync::Arc;

use std::time::Duration;

use object_store::aws::{AmazonS3, AmazonS3Builder, S3ConditionalPut};
use object_store::{BackoffConfig, ClientOptions, RetryConfig};

use crate::error::ClusterError;

/// The shared tier's settings.
#[derive(Clone, PartialEq, Eq)]
pub struct ClusterConfig {
    /// The S3 endpoint (`https://s3.eu-west-1.amazonaws.com`,
    /// `http://minio.lan:9000`).
    pub endpoint: String,
    /// The bucket every node shares.
    pub bucket: String,
    /// Where under the bucket pkgproxy keeps its objects.
    pub prefix: String,
    /// The store's region (any name for stores that have none).
    pub region: String,
    /// How pkgproxy signs its requests.
    pub credentials: Credentials,
    /// This node's name, unique in the cluster.
    pub node_id: String,
    /// Where other nodes reach this one (its proxy listener's URL): a node
    /// that loses the race for a fetch streams the body from the winner.
    pub peer_url: Option<String>,
    /// How long a fetch's lease lasts unless renewed: a node that dies
    /// mid-fetch holds its keys this long at most.
    pub lease_ttl: Duration,
    /// The secret nodes prove to each other (default: derived from the
    /// store's secret key, which every node has).
    pub peer_secret: Option<String>,
    /// How often the node reads the cluster's offline switch.
    pub offline_poll: Duration,
}

/// How long a lease lasts by default.
pub const DEFAULT_LEASE_TTL: Duration = Duration::from_secs(30);

/// An S3 access key.
#[derive(Clone, PartialEq, Eq)]
pub struct Credentials {
    /// `AWS_ACCESS_KEY_ID`.
    pub access_key_id: String,
    /// `AWS_SECRET_ACCESS_KEY`.
    pub secret_access_key: String,
    /// `AWS_SESSION_TOKEN`, for temporary keys.
    pub session_token: Option<String>,
}

impl std::fmt::Debug for Credentials {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Credentials").field("access_key_id", &self.access_key_id).finish_non_exhaustive()
    }
}

impl std::fmt::Debug for ClusterConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ClusterConfig")
            .field("endpoint", &self.endpoint)
            .field("bucket", &self.bucket)
            .field("prefix", &self.prefix)
            .field("node_id", &self.node_id)
            .finish_non_exhaustive()
    }
}

impl ClusterConfig {
    /// The key this cluster's nodes sign their requests to each other
    /// with: derived from the peer secret (by default the store's secret
    /// key) and the bucket's name.
    pub fn peer_key(&self) -> crate::peer::PeerKey {
        let secret = self.peer_secret.as_deref().unwrap_or(&self.credentials.secret_access_key);
        crate::peer::PeerKey::derive(secret, &self.bucket)
    }

    /// Who this node is to the others.
    pub fn identity(&self) -> crate::Identity {
        crate::Identity {
            node: self.node_id.clone(),
            peer_url: self.peer_url.clone(),
            peer_key: Some(self.peer_key()),
            lease_ttl: self.lease_ttl,
        }
    }

    /// The S3 client for this configuration: path-style requests (what
    /// self-hosted stores serve), conditional writes by `If-None-Match` and
    /// `If-Match`.
    pub fn store(&self) -> Result<Arc<AmazonS3>, ClusterError> {
        let endpoint: http::Uri = self
            .endpoint
            .parse()
            .map_err(|_| ClusterError::Config(format!("endpoint {:?} is not a URL", self.endpoint)))?;
        if !matches!(endpoint.scheme_str(), Some("http" | "https")) || endpoint.host().is_none() {
            return Err(ClusterError::Config(format!("endpoint {:?} is not an http(s) URL", self.endpoint)));
        }
        if self.bucket.is_empty() {
            return Err(ClusterError::Config("bucket is empty".into()));
        }
        // The S3 client's TLS uses the process's provider: ring, as every
        // other TLS connection of pkgproxy (a second call finds it set).
        let _ = rustls::crypto::ring::default_provider().install_default();
        // The client options first: they replace every client setting made
        // before them (plain HTTP allowed or not among them).
        let mut builder = AmazonS3Builder::new()
            .with_client_options(client_options())
            .with_endpoint(self.endpoint.trim_end_matches('/'))
            .with_bucket_name(&self.bucket)
            .with_region(&self.region)
            .with_access_key_id(&self.credentials.access_key_id)
            .with_secret_access_key(&self.credentials.secret_access_key)
            .with_allow_http(endpoint.scheme_str() == Some("http"))
            .with_virtual_hosted_style_request(false)
            .with_conditional_put(S3ConditionalPut::ETagMatch)
            .with_retry(retries());
        if let Some(token) = &self.credentials.session_token {
            builder = builder.with_token(token);
        }
        let store = builder.build().map_err(|source| ClusterError::store("configure the S3 client", source))?;
        Ok(Arc::new(store))
    }
}

/// A store that does not answer is found out in seconds, not minutes: a
/// miss that asks it first must not wait long for the upstream. A body
/// streams for as long as it takes (no overall time limit).
fn client_options() -> ClientOptions {
    ClientOptions::new().with_connect_timeout(Duration::from_secs(2)).with_timeout_disabled()
}

/// Two retries within five seconds at most.
fn retries() -> RetryConfig {
    RetryConfig {
        backoff: BackoffConfig {
            init_backoff: Duration::from_millis(100),
            max_backoff: Duration::from_secs(1),
            base: 2.0,
        },
        max_retries: 2,
        retry_timeout: Duration::from_secs(5),
    }
}

/// The client for the store's HTTP beyond object_store's (the listing of
/// unfinished uploads): ring as TLS provider, never a proxy, a dead
/// address found out in seconds. Peers are asked through the one way out
/// (`pkgproxy_upstream::peer`).
#[allow(clippy::disallowed_methods, reason = "the cluster store's client: the second, named way out")]
pub(crate) fn cluster_http_client() -> reqwest::Client {
    let _ = rustls::crypto::ring::default_provider().install_default();
    reqwest::Client::builder().connect_timeout(Duration::from_secs(2)).no_proxy().build().unwrap_or_default()
}
