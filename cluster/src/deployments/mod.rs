//! The Deployment controller, as kube-controller-manager's (`pkg/controller/deployment`).
//!
//! Each pass syncs every apps/v1 Deployment the way upstream's `syncDeployment` does:
//! - claims the ReplicaSets of its namespace by selector (adopts orphans, releases the ones it
//!   no longer matches);
//! - a Deployment being deleted only gets its status refreshed; a paused one, or one whose
//!   `spec.replicas` changed (a ReplicaSet's `desired-replicas` annotation differs), is scaled
//!   without rolling; otherwise it rolls out with its strategy (`strategy`);
//! - the new ReplicaSet is the oldest whose template equals the Deployment's ignoring the
//!   `pod-template-hash` label; when there is none, `<deployment>-<hash>` is created with that
//!   label on its selector, template and itself, a controller ownerReference and the
//!   annotations `deployment.kubernetes.io/revision` (highest old revision + 1),
//!   `desired-replicas` and `max-replicas` (replicas + maxSurge) and the Deployment's own
//!   annotations (so `kubernetes.io/change-cause` shows in `kubectl rollout history`). A
//!   ReplicaSet brought back (`kubectl rollout undo` patches the old template back) gets the
//!   next revision and keeps its former ones in `deployment.kubernetes.io/revision-history`.
//!   A name taken by an object that is not ours bumps `status.collisionCount`, which changes
//!   the hash;
//! - old ReplicaSets scaled to 0 beyond `spec.revisionHistoryLimit` are deleted, oldest
//!   revision first, once the rollout is complete (or while paused);
//! - `status` and conditions are computed as upstream (`status`); the Deployment's
//!   `deployment.kubernetes.io/revision` annotation follows its new ReplicaSet.
//!
//! Events (`ScalingReplicaSet`, `ReplicaSetCreateError`) are recorded on the Deployment.
//! Not done: the deprecated `rollbackTo` field of extensions/v1beta1 (kubectl does rollbacks
//! client-side), and the rate-limited retries upstream uses after a failed sync (here: the
//! next pass, 5 s later, or the next change).

mod arithmetic;
mod status;
mod strategy;
mod template;

use super::controller_ref::{Claimant, controller_ref, controller_uid};
use super::{Next, Retry, builtin, deleting, meta_str, opts, put, recorder, spec_replicas, status_count};
use apiserver::resources::Resource;
use apiserver::rest::{Core, DeleteOptions, Sub};
use apiserver::selector::LabelSelector;
use serde_json::{Map, Value, json};
use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;
use tokio::time::Instant;

use template::HASH_LABEL;

const MANAGER: &str = "deployment-controller";
pub(crate) const REVISION: &str = "deployment.kubernetes.io/revision";
const REVISION_HISTORY: &str = "deployment.kubernetes.io/revision-history";
const DESIRED_REPLICAS: &str = "deployment.kubernetes.io/desired-replicas";
const MAX_REPLICAS: &str = "deployment.kubernetes.io/max-replicas";
/// Deployment annotations not copied to its ReplicaSets.
const NOT_COPIED: [&str; 6] = [
    "kubectl.kubernetes.io/last-applied-configuration",
    REVISION,
    REVISION_HISTORY,
    DESIRED_REPLICAS,
    MAX_REPLICAS,
    "deprecated.deployment.rollback.to",
];
/// Longest `revision-history` annotation (upstream's default `--deployment-controller-...`).
const MAX_REVISION_HISTORY_CHARS: usize = 2000;
/// How long a sync that failed for a reason other than a conflict waits before the next try.
const FAILED_SYNC_DELAY: Duration = Duration::from_secs(5);

/// The Deployment controller (no state beyond the store: every pass is level-based).
#[derive(Debug, Default)]
pub struct DeploymentController {}

