//! The StatefulSet controller, as kube-controller-manager's (`pkg/controller/statefulset`:
//! `stateful_set_control.go`, `stateful_set_utils.go`, `stateful_pod_control.go`).
//!
//! For every apps/v1 StatefulSet, each pass:
//! - claims its Pods (members by name, `<set>-<ordinal>`, matched by the selector; orphans
//!   adopted, non-matching ones released) and its ControllerRevisions (`revisions`);
//! - finds the current and update revisions, creating the update revision when the template
//!   changed (or renumbering an equal older one, a rollback), counting name collisions;
//! - keeps one Pod per ordinal in `[start, start + replicas)` (`identity`): a missing Pod is
//!   created after its claims (`claims`) at the current revision below the partition, else
//!   at the update revision. Under `OrderedReady` one step a pass and only once every
//!   lower ordinal is Running, Ready and available (`minReadySeconds`); under `Parallel`
//!   all at once. Failed or Succeeded Pods are deleted and made again;
//! - deletes Pods past the end, highest ordinal first (`OrderedReady`: one at a time, once
//!   the rest are available), after setting their claims' owners for the retention policy;
//! - `RollingUpdate`: deletes the highest-ordinal Pod at or above `partition` that is not at
//!   the update revision, once every higher one is available (the recreated Pod gets the
//!   update revision); with [`crate::ClusterConfig::statefulset_max_unavailable`] (upstream's
//!   `MaxUnavailableStatefulSet` gate, off by default in 1.36) up to `maxUnavailable` at once.
//!   `OnDelete`: Pods are replaced only when someone deletes them;
//! - writes `status` as upstream: `observedGeneration`, `replicas`, `readyReplicas`,
//!   `currentReplicas`, `updatedReplicas`, `availableReplicas`, `currentRevision`,
//!   `updateRevision` (the current revision becomes the update one when every Pod is updated
//!   and ready), `collisionCount`;
//! - deletes revisions no Pod uses beyond `revisionHistoryLimit`.
//!
//! Events `SuccessfulCreate`/`SuccessfulDelete`/`SuccessfulUpdate` (and `Failed...`) with
//! upstream's messages (`create Pod web-0 in StatefulSet web successful`, title-cased).

pub(crate) mod claims;
pub(crate) mod identity;
pub(crate) mod revisions;

use crate::controller_ref::Claimant;
use crate::{Next, Retry, builtin, deleting, instant_at, meta_str, opts, parse_time, pod_available, pod_ready, pod_ready_condition, put, recorder};
use apiserver::resources::Resource;
use apiserver::rest::{Core, DeleteOptions, Sub};
use apiserver::selector::LabelSelector;
use chrono::{DateTime, Utc};
use claims::Claims;
use identity::{is_member, ordinal, pod_revision, start_ordinal};
use revisions::History;
use serde_json::{Value, json};
use std::collections::HashMap;
use std::sync::Arc;
use tokio::time::Instant;

pub(crate) const MANAGER: &str = "statefulset-controller";

/// The StatefulSet controller (no state beyond the store: every pass is level-based).
#[derive(Debug, Default)]
pub struct StatefulSetController {
    /// Honour `rollingUpdate.maxUnavailable` (upstream's `MaxUnavailableStatefulSet`).
    pub max_unavailable: bool,
}

/// Whether a commit concerns the StatefulSet controller.
pub(crate) fn relevant(e: &apiserver::store::Event) -> bool {
    let gr = &e.key.gr;
    (gr.group == "apps" && matches!(gr.resource.as_str(), "statefulsets" | "controllerrevisions"))
        || (gr.group.is_empty() && matches!(gr.resource.as_str(), "pods" | "persistentvolumeclaims"))
}

fn by_namespace(list: Vec<Arc<Value>>) -> HashMap<String, Vec<Arc<Value>>> {
    let mut out: HashMap<String, Vec<Arc<Value>>> = HashMap::new();
    for o in list {
        out.entry(meta_str(&o, "namespace").to_string()).or_default().push(o);
    }
    out
}

