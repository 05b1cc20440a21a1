//! The Memcached kind (`cache.example.com/v1alpha1`), as the operator-sdk
//! Go tutorial's `api/v1alpha1/memcached_types.go` defines it.

use operator_plugin_sdk::prelude::*;

/// The tutorial's validation: `+kubebuilder:validation:Minimum=1`,
/// `Maximum=5`, `ExclusiveMaximum=false`.
pub const MIN_SIZE: i32 = 1;
pub const MAX_SIZE: i32 = 5;
/// memcached's own default port, what the tutorial's sample sets.
pub const DEFAULT_PORT: i32 = 11211;

/// MemcachedSpec defines the desired state of Memcached.
#[derive(CustomResource, JsonSchema, Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
#[kube(
    group = "cache.example.com",
    version = "v1alpha1",
    kind = "Memcached",
    namespaced,
    status = "MemcachedStatus",
    doc = "Memcached is the Schema for the memcacheds API (the operator-sdk tutorial's)."
)]
#[kube(crates(
    kube_core = "::operator_plugin_sdk::kube_core",
    k8s_openapi = "::operator_plugin_sdk::k8s_openapi",
    schemars = "::operator_plugin_sdk::schemars",
    serde_json = "::operator_plugin_sdk::serde_json"
))]
#[serde(rename_all = "camelCase")]
pub struct MemcachedSpec {
    /// Size defines the number of Memcached instances.
    #[schemars(range(min = 1, max = 5))]
    pub size: i32,
    /// Port defines the port that will be used to init the container with the image.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1, max = 65535))]
    pub container_port: Option<i32>,
}

/// MemcachedStatus defines the observed state of Memcached.
#[derive(JsonSchema, Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct MemcachedStatus {
    /// The names of the memcached Pods (the Pods the Deployment's selector picks).
    #[serde(default)]
    pub nodes: Vec<String>,
    /// Memcached.status.conditions.type are: "Available" and "Degraded".
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub conditions: Vec<Condition>,
}

impl MemcachedSpec {
    pub fn port(&self) -> i32 {
        self.container_port.unwrap_or(DEFAULT_PORT)
    }
}

/// The CRD as the derive generates it. The Wasm build embeds the checked-in
/// `crd.json` instead (see the manifest), which a test keeps equal to this:
/// generating it at run time would link schemars into the plugin.
#[cfg(not(target_family = "wasm"))]
pub fn crd() -> operator_plugin_sdk::serde_json::Value {
    operator_plugin_sdk::crd::generated::<Memcached>()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `crd.json` (what the Wasm build embeds) is what the derive generates.
    /// `UPDATE_CRD=1 cargo test -p memcached crd` rewrites it.
    #[test]
    fn the_embedded_crd_json_is_the_generated_crd() {
        operator_plugin_sdk::testing::assert_crd_file_matches(&crd(), concat!(env!("CARGO_MANIFEST_DIR"), "/crd.json"));
    }

    #[test]
    fn the_crd_validates_size_as_the_tutorial_does() {
        let crd = crd();
        let spec = &crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["spec"];
        assert_eq!(spec["properties"]["size"]["minimum"].as_f64(), Some(1.0));
        assert_eq!(spec["properties"]["size"]["maximum"].as_f64(), Some(5.0));
        assert_eq!(spec["required"], operator_plugin_sdk::json!(["size"]));
        assert_eq!(crd["spec"]["names"]["listKind"], "MemcachedList");
    }
}
