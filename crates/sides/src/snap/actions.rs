//! The refresh endpoint (`POST /v2/snaps/refresh`): what is recorded of
//! its answers while the store is there, and how a request is answered
//! from those records when it is not.
//!
//! Online, every request is forwarded (its answer depends on the device,
//! the snaps it holds and their channels) and never shared. Each
//! successful per-action result is recorded under a normalised key: the
//! device (series, architecture, store, classic, capabilities), the kind of
//! action (`install` and `download` share one record, keyed by name;
//! `refresh` is keyed by snap id), the channel, revision, cohort,
//! validation sets and whether validation is ignored. Not in the key: the
//! instance key, the order of actions and fields, the rest of the context,
//! the user agent and the macaroons, which change from call to call.
//!
//! Offline (or while the store is overloaded or unreachable) a request is
//! answered per action: the recorded result, when the blob it names and
//! its whole assertion chain (snap-revision, snap-declaration, account,
//! account-key) are cached, the fields asked for were recorded, and for a
//! refresh the epoch fits; otherwise a per-action error whose message the
//! user reads (`cannot download snap "X": pkgproxy is offline: ...`). A
//! bulk `fetch-assertions` is told "nothing newer" for what the device
//! already holds, so an offline `snap refresh` does not fail on it.

use base64::Engine;
use serde::{Deserialize, Serialize};
use serde_json::{json, Map, Value};

use super::assertion::{assertion_key, header};
use super::blob::{blob_key, is_sha3_384};
use super::device::{key_part, Device};
use super::rewrite::is_private;

/// A refresh request, as far as pkgproxy reads it.
#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub struct RefreshRequest {
    /// The snaps the device holds.
    #[serde(default)]
    pub context: Vec<HeldSnap>,
    /// What it asks for.
    #[serde(default)]
    pub actions: Vec<Action>,
    /// The snap fields it wants in the answer.
    #[serde(default)]
    pub fields: Vec<String>,
}

/// A snap the device holds.
#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub struct HeldSnap {
    /// Its id.
    #[serde(default)]
    pub snap_id: String,
    /// The channel it follows.
    #[serde(default)]
    pub tracking_channel: Option<String>,
    /// Its cohort.
    #[serde(default)]
    pub cohort_key: Option<String>,
    /// The validation sets it is held to.
    #[serde(default)]
    pub validation_sets: Option<Value>,
    /// Its epoch (`{"read": [..], "write": [..]}`).
    #[serde(default)]
    pub epoch: Option<Value>,
    /// Whether validation is ignored for it.
    #[serde(default)]
    pub ignore_validation: Option<bool>,
}

/// One action of a refresh request.
#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub struct Action {
    /// `install`, `download`, `refresh` or `fetch-assertions`.
    pub action: String,
    /// The key its result is matched by.
    #[serde(default)]
    pub instance_key: String,
    /// The snap's name (install, download).
    #[serde(default)]
    pub name: Option<String>,
    /// The snap's id (refresh).
    #[serde(default)]
    pub snap_id: Option<String>,
    /// The channel asked for.
    #[serde(default)]
    pub channel: Option<String>,
    /// A revision asked for.
    #[serde(default)]
    pub revision: Option<u64>,
    /// A cohort.
    #[serde(default)]
    pub cohort_key: Option<String>,
    /// Whether validation is ignored.
    #[serde(default)]
    pub ignore_validation: Option<bool>,
    /// Validation sets.
    #[serde(default)]
    pub validation_sets: Option<Value>,
    /// A fetch-assertions action's key.
    #[serde(default)]
    pub key: Option<String>,
    /// The assertions a fetch-assertions action wants.
    #[serde(default)]
    pub assertions: Vec<WantedAssertion>,
}

/// An assertion a fetch-assertions action wants.
#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub struct WantedAssertion {
    /// Its type.
    #[serde(rename = "type")]
    pub kind: String,
    /// Its primary key.
    #[serde(default)]
    pub primary_key: Vec<String>,
    /// A sequence-forming assertion's key.
    #[serde(default)]
    pub sequence_key: Vec<String>,
    /// Set when the device holds this revision: only a newer one is wanted.
    #[serde(default)]
    pub if_newer_than: Option<u64>,
    /// Set when the device holds this sequence point.
    #[serde(default)]
    pub if_sequence_equal_or_newer_than: Option<u64>,
}