impl StatefulSetController {
    /// One pass over every StatefulSet.
    pub(crate) fn pass(&mut self, core: &Core) -> Next {
        let mut next = Next::default();
        let set_res = builtin(core, "apps", "v1", "statefulsets");
        let sets = core.store.list_shared(&set_res.group_resource(), None).0;
        if sets.is_empty() {
            return next;
        }
        let pod_res = builtin(core, "", "v1", "pods");
        let rev_res = builtin(core, "apps", "v1", "controllerrevisions");
        let claim_res = builtin(core, "", "v1", "persistentvolumeclaims");
        let pods = by_namespace(core.store.list_shared(&pod_res.group_resource(), None).0);
        let revisions = by_namespace(core.store.list_shared(&rev_res.group_resource(), None).0);
        let pass =
            Pass { core, set_res: &set_res, pod_res: &pod_res, rev_res: &rev_res, claim_res: &claim_res, max_unavailable: self.max_unavailable };
        for set in &sets {
            let ns = meta_str(set, "namespace");
            let ns_pods = pods.get(ns).map(Vec::as_slice).unwrap_or_default();
            let ns_revisions = revisions.get(ns).map(Vec::as_slice).unwrap_or_default();
            next.record(pass.sync(set, ns_pods, ns_revisions));
        }
        next
    }
}

struct Pass<'a> {
    core: &'a Core,
    set_res: &'a Resource,
    pod_res: &'a Resource,
    rev_res: &'a Resource,
    claim_res: &'a Resource,
    max_unavailable: bool,
}

/// The counters of `status`, as upstream's `computeReplicaStatus`.
#[derive(Debug, Default, Clone, PartialEq)]
struct Counts {
    replicas: i64,
    ready: i64,
    available: i64,
    current: i64,
    updated: i64,
}

fn counts<'p>(pods: impl Iterator<Item = &'p Value>, min_ready: i64, current: &str, update: &str, now: DateTime<Utc>) -> Counts {
    let mut c = Counts::default();
    for pod in pods.filter(|p| created(p)) {
        c.replicas += 1;
        if running_and_ready(pod) {
            c.ready += 1;
            if pod_available(pod, min_ready, now) {
                c.available += 1;
            }
        }
        if !deleting(pod) {
            let revision = pod_revision(pod);
            c.current += i64::from(revision == current);
            c.updated += i64::from(revision == update);
        }
    }
    c
}

/// Upstream's `isCreated`: the server gave the Pod a phase.
fn created(pod: &Value) -> bool {
    pod.pointer("/status/phase").and_then(Value::as_str).is_some_and(|p| !p.is_empty())
}

fn phase(pod: &Value) -> &str {
    pod.pointer("/status/phase").and_then(Value::as_str).unwrap_or_default()
}

fn running_and_ready(pod: &Value) -> bool {
    phase(pod) == "Running" && pod_ready(pod)
}

fn unavailable(pod: &Value, min_ready: i64, now: DateTime<Utc>) -> bool {
    !pod_available(pod, min_ready, now) || deleting(pod)
}

/// What one sync decided besides its writes: the status, and whether it stopped early.
struct Outcome {
    counts: Counts,
    result: Result<(), Retry>,
}

