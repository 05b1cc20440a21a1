//! The "config hash" pattern: Pods roll when a ConfigMap their template
//! uses changes. The ConfigMaps the template names (volumes, projected
//! volumes, `envFrom`, `env.valueFrom`) reach reconcile as related objects
//! (contract 0.2); a digest of their content goes into the template's
//! annotations before the `pod-template-hash` is computed, so new content
//! is a new template, hence a new revision and a rolling update under the
//! usual `maxSurge` / `maxUnavailable`. A template naming no ConfigMap, or
//! whose ConfigMaps do not exist yet, is left exactly as written.

use operator_plugin_sdk::k8s_openapi::api::core::v1::ConfigMap;
use operator_plugin_sdk::serde_json::{Map, Value};
use operator_plugin_sdk::{RelatedKind, json};
use sha2::{Digest, Sha256};

use crate::hash::canonical;

/// The template annotation holding the digest (what Helm charts call
/// `checksum/config`).
pub const ANNOTATION: &str = "apps.example.com/config-hash";

/// Where a MyDeployment's template names ConfigMaps (paths of the parent;
/// the host follows lists item by item).
pub const CONFIGMAP_PATHS: [&str; 6] = [
    "spec.template.spec.volumes.configMap.name",
    "spec.template.spec.volumes.projected.sources.configMap.name",
    "spec.template.spec.containers.envFrom.configMapRef.name",
    "spec.template.spec.containers.env.valueFrom.configMapKeyRef.name",
    "spec.template.spec.initContainers.envFrom.configMapRef.name",
    "spec.template.spec.initContainers.env.valueFrom.configMapKeyRef.name",
];

/// The manifest's related kind: ConfigMaps named by the template.
pub fn related_kind() -> RelatedKind {
    RelatedKind::names_at::<ConfigMap>(&CONFIGMAP_PATHS)
}

/// SHA-256 (hex) over the name, `data` and `binaryData` of every ConfigMap
/// in `configmaps` (those the host found for the template's names), in
/// name order; `None` when there is none. Labels, annotations and
/// `resourceVersion` do not count: only content rolls Pods.
pub fn digest(configmaps: &[ConfigMap]) -> Option<String> {
    if configmaps.is_empty() {
        return None;
    }
    let mut configmaps: Vec<&ConfigMap> = configmaps.iter().collect();
    configmaps.sort_by(|a, b| a.metadata.name.cmp(&b.metadata.name));
    let content: Vec<Value> = configmaps
        .iter()
        .map(|c| json!({"name": c.metadata.name.as_deref().unwrap_or_default(), "data": c.data, "binaryData": c.binary_data}))
        .collect();
    Some(hex::encode(Sha256::digest(canonical(&Value::Array(content)).as_bytes())))
}

/// `template` with the digest of `configmaps` in its annotations.
pub fn annotate(template: &mut Value, configmaps: &[ConfigMap]) {
    let Some(digest) = digest(configmaps) else { return };
    let Some(template) = template.as_object_mut() else { return };
    let metadata = template.entry("metadata").or_insert_with(|| Value::Object(Map::new()));
    if !metadata.is_object() {
        return;
    }
    let annotations = metadata.as_object_mut().expect("checked").entry("annotations").or_insert_with(|| Value::Object(Map::new()));
    if let Some(annotations) = annotations.as_object_mut() {
        annotations.insert(ANNOTATION.into(), Value::String(digest));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn configmap(name: &str, data: Value) -> ConfigMap {
        operator_plugin_sdk::serde_json::from_value(
            json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name, "resourceVersion": "7"}, "data": data}),
        )
        .expect("a ConfigMap")
    }

    #[test]
    fn only_content_changes_the_digest() {
        let a = digest(&[configmap("conf", json!({"k": "v"}))]).unwrap();
        let mut relabeled = configmap("conf", json!({"k": "v"}));
        relabeled.metadata.labels = Some([("x".to_string(), "y".to_string())].into());
        relabeled.metadata.resource_version = Some("8".into());
        assert_eq!(digest(&[relabeled]).unwrap(), a);
        assert_ne!(digest(&[configmap("conf", json!({"k": "w"}))]).unwrap(), a);
        assert_eq!(a.len(), 64);
    }

    #[test]
    fn order_does_not_matter_and_no_configmap_leaves_the_template_alone() {
        let (x, y) = (configmap("x", json!({"a": "1"})), configmap("y", json!({"b": "2"})));
        assert_eq!(digest(&[x.clone(), y.clone()]), digest(&[y, x]));
        let mut template = json!({"metadata": {"labels": {"app": "web"}}, "spec": {}});
        let before = template.clone();
        annotate(&mut template, &[]);
        assert_eq!(template, before);
        annotate(&mut template, &[configmap("conf", json!({"k": "v"}))]);
        assert_eq!(template["metadata"]["annotations"][ANNOTATION].as_str().map(str::len), Some(64));
        assert_eq!(template["metadata"]["labels"], json!({"app": "web"}));
    }
}
