//! The CustomResourceDefinition, generated as controller-gen generates it
//! from the tutorial's types and markers: `#[derive(CustomResource,
//! JsonSchema)]` on the spec below, with the markers as `#[kube]` and
//! `#[schemars]` attributes (validation, status subresource, printer
//! columns), and upstream's `timeZone` and `lastSuccessfulTime` added.
//!
//! These types are the CRD's shape; the plugin reads objects through the
//! lenient types of `api` (a stored object that no longer fits is reported,
//! not trusted). Embedded upstream types (the Job template, object
//! references, `metav1.Condition`) bring their schema through `schema_with`,
//! as controller-gen copies theirs from upstream. The Job template's pod spec
//! is `x-kubernetes-preserve-unknown-fields`: embedding the whole PodSpec
//! schema would add hundreds of KB to the CRD for checks the API server
//! repeats when the Job is created; `validate` checks the two fields that
//! decide whether a Job can be created at all.

use operator_plugin_sdk::prelude::*;
use operator_plugin_sdk::schemars::{Schema, SchemaGenerator};
use serde_json::{Value, json};

/// CronJobSpec defines the desired state of CronJob.
#[derive(CustomResource, JsonSchema, Serialize, Deserialize, Clone, Debug)]
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
#[kube(printcolumn = r#"{"name":"Active","type":"string","jsonPath":".status.active[*].name","description":"The active Job (the first one, when several run)."}"#)]
#[kube(printcolumn = r#"{"name":"Last Schedule","type":"date","jsonPath":".status.lastScheduleTime"}"#)]
#[kube(printcolumn = r#"{"name":"Age","type":"date","jsonPath":".metadata.creationTimestamp"}"#)]
#[kube(crates(
    kube_core = "::operator_plugin_sdk::kube_core",
    k8s_openapi = "::operator_plugin_sdk::k8s_openapi",
    schemars = "::operator_plugin_sdk::schemars",
    serde_json = "::operator_plugin_sdk::serde_json"
))]
#[serde(rename_all = "camelCase")]
pub struct CronJobSpec {
    /// The schedule in Cron format, see https://en.wikipedia.org/wiki/Cron.
    #[schemars(length(min = 0))]
    pub schedule: String,
    /// The IANA time zone name for the schedule, e.g. America/New_York. Unset means UTC.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub time_zone: Option<String>,
    /// Optional deadline in seconds for starting the job if it misses scheduled time for any reason.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 0))]
    pub starting_deadline_seconds: Option<i64>,
    /// How to treat concurrent executions of a Job: Allow (default), Forbid or Replace.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub concurrency_policy: Option<ConcurrencyPolicy>,
    /// Suspend subsequent executions; does not apply to already started executions. Defaults to false.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub suspend: Option<bool>,
    /// Specifies the job that will be created when executing a CronJob.
    #[schemars(schema_with = "job_template")]
    pub job_template: Value,
    /// The number of successful finished jobs to retain.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 0))]
    pub successful_jobs_history_limit: Option<i32>,
    /// The number of failed finished jobs to retain.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 0))]
    pub failed_jobs_history_limit: Option<i32>,
}

/// `spec.concurrencyPolicy`'s values (the schema's enum; `api` reads it leniently).
#[derive(JsonSchema, Serialize, Deserialize, Clone, Copy, Debug)]
pub enum ConcurrencyPolicy {
    Allow,
    Forbid,
    Replace,
}

/// CronJobStatus defines the observed state of CronJob.
#[derive(JsonSchema, Serialize, Deserialize, Clone, Debug, Default)]
#[serde(rename_all = "camelCase")]
pub struct CronJobStatus {
    /// A list of pointers to currently running jobs.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(schema_with = "active_jobs")]
    pub active: Vec<Value>,
    /// Information when was the last time the job was successfully scheduled.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "date_time")]
    pub last_schedule_time: Option<String>,
    /// Information when was the last time the job successfully completed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "date_time")]
    pub last_successful_time: Option<String>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(schema_with = "conditions")]
    pub conditions: Vec<Value>,
}

