//! The kubebuilder tutorial's CronJob controller, with upstream Kubernetes'
//! semantics, as an operator-host plugin.
//!
//! A `CronJob` (`batch.tutorial.kubebuilder.io/v1`) runs a Job from its
//! template on a standard 5-field cron schedule, in an optional IANA time
//! zone, honouring a starting deadline, a concurrency policy and history
//! limits. See `README.md` for the API and every place this follows upstream
//! rather than the tutorial.

pub mod api;
pub mod crd;
pub mod defaults;
pub mod jobs;
pub mod reconcile;
pub mod runs;
pub mod schedule;
pub mod validate;

use operator_plugin_sdk::{
    Action, FieldError, GroupVersionKind, Manifest, Object, Plugin, ReconcileError, Time,
    export_plugin,
};

/// The plugin.
pub struct CronJobPlugin;

impl Plugin for CronJobPlugin {
    fn manifest() -> Manifest {
        Manifest {
            name: "cronjob".into(),
            version: env!("CARGO_PKG_VERSION").into(),
            parent: GroupVersionKind::new(api::GROUP, api::VERSION, api::KIND),
            children: vec![GroupVersionKind::new("batch", "v1", "Job")],
            related: vec![],
            crds: vec![crd::crd()],
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

    fn validate(object: &Object, _old: Option<&Object>) -> Vec<FieldError> {
        validate::validate(object)
    }

    fn default(object: Object) -> Result<Object, ReconcileError> {
        defaults::default(object)
    }
}

export_plugin!(CronJobPlugin);
