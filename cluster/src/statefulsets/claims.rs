//! A StatefulSet's PersistentVolumeClaims (upstream's `stateful_pod_control.go` and the claim
//! half of `stateful_set_utils.go`): created before their Pod, and owned according to
//! `persistentVolumeClaimRetentionPolicy` so the garbage collector deletes what the policy
//! says: `Retain`/`Retain` no owner, `whenDeleted: Delete` the set as controller,
//! `whenScaled: Delete` the Pod as controller once the Pod's ordinal is scaled away.

use super::MANAGER;
use super::identity::{claim_name, claim_templates, claims, ordinal, start_ordinal};
use crate::controller_ref::controller_ref;
use crate::{Retry, deleting, meta_str, opts, put, spec_replicas};
use apiserver::resources::Resource;
use apiserver::rest::{Core, Sub};
use serde_json::Value;

/// `whenDeleted` and `whenScaled` are `Delete` (default `Retain` both).
struct Policy {
    when_deleted: bool,
    when_scaled: bool,
}

fn policy(set: &Value) -> Policy {
    let p = set.pointer("/spec/persistentVolumeClaimRetentionPolicy");
    let delete = |field: &str| p.and_then(|p| p.get(field)).and_then(Value::as_str) == Some("Delete");
    Policy { when_deleted: delete("whenDeleted"), when_scaled: delete("whenScaled") }
}

fn in_ordinal_range(set: &Value, pod: &Value) -> bool {
    let (ord, start) = (ordinal(pod), start_ordinal(set));
    ord >= start && ord < start + i64::from(spec_replicas(set))
}

fn refs(claim: &Value) -> Vec<Value> {
    claim.pointer("/metadata/ownerReferences").and_then(Value::as_array).cloned().unwrap_or_default()
}

/// A reference naming `obj` (kind and name) whatever its uid, upstream's `matchesRef`.
fn matches_ref(r: &Value, obj: &Value, api_version: &str, kind: &str) -> bool {
    r["apiVersion"] == api_version && r["kind"] == kind && r["name"].as_str() == Some(meta_str(obj, "name"))
}

fn has_owner(claim: &Value, owner: &Value) -> bool {
    refs(claim).iter().any(|r| r["uid"].as_str() == Some(meta_str(owner, "uid")))
}

fn has_stale_ref(claim: &Value, obj: &Value, api_version: &str, kind: &str) -> bool {
    refs(claim).iter().find(|r| matches_ref(r, obj, api_version, kind)).is_some_and(|r| r["uid"].as_str() != Some(meta_str(obj, "uid")))
}

/// Upstream's `hasUnexpectedController`.
fn has_unexpected_controller(claim: &Value, set: &Value, pod: &Value) -> bool {
    let p = policy(set);
    if !p.when_deleted && !p.when_scaled {
        return false;
    }
    refs(claim).iter().any(|r| {
        if matches_ref(r, set, "apps/v1", "StatefulSet") {
            return r["uid"].as_str() != Some(meta_str(set, "uid"));
        }
        if matches_ref(r, pod, "v1", "Pod") {
            return r["uid"].as_str() != Some(meta_str(pod, "uid"));
        }
        r["controller"] == true
    })
}

/// Upstream's `isClaimOwnerUpToDate`.
fn owner_up_to_date(claim: &Value, set: &Value, pod: &Value) -> bool {
    if has_stale_ref(claim, set, "apps/v1", "StatefulSet") || has_stale_ref(claim, pod, "v1", "Pod") {
        return true;
    }
    if has_unexpected_controller(claim, set, pod) {
        return !(has_owner(claim, set) || has_owner(claim, pod));
    }
    let (set_uid, pod_uid) = (meta_str(set, "uid"), meta_str(pod, "uid"));
    if refs(claim).iter().any(|r| (r["uid"].as_str() == Some(set_uid) || r["uid"].as_str() == Some(pod_uid)) && r["controller"] != true) {
        return false;
    }
    let p = policy(set);
    let scaled_down = !in_ordinal_range(set, pod);
    let (want_set, want_pod) = match (p.when_scaled, p.when_deleted) {
        (false, false) => (false, false),
        (false, true) => (true, false),
        (true, false) => (false, scaled_down),
        (true, true) => (!scaled_down, scaled_down),
    };
    has_owner(claim, set) == want_set && has_owner(claim, pod) == want_pod
}

/// Upstream's `updateClaimOwnerRefForSetAndPod`.
fn update_owner_refs(claim: &mut Value, set: &Value, pod: &Value) {
    let unexpected = has_unexpected_controller(claim, set, pod);
    let mut new: Vec<Value> =
        refs(claim).into_iter().filter(|r| !(matches_ref(r, set, "apps/v1", "StatefulSet") || matches_ref(r, pod, "v1", "Pod"))).collect();
    if !unexpected {
        let p = policy(set);
        let scaled_down = !in_ordinal_range(set, pod);
        if p.when_deleted && (!p.when_scaled || !scaled_down) {
            new.push(controller_ref(set, "apps/v1", "StatefulSet"));
        }
        if p.when_scaled && scaled_down {
            new.push(controller_ref(pod, "v1", "Pod"));
        }
    }
    let meta = claim["metadata"].as_object_mut().expect("metadata");
    if new.is_empty() {
        meta.remove("ownerReferences");
    } else {
        meta.insert("ownerReferences".into(), Value::Array(new));
    }
}

