//! OpenAPI v3 (`/openapi/v3` and per group-version documents). Enough for kubectl: every PATCH
//! operation carries `x-kubernetes-group-version-kind` and the `fieldValidation` parameter (so
//! `kubectl apply` validates server-side instead of needing `/openapi/v2`), and every kind has a
//! component schema tagged with its GVK (so `kubectl explain` works; CRDs use their own schema,
//! built-ins the generated ones of [`crate::builtin_schema`]). `/openapi/v2` is not served (404),
//! which kubectl tolerates.
//!
//! Built-in PATCH operations deliberately do not list `application/strategic-merge-patch+json`:
//! kubectl then computes client-side apply patches from its compiled-in types, which is exactly
//! what a full schema would give it.

use crate::resources::{Registry, Resource};
use serde_json::{Map, Value, json};
use std::hash::{Hash, Hasher};

/// Path key used in `/openapi/v3` for a group version: `api/v1` or `apis/G/V`.
pub fn gv_key(group: &str, version: &str) -> String {
    if group.is_empty() { format!("api/{version}") } else { format!("apis/{group}/{version}") }
}

/// The schema component name of a kind.
pub fn component_name(r: &Resource) -> String {
    if let Some(name) = (!r.custom).then(|| crate::builtin_schema::component_name(&r.group, &r.version, &r.kind)).flatten() {
        return name;
    }
    if r.custom {
        let rev: Vec<&str> = r.group.split('.').rev().collect();
        format!("{}.{}.{}", rev.join("."), r.version, r.kind)
    } else {
        let g = if r.group.is_empty() { "core".to_string() } else { r.group.split('.').next().unwrap_or_default().to_string() };
        format!("io.k8s.api.{g}.{}.{}", r.version, r.kind)
    }
}

fn gvk(r: &Resource) -> Value {
    json!({"group": r.group, "version": r.version, "kind": r.kind})
}

fn schema_of(r: &Resource) -> Value {
    if !r.custom
        && let Some(b) = crate::builtin_schema::component(&component_name(r))
    {
        let mut s = b.clone();
        s["x-kubernetes-group-version-kind"] = json!([gvk(r)]);
        return s;
    }
    let mut s = match &r.schema {
        Some(s) => (**s).clone(),
        None => json!({
            "type": "object",
            "description": format!("{} is a built-in {} resource served by the embedded API server.", r.kind, r.api_version()),
            "properties": {
                "spec": {"type": "object", "description": "Desired state.", "x-kubernetes-preserve-unknown-fields": true},
                "status": {"type": "object", "description": "Observed state.", "x-kubernetes-preserve-unknown-fields": true}
            }
        }),
    };
    let props = s.as_object_mut().expect("schema object").entry("properties").or_insert_with(|| json!({}));
    let p = props.as_object_mut().expect("properties");
    p.entry("apiVersion").or_insert_with(|| json!({"type": "string", "description": "APIVersion defines the versioned schema of this representation of an object. Servers should convert recognized schemas to the latest internal value, and may reject unrecognized values."}));
    p.entry("kind").or_insert_with(|| json!({"type": "string", "description": "Kind is a string value representing the REST resource this object represents. Servers may infer this from the endpoint the client submits requests to. Cannot be updated. In CamelCase."}));
    p.entry("metadata").or_insert_with(|| json!({"type": "object", "description": "Standard object's metadata."}));
    s["x-kubernetes-group-version-kind"] = json!([gvk(r)]);
    s
}

fn params() -> Value {
    json!([
        {"name": "dryRun", "in": "query", "schema": {"type": "string", "uniqueItems": true}},
        {"name": "fieldManager", "in": "query", "schema": {"type": "string", "uniqueItems": true}},
        {"name": "fieldValidation", "in": "query", "schema": {"type": "string", "uniqueItems": true}},
        {"name": "force", "in": "query", "schema": {"type": "boolean", "uniqueItems": true}}
    ])
}

