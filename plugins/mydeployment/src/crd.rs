//! The `mydeployments.apps.example.com` CustomResourceDefinition.
//!
//! The schema types every field the controller reads, so the API server
//! refuses a malformed object before the plugin sees it. The Pod template's
//! `spec` types the parts the controller relies on (containers with a name
//! and image, restartPolicy) and preserves the rest of PodSpec unvalidated:
//! the API server validates it in full when a Pod is created from it. This is
//! what hand-written wrapper CRDs commonly do instead of embedding the
//! thousands of lines of generated PodSpec schema.

use operator_plugin_sdk::json;
use operator_plugin_sdk::serde_json::Value;

use crate::api::{GROUP, KIND, PLURAL, SHORT_NAME, SINGULAR, VERSION};

fn int_or_string(description: &str) -> Value {
    json!({
        "anyOf": [{"type": "integer"}, {"type": "string"}],
        "x-kubernetes-int-or-string": true,
        "description": description,
    })
}

fn string_map(description: &str) -> Value {
    json!({"type": "object", "additionalProperties": {"type": "string"}, "description": description})
}

fn label_selector() -> Value {
    json!({
        "type": "object",
        "description": "Label query over Pods. Must match the template's labels. Immutable.",
        "x-kubernetes-map-type": "atomic",
        "properties": {
            "matchLabels": string_map("key=value pairs that must all match."),
            "matchExpressions": {
                "type": "array",
                "items": {
                    "type": "object",
                    "required": ["key", "operator"],
                    "properties": {
                        "key": {"type": "string"},
                        "operator": {"type": "string", "description": "In, NotIn, Exists or DoesNotExist."},
                        "values": {"type": "array", "items": {"type": "string"}}
                    }
                }
            }
        }
    })
}

fn pod_template() -> Value {
    json!({
        "type": "object",
        "description": "The Pod template (PodTemplateSpec). A change rolls out new Pods.",
        "properties": {
            "metadata": {
                "type": "object",
                "properties": {
                    "labels": string_map("Labels for the Pods; must match spec.selector."),
                    "annotations": string_map("Annotations for the Pods."),
                    "finalizers": {"type": "array", "items": {"type": "string"}}
                }
            },
            "spec": {
                "type": "object",
                "description": "A core/v1 PodSpec. Fields not listed here are kept and validated when Pods are created.",
                "x-kubernetes-preserve-unknown-fields": true,
                "required": ["containers"],
                "properties": {
                    "containers": {
                        "type": "array",
                        "minItems": 1,
                        "items": {
                            "type": "object",
                            "required": ["name"],
                            "x-kubernetes-preserve-unknown-fields": true,
                            "properties": {
                                "name": {"type": "string"},
                                "image": {"type": "string"}
                            }
                        }
                    },
                    "restartPolicy": {"type": "string", "enum": ["Always"]}
                }
            }
        }
    })
}

fn condition() -> Value {
    json!({
        "type": "object",
        "required": ["type", "status"],
        "properties": {
            "type": {"type": "string"},
            "status": {"type": "string"},
            "lastUpdateTime": {"type": "string", "format": "date-time"},
            "lastTransitionTime": {"type": "string", "format": "date-time"},
            "reason": {"type": "string"},
            "message": {"type": "string"},
            "observedGeneration": {"type": "integer", "format": "int64"}
        }
    })
}

fn spec_schema() -> Value {
    json!({
        "type": "object",
        "required": ["selector", "template"],
        "properties": {
            "replicas": {"type": "integer", "format": "int32", "minimum": 0, "description": "Desired number of Pods. Defaults to 1."},
            "selector": label_selector(),
            "template": pod_template(),
            "strategy": {
                "type": "object",
                "description": "How old Pods are replaced by new ones.",
                "properties": {
                    "type": {"type": "string", "enum": ["RollingUpdate", "Recreate"], "description": "Defaults to RollingUpdate."},
                    "rollingUpdate": {
                        "type": "object",
                        "properties": {
                            "maxSurge": int_or_string("Pods above replicas allowed during a rollout (number or percent, rounded up). Defaults to 25%."),
                            "maxUnavailable": int_or_string("Pods below replicas allowed during a rollout (number or percent, rounded down). Defaults to 25%.")
                        }
                    }
                }
            },
            "minReadySeconds": {"type": "integer", "format": "int32", "minimum": 0, "description": "Seconds a Pod must be ready to count as available."},
            "revisionHistoryLimit": {"type": "integer", "format": "int32", "minimum": 0, "description": "Old revisions (ControllerRevisions) to keep. Defaults to 10."},
            "progressDeadlineSeconds": {"type": "integer", "format": "int32", "minimum": 0, "description": "Seconds without progress before Progressing turns False. Defaults to 600."},
            "paused": {"type": "boolean", "description": "Stops rollouts of template changes; scaling continues."},
            "podReplacementPolicy": {
                "type": "string",
                "enum": ["TerminationStarted", "TerminationComplete"],
                "description": "TerminationStarted (default): a terminating Pod is replaced at once and does not count against maxSurge. TerminationComplete: replacements wait until it is gone, and it counts against maxSurge."
            },
            "rollbackTo": {
                "type": "object",
                "description": "While set, Pods run the template stored in this revision instead of spec.template. Clear it to follow spec.template again.",
                "required": ["revision"],
                "properties": {
                    "revision": {"type": "integer", "format": "int64", "minimum": 1}
                }
            }
        }
    })
}

