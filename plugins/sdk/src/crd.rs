//! A plugin's CustomResourceDefinition: generated from the
//! `#[derive(CustomResource, JsonSchema)]` types, or embedded from a
//! checked-in `crd.json` that a test keeps equal to the generated one.
//!
//! Generating at run time links schemars and kube-derive's CRD assembly into
//! the Wasm component (about +0.6 MB, +40% gzipped) for a value that never
//! changes after the build. The embedded form costs only the JSON text:
//!
//! ```ignore
//! fn manifest() -> Manifest {
//!     Manifest::for_parent_with_crd::<Memcached>("memcached", env!("CARGO_PKG_VERSION"), embedded_crd!())
//! }
//!
//! #[test]
//! fn crd_json_is_the_generated_crd() {
//!     // `UPDATE_CRD=1 cargo test` rewrites crd.json.
//!     operator_plugin_sdk::testing::assert_crd_file_matches(
//!         &operator_plugin_sdk::crd::generated::<Memcached>(),
//!         concat!(env!("CARGO_MANIFEST_DIR"), "/crd.json"),
//!     );
//! }
//! ```

use kube_core::{CustomResourceExt, Resource};
use serde_json::Value;

/// The CRD of `K` as the derive generates it, with `listKind` written out.
pub fn generated<K>() -> Value
where
    K: Resource<DynamicType = ()> + CustomResourceExt,
{
    let mut crd = serde_json::to_value(K::crd()).expect("a CustomResourceDefinition serializes");
    // kube-derive leaves listKind to the API server's default; written out,
    // as controller-gen does, so every server reads the same CRD.
    if crd["spec"]["names"].get("listKind").is_none() {
        crd["spec"]["names"]["listKind"] = Value::String(format!("{}List", K::kind(&())));
    }
    crd
}

/// Reads an embedded CRD (see [`embedded_crd!`](crate::embedded_crd)).
///
/// # Panics
/// When `text` is not JSON or not a CRD of `K`: the plugin was built with a
/// wrong `crd.json`, which the freshness test reports before any build ships.
pub fn from_json<K: Resource<DynamicType = ()>>(text: &str) -> Value {
    let crd: Value = serde_json::from_str(text).unwrap_or_else(|e| panic!("the embedded crd.json is not JSON: {e}"));
    let (group, kind) = (K::group(&()), K::kind(&()));
    let names = (crd["spec"]["group"].as_str(), crd["spec"]["names"]["kind"].as_str());
    assert!(
        names == (Some(group.as_ref()), Some(kind.as_ref())),
        "the embedded crd.json defines {names:?}, not {group} {kind}: regenerate it with UPDATE_CRD=1 cargo test"
    );
    crd
}

/// The annotation a checked-in `crd.json` carries with the
/// [`types_stamp`] of the source file its types are in, so a build can tell
/// that the file was generated from other types without running them (the
/// `host new` scaffold's build script refuses such a build).
pub const TYPES_STAMP_ANNOTATION: &str = "operator-host.dev/generated-from-types";

/// The stamp of a types source file: FNV-1a (64 bits) of its text with line
/// ends as `\n`, as `fnv1a64:<16 hex digits>`. Not a security measure: it
/// tells a stale `crd.json` from a fresh one. A build script can compute it
/// with no dependency:
///
/// ```
/// assert_eq!(operator_plugin_sdk::crd::types_stamp(""), "fnv1a64:cbf29ce484222325");
/// assert_eq!(operator_plugin_sdk::crd::types_stamp("a\r\nb"), operator_plugin_sdk::crd::types_stamp("a\nb"));
/// ```
pub fn types_stamp(source: &str) -> String {
    let hash = source.replace("\r\n", "\n").bytes().fold(0xcbf2_9ce4_8422_2325_u64, |h, b| (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3));
    format!("fnv1a64:{hash:016x}")
}

/// `crd` with [`TYPES_STAMP_ANNOTATION`] set to the stamp of `types_source`.
pub fn stamped(mut crd: Value, types_source: &str) -> Value {
    let metadata = crd.as_object_mut().and_then(|o| o.get_mut("metadata")).and_then(Value::as_object_mut).expect("a CRD has metadata");
    let annotations = metadata.entry("annotations").or_insert_with(|| Value::Object(Default::default()));
    annotations[TYPES_STAMP_ANNOTATION] = Value::String(types_stamp(types_source));
    crd
}

/// The text of the crate's checked-in `crd.json` (next to its
/// `Cargo.toml`), for [`Manifest::for_parent_with_crd`](crate::Manifest::for_parent_with_crd).
#[macro_export]
macro_rules! embedded_crd {
    () => {
        include_str!(concat!(env!("CARGO_MANIFEST_DIR"), "/crd.json"))
    };
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::core::v1::ConfigMap;
    use serde_json::json;

    #[test]
    fn an_embedded_crd_must_be_json_of_the_parents_kind() {
        let crd = json!({"spec": {"group": "", "names": {"kind": "ConfigMap"}}});
        assert_eq!(from_json::<ConfigMap>(&crd.to_string()), crd);
        let other = json!({"spec": {"group": "example.com", "names": {"kind": "Other"}}}).to_string();
        assert!(std::panic::catch_unwind(|| from_json::<ConfigMap>(&other)).is_err());
        assert!(std::panic::catch_unwind(|| from_json::<ConfigMap>("{")).is_err());
    }
}
