//! Hot-swap test plugin. Each `Widget` (group `swap.test.operator-host.dev`)
//! keeps one ConfigMap, created with `generateName` so that a reconcile that
//! ran on a stale view would show up as a duplicate, holding `data.version`:
//! "1" in the default build, "2" with `--features v2`. Extras are left in
//! place on purpose: a test counts them. `--features broken` is a bad
//! release (3.0.0, same kinds) that panics on every reconcile, for rollback.
//! `--features sprocket` and `--features gizmo` are other controllers
//! altogether (names `sprocket` and `gizmo`, parent kinds `Sprocket` and
//! `Gizmo`): `bench memory` needs ten controllers of distinct kinds.

use operator_plugin_sdk::{Action, GroupVersionKind, Manifest, Object, Plugin, ReconcileError, Time, export_plugin, json};

pub struct Versioned;

const GROUP: &str = "swap.test.operator-host.dev";

#[cfg(not(any(feature = "v2", feature = "broken")))]
const STAMP: &str = "1";
#[cfg(feature = "v2")]
const STAMP: &str = "2";
#[cfg(feature = "broken")]
const STAMP: &str = "3";

/// (plugin name, parent kind, singular).
#[cfg(not(any(feature = "sprocket", feature = "gizmo")))]
const NAMES: (&str, &str, &str) = ("versioned", "Widget", "widget");
#[cfg(feature = "sprocket")]
const NAMES: (&str, &str, &str) = ("sprocket", "Sprocket", "sprocket");
#[cfg(feature = "gizmo")]
const NAMES: (&str, &str, &str) = ("gizmo", "Gizmo", "gizmo");

impl Plugin for Versioned {
    fn manifest() -> Manifest {
        Manifest {
            name: NAMES.0.into(),
            version: format!("{STAMP}.0.0"),
            parent: GroupVersionKind::new(GROUP, "v1", NAMES.1),
            children: vec![GroupVersionKind::new("", "v1", "ConfigMap")],
            related: vec![],
            crds: vec![crd()],
            finalizer: None,
        }
    }

    fn reconcile(parent: &Object, children: &[Object], _now: Time) -> Result<Vec<Action>, ReconcileError> {
        if cfg!(feature = "broken") {
            panic!("versioned {STAMP}.0.0 is broken on purpose");
        }
        let mine: Vec<&Object> = children.iter().filter(|c| c.kind() == "ConfigMap").collect();
        let mut actions = Vec::new();
        if mine.is_empty() {
            actions.push(Action::Create(json!({
                "apiVersion": "v1",
                "kind": "ConfigMap",
                "metadata": {"generateName": format!("{}-", parent.name()), "labels": {"widget": parent.name()}},
                "data": {"version": STAMP},
            })));
        }
        for c in &mine {
            if c["data"]["version"] != STAMP {
                actions.push(Action::Patch { target: c.object_ref(), patch: json!({"data": {"version": STAMP}}) });
            }
        }
        actions.push(Action::SetStatus(json!({"version": STAMP, "children": mine.len()})));
        Ok(actions)
    }
}

fn crd() -> operator_plugin_sdk::serde_json::Value {
    json!({
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": format!("{}s.{GROUP}", NAMES.2)},
        "spec": {
            "group": GROUP,
            "names": {"kind": NAMES.1, "plural": format!("{}s", NAMES.2), "singular": NAMES.2, "listKind": format!("{}List", NAMES.1)},
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

export_plugin!(Versioned);
