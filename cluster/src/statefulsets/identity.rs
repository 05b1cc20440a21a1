//! A StatefulSet Pod's identity and storage (upstream's `stateful_set_utils.go`): the name
//! `<set>-<ordinal>`, hostname and subdomain, the `statefulset.kubernetes.io/pod-name`,
//! `apps.kubernetes.io/pod-index` and `controller-revision-hash` labels, and one claim per
//! `volumeClaimTemplates` entry named `<template>-<set>-<ordinal>`, mounted as a volume named
//! after the template.

use crate::controller_ref::controller_ref;
use crate::meta_str;
use serde_json::{Map, Value, json};

pub(crate) const POD_NAME_LABEL: &str = "statefulset.kubernetes.io/pod-name";
pub(crate) const POD_INDEX_LABEL: &str = "apps.kubernetes.io/pod-index";
pub(crate) const REVISION_LABEL: &str = "controller-revision-hash";

/// The set name and ordinal in a Pod's name (`web-2` → `("web", 2)`), as upstream's
/// `(.*)-([0-9]+)$`; `None` when the name has no ordinal.
pub(crate) fn parent_and_ordinal(pod_name: &str) -> Option<(&str, i64)> {
    let (parent, ordinal) = pod_name.rsplit_once('-')?;
    if ordinal.is_empty() || !ordinal.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    let ordinal: i32 = ordinal.parse().ok()?;
    Some((parent, i64::from(ordinal)))
}

/// The ordinal of a Pod of `set` (`-1` when it has none), upstream's `getOrdinal`.
pub(crate) fn ordinal(pod: &Value) -> i64 {
    parent_and_ordinal(meta_str(pod, "name")).map_or(-1, |(_, o)| o)
}

/// Whether `pod`'s name makes it a member of `set` (upstream's `isMemberOf`).
pub(crate) fn is_member(set: &Value, pod: &Value) -> bool {
    parent_and_ordinal(meta_str(pod, "name")).is_some_and(|(parent, _)| parent == meta_str(set, "name"))
}

/// `spec.ordinals.start` (0 when unset).
pub(crate) fn start_ordinal(set: &Value) -> i64 {
    set.pointer("/spec/ordinals/start").and_then(Value::as_i64).unwrap_or(0)
}

pub(crate) fn pod_name(set: &Value, ordinal: i64) -> String {
    format!("{}-{ordinal}", meta_str(set, "name"))
}

pub(crate) fn claim_name(set: &Value, template: &Value, ordinal: i64) -> String {
    format!("{}-{}-{ordinal}", meta_str(template, "name"), meta_str(set, "name"))
}

pub(crate) fn claim_templates(set: &Value) -> Vec<Value> {
    set.pointer("/spec/volumeClaimTemplates").and_then(Value::as_array).cloned().unwrap_or_default()
}

/// The revision label of a Pod ("" when absent).
pub(crate) fn pod_revision(pod: &Value) -> &str {
    pod.pointer("/metadata/labels").and_then(|l| l.get(REVISION_LABEL)).and_then(Value::as_str).unwrap_or_default()
}

/// Upstream's `identityMatches`: the name, namespace and pod-name label of a member.
pub(crate) fn identity_matches(set: &Value, pod: &Value) -> bool {
    let name = meta_str(pod, "name");
    let label = pod.pointer("/metadata/labels").and_then(|l| l.get(POD_NAME_LABEL)).and_then(Value::as_str);
    is_member(set, pod) && meta_str(pod, "namespace") == meta_str(set, "namespace") && label == Some(name)
}

/// Upstream's `storageMatches`: every claim template is mounted from this ordinal's claim.
pub(crate) fn storage_matches(set: &Value, pod: &Value) -> bool {
    let ord = ordinal(pod);
    if ord < 0 {
        return false;
    }
    let volumes = pod.pointer("/spec/volumes").and_then(Value::as_array).cloned().unwrap_or_default();
    claim_templates(set).iter().all(|t| {
        let wanted = claim_name(set, t, ord);
        volumes.iter().any(|v| {
            v["name"].as_str() == Some(meta_str(t, "name")) && v.pointer("/persistentVolumeClaim/claimName").and_then(Value::as_str) == Some(&wanted)
        })
    })
}

/// Upstream's `updateIdentity`: the pod-name and pod-index labels.
pub(crate) fn update_identity(pod: &mut Value) {
    let name = meta_str(pod, "name").to_string();
    let index = ordinal(pod).to_string();
    let labels = pod["metadata"].as_object_mut().expect("metadata").entry("labels").or_insert_with(|| json!({}));
    labels[POD_NAME_LABEL] = json!(name);
    labels[POD_INDEX_LABEL] = json!(index);
}

/// Upstream's `updateStorage`: a volume per claim template (replacing a template's volume of
/// the same name), then the Pod's other volumes.
pub(crate) fn update_storage(set: &Value, pod: &mut Value) {
    let ord = ordinal(pod);
    let templates = claim_templates(set);
    if templates.is_empty() {
        return;
    }
    let names: Vec<&str> = templates.iter().map(|t| meta_str(t, "name")).collect();
    let mut volumes: Vec<Value> =
        templates.iter().map(|t| json!({"name": meta_str(t, "name"), "persistentVolumeClaim": {"claimName": claim_name(set, t, ord)}})).collect();
    let current = pod.pointer("/spec/volumes").and_then(Value::as_array).cloned().unwrap_or_default();
    volumes.extend(current.into_iter().filter(|v| !names.contains(&v["name"].as_str().unwrap_or_default())));
    pod["spec"]["volumes"] = json!(volumes);
}

