//! Validation of built-in kinds: the rules later controllers and plugins most often trip over,
//! worded as upstream (required pod containers, Job restartPolicy, Deployment/ReplicaSet
//! selectors matching their template, immutable fields, immutable ConfigMaps and Secrets, what
//! a pod update may change).

mod enums;
pub(crate) mod events;
mod kinds;

use crate::selector::LabelSelector;
use crate::status::Cause;
use operator_selector::label::{qualified_name_errors, value_errors as label_value_errors};
use serde_json::{Value, json};

fn required(field: &str) -> Cause {
    Cause::new("FieldValueRequired", "Required value", field)
}

fn immutable(field: &str, v: &Value) -> Cause {
    Cause::new("FieldValueInvalid", format!("Invalid value: {}: field is immutable", short(v)), field)
}

fn short(v: &Value) -> String {
    let s = v.to_string();
    if s.len() > 120 { format!("{}...", &s[..117]) } else { s }
}

/// A pod spec at `path`: containers with names and images, and the enumerated values of its
/// containers and of `restartPolicy` (`restart_policies`: a Pod's three, a workload
/// template's `Always`, or `None` where the owner checks its own, as a Job does), in
/// upstream's order (each container's ports, then its pull policy; the restart policy last).
fn pod_spec(spec: Option<&Value>, path: &str, restart_policies: Option<&[&str]>, causes: &mut Vec<Cause>) {
    let Some(spec) = spec else {
        causes.push(required(&format!("{path}.containers")));
        return;
    };
    match spec.get("containers").and_then(Value::as_array) {
        None => causes.push(required(&format!("{path}.containers"))),
        Some(cs) if cs.is_empty() => causes.push(required(&format!("{path}.containers"))),
        Some(cs) => {
            for (i, c) in cs.iter().enumerate() {
                if c.get("name").and_then(Value::as_str).is_none_or(str::is_empty) {
                    causes.push(required(&format!("{path}.containers[{i}].name")));
                }
                if c.get("image").and_then(Value::as_str).is_none_or(str::is_empty) {
                    causes.push(required(&format!("{path}.containers[{i}].image")));
                }
            }
        }
    }
    for list in ["initContainers", "containers"] {
        for (i, c) in spec.get(list).and_then(Value::as_array).into_iter().flatten().enumerate() {
            for (j, port) in c.get("ports").and_then(Value::as_array).into_iter().flatten().enumerate() {
                enums::check(port.get("protocol"), enums::PROTOCOL, &format!("{path}.{list}[{i}].ports[{j}].protocol"), causes);
            }
            enums::check(c.get("imagePullPolicy"), enums::IMAGE_PULL_POLICY, &format!("{path}.{list}[{i}].imagePullPolicy"), causes);
        }
    }
    if let Some(allowed) = restart_policies {
        enums::check(spec.get("restartPolicy"), allowed, &format!("{path}.restartPolicy"), causes);
    }
}

/// Ephemeral containers need a name and an image, and once added may not change or go.
fn ephemeral_containers(old: Option<&Value>, new: &Value, causes: &mut Vec<Cause>) {
    let list = |v: &Value| v.pointer("/spec/ephemeralContainers").and_then(Value::as_array).cloned().unwrap_or_default();
    let new_list = list(new);
    for (i, c) in new_list.iter().enumerate() {
        for field in ["name", "image"] {
            if c.get(field).and_then(Value::as_str).is_none_or(str::is_empty) {
                causes.push(required(&format!("spec.ephemeralContainers[{i}].{field}")));
            }
        }
    }
    for c in old.map(list).unwrap_or_default() {
        let name = c.get("name").and_then(Value::as_str).unwrap_or_default();
        let what = match new_list.iter().find(|n| n.get("name") == c.get("name")) {
            None => "removed",
            Some(n) if n != &c => "changed",
            Some(_) => continue,
        };
        causes.push(Cause::new(
            "FieldValueForbidden",
            format!("Forbidden: existing ephemeral containers {name:?} may not be {what}"),
            "spec.ephemeralContainers",
        ));
    }
}

