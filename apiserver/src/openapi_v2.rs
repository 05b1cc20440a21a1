//! `/openapi/v2`, as kube-apiserver v1.36 serves it: the built-in document captured from the
//! real server ([`crate::surface`]), as JSON or as the protobuf kubectl asks for
//! (`application/com.github.proto-openapi.spec.v2@v1.0+protobuf`; kubectl's client-side
//! validation reads it for kinds it finds no PATCH path for in OpenAPI v3, such as TokenReview),
//! negotiated as upstream's kube-openapi handler does: the first acceptable type in the client's
//! order, 406 when none is. Upstream adds each CRD's schemas to the JSON document; here they are
//! added to the JSON answer (with the v3-only keywords removed, as upstream converts them), not
//! to the protobuf one (see apiserver/README.md, "Not faithful").

use crate::openapi::component_name;
use crate::resources::{Registry, Resource};
use serde_json::{Map, Value, json};

/// What the client gets: its media type and the body.
#[derive(Debug, PartialEq)]
pub enum Answer {
    Json(Value),
    Protobuf(&'static [u8]),
    /// No type the client accepts.
    NotAcceptable,
}

/// The content type of the protobuf answer (upstream answers this one to either protobuf type).
pub const PROTOBUF: &str = "application/com.github.proto-openapi.spec.v2.v1.0+protobuf";
const PROTOBUF_TYPES: [&str; 2] = ["com.github.proto-openapi.spec.v2@v1.0+protobuf", "com.github.proto-openapi.spec.v2.v1.0+protobuf"];

/// The answer to `GET /openapi/v2` with `accept` (empty: anything).
pub fn answer(reg: &Registry, accept: &str) -> Answer {
    let accept = if accept.trim().is_empty() { "*/*" } else { accept };
    let mut clauses: Vec<(f32, usize, &str, &str)> = vec![];
    for (i, clause) in accept.split(',').enumerate() {
        let mut parts = clause.split(';').map(str::trim);
        let media = parts.next().unwrap_or_default();
        let q = parts.find_map(|p| p.strip_prefix("q=")).and_then(|q| q.parse().ok()).unwrap_or(1.0);
        let (main, sub) = media.split_once('/').unwrap_or((media, ""));
        if q > 0.0 {
            clauses.push((q, i, main, sub));
        }
    }
    // Highest q first, then the more specific type (goautoneg's order), then the client's order.
    clauses.sort_by(|a, b| b.0.total_cmp(&a.0).then(specificity(b).cmp(&specificity(a))).then(a.1.cmp(&b.1)));
    for (_, _, main, sub) in clauses {
        if main != "application" && main != "*" {
            continue;
        }
        if sub == "json" || sub == "*" {
            return Answer::Json(document(reg));
        }
        if PROTOBUF_TYPES.contains(&sub) {
            return Answer::Protobuf(crate::surface::openapi_v2_protobuf());
        }
    }
    Answer::NotAcceptable
}

fn specificity(clause: &(f32, usize, &str, &str)) -> u8 {
    match (clause.2, clause.3) {
        ("*", _) => 0,
        (_, "*") => 1,
        _ => 2,
    }
}

/// The JSON document: the built-in one plus a definition per CRD version served (the kind and
/// its list).
pub fn document(reg: &Registry) -> Value {
    let mut doc = crate::surface::openapi_v2().clone();
    let custom: Vec<Resource> = reg.all().into_iter().filter(|r| r.custom && r.alias_of.is_none()).collect();
    if let Some(definitions) = doc["definitions"].as_object_mut() {
        for r in &custom {
            definitions.insert(component_name(r), kind_definition(r));
            definitions.insert(format!("{}List", component_name(r)), list_definition(r));
        }
    }
    doc
}

fn gvk(r: &Resource, kind: &str) -> Value {
    json!([{"group": r.group, "kind": kind, "version": r.version}])
}

fn kind_definition(r: &Resource) -> Value {
    let mut schema = r.schema.as_deref().map(to_v2).unwrap_or_else(|| json!({"type": "object"}));
    let map = schema.as_object_mut().expect("a converted schema is an object");
    let properties = map.entry("properties").or_insert_with(|| json!({})).as_object_mut().expect("properties");
    properties.insert("apiVersion".into(), json!({"description": "APIVersion defines the versioned schema of this representation of an object. Servers should convert recognized schemas to the latest internal value, and may reject unrecognized values. More info: https://git.k8s.io/community/contributors/devel/sig-architecture/api-conventions.md#resources", "type": "string"}));
    properties.insert("kind".into(), json!({"description": "Kind is a string value representing the REST resource this object represents. Servers may infer this from the endpoint the client submits requests to. Cannot be updated. In CamelCase. More info: https://git.k8s.io/community/contributors/devel/sig-architecture/api-conventions.md#types-kinds", "type": "string"}));
    properties.insert(
        "metadata".into(),
        json!({"$ref": "#/definitions/io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta", "description": "Standard object's metadata. More info: https://git.k8s.io/community/contributors/devel/sig-architecture/api-conventions.md#metadata"}),
    );
    map.insert("x-kubernetes-group-version-kind".into(), gvk(r, &r.kind));
    schema
}

fn list_definition(r: &Resource) -> Value {
    json!({
        "description": format!("{} is a list of {}", r.list_kind, r.kind),
        "required": ["items"],
        "type": "object",
        "properties": {
            "apiVersion": {"description": "APIVersion defines the versioned schema of this representation of an object. Servers should convert recognized schemas to the latest internal value, and may reject unrecognized values. More info: https://git.k8s.io/community/contributors/devel/sig-architecture/api-conventions.md#resources", "type": "string"},
            "items": {"description": format!("List of {}. More info: https://git.k8s.io/community/contributors/devel/sig-architecture/api-conventions.md", r.plural), "type": "array", "items": {"$ref": format!("#/definitions/{}", component_name(r))}},
            "kind": {"description": "Kind is a string value representing the REST resource this object represents. Servers may infer this from the endpoint the client submits requests to. Cannot be updated. In CamelCase. More info: https://git.k8s.io/community/contributors/devel/sig-architecture/api-conventions.md#types-kinds", "type": "string"},
            "metadata": {"$ref": "#/definitions/io.k8s.apimachinery.pkg.apis.meta.v1.ListMeta", "description": "Standard list metadata. More info: https://git.k8s.io/community/contributors/devel/sig-architecture/api-conventions.md#types-kinds"}
        },
        "x-kubernetes-group-version-kind": gvk(r, &r.list_kind),
    })
}

/// A CRD's OpenAPI v3 schema as upstream publishes it in v2 (`ToStructuralOpenAPIV2`): v2
/// has no `nullable`, `anyOf`, `oneOf` or `not`, and a value that may be null or of two types
/// (`nullable`, `x-kubernetes-int-or-string`) loses its type, so that a client validating
/// with v2 does not refuse what the server accepts.
pub fn to_v2(schema: &Value) -> Value {
    let Some(map) = schema.as_object() else { return schema.clone() };
    let mut out = Map::new();
    let untyped = map.get("nullable") == Some(&Value::Bool(true)) || map.get("x-kubernetes-int-or-string") == Some(&Value::Bool(true));
    for (k, v) in map {
        match k.as_str() {
            "nullable" | "anyOf" | "oneOf" | "not" | "allOf" => {}
            "type" | "items" | "properties" | "additionalProperties" if untyped => {}
            "properties" => {
                let props = v.as_object().into_iter().flatten().map(|(name, s)| (name.clone(), to_v2(s))).collect();
                out.insert(k.clone(), Value::Object(props));
            }
            "items" | "additionalProperties" if v.is_object() => {
                out.insert(k.clone(), to_v2(v));
            }
            _ => {
                out.insert(k.clone(), v.clone());
            }
        }
    }
    Value::Object(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_accept_header_picks_json_protobuf_or_nothing_as_upstream() {
        let reg = Registry::default();
        assert!(matches!(answer(&reg, ""), Answer::Json(_)));
        assert!(matches!(answer(&reg, "application/json"), Answer::Json(_)));
        assert!(matches!(answer(&reg, "application/com.github.proto-openapi.spec.v2@v1.0+protobuf"), Answer::Protobuf(_)));
        assert!(matches!(answer(&reg, "application/com.github.proto-openapi.spec.v2.v1.0+protobuf, application/json"), Answer::Protobuf(_)));
        assert!(matches!(answer(&reg, "application/json;q=0.5, application/com.github.proto-openapi.spec.v2.v1.0+protobuf"), Answer::Protobuf(_)));
        assert_eq!(answer(&reg, "application/yaml"), Answer::NotAcceptable);
    }

    #[test]
    fn a_crd_schema_loses_what_openapi_v2_cannot_say() {
        let v3 = json!({"type": "object", "properties": {
            "a": {"type": "string", "nullable": true},
            "b": {"x-kubernetes-int-or-string": true, "anyOf": [{"type": "integer"}, {"type": "string"}]},
            "c": {"type": "array", "items": {"type": "integer", "format": "int32", "minimum": 0}}
        }});
        assert_eq!(
            to_v2(&v3),
            json!({"type": "object", "properties": {
                "a": {},
                "b": {"x-kubernetes-int-or-string": true},
                "c": {"type": "array", "items": {"type": "integer", "format": "int32", "minimum": 0}}
            }})
        );
    }
}
