//! Which manifests hold a plugin, and the one `host push` writes.
//!
//! Accepted (pulled), one Wasm layer in an OCI image manifest:
//! - the CNCF Wasm OCI artifact layout (what `wkg oci push` writes): config
//!   `application/vnd.wasm.config.v0+json`, layer `application/wasm`;
//! - the older layout Kubewarden (`kwctl push`), wasm-to-oci and Krustlet
//!   write: layer `application/vnd.wasm.content.layer.v1+wasm`, config
//!   `application/vnd.wasm.config.v1+json`;
//! - either layer type under the OCI empty config
//!   (`application/vnd.oci.empty.v1+json`, what `oras push` writes without
//!   `--config`).
//!
//! Anything else (a container image, a second layer, an index) is refused
//! with the media type named. Written (`host push`): the CNCF layout, with
//! the config JSON its specification asks for (`architecture: wasm`, `os:
//! wasip2`, `layerDigests`).

use serde::{Deserialize, Serialize};

use super::Digest;

pub const OCI_MANIFEST: &str = "application/vnd.oci.image.manifest.v1+json";
pub const DOCKER_MANIFEST: &str = "application/vnd.docker.distribution.manifest.v2+json";
pub const OCI_INDEX: &str = "application/vnd.oci.image.index.v1+json";
pub const CNCF_CONFIG: &str = "application/vnd.wasm.config.v0+json";
pub const CNCF_LAYER: &str = "application/wasm";
pub const LEGACY_CONFIG: &str = "application/vnd.wasm.config.v1+json";
pub const LEGACY_LAYER: &str = "application/vnd.wasm.content.layer.v1+wasm";
pub const EMPTY_CONFIG: &str = "application/vnd.oci.empty.v1+json";

/// Layer media types that hold a plugin component.
pub const ACCEPTED_LAYERS: &[&str] = &[CNCF_LAYER, LEGACY_LAYER];
/// Config media types a plugin manifest may have.
pub const ACCEPTED_CONFIGS: &[&str] = &[CNCF_CONFIG, LEGACY_CONFIG, EMPTY_CONFIG];

/// A content descriptor (the fields used here).
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub struct Descriptor {
    pub media_type: String,
    pub digest: String,
    pub size: u64,
}

/// An OCI image manifest (the fields used here).
#[derive(Debug, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Manifest {
    pub schema_version: u32,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub media_type: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub artifact_type: Option<String>,
    pub config: Descriptor,
    #[serde(default)]
    pub layers: Vec<Descriptor>,
}

/// Why a manifest is not a plugin.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum LayoutError {
    #[error("the manifest is not JSON an OCI image manifest has: {0}")]
    NotAManifest(String),
    #[error("the manifest is of media type {0}, not an image manifest ({OCI_MANIFEST}); an index or a container image is no plugin")]
    ManifestType(String),
    #[error("config media type {0} is not one of a Wasm artifact (accepted: {accepted})", accepted = ACCEPTED_CONFIGS.join(", "))]
    Config(String),
    #[error("layer media type {0} is not a Wasm component (accepted: {accepted})", accepted = ACCEPTED_LAYERS.join(", "))]
    Layer(String),
    #[error("the manifest has {0} layers; a plugin artifact has exactly one Wasm layer")]
    LayerCount(usize),
    #[error("layer digest {0:?} is not sha256:<64 hex digits>")]
    LayerDigest(String),
}

/// The plugin's layer in `manifest` (raw bytes as pulled), or why there is none.
pub fn component_layer(manifest: &[u8]) -> Result<(Descriptor, Digest), LayoutError> {
    let m: Manifest = serde_json::from_slice(manifest).map_err(|e| LayoutError::NotAManifest(e.to_string()))?;
    if let Some(t) = m.media_type.as_deref()
        && t != OCI_MANIFEST
        && t != DOCKER_MANIFEST
    {
        return Err(LayoutError::ManifestType(t.into()));
    }
    // A layer of the wrong type is the more useful thing to say than the config.
    if let Some(bad) = m.layers.iter().find(|l| !ACCEPTED_LAYERS.contains(&l.media_type.as_str())) {
        return Err(LayoutError::Layer(bad.media_type.clone()));
    }
    if !ACCEPTED_CONFIGS.contains(&m.config.media_type.as_str()) {
        return Err(LayoutError::Config(m.config.media_type));
    }
    let [layer] = <[Descriptor; 1]>::try_from(m.layers).map_err(|ls| LayoutError::LayerCount(ls.len()))?;
    let digest = layer.digest.parse().map_err(|_| LayoutError::LayerDigest(layer.digest.clone()))?;
    Ok((layer, digest))
}

