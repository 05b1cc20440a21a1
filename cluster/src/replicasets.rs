//! The ReplicaSet controller, as kube-controller-manager's (`pkg/controller/replicaset`).
//!
//! For every apps/v1 ReplicaSet, each pass:
//! - claims the active Pods of its namespace (not finished, not being deleted): owned ones its
//!   selector matches are kept, owned ones it no longer matches are released, orphans it
//!   matches are adopted (controller ownerReference), unless the ReplicaSet is being deleted;
//! - creates the missing Pods from `spec.template` (generateName `<replicaset>-`, the template's
//!   labels, annotations and finalizers, a controller ownerReference), at most 500 a pass
//!   (upstream's burst), stopping at the first refusal;
//! - deletes the surplus in upstream's order (`ActivePodsWithRanks`): unscheduled before
//!   scheduled, Pending before Unknown before Running, not ready before ready, lower
//!   `controller.kubernetes.io/pod-deletion-cost` first, Pods sharing a node with more Pods of
//!   the same owner first, ready for less time first (log2 buckets), more restarts first,
//!   newer first;
//! - writes `status` from the claimed Pods (as upstream, before this pass's creates and
//!   deletes): `replicas`, `fullyLabeledReplicas`, `readyReplicas`, `availableReplicas`
//!   (ready for longer than `minReadySeconds`), `observedGeneration`, and a `ReplicaFailure`
//!   condition (`FailedCreate`/`FailedDelete`, the server's message) while creating or
//!   deleting fails.
//!
//! Events `SuccessfulCreate`/`SuccessfulDelete`/`FailedCreate` are recorded on the ReplicaSet.

use super::controller_ref::{Claimant, controller_ref, controller_uid};
use super::{
    Next, Retry, builtin, deleting, instant_at, meta_str, opts, parse_time, pod_available, pod_ready, pod_ready_condition, put, recorder,
    spec_replicas,
};
use apiserver::resources::Resource;
use apiserver::rest::{Core, DeleteOptions, Sub};
use apiserver::selector::LabelSelector;
use chrono::{DateTime, Utc};
use serde_json::{Map, Value, json};
use std::cmp::Ordering;
use std::collections::HashMap;
use std::sync::Arc;
use tokio::time::Instant;

const MANAGER: &str = "replicaset-controller";
/// Most Pods one pass creates or deletes for one ReplicaSet (upstream's `BurstReplicas`).
const BURST: usize = 500;
const DELETION_COST: &str = "controller.kubernetes.io/pod-deletion-cost";

/// The ReplicaSet controller (no state beyond the store: every pass is level-based).
#[derive(Debug, Default)]
pub struct ReplicaSetController {}

/// Whether a commit concerns the ReplicaSet controller: ReplicaSets and Pods.
pub(crate) fn relevant(e: &apiserver::store::Event) -> bool {
    let gr = &e.key.gr;
    (gr.group == "apps" && gr.resource == "replicasets") || (gr.group.is_empty() && gr.resource == "pods")
}

/// Not finished and not being deleted (upstream's `IsPodActive`).
pub(crate) fn pod_active(pod: &Value) -> bool {
    let phase = pod.pointer("/status/phase").and_then(Value::as_str).unwrap_or_default();
    phase != "Succeeded" && phase != "Failed" && !deleting(pod)
}

impl ReplicaSetController {
    /// One pass over every ReplicaSet.
    pub(crate) fn pass(&mut self, core: &Core) -> Next {
        let mut next = Next::default();
        let rs_res = builtin(core, "apps", "v1", "replicasets");
        let sets = core.store.list_shared(&rs_res.group_resource(), None).0;
        if sets.is_empty() {
            return next;
        }
        let pod_res = builtin(core, "", "v1", "pods");
        let mut pods: HashMap<String, Vec<Arc<Value>>> = HashMap::new();
        for p in core.store.list_shared(&pod_res.group_resource(), None).0 {
            pods.entry(meta_str(&p, "namespace").to_string()).or_default().push(p);
        }
        // ReplicaSet uid -> the uid of its own controller (a Deployment), to find siblings.
        let owner_of: HashMap<&str, &str> = sets.iter().map(|rs| (meta_str(rs, "uid"), controller_uid(rs))).collect();
        let pass = Pass { core, rs_res: &rs_res, pod_res: &pod_res, owner_of: &owner_of };
        for rs in &sets {
            let ns_pods = pods.get(meta_str(rs, "namespace")).map(Vec::as_slice).unwrap_or_default();
            next.record(pass.replica_set(rs, ns_pods));
        }
        next
    }
}

