//! The built-in kinds a default kube-apiserver v1.36 serves, read from its aggregated discovery
//! documents ([`crate::surface`], captured from the real server by `cargo xtask api-surface`):
//! group, version, kind, plural, singular, scope, short names, categories, verbs and
//! subresources are upstream's, in upstream's discovery order. What discovery does not say is
//! stated here: which kinds maintain `metadata.generation`, which are create-only reviews, and
//! which resources are views of another's storage.

use super::{GroupResource, Resource, ScaleSpec, Subresource};
use serde_json::Value;
use std::sync::OnceLock;

/// Kinds whose registry strategy sets `metadata.generation` (1 on create, bumped when the spec
/// changes): `PrepareForCreate` sets `Generation = 1` in their `pkg/registry/*/strategy.go`.
const WITH_GENERATION: &[(&str, &str)] = &[
    ("", "ReplicationController"),
    ("apps", "DaemonSet"),
    ("apps", "Deployment"),
    ("apps", "ReplicaSet"),
    ("apps", "StatefulSet"),
    ("batch", "CronJob"),
    ("batch", "Job"),
    ("networking.k8s.io", "IngressClass"),
    ("networking.k8s.io", "Ingress"),
    ("networking.k8s.io", "NetworkPolicy"),
    ("policy", "PodDisruptionBudget"),
    ("admissionregistration.k8s.io", "MutatingWebhookConfiguration"),
    ("admissionregistration.k8s.io", "ValidatingWebhookConfiguration"),
    ("admissionregistration.k8s.io", "ValidatingAdmissionPolicy"),
    ("admissionregistration.k8s.io", "ValidatingAdmissionPolicyBinding"),
    ("admissionregistration.k8s.io", "MutatingAdmissionPolicy"),
    ("admissionregistration.k8s.io", "MutatingAdmissionPolicyBinding"),
    ("apiextensions.k8s.io", "CustomResourceDefinition"),
    ("flowcontrol.apiserver.k8s.io", "FlowSchema"),
    ("flowcontrol.apiserver.k8s.io", "PriorityLevelConfiguration"),
    ("resource.k8s.io", "DeviceClass"),
    ("resource.k8s.io", "ResourceSlice"),
];

/// Groups whose create-only kinds are reviews: answered with a computed status, never stored.
const REVIEW_GROUPS: &[&str] = &["authentication.k8s.io", "authorization.k8s.io"];

fn strings(v: &Value) -> Vec<String> {
    v.as_array().into_iter().flatten().filter_map(Value::as_str).map(String::from).collect()
}

/// Discovery's strings live as long as the process: they are read once ([`builtins`]).
fn leak_strs(v: &Value) -> &'static [&'static str] {
    let owned: Vec<&'static str> = strings(v).into_iter().map(|s| &*Box::leak(s.into_boxed_str())).collect();
    Box::leak(owned.into_boxed_slice())
}

fn leak(s: &str) -> &'static str {
    Box::leak(s.to_string().into_boxed_str())
}