fn schema(value: Value) -> Schema {
    Schema::try_from(value).expect("a JSON object is a schema")
}

fn job_template(_: &mut SchemaGenerator) -> Schema {
    schema(json!({"type": "object", "properties": {"metadata": template_metadata(), "spec": job_spec()}}))
}

fn active_jobs(_: &mut SchemaGenerator) -> Schema {
    schema(json!({"type": "array", "items": object_reference(), "x-kubernetes-list-type": "atomic"}))
}

fn date_time(_: &mut SchemaGenerator) -> Schema {
    schema(json!({"type": "string", "format": "date-time"}))
}

fn conditions(_: &mut SchemaGenerator) -> Schema {
    schema(json!({"type": "array", "items": condition(), "x-kubernetes-list-type": "map", "x-kubernetes-list-map-keys": ["type"]}))
}

fn int(format: &str, description: &str) -> Value {
    json!({"type": "integer", "format": format, "description": description})
}

fn string_map(description: &str) -> Value {
    json!({"type": "object", "additionalProperties": {"type": "string"}, "description": description})
}

fn free_form(description: &str) -> Value {
    json!({"type": "object", "x-kubernetes-preserve-unknown-fields": true, "description": description})
}

fn template_metadata() -> Value {
    json!({
        "type": "object",
        "description": "Standard object's metadata of the objects created from this template.",
        "properties": {
            "labels": string_map("Labels copied to each object."),
            "annotations": string_map("Annotations copied to each object."),
            "name": {"type": "string"},
            "namespace": {"type": "string"},
            "generateName": {"type": "string"},
            "finalizers": {"type": "array", "items": {"type": "string"}}
        }
    })
}

fn job_spec() -> Value {
    json!({
        "type": "object",
        "description": "Specification of the desired behavior of the job (batch/v1 JobSpec).",
        "required": ["template"],
        "properties": {
            "activeDeadlineSeconds": int("int64", "Seconds a Job may be active before the system tries to terminate it."),
            "backoffLimit": int("int32", "Number of retries before marking this job failed."),
            "backoffLimitPerIndex": int("int32", "Retries within an index before marking that index failed."),
            "completionMode": {"type": "string", "enum": ["NonIndexed", "Indexed"]},
            "completions": int("int32", "Number of successfully finished pods the job should be run with."),
            "managedBy": {"type": "string"},
            "manualSelector": {"type": "boolean"},
            "maxFailedIndexes": int("int32", "Maximal number of failed indexes before marking the Job failed."),
            "parallelism": int("int32", "Maximum number of pods the job should run at any given time."),
            "podFailurePolicy": free_form("How failed pods influence the backoffLimit."),
            "podReplacementPolicy": {"type": "string", "enum": ["TerminatingOrFailed", "Failed"]},
            "selector": free_form("A label query over pods that should match the pod count."),
            "successPolicy": free_form("When the Job can be declared succeeded."),
            "suspend": {"type": "boolean"},
            "ttlSecondsAfterFinished": int("int32", "Lifetime of the Job after it finishes."),
            "template": {
                "type": "object",
                "description": "The pod that will be created when executing a job.",
                "properties": {
                    "metadata": template_metadata(),
                    "spec": free_form("The pod spec (core/v1 PodSpec); validated by the API server when the Job is created.")
                }
            }
        }
    })
}

fn object_reference() -> Value {
    json!({
        "type": "object",
        "description": "A reference to an active Job.",
        "x-kubernetes-map-type": "atomic",
        "properties": {
            "apiVersion": {"type": "string"},
            "fieldPath": {"type": "string"},
            "kind": {"type": "string"},
            "name": {"type": "string"},
            "namespace": {"type": "string"},
            "resourceVersion": {"type": "string"},
            "uid": {"type": "string"}
        }
    })
}