struct Pass<'a> {
    core: &'a Core,
    rs_res: &'a Resource,
    pod_res: &'a Resource,
    owner_of: &'a HashMap<&'a str, &'a str>,
}

impl Pass<'_> {
    /// Sync one ReplicaSet; returns when to look again for `minReadySeconds`.
    fn replica_set(&self, rs: &Value, ns_pods: &[Arc<Value>]) -> Result<Option<Instant>, Retry> {
        let selector = LabelSelector::from_object(rs.pointer("/spec/selector").unwrap_or(&Value::Null));
        let active: Vec<Arc<Value>> = ns_pods.iter().filter(|p| pod_active(p)).cloned().collect();
        let claimant = Claimant { owner: rs, api_version: "apps/v1", kind: "ReplicaSet", selector: &selector, manager: MANAGER };
        let owned = claimant.claim(self.core, self.pod_res, &active)?;
        let failure = if deleting(rs) { None } else { self.manage(rs, &owned, ns_pods)? };
        let now = self.core.config.clock.now();
        let status = status(rs, &owned, failure, now);
        if rs.get("status") != Some(&status) {
            let mut new = rs.clone();
            new["status"] = status;
            put(self.core, self.rs_res, new, Sub::Status, MANAGER)?;
        }
        // Look again when the next ready Pod becomes available.
        let min_ready = rs.pointer("/spec/minReadySeconds").and_then(Value::as_i64).unwrap_or(0);
        let soonest = owned
            .iter()
            .filter(|p| pod_ready(p) && !pod_available(p, min_ready, now))
            .filter_map(|p| pod_ready_condition(p).and_then(|c| parse_time(c["lastTransitionTime"].as_str())))
            .min();
        Ok(soonest.map(|t| instant_at(self.core, t + chrono::Duration::seconds(min_ready + 1))))
    }

    /// Create or delete Pods towards `spec.replicas`; `Some(reason, message)` when a create or
    /// delete was refused.
    fn manage(&self, rs: &Value, owned: &[Value], ns_pods: &[Arc<Value>]) -> Result<Option<(String, String)>, Retry> {
        let diff = owned.len() as i64 - spec_replicas(rs) as i64;
        if diff < 0 {
            for _ in 0..(-diff as usize).min(BURST) {
                let pod = pod_from_template(rs);
                match apiserver::rest::wait(self.core.create(self.pod_res, meta_str(rs, "namespace"), pod, &opts(MANAGER))) {
                    Ok(p) => self.event(rs, false, "SuccessfulCreate", &format!("Created pod: {}", meta_str(&p, "name"))),
                    Err(e) => {
                        self.event(rs, true, "FailedCreate", &format!("Error creating: {}", e.message));
                        return Ok(Some(("FailedCreate".into(), e.message)));
                    }
                }
            }
        } else if diff > 0 {
            let related = self.related_pods(rs, ns_pods);
            for pod in pods_to_delete(owned, &related, diff as usize, self.core.config.clock.now()).into_iter().take(BURST) {
                let name = meta_str(pod, "name");
                let o = DeleteOptions { uid: Some(meta_str(pod, "uid").into()), ..Default::default() };
                match self.core.delete(self.pod_res, meta_str(pod, "namespace"), name, &o) {
                    Ok(_) => self.event(rs, false, "SuccessfulDelete", &format!("Deleted pod: {name}")),
                    Err(e) if e.code == 404 => {}
                    Err(e) if e.code == 409 => return Err(Retry),
                    Err(e) => {
                        self.event(rs, true, "FailedDelete", &format!("Error deleting: {}", e.message));
                        return Ok(Some(("FailedDelete".into(), e.message)));
                    }
                }
            }
        }
        Ok(None)
    }

    /// Pods of every ReplicaSet with the same controller as `rs` (its siblings under one
    /// Deployment), or of `rs` alone when it has no controller.
    fn related_pods<'p>(&self, rs: &Value, ns_pods: &'p [Arc<Value>]) -> Vec<&'p Value> {
        let (uid, owner) = (meta_str(rs, "uid"), controller_uid(rs));
        ns_pods
            .iter()
            .map(|p| &**p)
            .filter(|p| {
                let by = controller_uid(p);
                by == uid || (!owner.is_empty() && self.owner_of.get(by).is_some_and(|o| *o == owner))
            })
            .collect()
    }

    fn event(&self, rs: &Value, warning: bool, reason: &str, message: &str) {
        let subject = recorder::Subject { obj: rs, api_version: "apps/v1", kind: "ReplicaSet" };
        recorder::record(self.core, MANAGER, subject, warning, reason, message);
    }
}

