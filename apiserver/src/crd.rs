//! CustomResourceDefinitions: turning a CRD object into servable [`Resource`]s (one per served
//! version, with schema, subresources and printer columns) and the status the apiextensions
//! controllers would write (`NamesAccepted`, `Established`, `acceptedNames`, `storedVersions`).

use crate::resources::{PrinterColumn, Resource, ScaleSpec};
use crate::status::Cause;
use serde_json::{Value, json};
use std::sync::Arc;

fn s(v: &Value, p: &str) -> String {
    v.pointer(p).and_then(Value::as_str).unwrap_or_default().to_string()
}

fn strings(v: Option<&Value>) -> Vec<String> {
    v.and_then(Value::as_array).map(|a| a.iter().filter_map(|x| x.as_str().map(String::from)).collect()).unwrap_or_default()
}

/// Check a CRD the way apiextensions validation does (the subset we need).
pub fn validate(crd: &Value) -> Vec<Cause> {
    let mut causes = vec![];
    let group = s(crd, "/spec/group");
    let plural = s(crd, "/spec/names/plural");
    let name = s(crd, "/metadata/name");
    if group.is_empty() {
        causes.push(Cause::new("FieldValueRequired", "Required value", "spec.group"));
    }
    if plural.is_empty() {
        causes.push(Cause::new("FieldValueRequired", "Required value", "spec.names.plural"));
    }
    if s(crd, "/spec/names/kind").is_empty() {
        causes.push(Cause::new("FieldValueRequired", "Required value", "spec.names.kind"));
    }
    if !group.is_empty() && !plural.is_empty() && name != format!("{plural}.{group}") {
        causes.push(Cause::new("FieldValueInvalid", format!("Invalid value: {name:?}: must be spec.names.plural+\".\"+spec.group"), "metadata.name"));
    }
    match s(crd, "/spec/scope").as_str() {
        "Namespaced" | "Cluster" => {}
        other => causes.push(Cause::new(
            "FieldValueNotSupported",
            format!("Unsupported value: {other:?}: supported values: \"Cluster\", \"Namespaced\""),
            "spec.scope",
        )),
    }
    let versions = crd.pointer("/spec/versions").and_then(Value::as_array).cloned().unwrap_or_default();
    if versions.is_empty() {
        causes.push(Cause::new("FieldValueRequired", "Required value", "spec.versions"));
    }
    for (i, v) in versions.iter().enumerate() {
        let path = format!("spec.versions[{i}].schema.openAPIV3Schema");
        match v.pointer("/schema/openAPIV3Schema") {
            None => causes.push(Cause::new("FieldValueRequired", "Required value: schemas are required", path)),
            Some(schema) => structural(schema, &path, true, &mut causes),
        }
    }
    let storage = versions.iter().filter(|v| v.get("storage").and_then(Value::as_bool) == Some(true)).count();
    if !versions.is_empty() && storage != 1 {
        causes.push(Cause::new(
            "FieldValueInvalid",
            "Invalid value: []string{...}: must have exactly one version marked as storage version".to_string(),
            "spec.versions",
        ));
    }
    causes
}

/// The structural-schema rules apiextensions enforces (the common subset): every specified
/// field has a `type` unless it is int-or-string or preserves unknown fields, and the root is
/// an object.
fn structural(schema: &Value, path: &str, root: bool, causes: &mut Vec<Cause>) {
    let has = |k: &str| schema.get(k).is_some();
    let flag = |k: &str| schema.get(k).and_then(Value::as_bool) == Some(true);
    if root && schema.get("type").and_then(Value::as_str) != Some("object") {
        causes.push(Cause::new("FieldValueRequired", "Required value: must not be empty at the root", format!("{path}.type")));
    } else if !root && !has("type") && !flag("x-kubernetes-int-or-string") && !flag("x-kubernetes-preserve-unknown-fields") {
        causes.push(Cause::new("FieldValueRequired", "Required value: must not be empty for specified object fields", format!("{path}.type")));
    }
    if let Some(props) = schema.get("properties").and_then(Value::as_object) {
        for (k, v) in props {
            structural(v, &format!("{path}.properties[{k}]"), false, causes);
        }
    }
    if let Some(items) = schema.get("items").filter(|i| i.is_object()) {
        structural(items, &format!("{path}.items"), false, causes);
    } else if schema.get("type").and_then(Value::as_str) == Some("array") {
        causes.push(Cause::new("FieldValueRequired", "Required value: must be specified", format!("{path}.items")));
    }
    if let Some(ap) = schema.get("additionalProperties").filter(|a| a.is_object()) {
        structural(ap, &format!("{path}.additionalProperties"), false, causes);
    }
}

