//! The patch types: JSON merge patch (RFC 7386), JSON patch (RFC 6902) and strategic merge patch
//! (lists merged by their `patchMergeKey`, from a table covering the built-in kinds we serve).
//! Server-side apply builds on [`strategic_merge`] in [`crate::fields`].

use crate::status::ApiError;
use serde_json::{Map, Value};

/// The content types PATCH accepts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PatchType {
    /// `application/merge-patch+json`.
    Merge,
    /// `application/json-patch+json`.
    Json,
    /// `application/strategic-merge-patch+json`.
    Strategic,
    /// `application/apply-patch+yaml`.
    Apply,
}

impl PatchType {
    /// From a Content-Type header value (parameters ignored).
    pub fn from_content_type(ct: &str) -> Option<Self> {
        match ct.split(';').next().unwrap_or_default().trim() {
            "application/merge-patch+json" => Some(PatchType::Merge),
            "application/json-patch+json" => Some(PatchType::Json),
            "application/strategic-merge-patch+json" => Some(PatchType::Strategic),
            "application/apply-patch+yaml" | "application/apply-patch+json" => Some(PatchType::Apply),
            _ => None,
        }
    }
}

/// Apply an RFC 7386 merge patch.
pub fn merge_patch(target: &mut Value, patch: &Value) -> Result<(), ApiError> {
    if !patch.is_object() {
        return Err(ApiError::bad_request("json: cannot unmarshal into Go value of type map[string]interface {}"));
    }
    json_patch::merge(target, patch);
    Ok(())
}

/// Apply an RFC 6902 JSON patch. A malformed document is 400; an operation that cannot be applied
/// (including a failed `test`) is 422, as upstream's `applyJSPatch`.
pub fn json_patch(target: &mut Value, patch: &Value) -> Result<(), ApiError> {
    let ops: json_patch::Patch = serde_json::from_value(patch.clone()).map_err(|e| ApiError::bad_request(format!("invalid JSON patch: {e}")))?;
    // Upstream answers every patch that does not apply in the same generic words (v1.36 no
    // longer passes evanphx/json-patch's own message on); the cause is logged here instead.
    json_patch::patch(target, &ops).map_err(|e| {
        tracing::debug!(error = %e, "a JSON patch did not apply");
        ApiError::json_patch_failed()
    })
}

/// How a list field merges in a strategic merge patch.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ListStrategy {
    /// Replace the whole list (no patchStrategy).
    Replace,
    /// Merge elements by this key.
    MergeKey(String),
    /// Union of primitive values (e.g. `metadata.finalizers`).
    MergePrimitives,
}

/// The patch strategy of list `field` whose parent object sits at `path` (field names only,
/// list elements skipped). Covers the built-in kinds this server serves.
pub fn list_strategy(path: &[String], field: &str) -> ListStrategy {
    builtin_list_strategy(path, field).unwrap_or(ListStrategy::Replace)
}

/// Where list merge strategies come from: the built-in table, or a CRD's structural schema
/// (`x-kubernetes-list-type: map` + `x-kubernetes-list-map-keys`, `set`, else atomic).
#[derive(Debug, Clone, Copy, Default)]
pub struct Lists<'a> {
    /// The CRD schema (`None` = built-in kind).
    pub schema: Option<&'a Value>,
}

impl Lists<'_> {
    /// The strategy of list `field` under `path`.
    pub fn strategy(&self, path: &[String], field: &str) -> ListStrategy {
        let Some(root) = self.schema else { return list_strategy(path, field) };
        if path.first().map(String::as_str) == Some("metadata") {
            return list_strategy(path, field);
        }
        // Walked by reference: this runs for every list of every write
        // (managed fields, merge patches), and a CRD schema is a large tree.
        let mut s = root;
        for name in path {
            let Some(next) = schema_child(s, name) else { return ListStrategy::Replace };
            s = if next.get("type").and_then(Value::as_str) == Some("array") { next.get("items").unwrap_or(next) } else { next };
        }
        let Some(s) = schema_child(s, field) else { return ListStrategy::Replace };
        match s.get("x-kubernetes-list-type").and_then(Value::as_str) {
            Some("map") => s
                .pointer("/x-kubernetes-list-map-keys/0")
                .and_then(Value::as_str)
                .map(|k| ListStrategy::MergeKey(k.to_string()))
                .unwrap_or(ListStrategy::Replace),
            Some("set") => ListStrategy::MergePrimitives,
            _ => ListStrategy::Replace,
        }
    }
}

/// The schema of field `name` of an object schema: its property, else `additionalProperties`.
fn schema_child<'s>(schema: &'s Value, name: &str) -> Option<&'s Value> {
    schema.get("properties").and_then(|p| p.get(name)).or_else(|| schema.get("additionalProperties").filter(|a| a.is_object()))
}

