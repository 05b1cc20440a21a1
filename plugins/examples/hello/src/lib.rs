//! The minimal example plugin: each `Hello` (group `example.operator.dev`)
//! keeps one ConfigMap named `<name>-greeting` holding `spec.greeting`, and
//! reports in its status whether the ConfigMap is up to date.

use operator_plugin_sdk::{Action, FieldError, GroupVersionKind, Manifest, Object, Plugin, ReconcileError, Time, export_plugin, json};

pub struct Hello;

const GROUP: &str = "example.operator.dev";

impl Plugin for Hello {
    fn manifest() -> Manifest {
        Manifest {
            name: "hello".into(),
            version: env!("CARGO_PKG_VERSION").into(),
            parent: GroupVersionKind::new(GROUP, "v1alpha1", "Hello"),
            children: vec![GroupVersionKind::new("", "v1", "ConfigMap")],
            crds: vec![crd()],
            finalizer: None,
        }
    }

    fn reconcile(parent: &Object, children: &[Object], _now: Time) -> Result<Vec<Action>, ReconcileError> {
        let greeting = parent.spec()["greeting"].as_str().unwrap_or("Hello");
        let name = format!("{}-greeting", parent.name());
        let desired = json!({"greeting": greeting});
        let mut actions = Vec::new();
        match children.iter().find(|c| c.kind() == "ConfigMap" && c.name() == name) {
            None => {
                actions.push(Action::Create(json!({
                    "apiVersion": "v1",
                    "kind": "ConfigMap",
                    "metadata": {"name": name},
                    "data": desired,
                })));
                actions.push(Action::normal("Created", format!("created ConfigMap {name}")));
            }
            Some(existing) if existing["data"] != desired => {
                actions.push(Action::Patch { target: existing.object_ref(), patch: json!({"data": desired}) });
            }
            Some(_) => {}
        }
        actions.push(Action::SetStatus(json!({"upToDate": actions.is_empty()})));
        Ok(actions)
    }

    fn validate(object: &Object, _old: Option<&Object>) -> Vec<FieldError> {
        match object.spec()["greeting"].as_str() {
            Some(g) if g.len() > 64 => vec![FieldError::too_long("spec.greeting", g, 64)],
            _ => vec![],
        }
    }

    fn default(mut object: Object) -> Result<Object, ReconcileError> {
        if object.spec()["greeting"].is_null() {
            object.0["spec"]["greeting"] = json!("Hello");
        }
        Ok(object)
    }
}

fn crd() -> operator_plugin_sdk::serde_json::Value {
    json!({
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": format!("hellos.{GROUP}")},
        "spec": {
            "group": GROUP,
            "names": {"kind": "Hello", "plural": "hellos", "singular": "hello", "listKind": "HelloList"},
            "scope": "Namespaced",
            "versions": [{
                "name": "v1alpha1", "served": true, "storage": true,
                "subresources": {"status": {}},
                "schema": {"openAPIV3Schema": {
                    "type": "object",
                    "properties": {
                        "spec": {"type": "object", "properties": {"greeting": {"type": "string", "maxLength": 64}}},
                        "status": {"type": "object", "properties": {
                            "upToDate": {"type": "boolean"},
                            // The host writes its `Reconciled` condition here; a
                            // schema without it would prune the condition away.
                            "conditions": {"type": "array", "items": {"type": "object", "x-kubernetes-preserve-unknown-fields": true}}
                        }}
                    }
                }}
            }]
        }
    })
}

export_plugin!(Hello);

#[cfg(test)]
mod tests {
    use super::*;

    fn hello(greeting: &str) -> Object {
        Object(json!({
            "apiVersion": "example.operator.dev/v1alpha1", "kind": "Hello",
            "metadata": {"name": "world", "namespace": "default", "uid": "u1"},
            "spec": {"greeting": greeting}
        }))
    }

    #[test]
    fn a_new_hello_creates_its_configmap() {
        let actions = Hello::reconcile(&hello("Hi"), &[], Time::from_unix_millis(0)).unwrap();
        assert!(matches!(&actions[0], Action::Create(cm) if cm["data"]["greeting"] == "Hi" && cm["metadata"]["name"] == "world-greeting"));
    }

    #[test]
    fn an_up_to_date_configmap_is_left_alone() {
        let cm = Object(json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "world-greeting", "namespace": "default"}, "data": {"greeting": "Hi"}}));
        let actions = Hello::reconcile(&hello("Hi"), &[cm], Time::from_unix_millis(0)).unwrap();
        assert_eq!(actions, vec![Action::SetStatus(json!({"upToDate": true}))]);
    }
}