/// The resources a CRD serves.
/// The causes upstream's `ValidateScaleSpec` adds for a custom resource with a `scale`
/// subresource, before the schema's: the value at `specReplicasPath` (when set) is an integer
/// from 0 to 2^31-1. The field is named by the path as the CRD spells it (`.spec.replicas`).
pub fn scale_spec_causes(obj: &Value, scale: &ScaleSpec) -> Vec<Cause> {
    let path = &scale.spec_replicas_path;
    let invalid =
        |value: &dyn std::fmt::Display, why: String| Cause::new("FieldValueInvalid", format!("Invalid value: {value}: {why}"), path.as_str());
    let pointer = format!("/{}", path.trim_start_matches('.').replace('.', "/"));
    let Some(found) = obj.pointer(&pointer) else { return vec![] };
    let go_type = match found {
        Value::Number(n) => match n.as_i64() {
            Some(r) if r < 0 => return vec![invalid(&r, "should be a non-negative integer".into())],
            Some(r) if r > i64::from(i32::MAX) => return vec![invalid(&r, format!("should be less than or equal to {}", i32::MAX))],
            Some(_) => return vec![],
            None => "float64",
        },
        Value::Null => return vec![],
        Value::String(_) => "string",
        Value::Bool(_) => "bool",
        Value::Array(_) => "[]interface {}",
        Value::Object(_) => "map[string]interface {}",
    };
    let shown = match found {
        Value::String(s) => s.clone(),
        other => other.to_string(),
    };
    vec![invalid(&0, format!("{path} accessor error: {shown} is of the type {go_type}, expected int64"))]
}

pub fn resources(crd: &Value) -> Vec<Resource> {
    let group = s(crd, "/spec/group");
    let names = &crd["spec"]["names"];
    let kind = s(names, "/kind");
    let plural = s(names, "/plural");
    let singular = {
        let x = s(names, "/singular");
        if x.is_empty() { kind.to_lowercase() } else { x }
    };
    let list_kind = {
        let x = s(names, "/listKind");
        if x.is_empty() { format!("{kind}List") } else { x }
    };
    let namespaced = s(crd, "/spec/scope") != "Cluster";
    let mut out = vec![];
    for v in crd.pointer("/spec/versions").and_then(Value::as_array).cloned().unwrap_or_default() {
        if v.get("served").and_then(Value::as_bool) == Some(false) {
            continue;
        }
        let subs = v.get("subresources").or_else(|| crd.pointer("/spec/subresources"));
        let scale = subs.and_then(|s| s.get("scale")).map(|sc| ScaleSpec {
            spec_replicas_path: s(sc, "/specReplicasPath"),
            status_replicas_path: s(sc, "/statusReplicasPath"),
            label_selector_path: sc.get("labelSelectorPath").and_then(Value::as_str).map(String::from),
        });
        let columns = v
            .get("additionalPrinterColumns")
            .and_then(Value::as_array)
            .map(|cols| {
                cols.iter()
                    .map(|c| PrinterColumn {
                        name: s(c, "/name"),
                        type_: s(c, "/type"),
                        format: s(c, "/format"),
                        description: s(c, "/description"),
                        priority: c.get("priority").and_then(Value::as_i64).unwrap_or(0),
                        json_path: s(c, "/jsonPath"),
                    })
                    .collect()
            })
            .unwrap_or_default();
        out.push(Resource {
            group: group.clone(),
            version: s(&v, "/name"),
            plural: plural.clone(),
            singular: singular.clone(),
            kind: kind.clone(),
            list_kind: list_kind.clone(),
            namespaced,
            short_names: strings(names.get("shortNames")),
            categories: strings(names.get("categories")),
            status: subs.and_then(|s| s.get("status")).is_some(),
            scale,
            generation: true,
            keep_status_on_create: false,
            storage: v.get("storage").and_then(Value::as_bool).unwrap_or(false),
            schema: v.pointer("/schema/openAPIV3Schema").cloned().map(Arc::new),
            printer_columns: columns,
            custom: true,
            alias_of: None,
            ephemeral: false,
            verbs: crate::resources::ALL_VERBS,
            subresources: &[],
        });
    }
    out
}