/// Whether a commit concerns the Deployment controller: Deployments, ReplicaSets, and Pods
/// going away (a Recreate rollout waits for the old ones).
pub(crate) fn relevant(e: &apiserver::store::Event) -> bool {
    let gr = &e.key.gr;
    (gr.group == "apps" && (gr.resource == "deployments" || gr.resource == "replicasets"))
        || (gr.group.is_empty() && gr.resource == "pods" && e.kind == apiserver::store::EventType::Deleted)
}

impl DeploymentController {
    /// One pass over every Deployment.
    pub(crate) fn pass(&mut self, core: &Core) -> Next {
        let mut next = Next::default();
        let dep_res = builtin(core, "apps", "v1", "deployments");
        let deployments = core.store.list_shared(&dep_res.group_resource(), None).0;
        if deployments.is_empty() {
            return next;
        }
        let rs_res = builtin(core, "apps", "v1", "replicasets");
        let by_namespace = |items: Vec<Arc<Value>>| {
            let mut m: HashMap<String, Vec<Arc<Value>>> = HashMap::new();
            for o in items {
                m.entry(meta_str(&o, "namespace").to_string()).or_default().push(o);
            }
            m
        };
        let sets = by_namespace(core.store.list_shared(&rs_res.group_resource(), None).0);
        let any_recreate = deployments.iter().any(|d| !arithmetic::is_rolling(d));
        let pods = if any_recreate {
            by_namespace(core.store.list_shared(&builtin(core, "", "v1", "pods").group_resource(), None).0)
        } else {
            HashMap::new()
        };
        for d in &deployments {
            let ns = meta_str(d, "namespace");
            let mut rollout = Rollout::new(core, &dep_res, &rs_res, d);
            let candidates = sets.get(ns).map(Vec::as_slice).unwrap_or_default();
            next.record(rollout.sync(candidates, pods.get(ns).map(Vec::as_slice).unwrap_or_default()));
        }
        next
    }
}

/// Why a sync stopped early.
enum Halt {
    /// A write conflicted or failed: look again soon.
    Retry,
    /// A write was refused: save what the Deployment's status says about it, try later.
    Failed,
}

impl From<Retry> for Halt {
    fn from(_: Retry) -> Self {
        Halt::Retry
    }
}

type Step<T = ()> = Result<T, Halt>;

/// One sync of one Deployment: `d` is the working copy whose annotations and status are
/// written at the end if they changed; `sets` its ReplicaSets, oldest first, updated in place
/// as they are written.
pub(super) struct Rollout<'a> {
    core: &'a Core,
    dep_res: &'a Resource,
    rs_res: &'a Resource,
    read: &'a Value,
    d: Value,
    sets: Vec<Value>,
    now: chrono::DateTime<chrono::Utc>,
    wake: Option<Instant>,
}

fn annotation<'v>(obj: &'v Value, key: &str) -> Option<&'v str> {
    obj.pointer("/metadata/annotations").and_then(|a| a.get(key)).and_then(Value::as_str)
}

fn annotations_mut(obj: &mut Value) -> &mut Map<String, Value> {
    let meta = obj["metadata"].as_object_mut().expect("metadata");
    let a = meta.entry("annotations").or_insert_with(|| json!({}));
    if !a.is_object() {
        *a = json!({});
    }
    a.as_object_mut().expect("object")
}

/// A ReplicaSet's revision (0 when unset or not a number).
fn revision(rs: &Value) -> i64 {
    annotation(rs, REVISION).and_then(|r| r.parse().ok()).unwrap_or(0)
}

fn created(obj: &Value) -> (&str, &str) {
    (meta_str(obj, "creationTimestamp"), meta_str(obj, "name"))
}

impl<'a> Rollout<'a> {
    fn new(core: &'a Core, dep_res: &'a Resource, rs_res: &'a Resource, read: &'a Value) -> Self {
        let mut d = read.clone();
        if !d.get("status").is_some_and(Value::is_object) {
            d["status"] = json!({});
        }
        Rollout { core, dep_res, rs_res, read, d, sets: vec![], now: core.config.clock.now(), wake: None }
    }

    fn replicas(&self) -> i32 {
        spec_replicas(&self.d)
    }

