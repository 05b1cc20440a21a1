//! The garbage collector, as kube-controller-manager's: dependents name their owners in
//! `metadata.ownerReferences` by uid.
//!
//! - A dependent none of whose owners still exists is deleted (Background propagation: the
//!   owner went first, dependents follow). Owners are looked up live by kind, name and uid
//!   before anything is deleted, so an owner created after the scan started is never missed.
//! - An owner deleted with `propagationPolicy=Foreground` carries the `foregroundDeletion`
//!   finalizer: its dependents are deleted (in foreground too, so the chain unwinds from the
//!   bottom), and the finalizer is removed once no dependent with `blockOwnerDeletion: true`
//!   is left; the API server then removes the owner.
//! - An owner deleted with `Orphan` carries the `orphan` finalizer: the references to it are
//!   removed from its dependents, then the finalizer.
//! - A dependent with a live owner and a gone (or foreground-deleting) one loses only the
//!   references to the latter, as upstream.
//!
//! Every pass scans all objects, so dependents of owners deleted while the collector was not
//! running are found at start and on every resync.

use super::{Next, deleting, finalizers, meta_str, opts, stored_resources};
use apiserver::resources::Resource;
use apiserver::rest::{Core, DeleteOptions, Sub};
use serde_json::{Value, json};
use std::collections::HashMap;
use std::sync::Arc;

const MANAGER: &str = "generic-garbage-collector";
const FOREGROUND: &str = "foregroundDeletion";
const ORPHAN: &str = "orphan";

/// The garbage collector's state (none beyond the store: every pass is level-based).
#[derive(Debug, Default)]
pub struct GarbageCollector {}

enum Owner {
    /// Exists and is not being deleted in the foreground.
    Solid,
    /// Gone (or never existed).
    Absent,
    /// Being deleted in the foreground: waits for its dependents.
    Waiting,
}

fn refs(obj: &Value) -> Vec<Value> {
    obj.pointer("/metadata/ownerReferences").and_then(Value::as_array).cloned().unwrap_or_default()
}

/// Whether a commit may concern the collector: an object went away (it may have owned
/// something), an object appeared with ownerReferences (its owner may be gone already), its
/// ownerReferences changed, or it is being deleted. Other writes to a dependent (a Job's or
/// Pod's status, many per object) cannot make garbage and do not cost a pass.
pub(crate) fn relevant(e: &apiserver::store::Event) -> bool {
    use apiserver::store::EventType;
    match (e.kind, e.prev.as_deref()) {
        (EventType::Deleted, _) => true,
        (EventType::Modified, Some(prev)) => refs(prev) != refs(&e.object) || deleting(prev) || deleting(&e.object),
        _ => !refs(&e.object).is_empty() || deleting(&e.object),
    }
}

impl GarbageCollector {
    /// One pass over every object.
    pub(crate) fn pass(&mut self, core: &Core) -> Next {
        let mut next = Next::default();
        let mut items: Vec<(Arc<Resource>, Arc<Value>)> = vec![];
        for res in stored_resources(core) {
            let res = Arc::new(res);
            for obj in core.store.list_shared(&res.group_resource(), None).0 {
                items.push((res.clone(), obj));
            }
        }
        // owner uid -> indexes of dependents referencing it
        let mut dependents: HashMap<String, Vec<usize>> = HashMap::new();
        for (i, (_, obj)) in items.iter().enumerate() {
            for r in refs(obj) {
                if let Some(uid) = r.get("uid").and_then(Value::as_str) {
                    dependents.entry(uid.to_string()).or_default().push(i);
                }
            }
        }

        // Owners being deleted with a propagation finalizer.
        for (res, owner) in &items {
            if !deleting(owner) {
                continue;
            }
            let fins = finalizers(owner);
            let uid = meta_str(owner, "uid");
            let deps = dependents.get(uid).map(Vec::as_slice).unwrap_or_default();
            if fins.iter().any(|f| f == ORPHAN) {
                let mut all_done = true;
                for &d in deps {
                    let (dres, dep) = &items[d];
                    all_done &= self.drop_refs(core, dres, dep, &[uid.to_string()]);
                }
                if all_done {
                    next.retry |= !remove_finalizer(core, res, owner, ORPHAN);
                } else {
                    next.retry = true;
                }
            } else if fins.iter().any(|f| f == FOREGROUND) {
                let blocked = deps.iter().any(|&d| refs(&items[d].1).iter().any(|r| r["uid"] == uid && r["blockOwnerDeletion"] == json!(true)));
                if !blocked {
                    next.retry |= !remove_finalizer(core, res, owner, FOREGROUND);
                }
            }
        }

        // Dependents whose owners are gone or deleting in the foreground.
        for (res, listed) in &items {
            if refs(listed).is_empty() {
                continue;
            }
            // Re-read: this pass may have changed it (orphaning removes references). Deletes
            // carry a resourceVersion precondition, so a dependent that changes in between is
            // left for the next pass.
            let Some(dep) = core.store.get_shared(&core.key(res, meta_str(listed, "namespace"), meta_str(listed, "name"))) else { continue };
            let dep = &dep;
            let rs = refs(dep);
            if rs.is_empty() || deleting(dep) {
                continue;
            }
            let (mut solid, mut gone, mut waiting) = (0, vec![], vec![]);
            for r in &rs {
                let uid = r.get("uid").and_then(Value::as_str).unwrap_or_default().to_string();
                match owner_state(core, res, dep, r) {
                    Owner::Solid => solid += 1,
                    Owner::Absent => gone.push(uid),
                    Owner::Waiting => waiting.push(uid),
                }
            }
            if solid == 0 {
                let propagation = if waiting.is_empty() { "Background" } else { "Foreground" };
                let o = DeleteOptions {
                    propagation: Some(propagation.into()),
                    uid: Some(meta_str(dep, "uid").into()),
                    resource_version: Some(meta_str(dep, "resourceVersion").into()),
                    ..Default::default()
                };
                match core.delete(res, meta_str(dep, "namespace"), meta_str(dep, "name"), &o) {
                    Ok(_) => tracing::debug!(name = meta_str(dep, "name"), propagation, "garbage collector deleted a dependent"),
                    Err(e) if e.code == 404 => {}
                    // Changed since listed (a status write, say): look again soon, as that
                    // change alone need not wake the collector.
                    Err(e) if e.code == 409 => next.retry = true,
                    Err(e) => {
                        tracing::warn!(error = %e.message, "garbage collector could not delete a dependent");
                        next.retry = true;
                    }
                }
            } else if !gone.is_empty() || !waiting.is_empty() {
                let drop: Vec<String> = gone.into_iter().chain(waiting).collect();
                next.retry |= !self.drop_refs(core, res, dep, &drop);
            }
        }
        next
    }