fn selector_matches_template(obj: &Value, causes: &mut Vec<Cause>) {
    let Some(sel) = obj.pointer("/spec/selector") else {
        causes.push(required("spec.selector"));
        return;
    };
    let labels = obj.pointer("/spec/template/metadata/labels").cloned().unwrap_or(json!({}));
    let selector = LabelSelector::from_object(sel);
    if selector.0.is_empty() {
        causes.push(Cause::new(
            "FieldValueInvalid",
            format!("Invalid value: {}: empty selector is invalid for deployment", short(sel)),
            "spec.selector",
        ));
    } else if !selector.matches(&json!({"metadata": {"labels": labels}})) {
        causes.push(Cause::new(
            "FieldValueInvalid",
            format!("Invalid value: {}: `selector` does not match template `labels`", short(&labels)),
            "spec.template.metadata.labels",
        ));
    }
}

const POD_UPDATE_FORBIDDEN: &str = "Forbidden: pod updates may not change fields other than `spec.containers[*].image`,`spec.initContainers[*].image`,`spec.activeDeadlineSeconds`,`spec.tolerations` (only additions to existing tolerations),`spec.terminationGracePeriodSeconds` (allow it to be set to 1 if it was previously negative)";

fn pod_update(old: &Value, new: &Value, causes: &mut Vec<Cause>) {
    let strip = |v: &Value| {
        let mut s = v.get("spec").cloned().unwrap_or(json!({}));
        for list in ["containers", "initContainers"] {
            if let Some(cs) = s.get_mut(list).and_then(Value::as_array_mut) {
                for c in cs {
                    if let Some(m) = c.as_object_mut() {
                        m.remove("image");
                    }
                }
            }
        }
        if let Some(m) = s.as_object_mut() {
            // Changed only through `pods/ephemeralcontainers`, checked by `ephemeral_containers`.
            m.remove("ephemeralContainers");
            m.remove("activeDeadlineSeconds");
            m.remove("tolerations");
            m.remove("terminationGracePeriodSeconds");
            // nodeName may go from unset to set (what the binding subresource does).
            if old.pointer("/spec/nodeName").is_none() {
                m.remove("nodeName");
            }
        }
        s
    };
    if strip(old) != strip(new) {
        causes.push(Cause::new("FieldValueForbidden", POD_UPDATE_FORBIDDEN, "spec"));
    }
}

/// Most bytes of all annotations' keys and values together (`TotalAnnotationSizeLimitB`, 256 KiB).
const MAX_ANNOTATIONS_BYTES: usize = 256 * 1024;

fn invalid(value: &str, message: &str, field: &str) -> Cause {
    Cause::new("FieldValueInvalid", format!("Invalid value: {value:?}: {message}"), field)
}

/// Object metadata rules every kind shares, as `ValidateObjectMeta`: label keys and values
/// (`ValidateLabels`), annotation keys and their total size (`ValidateAnnotations`).
pub fn metadata(obj: &Value) -> Vec<Cause> {
    let mut causes = vec![];
    if let Some(labels) = obj.pointer("/metadata/labels").and_then(Value::as_object) {
        for (k, v) in labels {
            causes.extend(qualified_name_errors(k).iter().map(|m| invalid(k, m, "metadata.labels")));
            let v = v.as_str().unwrap_or_default();
            causes.extend(label_value_errors(v).iter().map(|m| invalid(v, m, "metadata.labels")));
        }
    }
    if let Some(ann) = obj.pointer("/metadata/annotations").and_then(Value::as_object) {
        for k in ann.keys() {
            causes.extend(qualified_name_errors(&k.to_lowercase()).iter().map(|m| invalid(k, m, "metadata.annotations")));
        }
        let size: usize = ann.iter().map(|(k, v)| k.len() + v.as_str().map_or(0, str::len)).sum();
        if size > MAX_ANNOTATIONS_BYTES {
            causes.push(Cause::new(
                "FieldValueTooLong",
                format!("Too long: must have at most {MAX_ANNOTATIONS_BYTES} bytes"),
                "metadata.annotations",
            ));
        }
    }
    causes
}