impl Pass<'_> {
    fn sync(&self, set: &Value, ns_pods: &[Arc<Value>], ns_revisions: &[Arc<Value>]) -> Result<Option<Instant>, Retry> {
        let selector = LabelSelector::from_object(set.pointer("/spec/selector").unwrap_or(&Value::Null));
        let members: Vec<Arc<Value>> = ns_pods.iter().filter(|p| is_member(set, p)).cloned().collect();
        let claimant = Claimant { owner: set, api_version: "apps/v1", kind: "StatefulSet", selector: &selector, manager: MANAGER };
        let pods = claimant.claim(self.core, self.pod_res, &members)?;
        let history = History { core: self.core, res: self.rev_res };
        let mut revisions = history.list(set, ns_revisions, &selector)?;
        let (current, update, collisions) = history.current_and_update(set, &mut revisions)?;
        let (current_name, update_name) = (meta_str(&current, "name").to_string(), meta_str(&update, "name").to_string());
        let now = self.core.config.clock.now();
        let outcome =
            self.update_pods(set, &revisions::apply(set, &current), &revisions::apply(set, &update), (&current_name, &update_name), &pods, now);
        self.write_status(set, outcome.counts, (&current_name, &update_name), collisions)?;
        let mut live: Vec<&str> = vec![&current_name, &update_name];
        live.extend(pods.iter().map(pod_revision));
        history.truncate(set, &revisions, &live)?;
        outcome.result?;
        // Look again when the next ready Pod becomes available.
        let min_ready = set.pointer("/spec/minReadySeconds").and_then(Value::as_i64).unwrap_or(0);
        let soonest = pods
            .iter()
            .filter(|p| pod_ready(p) && !pod_available(p, min_ready, now))
            .filter_map(|p| pod_ready_condition(p).and_then(|c| parse_time(c["lastTransitionTime"].as_str())))
            .min();
        Ok(soonest.map(|t| instant_at(self.core, t + chrono::Duration::seconds(min_ready + 1))))
    }

    /// Upstream's `updateStatefulSet`: create, repair and delete Pods; the status counts.
    fn update_pods(
        &self,
        set: &Value,
        current_set: &Value,
        update_set: &Value,
        revisions: (&str, &str),
        pods: &[Value],
        now: DateTime<Utc>,
    ) -> Outcome {
        let (current, update) = revisions;
        let min_ready = set.pointer("/spec/minReadySeconds").and_then(Value::as_i64).unwrap_or(0);
        let count = |replicas: &[Value], condemned: &[Value]| counts(replicas.iter().chain(condemned), min_ready, current, update, now);
        let mut counts = count(pods, &[]);
        let start = start_ordinal(set);
        let replicas_wanted = i64::from(crate::spec_replicas(set)).max(0);
        let mut slots: Vec<Option<Value>> = vec![None; replicas_wanted as usize];
        let mut condemned: Vec<Value> = vec![];
        for pod in pods {
            let ord = ordinal(pod);
            if ord >= start && ord < start + replicas_wanted {
                slots[(ord - start) as usize] = Some(pod.clone());
            } else if ord >= 0 {
                condemned.push(pod.clone());
            }
        }
        let mut replicas: Vec<Value> = slots
            .into_iter()
            .enumerate()
            .map(|(i, pod)| pod.unwrap_or_else(|| versioned_pod(current_set, update_set, current, update, start + i as i64)))
            .collect();
        condemned.sort_by_key(|p| std::cmp::Reverse(ordinal(p)));
        let first_unavailable =
            replicas.iter().chain(condemned.iter().rev()).find(|p| unavailable(p, min_ready, now)).map(|p| meta_str(p, "name").to_string());
        if deleting(set) {
            return Outcome { counts, result: Ok(()) };
        }
        let monotonic = set.pointer("/spec/podManagementPolicy").and_then(Value::as_str) != Some("Parallel");
        let mut step = Step { pass: self, set, update_set, monotonic, min_ready, now, events: vec![] };

        let claims = Claims { core: self.core, res: self.claim_res };
        let mut progress = run_for_all(&mut replicas, monotonic, |pod| step.replica(pod));
        if progress == Ok(false) {
            progress = run_for_all(&mut condemned, monotonic, |pod| {
                if !claims.match_policy(update_set, pod) {
                    claims.update_for_policy(update_set, pod)?;
                }
                Ok(false)
            });
        }
        if progress == Ok(false) {
            let first = first_unavailable.as_deref();
            progress = run_for_all(&mut condemned, monotonic, |pod| step.condemned(pod, first));
        }
        counts = count(&replicas, &condemned);
        let result = match progress {
            Ok(false) if set.pointer("/spec/updateStrategy/type").and_then(Value::as_str) != Some("OnDelete") => {
                step.roll(&replicas, update, &mut counts)
            }
            other => other.map(|_| ()),
        };
        step.flush_events();
        Outcome { counts, result }
    }

    /// Upstream's `updateStatefulSetStatus` after `completeRollingUpdate`: written only when
    /// a field differs.
    fn write_status(&self, set: &Value, mut c: Counts, revisions: (&str, &str), collisions: i32) -> Result<(), Retry> {
        let (mut current, update) = (revisions.0.to_string(), revisions.1.to_string());
        let replicas = i64::from(crate::spec_replicas(set));
        let rolling = set.pointer("/spec/updateStrategy/type").and_then(Value::as_str).unwrap_or("RollingUpdate") == "RollingUpdate";
        if rolling && c.updated == replicas && c.ready == replicas && c.replicas == replicas {
            c.current = c.updated;
            current = update.clone();
        }
        let mut status = serde_json::Map::new();
        let generation = set.pointer("/metadata/generation").and_then(Value::as_i64).unwrap_or(0);
        if generation != 0 {
            status.insert("observedGeneration".into(), json!(generation));
        }
        status.insert("replicas".into(), json!(c.replicas));
        for (field, n) in [("readyReplicas", c.ready), ("currentReplicas", c.current), ("updatedReplicas", c.updated)] {
            if n != 0 {
                status.insert(field.into(), json!(n));
            }
        }
        for (field, v) in [("currentRevision", &current), ("updateRevision", &update)] {
            if !v.is_empty() {
                status.insert(field.into(), json!(v));
            }
        }
        status.insert("collisionCount".into(), json!(collisions));
        status.insert("availableReplicas".into(), json!(c.available));
        let status = Value::Object(status);
        let old = set.get("status").cloned().unwrap_or_else(|| json!({}));
        let differs = |f: &str| old.get(f).cloned().unwrap_or(Value::Null) != status.get(f).cloned().unwrap_or(Value::Null);
        let observed_newer = generation > old.get("observedGeneration").and_then(Value::as_i64).unwrap_or(0);
        let inconsistent = observed_newer
            || ["replicas", "currentReplicas", "readyReplicas", "updatedReplicas", "currentRevision", "availableReplicas", "updateRevision"]
                .iter()
                .any(|f| {
                    // Zero counts are left out; compare them as zeros.
                    let norm = |v: Option<&Value>| v.cloned().filter(|v| *v != json!(0)).unwrap_or(Value::Null);
                    norm(old.get(*f)) != norm(status.get(*f))
                });
        if !inconsistent && !differs("collisionCount") {
            return Ok(());
        }
        let mut new = set.clone();
        new["status"] = status;
        put(self.core, self.set_res, new, Sub::Status, MANAGER).map(|_| ())
    }
}

