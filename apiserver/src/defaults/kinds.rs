//! Defaults of the built-in kinds beyond the ones controllers here use most (upstream's
//! `SetDefaults_*` for apps StatefulSets and DaemonSets, core ReplicationControllers,
//! PodTemplates, PersistentVolumes and Claims, Endpoints; batch CronJobs; networking
//! NetworkPolicies; storage StorageClasses; scheduling PriorityClasses; admission webhooks).

use super::{pod_spec, set_default, template};
use serde_json::{Value, json};

fn spec(obj: &mut Value) -> Option<&mut Value> {
    obj.get_mut("spec").filter(|s| s.is_object())
}

/// Apply the defaults of (`group`, `kind`), if it is one of this module's.
pub fn apply(group: &str, kind: &str, obj: &mut Value) {
    match (group, kind) {
        ("apps", "StatefulSet") => {
            if let Some(spec) = spec(obj) {
                set_default(spec, "replicas", json!(1));
                set_default(spec, "podManagementPolicy", json!("OrderedReady"));
                set_default(spec, "revisionHistoryLimit", json!(10));
                set_default(spec, "updateStrategy", json!({"type": "RollingUpdate"}));
                if spec["updateStrategy"]["type"] == "RollingUpdate" {
                    set_default(&mut spec["updateStrategy"], "rollingUpdate", json!({}));
                    set_default(&mut spec["updateStrategy"]["rollingUpdate"], "partition", json!(0));
                }
                set_default(spec, "persistentVolumeClaimRetentionPolicy", json!({}));
                let retention = &mut spec["persistentVolumeClaimRetentionPolicy"];
                set_default(retention, "whenDeleted", json!("Retain"));
                set_default(retention, "whenScaled", json!("Retain"));
                if let Some(claims) = spec.get_mut("volumeClaimTemplates").and_then(Value::as_array_mut) {
                    for claim in claims {
                        if let Some(s) = claim.get_mut("spec") {
                            set_default(s, "volumeMode", json!("Filesystem"));
                        }
                    }
                }
            }
            template(obj, false);
        }
        ("apps", "DaemonSet") => {
            if let Some(spec) = spec(obj) {
                set_default(spec, "revisionHistoryLimit", json!(10));
                set_default(spec, "updateStrategy", json!({"type": "RollingUpdate"}));
                if spec["updateStrategy"]["type"] == "RollingUpdate" {
                    set_default(&mut spec["updateStrategy"], "rollingUpdate", json!({}));
                    set_default(&mut spec["updateStrategy"]["rollingUpdate"], "maxUnavailable", json!(1));
                    set_default(&mut spec["updateStrategy"]["rollingUpdate"], "maxSurge", json!(0));
                }
            }
            template(obj, false);
        }
        ("", "ReplicationController") => {
            // The selector and the object's labels default to the template's labels.
            let labels = obj.pointer("/spec/template/metadata/labels").cloned();
            if let Some(labels) = labels.filter(|l| l.as_object().is_some_and(|m| !m.is_empty())) {
                if let Some(spec) = spec(obj) {
                    set_default(spec, "selector", labels.clone());
                }
                if let Some(meta) = obj.get_mut("metadata") {
                    set_default(meta, "labels", labels);
                }
            }
            if let Some(spec) = spec(obj) {
                set_default(spec, "replicas", json!(1));
            }
            template(obj, false);
        }
        ("", "PodTemplate") => {
            if let Some(s) = obj.pointer_mut("/template/spec") {
                pod_spec(s, false);
            }
        }
        ("batch", "CronJob") => {
            if let Some(spec) = spec(obj) {
                set_default(spec, "concurrencyPolicy", json!("Allow"));
                set_default(spec, "suspend", json!(false));
                set_default(spec, "successfulJobsHistoryLimit", json!(3));
                set_default(spec, "failedJobsHistoryLimit", json!(1));
            }
            if let Some(s) = obj.pointer_mut("/spec/jobTemplate/spec/template/spec") {
                pod_spec(s, true);
            }
        }
        ("", "PersistentVolumeClaim") => {
            if let Some(spec) = spec(obj) {
                set_default(spec, "volumeMode", json!("Filesystem"));
            }
        }
        ("", "PersistentVolume") => {
            if let Some(spec) = spec(obj) {
                set_default(spec, "persistentVolumeReclaimPolicy", json!("Retain"));
                set_default(spec, "volumeMode", json!("Filesystem"));
            }
        }
        ("", "Endpoints") => {
            for subset in obj.get_mut("subsets").and_then(Value::as_array_mut).into_iter().flatten() {
                for port in subset.get_mut("ports").and_then(Value::as_array_mut).into_iter().flatten() {
                    set_default(port, "protocol", json!("TCP"));
                }
            }
        }
        ("networking.k8s.io", "NetworkPolicy") => {
            if let Some(spec) = spec(obj) {
                if spec.get("policyTypes").and_then(Value::as_array).is_none_or(Vec::is_empty) {
                    let mut types = vec![json!("Ingress")];
                    if spec.get("egress").and_then(Value::as_array).is_some_and(|e| !e.is_empty()) {
                        types.push(json!("Egress"));
                    }
                    spec["policyTypes"] = json!(types);
                }
                for rules in ["ingress", "egress"] {
                    for rule in spec.get_mut(rules).and_then(Value::as_array_mut).into_iter().flatten() {
                        for port in rule.get_mut("ports").and_then(Value::as_array_mut).into_iter().flatten() {
                            set_default(port, "protocol", json!("TCP"));
                        }
                    }
                }
            }
        }
        ("storage.k8s.io", "StorageClass") => {
            set_default(obj, "reclaimPolicy", json!("Delete"));
            set_default(obj, "volumeBindingMode", json!("Immediate"));
        }
        ("scheduling.k8s.io", "PriorityClass") => set_default(obj, "preemptionPolicy", json!("PreemptLowerPriority")),
        ("admissionregistration.k8s.io", "MutatingWebhookConfiguration" | "ValidatingWebhookConfiguration") => {
            let mutating = kind.starts_with("Mutating");
            for hook in obj.get_mut("webhooks").and_then(Value::as_array_mut).into_iter().flatten() {
                set_default(hook, "failurePolicy", json!("Fail"));
                set_default(hook, "matchPolicy", json!("Equivalent"));
                set_default(hook, "namespaceSelector", json!({}));
                set_default(hook, "objectSelector", json!({}));
                set_default(hook, "timeoutSeconds", json!(10));
                if mutating {
                    set_default(hook, "reinvocationPolicy", json!("Never"));
                }
                for rule in hook.get_mut("rules").and_then(Value::as_array_mut).into_iter().flatten() {
                    set_default(rule, "scope", json!("*"));
                }
                if let Some(service) = hook.pointer_mut("/clientConfig/service") {
                    set_default(service, "port", json!(443));
                }
            }
        }
        ("admissionregistration.k8s.io", "ValidatingAdmissionPolicy") => {
            if let Some(spec) = spec(obj) {
                set_default(spec, "failurePolicy", json!("Fail"));
                if let Some(mc) = spec.get_mut("matchConstraints") {
                    set_default(mc, "matchPolicy", json!("Equivalent"));
                    set_default(mc, "namespaceSelector", json!({}));
                    set_default(mc, "objectSelector", json!({}));
                }
            }
        }
        _ => {}
    }
}
