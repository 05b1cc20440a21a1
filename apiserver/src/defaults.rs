//! Defaulting for built-in kinds (what upstream's `SetDefaults_*` functions and create-time
//! strategies fill in), so objects read back as a real cluster would show them: pod and
//! pod-template defaults, Deployment/ReplicaSet/Job spec defaults, Job selectors, Service
//! cluster IPs, Secret type; base64 of `[]byte` fields unwrapped as Go's decoder reads it.

mod kinds;

use serde_json::{Value, json};

fn set_default(obj: &mut Value, key: &str, v: Value) {
    if let Some(m) = obj.as_object_mut() {
        m.entry(key.to_string()).or_insert(v);
    }
}

fn image_pull_policy(image: &str) -> &'static str {
    let last = image.rsplit('/').next().unwrap_or(image);
    let tag = last.split_once('@').map(|_| "digest").or_else(|| last.split_once(':').map(|(_, t)| t));
    match tag {
        None | Some("latest") => "Always",
        _ => "IfNotPresent",
    }
}

/// Defaults of a PodSpec (also inside templates).
pub fn pod_spec(spec: &mut Value, in_template_of_job: bool) {
    if !spec.is_object() {
        return;
    }
    if !in_template_of_job {
        set_default(spec, "restartPolicy", json!("Always"));
    }
    set_default(spec, "dnsPolicy", json!("ClusterFirst"));
    set_default(spec, "schedulerName", json!("default-scheduler"));
    set_default(spec, "terminationGracePeriodSeconds", json!(30));
    set_default(spec, "securityContext", json!({}));
    for list in ["containers", "initContainers"] {
        if let Some(cs) = spec.get_mut(list).and_then(Value::as_array_mut) {
            for c in cs {
                let image = c.get("image").and_then(Value::as_str).unwrap_or_default().to_string();
                set_default(c, "imagePullPolicy", json!(image_pull_policy(&image)));
                set_default(c, "terminationMessagePath", json!("/dev/termination-log"));
                set_default(c, "terminationMessagePolicy", json!("File"));
                set_default(c, "resources", json!({}));
                if let Some(ports) = c.get_mut("ports").and_then(Value::as_array_mut) {
                    for p in ports {
                        set_default(p, "protocol", json!("TCP"));
                    }
                }
            }
        }
    }
    if let Some(volumes) = spec.get_mut("volumes").and_then(Value::as_array_mut) {
        volumes.iter_mut().for_each(volume);
    }
}

/// Upstream's `SetDefaults_*VolumeSource`: file modes 0644 (420) for the
/// volume kinds that project files.
fn volume(v: &mut Value) {
    for source in ["configMap", "secret", "downwardAPI", "projected"] {
        if let Some(s) = v.get_mut(source).filter(|s| s.is_object()) {
            set_default(s, "defaultMode", json!(420));
        }
    }
}

fn template(obj: &mut Value, job: bool) {
    if let Some(spec) = obj.pointer_mut("/spec/template/spec") {
        pod_spec(spec, job);
    }
}

