//! MyDeployment: seed 003's simplified Deployment that owns its Pods
//! directly, with upstream Kubernetes Deployment semantics (rolling update
//! within maxSurge / maxUnavailable, Recreate, minReadySeconds, paused,
//! revision history as ControllerRevisions, level-based rollback,
//! Available / Progressing conditions), as an operator-host plugin.
//!
//! See README.md for the API and every place it follows upstream rather
//! than the seed.

pub mod api;
pub mod config_hash;
pub mod crd;
pub mod defaults;
pub mod fenceposts;
pub mod hash;
pub mod history;
pub mod pods;
pub mod reconcile;
pub mod rollout;
pub mod selector;
pub mod status;
pub mod validate;

use operator_plugin_sdk::{
    Action, FieldError, GroupVersionKind, Manifest, Object, Plugin, ReconcileError, Time,
    export_plugin,
};

/// The plugin.
pub struct MyDeploymentPlugin;

impl Plugin for MyDeploymentPlugin {
    fn manifest() -> Manifest {
        Manifest {
            name: "mydeployment".into(),
            version: env!("CARGO_PKG_VERSION").into(),
            parent: GroupVersionKind::new(api::GROUP, api::VERSION, api::KIND),
            children: vec![
                GroupVersionKind::new("", "v1", "Pod"),
                GroupVersionKind::new("apps", "v1", "ControllerRevision"),
            ],
            related: vec![config_hash::related_kind()],
            crds: vec![crd::crd()],
            // Pods and revisions go with their owner through ownerReferences;
            // there is nothing to clean up, so no finalizer.
            finalizer: None,
        }
    }

    fn reconcile(
        parent: &Object,
        children: &[Object],
        now: Time,
    ) -> Result<Vec<Action>, ReconcileError> {
        reconcile::reconcile(parent, children, now)
    }

    fn reconcile_with_related(
        parent: &Object,
        children: &[Object],
        related: &[Object],
        now: Time,
    ) -> Result<Vec<Action>, ReconcileError> {
        reconcile::reconcile_with_related(parent, children, related, now)
    }

    fn validate(object: &Object, old: Option<&Object>) -> Vec<FieldError> {
        validate::validate(object, old)
    }

    fn default(object: Object) -> Result<Object, ReconcileError> {
        Ok(defaults::apply(object))
    }
}

export_plugin!(MyDeploymentPlugin);