/// A recorded result, as kept in the cache.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Recorded {
    /// The normalised key it was recorded under.
    pub key: String,
    /// The fields the request that brought it asked for, sorted.
    pub fields: Vec<String>,
    /// The result as the store sent it, without its instance key.
    pub result: Value,
}

/// Why the store cannot be asked, as per-action errors say it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Unavailable {
    /// The error code (never one snapd interprets).
    pub code: &'static str,
    /// What the user reads, starting with why.
    pub message: String,
}

/// What the cache holds, as replay asks it.
pub trait Holdings {
    /// The result recorded under `key`.
    fn record(&self, key: &str) -> Option<Recorded>;
    /// Whether a verified blob is cached under `key`.
    fn has_blob(&self, key: &str) -> bool;
    /// The text of the assertion cached under `key`.
    fn assertion(&self, key: &str) -> Option<Vec<u8>>;
}

/// The normalised key of `action`'s result for `device`; `None` for an
/// action whose result is not recorded.
pub fn action_key(device: &Device, action: &Action, context: &[HeldSnap]) -> Option<String> {
    let common = format!("v1|{}", device.key());
    let flag = |value: Option<bool>| value.map_or("-", |v| if v { "true" } else { "false" });
    match action.action.as_str() {
        "install" | "download" => {
            let name = action.name.as_deref().filter(|n| !n.is_empty())?;
            Some(format!(
                "{common}|name|{}|{}|{}|{}|{}|{}",
                key_part(name),
                key_part(action.channel.as_deref().unwrap_or("stable")),
                action.revision.unwrap_or(0),
                key_part(action.cohort_key.as_deref().unwrap_or("")),
                flag(action.ignore_validation),
                sets(action.validation_sets.as_ref()),
            ))
        }
        "refresh" => {
            let snap_id = action.snap_id.as_deref().filter(|id| !id.is_empty())?;
            let held = context.iter().find(|held| held.snap_id == snap_id);
            let channel = action.channel.as_deref().or(held.and_then(|h| h.tracking_channel.as_deref()));
            let cohort = action.cohort_key.as_deref().or(held.and_then(|h| h.cohort_key.as_deref()));
            let ignore = action.ignore_validation.or(held.and_then(|h| h.ignore_validation));
            Some(format!(
                "{common}|id|{}|{}|{}|{}|{}|{}",
                key_part(snap_id),
                key_part(channel.unwrap_or("stable")),
                action.revision.unwrap_or(0),
                key_part(cohort.unwrap_or("")),
                flag(ignore),
                sets(held.and_then(|h| h.validation_sets.as_ref()).or(action.validation_sets.as_ref())),
            ))
        }
        _ => None,
    }
}

/// Validation sets in one order.
fn sets(sets: Option<&Value>) -> String {
    let Some(Value::Array(sets)) = sets else { return String::new() };
    let mut each: Vec<String> = sets.iter().map(Value::to_string).collect();
    each.sort();
    key_part(&each.join(";"))
}

/// Where recorded results are kept in the cache.
pub const RECORD_PREFIX: &str = "snap/record/";

/// The cache key a result recorded under `action_key` is kept at.
pub fn record_key(action_key: &str) -> String {
    use sha2::Digest;
    format!("{RECORD_PREFIX}{}", hex::encode(sha2::Sha256::digest(action_key.as_bytes())))
}

/// What to record of a successful answer to `request`: each per-action
/// result that carries a snap, under its action's key.
pub fn recordings(device: &Device, request: &RefreshRequest, answer: &Value) -> Vec<Recorded> {
    let Some(results) = answer.get("results").and_then(Value::as_array) else { return Vec::new() };
    let mut fields = request.fields.clone();
    fields.sort();
    fields.dedup();
    results
        .iter()
        .filter(|result| {
            matches!(result.get("result").and_then(Value::as_str), Some("install" | "download" | "refresh"))
        })
        .filter(|result| result.get("snap").is_some_and(Value::is_object) && result.get("error").is_none())
        .filter(|result| result.as_object().is_none_or(|object| !is_private(object)))
        .filter_map(|result| {
            let instance = result.get("instance-key").and_then(Value::as_str)?;
            let action = request.actions.iter().find(|action| action.instance_key == instance)?;
            let key = action_key(device, action, &request.context)?;
            let mut result = result.clone();
            if let Value::Object(object) = &mut result {
                object.remove("instance-key");
            }
            Some(Recorded { key, fields: fields.clone(), result })
        })
        .collect()
}