/// Apply the defaults of a built-in kind (`group`, `kind`) in place. `creating` adds the
/// create-time-only defaults (service account, cluster IP).
pub fn apply(group: &str, kind: &str, obj: &mut Value, creating: bool) {
    match (group, kind) {
        ("", "Pod") => {
            if let Some(spec) = obj.get_mut("spec") {
                pod_spec(spec, false);
                set_default(spec, "enableServiceLinks", json!(true));
                if creating {
                    set_default(spec, "serviceAccountName", json!("default"));
                    let sa = spec["serviceAccountName"].clone();
                    set_default(spec, "serviceAccount", sa);
                    set_default(spec, "priority", json!(0));
                }
            }
        }
        ("apps", "Deployment") => {
            if let Some(spec) = obj.get_mut("spec") {
                set_default(spec, "replicas", json!(1));
                set_default(spec, "revisionHistoryLimit", json!(10));
                set_default(spec, "progressDeadlineSeconds", json!(600));
                set_default(spec, "strategy", json!({}));
                if let Some(strategy) = spec.get_mut("strategy").filter(|s| s.is_object()) {
                    set_default(strategy, "type", json!("RollingUpdate"));
                    if strategy["type"] == "RollingUpdate" {
                        set_default(strategy, "rollingUpdate", json!({}));
                        if let Some(ru) = strategy.get_mut("rollingUpdate") {
                            set_default(ru, "maxUnavailable", json!("25%"));
                            set_default(ru, "maxSurge", json!("25%"));
                        }
                    }
                }
            }
            template(obj, false);
        }
        ("apps", "ReplicaSet") => {
            if let Some(spec) = obj.get_mut("spec") {
                set_default(spec, "replicas", json!(1));
            }
            template(obj, false);
        }
        ("batch", "Job") => {
            if let Some(spec) = obj.get_mut("spec") {
                let both_unset = spec.get("completions").is_none() && spec.get("parallelism").is_none();
                if both_unset {
                    set_default(spec, "completions", json!(1));
                }
                set_default(spec, "parallelism", json!(1));
                set_default(spec, "backoffLimit", json!(6));
                set_default(spec, "completionMode", json!("NonIndexed"));
                set_default(spec, "suspend", json!(false));
                set_default(spec, "manualSelector", Value::Null);
                if spec.get("manualSelector") == Some(&Value::Null) {
                    spec.as_object_mut().expect("object").remove("manualSelector");
                }
                set_default(spec, "podReplacementPolicy", json!("TerminatingOrFailed"));
            }
            template(obj, true);
        }
        ("", "Service") => {
            if let Some(spec) = obj.get_mut("spec").filter(|s| s.is_object()) {
                // SetDefaults_Service.
                set_default(spec, "type", json!("ClusterIP"));
                set_default(spec, "sessionAffinity", json!("None"));
                let kind = spec["type"].as_str().unwrap_or_default().to_string();
                if kind != "ExternalName" {
                    set_default(spec, "internalTrafficPolicy", json!("Cluster"));
                }
                if kind == "NodePort" || kind == "LoadBalancer" {
                    set_default(spec, "externalTrafficPolicy", json!("Cluster"));
                }
                if kind == "LoadBalancer" {
                    set_default(spec, "allocateLoadBalancerNodePorts", json!(true));
                }
                if let Some(ports) = spec.get_mut("ports").and_then(Value::as_array_mut) {
                    for p in ports {
                        set_default(p, "protocol", json!("TCP"));
                        let port = p.get("port").cloned().unwrap_or(Value::Null);
                        set_default(p, "targetPort", port);
                    }
                }
            }
        }
        ("", "Secret") => {
            set_default(obj, "type", json!("Opaque"));
            canonical_bytes(obj, "data");
        }
        ("", "ConfigMap") => canonical_bytes(obj, "binaryData"),
        ("apiextensions.k8s.io", "CustomResourceDefinition") => crd_spec(obj),
        _ => kinds::apply(group, kind, obj),
    }
}

/// apiextensions/v1 `SetDefaults_CustomResourceDefinitionSpec`: the singular name and the list
/// kind from the kind, and conversion `None`.
fn crd_spec(obj: &mut Value) {
    let Some(spec) = obj.get_mut("spec").filter(|s| s.is_object()) else { return };
    let kind = spec.pointer("/names/kind").and_then(Value::as_str).unwrap_or_default().to_string();
    if let Some(names) = spec.get_mut("names").filter(|n| n.is_object()) {
        if names.get("singular").and_then(Value::as_str).is_none_or(str::is_empty) {
            names["singular"] = json!(kind.to_lowercase());
        }
        if !kind.is_empty() && names.get("listKind").and_then(Value::as_str).is_none_or(str::is_empty) {
            names["listKind"] = json!(format!("{kind}List"));
        }
    }
    if spec.get("conversion").is_none_or(Value::is_null) {
        spec["conversion"] = json!({"strategy": "None"});
    }
}

/// `[]byte` fields arrive as base64 that may be wrapped over lines (kustomize
/// and YAML block scalars wrap it); Go's decoder ignores `\r` and `\n`, and
/// the object is served re-encoded, unwrapped. Without this, a client that
/// decodes strictly (kube-rs) cannot read a ConfigMap that kubectl applied.
/// The fields Go's encoder writes for a zero value, which a stored object therefore always has
/// when read back from a real server: a core Event's `involvedObject` and `source` (structs:
/// `{}`), `firstTimestamp`, `lastTimestamp` and `eventTime` (zero times: `null`), and the
/// `reportingComponent` and `reportingInstance` strings without `omitempty` (`""`). Applied
/// after managed fields are recorded: upstream compares a write with its type's zero value,
/// so these are nobody's fields.
pub fn go_zero_fields(group: &str, kind: &str, obj: &mut Value) {
    if (group, kind) != ("", "Event") {
        return;
    }
    for (field, zero) in [
        ("involvedObject", json!({})),
        ("source", json!({})),
        ("firstTimestamp", Value::Null),
        ("lastTimestamp", Value::Null),
        ("eventTime", Value::Null),
        ("reportingComponent", json!("")),
        ("reportingInstance", json!("")),
    ] {
        set_default(obj, field, zero);
    }
}

fn canonical_bytes(obj: &mut Value, field: &str) {
    if let Some(map) = obj.get_mut(field).and_then(Value::as_object_mut) {
        for v in map.values_mut() {
            if let Some(s) = v.as_str()
                && s.contains(['\r', '\n'])
            {
                *v = Value::String(s.replace(['\r', '\n'], ""));
            }
        }
    }
}