/// A new Pod of `set` at `ordinal` with `revision` (upstream's `newStatefulSetPod` +
/// `setPodRevision`): the template's labels, annotations and finalizers, a controller
/// ownerReference, hostname = the Pod's name, subdomain = `serviceName`.
pub(crate) fn new_pod(set: &Value, ordinal: i64, revision: &str) -> Value {
    let template = set.pointer("/spec/template").cloned().unwrap_or_default();
    let mut meta = Map::new();
    meta.insert("name".into(), json!(pod_name(set, ordinal)));
    for field in ["labels", "annotations", "finalizers"] {
        if let Some(v) = template.pointer(&format!("/metadata/{field}")).filter(|v| !v.is_null()) {
            meta.insert(field.into(), v.clone());
        }
    }
    meta.insert("ownerReferences".into(), json!([controller_ref(set, "apps/v1", "StatefulSet")]));
    let mut pod = json!({"apiVersion": "v1", "kind": "Pod", "metadata": meta, "spec": template.get("spec").cloned().unwrap_or_else(|| json!({}))});
    update_identity(&mut pod);
    pod["spec"]["hostname"] = json!(pod_name(set, ordinal));
    if let Some(service) = set.pointer("/spec/serviceName").and_then(Value::as_str).filter(|s| !s.is_empty()) {
        pod["spec"]["subdomain"] = json!(service);
    }
    update_storage(set, &mut pod);
    pod["metadata"]["labels"][REVISION_LABEL] = json!(revision);
    pod
}

/// The claims of the Pod at `ordinal` (upstream's `getPersistentVolumeClaims`): each template
/// with its name, the set's namespace, and the selector's `matchLabels` added to its labels.
pub(crate) fn claims(set: &Value, ordinal: i64) -> Vec<Value> {
    let match_labels = set.pointer("/spec/selector/matchLabels").cloned().unwrap_or_else(|| json!({}));
    claim_templates(set)
        .iter()
        .map(|t| {
            let mut claim = json!({"apiVersion": "v1", "kind": "PersistentVolumeClaim", "metadata": {}, "spec": t.get("spec").cloned().unwrap_or_else(|| json!({}))});
            let m = claim["metadata"].as_object_mut().expect("object");
            for field in ["labels", "annotations", "finalizers"] {
                if let Some(v) = t.pointer(&format!("/metadata/{field}")).filter(|v| !v.is_null()) {
                    m.insert(field.into(), v.clone());
                }
            }
            m.insert("name".into(), json!(claim_name(set, t, ordinal)));
            m.insert("namespace".into(), json!(meta_str(set, "namespace")));
            let labels = m.entry("labels").or_insert_with(|| json!({}));
            if let (Some(labels), Some(extra)) = (labels.as_object_mut(), match_labels.as_object()) {
                labels.extend(extra.iter().map(|(k, v)| (k.clone(), v.clone())));
            }
            claim
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn set() -> Value {
        json!({
            "metadata": {"name": "web", "namespace": "ns", "uid": "u1"},
            "spec": {
                "serviceName": "nginx",
                "selector": {"matchLabels": {"app": "nginx"}},
                "template": {"metadata": {"labels": {"app": "nginx"}}, "spec": {"containers": [{"name": "c", "image": "nginx"}], "volumes": [{"name": "www", "emptyDir": {}}, {"name": "tmp", "emptyDir": {}}]}},
                "volumeClaimTemplates": [{"metadata": {"name": "www"}, "spec": {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "1Gi"}}}}],
            },
        })
    }

    #[test]
    fn ordinals_come_from_the_last_dash_of_the_name() {
        assert_eq!(parent_and_ordinal("web-12"), Some(("web", 12)));
        assert_eq!(parent_and_ordinal("my-web-0"), Some(("my-web", 0)));
        assert_eq!(parent_and_ordinal("web-x"), None);
        assert_eq!(parent_and_ordinal("web"), None);
    }

    #[test]
    fn a_new_pod_has_its_identity_revision_and_claim_volume() {
        let pod = new_pod(&set(), 2, "web-abc");
        assert_eq!(pod["metadata"]["name"], "web-2");
        assert_eq!(pod["metadata"]["labels"], json!({"app": "nginx", POD_NAME_LABEL: "web-2", POD_INDEX_LABEL: "2", REVISION_LABEL: "web-abc"}));
        assert_eq!(pod["spec"]["hostname"], "web-2");
        assert_eq!(pod["spec"]["subdomain"], "nginx");
        assert_eq!(
            pod["spec"]["volumes"],
            json!([{"name": "www", "persistentVolumeClaim": {"claimName": "www-web-2"}}, {"name": "tmp", "emptyDir": {}}])
        );
        assert_eq!(pod["metadata"]["ownerReferences"][0]["kind"], "StatefulSet");
        assert!(identity_matches(&set(), &json!({"metadata": {"name": "web-2", "namespace": "ns", "labels": {POD_NAME_LABEL: "web-2"}}})));
        assert!(storage_matches(&set(), &pod));
    }

    #[test]
    fn claims_carry_the_selectors_labels_and_the_ordinals_name() {
        let c = claims(&set(), 1);
        assert_eq!(c[0]["metadata"]["name"], "www-web-1");
        assert_eq!(c[0]["metadata"]["labels"], json!({"app": "nginx"}));
        assert_eq!(c[0]["spec"]["resources"]["requests"]["storage"], "1Gi");
    }
}