fn builtin_list_strategy(path: &[String], field: &str) -> Option<ListStrategy> {
    let parent = path.last().map(String::as_str).unwrap_or("");
    let key = |k: &str| Some(ListStrategy::MergeKey(k.to_string()));
    match field {
        "containers"
        | "initContainers"
        | "ephemeralContainers"
        | "volumes"
        | "env"
        | "imagePullSecrets"
        | "resourceClaims"
        | "claims"
        | "secrets" => key("name"),
        "readinessGates" => key("conditionType"),
        "ports" if matches!(parent, "containers" | "initContainers" | "ephemeralContainers") => key("containerPort"),
        "ports" if parent == "spec" => key("port"),
        "volumeMounts" => key("mountPath"),
        "volumeDevices" => key("devicePath"),
        "conditions" => key("type"),
        "ownerReferences" => key("uid"),
        "hostAliases" => key("ip"),
        "topologySpreadConstraints" => key("topologyKey"),
        "finalizers" if parent == "metadata" => Some(ListStrategy::MergePrimitives),
        _ => None,
    }
}

/// Apply a strategic merge patch to `target`. `$patch: replace|delete`, `$retainKeys`,
/// `$deleteFromPrimitiveList/…` and `$setElementOrder/…` (ignored) are understood.
pub fn strategic_merge(target: &Value, patch: &Value) -> Result<Value, ApiError> {
    strategic_merge_with(target, patch, Lists::default())
}

/// [`strategic_merge`] with list strategies from `lists` (server-side apply on CRDs).
pub fn strategic_merge_with(target: &Value, patch: &Value, lists: Lists<'_>) -> Result<Value, ApiError> {
    if !patch.is_object() {
        return Err(ApiError::bad_request("json: cannot unmarshal array into Go value of type map[string]interface {}"));
    }
    Ok(merge_map(target, patch, &mut vec![], lists).unwrap_or(Value::Object(Map::new())))
}

fn merge_map(target: &Value, patch: &Value, path: &mut Vec<String>, lists: Lists<'_>) -> Option<Value> {
    let Some(pm) = patch.as_object() else { return Some(patch.clone()) };
    match pm.get("$patch").and_then(Value::as_str) {
        Some("delete") => return None,
        Some("replace") => {
            let mut m = pm.clone();
            m.remove("$patch");
            return Some(Value::Object(m));
        }
        _ => {}
    }
    let mut out = target.as_object().cloned().unwrap_or_default();
    if let Some(retain) = pm.get("$retainKeys").and_then(Value::as_array) {
        let keep: Vec<&str> = retain.iter().filter_map(Value::as_str).collect();
        out.retain(|k, _| keep.contains(&k.as_str()));
    }
    for (k, v) in pm {
        if k == "$patch" || k == "$retainKeys" || k.starts_with("$setElementOrder/") {
            continue;
        }
        if let Some(field) = k.strip_prefix("$deleteFromPrimitiveList/") {
            if let (Some(Value::Array(items)), Some(del)) = (out.get_mut(field), v.as_array()) {
                items.retain(|i| !del.contains(i));
            }
            continue;
        }
        if v.is_null() {
            out.remove(k);
            continue;
        }
        let merged = match (out.get(k), v) {
            (Some(cur @ Value::Object(_)), Value::Object(_)) => {
                path.push(k.clone());
                let r = merge_map(cur, v, path, lists);
                path.pop();
                r
            }
            (_, Value::Object(_)) => {
                path.push(k.clone());
                let r = merge_map(&Value::Null, v, path, lists);
                path.pop();
                r
            }
            (cur, Value::Array(items)) => Some(merge_list(cur, items, path, k, lists)),
            _ => Some(v.clone()),
        };
        match merged {
            Some(m) => {
                out.insert(k.clone(), m);
            }
            None => {
                out.remove(k);
            }
        }
    }
    Some(Value::Object(out))
}

fn strip_directives(v: &Value) -> Value {
    match v {
        Value::Object(m) => Value::Object(m.iter().filter(|(k, _)| !k.starts_with('$')).map(|(k, v)| (k.clone(), strip_directives(v))).collect()),
        other => other.clone(),
    }
}