/// A Pod from the ReplicaSet's template (upstream's `GetPodFromTemplate`).
fn pod_from_template(rs: &Value) -> Value {
    let template = rs.pointer("/spec/template").cloned().unwrap_or_default();
    let mut meta = Map::new();
    meta.insert("generateName".into(), json!(format!("{}-", meta_str(rs, "name"))));
    for field in ["labels", "annotations", "finalizers"] {
        if let Some(v) = template.pointer(&format!("/metadata/{field}")).filter(|v| !v.is_null()) {
            meta.insert(field.into(), v.clone());
        }
    }
    meta.insert("ownerReferences".into(), json!([controller_ref(rs, "apps/v1", "ReplicaSet")]));
    json!({"apiVersion": "v1", "kind": "Pod", "metadata": meta, "spec": template.get("spec").cloned().unwrap_or_else(|| json!({}))})
}

/// `status` from the claimed Pods (upstream's `calculateStatus`); zero counts are left out as
/// Go's `omitempty` leaves them out.
fn status(rs: &Value, owned: &[Value], failure: Option<(String, String)>, now: DateTime<Utc>) -> Value {
    let template_labels = rs.pointer("/spec/template/metadata/labels").and_then(Value::as_object);
    let min_ready = rs.pointer("/spec/minReadySeconds").and_then(Value::as_i64).unwrap_or(0);
    let fully_labeled = owned
        .iter()
        .filter(|p| {
            let labels = p.pointer("/metadata/labels").and_then(Value::as_object);
            template_labels.into_iter().flatten().all(|(k, v)| labels.and_then(|l| l.get(k)) == Some(v))
        })
        .count();
    let ready = owned.iter().filter(|p| pod_ready(p)).count();
    let available = owned.iter().filter(|p| pod_available(p, min_ready, now)).count();

    let mut status = rs.get("status").cloned().filter(Value::is_object).unwrap_or_else(|| json!({}));
    let mut conditions: Vec<Value> = status.get("conditions").and_then(Value::as_array).cloned().unwrap_or_default();
    let has_failure = conditions.iter().any(|c| c["type"] == "ReplicaFailure");
    match failure {
        Some((reason, message)) if !has_failure => conditions.push(json!({
            "type": "ReplicaFailure", "status": "True", "lastTransitionTime": apiserver::clock::timestamp(now),
            "reason": reason, "message": message,
        })),
        None if has_failure => conditions.retain(|c| c["type"] != "ReplicaFailure"),
        _ => {}
    }
    let m = status.as_object_mut().expect("object");
    m.insert("replicas".into(), json!(owned.len()));
    for (field, n) in [("fullyLabeledReplicas", fully_labeled), ("readyReplicas", ready), ("availableReplicas", available)] {
        if n > 0 {
            m.insert(field.into(), json!(n));
        } else {
            m.remove(field);
        }
    }
    if let Some(g) = rs.pointer("/metadata/generation").filter(|g| g.as_i64().is_some_and(|g| g > 0)) {
        m.insert("observedGeneration".into(), g.clone());
    }
    if conditions.is_empty() {
        m.remove("conditions");
    } else {
        m.insert("conditions".into(), json!(conditions));
    }
    status
}

