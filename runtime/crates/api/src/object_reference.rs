//! A reference to one API object by kind and identity, as Kubernetes'
//! `ObjectReference` holds it: the parent a reconcile works for (what the
//! policy checks a plugin's writes against and children name as their
//! controller) and the object an Event is about (its `regarding`).

use serde_json::{Value, json};

/// One object: `apiVersion`, `kind`, `namespace` (empty for a cluster-scoped
/// object), `name` and `uid`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ObjectReference {
    pub api_version: String,
    pub kind: String,
    pub namespace: String,
    pub name: String,
    pub uid: String,
}

impl ObjectReference {
    /// The controller ownerReference the children of this object carry.
    pub fn owner_reference(&self) -> Value {
        json!({
            "apiVersion": self.api_version,
            "kind": self.kind,
            "name": self.name,
            "uid": self.uid,
            "controller": true,
            "blockOwnerDeletion": true,
        })
    }
}
