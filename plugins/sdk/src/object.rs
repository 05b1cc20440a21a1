//! A Kubernetes object as the API server serves it, with typed access to the
//! parts every controller reads (metadata, owner references) and a way into
//! k8s-openapi or your own serde types for the rest.

use std::collections::BTreeMap;

use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::contract::{GroupVersionKind, ObjectRef};
use crate::time::Time;

/// An object, as JSON, for kinds a plugin does not read through a type.
/// Deref gives the raw [`Value`]; [`Object::parse`] gives a typed view.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(transparent)]
pub struct Object(Value);

impl std::ops::Deref for Object {
    type Target = Value;
    fn deref(&self) -> &Value {
        &self.0
    }
}

impl From<Value> for Object {
    fn from(value: Value) -> Self {
        Object(value)
    }
}

/// An `ownerReferences` entry.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct OwnerReference {
    /// The owner's `apiVersion`.
    pub api_version: String,
    /// The owner's kind.
    pub kind: String,
    /// The owner's name.
    pub name: String,
    /// The owner's uid.
    pub uid: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    /// Whether the owner is the managing controller.
    pub controller: Option<bool>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    /// Whether the garbage collector waits for this object before deleting the owner (foreground deletion).
    pub block_owner_deletion: Option<bool>,
}

impl Object {
    /// Wraps a JSON value.
    pub fn new(value: Value) -> Self {
        Object(value)
    }

    /// The raw JSON.
    pub fn value(&self) -> &Value {
        &self.0
    }

    /// The raw JSON, to change in place (e.g. in `default`).
    pub fn value_mut(&mut self) -> &mut Value {
        &mut self.0
    }

    /// Parses JSON text; the error names what was wrong.
    pub fn from_json(text: &str) -> Result<Self, serde_json::Error> {
        serde_json::from_str(text).map(Object)
    }

    /// `metadata.<key>`. Plain lookups rather than `Value::pointer`, which
    /// splits and unescapes its path on every call (5% of a reconcile in the
    /// profile, docs/benchmarks.md).
    fn meta(&self, key: &str) -> Option<&Value> {
        self.0.get("metadata").and_then(|m| m.get(key))
    }

    fn meta_str(&self, key: &str) -> Option<&str> {
        self.meta(key).and_then(Value::as_str)
    }

    /// `apiVersion`, or "".
    pub fn api_version(&self) -> &str {
        self.0.get("apiVersion").and_then(Value::as_str).unwrap_or_default()
    }

    /// `kind`, or "".
    pub fn kind(&self) -> &str {
        self.0.get("kind").and_then(Value::as_str).unwrap_or_default()
    }

    /// The group, version and kind from `apiVersion` and `kind`.
    pub fn gvk(&self) -> GroupVersionKind {
        GroupVersionKind::from_api_version(self.api_version(), self.kind())
    }

    /// `metadata.name`, or "".
    pub fn name(&self) -> &str {
        self.meta_str("name").unwrap_or_default()
    }

    /// `metadata.namespace`, or "".
    pub fn namespace(&self) -> &str {
        self.meta_str("namespace").unwrap_or_default()
    }

    /// `metadata.uid`, or "".
    pub fn uid(&self) -> &str {
        self.meta_str("uid").unwrap_or_default()
    }

    /// `metadata.resourceVersion`, or "".
    pub fn resource_version(&self) -> &str {
        self.meta_str("resourceVersion").unwrap_or_default()
    }

    /// `metadata.generation`, or 0.
    pub fn generation(&self) -> i64 {
        self.meta("generation").and_then(Value::as_i64).unwrap_or(0)
    }

    /// `metadata.labels`.
    pub fn labels(&self) -> BTreeMap<String, String> {
        string_map(self.meta("labels"))
    }

    /// `metadata.annotations`.
    pub fn annotations(&self) -> BTreeMap<String, String> {
        string_map(self.meta("annotations"))
    }

    /// One label's value.
    pub fn label(&self, key: &str) -> Option<&str> {
        self.meta("labels").and_then(|l| l.get(key)).and_then(Value::as_str)
    }

    /// One annotation's value.
    pub fn annotation(&self, key: &str) -> Option<&str> {
        self.meta("annotations").and_then(|a| a.get(key)).and_then(Value::as_str)
    }

    /// `metadata.creationTimestamp`, if set and valid.
    pub fn creation_timestamp(&self) -> Option<Time> {
        self.meta_str("creationTimestamp").and_then(|s| Time::parse_rfc3339(s).ok())
    }

    /// `metadata.deletionTimestamp`: set once the object is being deleted.
    pub fn deletion_timestamp(&self) -> Option<Time> {
        self.meta_str("deletionTimestamp").and_then(|s| Time::parse_rfc3339(s).ok())
    }