/// Causes for a create (`old` = None) or update of a built-in object.
pub fn validate(group: &str, kind: &str, obj: &Value, old: Option<&Value>) -> Vec<Cause> {
    let mut causes = vec![];
    match (group, kind) {
        ("", "Pod") => {
            pod_spec(obj.get("spec"), "spec", Some(enums::POD_RESTART_POLICY), &mut causes);
            ephemeral_containers(old, obj, &mut causes);
            if let Some(old) = old {
                pod_update(old, obj, &mut causes);
            }
        }
        ("apps", "Deployment") | ("apps", "ReplicaSet") => {
            selector_matches_template(obj, &mut causes);
            pod_spec(obj.pointer("/spec/template/spec"), "spec.template.spec", Some(enums::TEMPLATE_RESTART_POLICY), &mut causes);
            if let Some(r) = obj.pointer("/spec/replicas").and_then(Value::as_i64)
                && r < 0
            {
                causes.push(Cause::new("FieldValueInvalid", format!("Invalid value: {r}: must be greater than or equal to 0"), "spec.replicas"));
            }
            if let Some(old) = old
                && old.pointer("/spec/selector") != obj.pointer("/spec/selector")
            {
                causes.push(immutable("spec.selector", obj.pointer("/spec/selector").unwrap_or(&Value::Null)));
            }
        }
        ("batch", "Job") => {
            pod_spec(obj.pointer("/spec/template/spec"), "spec.template.spec", None, &mut causes);
            match obj.pointer("/spec/template/spec/restartPolicy").and_then(Value::as_str) {
                Some("OnFailure") | Some("Never") => {}
                None => causes.push(Cause::new(
                    "FieldValueRequired",
                    "Required value: valid values: \"OnFailure\", \"Never\"",
                    "spec.template.spec.restartPolicy",
                )),
                Some(other) => causes.push(Cause::new(
                    "FieldValueNotSupported",
                    format!("Unsupported value: {other:?}: supported values: \"OnFailure\", \"Never\""),
                    "spec.template.spec.restartPolicy",
                )),
            }
            if let Some(old) = old {
                for (ptr, field) in
                    [("/spec/selector", "spec.selector"), ("/spec/completions", "spec.completions"), ("/spec/completionMode", "spec.completionMode")]
                {
                    if old.pointer(ptr) != obj.pointer(ptr) {
                        causes.push(immutable(field, obj.pointer(ptr).unwrap_or(&Value::Null)));
                    }
                }
                let tmpl = |v: &Value| {
                    let mut t = v.pointer("/spec/template").cloned().unwrap_or_default();
                    // Scheduling directives may change while suspended; labels/annotations too.
                    if let Some(m) = t.get_mut("metadata").and_then(Value::as_object_mut) {
                        m.remove("labels");
                        m.remove("annotations");
                    }
                    t
                };
                if tmpl(old) != tmpl(obj) {
                    causes.push(immutable("spec.template", obj.pointer("/spec/template").unwrap_or(&Value::Null)));
                }
            }
        }
        ("", "ConfigMap") | ("", "Secret") => {
            causes.extend(crate::limits::data_causes(group, kind, obj));
            if let Some(old) = old
                && old.get("immutable") == Some(&Value::Bool(true))
            {
                for f in ["data", "binaryData"] {
                    if old.get(f) != obj.get(f) {
                        causes.push(Cause::new("FieldValueForbidden", "Forbidden: field is immutable when `immutable` is set", f));
                    }
                }
                if obj.get("immutable") != Some(&Value::Bool(true)) {
                    causes.push(Cause::new("FieldValueForbidden", "Forbidden: field is immutable when `immutable` is set", "immutable"));
                }
            }
        }
        _ => kinds::validate(group, kind, obj, old, &mut causes),
    }
    causes
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn label_limits_are_worded_as_upstream() {
        let long = "a".repeat(64);
        let c = metadata(&json!({"metadata": {"labels": {"app": long}}}));
        assert_eq!(c.len(), 1, "{c:?}");
        assert_eq!(c[0].message, format!("Invalid value: \"{long}\": must be no more than 63 characters"));
        let c = metadata(&json!({"metadata": {"labels": {long.clone(): "x"}}}));
        assert_eq!(c[0].message, format!("Invalid value: \"{long}\": name part must be no more than 63 characters"));
        let c = metadata(&json!({"metadata": {"labels": {"Bad_Prefix/x": "y"}}}));
        assert!(c[0].message.contains(": prefix part a lowercase RFC 1123 subdomain must consist of"), "{c:?}");
        let c = metadata(&json!({"metadata": {"annotations": {"a/b/c": "x"}}}));
        assert!(c[0].message.starts_with("Invalid value: \"a/b/c\": a qualified name must consist"), "{c:?}");
        assert!(
            metadata(&json!({"metadata": {"labels": {"example.com/Name": "", "x": "y.z_1"}, "annotations": {"Example.com/UPPER": "ok"}}})).is_empty()
        );
    }

    #[test]
    fn labels_and_annotation_size_are_checked() {
        assert!(metadata(&json!({"metadata": {"labels": {"app.kubernetes.io/name": "web", "x": ""}}})).is_empty());
        assert_eq!(metadata(&json!({"metadata": {"labels": {"app": "bad value"}}})).len(), 1);
        let big = "x".repeat(262_145);
        assert_eq!(metadata(&json!({"metadata": {"annotations": {"a": big}}}))[0].field, "metadata.annotations");
    }

    #[test]
    fn job_needs_a_valid_restart_policy() {
        let job = json!({"spec": {"template": {"spec": {"restartPolicy": "Always", "containers": [{"name": "c", "image": "i"}]}}}});
        let c = validate("batch", "Job", &job, None);
        assert_eq!(c.len(), 1);
        assert_eq!(c[0].message, "Unsupported value: \"Always\": supported values: \"OnFailure\", \"Never\"");
    }

    #[test]
    fn deployment_selector_must_match_and_stay() {
        let d = json!({"spec": {"selector": {"matchLabels": {"app": "a"}}, "template": {"metadata": {"labels": {"app": "b"}}, "spec": {"containers": [{"name": "c", "image": "i"}]}}}});
        let c = validate("apps", "Deployment", &d, None);
        assert_eq!(c[0].field, "spec.template.metadata.labels");
        let ok = json!({"spec": {"selector": {"matchLabels": {"app": "b"}}, "template": {"metadata": {"labels": {"app": "b"}}, "spec": {"containers": [{"name": "c", "image": "i"}]}}}});
        assert!(validate("apps", "Deployment", &ok, None).is_empty());
        let mut moved = ok.clone();
        moved["spec"]["selector"]["matchLabels"]["x"] = json!("y");
        moved["spec"]["template"]["metadata"]["labels"]["x"] = json!("y");
        let c = validate("apps", "Deployment", &moved, Some(&ok));
        assert_eq!(c[0].field, "spec.selector");
    }

    #[test]
    fn pod_updates_may_change_only_images() {
        let p = json!({"spec": {"containers": [{"name": "c", "image": "i:1"}]}});
        let mut img = p.clone();
        img["spec"]["containers"][0]["image"] = json!("i:2");
        assert!(validate("", "Pod", &img, Some(&p)).is_empty());
        let mut env = p.clone();
        env["spec"]["containers"][0]["env"] = json!([{"name": "A"}]);
        assert_eq!(validate("", "Pod", &env, Some(&p))[0].field, "spec");
    }
}
