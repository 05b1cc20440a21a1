//! The API surface of kube-apiserver v1.36.3, as `cargo xtask api-surface` captured it from the
//! real server into `surface/` (see the README's "The API surface"): `/version`, aggregated
//! discovery and every built-in `APIResourceList`, the OpenAPI v3 documents, `/openapi/v2` (JSON
//! and protobuf) and each resource's Table columns. The built-in resources
//! ([`crate::resources`]), discovery, OpenAPI, the built-in schemas and the Table column
//! definitions are served from here, so they are upstream's and not restated; the fidelity test
//! fails when these files drift from the real server.

use serde_json::{Map, Value};
use std::collections::BTreeMap;
use std::sync::OnceLock;

const VERSION: &str = include_str!("../surface/version.json");
const DISCOVERY: &str = include_str!("../surface/discovery.json");
const TABLES: &str = include_str!("../surface/tables.json");
const OPENAPI_GZ: &[u8] = include_bytes!("../surface/openapi-v3.json.gz");
const OPENAPI_V2_GZ: &[u8] = include_bytes!("../surface/openapi-v2.json.gz");
const OPENAPI_V2_PROTOBUF_GZ: &[u8] = include_bytes!("../surface/openapi-v2.pb.gz");

fn parse(name: &str, text: &str) -> Value {
    serde_json::from_str(text).unwrap_or_else(|e| panic!("apiserver/surface/{name} is not JSON ({e}): regenerate it with `cargo xtask api-surface`"))
}

/// `/version` as upstream answers it.
pub fn version() -> &'static Value {
    static V: OnceLock<Value> = OnceLock::new();
    V.get_or_init(|| parse("version.json", VERSION))
}

/// `gitVersion` of the captured server, e.g. `v1.36.3`.
#[cfg(test)]
fn git_version() -> &'static str {
    version()["gitVersion"].as_str().unwrap_or("v0.0.0")
}

fn discovery() -> &'static Value {
    static V: OnceLock<Value> = OnceLock::new();
    V.get_or_init(|| parse("discovery.json", DISCOVERY))
}

/// Aggregated discovery (`apidiscovery.k8s.io/v2 APIGroupDiscoveryList`) of `/api` (legacy) or `/apis`.
pub fn aggregated(legacy: bool) -> &'static Value {
    &discovery()[if legacy { "api" } else { "apis" }]
}

/// The `APIResourceList` of a built-in group version (`api/v1`, `apis/apps/v1`).
pub fn resource_list(gv_key: &str) -> Option<&'static Value> {
    discovery()["resourceLists"].get(gv_key)
}

/// The Table columns upstream answers for a resource (`""` is the core group).
pub fn table_columns(group: &str, resource: &str) -> Option<&'static [Value]> {
    static V: OnceLock<Value> = OnceLock::new();
    V.get_or_init(|| parse("tables.json", TABLES)).get(format!("{group}/{resource}"))?.as_array().map(Vec::as_slice)
}

/// The OpenAPI v3 documents by `api/v1` / `apis/G/V`.
pub fn openapi() -> &'static BTreeMap<String, Value> {
    static V: OnceLock<BTreeMap<String, Value>> = OnceLock::new();
    V.get_or_init(|| {
        let mut text = String::new();
        std::io::Read::read_to_string(&mut flate2::read::GzDecoder::new(OPENAPI_GZ), &mut text)
            .expect("apiserver/surface/openapi-v3.json.gz is gzipped UTF-8: regenerate it with `cargo xtask api-surface`");
        match parse("openapi-v3.json.gz", &text) {
            Value::Object(m) => m.into_iter().collect(),
            _ => BTreeMap::new(),
        }
    })
}

fn gunzip(name: &str, gz: &[u8]) -> Vec<u8> {
    let mut out = Vec::new();
    std::io::Read::read_to_end(&mut flate2::read::GzDecoder::new(gz), &mut out)
        .unwrap_or_else(|e| panic!("apiserver/surface/{name} is not gzipped ({e}): regenerate it with `cargo xtask api-surface`"));
    out
}

/// `/openapi/v2` of the server with no CRD installed, as JSON.
pub fn openapi_v2() -> &'static Value {
    static V: OnceLock<Value> = OnceLock::new();
    V.get_or_init(|| {
        let text = String::from_utf8(gunzip("openapi-v2.json.gz", OPENAPI_V2_GZ)).expect("openapi-v2.json.gz is UTF-8");
        parse("openapi-v2.json.gz", &text)
    })
}

/// `/openapi/v2` of the server with no CRD installed, as protobuf (gnostic's `openapi.v2.Document`).
pub fn openapi_v2_protobuf() -> &'static [u8] {
    static V: OnceLock<Vec<u8>> = OnceLock::new();
    V.get_or_init(|| gunzip("openapi-v2.pb.gz", OPENAPI_V2_PROTOBUF_GZ))
}

/// Every component schema of the OpenAPI documents (component names are global upstream:
/// `io.k8s.api.core.v1.Pod` is the same schema in every document that holds it).
pub fn components() -> &'static Map<String, Value> {
    static V: OnceLock<Map<String, Value>> = OnceLock::new();
    V.get_or_init(|| {
        let mut all = Map::new();
        for doc in openapi().values() {
            for (name, schema) in doc["components"]["schemas"].as_object().into_iter().flatten() {
                all.entry(name.clone()).or_insert_with(|| schema.clone());
            }
        }
        all
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_committed_surface_is_a_v1_36_server() {
        assert!(git_version().starts_with("v1.36."), "{}", git_version());
        assert_eq!(version()["minor"], "36");
        assert!(resource_list("api/v1").is_some());
        assert!(openapi().contains_key("apis/apps/v1"));
        assert!(components().contains_key("io.k8s.api.core.v1.Pod"));
        assert_eq!(openapi_v2()["swagger"], "2.0");
        assert!(openapi_v2()["definitions"].get("io.k8s.api.authentication.v1.TokenReview").is_some());
        assert!(!openapi_v2_protobuf().is_empty());
        let pods = table_columns("", "pods").expect("pods' columns");
        assert!(pods.iter().any(|c| c["name"] == "Ready" && c["description"].as_str().is_some_and(|d| !d.is_empty())));
    }
}
