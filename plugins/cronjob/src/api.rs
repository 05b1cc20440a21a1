//! The CronJob API (`batch.tutorial.kubebuilder.io/v1`): the tutorial's types
//! with upstream's `timeZone` and `lastSuccessfulTime`, as controller-gen
//! would read them. `#[derive(CustomResource, JsonSchema)]` makes them both
//! the typed parent reconcile reads and the CRD (see `crd`); the markers are
//! `#[kube]` and `#[schemars]` attributes (validation, status subresource,
//! printer columns).
//!
//! The plugin reads what is stored, which admission may not have checked, so
//! the Rust types are wider than the schema where that keeps a stored object
//! readable: a missing `schedule` or `jobTemplate`, an unknown
//! `concurrencyPolicy` or a history limit beyond `int32` reaches `validate`
//! and is reported through the `Valid` condition instead of failing the read.
//! `#[schemars(with = ...)]` keeps the schema what the tutorial's markers say.

use operator_plugin_sdk::conditions;
use operator_plugin_sdk::prelude::*;
use serde_json::Value;

pub const GROUP: &str = "batch.tutorial.kubebuilder.io";
pub const VERSION: &str = "v1";
pub const KIND: &str = "CronJob";
pub const PLURAL: &str = "cronjobs";

/// The tutorial's record of a Job's scheduled time (RFC 3339, UTC).
pub const SCHEDULED_AT_ANNOTATION: &str = "batch.tutorial.kubebuilder.io/scheduled-at";
/// Upstream's record of the same (RFC 3339 in the CronJob's time zone).
pub const UPSTREAM_SCHEDULED_TIMESTAMP_ANNOTATION: &str = "batch.kubernetes.io/cronjob-scheduled-timestamp";

/// The plugin's own status condition: whether the spec can be scheduled.
pub const VALID_CONDITION: &str = "Valid";

/// Job names are `<cronjob>-<minutes>`; a Job name is a DNS-1035 label of at
/// most 63 characters and the suffix takes 11, hence 52.
pub const MAX_NAME_LENGTH: usize = 52;

/// CronJobSpec defines the desired state of CronJob.
#[derive(CustomResource, JsonSchema, Serialize, Deserialize, Clone, Debug, Default)]
#[kube(
    group = "batch.tutorial.kubebuilder.io",
    version = "v1",
    kind = "CronJob",
    plural = "cronjobs",
    namespaced,
    status = "CronJobStatus",
    doc = "CronJob is the Schema for the cronjobs API."
)]
#[kube(printcolumn = r#"{"name":"Schedule","type":"string","jsonPath":".spec.schedule"}"#)]
#[kube(printcolumn = r#"{"name":"Time Zone","type":"string","jsonPath":".spec.timeZone","priority":1}"#)]
#[kube(printcolumn = r#"{"name":"Suspend","type":"boolean","jsonPath":".spec.suspend"}"#)]
#[kube(
    printcolumn = r#"{"name":"Active","type":"string","jsonPath":".status.active[*].name","description":"The active Job (the first one, when several run)."}"#
)]
#[kube(printcolumn = r#"{"name":"Last Schedule","type":"date","jsonPath":".status.lastScheduleTime"}"#)]
#[kube(printcolumn = r#"{"name":"Age","type":"date","jsonPath":".metadata.creationTimestamp"}"#)]
#[kube(crates(
    kube_core = "::operator_plugin_sdk::kube_core",
    k8s_openapi = "::operator_plugin_sdk::k8s_openapi",
    schemars = "::operator_plugin_sdk::schemars",
    serde_json = "::operator_plugin_sdk::serde_json"
))]
#[serde(rename_all = "camelCase")]
// The field docs are the CRD's descriptions, worded as the kubebuilder book's.
#[allow(rustdoc::bare_urls)]
pub struct CronJobSpec {
    /// The schedule in Cron format, see https://en.wikipedia.org/wiki/Cron.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schemars(required, with = "String", length(min = 0))]
    pub schedule: Option<String>,
    /// The IANA time zone name for the schedule, e.g. America/New_York. Unset means UTC.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub time_zone: Option<String>,
    /// Optional deadline in seconds for starting the job if it misses scheduled time for any reason.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 0))]
    pub starting_deadline_seconds: Option<i64>,
    /// How to treat concurrent executions of a Job: Allow (default), Forbid or Replace.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(with = "Option<ConcurrencyPolicy>")]
    pub concurrency_policy: Option<String>,
    /// Suspend subsequent executions; does not apply to already started executions. Defaults to false.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub suspend: Option<bool>,
    /// Specifies the job that will be created when executing a CronJob.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schemars(required, schema_with = "crate::crd::job_template")]
    pub job_template: Option<Value>,
    /// The number of successful finished jobs to retain.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(with = "Option<i32>", range(min = 0))]
    pub successful_jobs_history_limit: Option<i64>,
    /// The number of failed finished jobs to retain.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(with = "Option<i32>", range(min = 0))]
    pub failed_jobs_history_limit: Option<i64>,
}

/// `spec.concurrencyPolicy`: how runs may overlap.
// Variants carry no doc comments: schemars would turn the enum into a `oneOf`.
#[derive(JsonSchema, Clone, Copy, Debug, PartialEq, Eq)]
pub enum ConcurrencyPolicy {
    // Runs may overlap (the default).
    Allow,
    // A run is skipped while an earlier one is still active.
    Forbid,
    // Active runs are deleted before a new one starts.
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

impl CronJobSpec {
    /// The policy; `None` for a value `validate` refuses.
    pub fn concurrency_policy(&self) -> Option<ConcurrencyPolicy> {
        ConcurrencyPolicy::parse(self.concurrency_policy.as_deref())
    }
}

/// CronJobStatus defines the observed state of CronJob.
#[derive(JsonSchema, Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct CronJobStatus {
    /// A list of pointers to currently running jobs.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(schema_with = "crate::crd::active_jobs")]
    pub active: Vec<JobReference>,
    /// Information when was the last time the job was successfully scheduled.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "crate::crd::date_time")]
    pub last_schedule_time: Option<String>,
    /// Information when was the last time the job successfully completed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "crate::crd::date_time")]
    pub last_successful_time: Option<String>,
    // Conditions written by others may lack fields ours need: read leniently.
    #[serde(default, skip_serializing_if = "Vec::is_empty", deserialize_with = "conditions::lenient")]
    #[schemars(schema_with = "crate::crd::conditions")]
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

impl CronJob {
    /// `metadata.name`, or "" (which `validate` refuses).
    pub fn name(&self) -> &str {
        self.metadata.name.as_deref().unwrap_or_default()
    }

    pub fn namespace(&self) -> &str {
        self.metadata.namespace.as_deref().unwrap_or_default()
    }

    pub fn generation(&self) -> i64 {
        self.metadata.generation.unwrap_or(0)
    }

    /// The status as stored, or an empty one.
    pub fn stored_status(&self) -> &CronJobStatus {
        static EMPTY: CronJobStatus =
            CronJobStatus { active: Vec::new(), last_schedule_time: None, last_successful_time: None, conditions: Vec::new() };
        self.status.as_ref().unwrap_or(&EMPTY)
    }
}