    fn wake_at(&mut self, at: Instant) {
        self.wake = Some(self.wake.map_or(at, |w| w.min(at)));
    }

    fn event(&self, warning: bool, reason: &str, message: &str) {
        let subject = recorder::Subject { obj: self.read, api_version: "apps/v1", kind: "Deployment" };
        recorder::record(self.core, MANAGER, subject, warning, reason, message);
    }

    /// Upstream's `syncDeployment`; returns when to look again.
    fn sync(&mut self, candidates: &[Arc<Value>], pods: &[Arc<Value>]) -> Result<Option<Instant>, Retry> {
        let selector = self.d.pointer("/spec/selector").cloned().unwrap_or_default();
        let empty =
            |k: &str| selector.get(k).is_none_or(|v| v.as_object().is_some_and(|m| m.is_empty()) || v.as_array().is_some_and(|a| a.is_empty()));
        if empty("matchLabels") && empty("matchExpressions") {
            self.event(true, "SelectingAll", "This deployment is selecting all pods. A non-empty selector is required.");
            let generation = self.d.pointer("/metadata/generation").cloned().unwrap_or(json!(0));
            self.d["status"]["observedGeneration"] = generation;
            self.save()?;
            return Ok(None);
        }
        let selector = LabelSelector::from_object(&selector);
        let claimant = Claimant { owner: self.read, api_version: "apps/v1", kind: "Deployment", selector: &selector, manager: MANAGER };
        self.sets = claimant.claim(self.core, self.rs_res, candidates)?;
        self.sets.sort_by(|a, b| created(a).cmp(&created(b)));
        let outcome = if deleting(self.read) { self.sync_status_only() } else { self.roll(pods) };
        match outcome {
            Ok(()) => {}
            Err(Halt::Retry) => return Err(Retry),
            Err(Halt::Failed) => self.wake_at(Instant::now() + FAILED_SYNC_DELAY),
        }
        self.save()?;
        Ok(self.wake)
    }

    /// Pause, scale or roll out.
    fn roll(&mut self, pods: &[Arc<Value>]) -> Step {
        self.check_paused_conditions();
        if self.d.pointer("/spec/paused") == Some(&json!(true)) || self.is_scaling_event()? {
            self.sync_scale()
        } else if arithmetic::is_rolling(&self.d) {
            self.rollout_rolling()
        } else {
            self.rollout_recreate(pods)
        }
    }

    /// Write the annotations (through the main resource: unlike upstream's, this server's
    /// `/status` keeps metadata as it was) and the status, if this sync changed them.
    fn save(&mut self) -> Result<(), Retry> {
        let mut current = self.read.clone();
        if self.d.pointer("/metadata/annotations") != self.read.pointer("/metadata/annotations") {
            current["metadata"]["annotations"] = self.d["metadata"]["annotations"].clone();
            current = put(self.core, self.dep_res, current, Sub::Main, MANAGER)?;
        }
        if self.d.get("status") != self.read.get("status") {
            current["status"] = self.d["status"].clone();
            put(self.core, self.dep_res, current, Sub::Status, MANAGER)?;
        }
        Ok(())
    }

    /// Indexes of the ReplicaSets other than `new`.
    fn old(&self, new: Option<usize>) -> Vec<usize> {
        (0..self.sets.len()).filter(|&i| Some(i) != new).collect()
    }

    /// Indexes of the ReplicaSets other than `new` with replicas wanted (`FilterActiveReplicaSets`).
    fn active_old(&self, new: Option<usize>) -> Vec<usize> {
        self.old(new).into_iter().filter(|&i| spec_replicas(&self.sets[i]) > 0).collect()
    }

    fn spec_sum(&self, which: impl IntoIterator<Item = usize>) -> i32 {
        which.into_iter().map(|i| spec_replicas(&self.sets[i])).sum()
    }

    fn status_sum(&self, which: impl IntoIterator<Item = usize>, field: &str) -> i32 {
        which.into_iter().map(|i| status_count(&self.sets[i], field)).sum()
    }