fn status_schema() -> Value {
    let int32 = |d: &str| json!({"type": "integer", "format": "int32", "description": d});
    json!({
        "type": "object",
        "properties": {
            "observedGeneration": {"type": "integer", "format": "int64"},
            "replicas": int32("Active Pods of every revision."),
            "updatedReplicas": int32("Active Pods of the desired revision."),
            "readyReplicas": int32("Ready Pods."),
            "availableReplicas": int32("Pods ready for at least minReadySeconds."),
            "unavailableReplicas": int32("Pods still needed for the full count to be available."),
            "terminatingReplicas": int32("Pods being deleted."),
            "selector": {"type": "string", "description": "spec.selector in string form, for the scale subresource."},
            "currentRevision": {"type": "string"},
            "updateRevision": {"type": "string"},
            "revision": {"type": "integer", "format": "int64"},
            "collisionCount": {"type": "integer", "format": "int32"},
            "conditions": {
                "type": "array",
                "items": condition(),
                "x-kubernetes-list-type": "map",
                "x-kubernetes-list-map-keys": ["type"]
            }
        }
    })
}

fn printer_columns() -> Value {
    let col = |name: &str, type_: &str, path: &str, priority: i32, description: &str| json!({"name": name, "type": type_, "jsonPath": path, "priority": priority, "description": description});
    // `kubectl get deployments` prints READY as "ready/desired", which one
    // JSONPath cannot express; like other workload CRDs we print the parts.
    json!([
        col("Desired", "integer", ".spec.replicas", 0, "Desired Pods"),
        col("Current", "integer", ".status.replicas", 0, "Active Pods"),
        col("Ready", "integer", ".status.readyReplicas", 0, "Ready Pods"),
        col(
            "Up-To-Date",
            "integer",
            ".status.updatedReplicas",
            0,
            "Pods of the desired revision"
        ),
        col(
            "Available",
            "integer",
            ".status.availableReplicas",
            0,
            "Available Pods"
        ),
        col("Age", "date", ".metadata.creationTimestamp", 0, ""),
        col(
            "Revision",
            "integer",
            ".status.revision",
            1,
            "Revision number of the desired template"
        ),
        col("Selector", "string", ".status.selector", 1, "Pod selector"),
    ])
}

/// The CRD as a JSON `apiextensions.k8s.io/v1` object.
pub fn crd() -> Value {
    json!({
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": format!("{PLURAL}.{GROUP}")},
        "spec": {
            "group": GROUP,
            "scope": "Namespaced",
            "names": {
                "kind": KIND,
                "listKind": format!("{KIND}List"),
                "plural": PLURAL,
                "singular": SINGULAR,
                "shortNames": [SHORT_NAME],
                "categories": ["all"]
            },
            "versions": [{
                "name": VERSION,
                "served": true,
                "storage": true,
                "subresources": {
                    "status": {},
                    "scale": {
                        "specReplicasPath": ".spec.replicas",
                        "statusReplicasPath": ".status.replicas",
                        "labelSelectorPath": ".status.selector"
                    }
                },
                "additionalPrinterColumns": printer_columns(),
                "schema": {"openAPIV3Schema": {
                    "type": "object",
                    "description": "A Deployment that owns its Pods directly (seed 003), keeping revisions as ControllerRevisions.",
                    "required": ["spec"],
                    // No `metadata` entry: the API server owns ObjectMeta's
                    // schema (kube-apiserver accepts `metadata: {type: object}`
                    // here, but the embedded server prunes it as a plain object).
                    "properties": {
                        "apiVersion": {"type": "string"},
                        "kind": {"type": "string"},
                        "spec": spec_schema(),
                        "status": status_schema()
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
    fn the_crd_has_status_and_scale_subresources_wired_to_the_status_selector() {
        let crd = crd();
        let version = &crd["spec"]["versions"][0];
        assert_eq!(crd["metadata"]["name"], "mydeployments.apps.example.com");
        assert_eq!(
            version["subresources"]["scale"]["labelSelectorPath"],
            ".status.selector"
        );
        assert!(
            version["schema"]["openAPIV3Schema"]["properties"]["status"]["properties"]["selector"]
                .is_object()
        );
        assert_eq!(crd["spec"]["names"]["shortNames"], json!(["md"]));
    }

    #[test]
    fn every_object_schema_node_has_a_type_as_structural_schemas_require() {
        fn walk(node: &Value, path: &str) {
            if let Some(props) = node.get("properties").and_then(Value::as_object) {
                assert!(
                    node.get("type").is_some(),
                    "{path} has properties but no type"
                );
                for (k, v) in props {
                    let is_int_or_string = v.get("x-kubernetes-int-or-string").is_some();
                    assert!(
                        v.get("type").is_some() || is_int_or_string,
                        "{path}.{k} has no type"
                    );
                    walk(v, &format!("{path}.{k}"));
                }
            }
            if let Some(items) = node.get("items") {
                walk(items, &format!("{path}[]"));
            }
        }
        walk(
            &crd()["spec"]["versions"][0]["schema"]["openAPIV3Schema"],
            "",
        );
    }
}
