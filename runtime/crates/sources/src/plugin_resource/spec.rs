//! What a `Plugin` object asks for (`spec`), read from its JSON and checked:
//! exactly one source, keys that parse, a promotion the host can carry out.

use std::time::Duration;

use serde::{Deserialize, Serialize};

use crate::hotswap::trust::{self, Policy};

/// `spec` of a `Plugin`.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PluginSpec {
    pub source: Source,
    #[serde(default)]
    pub trust: Trust,
    /// Staged beside the source's version and shadowed until promoted.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub candidate: Option<Source>,
    #[serde(default)]
    pub promotion: Promotion,
}

/// Where the bytes are: exactly one of the three.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Source {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub oci: Option<Oci>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub config_map: Option<ConfigMapKey>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub file: Option<File>,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Oci {
    /// `REGISTRY/REPO:TAG` or `REGISTRY/REPO@sha256:DIGEST` (an `oci://` prefix is allowed).
    pub reference: String,
    /// How often a tag is resolved again (`30s`, `5m`, `1h`); absent: once.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub poll_interval: Option<String>,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ConfigMapKey {
    pub namespace: String,
    pub name: String,
    pub key: String,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct File {
    /// A path on the host's filesystem (in a cluster: a volume the Deployment mounts).
    pub path: String,
}

/// The trust a `Plugin` requires on top of the host's own (`--plugin-trust-key`,
/// `--plugin-digest`): it can add requirements, never lift the host's.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Trust {
    /// Ed25519 public keys (PEM, as `openssl pkey -pubout` writes): the
    /// bytes need a detached signature by one of them beside them.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub ed25519_keys: Vec<String>,
    /// Pinned builds, `sha256:<hex>` of the component.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub digests: Vec<String>,
    /// cosign public keys (PEM) the manifest of an `oci` source must be signed with.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub cosign_keys: Vec<String>,
}

/// How a staged candidate becomes the source.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Promotion {
    #[serde(default)]
    pub mode: PromotionMode,
    /// Agreeing shadow reconciles (no difference, no error) before an
    /// `Automatic` promotion; absent: the host's `--shadow-promote-after`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub after_reconciles: Option<u64>,
}

#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub enum PromotionMode {
    /// Only by an edit of the spec (`spec.candidate` moved to `spec.source`).
    #[default]
    Manual,
    /// The host moves `spec.candidate` to `spec.source` once the candidate
    /// agreed on enough reconciles and never differed nor failed.
    Automatic,
}

/// One source, checked.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Checked {
    Oci { reference: String, poll: Option<Duration> },
    ConfigMap(ConfigMapKey),
    File(std::path::PathBuf),
}

