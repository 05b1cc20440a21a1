//! A contract 0.2 plugin written against the WIT directly (no SDK), so the
//! host's related-object handling is tested on its own. A `Watcher` reads
//! the ConfigMap named by `spec.configMapRef.name` and the Pods picked by
//! `spec.selector`; each reconcile writes `status.related` (sorted
//! `Kind/name`, a ConfigMap with its `data.v`) and counts itself in
//! `status.reconciles`, so a test sees which parents were called.
//! `spec.mode: patch-related` answers a patch of the first related object,
//! which the host must refuse.

// Frozen at 0.2 (`wit/v0.2`): the host must keep running 0.2 components.
wit_bindgen::generate!({ path: "../../../wit/v0.2", world: "plugin" });

use exports::operator::plugin::controller::{
    Action, Attachment, FieldError, GroupVersionKind, Guest, MergePatch, ObjectRef, PluginManifest, ReconcileError, RelatedKind,
};
use serde_json::{Value, json};

const GROUP: &str = "related.test.operator-host.dev";

struct Related;

fn gvk(group: &str, version: &str, kind: &str) -> GroupVersionKind {
    GroupVersionKind { group: group.into(), version: version.into(), kind: kind.into() }
}

fn crd() -> Value {
    let open = json!({"type": "object", "x-kubernetes-preserve-unknown-fields": true});
    json!({
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": format!("watchers.{GROUP}")},
        "spec": {
            "group": GROUP,
            "names": {"kind": "Watcher", "listKind": "WatcherList", "plural": "watchers", "singular": "watcher"},
            "scope": "Namespaced",
            "versions": [{"name": "v1", "served": true, "storage": true, "subresources": {"status": {}},
                "schema": {"openAPIV3Schema": {"type": "object", "properties": {"spec": open, "status": open}}}}]
        }
    })
}

fn invalid(message: String) -> ReconcileError {
    ReconcileError { reason: "InvalidInput".into(), message, retryable: false }
}

fn describe(object: &Value) -> String {
    let kind = object["kind"].as_str().unwrap_or("?");
    let name = object["metadata"]["name"].as_str().unwrap_or("?");
    match object["data"]["v"].as_str() {
        Some(v) => format!("{kind}/{name}={v}"),
        None => format!("{kind}/{name}"),
    }
}

impl Guest for Related {
    fn manifest() -> PluginManifest {
        PluginManifest {
            name: "related".into(),
            version: "1.0.0".into(),
            parent: gvk(GROUP, "v1", "Watcher"),
            children: vec![],
            related: vec![
                RelatedKind {
                    kind: gvk("", "v1", "ConfigMap"),
                    attach: Attachment::NamesFrom(vec!["spec.configMapRef.name".into()]),
                    cluster_scoped: false,
                },
                RelatedKind { kind: gvk("", "v1", "Pod"), attach: Attachment::SelectorFrom("spec.selector".into()), cluster_scoped: false },
            ],
            crds: vec![crd().to_string()],
            finalizer: None,
        }
    }

    fn reconcile(parent: String, _children: Vec<String>, related: Vec<String>, _now: i64) -> Result<Vec<Action>, ReconcileError> {
        let parent: Value = serde_json::from_str(&parent).map_err(|e| invalid(format!("parent: {e}")))?;
        let related: Vec<Value> =
            related.iter().map(|r| serde_json::from_str(r)).collect::<Result<_, _>>().map_err(|e| invalid(format!("related: {e}")))?;
        if parent["spec"]["mode"] == "patch-related"
            && let Some(first) = related.first()
        {
            let target = ObjectRef {
                api_version: first["apiVersion"].as_str().unwrap_or_default().into(),
                kind: first["kind"].as_str().unwrap_or_default().into(),
                namespace: first["metadata"]["namespace"].as_str().unwrap_or_default().into(),
                name: first["metadata"]["name"].as_str().unwrap_or_default().into(),
            };
            return Ok(vec![Action::Patch(MergePatch { target, patch: json!({"metadata": {"labels": {"touched": "yes"}}}).to_string() })]);
        }
        let mut seen: Vec<String> = related.iter().map(describe).collect();
        seen.sort();
        let reconciles = parent["status"]["reconciles"].as_u64().unwrap_or(0) + 1;
        Ok(vec![Action::SetStatus(json!({"related": seen, "reconciles": reconciles}).to_string())])
    }

    fn validate(_object: String, _old: Option<String>) -> Vec<FieldError> {
        Vec::new()
    }

    fn default(object: String) -> Result<String, ReconcileError> {
        Ok(object)
    }
}

export!(Related);