fn condition() -> Value {
    json!({
        "type": "object",
        "description": "A metav1.Condition.",
        "required": ["type", "status"],
        "properties": {
            "type": {"type": "string", "maxLength": 316},
            "status": {"type": "string", "enum": ["True", "False", "Unknown"]},
            "observedGeneration": {"type": "integer", "format": "int64", "minimum": 0},
            "lastTransitionTime": {"type": "string", "format": "date-time"},
            "reason": {"type": "string", "maxLength": 1024},
            "message": {"type": "string", "maxLength": 32768}
        }
    })
}

/// The `apiextensions.k8s.io/v1` CustomResourceDefinition for CronJob. In the
/// Wasm build it is the checked-in `crd.json`, which a native test keeps
/// equal to [`generated`]: building the CRD at run time would link
/// schemars and kube-derive's CRD assembly into the plugin (about +0.6 MB,
/// +40% gzipped), for a value that never changes after the build.
#[cfg(target_family = "wasm")]
pub fn crd() -> Value {
    operator_plugin_sdk::crd::from_json::<CronJob>(operator_plugin_sdk::embedded_crd!())
}

/// Natively (tests, `host generate`'s native comparisons), the generated CRD itself.
#[cfg(not(target_family = "wasm"))]
pub fn crd() -> Value {
    generated()
}

/// The CRD as `#[derive(CustomResource, JsonSchema)]` generates it.
#[cfg(not(target_family = "wasm"))]
pub fn generated() -> Value {
    operator_plugin_sdk::crd::generated::<CronJob>()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `crd.json` (what the Wasm build embeds) is what the derive generates.
    /// `UPDATE_CRD=1 cargo test -p cronjob crd` rewrites it.
    #[test]
    fn the_embedded_crd_json_is_the_generated_crd() {
        operator_plugin_sdk::testing::assert_crd_file_matches(&generated(), concat!(env!("CARGO_MANIFEST_DIR"), "/crd.json"));
    }

    /// The derive's CRD means what the hand-written one (kept as
    /// tests/crd-before.json) did, up to the derive's legitimate differences
    /// (see `testing::normalised_crd`).
    #[test]
    fn the_generated_crd_means_what_the_hand_written_one_did() {
        let before: Value = serde_json::from_str(include_str!("../tests/crd-before.json")).unwrap();
        operator_plugin_sdk::testing::assert_crds_mean_the_same(before, crd());
    }

    #[test]
    fn the_crd_carries_the_tutorials_validation_markers() {
        let crd = crd();
        let version = &crd["spec"]["versions"][0];
        let spec = &version["schema"]["openAPIV3Schema"]["properties"]["spec"];
        assert_eq!(
            crd["metadata"]["name"],
            "cronjobs.batch.tutorial.kubebuilder.io"
        );
        assert_eq!(version["subresources"]["status"], json!({}));
        // An unset policy may be sent as null (nullable, as kube writes `Option`).
        assert_eq!(
            spec["properties"]["concurrencyPolicy"]["enum"],
            json!(["Allow", "Forbid", "Replace", null])
        );
        for field in [
            "startingDeadlineSeconds",
            "successfulJobsHistoryLimit",
            "failedJobsHistoryLimit",
        ] {
            assert_eq!(spec["properties"][field]["minimum"].as_f64(), Some(0.0), "{field}");
        }
        assert_eq!(spec["required"], json!(["jobTemplate", "schedule"]));
        let pod_spec = &spec["properties"]["jobTemplate"]["properties"]["spec"]["properties"]["template"]
            ["properties"]["spec"];
        assert_eq!(pod_spec["x-kubernetes-preserve-unknown-fields"], true);
        let columns: Vec<&str> = version["additionalPrinterColumns"]
            .as_array()
            .unwrap()
            .iter()
            .map(|c| c["name"].as_str().unwrap())
            .collect();
        assert_eq!(
            columns,
            [
                "Schedule",
                "Time Zone",
                "Suspend",
                "Active",
                "Last Schedule",
                "Age"
            ]
        );
    }
}
