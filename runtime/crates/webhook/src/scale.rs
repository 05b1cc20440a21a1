//! Admission of `/scale` writes. For subresource `scale` the API server sends
//! the webhook `autoscaling/v1` Scale objects (upstream's admission passes the
//! subresource's own kind), which a plugin's `validate` cannot judge: it
//! checks its parent. So a Scale review is answered as a review of the parent
//! as it would be after scaling: the parent read from the API server
//! (`oldObject`), and the same with the Scale's `spec.replicas` written at the
//! CRD's `specReplicasPath` (`object`).

use std::sync::{Arc, OnceLock};

use kube::api::{Api, ApiResource, DynamicObject};
use serde_json::Value;

use crate::path_for;
use crate::sandbox::LoadedPlugin;

/// The client scale reviews read parents with, set once it exists (the
/// webhook server may start before the host has connected to its cluster).
pub type Parents = Arc<OnceLock<kube::Client>>;

/// Why a Scale review could not be turned into its parent's.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("cannot decode AdmissionReview: {0}")]
    Decode(#[from] serde_json::Error),
    #[error("cannot read {kind} {name:?} to check the scale of")]
    ReadParent {
        kind: String,
        name: String,
        #[source]
        source: kube::Error,
    },
    #[error("no API client to read the parent of a scale review with")]
    NoClient,
}

/// `body` with its Scale objects replaced by the parent before and after
/// scaling when it is a validating review of subresource `scale` sent to a
/// plugin's path; otherwise `None` (answered as it is).
pub async fn as_parent_review(client: &kube::Client, plugins: &[LoadedPlugin], path: &str, body: &[u8]) -> Result<Option<Vec<u8>>, Error> {
    let mut review: Value = serde_json::from_slice(body)?;
    let request = &review["request"];
    if request["subResource"] != "scale" {
        return Ok(None);
    }
    let Some(plugin) = plugins.iter().find(|p| path_for("validate", p) == path) else { return Ok(None) };
    let parent_gvk = &plugin.manifest().parent;
    let resource = &request["resource"];
    let text = |v: &Value| v.as_str().unwrap_or_default().to_string();
    let api_resource = ApiResource {
        group: text(&resource["group"]),
        version: text(&resource["version"]),
        api_version: parent_gvk.api_version(),
        kind: parent_gvk.kind.clone(),
        plural: text(&resource["resource"]),
    };
    let (namespace, name) = (text(&request["namespace"]), text(&request["name"]));
    let api: Api<DynamicObject> = match namespace.as_str() {
        "" => Api::all_with(client.clone(), &api_resource),
        ns => Api::namespaced_with(client.clone(), ns, &api_resource),
    };
    let parent = api.get(&name).await.map_err(|source| Error::ReadParent { kind: parent_gvk.kind.clone(), name: name.clone(), source })?;
    let mut parent = serde_json::to_value(parent)?;
    // A DynamicObject read through `api_resource` carries its type.
    parent["apiVersion"] = Value::from(parent_gvk.api_version());
    parent["kind"] = Value::from(parent_gvk.kind.clone());
    // `spec.replicas` is omitempty in autoscaling/v1: absent is a scale to 0.
    let replicas = request["object"]["spec"].get("replicas").filter(|r| !r.is_null()).cloned().unwrap_or(Value::from(0));
    let path = spec_replicas_path(&plugin.manifest().crds, &api_resource);
    let scaled = after_scaling(parent.clone(), &path, replicas);
    let request = review["request"].as_object_mut().expect("a review with a request object");
    request.insert("kind".into(), serde_json::json!({"group": api_resource.group, "version": api_resource.version, "kind": api_resource.kind}));
    request.insert("object".into(), scaled);
    request.insert("oldObject".into(), parent);
    Ok(Some(serde_json::to_vec(&review)?))
}

/// The `specReplicasPath` of `resource` in the plugin's CRDs (the served
/// version's `subresources.scale`); `.spec.replicas` otherwise, where the
/// built-in kinds with a scale subresource keep it.
pub fn spec_replicas_path(crds: &[Value], resource: &ApiResource) -> String {
    crds.iter()
        .filter(|crd| crd.pointer("/spec/group").and_then(Value::as_str) == Some(resource.group.as_str()))
        .filter(|crd| crd.pointer("/spec/names/plural").and_then(Value::as_str) == Some(resource.plural.as_str()))
        .flat_map(|crd| crd.pointer("/spec/versions").and_then(Value::as_array).cloned().unwrap_or_default())
        .find(|v| v["name"] == resource.version.as_str())
        .and_then(|v| v.pointer("/subresources/scale/specReplicasPath").and_then(Value::as_str).map(String::from))
        .unwrap_or_else(|| ".spec.replicas".into())
}

/// `parent` with `replicas` at `path` (`.a.b`), creating the objects on the way.
pub fn after_scaling(mut parent: Value, path: &str, replicas: Value) -> Value {
    let mut at = &mut parent;
    let mut fields = path.trim_start_matches('.').split('.').peekable();
    while let Some(field) = fields.next() {
        if !at.is_object() {
            *at = Value::Object(Default::default());
        }
        let map = at.as_object_mut().expect("made an object above");
        if fields.peek().is_none() {
            map.insert(field.to_string(), replicas);
            break;
        }
        at = map.entry(field).or_insert_with(|| Value::Object(Default::default()));
    }
    parent
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn resource(group: &str, version: &str, plural: &str) -> ApiResource {
        ApiResource { group: group.into(), version: version.into(), api_version: String::new(), kind: String::new(), plural: plural.into() }
    }

    #[test]
    fn the_parent_after_scaling_has_the_scales_replicas_at_the_crds_path() {
        let parent = json!({"metadata": {"name": "p"}, "spec": {"replicas": 1, "image": "x"}});
        assert_eq!(
            after_scaling(parent.clone(), ".spec.replicas", json!(4)),
            json!({"metadata": {"name": "p"}, "spec": {"replicas": 4, "image": "x"}})
        );
        assert_eq!(after_scaling(parent, ".spec.size.count", json!(2))["spec"]["size"], json!({"count": 2}));
    }

    #[test]
    fn the_replicas_path_is_the_served_versions_or_the_built_in_one() {
        let crd = json!({"spec": {"group": "g.example.com", "names": {"plural": "kvs"}, "versions": [
            {"name": "v1", "subresources": {"scale": {"specReplicasPath": ".spec.size"}}},
            {"name": "v2", "subresources": {"status": {}}},
        ]}});
        let crds = [crd];
        assert_eq!(spec_replicas_path(&crds, &resource("g.example.com", "v1", "kvs")), ".spec.size");
        assert_eq!(spec_replicas_path(&crds, &resource("g.example.com", "v2", "kvs")), ".spec.replicas");
        assert_eq!(spec_replicas_path(&crds, &resource("apps", "v1", "deployments")), ".spec.replicas");
    }
}
