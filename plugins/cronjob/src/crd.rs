//! The CustomResourceDefinition, as controller-gen would generate it from the
//! tutorial's types and markers (validation, status subresource, printer
//! columns), with upstream's `timeZone` and `lastSuccessfulTime` added.
//!
//! The Job template's pod spec is `x-kubernetes-preserve-unknown-fields`:
//! embedding the whole PodSpec schema would add hundreds of KB to the CRD for
//! checks the API server repeats when the Job is created; `validate` checks
//! the two fields that decide whether a Job can be created at all.

use serde_json::{Value, json};

use crate::api::{GROUP, KIND, PLURAL, VERSION};

fn int(format: &str, description: &str) -> Value {
    json!({"type": "integer", "format": format, "description": description})
}

fn non_negative(format: &str, description: &str) -> Value {
    let mut v = int(format, description);
    v["minimum"] = json!(0);
    v
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

fn spec() -> Value {
    json!({
        "type": "object",
        "description": "CronJobSpec defines the desired state of CronJob.",
        "required": ["schedule", "jobTemplate"],
        "properties": {
            "schedule": {"type": "string", "minLength": 0,
                "description": "The schedule in Cron format, see https://en.wikipedia.org/wiki/Cron."},
            "timeZone": {"type": "string",
                "description": "The IANA time zone name for the schedule, e.g. America/New_York. Unset means UTC."},
            "startingDeadlineSeconds": non_negative("int64",
                "Optional deadline in seconds for starting the job if it misses scheduled time for any reason."),
            "concurrencyPolicy": {"type": "string", "enum": ["Allow", "Forbid", "Replace"],
                "description": "How to treat concurrent executions of a Job: Allow (default), Forbid or Replace."},
            "suspend": {"type": "boolean",
                "description": "Suspend subsequent executions; does not apply to already started executions. Defaults to false."},
            "jobTemplate": {
                "type": "object",
                "description": "Specifies the job that will be created when executing a CronJob.",
                "properties": {"metadata": template_metadata(), "spec": job_spec()}
            },
            "successfulJobsHistoryLimit": non_negative("int32", "The number of successful finished jobs to retain."),
            "failedJobsHistoryLimit": non_negative("int32", "The number of failed finished jobs to retain.")
        }
    })
}

fn status() -> Value {
    json!({
        "type": "object",
        "description": "CronJobStatus defines the observed state of CronJob.",
        "properties": {
            "active": {"type": "array", "items": object_reference(), "x-kubernetes-list-type": "atomic",
                "description": "A list of pointers to currently running jobs."},
            "lastScheduleTime": {"type": "string", "format": "date-time",
                "description": "Information when was the last time the job was successfully scheduled."},
            "lastSuccessfulTime": {"type": "string", "format": "date-time",
                "description": "Information when was the last time the job successfully completed."},
            "conditions": {"type": "array", "items": condition(),
                "x-kubernetes-list-type": "map", "x-kubernetes-list-map-keys": ["type"]}
        }
    })
}

/// The `apiextensions.k8s.io/v1` CustomResourceDefinition for CronJob.
pub fn crd() -> Value {
    json!({
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": format!("{PLURAL}.{GROUP}")},
        "spec": {
            "group": GROUP,
            "names": {"kind": KIND, "listKind": format!("{KIND}List"), "plural": PLURAL, "singular": "cronjob"},
            "scope": "Namespaced",
            "versions": [{
                "name": VERSION,
                "served": true,
                "storage": true,
                "subresources": {"status": {}},
                "additionalPrinterColumns": [
                    {"name": "Schedule", "type": "string", "jsonPath": ".spec.schedule"},
                    {"name": "Time Zone", "type": "string", "jsonPath": ".spec.timeZone", "priority": 1},
                    {"name": "Suspend", "type": "boolean", "jsonPath": ".spec.suspend"},
                    {"name": "Active", "type": "string", "jsonPath": ".status.active[*].name",
                        "description": "The active Job (the first one, when several run)."},
                    {"name": "Last Schedule", "type": "date", "jsonPath": ".status.lastScheduleTime"},
                    {"name": "Age", "type": "date", "jsonPath": ".metadata.creationTimestamp"}
                ],
                "schema": {"openAPIV3Schema": {
                    "type": "object",
                    "description": "CronJob is the Schema for the cronjobs API.",
                    "properties": {
                        "apiVersion": {"type": "string"},
                        "kind": {"type": "string"},
                        "metadata": {"type": "object"},
                        "spec": spec(),
                        "status": status()
                    }
                }}
            }]
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

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
        assert_eq!(
            spec["properties"]["concurrencyPolicy"]["enum"],
            json!(["Allow", "Forbid", "Replace"])
        );
        for field in [
            "startingDeadlineSeconds",
            "successfulJobsHistoryLimit",
            "failedJobsHistoryLimit",
        ] {
            assert_eq!(spec["properties"][field]["minimum"], 0, "{field}");
        }
        assert_eq!(spec["required"], json!(["schedule", "jobTemplate"]));
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
