//! The `Plugin` CustomResourceDefinition: the host's own CRD, installed by
//! the host with `--plugin-resources` (server-side apply, as a plugin's CRDs
//! are) and printed by `host generate crds` for deploy/ and the chart.

use kube::api::ApiResource;
use serde_json::{Value, json};

pub const GROUP: &str = "plugins.operator-host.dev";
pub const VERSION: &str = "v1alpha1";
pub const KIND: &str = "Plugin";
pub const PLURAL: &str = "plugins";
/// `plugins.plugins.operator-host.dev`.
pub const NAME: &str = "plugins.plugins.operator-host.dev";

/// The resource, for a dynamic client.
pub fn api_resource() -> ApiResource {
    ApiResource {
        group: GROUP.into(),
        version: VERSION.into(),
        api_version: crate::hotswap::PLUGIN_API_VERSION.into(),
        kind: KIND.into(),
        plural: PLURAL.into(),
    }
}

const DESCRIPTION: &str = "A plugin the operator host runs: where its bytes are, the trust they need, an optional candidate \
shadowed beside it and how that is promoted; the status says which version runs and whether it is healthy. Cluster-scoped: \
a plugin reconciles its kinds in every namespace with the host's cluster-wide permissions, and a source may name a ConfigMap \
in any namespace, so creating a Plugin is a cluster-wide privilege (grant it as such); a namespaced Plugin would suggest a \
tenancy boundary that does not exist. Objects labelled operator-host.dev/published-by=host are written by the host for the plugins it was given by flag or ConfigMap key (the annotation operator-host.dev/source names which): they are output only, never read back as input, and deleted when the plugin is no longer given.";

fn source_schema(description: &str) -> Value {
    json!({
        "type": "object",
        "description": description,
        "properties": {
            "oci": {
                "type": "object",
                "description": "An OCI artifact: REGISTRY/REPO:TAG or REGISTRY/REPO@sha256:DIGEST (oci:// prefix allowed).",
                "required": ["reference"],
                "properties": {
                    "reference": {"type": "string", "minLength": 1},
                    "pollInterval": {"type": "string", "description": "How often a tag is resolved again (30s, 5m, 1h); absent: once."}
                }
            },
            "configMap": {
                "type": "object",
                "description": "A key of a ConfigMap (binaryData, gzipped or not); its signature is the key <key>.sig.",
                "required": ["namespace", "name", "key"],
                "properties": {
                    "namespace": {"type": "string", "minLength": 1},
                    "name": {"type": "string", "minLength": 1},
                    "key": {"type": "string", "minLength": 1}
                }
            },
            "file": {
                "type": "object",
                "description": "A file on the host's filesystem, polled for changes; its signature is FILE.sig.",
                "required": ["path"],
                "properties": {"path": {"type": "string", "minLength": 1}}
            }
        },
        "oneOf": [{"required": ["oci"]}, {"required": ["configMap"]}, {"required": ["file"]}]
    })
}

fn string_list(description: &str) -> Value {
    json!({"type": "array", "description": description, "items": {"type": "string"}})
}

fn condition_schema() -> Value {
    json!({
        "type": "object",
        "required": ["type", "status", "lastTransitionTime", "reason", "message"],
        "properties": {
            "type": {"type": "string"},
            "status": {"type": "string", "enum": ["True", "False", "Unknown"]},
            "observedGeneration": {"type": "integer", "format": "int64"},
            "lastTransitionTime": {"type": "string", "format": "date-time"},
            "reason": {"type": "string"},
            "message": {"type": "string"}
        }
    })
}

fn status_schema() -> Value {
    json!({
        "type": "object",
        "properties": {
            "observedGeneration": {"type": "integer", "format": "int64"},
            "id": {"type": "string", "description": "The id the host runs the plugin under (plugin/NAME)."},
            "plugin": {"type": "string", "description": "The plugin's name (its controller name)."},
            "version": {"type": "string"},
            "digest": {"type": "string", "description": "sha256:<hex> of the component that serves."},
            "shortDigest": {"type": "string"},
            "contractVersion": {"type": "string"},
            "tier": {"type": "string", "description": "baseline (Winch) or optimized (Cranelift)."},
            "parent": {"type": "string"},
            "state": {"type": "string", "enum": ["Serving", "Shadowing", "RolledBack"]},
            "lastError": {"type": "string"},
            "candidate": {
                "type": "object",
                "properties": {
                    "version": {"type": "string"},
                    "digest": {"type": "string"},
                    "agree": {"type": "integer", "format": "int64"},
                    "differ": {"type": "integer", "format": "int64"},
                    "errors": {"type": "integer", "format": "int64"}
                }
            },
            "conditions": {
                "type": "array",
                "items": condition_schema(),
                "x-kubernetes-list-type": "map",
                "x-kubernetes-list-map-keys": ["type"]
            }
        }
    })
}

