//! A Deployment's `status` as upstream computes it (`calculateStatus`, `syncRolloutStatus`):
//! counts summed over its ReplicaSets, the `Available` condition (at least replicas -
//! maxUnavailable available), and the `Progressing` condition that tells a rollout's story
//! (`NewReplicaSetCreated`/`FoundNewReplicaSet` → `ReplicaSetUpdated` on every step →
//! `NewReplicaSetAvailable`, or `ProgressDeadlineExceeded` when no step was made for
//! `progressDeadlineSeconds`; `DeploymentPaused`/`DeploymentResumed` around a pause).

use super::{Rollout, arithmetic};
use crate::{instant_at, parse_time, spec_replicas, status_count};
use chrono::{DateTime, Utc};
use serde_json::{Value, json};
use tokio::time::Instant;

/// `progressDeadlineSeconds` set and not "never" (MaxInt32).
pub(super) fn has_progress_deadline(d: &Value) -> bool {
    d.pointer("/spec/progressDeadlineSeconds").and_then(Value::as_i64).is_some_and(|s| s != i64::from(i32::MAX))
}

fn conditions(obj: &Value) -> &[Value] {
    obj.pointer("/status/conditions").and_then(Value::as_array).map(Vec::as_slice).unwrap_or_default()
}

/// The Deployment's condition of this type.
pub(super) fn condition<'v>(d: &'v Value, kind: &str) -> Option<&'v Value> {
    conditions(d).iter().find(|c| c["type"] == kind)
}

pub(super) fn new_condition(kind: &str, status: &str, reason: &str, message: &str, now: DateTime<Utc>) -> Value {
    let ts = apiserver::clock::timestamp(now);
    json!({"type": kind, "status": status, "lastUpdateTime": ts, "lastTransitionTime": ts, "reason": reason, "message": message})
}

/// Upstream's `SetDeploymentCondition`: same status and reason, nothing changes; same
/// status, the transition time stays; the condition moves to the end.
pub(super) fn set_condition(d: &mut Value, mut c: Value) {
    if let Some(current) = condition(d, c["type"].as_str().unwrap_or_default()) {
        if current["status"] == c["status"] && current["reason"] == c["reason"] {
            return;
        }
        if current["status"] == c["status"] {
            c["lastTransitionTime"] = current["lastTransitionTime"].clone();
        }
    }
    remove_condition(d, c["type"].as_str().unwrap_or_default());
    d["status"]["conditions"].as_array_mut().expect("just set").push(c);
}

fn remove_condition(d: &mut Value, kind: &str) {
    let mut kept: Vec<Value> = conditions(d).to_vec();
    kept.retain(|c| c["type"] != kind);
    d["status"]["conditions"] = json!(kept);
}

/// `DeploymentComplete`: every replica updated and available, the latest spec observed.
pub(super) fn complete(d: &Value, status: &Value) -> bool {
    let replicas = spec_replicas(d);
    let n = |f: &str| status.get(f).and_then(Value::as_i64).unwrap_or(0) as i32;
    let generation = d.pointer("/metadata/generation").and_then(Value::as_i64).unwrap_or(0);
    n("updatedReplicas") == replicas
        && n("replicas") == replicas
        && n("availableReplicas") == replicas
        && status.get("observedGeneration").and_then(Value::as_i64).unwrap_or(0) >= generation
}

/// `DeploymentProgressing`: more updated, fewer old, more ready or more available replicas.
fn progressing(old: &Value, new: &Value) -> bool {
    let n = |s: &Value, f: &str| s.get(f).and_then(Value::as_i64).unwrap_or(0);
    n(new, "updatedReplicas") > n(old, "updatedReplicas")
        || n(new, "replicas") - n(new, "updatedReplicas") < n(old, "replicas") - n(old, "updatedReplicas")
        || n(new, "readyReplicas") > n(old, "readyReplicas")
        || n(new, "availableReplicas") > n(old, "availableReplicas")
}

/// When the `Progressing` condition's last update is `progressDeadlineSeconds` old.
fn deadline(d: &Value, progressing: &Value) -> Option<DateTime<Utc>> {
    let seconds = d.pointer("/spec/progressDeadlineSeconds").and_then(Value::as_i64)?;
    Some(parse_time(progressing["lastUpdateTime"].as_str())? + chrono::Duration::seconds(seconds))
}