fn paths_for(r: &Resource, paths: &mut Map<String, Value>) {
    let prefix = if r.group.is_empty() { format!("/api/{}", r.version) } else { format!("/apis/{}/{}", r.group, r.version) };
    let base = if r.namespaced { format!("{prefix}/namespaces/{{namespace}}/{}", r.plural) } else { format!("{prefix}/{}", r.plural) };
    let reference = json!({"$ref": format!("#/components/schemas/{}", component_name(r))});
    let ok = json!({"200": {"description": "OK", "content": {"application/json": {"schema": reference}}}});
    let mut patch_types = Map::new();
    for t in ["application/json-patch+json", "application/merge-patch+json", "application/apply-patch+yaml"] {
        patch_types.insert(t.into(), json!({"schema": {"type": "object"}}));
    }
    let mut item = json!({
        "get": {"operationId": format!("read{}", r.kind), "x-kubernetes-action": "get", "x-kubernetes-group-version-kind": gvk(r), "responses": ok},
        "put": {"operationId": format!("replace{}", r.kind), "x-kubernetes-action": "put", "x-kubernetes-group-version-kind": gvk(r), "parameters": params(),
                "requestBody": {"content": {"application/json": {"schema": reference}}}, "responses": ok},
        "patch": {"operationId": format!("patch{}", r.kind), "x-kubernetes-action": "patch", "x-kubernetes-group-version-kind": gvk(r), "parameters": params(),
                  "requestBody": {"content": patch_types}, "responses": ok},
        "delete": {"operationId": format!("delete{}", r.kind), "x-kubernetes-action": "delete", "x-kubernetes-group-version-kind": gvk(r), "responses": {"200": {"description": "OK"}}},
        "parameters": [{"name": "name", "in": "path", "required": true, "schema": {"type": "string"}}]
    });
    if r.namespaced {
        item["parameters"]
            .as_array_mut()
            .expect("array")
            .push(json!({"name": "namespace", "in": "path", "required": true, "schema": {"type": "string"}}));
    }
    paths.insert(format!("{base}/{{name}}"), item);
    paths.insert(
        base,
        json!({
            "get": {"operationId": format!("list{}", r.kind), "x-kubernetes-action": "list", "x-kubernetes-group-version-kind": gvk(r), "responses": {"200": {"description": "OK"}}},
            "post": {"operationId": format!("create{}", r.kind), "x-kubernetes-action": "post", "x-kubernetes-group-version-kind": gvk(r), "parameters": params(),
                     "requestBody": {"content": {"application/json": {"schema": reference}}}, "responses": ok}
        }),
    );
}

/// The document for one group version, or `None` if not served.
pub fn group_version_doc(reg: &Registry, group: &str, version: &str) -> Option<Value> {
    let rs: Vec<Resource> = reg.all().into_iter().filter(|r| r.group == group && r.version == version).collect();
    if rs.is_empty() {
        return None;
    }
    let mut paths = Map::new();
    let mut schemas = Map::new();
    for r in &rs {
        paths_for(r, &mut paths);
        if !r.custom {
            for dep in crate::builtin_schema::reachable(&component_name(r)) {
                if let Some(d) = crate::builtin_schema::component(&dep) {
                    schemas.entry(dep).or_insert_with(|| d.clone());
                }
            }
        }
        schemas.insert(component_name(r), schema_of(r));
    }
    Some(json!({
        "openapi": "3.0.0",
        "info": {"title": "Kubernetes", "version": crate::discovery::GIT_VERSION},
        "paths": paths,
        "components": {"schemas": schemas}
    }))
}

fn hash(v: &Value) -> String {
    let mut h = std::collections::hash_map::DefaultHasher::new();
    v.to_string().hash(&mut h);
    format!("{:016X}", h.finish())
}

/// `/openapi/v3`: the index of group-version documents.
pub fn root(reg: &Registry) -> Value {
    let mut paths = Map::new();
    let mut gvs: Vec<(String, String)> = vec![];
    for r in reg.all() {
        if !gvs.contains(&(r.group.clone(), r.version.clone())) {
            gvs.push((r.group.clone(), r.version.clone()));
        }
    }
    for (g, v) in gvs {
        let key = gv_key(&g, &v);
        let doc = group_version_doc(reg, &g, &v).unwrap_or_default();
        paths.insert(key.clone(), json!({"serverRelativeURL": format!("/openapi/v3/{key}?hash={}", hash(&doc))}));
    }
    json!({"paths": paths})
}