/// The status the apiextensions controllers converge to for an accepted CRD.
pub fn accepted_status(crd: &Value, now: &str) -> Value {
    let names = &crd["spec"]["names"];
    let kind = s(names, "/kind");
    let mut accepted = if names.is_object() { names.clone() } else { json!({}) };
    if s(names, "/singular").is_empty() {
        accepted["singular"] = json!(kind.to_lowercase());
    }
    if s(names, "/listKind").is_empty() {
        accepted["listKind"] = json!(format!("{kind}List"));
    }
    let storage: Vec<String> = crd
        .pointer("/spec/versions")
        .and_then(Value::as_array)
        .map(|vs| vs.iter().filter(|v| v.get("storage").and_then(Value::as_bool) == Some(true)).map(|v| s(v, "/name")).collect())
        .unwrap_or_default();
    let mut stored = strings(crd.pointer("/status/storedVersions"));
    for v in storage {
        if !stored.contains(&v) {
            stored.push(v);
        }
    }
    json!({
        "conditions": [
            {"type": "NamesAccepted", "status": "True", "lastTransitionTime": now, "reason": "NoConflicts", "message": "no conflicts found"},
            {"type": "Established", "status": "True", "lastTransitionTime": now, "reason": "InitialNamesAccepted", "message": "the initial names have been accepted"}
        ],
        "acceptedNames": accepted,
        "storedVersions": stored,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn crd(schema: Value) -> Value {
        json!({"metadata": {"name": "things.example.com"}, "spec": {"group": "example.com", "scope": "Namespaced",
            "names": {"plural": "things", "kind": "Thing"},
            "versions": [{"name": "v1", "served": true, "storage": true, "schema": {"openAPIV3Schema": schema}}]}})
    }

    #[test]
    fn a_negative_or_non_integer_scale_replicas_value_gets_upstreams_scale_cause() {
        let scale =
            ScaleSpec { spec_replicas_path: ".spec.replicas".into(), status_replicas_path: ".status.replicas".into(), label_selector_path: None };
        let messages = |obj: Value| scale_spec_causes(&obj, &scale).into_iter().map(|c| format!("{}: {}", c.field, c.message)).collect::<Vec<_>>();
        assert_eq!(messages(json!({"spec": {"replicas": -1}})), [".spec.replicas: Invalid value: -1: should be a non-negative integer"]);
        assert_eq!(
            messages(json!({"spec": {"replicas": 2147483648i64}})),
            [".spec.replicas: Invalid value: 2147483648: should be less than or equal to 2147483647"]
        );
        assert_eq!(
            messages(json!({"spec": {"replicas": "two"}})),
            [".spec.replicas: Invalid value: 0: .spec.replicas accessor error: two is of the type string, expected int64"]
        );
        assert!(messages(json!({"spec": {"replicas": 3}})).is_empty());
        assert!(messages(json!({"spec": {}})).is_empty());
    }

    #[test]
    fn non_structural_schemas_are_refused() {
        let ok = crd(json!({"type": "object", "properties": {"spec": {"type": "object", "x-kubernetes-preserve-unknown-fields": true}}}));
        assert!(validate(&ok).is_empty());
        let missing = crd(json!({"type": "object", "properties": {"spec": {"properties": {"a": {"type": "string"}}}}}));
        let causes = validate(&missing);
        assert_eq!(causes[0].field, "spec.versions[0].schema.openAPIV3Schema.properties[spec].type");
        let no_items = crd(json!({"type": "object", "properties": {"l": {"type": "array"}}}));
        assert_eq!(validate(&no_items)[0].field, "spec.versions[0].schema.openAPIV3Schema.properties[l].items");
    }
}
