//! `[cluster]`, checked: the shared tier's store and this node's name.

use pkgproxy_cluster::{ClusterConfig, Credentials};

use super::file::ClusterSection;
use super::SettingsError;

/// The cluster `section` describes, with credentials from it or, where it
/// names none, from `env` (the usual `AWS_*` variables).
pub fn settings(
    section: &ClusterSection,
    env: impl Fn(&str) -> Option<String>,
) -> Result<ClusterConfig, SettingsError> {
    let missing = |key: &'static str, reason: &'static str| SettingsError::Cluster { key, reason };
    if section.endpoint.trim().is_empty() {
        return Err(missing("endpoint", "is empty"));
    }
    if section.bucket.trim().is_empty() {
        return Err(missing("bucket", "is empty"));
    }
    let access_key_id = section
        .access_key_id
        .clone()
        .or_else(|| env("AWS_ACCESS_KEY_ID"))
        .ok_or(missing("access_key_id", "is not set, nor is AWS_ACCESS_KEY_ID"))?;
    let secret_access_key = section
        .secret_access_key
        .clone()
        .or_else(|| env("AWS_SECRET_ACCESS_KEY"))
        .ok_or(missing("secret_access_key", "is not set, nor is AWS_SECRET_ACCESS_KEY"))?;
    let node_id = match &section.node_id {
        Some(id) if !id.trim().is_empty() => id.trim().to_owned(),
        Some(_) => return Err(missing("node_id", "is empty")),
        None => host_name().ok_or(missing("node_id", "is not set and the host has no name"))?,
    };
    Ok(ClusterConfig {
        endpoint: section.endpoint.trim().to_owned(),
        bucket: section.bucket.trim().to_owned(),
        prefix: section.prefix.clone().unwrap_or_else(|| "pkgproxy".to_owned()),
        region: section.region.clone().or_else(|| env("AWS_REGION")).unwrap_or_else(|| "us-east-1".to_owned()),
        credentials: Credentials { access_key_id, secret_access_key, session_token: env("AWS_SESSION_TOKEN") },
        node_id,
        peer_url: section.peer_url.clone(),
        lease_ttl: match section.lease_ttl {
            Some(ttl) if ttl < std::time::Duration::from_secs(1) => {
                return Err(missing("lease_ttl", "is under a second"))
            }
            Some(ttl) => ttl,
            None => pkgproxy_cluster::DEFAULT_LEASE_TTL,
        },
        peer_secret: section.peer_secret.clone().or_else(|| env("PKGPROXY_CLUSTER_PEER_SECRET")),
        offline_poll: match section.offline_poll {
            Some(poll) if poll.is_zero() => return Err(missing("offline_poll", "is zero")),
            Some(poll) => poll,
            None => pkgproxy_cluster::switch::DEFAULT_POLL,
        },
    })
}

/// This machine's name, as the kernel knows it.
fn host_name() -> Option<String> {
    let name = std::fs::read_to_string("/proc/sys/kernel/hostname").ok()?;
    let name = name.trim();
    (!name.is_empty()).then(|| name.to_owned())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn section() -> ClusterSection {
        ClusterSection { endpoint: "http://s3.lan:9000".into(), bucket: "cache".into(), ..Default::default() }
    }

    #[test]
    fn credentials_come_from_the_file_or_the_usual_variables_and_their_absence_is_named() {
        let env = |name: &str| match name {
            "AWS_ACCESS_KEY_ID" => Some("from-env".to_owned()),
            "AWS_SECRET_ACCESS_KEY" => Some("secret".to_owned()),
            _ => None,
        };
        let config = settings(&ClusterSection { node_id: Some("n1".into()), ..section() }, env).unwrap();
        assert_eq!(config.credentials.access_key_id, "from-env");
        assert_eq!(
            (config.prefix.as_str(), config.region.as_str(), config.node_id.as_str()),
            ("pkgproxy", "us-east-1", "n1")
        );

        let given = ClusterSection { access_key_id: Some("given".into()), ..section() };
        assert_eq!(settings(&given, env).unwrap().credentials.access_key_id, "given");

        let error = settings(&section(), |_| None).unwrap_err().to_string();
        assert!(error.contains("cluster.access_key_id") && error.contains("AWS_ACCESS_KEY_ID"), "{error}");
        let error = settings(&ClusterSection { bucket: " ".into(), ..section() }, env).unwrap_err().to_string();
        assert!(error.contains("cluster.bucket"), "{error}");
    }
}
