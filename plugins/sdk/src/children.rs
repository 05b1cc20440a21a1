//! The children the host passes to one reconcile, read by type.
//!
//! Each child stays JSON text until asked for: [`Children::of`] reads only
//! `apiVersion` and `kind` of each, and parses the matching ones straight
//! into the requested type, with no intermediate `serde_json::Value`.

use kube_core::Resource;
use serde::Deserialize;
use serde::de::DeserializeOwned;

use crate::contract::ReconcileError;
use crate::object::Object;

/// The children of one parent: the objects of the manifest's child kinds
/// that the parent controls.
#[derive(Clone, Debug, Default)]
pub struct Children {
    items: Vec<Child>,
}

#[derive(Clone, Debug)]
struct Child {
    api_version: String,
    kind: String,
    json: String,
}

/// The two fields that say what an object is.
#[derive(Deserialize)]
struct TypeMeta {
    #[serde(default, rename = "apiVersion")]
    api_version: String,
    #[serde(default)]
    kind: String,
}

impl Children {
    /// Reads the host's JSON texts; a child that is not a JSON object is a
    /// permanent error naming its position.
    pub fn from_json(texts: &[String]) -> Result<Self, ReconcileError> {
        let items = texts
            .iter()
            .enumerate()
            .map(|(i, text)| {
                let meta: TypeMeta = serde_json::from_str(text)
                    .map_err(|e| ReconcileError::permanent("InvalidInput", format!("child {i} is not valid JSON: {e}")))?;
                Ok(Child { api_version: meta.api_version, kind: meta.kind, json: text.clone() })
            })
            .collect::<Result<_, ReconcileError>>()?;
        Ok(Self { items })
    }

    /// From already parsed objects (native callers of the untyped trait).
    pub fn from_objects(objects: &[Object]) -> Self {
        let items = objects
            .iter()
            .map(|o| Child { api_version: o.api_version().into(), kind: o.kind().into(), json: o.value().to_string() })
            .collect();
        Self { items }
    }

    /// Every child of kind `K` (a k8s-openapi type such as `Job`, or a
    /// `CustomResource`), parsed into `K`, in the host's order.
    pub fn of<K>(&self) -> Result<Vec<K>, ReconcileError>
    where
        K: Resource<DynamicType = ()> + DeserializeOwned,
    {
        let (api_version, kind) = (K::api_version(&()), K::kind(&()));
        self.items
            .iter()
            .filter(|c| c.api_version == api_version && c.kind == kind)
            .map(|c| {
                serde_json::from_str(&c.json)
                    .map_err(|e| ReconcileError::permanent("InvalidChild", format!("a child is not a valid {api_version} {kind}: {e}")))
            })
            .collect()
    }

    /// Every child as an untyped [`Object`], for kinds without a Rust type.
    pub fn untyped(&self) -> Result<Vec<Object>, ReconcileError> {
        self.items
            .iter()
            .map(|c| Object::from_json(&c.json).map_err(|e| ReconcileError::permanent("InvalidInput", format!("a child is not valid JSON: {e}"))))
            .collect()
    }

    pub fn len(&self) -> usize {
        self.items.len()
    }

    pub fn is_empty(&self) -> bool {
        self.items.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::batch::v1::Job;
    use k8s_openapi::api::core::v1::ConfigMap;
    use serde_json::json;

    #[test]
    fn of_returns_only_the_requested_kind_parsed() {
        let texts = vec![
            json!({"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": "a"}}).to_string(),
            json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "b"}, "data": {"k": "v"}}).to_string(),
        ];
        let children = Children::from_json(&texts).unwrap();
        let jobs: Vec<Job> = children.of().unwrap();
        assert_eq!(jobs.len(), 1);
        assert_eq!(jobs[0].metadata.name.as_deref(), Some("a"));
        let cms = children.of::<ConfigMap>().unwrap();
        assert_eq!(cms[0].data.as_ref().unwrap()["k"], "v");
    }

    #[test]
    fn a_child_of_the_kind_with_wrong_field_types_is_a_permanent_error() {
        let texts = vec![json!({"apiVersion": "v1", "kind": "ConfigMap", "data": 5}).to_string()];
        let err = Children::from_json(&texts).unwrap().of::<ConfigMap>().unwrap_err();
        assert!(!err.retryable);
        assert!(err.message.contains("v1 ConfigMap"), "{err}");
        assert!(Children::from_json(&["[".to_string()]).is_err());
    }
}
