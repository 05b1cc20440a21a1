//! A test plugin that uses a finalizer the way an operator with external
//! state would: each `Tidy` keeps a ConfigMap `<name>-data`; when the Tidy is
//! deleted the plugin cleans up (deletes the ConfigMap itself and says so
//! with a `CleanupStarted` Event) and answers `Finalized` only once the
//! cleanup is complete: the ConfigMap is gone from its children and the
//! annotation `finalizing.test/hold: "true"` is absent (so a test can hold a
//! deletion and then release it).

use operator_plugin_sdk::{Action, FieldError, GroupVersionKind, Manifest, Object, Plugin, ReconcileError, Time, export_plugin, json};

pub struct Finalizing;

const GROUP: &str = "finalizing.test.operator-host.dev";
/// The finalizer the host adds to every Tidy.
pub const FINALIZER: &str = "finalizing.test.operator-host.dev/cleanup";
/// While this annotation is `"true"`, cleanup is never complete.
pub const HOLD: &str = "finalizing.test/hold";

impl Plugin for Finalizing {
    fn manifest() -> Manifest {
        Manifest {
            name: "finalizing".into(),
            version: env!("CARGO_PKG_VERSION").into(),
            parent: GroupVersionKind::new(GROUP, "v1", "Tidy"),
            children: vec![GroupVersionKind::new("", "v1", "ConfigMap")],
            related: vec![],
            crds: vec![crd()],
            finalizer: Some(FINALIZER.into()),
        }
    }

    fn reconcile(parent: &Object, children: &[Object], _now: Time) -> Result<Vec<Action>, ReconcileError> {
        let name = format!("{}-data", parent.name());
        let child = children.iter().find(|c| c.kind() == "ConfigMap" && c.name() == name);
        if parent.is_being_deleted() {
            return Ok(clean_up(parent, child));
        }
        let desired = json!({"content": parent.spec()["content"].as_str().unwrap_or("tidy")});
        let mut actions = Vec::new();
        match child {
            None => actions.push(Action::Create(json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name}, "data": desired}))),
            Some(c) if c["data"] != desired => actions.push(Action::Patch { target: c.object_ref(), patch: json!({"data": desired}) }),
            Some(_) => {}
        }
        actions.push(Action::SetStatus(json!({"phase": "Ready"})));
        Ok(actions)
    }

    fn validate(_object: &Object, _old: Option<&Object>) -> Vec<FieldError> {
        Vec::new()
    }

    fn default(object: Object) -> Result<Object, ReconcileError> {
        Ok(object)
    }
}

/// The actions for a Tidy being deleted: one step of cleanup per call, and
/// `Finalized` only when nothing is left and no hold is set.
fn clean_up(parent: &Object, child: Option<&Object>) -> Vec<Action> {
    let held = parent.annotation(HOLD) == Some("true");
    let mut actions = Vec::new();
    if let Some(c) = child {
        actions.push(Action::delete(c.object_ref()));
        actions.push(Action::normal("CleanupStarted", format!("deleting ConfigMap {}", c.name())));
    }
    if child.is_none() && !held {
        actions.push(Action::normal("CleanupDone", "nothing left; releasing the finalizer"));
        actions.push(Action::Finalized {});
    } else {
        let phase = if held { "CleanupHeld" } else { "CleaningUp" };
        actions.push(Action::SetStatus(json!({"phase": phase})));
    }
    actions
}

fn crd() -> operator_plugin_sdk::serde_json::Value {
    json!({
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": format!("tidies.{GROUP}")},
        "spec": {
            "group": GROUP,
            "names": {"kind": "Tidy", "plural": "tidies", "singular": "tidy", "listKind": "TidyList"},
            "scope": "Namespaced",
            "versions": [{
                "name": "v1", "served": true, "storage": true,
                "subresources": {"status": {}},
                "schema": {"openAPIV3Schema": {
                    "type": "object",
                    "properties": {
                        "spec": {"type": "object", "properties": {"content": {"type": "string"}}},
                        // Unknown fields kept: the host's `Reconciled` condition lives here too.
                        "status": {"type": "object", "x-kubernetes-preserve-unknown-fields": true}
                    }
                }}
            }]
        }
    })
}

export_plugin!(Finalizing);

#[cfg(test)]
mod tests {
    use super::*;

    fn tidy(deleting: bool, held: bool) -> Object {
        let mut t = json!({"apiVersion": "finalizing.test.operator-host.dev/v1", "kind": "Tidy",
            "metadata": {"name": "t", "namespace": "default", "uid": "u1"}, "spec": {}});
        if deleting {
            t["metadata"]["deletionTimestamp"] = json!("2026-01-01T00:00:00Z");
        }
        if held {
            t["metadata"]["annotations"] = json!({HOLD: "true"});
        }
        Object::new(t)
    }

    fn data() -> Object {
        Object::new(
            json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "t-data", "namespace": "default"}, "data": {"content": "tidy"}}),
        )
    }

    #[test]
    fn a_live_tidy_keeps_its_configmap_and_never_finalizes() {
        let actions = Finalizing::reconcile(&tidy(false, false), &[], Time::from_unix_millis(0)).unwrap();
        assert!(matches!(&actions[0], Action::Create(cm) if cm["metadata"]["name"] == "t-data"));
        assert!(!actions.contains(&Action::Finalized {}));
    }

    #[test]
    fn a_deleted_tidy_deletes_its_child_before_it_finalizes() {
        let actions = Finalizing::reconcile(&tidy(true, false), &[data()], Time::from_unix_millis(0)).unwrap();
        assert!(matches!(&actions[0], Action::Delete { target, .. } if target.name == "t-data"));
        assert!(!actions.contains(&Action::Finalized {}), "the child is still there");
        let actions = Finalizing::reconcile(&tidy(true, false), &[], Time::from_unix_millis(0)).unwrap();
        assert!(actions.contains(&Action::Finalized {}));
    }

    #[test]
    fn a_hold_keeps_the_finalizer() {
        let actions = Finalizing::reconcile(&tidy(true, true), &[], Time::from_unix_millis(0)).unwrap();
        assert!(!actions.contains(&Action::Finalized {}));
        assert!(actions.contains(&Action::SetStatus(json!({"phase": "CleanupHeld"}))));
    }
}
