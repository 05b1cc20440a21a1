//! OpenAPI v3 schemas of the built-in kinds: upstream's own, from the committed OpenAPI
//! documents of kube-apiserver v1.36 ([`crate::surface`]). Used to drop unknown fields from
//! built-in objects as upstream's decoding does (or refuse them under `fieldValidation=Strict`,
//! which kubectl sends), and (with the `required` lists) to tell which zero values the Go types
//! keep when a protobuf body is decoded.

use serde_json::{Map, Value};
use std::collections::HashMap;
use std::sync::OnceLock;

const REF_PREFIX: &str = "#/components/schemas/";

struct Schemas {
    /// Component name by `<apiVersion>/<Kind>` (e.g. `v1/Pod`, `apps/v1/Deployment`), from each
    /// component's `x-kubernetes-group-version-kind`.
    roots: HashMap<String, String>,
    defs: &'static Map<String, Value>,
}

fn schemas() -> &'static Schemas {
    static S: OnceLock<Schemas> = OnceLock::new();
    S.get_or_init(|| {
        let defs = crate::surface::components();
        let mut roots = HashMap::new();
        for (name, schema) in defs {
            for gvk in schema["x-kubernetes-group-version-kind"].as_array().into_iter().flatten() {
                let (g, v, k) = (gvk["group"].as_str().unwrap_or(""), gvk["version"].as_str().unwrap_or(""), gvk["kind"].as_str().unwrap_or(""));
                roots.entry(key(g, v, k)).or_insert_with(|| name.clone());
            }
        }
        Schemas { roots, defs }
    })
}

/// Roots are keyed `<apiVersion>/<Kind>`, e.g. `v1/Pod`, `apps/v1/Deployment`.
fn key(group: &str, version: &str, kind: &str) -> String {
    if group.is_empty() { format!("{version}/{kind}") } else { format!("{group}/{version}/{kind}") }
}

/// Whether a built-in kind has a schema.
#[cfg(test)]
fn has(group: &str, version: &str, kind: &str) -> bool {
    schemas().roots.contains_key(&key(group, version, kind))
}

/// The component name of a built-in kind's schema, e.g. `io.k8s.api.core.v1.Pod`.
pub fn component_name(group: &str, version: &str, kind: &str) -> Option<String> {
    schemas().roots.get(&key(group, version, kind)).cloned()
}

/// A schema by component name.
pub fn component(name: &str) -> Option<&'static Value> {
    schemas().defs.get(name)
}

/// A schema by component name, with the name as the schemas hold it.
pub fn component_named(name: &str) -> Option<(&'static str, &'static Value)> {
    schemas().defs.get_key_value(name).map(|(n, s)| (n.as_str(), s))
}

/// The component a node refers to (`$ref`, or `allOf` of one `$ref`), resolved.
pub fn component_by_ref(node: &Value) -> Option<(&'static str, &'static Value)> {
    let r = node
        .get("$ref")
        .or_else(|| node.get("allOf").and_then(Value::as_array).filter(|a| a.len() == 1).and_then(|a| a[0].get("$ref")))
        .and_then(Value::as_str)?
        .strip_prefix(REF_PREFIX)?;
    let (name, s) = component_named(r)?;
    match resolve_named(s) {
        (Some(further), s) => Some((further, s)),
        (None, s) => Some((name, s)),
    }
}

/// Component names reachable from `name` (itself included).
#[cfg(test)]
fn reachable(name: &str) -> std::collections::BTreeSet<String> {
    fn refs(v: &Value, out: &mut Vec<String>) {
        match v {
            Value::Object(m) => {
                if let Some(r) = m.get("$ref").and_then(Value::as_str).and_then(|r| r.strip_prefix(REF_PREFIX)) {
                    out.push(r.to_string());
                }
                m.values().for_each(|c| refs(c, out));
            }
            Value::Array(a) => a.iter().for_each(|c| refs(c, out)),
            _ => {}
        }
    }
    let mut seen = std::collections::BTreeSet::new();
    let mut todo = vec![name.to_string()];
    while let Some(n) = todo.pop() {
        if !seen.insert(n.clone()) {
            continue;
        }
        if let Some(s) = component(&n) {
            refs(s, &mut todo);
        }
    }
    seen
}