/// The claims of one set's Pods, and where to write them.
pub(crate) struct Claims<'a> {
    pub core: &'a Core,
    pub res: &'a Resource,
}

impl Claims<'_> {
    fn get(&self, ns: &str, name: &str) -> Option<Value> {
        self.core.store.get(&self.core.key(self.res, ns, name))
    }

    /// Upstream's `createPersistentVolumeClaims`: the Pod's missing claims; `Err` when one
    /// could not be made or is being deleted (the Pod must wait).
    pub(crate) fn create_missing(&self, set: &Value, pod: &Value, events: &mut Vec<(bool, String, String)>) -> Result<(), Retry> {
        let mut failed = false;
        for claim in claims(set, ordinal(pod)) {
            let (ns, name) = (meta_str(&claim, "namespace").to_string(), meta_str(&claim, "name").to_string());
            match self.get(&ns, &name) {
                Some(existing) if deleting(&existing) => failed = true,
                Some(_) => {}
                None => match apiserver::rest::wait(self.core.create(self.res, &ns, claim, &opts(MANAGER))) {
                    Ok(_) => events.push((
                        false,
                        "SuccessfulCreate".into(),
                        format!("Create Claim {name} Pod {} in StatefulSet {} success", meta_str(pod, "name"), meta_str(set, "name")),
                    )),
                    Err(e) if e.code == 409 => failed = true,
                    Err(e) => {
                        events.push((
                            true,
                            "FailedCreate".into(),
                            format!(
                                "Create Claim {name} for Pod {} in StatefulSet {} failed error: failed to create PVC {name}: {}",
                                meta_str(pod, "name"),
                                meta_str(set, "name"),
                                e.message
                            ),
                        ));
                        failed = true;
                    }
                },
            }
        }
        if failed { Err(Retry) } else { Ok(()) }
    }

    /// Upstream's `ClaimsMatchRetentionPolicy`.
    pub(crate) fn match_policy(&self, set: &Value, pod: &Value) -> bool {
        let ns = meta_str(set, "namespace");
        claim_templates(set).iter().all(|t| self.get(ns, &claim_name(set, t, ordinal(pod))).is_none_or(|c| owner_up_to_date(&c, set, pod)))
    }

    /// Upstream's `UpdatePodClaimForRetentionPolicy`.
    pub(crate) fn update_for_policy(&self, set: &Value, pod: &Value) -> Result<(), Retry> {
        let ns = meta_str(set, "namespace");
        for t in claim_templates(set) {
            let Some(mut claim) = self.get(ns, &claim_name(set, &t, ordinal(pod))) else { continue };
            if !owner_up_to_date(&claim, set, pod) {
                update_owner_refs(&mut claim, set, pod);
                put(self.core, self.res, claim, Sub::Main, MANAGER)?;
            }
        }
        Ok(())
    }

    /// Upstream's `PodClaimIsStale`: with `whenScaled: Delete`, a claim still owned by an
    /// earlier Pod of the same name blocks the new Pod until the garbage collector is done.
    pub(crate) fn stale(&self, set: &Value, pod: &Value) -> bool {
        if !policy(set).when_scaled {
            return false;
        }
        claims(set, ordinal(pod))
            .iter()
            .filter_map(|c| self.get(meta_str(c, "namespace"), meta_str(c, "name")))
            .any(|c| has_stale_ref(&c, pod, "v1", "Pod"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn set(when_deleted: &str, when_scaled: &str, replicas: i64) -> Value {
        json!({
            "metadata": {"name": "web", "uid": "set-uid"},
            "spec": {"replicas": replicas, "persistentVolumeClaimRetentionPolicy": {"whenDeleted": when_deleted, "whenScaled": when_scaled}},
        })
    }

    fn pod(ordinal: i64) -> Value {
        json!({"metadata": {"name": format!("web-{ordinal}"), "uid": format!("pod-{ordinal}")}})
    }

    fn owners_after_update(set: &Value, pod: &Value) -> Vec<String> {
        let mut claim = json!({"metadata": {"name": "www-web-0"}});
        update_owner_refs(&mut claim, set, pod);
        assert!(owner_up_to_date(&claim, set, pod));
        refs(&claim).iter().map(|r| r["kind"].as_str().unwrap().to_string()).collect()
    }

    #[test]
    fn owner_references_follow_the_retention_policy() {
        assert!(owners_after_update(&set("Retain", "Retain", 1), &pod(0)).is_empty());
        assert_eq!(owners_after_update(&set("Delete", "Retain", 1), &pod(0)), ["StatefulSet"]);
        assert!(owners_after_update(&set("Retain", "Delete", 1), &pod(0)).is_empty());
        assert_eq!(owners_after_update(&set("Retain", "Delete", 1), &pod(3)), ["Pod"]);
        assert_eq!(owners_after_update(&set("Delete", "Delete", 1), &pod(0)), ["StatefulSet"]);
        assert_eq!(owners_after_update(&set("Delete", "Delete", 1), &pod(3)), ["Pod"]);
    }

    #[test]
    fn a_claim_owned_by_an_earlier_pod_of_the_same_name_is_stale() {
        let claim =
            json!({"metadata": {"ownerReferences": [{"apiVersion": "v1", "kind": "Pod", "name": "web-0", "uid": "old", "controller": true}]}});
        assert!(has_stale_ref(&claim, &pod(0), "v1", "Pod"));
        assert!(!has_stale_ref(&claim, &pod(1), "v1", "Pod"));
    }
}
