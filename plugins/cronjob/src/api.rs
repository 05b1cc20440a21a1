//! The CronJob API (`batch.tutorial.kubebuilder.io/v1`): the tutorial's spec
//! plus upstream's `timeZone`, and a status with upstream's
//! `lastSuccessfulTime` and conditions.

use operator_plugin_sdk::{Condition, ReconcileError, conditions};
use serde::{Deserialize, Serialize};
use serde_json::Value;

pub const GROUP: &str = "batch.tutorial.kubebuilder.io";
pub const VERSION: &str = "v1";
pub const KIND: &str = "CronJob";
pub const PLURAL: &str = "cronjobs";

/// The tutorial's record of a Job's scheduled time (RFC 3339, UTC).
pub const SCHEDULED_AT_ANNOTATION: &str = "batch.tutorial.kubebuilder.io/scheduled-at";
/// Upstream's record of the same (RFC 3339 in the CronJob's time zone).
pub const UPSTREAM_SCHEDULED_TIMESTAMP_ANNOTATION: &str =
    "batch.kubernetes.io/cronjob-scheduled-timestamp";

/// The plugin's own status condition: whether the spec can be scheduled.
pub const VALID_CONDITION: &str = "Valid";

/// Job names are `<cronjob>-<minutes>`; a Job name is a DNS-1035 label of at
/// most 63 characters and the suffix takes 11, hence 52.
pub const MAX_NAME_LENGTH: usize = 52;

/// The CronJob as the plugin reads it. Fields are lenient (`Option`, wide
/// integers): the CRD schema checks types, `validate` checks values, and a
/// parent that still does not fit is reported, not trusted.
#[derive(Clone, Debug, Default, Deserialize)]
pub struct CronJob {
    #[serde(default)]
    pub spec: CronJobSpec,
    #[serde(default)]
    pub status: CronJobStatus,
}

#[derive(Clone, Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct CronJobSpec {
    #[serde(default)]
    pub schedule: Option<String>,
    #[serde(default)]
    pub time_zone: Option<String>,
    #[serde(default)]
    pub starting_deadline_seconds: Option<i64>,
    #[serde(default)]
    pub concurrency_policy: Option<String>,
    #[serde(default)]
    pub suspend: Option<bool>,
    #[serde(default)]
    pub job_template: Option<Value>,
    #[serde(default)]
    pub successful_jobs_history_limit: Option<i64>,
    #[serde(default)]
    pub failed_jobs_history_limit: Option<i64>,
}

#[derive(Clone, Debug, Default, PartialEq, Deserialize, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct CronJobStatus {
    /// Pointers to the Jobs still running.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub active: Vec<JobReference>,
    /// When a Job was last scheduled (its scheduled time, not its start).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_schedule_time: Option<String>,
    /// When a Job last completed successfully.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_successful_time: Option<String>,
    /// Conditions written by others may lack fields ours need: read leniently.
    #[serde(default, skip_serializing_if = "Vec::is_empty", deserialize_with = "conditions::lenient")]
    pub conditions: Vec<Condition>,
}

/// A `corev1.ObjectReference` to a Job.
#[derive(Clone, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Deserialize, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct JobReference {
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub api_version: String,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub kind: String,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub namespace: String,
    #[serde(default)]
    pub name: String,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub uid: String,
}

/// `spec.concurrencyPolicy`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ConcurrencyPolicy {
    /// Runs may overlap (the default).
    Allow,
    /// A run is skipped while an earlier one is still active.
    Forbid,
    /// Active runs are deleted before a new one starts.
    Replace,
}

impl ConcurrencyPolicy {
    pub const NAMES: [&str; 3] = ["Allow", "Forbid", "Replace"];

    /// Unset and empty mean Allow, as the defaulting webhook would have made it.
    pub fn parse(value: Option<&str>) -> Option<Self> {
        match value.unwrap_or("") {
            "" | "Allow" => Some(Self::Allow),
            "Forbid" => Some(Self::Forbid),
            "Replace" => Some(Self::Replace),
            _ => None,
        }
    }
}

impl CronJob {
    /// Reads the parent; a parent whose fields have the wrong JSON types is a
    /// permanent error (only an edit can fix it).
    pub fn from_object(parent: &operator_plugin_sdk::Object) -> Result<Self, ReconcileError> {
        // Deserialized from the parent in place: no copy of the whole object.
        CronJob::deserialize(parent.value()).map_err(|e| {
            ReconcileError::permanent(
                "InvalidSpec",
                format!("cannot read CronJob {}: {e}", parent.name()),
            )
        })
    }
}