impl Rollout<'_> {
    /// Upstream's `checkPausedConditions`.
    pub(super) fn check_paused_conditions(&mut self) {
        if !has_progress_deadline(&self.d) {
            return;
        }
        let reason = condition(&self.d, "Progressing").map(|c| c["reason"].clone());
        if reason.as_ref().is_some_and(|r| r == "ProgressDeadlineExceeded") {
            return;
        }
        let paused_condition = reason.is_some_and(|r| r == "DeploymentPaused");
        let paused = self.d.pointer("/spec/paused") == Some(&json!(true));
        if paused && !paused_condition {
            let c = new_condition("Progressing", "Unknown", "DeploymentPaused", "Deployment is paused", self.now);
            set_condition(&mut self.d, c);
        } else if !paused && paused_condition {
            let c = new_condition("Progressing", "Unknown", "DeploymentResumed", "Deployment is resumed", self.now);
            set_condition(&mut self.d, c);
        }
    }

    /// Upstream's `calculateStatus`; zero counts are left out as Go's `omitempty` does.
    pub(super) fn calculate_status(&self, new: Option<usize>) -> Value {
        let all = 0..self.sets.len();
        let available = self.status_sum(all.clone(), "availableReplicas");
        let unavailable = (self.spec_sum(all.clone()) - available).max(0);
        let mut status = json!({});
        let counts = [
            ("observedGeneration", self.d.pointer("/metadata/generation").and_then(Value::as_i64).unwrap_or(0)),
            ("replicas", i64::from(self.status_sum(all.clone(), "replicas"))),
            ("updatedReplicas", i64::from(new.map_or(0, |i| status_count(&self.sets[i], "replicas")))),
            ("readyReplicas", i64::from(self.status_sum(all, "readyReplicas"))),
            ("availableReplicas", i64::from(available)),
            ("unavailableReplicas", i64::from(unavailable)),
        ];
        for (field, n) in counts {
            if n != 0 {
                status[field] = json!(n);
            }
        }
        if let Some(c) = self.d.pointer("/status/collisionCount") {
            status["collisionCount"] = c.clone();
        }
        let mut with = json!({"status": {"conditions": conditions(&self.d)}});
        let c = if available >= self.replicas() - arithmetic::max_unavailable(&self.d) {
            new_condition("Available", "True", "MinimumReplicasAvailable", "Deployment has minimum availability.", self.now)
        } else {
            new_condition("Available", "False", "MinimumReplicasUnavailable", "Deployment does not have minimum availability.", self.now)
        };
        set_condition(&mut with, c);
        status["conditions"] = with["status"]["conditions"].take();
        status
    }

    /// Upstream's `syncDeploymentStatus` (scaling, paused, deleting).
    pub(super) fn sync_deployment_status(&mut self, new: Option<usize>) {
        self.d["status"] = self.calculate_status(new);
    }

    /// Upstream's `syncRolloutStatus`: the status, with `Progressing` and `ReplicaFailure`.
    pub(super) fn sync_rollout_status(&mut self, new: Option<usize>) {
        let mut next = json!({"metadata": self.d["metadata"].clone(), "spec": self.d["spec"].clone(), "status": self.calculate_status(new)});
        let with_deadline = has_progress_deadline(&self.d);
        if !with_deadline {
            remove_condition(&mut next, "Progressing");
        }
        let current = condition(&self.d, "Progressing").cloned();
        let n = |f: &str| next["status"].get(f).and_then(Value::as_i64).unwrap_or(0);
        let rollout_done = n("replicas") == n("updatedReplicas") && current.as_ref().is_some_and(|c| c["reason"] == "NewReplicaSetAvailable");
        let subject = match new {
            Some(i) => format!("ReplicaSet {:?}", crate::meta_str(&self.sets[i], "name")),
            None => format!("Deployment {:?}", crate::meta_str(&self.d, "name")),
        };
        if with_deadline && !rollout_done {
            if complete(&self.d, &next["status"]) {
                let c = new_condition("Progressing", "True", "NewReplicaSetAvailable", &format!("{subject} has successfully progressed."), self.now);
                set_condition(&mut next, c);
            } else if progressing(&self.d["status"], &next["status"]) {
                let mut c = new_condition("Progressing", "True", "ReplicaSetUpdated", &format!("{subject} is progressing."), self.now);
                if let Some(current) = &current {
                    if current["status"] == "True" {
                        c["lastTransitionTime"] = current["lastTransitionTime"].clone();
                    }
                    remove_condition(&mut next, "Progressing");
                }
                set_condition(&mut next, c);
            } else if self.timed_out(&next) {
                let c = new_condition("Progressing", "False", "ProgressDeadlineExceeded", &format!("{subject} has timed out progressing."), self.now);
                set_condition(&mut next, c);
            }
        }
        match self.replica_failure(new) {
            Some(c) => set_condition(&mut next, c),
            None => remove_condition(&mut next, "ReplicaFailure"),
        }
        self.requeue_stuck(&next["status"]);
        self.d["status"] = next["status"].take();
    }

    /// `DeploymentTimedOut`, on the status about to be written.
    fn timed_out(&self, next: &Value) -> bool {
        let Some(c) = condition(next, "Progressing") else { return false };
        match c["reason"].as_str() {
            Some("NewReplicaSetAvailable") => false,
            Some("ProgressDeadlineExceeded") => true,
            _ => deadline(&self.d, c).is_some_and(|at| at < self.now),
        }
    }

    /// `requeueStuckDeployment`: look again just after the progress deadline.
    fn requeue_stuck(&mut self, next_status: &Value) {
        let Some(current) = condition(&self.d, "Progressing") else { return };
        if !has_progress_deadline(&self.d) || complete(&self.d, next_status) || current["reason"] == "ProgressDeadlineExceeded" {
            return;
        }
        if let Some(at) = deadline(&self.d, current) {
            let at: Instant = instant_at(self.core, at + chrono::Duration::seconds(1));
            self.wake_at(at);
        }
    }

    /// `getReplicaFailures`: the new ReplicaSet's `ReplicaFailure`, else an old one's.
    fn replica_failure(&self, new: Option<usize>) -> Option<Value> {
        let failure = |i: usize| {
            conditions(&self.sets[i]).iter().find(|c| c["type"] == "ReplicaFailure").map(|c| {
                json!({"type": "ReplicaFailure", "status": c["status"], "lastUpdateTime": c["lastTransitionTime"],
                       "lastTransitionTime": c["lastTransitionTime"], "reason": c["reason"], "message": c["message"]})
            })
        };
        new.and_then(failure).or_else(|| (0..self.sets.len()).find_map(failure))
    }
}
