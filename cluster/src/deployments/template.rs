//! Pod templates of a Deployment and its ReplicaSets: template equality ignoring the
//! `pod-template-hash` label (how upstream finds the new ReplicaSet). The hash itself is
//! `workload_math::pod_template_hash`, shared with the plugins.

use serde_json::{Map, Value};

/// The label (on the ReplicaSet, its selector, its template and so its Pods) that keeps the
/// ReplicaSets of one Deployment apart.
pub(crate) const HASH_LABEL: &str = "pod-template-hash";

/// Upstream's `EqualIgnoreHash`: the templates are equal once the `pod-template-hash` label is
/// dropped, comparing as `Semantic.DeepEqual` does for what JSON can tell apart (unset, null,
/// empty string, empty list and empty map are all Go's zero value).
pub(crate) fn equal_ignore_hash(a: &Value, b: &Value) -> bool {
    normalized(a) == normalized(b)
}

fn normalized(template: &Value) -> Value {
    let mut t = template.clone();
    if let Some(labels) = t.pointer_mut("/metadata/labels").and_then(Value::as_object_mut) {
        labels.remove(HASH_LABEL);
    }
    drop_zero(&mut t);
    t
}

fn is_zero(v: &Value) -> bool {
    match v {
        Value::Null => true,
        Value::String(s) => s.is_empty(),
        Value::Array(a) => a.is_empty(),
        Value::Object(m) => m.is_empty(),
        _ => false,
    }
}

fn drop_zero(v: &mut Value) {
    match v {
        Value::Object(m) => {
            for x in m.values_mut() {
                drop_zero(x);
            }
            let kept: Map<String, Value> = std::mem::take(m).into_iter().filter(|(_, x)| !is_zero(x)).collect();
            *m = kept;
        }
        Value::Array(a) => a.iter_mut().for_each(drop_zero),
        _ => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn templates_compare_equal_without_the_hash_label_and_zero_values() {
        let d = json!({"metadata": {"labels": {"app": "d"}}, "spec": {"containers": [{"name": "c", "image": "nginx", "resources": {}}]}});
        let rs = json!({"metadata": {"labels": {"app": "d", "pod-template-hash": "abc"}, "creationTimestamp": null}, "spec": {"containers": [{"name": "c", "image": "nginx"}]}});
        assert!(equal_ignore_hash(&d, &rs));
        let changed = json!({"metadata": {"labels": {"app": "d"}}, "spec": {"containers": [{"name": "c", "image": "nginx:2"}]}});
        assert!(!equal_ignore_hash(&d, &changed));
    }
}
