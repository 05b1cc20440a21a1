//! MyDeployment: a simplified Deployment that owns its Pods directly (the
//! MyDeployment of the Fabric8 CRD tutorial the README names), with upstream Kubernetes Deployment semantics (rolling update
//! within maxSurge / maxUnavailable, Recreate, minReadySeconds, paused,
//! revision history as ControllerRevisions, level-based rollback,
//! Available / Progressing conditions), as an operator-host plugin.
//!
//! See README.md for the API and every place it follows upstream rather
//! than the tutorial.

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

use operator_plugin_sdk::k8s_openapi::api::apps::v1::ControllerRevision;
use operator_plugin_sdk::prelude::*;

pub use crd::{MyDeployment, MyDeploymentSpec, MyDeploymentStatus};

/// The plugin.
pub struct MyDeploymentPlugin;

impl Controller for MyDeploymentPlugin {
    type Parent = MyDeployment;

    fn manifest() -> Manifest {
        // Pods and revisions go with their owner through ownerReferences;
        // there is nothing to clean up, so no finalizer.
        Manifest::for_parent_with_crd::<MyDeployment>("mydeployment", env!("CARGO_PKG_VERSION"), embedded_crd!())
            .child::<pods::Pod>()
            .child::<ControllerRevision>()
            .related(config_hash::related_kind())
    }

    fn reconcile_with_related(parent: &MyDeployment, children: &Children, related: &Related, now: Time) -> Result<Outcome, ReconcileError> {
        reconcile::reconcile(parent, children, related, now)
    }

    /// Over the object as sent: worded and pathed as the API server's
    /// `ValidateDeployment`, a spec the types cannot hold included.
    fn validate_raw(object: &Object, old: Option<&Object>) -> Vec<FieldError> {
        validate::validate(object, old)
    }

    /// In place, so fields the types do not know are kept.
    fn default_raw(object: Object) -> Result<Object, ReconcileError> {
        Ok(defaults::apply(object))
    }
}

export_plugin!(MyDeploymentPlugin);