    fn set_revision(&mut self, revision: &str) {
        let a = annotations_mut(&mut self.d);
        if a.get(REVISION).and_then(Value::as_str) != Some(revision) {
            a.insert(REVISION.into(), json!(revision));
        }
    }

    /// Upstream's `getAllReplicaSetsAndSyncRevision`: the index of the new ReplicaSet (created
    /// when `create` and there is none), its annotations and the Deployment's revision synced.
    fn new_replica_set(&mut self, create: bool) -> Step<Option<usize>> {
        let template = self.d.pointer("/spec/template").cloned().unwrap_or_default();
        let existing = self.sets.iter().position(|rs| template::equal_ignore_hash(rs.pointer("/spec/template").unwrap_or(&Value::Null), &template));
        let max_old = self.old(existing).into_iter().map(|i| revision(&self.sets[i])).max().unwrap_or(0);
        let new_revision = max_old + 1;
        if let Some(i) = existing {
            let mut copy = self.sets[i].clone();
            let annotated = self.set_new_rs_annotations(&mut copy, new_revision, true);
            let min_ready = self.d.pointer("/spec/minReadySeconds").cloned();
            let min_ready_differs = copy.pointer("/spec/minReadySeconds").cloned().unwrap_or(json!(0)) != min_ready.clone().unwrap_or(json!(0));
            if annotated || min_ready_differs {
                copy["spec"]["minReadySeconds"] = min_ready.unwrap_or(json!(0));
                self.sets[i] = put(self.core, self.rs_res, copy, Sub::Main, MANAGER)?;
            }
            let rev = annotation(&self.sets[i], REVISION).unwrap_or_default().to_string();
            self.set_revision(&rev);
            if status::condition(&self.d, "Progressing").is_none() {
                let msg = format!("Found new replica set {:?}", meta_str(&self.sets[i], "name"));
                let c = status::new_condition("Progressing", "True", "FoundNewReplicaSet", &msg, self.now);
                status::set_condition(&mut self.d, c);
            }
            return Ok(Some(i));
        }
        if !create {
            return Ok(None);
        }
        self.create_replica_set(template, new_revision).map(Some)
    }