/// Which `count` of `owned` to delete first: upstream's `getPodsToDelete`, ranking each Pod by
/// how many related active Pods share its node.
fn pods_to_delete<'p>(owned: &'p [Value], related: &[&Value], count: usize, now: DateTime<Utc>) -> Vec<&'p Value> {
    let node = |p: &Value| p.pointer("/spec/nodeName").and_then(Value::as_str).unwrap_or_default().to_string();
    let mut on_node: HashMap<String, usize> = HashMap::new();
    for p in related.iter().filter(|p| pod_active(p)) {
        *on_node.entry(node(p)).or_default() += 1;
    }
    let mut ranked: Vec<(&Value, usize)> = owned.iter().map(|p| (p, on_node.get(&node(p)).copied().unwrap_or(0))).collect();
    if count < ranked.len() {
        ranked.sort_by(|a, b| deletion_order(a, b, now));
    }
    ranked.into_iter().take(count).map(|(p, _)| p).collect()
}

/// Upstream's `ActivePodsWithRanks.Less` (with `LogarithmicScaleDown` and `PodDeletionCost`,
/// both on by default): `Less` means deleted first.
fn deletion_order(a: &(&Value, usize), b: &(&Value, usize), now: DateTime<Utc>) -> Ordering {
    let (pa, pb): (&Value, &Value) = (a.0, b.0);
    let (rank_a, rank_b) = (a.1, b.1);
    let node = |p: &Value| p.pointer("/spec/nodeName").and_then(Value::as_str).unwrap_or_default().to_string();
    let (na, nb) = (node(pa), node(pb));
    if na != nb && (na.is_empty() || nb.is_empty()) {
        return if na.is_empty() { Ordering::Less } else { Ordering::Greater };
    }
    let phase = |p: &Value| match p.pointer("/status/phase").and_then(Value::as_str).unwrap_or_default() {
        "Pending" => 0,
        "Unknown" => 1,
        "Running" => 2,
        _ => 0, // unset phases count as Pending, as a Go map lookup of a missing key gives 0
    };
    let by_phase = phase(pa).cmp(&phase(pb));
    if by_phase != Ordering::Equal {
        return by_phase;
    }
    let (ra, rb) = (pod_ready(pa), pod_ready(pb));
    if ra != rb {
        return if !ra { Ordering::Less } else { Ordering::Greater };
    }
    let cost = |p: &Value| {
        p.pointer("/metadata/annotations").and_then(|a| a.get(DELETION_COST)).and_then(Value::as_str).and_then(|c| c.parse::<i32>().ok()).unwrap_or(0)
    };
    let by_cost = cost(pa).cmp(&cost(pb));
    if by_cost != Ordering::Equal {
        return by_cost;
    }
    if rank_a != rank_b {
        return rank_b.cmp(&rank_a); // more colocated first
    }
    let uid_order = || meta_str(pa, "uid").cmp(meta_str(pb, "uid"));
    if ra && rb {
        let since = |p: &Value| pod_ready_condition(p).and_then(|c| parse_time(c["lastTransitionTime"].as_str()));
        let (ta, tb) = (since(pa), since(pb));
        if ta != tb {
            return newer_first(ta, tb, now, uid_order);
        }
    }
    let restarts = |p: &Value| {
        p.pointer("/status/containerStatuses")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .filter_map(|c| c["restartCount"].as_i64())
            .max()
            .unwrap_or(0)
    };
    let by_restarts = restarts(pb).cmp(&restarts(pa));
    if by_restarts != Ordering::Equal {
        return by_restarts;
    }
    let created = |p: &Value| parse_time(p.pointer("/metadata/creationTimestamp").and_then(Value::as_str));
    let (ca, cb) = (created(pa), created(pb));
    if ca != cb {
        return newer_first(ca, cb, now, uid_order);
    }
    Ordering::Equal
}