fn column(name: &str, type_: &str, path: &str, description: &str) -> Value {
    json!({"name": name, "type": type_, "jsonPath": path, "description": description})
}

/// The CRD, as the host applies it (see `crate::manager::served_form`).
pub fn crd() -> Value {
    let spec = json!({
        "type": "object",
        "required": ["source"],
        "properties": {
            "source": source_schema("Where the plugin's bytes are: exactly one of oci, configMap, file."),
            "candidate": source_schema("A candidate version, staged beside the source's and shadowed (its writes discarded) until promoted."),
            "trust": {
                "type": "object",
                "description": "What the bytes need besides the host's own --plugin-trust-key and --plugin-digest (never less).",
                "properties": {
                    "ed25519Keys": string_list("Ed25519 public keys (PEM); a detached signature by one of them must sit beside the bytes."),
                    "digests": string_list("Pinned builds: sha256:<hex> of the component."),
                    "cosignKeys": string_list("cosign public keys (PEM) the manifest of an oci source must be signed with.")
                }
            },
            "promotion": {
                "type": "object",
                "description": "How the candidate becomes the source: Manual (move spec.candidate to spec.source yourself) or Automatic (the host does, after afterReconciles agreeing shadow reconciles with no difference and no error).",
                "properties": {
                    "mode": {"type": "string", "enum": ["Manual", "Automatic"], "default": "Manual"},
                    "afterReconciles": {"type": "integer", "format": "int64", "minimum": 1}
                }
            }
        }
    });
    json!({
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": NAME},
        "spec": {
            "group": GROUP,
            "names": {"kind": KIND, "listKind": "PluginList", "plural": PLURAL, "singular": "plugin", "categories": ["operator-host"]},
            "scope": "Cluster",
            "versions": [{
                "name": VERSION,
                "served": true,
                "storage": true,
                "subresources": {"status": {}},
                "additionalPrinterColumns": [
                    column("Version", "string", ".status.version", "The version that serves."),
                    column("Digest", "string", ".status.shortDigest", "The digest of the version that serves."),
                    column("Contract", "string", ".status.contractVersion", "The operator:plugin contract it was built against."),
                    column("Tier", "string", ".status.tier", "The compile tier it runs from."),
                    column("State", "string", ".status.state", "Serving, Shadowing (a candidate is staged) or RolledBack."),
                    column("Ready", "string", ".status.conditions[?(@.type==\"Ready\")].status", "Whether the version the spec names serves."),
                    column("Age", "date", ".metadata.creationTimestamp", ""),
                    json!({"name": "Message", "type": "string", "jsonPath": ".status.lastError", "priority": 1, "description": "The last error."})
                ],
                "schema": {"openAPIV3Schema": {
                    "type": "object",
                    "description": DESCRIPTION,
                    "properties": {
                        "apiVersion": {"type": "string"},
                        "kind": {"type": "string"},
                        "metadata": {"type": "object"},
                        "spec": spec,
                        "status": status_schema()
                    }
                }}
            }]
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_crd_is_cluster_scoped_with_a_status_subresource_and_the_columns_kubectl_shows() {
        let c = crd();
        assert_eq!(c["spec"]["scope"], "Cluster");
        assert_eq!(c["metadata"]["name"], format!("{PLURAL}.{GROUP}"));
        let v = &c["spec"]["versions"][0];
        assert_eq!(v["subresources"]["status"], json!({}));
        let names: Vec<&str> = v["additionalPrinterColumns"].as_array().unwrap().iter().map(|c| c["name"].as_str().unwrap()).collect();
        assert_eq!(names, ["Version", "Digest", "Contract", "Tier", "State", "Ready", "Age", "Message"]);
    }
}