/// The answer to `request` from what the cache holds, the store being
/// unavailable as `why` says; `stores` are the store instances' base URLs
/// (the first names assertion streams, which the serve-time rewrite then
/// points at pkgproxy).
pub fn replay(
    device: &Device,
    request: &RefreshRequest,
    why: &Unavailable,
    holdings: &dyn Holdings,
    stores: &[String],
) -> Value {
    let results: Vec<Value> = request
        .actions
        .iter()
        .map(|action| match action.action.as_str() {
            "fetch-assertions" => fetch_assertions(device, action, why, holdings, stores),
            _ => match replay_action(device, request, action, holdings) {
                Ok(result) => result,
                Err(missing) => action_error(action, why, &missing),
            },
        })
        .collect();
    json!({"results": results, "error-list": []})
}

/// The recorded result for `action`, or what is missing for one.
fn replay_action(
    device: &Device,
    request: &RefreshRequest,
    action: &Action,
    holdings: &dyn Holdings,
) -> Result<Value, String> {
    let what = subject(action);
    let key = action_key(device, action, &request.context).ok_or_else(|| format!("{what} cannot be answered"))?;
    let recorded =
        holdings.record(&record_key(&key)).ok_or_else(|| format!("{what} was never asked for through it"))?;
    if !request.fields.iter().all(|field| recorded.fields.contains(field)) {
        return Err(format!("{what} was only asked for with fewer details"));
    }
    let snap = recorded.result.get("snap").cloned().unwrap_or(Value::Null);
    check_chain(device, &snap, holdings).map_err(|missing| format!("{missing} of {what} is not cached"))?;
    if action.action == "refresh" {
        let held = request.context.iter().find(|held| Some(held.snap_id.as_str()) == action.snap_id.as_deref());
        if !epoch_fits(held.and_then(|h| h.epoch.as_ref()), snap.get("epoch")) {
            return Err(format!("the cached revision of {what} cannot read the installed one's data (epoch)"));
        }
    }
    let mut result = recorded.result;
    if let Value::Object(object) = &mut result {
        object.insert("result".into(), Value::String(action.action.clone()));
        object.insert("instance-key".into(), Value::String(action.instance_key.clone()));
        // Deltas are made against the revision a device holds; only the
        // full snap is known to be cached.
        if let Some(Value::Object(download)) = object.get_mut("snap").and_then(|snap| snap.get_mut("download")) {
            download.insert("deltas".into(), json!([]));
        }
    }
    Ok(result)
}

/// How an action names its snap in messages.
fn subject(action: &Action) -> String {
    match (&action.name, &action.snap_id) {
        (Some(name), _) => format!("snap {name:?}"),
        (None, Some(id)) => format!("snap id {id}"),
        (None, None) => "this snap".to_string(),
    }
}

/// Checks that the blob `snap` names and its assertion chain are cached;
/// `Err` names the first missing piece.
fn check_chain(device: &Device, snap: &Value, holdings: &dyn Holdings) -> Result<(), &'static str> {
    let scope = device.scope();
    let digest =
        snap.pointer("/download/sha3-384").and_then(Value::as_str).filter(|d| is_sha3_384(d)).ok_or("the download")?;
    if !holdings.has_blob(&blob_key(&scope, digest)) {
        return Err("the download");
    }
    let revision_key = revision_key(&scope, digest).ok_or("the snap-revision assertion")?;
    let revision = holdings.assertion(&revision_key).ok_or("the snap-revision assertion")?;
    let snap_id =
        snap.get("snap-id").and_then(Value::as_str).or(header(&revision, "snap-id")).ok_or("the snap-declaration")?;
    let declaration_key =
        assertion_key(&scope, "snap-declaration", &[device.series_or_default().to_string(), snap_id.to_string()]);
    let declaration = holdings.assertion(&declaration_key).ok_or("the snap-declaration assertion")?;
    let publisher = header(&declaration, "publisher-id").ok_or("the publisher's account assertion")?;
    if holdings.assertion(&assertion_key(&scope, "account", &[publisher.to_string()])).is_none() {
        return Err("the publisher's account assertion");
    }
    let sign_key = header(&revision, "sign-key-sha3-384").ok_or("the signing account-key assertion")?;
    if holdings.assertion(&assertion_key(&scope, "account-key", &[sign_key.to_string()])).is_none() {
        return Err("the signing account-key assertion");
    }
    Ok(())
}