/// One resource of an aggregated discovery document (`apidiscovery.k8s.io/v2`).
fn resource(group: &str, version: &str, preferred: &str, entry: &Value) -> Resource {
    let kind = entry["responseKind"]["kind"].as_str().unwrap_or_default().to_string();
    let plural = entry["resource"].as_str().unwrap_or_default().to_string();
    let verbs = leak_strs(&entry["verbs"]);
    let subs: Vec<&Value> = entry["subresources"].as_array().into_iter().flatten().collect();
    let has = |name: &str| subs.iter().any(|s| s["subresource"] == name);
    let others: Vec<Subresource> = subs
        .iter()
        .filter(|s| s["subresource"] != "status" && s["subresource"] != "scale")
        .map(|s| {
            let response = &s["responseKind"];
            Subresource {
                name: leak(s["subresource"].as_str().unwrap_or_default()),
                group: leak(response["group"].as_str().unwrap_or_default()),
                version: leak(response["version"].as_str().unwrap_or_default()),
                kind: leak(response["kind"].as_str().unwrap_or_default()),
                verbs: leak_strs(&s["verbs"]),
            }
        })
        .collect();
    let review = REVIEW_GROUPS.contains(&group) && verbs == ["create"];
    // One storage, two views (see `convert`): events.k8s.io Events are core Events; a group's
    // other versions (autoscaling/v1 HPAs) are stored at its preferred one.
    let alias_of = if group == "events.k8s.io" {
        Some(GroupResource { group: String::new(), resource: "events".into() })
    } else if version != preferred {
        Some(GroupResource { group: group.into(), resource: plural.clone() })
    } else {
        None
    };
    Resource {
        group: group.into(),
        version: version.into(),
        singular: entry["singularResource"].as_str().unwrap_or_default().to_string(),
        list_kind: format!("{kind}List"),
        namespaced: entry["scope"] == "Namespaced",
        short_names: strings(&entry["shortNames"]),
        categories: strings(&entry["categories"]),
        status: has("status"),
        scale: has("scale").then(|| ScaleSpec {
            spec_replicas_path: ".spec.replicas".into(),
            status_replicas_path: ".status.replicas".into(),
            label_selector_path: Some(".spec.selector".into()),
        }),
        generation: WITH_GENERATION.contains(&(group, kind.as_str())),
        keep_status_on_create: group.is_empty() && (kind == "Node" || kind == "Namespace"),
        storage: version == preferred,
        schema: None,
        printer_columns: vec![],
        custom: false,
        alias_of,
        ephemeral: review,
        verbs,
        subresources: Box::leak(others.into_boxed_slice()),
        plural,
        kind,
    }
}

fn read_aggregated(doc: &Value, out: &mut Vec<Resource>) {
    for item in doc["items"].as_array().into_iter().flatten() {
        let group = item["metadata"]["name"].as_str().unwrap_or_default();
        let versions: Vec<&Value> = item["versions"].as_array().into_iter().flatten().collect();
        let preferred = versions.first().and_then(|v| v["version"].as_str()).unwrap_or_default();
        for v in &versions {
            let version = v["version"].as_str().unwrap_or_default();
            for entry in v["resources"].as_array().into_iter().flatten() {
                out.push(resource(group, version, preferred, entry));
            }
        }
    }
}

/// The built-in resources, in discovery order (core, then the groups in `/apis` order).
pub fn builtins() -> Vec<Resource> {
    static ALL: OnceLock<Vec<Resource>> = OnceLock::new();
    ALL.get_or_init(|| {
        let mut out = vec![];
        read_aggregated(crate::surface::aggregated(true), &mut out);
        read_aggregated(crate::surface::aggregated(false), &mut out);
        out
    })
    .clone()
}

/// The preferred-order list of built-in group versions: (group, version).
pub fn builtin_group_versions() -> Vec<(String, String)> {
    let mut out: Vec<(String, String)> = vec![];
    for r in builtins() {
        let gv = (r.group, r.version);
        if !out.contains(&gv) {
            out.push(gv);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rows_take_names_scope_and_verbs_from_upstream_discovery() {
        let all = builtins();
        let find = |g: &str, p: &str| all.iter().find(|r| r.group == g && r.plural == p).unwrap_or_else(|| panic!("{g}/{p}"));
        let sts = find("apps", "statefulsets");
        assert_eq!((sts.kind.as_str(), sts.version.as_str(), sts.namespaced), ("StatefulSet", "v1", true));
        assert!(sts.scale.is_some() && sts.status && sts.generation && sts.short_names == ["sts"]);
        assert!(!find("", "persistentvolumes").namespaced);
        assert!(find("authorization.k8s.io", "localsubjectaccessreviews").namespaced);
        assert!(find("authorization.k8s.io", "subjectaccessreviews").ephemeral);
        assert_eq!(find("", "endpoints").singular, "endpoints");
        assert_eq!(find("networking.k8s.io", "ingresses").singular, "ingress");
        assert_eq!(find("apiregistration.k8s.io", "apiservices").version, "v1");
        assert!(find("", "pods").subresource("exec").is_some());
        let hpa_v1 = all.iter().find(|r| r.group == "autoscaling" && r.version == "v1").expect("autoscaling/v1");
        assert!(!hpa_v1.storage && hpa_v1.alias_of.is_some());
        assert_eq!(find("events.k8s.io", "events").alias_of, Some(GroupResource { group: String::new(), resource: "events".into() }));
    }
}