    /// Remove the ownerReferences with these uids from `dep`. True when done (or nothing to do).
    fn drop_refs(&self, core: &Core, res: &Resource, dep: &Value, uids: &[String]) -> bool {
        let before = refs(dep);
        let kept: Vec<Value> = before.iter().filter(|r| !uids.iter().any(|u| r["uid"] == json!(u))).cloned().collect();
        if kept.len() == before.len() {
            return true;
        }
        let mut new = dep.clone();
        let m = new["metadata"].as_object_mut().expect("metadata");
        if kept.is_empty() {
            m.remove("ownerReferences");
        } else {
            m.insert("ownerReferences".into(), json!(kept));
        }
        match apiserver::rest::wait(core.update(res, meta_str(dep, "namespace"), meta_str(dep, "name"), new, Sub::Main, &opts(MANAGER))) {
            Ok(_) => true,
            Err(e) if e.code == 404 => true,
            Err(e) => {
                tracing::debug!(error = %e.message, "garbage collector could not update ownerReferences");
                false
            }
        }
    }
}

/// Remove one finalizer (the API server deletes the object if it was the last). True when done.
fn remove_finalizer(core: &Core, res: &Resource, obj: &Value, finalizer: &str) -> bool {
    let mut new = obj.clone();
    let kept: Vec<String> = finalizers(obj).into_iter().filter(|f| f != finalizer).collect();
    new["metadata"]["finalizers"] = json!(kept);
    match apiserver::rest::wait(core.update(res, meta_str(obj, "namespace"), meta_str(obj, "name"), new, Sub::Main, &opts(MANAGER))) {
        Ok(_) => true,
        Err(e) if e.code == 404 => true,
        Err(e) => {
            tracing::debug!(error = %e.message, "garbage collector could not remove a finalizer");
            false
        }
    }
}

/// Look the owner up live (kind, name, uid): a namespaced dependent's owners live in its
/// namespace or are cluster-scoped.
fn owner_state(core: &Core, dep_res: &Resource, dep: &Value, r: &Value) -> Owner {
    let api_version = r.get("apiVersion").and_then(Value::as_str).unwrap_or_default();
    let group = api_version.rsplit_once('/').map(|(g, _)| g).unwrap_or("");
    let kind = r.get("kind").and_then(Value::as_str).unwrap_or_default();
    let name = r.get("name").and_then(Value::as_str).unwrap_or_default();
    let uid = r.get("uid").and_then(Value::as_str).unwrap_or_default();
    // An unknown kind may be a CRD not (yet) installed: keep the dependent, as upstream does
    // while it cannot resolve the owner's resource.
    let Some(owner_res) = core.registry.find_kind(group, kind) else { return Owner::Solid };
    if owner_res.namespaced && !dep_res.namespaced {
        return Owner::Absent; // a cluster-scoped object cannot be owned by a namespaced one
    }
    let key = core.key(&owner_res, meta_str(dep, "namespace"), name);
    match core.store.get(&key) {
        Some(owner) if meta_str(&owner, "uid") == uid => {
            if deleting(&owner) && finalizers(&owner).iter().any(|f| f == FOREGROUND) {
                Owner::Waiting
            } else {
                Owner::Solid
            }
        }
        _ => Owner::Absent,
    }
}