fn merge_list(current: Option<&Value>, items: &[Value], path: &mut Vec<String>, field: &str, lists: Lists<'_>) -> Value {
    let cur: Vec<Value> = current.and_then(Value::as_array).cloned().unwrap_or_default();
    if items.iter().any(|i| i.get("$patch").and_then(Value::as_str) == Some("replace")) {
        return Value::Array(items.iter().filter(|i| i.get("$patch").is_none()).map(strip_directives).collect());
    }
    match lists.strategy(path, field) {
        ListStrategy::Replace => Value::Array(items.iter().map(strip_directives).collect()),
        ListStrategy::MergePrimitives => {
            let mut out = cur;
            for i in items {
                if !out.contains(i) {
                    out.push(i.clone());
                }
            }
            Value::Array(out)
        }
        ListStrategy::MergeKey(key) => {
            let mut out = cur;
            path.push(field.to_string());
            for item in items {
                let Some(kv) = item.get(&key) else {
                    out.push(strip_directives(item));
                    continue;
                };
                let pos = out.iter().position(|o| o.get(&key) == Some(kv));
                let delete = item.get("$patch").and_then(Value::as_str) == Some("delete");
                match (pos, delete) {
                    (Some(p), true) => {
                        out.remove(p);
                    }
                    (None, true) => {}
                    (Some(p), false) => {
                        if let Some(m) = merge_map(&out[p], item, path, lists) {
                            out[p] = m;
                        } else {
                            out.remove(p);
                        }
                    }
                    (None, false) => out.push(merge_map(&Value::Null, item, path, lists).unwrap_or_default()),
                }
            }
            path.pop();
            Value::Array(out)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn pod() -> Value {
        json!({"metadata": {"name": "p", "finalizers": ["a"]}, "spec": {"containers": [
            {"name": "app", "image": "nginx:1", "ports": [{"containerPort": 80}], "env": [{"name": "A", "value": "1"}]},
            {"name": "side", "image": "busybox"}
        ], "tolerations": [{"key": "x"}]}})
    }

    #[test]
    fn strategic_merge_merges_containers_by_name() {
        let out = strategic_merge(&pod(), &json!({"spec": {"containers": [{"name": "app", "image": "nginx:2"}]}})).unwrap();
        assert_eq!(out["spec"]["containers"][0]["image"], "nginx:2");
        assert_eq!(out["spec"]["containers"][0]["ports"][0]["containerPort"], 80);
        assert_eq!(out["spec"]["containers"][1]["name"], "side");
    }

    #[test]
    fn strategic_merge_appends_new_keys_and_deletes_with_directive() {
        let out =
            strategic_merge(&pod(), &json!({"spec": {"containers": [{"name": "side", "$patch": "delete"}, {"name": "new", "image": "x"}]}})).unwrap();
        let names: Vec<&str> = out["spec"]["containers"].as_array().unwrap().iter().map(|c| c["name"].as_str().unwrap()).collect();
        assert_eq!(names, ["app", "new"]);
    }

    #[test]
    fn strategic_merge_merges_env_and_ports_by_key() {
        let out = strategic_merge(
            &pod(),
            &json!({"spec": {"containers": [{"name": "app", "env": [{"name": "B", "value": "2"}], "ports": [{"containerPort": 80, "name": "http"}]}]}}),
        )
        .unwrap();
        let c = &out["spec"]["containers"][0];
        assert_eq!(c["env"].as_array().unwrap().len(), 2);
        assert_eq!(c["ports"], json!([{"containerPort": 80, "name": "http"}]));
    }

    #[test]
    fn strategic_merge_replaces_lists_without_merge_key_and_unions_finalizers() {
        let out = strategic_merge(&pod(), &json!({"metadata": {"finalizers": ["b"]}, "spec": {"tolerations": [{"key": "y"}]}})).unwrap();
        assert_eq!(out["metadata"]["finalizers"], json!(["a", "b"]));
        assert_eq!(out["spec"]["tolerations"], json!([{"key": "y"}]));
    }

    #[test]
    fn strategic_merge_null_removes_a_field() {
        let out = strategic_merge(&pod(), &json!({"metadata": {"finalizers": null}})).unwrap();
        assert!(out["metadata"].get("finalizers").is_none());
    }

    #[test]
    fn a_json_patch_that_does_not_apply_is_unprocessable_in_upstreams_generic_words() {
        let mut v = json!({"a": 1});
        let e = json_patch(&mut v, &json!([{"op": "test", "path": "/a", "value": 2}])).unwrap_err();
        assert_eq!(e.code, 422);
        assert_eq!(e.message, "the server rejected our request due to an error in our request");
        assert_eq!(e.to_status()["details"], json!({}));
        let e = json_patch(&mut v, &json!([{"op": "remove", "path": "/nope"}])).unwrap_err();
        assert_eq!((e.code, e.reason.as_str()), (422, "Invalid"));
        let e = json_patch(&mut v, &json!({"op": "nope"})).unwrap_err();
        assert_eq!(e.code, 400);
        json_patch(&mut v, &json!([{"op": "test", "path": "/a", "value": 1}, {"op": "replace", "path": "/a", "value": 3}])).unwrap();
        assert_eq!(v, json!({"a": 3}));
    }

    #[test]
    fn merge_patch_null_deletes() {
        let mut v = json!({"a": {"b": 1, "c": 2}});
        merge_patch(&mut v, &json!({"a": {"b": null}})).unwrap();
        assert_eq!(v, json!({"a": {"c": 2}}));
    }
}
