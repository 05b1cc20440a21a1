//! The CustomResourceDefinition, generated as controller-gen generates it
//! from the tutorial's types and markers: `#[derive(CustomResource,
//! JsonSchema)]` on the types of `api`, plus the schemas below for the
//! upstream types they embed.
//!
//! Embedded upstream types (the Job template, object references,
//! `metav1.Condition`) bring their schema through `schema_with`, as
//! controller-gen copies theirs from upstream. The Job template's pod spec
//! is `x-kubernetes-preserve-unknown-fields`: embedding the whole PodSpec
//! schema would add hundreds of KB to the CRD for checks the API server
//! repeats when the Job is created; `validate` checks the two fields that
//! decide whether a Job can be created at all.

use operator_plugin_sdk::schemars::{Schema, SchemaGenerator};
use serde_json::{Value, json};

#[cfg(not(target_family = "wasm"))]
use crate::api::CronJob;

fn schema(value: Value) -> Schema {
    Schema::try_from(value).expect("a JSON object is a schema")
}

pub(crate) fn job_template(_: &mut SchemaGenerator) -> Schema {
    schema(json!({"type": "object", "properties": {"metadata": template_metadata(), "spec": job_spec()}}))
}

pub(crate) fn active_jobs(_: &mut SchemaGenerator) -> Schema {
    schema(json!({"type": "array", "items": object_reference(), "x-kubernetes-list-type": "atomic"}))
}

pub(crate) fn date_time(_: &mut SchemaGenerator) -> Schema {
    schema(json!({"type": "string", "format": "date-time"}))
}

pub(crate) fn conditions(_: &mut SchemaGenerator) -> Schema {
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

/// The CRD as `#[derive(CustomResource, JsonSchema)]` generates it. The
/// manifest embeds the checked-in `crd.json` instead, which a test keeps
/// equal to this: building the CRD at run time would link schemars and
/// kube-derive's CRD assembly into the plugin (about +0.6 MB, +40% gzipped),
/// for a value that never changes after the build.
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
        operator_plugin_sdk::testing::assert_crds_mean_the_same(before, generated());
    }

    #[test]
    fn the_crd_carries_the_tutorials_validation_markers() {
        let crd = generated();
        let version = &crd["spec"]["versions"][0];
        let spec = &version["schema"]["openAPIV3Schema"]["properties"]["spec"];
        assert_eq!(crd["metadata"]["name"], "cronjobs.batch.tutorial.kubebuilder.io");
        assert_eq!(version["subresources"]["status"], json!({}));
        // An unset policy may be sent as null (nullable, as kube writes `Option`).
        assert_eq!(spec["properties"]["concurrencyPolicy"]["enum"], json!(["Allow", "Forbid", "Replace", null]));
        for field in ["startingDeadlineSeconds", "successfulJobsHistoryLimit", "failedJobsHistoryLimit"] {
            assert_eq!(spec["properties"][field]["minimum"].as_f64(), Some(0.0), "{field}");
        }
        assert_eq!(spec["required"], json!(["jobTemplate", "schedule"]));
        let pod_spec = &spec["properties"]["jobTemplate"]["properties"]["spec"]["properties"]["template"]["properties"]["spec"];
        assert_eq!(pod_spec["x-kubernetes-preserve-unknown-fields"], true);
        let columns: Vec<&str> = version["additionalPrinterColumns"].as_array().unwrap().iter().map(|c| c["name"].as_str().unwrap()).collect();
        assert_eq!(columns, ["Schedule", "Time Zone", "Suspend", "Active", "Last Schedule", "Age"]);
    }
}
