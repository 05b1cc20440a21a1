//! The Website kind (`web.example.com/v1alpha1`): how many nginx replicas
//! serve which page, and what the cluster shows of them.

use operator_plugin_sdk::prelude::*;

/// `spec.replicas` bounds, checked by the CRD schema and by `validate`.
pub const MIN_REPLICAS: i32 = 1;
pub const MAX_REPLICAS: i32 = 10;
/// The image when `spec.image` is not set.
pub const DEFAULT_IMAGE: &str = "nginx:1.27-alpine";

/// A static website served by nginx.
#[derive(CustomResource, JsonSchema, Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
#[kube(
    group = "web.example.com",
    version = "v1alpha1",
    kind = "Website",
    shortname = "ws",
    namespaced,
    status = "WebsiteStatus",
    doc = "A static website: its page in a ConfigMap, nginx Pods of a Deployment serving it, and a Service in front."
)]
#[kube(scale(spec_replicas_path = ".spec.replicas", status_replicas_path = ".status.replicas", label_selector_path = ".status.selector"))]
#[kube(printcolumn = r#"{"name":"Desired","type":"integer","jsonPath":".spec.replicas","priority":0,"description":"Desired replicas"}"#)]
#[kube(printcolumn = r#"{"name":"Ready","type":"integer","jsonPath":".status.readyReplicas","priority":0,"description":"Ready replicas"}"#)]
#[kube(crates(
    kube_core = "::operator_plugin_sdk::kube_core",
    k8s_openapi = "::operator_plugin_sdk::k8s_openapi",
    schemars = "::operator_plugin_sdk::schemars",
    serde_json = "::operator_plugin_sdk::serde_json"
))]
#[serde(rename_all = "camelCase")]
pub struct WebsiteSpec {
    /// How many nginx Pods serve the site.
    #[schemars(range(min = 1, max = 10))]
    pub replicas: i32,
    /// The container image serving `content` from `/usr/share/nginx/html`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub image: Option<String>,
    /// The page served as `index.html`.
    pub content: String,
}

/// What the Website's Deployment reports.
#[derive(JsonSchema, Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct WebsiteStatus {
    /// Pods the Deployment runs (the scale subresource's `status.replicas`).
    #[serde(default)]
    pub replicas: i32,
    /// Pods that are Ready.
    #[serde(default)]
    pub ready_replicas: i32,
    /// The Pods' label selector in string form, for the scale subresource.
    #[serde(default)]
    pub selector: String,
    /// `Available` (the Deployment's) and `Ready` (every replica is ready).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub conditions: Vec<Condition>,
}

impl WebsiteSpec {
    pub fn image(&self) -> &str {
        self.image.as_deref().filter(|i| !i.is_empty()).unwrap_or(DEFAULT_IMAGE)
    }
}

/// The CRD as the derive generates it. The Wasm build embeds the checked-in
/// `crd.json` instead (see the manifest), which a test keeps equal to this:
/// generating it at run time would link schemars into the plugin.
#[cfg(not(target_family = "wasm"))]
pub fn crd() -> operator_plugin_sdk::serde_json::Value {
    operator_plugin_sdk::crd::generated::<Website>()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `crd.json` (what the Wasm build embeds) is what the derive generates.
    /// `UPDATE_CRD=1 cargo test -p website crd` rewrites it.
    #[test]
    fn the_embedded_crd_json_is_the_generated_crd() {
        operator_plugin_sdk::testing::assert_crd_file_matches(&crd(), concat!(env!("CARGO_MANIFEST_DIR"), "/crd.json"));
    }

    #[test]
    fn the_crd_bounds_replicas_and_offers_status_and_scale() {
        let crd = crd();
        let version = &crd["spec"]["versions"][0];
        let replicas = &version["schema"]["openAPIV3Schema"]["properties"]["spec"]["properties"]["replicas"];
        assert_eq!((replicas["minimum"].as_f64(), replicas["maximum"].as_f64()), (Some(1.0), Some(10.0)));
        assert_eq!(version["subresources"]["scale"]["specReplicasPath"], ".spec.replicas");
        assert_eq!(version["subresources"]["scale"]["labelSelectorPath"], ".status.selector");
        assert!(version["subresources"]["status"].is_object());
    }
}
