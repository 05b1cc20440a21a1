//! `requeuing` frozen at contract 0.3, written against `wit/v0.3` directly
//! (no SDK): the host must keep running 0.3 components unchanged. Each
//! `Ticker` asks to be reconciled again after `spec.afterMs` milliseconds
//! (one minute when absent); 0.3 has no priority to ask for, so
//! `spec.priority` is ignored and every requeue is normal priority.

// Frozen at 0.3 (`wit/v0.3`).
wit_bindgen::generate!({ path: "../../../wit/v0.3", world: "plugin" });

use exports::operator::plugin::controller::{Action, FieldError, GroupVersionKind, Guest, PluginManifest, ReconcileError};
use exports::operator::plugin::desired::{Guest as DesiredGuest, Step};
use serde_json::Value;

struct Requeuing;

fn requeue(parent: &str) -> Result<Vec<Action>, ReconcileError> {
    let parent: Value =
        serde_json::from_str(parent).map_err(|e| ReconcileError { reason: "InvalidInput".into(), message: e.to_string(), retryable: false })?;
    Ok(vec![Action::RequeueAfter(parent["spec"]["afterMs"].as_u64().unwrap_or(60_000))])
}

impl Guest for Requeuing {
    fn manifest() -> PluginManifest {
        PluginManifest {
            name: "requeuing".into(),
            version: "0.3.0".into(),
            parent: GroupVersionKind { group: "requeue.test.operator-host.dev".into(), version: "v1".into(), kind: "Ticker".into() },
            children: vec![],
            related: vec![],
            crds: vec![CRD.into()],
            finalizer: None,
        }
    }

    fn reconcile(parent: String, _children: Vec<String>, _related: Vec<String>, _now: i64) -> Result<Vec<Action>, ReconcileError> {
        requeue(&parent)
    }

    fn validate(_object: String, _old: Option<String>) -> Vec<FieldError> {
        Vec::new()
    }

    fn default(object: String) -> Result<String, ReconcileError> {
        Ok(object)
    }
}

impl DesiredGuest for Requeuing {
    fn reconcile(parent: String, _children: Vec<String>, _related: Vec<String>, _now: i64) -> Result<Vec<Step>, ReconcileError> {
        Ok(requeue(&parent)?.into_iter().map(Step::Act).collect())
    }
}

/// The Ticker CRD, as `requeuing` declares it.
const CRD: &str = r#"{
    "apiVersion": "apiextensions.k8s.io/v1",
    "kind": "CustomResourceDefinition",
    "metadata": {"name": "tickers.requeue.test.operator-host.dev"},
    "spec": {
        "group": "requeue.test.operator-host.dev",
        "names": {"kind": "Ticker", "plural": "tickers", "singular": "ticker", "listKind": "TickerList"},
        "scope": "Namespaced",
        "versions": [{
            "name": "v1", "served": true, "storage": true,
            "subresources": {"status": {}},
            "schema": {"openAPIV3Schema": {
                "type": "object",
                "properties": {
                    "spec": {"type": "object", "x-kubernetes-preserve-unknown-fields": true},
                    "status": {"type": "object", "x-kubernetes-preserve-unknown-fields": true}
                }
            }}
        }]
    }
}"#;

export!(Requeuing);