/// Upstream's `runForAll`: `step` over `items` in order; an error ends it, and so, in a
/// monotonic sync, does a step that asks to wait (`Ok(true)` is then returned).
fn run_for_all<T>(items: &mut [T], monotonic: bool, mut step: impl FnMut(&mut T) -> Result<bool, Retry>) -> Result<bool, Retry> {
    for item in items {
        if step(item)? && monotonic {
            return Ok(true);
        }
    }
    Ok(false)
}

/// Upstream's `newVersionedStatefulSetPod` (Go's `&&` binds tighter than `||`, so a
/// `rollingUpdate` block with a partition decides whatever the strategy's type).
fn versioned_pod(current_set: &Value, update_set: &Value, current: &str, update: &str, ord: i64) -> Value {
    let start = start_ordinal(current_set);
    let strategy = current_set.pointer("/spec/updateStrategy");
    let rolling = strategy.and_then(|s| s["type"].as_str()).unwrap_or("RollingUpdate") == "RollingUpdate";
    let rolling_update = strategy.and_then(|s| s.get("rollingUpdate")).filter(|r| !r.is_null());
    let current_replicas = current_set.pointer("/status/currentReplicas").and_then(Value::as_i64).unwrap_or(0);
    let at_current = match rolling_update {
        None => rolling && ord < start + current_replicas,
        Some(r) => ord < start + r["partition"].as_i64().unwrap_or(0),
    };
    if at_current { identity::new_pod(current_set, ord, current) } else { identity::new_pod(update_set, ord, update) }
}

/// The Pod steps of one sync, and the Events they record.
struct Step<'a> {
    pass: &'a Pass<'a>,
    set: &'a Value,
    update_set: &'a Value,
    monotonic: bool,
    min_ready: i64,
    now: DateTime<Utc>,
    events: Vec<(bool, String, String)>,
}