/// What is wrong with a spec.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum SpecError {
    #[error("{field} names {count} sources: give exactly one of oci, configMap, file")]
    Sources { field: &'static str, count: usize },
    #[error("{field}: {what} must not be empty")]
    Empty { field: &'static str, what: &'static str },
    #[error("{field}.oci.pollInterval {given:?} is not a duration such as 30s, 5m or 1h (at least 1s)")]
    Interval { field: &'static str, given: String },
    #[error("spec.trust.cosignKeys apply to oci sources only; {field} is not one")]
    CosignNotOci { field: &'static str },
    #[error("spec.trust: {0}")]
    Trust(String),
    #[error("spec.promotion.afterReconciles must be at least 1")]
    Promotion,
}

impl Source {
    /// The one source this names, checked; `field` names it in errors.
    pub fn check(&self, field: &'static str) -> Result<Checked, SpecError> {
        let count = usize::from(self.oci.is_some()) + usize::from(self.config_map.is_some()) + usize::from(self.file.is_some());
        if count != 1 {
            return Err(SpecError::Sources { field, count });
        }
        let empty = |what| SpecError::Empty { field, what };
        if let Some(o) = &self.oci {
            let reference = o.reference.trim_start_matches("oci://").to_string();
            if reference.is_empty() {
                return Err(empty("oci.reference"));
            }
            let poll = match &o.poll_interval {
                Some(text) => Some(parse_interval(text).ok_or_else(|| SpecError::Interval { field, given: text.clone() })?),
                None => None,
            };
            return Ok(Checked::Oci { reference, poll });
        }
        if let Some(c) = &self.config_map {
            for (what, value) in [("configMap.namespace", &c.namespace), ("configMap.name", &c.name), ("configMap.key", &c.key)] {
                if value.is_empty() {
                    return Err(empty(what));
                }
            }
            return Ok(Checked::ConfigMap(c.clone()));
        }
        let path = &self.file.as_ref().expect("counted").path;
        if path.is_empty() {
            return Err(empty("file.path"));
        }
        Ok(Checked::File(path.into()))
    }
}

impl PluginSpec {
    /// The source, the candidate (if any) and the trust policy, checked.
    pub fn check(&self) -> Result<(Checked, Option<Checked>, Option<Policy>), SpecError> {
        let source = self.source.check("spec.source")?;
        let candidate = self.candidate.as_ref().map(|c| c.check("spec.candidate")).transpose()?;
        if !self.trust.cosign_keys.is_empty() {
            for (field, s) in [("spec.source", Some(&source)), ("spec.candidate", candidate.as_ref())] {
                if s.is_some_and(|s| !matches!(s, Checked::Oci { .. })) {
                    return Err(SpecError::CosignNotOci { field });
                }
            }
        }
        if self.promotion.after_reconciles == Some(0) {
            return Err(SpecError::Promotion);
        }
        let policy = if self.trust.ed25519_keys.is_empty() && self.trust.digests.is_empty() {
            None
        } else {
            Some(Policy::from_pem(&self.trust.ed25519_keys, &self.trust.digests).map_err(|e| SpecError::Trust(e.to_string()))?)
        };
        Ok((source, candidate, policy))
    }
}

/// `30s`, `5m`, `1h`, `1h30m` (Go's duration units from seconds up); at least 1s.
fn parse_interval(text: &str) -> Option<Duration> {
    let mut total = 0u64;
    let mut number = String::new();
    for c in text.chars() {
        match c {
            '0'..='9' => number.push(c),
            's' | 'm' | 'h' => {
                let n: u64 = number.parse().ok()?;
                number.clear();
                total = total.checked_add(n.checked_mul(match c {
                    's' => 1,
                    'm' => 60,
                    _ => 3600,
                })?)?;
            }
            _ => return None,
        }
    }
    (number.is_empty() && total >= 1).then_some(Duration::from_secs(total))
}

/// Where the detached signature of a source's bytes is looked for, for messages.
pub fn signature_name(source: &Checked) -> String {
    let sig = trust::SIGNATURE_SUFFIX;
    match source {
        Checked::Oci { reference, .. } => format!("an Ed25519 signature (none travels with an OCI artifact: use cosignKeys) for {reference}"),
        Checked::ConfigMap(c) => format!("key {}{sig} in configmap {}/{}", c.key, c.namespace, c.name),
        Checked::File(path) => format!("{}{sig}", path.display()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn spec(value: serde_json::Value) -> PluginSpec {
        serde_json::from_value(value).unwrap()
    }

    #[test]
    fn a_spec_names_exactly_one_source() {
        let one = spec(json!({"source": {"configMap": {"namespace": "sys", "name": "plugins", "key": "a.wasm"}}}));
        let (source, candidate, policy) = one.check().unwrap();
        assert!(matches!(source, Checked::ConfigMap(ref c) if c.key == "a.wasm"));
        assert!(candidate.is_none() && policy.is_none());
        let two = spec(json!({"source": {"file": {"path": "/p"}, "oci": {"reference": "r/x:v1"}}}));
        assert_eq!(two.check().unwrap_err(), SpecError::Sources { field: "spec.source", count: 2 });
        let none = spec(json!({"source": {}, }));
        assert!(none.check().unwrap_err().to_string().contains("exactly one of oci, configMap, file"));
        let empty_key = spec(json!({"source": {"configMap": {"namespace": "sys", "name": "plugins", "key": ""}}}));
        assert_eq!(empty_key.check().unwrap_err(), SpecError::Empty { field: "spec.source", what: "configMap.key" });
    }

    #[test]
    fn oci_intervals_parse_as_go_durations_and_cosign_keys_need_an_oci_source() {
        let oci = spec(json!({"source": {"oci": {"reference": "oci://127.0.0.1:5000/hello:v1", "pollInterval": "1m30s"}}}));
        assert_eq!(oci.check().unwrap().0, Checked::Oci { reference: "127.0.0.1:5000/hello:v1".into(), poll: Some(Duration::from_secs(90)) });
        for bad in ["0s", "5", "1d", "m", ""] {
            let s = spec(json!({"source": {"oci": {"reference": "r/x:v1", "pollInterval": bad}}}));
            assert!(matches!(s.check(), Err(SpecError::Interval { .. })), "{bad}");
        }
        let cosign = spec(json!({"source": {"file": {"path": "/p"}}, "trust": {"cosignKeys": ["k"]}}));
        assert_eq!(cosign.check().unwrap_err(), SpecError::CosignNotOci { field: "spec.source" });
    }

    #[test]
    fn trust_keys_that_do_not_parse_are_named() {
        let s = spec(json!({"source": {"file": {"path": "/p"}}, "trust": {"ed25519Keys": ["not a key"]}}));
        let e = s.check().unwrap_err().to_string();
        assert!(e.contains("spec.trust.ed25519Keys[0]") && e.contains("BEGIN PUBLIC KEY"), "{e}");
        let pins = spec(json!({"source": {"file": {"path": "/p"}}, "trust": {"digests": ["sha256:xyz"]}}));
        assert!(pins.check().unwrap_err().to_string().contains("sha256:<64 hex digits>"));
        let promotion = spec(json!({"source": {"file": {"path": "/p"}}, "promotion": {"mode": "Automatic", "afterReconciles": 0}}));
        assert_eq!(promotion.check().unwrap_err(), SpecError::Promotion);
    }
}