/// What `host push` uploads: the config and the manifest (raw bytes: the
/// manifest digest is the SHA-256 of exactly these).
pub struct Artifact {
    pub config: Vec<u8>,
    pub config_digest: Digest,
    pub layer_digest: Digest,
    pub manifest: Vec<u8>,
    pub manifest_digest: Digest,
}

/// The CNCF layout for `component`; `created` in RFC 3339.
pub fn cncf_artifact(component: &[u8], created: &str) -> Artifact {
    let layer_digest = Digest::of(component);
    let config = serde_json::to_vec(&serde_json::json!({
        "created": created,
        "architecture": "wasm",
        "os": "wasip2",
        "layerDigests": [layer_digest.as_str()],
    }))
    .expect("a JSON value serializes");
    let config_digest = Digest::of(&config);
    let manifest = Manifest {
        schema_version: 2,
        media_type: Some(OCI_MANIFEST.into()),
        artifact_type: None,
        config: Descriptor { media_type: CNCF_CONFIG.into(), digest: config_digest.to_string(), size: config.len() as u64 },
        layers: vec![Descriptor { media_type: CNCF_LAYER.into(), digest: layer_digest.to_string(), size: component.len() as u64 }],
    };
    let manifest = serde_json::to_vec(&manifest).expect("a manifest serializes");
    let manifest_digest = Digest::of(&manifest);
    Artifact { config, config_digest, layer_digest, manifest, manifest_digest }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn manifest(config: &str, layers: &[&str]) -> Vec<u8> {
        let d = format!("sha256:{}", "a".repeat(64));
        let layers: Vec<_> = layers.iter().map(|t| serde_json::json!({"mediaType": t, "digest": d, "size": 3})).collect();
        serde_json::to_vec(&serde_json::json!({
            "schemaVersion": 2, "mediaType": OCI_MANIFEST,
            "config": {"mediaType": config, "digest": d, "size": 2}, "layers": layers,
        }))
        .unwrap()
    }

    #[test]
    fn the_cncf_the_kubewarden_and_the_oras_layouts_are_accepted() {
        for (config, layer) in [(CNCF_CONFIG, CNCF_LAYER), (LEGACY_CONFIG, LEGACY_LAYER), (EMPTY_CONFIG, CNCF_LAYER)] {
            let (l, _) = component_layer(&manifest(config, &[layer])).unwrap();
            assert_eq!(l.media_type, layer);
        }
    }

    #[test]
    fn other_layouts_are_refused_naming_the_media_type() {
        let e = component_layer(&manifest(CNCF_CONFIG, &["application/vnd.oci.image.layer.v1.tar+gzip"])).unwrap_err().to_string();
        assert!(e.contains("layer media type application/vnd.oci.image.layer.v1.tar+gzip") && e.contains("application/wasm"), "{e}");
        let e = component_layer(&manifest("application/vnd.oci.image.config.v1+json", &[CNCF_LAYER])).unwrap_err().to_string();
        assert!(e.contains("application/vnd.oci.image.config.v1+json"), "{e}");
        assert_eq!(component_layer(&manifest(CNCF_CONFIG, &[CNCF_LAYER, CNCF_LAYER])).unwrap_err(), LayoutError::LayerCount(2));
        assert_eq!(component_layer(&manifest(CNCF_CONFIG, &[])).unwrap_err(), LayoutError::LayerCount(0));
        let index = serde_json::to_vec(
            &serde_json::json!({"schemaVersion": 2, "mediaType": OCI_INDEX, "config": {"mediaType": "x", "digest": "d", "size": 1}}),
        )
        .unwrap();
        assert!(matches!(component_layer(&index).unwrap_err(), LayoutError::ManifestType(_)));
        assert!(matches!(component_layer(b"not json").unwrap_err(), LayoutError::NotAManifest(_)));
    }

    #[test]
    fn the_pushed_artifact_is_the_cncf_layout_and_reads_back() {
        let a = cncf_artifact(b"\0asm component", "2026-01-01T00:00:00Z");
        let (layer, digest) = component_layer(&a.manifest).unwrap();
        assert_eq!((layer.media_type.as_str(), layer.size, &digest), (CNCF_LAYER, 14, &Digest::of(b"\0asm component")));
        let config: serde_json::Value = serde_json::from_slice(&a.config).unwrap();
        assert_eq!(config["architecture"], "wasm");
        assert_eq!(config["layerDigests"][0], digest.as_str());
        assert_eq!(a.manifest_digest, Digest::of(&a.manifest));
    }
}