    fn create_replica_set(&mut self, mut template: Value, new_revision: i64) -> Step<usize> {
        let collisions = self.d.pointer("/status/collisionCount").and_then(Value::as_i64).map(|c| c as i32);
        let hash = workload_math::pod_template_hash(&template, collisions);
        let name = format!("{}-{hash}", meta_str(&self.d, "name"));
        if !template.get("metadata").is_some_and(Value::is_object) {
            template["metadata"] = json!({});
        }
        let labels = template["metadata"].as_object_mut().expect("object").entry("labels").or_insert_with(|| json!({}));
        labels[HASH_LABEL] = json!(hash);
        let labels = labels.clone();
        let mut selector = self.d.pointer("/spec/selector").cloned().unwrap_or_else(|| json!({}));
        let match_labels = selector.as_object_mut().expect("object").entry("matchLabels").or_insert_with(|| json!({}));
        match_labels[HASH_LABEL] = json!(hash);
        let mut rs = json!({
            "apiVersion": "apps/v1", "kind": "ReplicaSet",
            "metadata": {"name": name, "namespace": meta_str(&self.d, "namespace"), "labels": labels,
                         "ownerReferences": [controller_ref(self.read, "apps/v1", "Deployment")]},
            "spec": {"replicas": 0, "minReadySeconds": self.d.pointer("/spec/minReadySeconds").cloned().unwrap_or(json!(0)),
                     "selector": selector, "template": template},
        });
        let all: i32 = self.spec_sum(0..self.sets.len());
        let replicas = arithmetic::new_rs_new_replicas(&self.d, all, 0);
        rs["spec"]["replicas"] = json!(replicas);
        self.set_new_rs_annotations(&mut rs, new_revision, false);
        let (created, already_existed) =
            match apiserver::rest::wait(self.core.create(self.rs_res, meta_str(&self.d, "namespace"), rs, &opts(MANAGER))) {
                Ok(rs) => (rs, false),
                Err(e) if e.code == 409 && e.reason == "AlreadyExists" => {
                    let key = self.core.key(self.rs_res, meta_str(&self.d, "namespace"), &name);
                    let Some(taken) = self.core.store.get(&key) else { return Err(Halt::Retry) };
                    let ours = controller_uid(&taken) == meta_str(self.read, "uid")
                        && template::equal_ignore_hash(&self.d["spec"]["template"], taken.pointer("/spec/template").unwrap_or(&Value::Null));
                    if !ours {
                        // A hash collision: another hash next time.
                        self.d["status"]["collisionCount"] = json!(collisions.unwrap_or(0) + 1);
                        return Err(Halt::Failed);
                    }
                    (taken, true)
                }
                Err(e) => {
                    let msg = format!("Failed to create new replica set {name:?}: {}", e.message);
                    if status::has_progress_deadline(&self.d) {
                        let c = status::new_condition("Progressing", "False", "ReplicaSetCreateError", &msg, self.now);
                        status::set_condition(&mut self.d, c);
                    }
                    self.event(true, "ReplicaSetCreateError", &msg);
                    return Err(Halt::Failed);
                }
            };
        if !already_existed && replicas > 0 {
            self.event(false, "ScalingReplicaSet", &format!("Scaled up replica set {name} from 0 to {replicas}"));
        }
        self.set_revision(&new_revision.to_string());
        if !already_existed && status::has_progress_deadline(&self.d) {
            let c = status::new_condition("Progressing", "True", "NewReplicaSetCreated", &format!("Created new replica set {name:?}"), self.now);
            status::set_condition(&mut self.d, c);
        }
        self.sets.push(created);
        Ok(self.sets.len() - 1)
    }

    /// Upstream's `SetNewReplicaSetAnnotations`; true when `rs` changed.
    fn set_new_rs_annotations(&self, rs: &mut Value, new_revision: i64, exists: bool) -> bool {
        let mut changed = false;
        let from: Map<String, Value> = self.d.pointer("/metadata/annotations").and_then(Value::as_object).cloned().unwrap_or_default();
        let a = annotations_mut(rs);
        for (k, v) in from {
            if NOT_COPIED.contains(&k.as_str()) || a.get(&k) == Some(&v) {
                continue;
            }
            a.insert(k, v);
            changed = true;
        }
        let old = a.get(REVISION).and_then(Value::as_str).map(String::from);
        let old_number = match old.as_deref().map(str::parse::<i64>) {
            None => 0,
            Some(Ok(n)) => n,
            Some(Err(_)) if old.as_deref() == Some("") => 0,
            Some(Err(_)) => return changed,
        };
        if old_number < new_revision {
            a.insert(REVISION.into(), json!(new_revision.to_string()));
            changed = true;
            // Brought back (a rollback): keep the revisions it had.
            if let Some(old) = old {
                let history = a.get(REVISION_HISTORY).and_then(Value::as_str).unwrap_or_default().to_string();
                a.insert(REVISION_HISTORY.into(), json!(append_history(&history, &old)));
            }
        }
        if !exists {
            let (desired, max) = (self.replicas(), self.replicas() + arithmetic::max_surge(&self.d));
            changed |= set_replicas_annotations(rs, desired, max);
        }
        changed
    }

    /// Scale the ReplicaSet at `i` to `to` if it is not there (`scaleReplicaSetAndRecordEvent`).
    fn scale_and_record(&mut self, i: usize, to: i32) -> Step<bool> {
        let from = spec_replicas(&self.sets[i]);
        if from == to {
            return Ok(false);
        }
        self.scale(i, to, if from < to { "up" } else { "down" })
    }

