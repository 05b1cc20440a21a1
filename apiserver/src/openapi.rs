//! OpenAPI v3 (`/openapi/v3` and its documents). Every document a default kube-apiserver v1.36
//! lists (the built-in group versions, groups, `version`, ...) is served as the real server
//! answered it ([`crate::surface`]): descriptions, `x-kubernetes-*` extensions, every path and
//! its patch types (strategic merge included), so `kubectl explain`, client-side apply and
//! server-side field validation see upstream's schemas. A CRD's group version gets a document
//! computed from its schema: every PATCH operation carries `x-kubernetes-group-version-kind`
//! and the `fieldValidation` parameter (so `kubectl apply` validates server-side), and the kind
//! has a component schema tagged with its GVK. `/openapi/v2` is [`crate::openapi_v2`].

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

/// A document by its `/openapi/v3` key (`api/v1`, `apis/G/V`, `version`), or `None` if not served.
pub fn document(reg: &Registry, key: &str) -> Option<Value> {
    if let Some(doc) = crate::surface::openapi().get(key) {
        return Some(doc.clone());
    }
    let (group, version) = key.strip_prefix("apis/")?.split_once('/')?;
    custom_group_version_doc(reg, group, version)
}

/// The document of a group version CRDs define.
fn custom_group_version_doc(reg: &Registry, group: &str, version: &str) -> Option<Value> {
    let rs: Vec<Resource> = reg.all().into_iter().filter(|r| r.custom && r.group == group && r.version == version).collect();
    if rs.is_empty() {
        return None;
    }
    let mut paths = Map::new();
    let mut schemas = Map::new();
    for r in &rs {
        paths_for(r, &mut paths);
        schemas.insert(component_name(r), schema_of(r));
    }
    Some(json!({
        "openapi": "3.0.0",
        "info": {"title": "Kubernetes CRD Swagger", "version": "v0.1.0"},
        "paths": paths,
        "components": {"schemas": schemas}
    }))
}

fn hash(v: &Value) -> String {
    let mut h = std::collections::hash_map::DefaultHasher::new();
    v.to_string().hash(&mut h);
    format!("{:016X}", h.finish())
}

/// `/openapi/v3`: the index of documents (upstream's, then the group versions CRDs define),
/// each URL carrying a hash of its document.
pub fn root(reg: &Registry) -> Value {
    static BUILTIN: std::sync::OnceLock<Map<String, Value>> = std::sync::OnceLock::new();
    let mut paths = BUILTIN
        .get_or_init(|| {
            let entry = |(key, doc): (&String, &Value)| (key.clone(), json!({"serverRelativeURL": format!("/openapi/v3/{key}?hash={}", hash(doc))}));
            crate::surface::openapi().iter().map(entry).collect()
        })
        .clone();
    for r in reg.all().into_iter().filter(|r| r.custom) {
        let key = gv_key(&r.group, &r.version);
        if !paths.contains_key(&key)
            && let Some(doc) = custom_group_version_doc(reg, &r.group, &r.version)
        {
            paths.insert(key.clone(), json!({"serverRelativeURL": format!("/openapi/v3/{key}?hash={}", hash(&doc))}));
        }
    }
    json!({"paths": paths})
}
