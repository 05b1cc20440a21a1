//! What a plugin needs from the cluster before its controller runs: its
//! CRDs installed and Established, and each of its kinds discovered.

use std::time::Duration;

use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{Api, Patch, PatchParams};
use kube::discovery::Scope;
use operator_plugin_sdk::GroupVersionKind;
use serde_json::Value;

use super::Error;
use crate::actions::FIELD_MANAGER;

/// `crd` as a real API server stores it, with `apiVersion` and `kind` set.
///
/// kube-apiserver decodes a CRD into Go structs and encodes it again, so
/// what it stores differs from what a Rust generator writes: the schema's
/// `minimum`, `maximum` and `multipleOf` are `float64` and a whole number is
/// written without a fraction (`0`, not `0.0`), and fields that are empty
/// (`priority: 0`, `description: ""` of a printer column) are omitted. The
/// host's server-side apply and `kubectl apply --server-side` of
/// `host generate crds` must send that same form: `spec.versions` is an
/// atomic list, so any other spelling of an equal value is a change, and the
/// second applier conflicts with the first on `.spec.versions`.
pub fn served_form(crd: &Value) -> Value {
    let mut crd = crd.clone();
    crd["apiVersion"] = "apiextensions.k8s.io/v1".into();
    crd["kind"] = "CustomResourceDefinition".into();
    if let Some(versions) = crd.pointer_mut("/spec/versions").and_then(Value::as_array_mut) {
        for version in versions {
            if let Some(schema) = version.pointer_mut("/schema/openAPIV3Schema") {
                whole_numbers_in_schema(schema);
            }
            if let Some(columns) = version.get_mut("additionalPrinterColumns").and_then(Value::as_array_mut) {
                for column in columns.iter_mut().filter_map(Value::as_object_mut) {
                    column.retain(|key, value| !matches!((key.as_str(), &*value), ("priority", v) if v.as_i64() == Some(0)));
                    column.retain(|key, value| !matches!((key.as_str(), &*value), ("description", v) if v.as_str() == Some("")));
                }
            }
        }
    }
    crd
}

/// `minimum`, `maximum` and `multipleOf` that are whole numbers written as
/// integers, in a JSON schema and every schema under it.
fn whole_numbers_in_schema(schema: &mut Value) {
    match schema {
        Value::Object(map) => {
            for (key, value) in map.iter_mut() {
                let numeric = matches!(key.as_str(), "minimum" | "maximum" | "multipleOf");
                match value.as_f64() {
                    Some(f) if numeric && f.fract() == 0.0 && f.abs() < 9.0e15 => *value = Value::from(f as i64),
                    _ => whole_numbers_in_schema(value),
                }
            }
        }
        Value::Array(items) => items.iter_mut().for_each(whole_numbers_in_schema),
        _ => {}
    }
}

/// Installs `crd` (in its [`served_form`]) by server-side apply and waits for `Established`.
pub async fn install_crd(client: &kube::Client, plugin: &str, crd: &Value, timeout: Duration) -> Result<(), Error> {
    let crd = served_form(crd);
    let name = crd
        .pointer("/metadata/name")
        .and_then(Value::as_str)
        .ok_or_else(|| Error::InvalidCrd { plugin: plugin.into(), detail: "a CRD without metadata.name".into() })?
        .to_string();
    let api: Api<CustomResourceDefinition> = Api::all(client.clone());
    api.patch(&name, &PatchParams::apply(FIELD_MANAGER).force(), &Patch::Apply(&crd))
        .await
        .map_err(|source| Error::InstallCrd { name: name.clone(), source })?;
    let deadline = tokio::time::Instant::now() + timeout;
    loop {
        if let Ok(crd) = api.get(&name).await {
            let established =
                crd.status.and_then(|s| s.conditions).unwrap_or_default().iter().any(|c| c.type_ == "Established" && c.status == "True");
            if established {
                tracing::info!(crd = %name, "CRD established");
                return Ok(());
            }
        }
        if tokio::time::Instant::now() >= deadline {
            return Err(Error::CrdNotEstablished { name, timeout });
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

pub(super) async fn discover(client: &kube::Client, gvk: &GroupVersionKind) -> Result<(kube::api::ApiResource, bool), Error> {
    let kgvk = kube::api::GroupVersionKind::gvk(&gvk.group, &gvk.version, &gvk.kind);
    let mut attempt = 0;
    loop {
        match kube::discovery::pinned_kind(client, &kgvk).await {
            Ok((ar, caps)) => return Ok((ar, caps.scope == Scope::Namespaced)),
            // Discovery of a just-established CRD can lag a moment on a real cluster.
            Err(_) if attempt < 20 => {
                attempt += 1;
                tokio::time::sleep(Duration::from_millis(250)).await;
            }
            Err(source) => {
                return Err(Error::Discovery { kind: format!("{}/{}", gvk.api_version(), gvk.kind), source });
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::served_form;

    #[test]
    fn the_served_form_writes_whole_bounds_as_integers_and_drops_empty_column_fields() {
        let crd = json!({"metadata": {"name": "ws.example.com"}, "spec": {"versions": [{
            "name": "v1",
            "schema": {"openAPIV3Schema": {"properties": {"spec": {"properties": {
                "replicas": {"type": "integer", "minimum": 0.0, "maximum": 10.0},
                "ratio": {"type": "number", "minimum": 0.5, "multipleOf": 0.25},
                "items": {"type": "array", "items": {"type": "integer", "minimum": 1.0}}
            }}}}},
            "additionalPrinterColumns": [
                {"name": "Age", "type": "date", "jsonPath": ".metadata.creationTimestamp", "priority": 0, "description": ""},
                {"name": "Wide", "type": "string", "jsonPath": ".spec.x", "priority": 1, "description": "shown with -o wide"}
            ]
        }]}});
        let served = served_form(&crd);
        assert_eq!((served["apiVersion"].as_str(), served["kind"].as_str()), (Some("apiextensions.k8s.io/v1"), Some("CustomResourceDefinition")));
        let spec = &served["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["spec"]["properties"];
        assert_eq!(spec["replicas"], json!({"type": "integer", "minimum": 0, "maximum": 10}));
        assert!(spec["replicas"]["minimum"].is_i64(), "0, not 0.0");
        assert_eq!(spec["ratio"], json!({"type": "number", "minimum": 0.5, "multipleOf": 0.25}));
        assert!(spec["items"]["items"]["minimum"].is_i64());
        let columns = &served["spec"]["versions"][0]["additionalPrinterColumns"];
        assert_eq!(columns[0], json!({"name": "Age", "type": "date", "jsonPath": ".metadata.creationTimestamp"}));
        assert_eq!(columns[1]["priority"], 1);
        assert_eq!(columns[1]["description"], "shown with -o wide");
    }
}