/// Zero (unknown) times first, then newer before older by power-of-two buckets of age (equal
/// buckets: by uid), as upstream's `logarithmicRankDiff`.
fn newer_first(a: Option<DateTime<Utc>>, b: Option<DateTime<Utc>>, now: DateTime<Utc>, by_uid: impl Fn() -> Ordering) -> Ordering {
    let (Some(a), Some(b)) = (a, b) else {
        return if a.is_none() { Ordering::Less } else { Ordering::Greater };
    };
    let bucket = |t: DateTime<Utc>| {
        let age = (now - t).num_nanoseconds().unwrap_or(i64::MAX);
        if age > 0 { (age as f64).log2() as i64 } else { -1 }
    };
    match bucket(a).cmp(&bucket(b)) {
        Ordering::Equal => by_uid(),
        o => o,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pod(name: &str, node: &str, phase: &str, ready_since: Option<&str>, created: &str) -> Value {
        let mut p =
            json!({"metadata": {"name": name, "uid": name, "creationTimestamp": created}, "spec": {"nodeName": node}, "status": {"phase": phase}});
        if let Some(t) = ready_since {
            p["status"]["conditions"] = json!([{"type": "Ready", "status": "True", "lastTransitionTime": t}]);
        }
        p
    }

    fn order(pods: &[Value], now: &str) -> Vec<String> {
        let now = DateTime::parse_from_rfc3339(now).unwrap().with_timezone(&Utc);
        pods_to_delete(pods, &[], pods.len() - 1, now).iter().map(|p| meta_str(p, "name").to_string()).collect()
    }

    #[test]
    fn surplus_pods_go_unscheduled_then_pending_then_not_ready_then_newest_ready() {
        let t = "2030-01-01T00:00:00Z";
        let pods = vec![
            pod("old-ready", "node-1", "Running", Some("2030-01-01T00:00:01Z"), t),
            pod("new-ready", "node-1", "Running", Some("2030-01-01T00:59:00Z"), t),
            pod("not-ready", "node-1", "Running", None, t),
            pod("pending", "node-1", "Pending", None, t),
            pod("unscheduled", "", "Pending", None, t),
        ];
        assert_eq!(order(&pods, "2030-01-01T01:00:00Z"), ["unscheduled", "pending", "not-ready", "new-ready"]);
    }

    #[test]
    fn pods_with_a_lower_deletion_cost_go_first() {
        let t = "2030-01-01T00:00:00Z";
        let mut cheap = pod("cheap", "node-1", "Running", None, t);
        cheap["metadata"]["annotations"] = json!({DELETION_COST: "-5"});
        let pods = vec![pod("plain", "node-1", "Running", None, t), cheap];
        assert_eq!(order(&pods, "2030-01-01T01:00:00Z"), ["cheap"]);
    }

    #[test]
    fn status_counts_ready_and_available_after_min_ready_seconds() {
        let rs = json!({"metadata": {"generation": 3}, "spec": {"replicas": 2, "minReadySeconds": 10, "template": {"metadata": {"labels": {"app": "a"}}}}});
        let mut a = pod("a", "n", "Running", Some("2030-01-01T00:00:00Z"), "2030-01-01T00:00:00Z");
        a["metadata"]["labels"] = json!({"app": "a"});
        let b = pod("b", "n", "Running", Some("2030-01-01T00:00:55Z"), "2030-01-01T00:00:00Z");
        let now = DateTime::parse_from_rfc3339("2030-01-01T00:01:00Z").unwrap().with_timezone(&Utc);
        let s = status(&rs, &[a, b], None, now);
        assert_eq!(s, json!({"replicas": 2, "fullyLabeledReplicas": 1, "readyReplicas": 2, "availableReplicas": 1, "observedGeneration": 3}));
        let failed = status(&rs, &[], Some(("FailedCreate".into(), "pods \"x\" is forbidden".into())), now);
        assert_eq!(failed["conditions"][0]["type"], "ReplicaFailure");
        assert_eq!(failed["conditions"][0]["reason"], "FailedCreate");
    }
}