    /// Upstream's `scaleReplicaSet`: size and replicas annotations; true when resized.
    fn scale(&mut self, i: usize, to: i32, operation: &str) -> Step<bool> {
        let from = spec_replicas(&self.sets[i]);
        let (desired, max) = (self.replicas(), self.replicas() + arithmetic::max_surge(&self.d));
        let mut copy = self.sets[i].clone();
        let annotated = set_replicas_annotations(&mut copy, desired, max);
        if from == to && !annotated {
            return Ok(false);
        }
        copy["spec"]["replicas"] = json!(to);
        self.sets[i] = put(self.core, self.rs_res, copy, Sub::Main, MANAGER)?;
        if from != to {
            let name = meta_str(&self.sets[i], "name").to_string();
            self.event(false, "ScalingReplicaSet", &format!("Scaled {operation} replica set {name} from {from} to {to}"));
        }
        Ok(from != to)
    }

    /// Upstream's `cleanupDeployment`: old ReplicaSets beyond `revisionHistoryLimit` that have
    /// no Pods and are synced are deleted, lowest revision first.
    fn cleanup(&mut self, new: Option<usize>) -> Step {
        let Some(limit) = self.d.pointer("/spec/revisionHistoryLimit").and_then(Value::as_i64) else { return Ok(()) };
        let mut cleanable: Vec<usize> = self.old(new).into_iter().filter(|&i| !deleting(&self.sets[i])).collect();
        let surplus = cleanable.len() as i64 - limit;
        if surplus <= 0 {
            return Ok(());
        }
        cleanable.sort_by(|&a, &b| (revision(&self.sets[a]), created(&self.sets[a])).cmp(&(revision(&self.sets[b]), created(&self.sets[b]))));
        for &i in cleanable.iter().take(surplus as usize) {
            let rs = &self.sets[i];
            let generation = rs.pointer("/metadata/generation").and_then(Value::as_i64).unwrap_or(0);
            let observed = rs.pointer("/status/observedGeneration").and_then(Value::as_i64).unwrap_or(0);
            if status_count(rs, "replicas") != 0 || spec_replicas(rs) != 0 || generation > observed {
                continue;
            }
            let o = DeleteOptions { uid: Some(meta_str(rs, "uid").into()), ..Default::default() };
            match self.core.delete(self.rs_res, meta_str(rs, "namespace"), meta_str(rs, "name"), &o) {
                Ok(_) => {}
                Err(e) if e.code == 404 => {}
                Err(_) => return Err(Halt::Retry),
            }
        }
        Ok(())
    }
}

/// Set `desired-replicas` and `max-replicas`; true when either changed.
fn set_replicas_annotations(rs: &mut Value, desired: i32, max: i32) -> bool {
    let a = annotations_mut(rs);
    let mut changed = false;
    for (k, v) in [(DESIRED_REPLICAS, desired), (MAX_REPLICAS, max)] {
        if a.get(k).and_then(Value::as_str) != Some(v.to_string().as_str()) {
            a.insert(k.into(), json!(v.to_string()));
            changed = true;
        }
    }
    changed
}

/// `revision-history` with `old` appended, dropping the oldest entries past the length limit.
fn append_history(history: &str, old: &str) -> String {
    if history.is_empty() {
        return old.to_string();
    }
    let mut entries: Vec<&str> = history.split(',').collect();
    let mut total = history.len() + old.len() + 1;
    let mut start = 0;
    while total > MAX_REVISION_HISTORY_CHARS && start < entries.len() {
        total -= entries[start].len() + 1;
        start += 1;
    }
    if total > MAX_REVISION_HISTORY_CHARS {
        return history.to_string();
    }
    entries.drain(..start);
    entries.push(old);
    entries.join(",")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn revision_history_appends_and_stays_bounded() {
        assert_eq!(append_history("", "1"), "1");
        assert_eq!(append_history("1,3", "4"), "1,3,4");
        let long = (0..600).map(|n| n.to_string()).collect::<Vec<_>>().join(",");
        let out = append_history(&long, "9999");
        assert!(out.len() <= MAX_REVISION_HISTORY_CHARS && out.ends_with(",9999") && !out.starts_with("0,"));
    }
}