    /// True while the object is being deleted (its finalizers still hold it).
    pub fn is_being_deleted(&self) -> bool {
        self.meta("deletionTimestamp").is_some_and(|v| !v.is_null())
    }

    /// `metadata.finalizers`.
    pub fn finalizers(&self) -> Vec<String> {
        self.meta("finalizers").and_then(Value::as_array).map(|a| a.iter().filter_map(Value::as_str).map(String::from).collect()).unwrap_or_default()
    }

    /// `metadata.ownerReferences` (entries that do not read are skipped).
    pub fn owner_references(&self) -> Vec<OwnerReference> {
        self.meta("ownerReferences").and_then(|v| Vec::<OwnerReference>::deserialize(v).ok()).unwrap_or_default()
    }

    /// The owner reference with `controller: true`, if any.
    pub fn controller_ref(&self) -> Option<OwnerReference> {
        self.owner_references().into_iter().find(|r| r.controller == Some(true))
    }

    /// True when `owner` is this object's controller (matched by UID).
    pub fn is_controlled_by(&self, owner: &Object) -> bool {
        self.controller_ref().is_some_and(|r| r.uid == owner.uid())
    }

    /// A controller owner reference pointing at this object, as the host adds
    /// to every child it creates for this parent.
    pub fn as_controller_owner(&self) -> OwnerReference {
        OwnerReference {
            api_version: self.api_version().into(),
            kind: self.kind().into(),
            name: self.name().into(),
            uid: self.uid().into(),
            controller: Some(true),
            block_owner_deletion: Some(true),
        }
    }

    /// A reference to this object, for patch and delete actions.
    pub fn object_ref(&self) -> ObjectRef {
        ObjectRef { api_version: self.api_version().into(), kind: self.kind().into(), namespace: self.namespace().into(), name: self.name().into() }
    }

    /// `spec`, or null.
    pub fn spec(&self) -> &Value {
        self.0.get("spec").unwrap_or(&Value::Null)
    }

    /// `status`, or null.
    pub fn status(&self) -> &Value {
        self.0.get("status").unwrap_or(&Value::Null)
    }

    /// Parses the whole object into a typed value (a k8s-openapi kind, or the
    /// plugin's own serde types).
    pub fn parse<T: DeserializeOwned>(&self) -> Result<T, serde_json::Error> {
        T::deserialize(&self.0)
    }

    /// Builds an object from a typed value.
    pub fn from_typed<T: Serialize>(value: &T) -> Result<Self, serde_json::Error> {
        serde_json::to_value(value).map(Object)
    }

    /// The object as a JSON value.
    pub fn into_value(self) -> Value {
        self.0
    }
}

fn string_map(value: Option<&Value>) -> BTreeMap<String, String> {
    value.and_then(Value::as_object).map(|m| m.iter().filter_map(|(k, v)| Some((k.clone(), v.as_str()?.to_string()))).collect()).unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn job() -> Object {
        Object(json!({
            "apiVersion": "batch/v1",
            "kind": "Job",
            "metadata": {
                "name": "hello-28000000",
                "namespace": "default",
                "uid": "u-job",
                "labels": {"app": "hello"},
                "creationTimestamp": "2026-01-01T00:00:00Z",
                "ownerReferences": [
                    {"apiVersion": "v1", "kind": "ConfigMap", "name": "other", "uid": "u-cm"},
                    {"apiVersion": "batch.tutorial.kubebuilder.io/v1", "kind": "CronJob", "name": "hello", "uid": "u-cj", "controller": true}
                ]
            }
        }))
    }

    #[test]
    fn metadata_reads_what_the_api_server_serves() {
        let j = job();
        assert_eq!(j.name(), "hello-28000000");
        assert_eq!(j.namespace(), "default");
        assert_eq!(j.label("app"), Some("hello"));
        assert_eq!(j.gvk(), GroupVersionKind::new("batch", "v1", "Job"));
        assert_eq!(j.creation_timestamp().unwrap().to_rfc3339(), "2026-01-01T00:00:00Z");
        assert!(!j.is_being_deleted());
    }

    #[test]
    fn controller_ref_is_the_owner_marked_controller() {
        let owner =
            Object(json!({"apiVersion": "batch.tutorial.kubebuilder.io/v1", "kind": "CronJob", "metadata": {"name": "hello", "uid": "u-cj"}}));
        let j = job();
        assert_eq!(j.controller_ref().unwrap().uid, "u-cj");
        assert!(j.is_controlled_by(&owner));
        let stranger = Object(json!({"metadata": {"uid": "u-cm"}}));
        assert!(!j.is_controlled_by(&stranger));
    }

    #[test]
    fn objects_parse_into_k8s_openapi_types() {
        #[cfg(feature = "k8s-openapi")]
        {
            let typed: k8s_openapi::api::batch::v1::Job = job().parse().unwrap();
            assert_eq!(typed.metadata.name.as_deref(), Some("hello-28000000"));
        }
    }
}
