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
pub mod status_conditions;
pub mod validate;

use operator_plugin_sdk::prelude::*;

pub use api::{CronJob, CronJobSpec, CronJobStatus};
use jobs::Job;

/// The plugin.
pub struct CronJobPlugin;

impl Controller for CronJobPlugin {
    type Parent = CronJob;

    fn manifest() -> Manifest {
        Manifest::for_parent_with_crd::<CronJob>("cronjob", env!("CARGO_PKG_VERSION"), embedded_crd!()).child::<Job>()
    }

    fn reconcile(cron_job: &CronJob, children: &Children, now: Time) -> Result<Outcome, ReconcileError> {
        match children.of::<Job>() {
            Ok(jobs) => reconcile::reconcile(cron_job, &jobs, now),
            Err(error) => reconcile::children_unreadable(cron_job, &error, now),
        }
    }

    /// A stored CronJob the type cannot read (a field of the wrong JSON
    /// type, which the CRD schema prevents) cannot be scheduled until edited.
    fn unreadable_parent(name: &str, error: &str) -> ReconcileError {
        ReconcileError::permanent("InvalidSpec", format!("cannot read CronJob {name}: {error}"))
    }

    /// Over the object as sent, so that each wrongly typed field is named
    /// as the API server names it.
    fn validate_raw(object: &Object, _old: Option<&Object>) -> Vec<FieldError> {
        validate::validate_object(object)
    }

    /// In place, keeping fields the type does not know.
    fn default_raw(object: Object) -> Result<Object, ReconcileError> {
        defaults::default(object)
    }
}

export_plugin!(CronJobPlugin);
