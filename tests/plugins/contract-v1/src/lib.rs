//! A well-formed plugin of a contract version this host does not speak.

wit_bindgen::generate!({ path: "wit", world: "plugin" });

use exports::operator::plugin::controller::{Action, FieldError, GroupVersionKind, Guest, PluginManifest, ReconcileError};

struct Future;

impl Guest for Future {
    fn manifest() -> PluginManifest {
        let gvk = GroupVersionKind { group: "test.operator.dev".into(), version: "v1".into(), kind: "Future".into() };
        PluginManifest { name: "future".into(), version: "1.0.0".into(), parent: gvk, children: vec![], crds: vec![], finalizer: None }
    }

    fn reconcile(_parent: String, _children: Vec<String>, _now: i64) -> Result<Vec<Action>, ReconcileError> {
        Ok(vec![])
    }

    fn validate(_object: String, _old: Option<String>) -> Vec<FieldError> {
        Vec::new()
    }

    fn default(object: String) -> Result<String, ReconcileError> {
        Ok(object)
    }
}

export!(Future);