impl Step<'_> {
    fn claims(&self) -> Claims<'_> {
        Claims { core: self.pass.core, res: self.pass.claim_res }
    }

    fn pod_event(&mut self, verb: &str, pod: &Value, error: Option<&str>) {
        let title = format!("{}{}", verb[..1].to_uppercase(), &verb[1..]);
        let (pod, set) = (meta_str(pod, "name"), meta_str(self.set, "name"));
        self.events.push(match error {
            None => (false, format!("Successful{title}"), format!("{title} Pod {pod} in StatefulSet {set} successful")),
            Some(e) => (true, format!("Failed{title}"), format!("{title} Pod {pod} in StatefulSet {set} failed error: {e}")),
        });
    }

    fn flush_events(&mut self) {
        for (warning, reason, message) in std::mem::take(&mut self.events) {
            let subject = recorder::Subject { obj: self.set, api_version: "apps/v1", kind: "StatefulSet" };
            recorder::record(self.pass.core, MANAGER, subject, warning, &reason, &message);
        }
    }

    fn delete(&mut self, pod: &Value) -> Result<(), Retry> {
        let p = self.pass;
        match p.core.delete(p.pod_res, meta_str(pod, "namespace"), meta_str(pod, "name"), &DeleteOptions::default()) {
            Ok(_) => {
                self.pod_event("delete", pod, None);
                Ok(())
            }
            Err(e) if e.code == 404 => Ok(()),
            Err(e) => {
                self.pod_event("delete", pod, Some(&e.message));
                Err(Retry)
            }
        }
    }

    /// Upstream's `processReplica`; `Ok(true)` when a monotonic sync must stop here.
    fn replica(&mut self, pod: &mut Value) -> Result<bool, Retry> {
        let phase = phase(pod).to_string();
        if phase == "Failed" || phase == "Succeeded" {
            if !deleting(pod) {
                self.delete(pod)?;
            }
            return Ok(true);
        }
        if !created(pod) {
            if self.claims().stale(self.set, pod) {
                return Ok(true);
            }
            let mut events = vec![];
            let made = self.claims().create_missing(self.set, pod, &mut events);
            self.events.extend(events);
            made?;
            let p = self.pass;
            match apiserver::rest::wait(p.core.create(p.pod_res, meta_str(self.set, "namespace"), pod.clone(), &opts(MANAGER))) {
                Ok(created_pod) => {
                    self.claims().update_for_policy(self.set, &created_pod)?;
                    self.pod_event("create", pod, None);
                }
                Err(e) if e.code == 409 => return Err(Retry),
                Err(e) => {
                    self.pod_event("create", pod, Some(&e.message));
                    return Err(Retry);
                }
            }
            if self.monotonic {
                return Ok(true);
            }
            return Ok(false);
        }
        if phase == "Pending" {
            let mut events = vec![];
            let made = self.claims().create_missing(self.set, pod, &mut events);
            self.events.extend(events);
            made?;
            self.claims().update_for_policy(self.set, pod)?;
        }
        if self.monotonic && (deleting(pod) || !running_and_ready(pod) || !pod_available(pod, self.min_ready, self.now)) {
            return Ok(true);
        }
        let identity_ok = identity::identity_matches(self.set, pod) && identity::storage_matches(self.set, pod);
        if identity_ok && self.claims().match_policy(self.update_set, pod) {
            return Ok(false);
        }
        // Upstream's `UpdateStatefulPod`: repair the identity labels and the claims' owners.
        self.claims().update_for_policy(self.update_set, pod)?;
        if !identity_ok {
            let mut fixed = pod.clone();
            identity::update_identity(&mut fixed);
            identity::update_storage(self.update_set, &mut fixed);
            let p = self.pass;
            match put(p.core, p.pod_res, fixed, Sub::Main, MANAGER) {
                Ok(updated) => {
                    self.pod_event("update", pod, None);
                    *pod = updated;
                }
                Err(e) => {
                    self.pod_event("update", pod, Some("the pod could not be updated"));
                    return Err(e);
                }
            }
        }
        Ok(false)
    }

    /// Upstream's `processCondemned`; `Ok(true)` when a monotonic sync must stop here.
    fn condemned(&mut self, pod: &mut Value, first_unavailable: Option<&str>) -> Result<bool, Retry> {
        if deleting(pod) {
            return Ok(self.monotonic);
        }
        let first = first_unavailable == Some(meta_str(pod, "name"));
        if self.monotonic && !first && (!running_and_ready(pod) || !pod_available(pod, self.min_ready, self.now)) {
            return Ok(true);
        }
        self.delete(pod)?;
        Ok(true)
    }

    /// The rolling update: upstream's loop in `updateStatefulSet`, or
    /// `updateStatefulSetAfterInvariantEstablished` with `maxUnavailable`.
    fn roll(&mut self, replicas: &[Value], update: &str, counts: &mut Counts) -> Result<(), Retry> {
        let partition = self.set.pointer("/spec/updateStrategy/rollingUpdate/partition").and_then(Value::as_i64).unwrap_or(0).max(0) as usize;
        let needs_update = |p: &Value| pod_revision(p) != update && !deleting(p);
        if !self.pass.max_unavailable {
            for target in (partition..replicas.len()).rev() {
                if needs_update(&replicas[target]) {
                    self.delete(&replicas[target])?;
                    counts.current -= 1;
                    return Ok(());
                }
                if unavailable(&replicas[target], self.min_ready, self.now) {
                    return Ok(());
                }
            }
            return Ok(());
        }
        let max_unavailable = self.set.pointer("/spec/updateStrategy/rollingUpdate/maxUnavailable");
        let max_unavailable = max_unavailable
            .and_then(workload_math::IntOrPercent::from_json)
            .and_then(|m| workload_math::scaled_value(m, replicas.len() as i32, false).ok())
            .unwrap_or(1)
            .max(1) as usize;
        let unavailable_now = replicas.iter().filter(|p| unavailable(p, self.min_ready, self.now)).count();
        if unavailable_now >= max_unavailable {
            return Ok(());
        }
        let mut budget = max_unavailable - unavailable_now;
        for target in (partition..replicas.len()).rev() {
            if budget == 0 {
                break;
            }
            if needs_update(&replicas[target]) {
                self.delete(&replicas[target])?;
                counts.current -= 1;
                budget -= 1;
            }
        }
        Ok(())
    }
}