/// The cache key of the snap-revision assertion for a blob with the hex
/// digest `digest`: snapd names it by the digest in unpadded base64url.
pub fn revision_key(scope: &str, digest: &str) -> Option<String> {
    let bytes = hex::decode(digest).ok()?;
    let name = base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(bytes);
    Some(assertion_key(scope, "snap-revision", &[name]))
}

/// Whether a snap of epoch `offered` can read the data of the installed
/// one of epoch `held`: some epoch the installed one wrote is one the new
/// one reads. An epoch not given is epoch 0.
fn epoch_fits(held: Option<&Value>, offered: Option<&Value>) -> bool {
    let epochs = |epoch: Option<&Value>, side: &str| -> Vec<u64> {
        match epoch.and_then(|e| e.get(side)).and_then(Value::as_array) {
            Some(list) => list.iter().filter_map(Value::as_u64).collect(),
            None => vec![0],
        }
    };
    let written = epochs(held, "write");
    epochs(offered, "read").iter().any(|epoch| written.contains(epoch))
}

/// A per-action error result.
fn action_error(action: &Action, why: &Unavailable, missing: &str) -> Value {
    let mut result = Map::new();
    result.insert("result".into(), json!("error"));
    result.insert("instance-key".into(), json!(action.instance_key));
    if let Some(id) = &action.snap_id {
        result.insert("snap-id".into(), json!(id));
    }
    if let Some(name) = &action.name {
        result.insert("name".into(), json!(name));
    }
    result.insert("error".into(), json!({"code": why.code, "message": format!("{}: {missing}", why.message)}));
    Value::Object(result)
}

/// A fetch-assertions action answered from the cache: a stream URL for
/// each wanted assertion that is cached and newer than what the device
/// holds; nothing for what it holds (the store's own "nothing newer"); an
/// error only for what it does not hold and the cache lacks.
fn fetch_assertions(
    device: &Device,
    action: &Action,
    why: &Unavailable,
    holdings: &dyn Holdings,
    stores: &[String],
) -> Value {
    let scope = device.scope();
    let store = stores.first().map_or("", String::as_str);
    let (mut urls, mut errors) = (Vec::new(), Vec::new());
    for wanted in &action.assertions {
        let held = wanted.if_newer_than.is_some() || wanted.if_sequence_equal_or_newer_than.is_some();
        let cached = match wanted.primary_key.is_empty() {
            true => None,
            false => holdings.assertion(&assertion_key(&scope, &wanted.kind, &wanted.primary_key)),
        };
        match (cached, held) {
            (Some(text), _) if is_newer(&text, wanted.if_newer_than) => {
                urls.push(json!(format!("{store}/v2/assertions/{}/{}", wanted.kind, wanted.primary_key.join("/"))))
            }
            (_, true) => {}
            (_, false) => {
                let (key_name, key) = match wanted.primary_key.is_empty() {
                    true => ("sequence-key", &wanted.sequence_key),
                    false => ("primary-key", &wanted.primary_key),
                };
                errors.push(json!({
                    "code": why.code,
                    "message": format!("{}: the {} assertion is not cached", why.message, wanted.kind),
                    "type": wanted.kind,
                    key_name: key,
                }));
            }
        }
    }
    json!({
        "result": "fetch-assertions",
        "key": action.key,
        "assertion-stream-urls": urls,
        "error-list": errors,
    })
}

/// Whether the assertion `text` is newer than the revision the device
/// holds (any is, when it holds none).
fn is_newer(text: &[u8], held: Option<u64>) -> bool {
    let revision = header(text, "revision").and_then(|r| r.parse::<u64>().ok()).unwrap_or(0);
    held.is_none_or(|held| revision > held)
}

#[cfg(test)]
mod tests;
