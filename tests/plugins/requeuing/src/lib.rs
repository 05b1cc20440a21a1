//! Requeue-priority test plugin (contract 0.4, through the SDK). Each
//! `Ticker` (group `requeue.test.operator-host.dev`) writes nothing and asks
//! to be reconciled again after `spec.afterMs` milliseconds (one minute when
//! absent), at low priority when `spec.priority` is `low`
//! ([`Outcome::at_low_priority`]), so a test sees at which priority the host
//! hands out the timer's pass. `requeuing-v0-3` is the same plugin frozen at
//! contract 0.3.

use std::time::Duration;

use operator_plugin_sdk::{Action, GroupVersionKind, Manifest, Object, Outcome, Plugin, ReconcileError, Time, export_plugin, json};

pub struct Requeuing;

impl Plugin for Requeuing {
    fn manifest() -> Manifest {
        Manifest {
            name: "requeuing".into(),
            version: "0.4.0".into(),
            parent: GroupVersionKind::new("requeue.test.operator-host.dev", "v1", "Ticker"),
            children: vec![],
            related: vec![],
            crds: vec![crd()],
            finalizer: None,
        }
    }

    fn reconcile(parent: &Object, _children: &[Object], _now: Time) -> Result<Vec<Action>, ReconcileError> {
        let after = Duration::from_millis(parent["spec"]["afterMs"].as_u64().unwrap_or(60_000));
        let out = Outcome::new().requeue_after(after);
        let out = if parent["spec"]["priority"] == "low" { out.at_low_priority() } else { out };
        Ok(out.into_actions())
    }
}

fn crd() -> operator_plugin_sdk::serde_json::Value {
    json!({
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
                        "status": {"type": "object", "x-kubernetes-preserve-unknown-fields": true},
                    },
                }},
            }],
        },
    })
}

export_plugin!(Requeuing);
