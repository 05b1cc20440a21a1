//! Controller references, as upstream's `ControllerRefManager`: a controller owns the objects
//! whose `ownerReferences` name it with `controller: true`; it adopts orphans its selector
//! matches and releases the ones it owns that the selector no longer matches.

use super::{Retry, deleting, meta_str, put};
use apiserver::resources::Resource;
use apiserver::rest::{Core, Sub};
use apiserver::selector::LabelSelector;
use serde_json::{Value, json};
use std::sync::Arc;

/// The ownerReference with `controller: true`, if any.
pub(crate) fn controller_of(obj: &Value) -> Option<&Value> {
    obj.pointer("/metadata/ownerReferences").and_then(Value::as_array)?.iter().find(|r| r["controller"] == json!(true))
}

/// The uid of an object's controller ("" when it has none).
pub(crate) fn controller_uid(obj: &Value) -> &str {
    controller_of(obj).and_then(|r| r["uid"].as_str()).unwrap_or_default()
}

/// The reference a controller puts on what it owns (upstream's `NewControllerRef`).
pub(crate) fn controller_ref(owner: &Value, api_version: &str, kind: &str) -> Value {
    json!({
        "apiVersion": api_version, "kind": kind,
        "name": meta_str(owner, "name"), "uid": meta_str(owner, "uid"),
        "controller": true, "blockOwnerDeletion": true,
    })
}

/// Who claims: the controller object, its kind and its selector.
pub(crate) struct Claimant<'a> {
    pub owner: &'a Value,
    pub api_version: &'a str,
    pub kind: &'a str,
    pub selector: &'a LabelSelector,
    pub manager: &'a str,
}

impl Claimant<'_> {
    /// The candidates (same namespace) this controller owns after adopting and releasing, as
    /// upstream's `ClaimObject`: owned by another controller, ignored; owned and matching,
    /// kept; owned and no longer matching, released (unless the owner is being deleted);
    /// an orphan that matches, not being deleted, adopted (unless the owner is being deleted).
    pub(crate) fn claim(&self, core: &Core, res: &Resource, candidates: &[Arc<Value>]) -> Result<Vec<Value>, Retry> {
        let uid = meta_str(self.owner, "uid");
        let mut owned = vec![];
        for obj in candidates {
            let matches = self.selector.matches(obj);
            match controller_of(obj) {
                Some(r) if r["uid"] != uid => {}
                Some(_) if matches => owned.push(Value::clone(obj)),
                Some(_) if deleting(self.owner) => {}
                Some(_) => self.release(core, res, obj)?,
                None if !matches || deleting(self.owner) || deleting(obj) => {}
                None => owned.push(self.adopt(core, res, obj)?),
            }
        }
        Ok(owned)
    }

    fn adopt(&self, core: &Core, res: &Resource, obj: &Value) -> Result<Value, Retry> {
        let mut new = obj.clone();
        let refs = new["metadata"].as_object_mut().expect("metadata").entry("ownerReferences").or_insert_with(|| json!([]));
        if let Some(refs) = refs.as_array_mut() {
            refs.push(controller_ref(self.owner, self.api_version, self.kind));
        }
        put(core, res, new, Sub::Main, self.manager)
    }

    fn release(&self, core: &Core, res: &Resource, obj: &Value) -> Result<(), Retry> {
        let uid = meta_str(self.owner, "uid");
        let mut new = obj.clone();
        if let Some(refs) = new.pointer_mut("/metadata/ownerReferences").and_then(Value::as_array_mut) {
            refs.retain(|r| r["uid"] != uid);
        }
        match put(core, res, new, Sub::Main, self.manager) {
            Ok(_) => Ok(()),
            Err(_) if core.store.get(&core.key(res, meta_str(obj, "namespace"), meta_str(obj, "name"))).is_none() => Ok(()),
            Err(e) => Err(e),
        }
    }
}
