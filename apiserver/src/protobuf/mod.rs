//! Decoding of Kubernetes protobuf request bodies (`application/vnd.kubernetes.protobuf`), which
//! kubectl's typed clients send for every built-in kind (`kubectl create ...`, `run`, `expose`,
//! `autoscale`, `auth can-i`). The body is `k8s\0` + `runtime.Unknown{typeMeta, raw}`; `raw` is
//! the object's message, decoded with upstream's own v1.32 descriptors (`descriptors`) into the
//! JSON its Go type would encode to (`go_json`), which the rest of the server then handles as a
//! JSON body.
//!
//! Every message of k8s.io/api, k8s.io/apimachinery and k8s.io/metrics is covered; a kind
//! outside them (a custom resource, CustomResourceDefinition, APIService) is `Unsupported`,
//! which the caller answers 415 as upstream does for custom resources.

mod descriptors;
mod go_json;
pub(crate) mod layout;
mod wire;

use descriptors::Descriptors;
use serde_json::{Map, Value, json};
use wire::{Wire, records};

/// What starts every Kubernetes protobuf body.
const MAGIC: &[u8] = b"k8s\0";

/// Why a body could not be decoded.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Error {
    /// No `k8s\0` prefix, or an envelope that is not a `runtime.Unknown`.
    #[error("the object provided is unrecognized: {0}")]
    Envelope(String),
    /// The object's message is malformed (worded as upstream's decode error).
    #[error("{kind} in version \"{version}\" cannot be handled as a {kind}: {reason}")]
    Object { kind: String, version: String, reason: String },
    /// A kind with no upstream protobuf type.
    #[error("protobuf bodies are not supported for {0}")]
    Unsupported(String),
}

/// Built-in API groups and the proto package prefix of their types (upstream's Go package path
/// with dots). Custom resource groups are absent on purpose: they have no protobuf encoding.
const GROUP_PACKAGES: &[(&str, &str)] = &[
    ("", "k8s.io.api.core"),
    ("admission.k8s.io", "k8s.io.api.admission"),
    ("admissionregistration.k8s.io", "k8s.io.api.admissionregistration"),
    ("apidiscovery.k8s.io", "k8s.io.api.apidiscovery"),
    ("apps", "k8s.io.api.apps"),
    ("authentication.k8s.io", "k8s.io.api.authentication"),
    ("authorization.k8s.io", "k8s.io.api.authorization"),
    ("autoscaling", "k8s.io.api.autoscaling"),
    ("batch", "k8s.io.api.batch"),
    ("certificates.k8s.io", "k8s.io.api.certificates"),
    ("coordination.k8s.io", "k8s.io.api.coordination"),
    ("discovery.k8s.io", "k8s.io.api.discovery"),
    ("events.k8s.io", "k8s.io.api.events"),
    ("extensions", "k8s.io.api.extensions"),
    ("flowcontrol.apiserver.k8s.io", "k8s.io.api.flowcontrol"),
    ("imagepolicy.k8s.io", "k8s.io.api.imagepolicy"),
    ("internal.apiserver.k8s.io", "k8s.io.api.apiserverinternal"),
    ("meta.k8s.io", "k8s.io.apimachinery.pkg.apis.meta"),
    ("metrics.k8s.io", "k8s.io.metrics.pkg.apis.metrics"),
    ("networking.k8s.io", "k8s.io.api.networking"),
    ("node.k8s.io", "k8s.io.api.node"),
    ("policy", "k8s.io.api.policy"),
    ("rbac.authorization.k8s.io", "k8s.io.api.rbac"),
    ("resource.k8s.io", "k8s.io.api.resource"),
    ("scheduling.k8s.io", "k8s.io.api.scheduling"),
    ("storage.k8s.io", "k8s.io.api.storage"),
    ("storagemigration.k8s.io", "k8s.io.api.storagemigration"),
];

/// The proto message of a kind, e.g. `apps/v1`, `Deployment` → `k8s.io.api.apps.v1.Deployment`.
/// The option kinds of meta.k8s.io (`DeleteOptions`, ...) are registered in every built-in group
/// version upstream, so a client may name them as `apps/v1, Kind=DeleteOptions`.
fn message_name(d: &Descriptors, api_version: &str, kind: &str) -> Option<String> {
    let (group, version) = api_version.rsplit_once('/').unwrap_or(("", api_version));
    let (_, package) = GROUP_PACKAGES.iter().find(|(g, _)| *g == group)?;
    [format!("{package}.{version}.{kind}"), format!("k8s.io.apimachinery.pkg.apis.meta.v1.{kind}")]
        .into_iter()
        .find(|name| d.message(name).is_some() && (name.starts_with(package) || META_OPTIONS.contains(&kind)))
}

/// Kinds of meta.k8s.io/v1 that every group version serves.
const META_OPTIONS: &[&str] = &["DeleteOptions", "CreateOptions", "UpdateOptions", "PatchOptions", "GetOptions", "ListOptions"];

/// Decode a `k8s\0`-enveloped protobuf body into the JSON object it stands for.
pub fn decode(body: &[u8]) -> Result<Value, Error> {
    let d = descriptors::descriptors();
    let envelope = Error::Envelope;
    if body.is_empty() {
        return Err(envelope("empty data".into()));
    }
    let inner = body
        .strip_prefix(MAGIC)
        .ok_or_else(|| envelope("provided data does not appear to be a protobuf message, expected prefix [107 56 115 0]".into()))?;
    let (mut api_version, mut kind, mut raw) = (String::new(), String::new(), &[][..]);
    for r in records(inner, "Unknown") {
        match r.map_err(|e| envelope(e.to_string()))? {
            (1, Wire::Bytes(type_meta)) => {
                for r in records(type_meta, "TypeMeta") {
                    match r.map_err(|e| envelope(e.to_string()))? {
                        (1, Wire::Bytes(b)) => api_version = String::from_utf8_lossy(b).into_owned(),
                        (2, Wire::Bytes(b)) => kind = String::from_utf8_lossy(b).into_owned(),
                        _ => {}
                    }
                }
            }
            (2, Wire::Bytes(b)) => raw = b,
            _ => {}
        }
    }
    let Some(name) = message_name(d, &api_version, &kind) else {
        return Err(Error::Unsupported(format!("{api_version}, Kind={kind}")));
    };
    let version = api_version.rsplit('/').next().unwrap_or_default().to_string();
    let object = go_json::message(d, &name, raw).map_err(|e| Error::Object { kind: kind.clone(), version, reason: e.to_string() })?;
    let Some(Value::Object(fields)) = object else {
        return Err(Error::Unsupported(format!("{api_version}, Kind={kind} (not an object)")));
    };
    // Go struct order: kind, apiVersion, then the message's fields in wire (field number) order.
    let mut object = Map::new();
    object.insert("kind".into(), json!(kind));
    object.insert("apiVersion".into(), json!(api_version));
    object.extend(fields);
    Ok(Value::Object(object))
}

#[cfg(test)]
mod tests;
