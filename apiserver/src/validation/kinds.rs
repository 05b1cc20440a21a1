//! Validation of the workload and policy kinds beyond Pods, Deployments, ReplicaSets and Jobs:
//! StatefulSets, DaemonSets, ReplicationControllers and PodTemplates need a pod template with
//! containers (and a selector that matches it), StatefulSet specs change only where upstream
//! allows, CronJobs need a schedule and a Job-style restart policy, a PodDisruptionBudget sets
//! at most one of minAvailable and maxUnavailable.

use super::{enums, immutable, pod_spec, required, selector_matches_template, short};
use crate::status::Cause;
use serde_json::Value;

const STS_UPDATE_FORBIDDEN: &str = "Forbidden: updates to statefulset spec for fields other than 'replicas', 'ordinals', 'template', 'updateStrategy', 'persistentVolumeClaimRetentionPolicy' and 'minReadySeconds' are forbidden";

/// Causes for (`group`, `kind`), if it is one of this module's.
pub fn validate(group: &str, kind: &str, obj: &Value, old: Option<&Value>, causes: &mut Vec<Cause>) {
    match (group, kind) {
        ("apps", "StatefulSet") | ("apps", "DaemonSet") => {
            selector_matches_template(obj, causes);
            pod_spec(obj.pointer("/spec/template/spec"), "spec.template.spec", Some(enums::TEMPLATE_RESTART_POLICY), causes);
            match (kind, old) {
                ("StatefulSet", Some(old)) => {
                    let fixed = |v: &Value| {
                        let mut s = v.get("spec").cloned().unwrap_or_default();
                        if let Some(m) = s.as_object_mut() {
                            for f in ["replicas", "ordinals", "template", "updateStrategy", "persistentVolumeClaimRetentionPolicy", "minReadySeconds"]
                            {
                                m.remove(f);
                            }
                        }
                        s
                    };
                    if fixed(old) != fixed(obj) {
                        causes.push(Cause::new("FieldValueForbidden", STS_UPDATE_FORBIDDEN, "spec"));
                    }
                }
                ("DaemonSet", Some(old)) if old.pointer("/spec/selector") != obj.pointer("/spec/selector") => {
                    causes.push(immutable("spec.selector", obj.pointer("/spec/selector").unwrap_or(&Value::Null)));
                }
                _ => {}
            }
        }
        ("", "ReplicationController") => {
            // Defaulting copies the template's labels into an empty selector; none left is refused.
            if obj.pointer("/spec/selector").and_then(Value::as_object).is_none_or(|s| s.is_empty()) {
                causes.push(required("spec.selector"));
            }
            pod_spec(obj.pointer("/spec/template/spec"), "spec.template.spec", Some(enums::TEMPLATE_RESTART_POLICY), causes);
        }
        ("", "PodTemplate") => pod_spec(obj.pointer("/template/spec"), "template.spec", Some(enums::POD_RESTART_POLICY), causes),
        ("", "Service") => {
            enums::check(obj.pointer("/spec/type"), enums::SERVICE_TYPE, "spec.type", causes);
            for (i, port) in obj.pointer("/spec/ports").and_then(Value::as_array).into_iter().flatten().enumerate() {
                enums::check(port.get("protocol"), enums::PROTOCOL, &format!("spec.ports[{i}].protocol"), causes);
            }
            if let Some(old) = old {
                cluster_ips_kept(old, obj, causes);
            }
        }
        ("storage.k8s.io", "StorageClass") => {
            if let Some(old) = old {
                // Upstream's ValidateStorageClassUpdate, in its order.
                for field in ["parameters", "provisioner", "reclaimPolicy", "volumeBindingMode"] {
                    if old.get(field) != obj.get(field) {
                        causes.push(immutable(field, obj.get(field).unwrap_or(&Value::Null)));
                    }
                }
            }
        }
        ("batch", "CronJob") => {
            if obj.pointer("/spec/schedule").and_then(Value::as_str).is_none_or(str::is_empty) {
                causes.push(required("spec.schedule"));
            }
            let path = "spec.jobTemplate.spec.template.spec";
            pod_spec(obj.pointer("/spec/jobTemplate/spec/template/spec"), path, None, causes);
            match obj.pointer("/spec/jobTemplate/spec/template/spec/restartPolicy").and_then(Value::as_str) {
                Some("OnFailure") | Some("Never") => {}
                None => causes.push(Cause::new(
                    "FieldValueRequired",
                    "Required value: valid values: \"OnFailure\", \"Never\"",
                    format!("{path}.restartPolicy"),
                )),
                Some(other) => causes.push(Cause::new(
                    "FieldValueNotSupported",
                    format!("Unsupported value: {other:?}: supported values: \"OnFailure\", \"Never\""),
                    format!("{path}.restartPolicy"),
                )),
            }
        }
        ("policy", "PodDisruptionBudget") => {
            let spec = obj.get("spec").cloned().unwrap_or_default();
            if spec.get("minAvailable").is_some() && spec.get("maxUnavailable").is_some() {
                causes.push(Cause::new(
                    "FieldValueInvalid",
                    format!("Invalid value: {}: minAvailable and maxUnavailable cannot be both set", short(&spec)),
                    "spec",
                ));
            }
        }
        _ => {}
    }
}

/// A Service's cluster IPs may not change once set (upstream's `validateServiceClusterIPsUpdate`),
/// unless it becomes or was an ExternalName Service.
fn cluster_ips_kept(old: &Value, new: &Value, causes: &mut Vec<Cause>) {
    let external = |v: &Value| v.pointer("/spec/type").and_then(Value::as_str) == Some("ExternalName");
    let ips = |v: &Value| v.pointer("/spec/clusterIPs").and_then(Value::as_array).cloned().unwrap_or_default();
    let (before, after) = (ips(old), ips(new));
    if external(old) || external(new) || before.is_empty() || after.is_empty() || before.first() == after.first() {
        return;
    }
    causes.push(Cause::new("FieldValueInvalid", format!("Invalid value: {}: may not change once set", Value::Array(after)), "spec.clusterIPs[0]"));
}