/// Follow `$ref` and single-element `allOf: [{$ref}]`.
fn resolve(s: &'static Value) -> &'static Value {
    resolve_named(s).1
}

/// Follow `$ref` and single-element `allOf: [{$ref}]`, with the component name reached (None
/// when `s` refers to nothing).
pub fn resolve_named(mut s: &'static Value) -> (Option<&'static str>, &'static Value) {
    let mut name = None;
    for _ in 0..32 {
        let target = s
            .get("$ref")
            .or_else(|| s.get("allOf").and_then(Value::as_array).filter(|a| a.len() == 1).and_then(|a| a[0].get("$ref")))
            .and_then(Value::as_str)
            .and_then(|r| r.strip_prefix(REF_PREFIX))
            .and_then(|n| schemas().defs.get_key_value(n));
        match target {
            Some((n, t)) => (name, s) = (Some(n.as_str()), t),
            None => return (name, s),
        }
    }
    (name, s)
}

/// `path` is a buffer (the dotted path of `v`), restored on return: the walk formats no
/// path and copies no key unless a field is dropped.
fn prune_at(s: &'static Value, v: &mut Value, path: &mut String, out: &mut Vec<String>) {
    let s = resolve(s);
    if s.get("x-kubernetes-preserve-unknown-fields").and_then(Value::as_bool) == Some(true)
        || s.get("x-kubernetes-int-or-string").and_then(Value::as_bool) == Some(true)
    {
        return;
    }
    match v {
        Value::Object(m) => {
            let props = s.get("properties").and_then(Value::as_object);
            let additional = s.get("additionalProperties").filter(|a| a.is_object());
            if props.is_none() && additional.is_none() {
                return; // free-form (RawExtension, FieldsV1, JSON)
            }
            let mut unknown = Vec::new();
            for (k, child) in m.iter_mut() {
                let len = path.len();
                if !path.is_empty() {
                    path.push('.');
                }
                path.push_str(k);
                match props.and_then(|p| p.get(k)).or(additional) {
                    Some(cs) => prune_at(cs, child, path, out),
                    None => {
                        unknown.push(k.clone());
                        out.push(path.clone());
                    }
                }
                path.truncate(len);
            }
            for k in unknown {
                m.remove(&k);
            }
        }
        Value::Array(items) => {
            if let Some(is) = s.get("items") {
                for (i, item) in items.iter_mut().enumerate() {
                    let len = path.len();
                    path.push_str(&format!("[{i}]"));
                    prune_at(is, item, path, out);
                    path.truncate(len);
                }
            }
        }
        _ => {}
    }
}

/// Remove fields the built-in kind does not have; returns their paths (e.g.
/// `spec.containers[0].imagee`). Kinds without a schema are left alone.
pub fn prune(group: &str, version: &str, kind: &str, obj: &mut Value) -> Vec<String> {
    let mut out = vec![];
    if let Some(root) = schemas().roots.get(&key(group, version, kind)).and_then(|name| component(name)) {
        prune_at(root, obj, &mut String::new(), &mut out);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn unknown_pod_fields_are_found_and_dropped() {
        let mut pod = json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p", "labels": {"a": "b"}, "bogus": 1},
            "spec": {"containers": [{"name": "c", "image": "i", "imagee": "typo", "resources": {"limits": {"cpu": "1"}}, "ports": [{"containerPort": 80}]}]}});
        let pruned = prune("", "v1", "Pod", &mut pod);
        assert_eq!(pruned, ["metadata.bogus", "spec.containers[0].imagee"]);
        assert_eq!(pod["spec"]["containers"][0]["resources"]["limits"]["cpu"], "1");
        assert_eq!(pod["metadata"]["labels"]["a"], "b");
    }

    #[test]
    fn free_form_fields_are_kept() {
        let mut cr = json!({"metadata": {"name": "r"}, "data": {"anything": {"goes": [1, 2]}}, "revision": 1});
        assert!(prune("apps", "v1", "ControllerRevision", &mut cr).is_empty());
        assert_eq!(component_name("", "v1", "Pod").as_deref(), Some("io.k8s.api.core.v1.Pod"));
        assert!(reachable("io.k8s.api.core.v1.Pod").contains("io.k8s.api.core.v1.Container"));
    }

    #[test]
    fn every_served_built_in_kind_has_a_schema() {
        let missing: Vec<String> = crate::resources::builtins()
            .iter()
            .filter(|r| !has(&r.group, &r.version, &r.kind))
            .map(|r| format!("{}/{}", r.api_version(), r.kind))
            .collect();
        assert!(missing.is_empty(), "regenerate apiserver/surface (`cargo xtask api-surface`): {missing:?}");
    }
}