/// Job create-time strategy: the controller-uid selector and template labels.
pub fn job_selector(obj: &mut Value) {
    let uid = obj.pointer("/metadata/uid").and_then(Value::as_str).unwrap_or_default().to_string();
    let name = obj.pointer("/metadata/name").and_then(Value::as_str).unwrap_or_default().to_string();
    let manual = obj.pointer("/spec/manualSelector").and_then(Value::as_bool).unwrap_or(false);
    if manual || !obj.get("spec").is_some_and(Value::is_object) {
        return;
    }
    obj["spec"]["selector"] = json!({"matchLabels": {"batch.kubernetes.io/controller-uid": uid}});
    if !obj.pointer("/spec/template").is_some_and(Value::is_object) {
        obj["spec"]["template"] = json!({});
    }
    let tmpl = obj.pointer_mut("/spec/template").expect("template");
    if !tmpl.get("metadata").is_some_and(Value::is_object) {
        tmpl["metadata"] = json!({});
    }
    if !tmpl["metadata"].get("labels").is_some_and(Value::is_object) {
        tmpl["metadata"]["labels"] = json!({});
    }
    let labels = &mut tmpl["metadata"]["labels"];
    labels["batch.kubernetes.io/controller-uid"] = json!(uid);
    labels["batch.kubernetes.io/job-name"] = json!(name);
    labels["controller-uid"] = json!(uid);
    labels["job-name"] = json!(name);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn projected_file_volumes_default_their_mode_to_0644() {
        let mut spec = json!({"containers": [], "volumes": [{"name": "c", "configMap": {"name": "x"}}, {"name": "s", "secret": {"secretName": "y", "defaultMode": 256}}, {"name": "e", "emptyDir": {}}]});
        pod_spec(&mut spec, false);
        assert_eq!(spec["volumes"][0]["configMap"]["defaultMode"], 420);
        assert_eq!(spec["volumes"][1]["secret"]["defaultMode"], 256, "a set mode is kept");
        assert!(spec["volumes"][2]["emptyDir"].get("defaultMode").is_none());
    }

    #[test]
    fn a_crd_gets_its_list_kind_singular_and_conversion_as_upstream_defaults_them() {
        let mut crd = json!({"spec": {"group": "g.io", "names": {"plural": "widgets", "kind": "Widget"}}});
        apply("apiextensions.k8s.io", "CustomResourceDefinition", &mut crd, true);
        assert_eq!(crd["spec"]["names"], json!({"plural": "widgets", "kind": "Widget", "singular": "widget", "listKind": "WidgetList"}));
        assert_eq!(crd["spec"]["conversion"], json!({"strategy": "None"}));
        let mut kept = json!({"spec": {"names": {"kind": "W", "singular": "w1", "listKind": "Ws"}, "conversion": {"strategy": "Webhook"}}});
        apply("apiextensions.k8s.io", "CustomResourceDefinition", &mut kept, false);
        assert_eq!(kept["spec"]["names"]["listKind"], "Ws");
        assert_eq!(kept["spec"]["names"]["singular"], "w1");
        assert_eq!(kept["spec"]["conversion"]["strategy"], "Webhook");
    }

    #[test]
    fn wrapped_base64_in_byte_fields_is_served_unwrapped() {
        let mut cm = json!({"binaryData": {"a.wasm": "AGFz\nbQ0A\r\n", "b": "AA=="}, "data": {"c": "x\ny"}});
        apply("", "ConfigMap", &mut cm, true);
        assert_eq!(cm["binaryData"], json!({"a.wasm": "AGFzbQ0A", "b": "AA=="}));
        assert_eq!(cm["data"]["c"], "x\ny", "text data is not base64 and stays as written");
        let mut secret = json!({"data": {"k": "dmFs\ndWU="}});
        apply("", "Secret", &mut secret, true);
        assert_eq!(secret["data"]["k"], "dmFsdWU=");
    }

    #[test]
    fn image_pull_policy_follows_the_tag() {
        assert_eq!(image_pull_policy("nginx"), "Always");
        assert_eq!(image_pull_policy("nginx:latest"), "Always");
        assert_eq!(image_pull_policy("nginx:1.27"), "IfNotPresent");
        assert_eq!(image_pull_policy("registry:5000/nginx"), "Always");
    }

    #[test]
    fn job_defaults_and_selector() {
        let mut j = json!({"metadata": {"name": "j", "uid": "u1"}, "spec": {"template": {"spec": {"restartPolicy": "Never", "containers": [{"name": "c", "image": "busybox:1"}]}}}});
        apply("batch", "Job", &mut j, true);
        job_selector(&mut j);
        assert_eq!(j["spec"]["completions"], 1);
        assert_eq!(j["spec"]["backoffLimit"], 6);
        assert_eq!(j["spec"]["selector"]["matchLabels"]["batch.kubernetes.io/controller-uid"], "u1");
        assert_eq!(j["spec"]["template"]["metadata"]["labels"]["job-name"], "j");
        assert_eq!(j["spec"]["template"]["spec"]["containers"][0]["imagePullPolicy"], "IfNotPresent");
        assert!(j["spec"]["template"]["spec"].get("restartPolicy").is_some());
    }
}
