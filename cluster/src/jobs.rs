//! The Job runner: a stand-in for the Job controller and the Pods it would run, with no Pods.
//!
//! It reacts as upstream's Job controller does, through the watch and a work queue: each Job
//! event puts the Job's key on a delaying queue, and a sync reads the latest copy of the Job.
//! Nothing is written while the request that created the Job is still answering: upstream's
//! first sync records `startTime` as it begins, creates the Pods, and writes the status only
//! then; the runner, which has no Pods, writes that first status
//! [`ClusterConfig::job_first_status_after`] after it first saw the Job. So a client that
//! creates a Job and at once updates its status with the resourceVersion the create returned
//! (controller tests do, to fake a running Job) is not answered 409 because of the runner; a
//! write of the runner that finds a newer copy fails instead, and the key is synced again.
//!
//! A batch/v1 Job that is not suspended and not finished gets `status.startTime` (when the
//! runner first saw it), `active: 1` (`ready`, `terminating` 0, `uncountedTerminatedPods: {}`),
//! as the Job controller writes once its first Pod exists. After
//! [`ClusterConfig::job_duration`] (or the Job's or its template's
//! `sim.operator-host.dev/duration`), counted from when the runner first saw it, it finishes
//! with current upstream's (1.31+) status shape:
//!
//! - success: conditions `SuccessCriteriaMet` then `Complete` (`True`, reason
//!   `CompletionsReached`, message `Reached expected number of succeeded pods`),
//!   `completionTime`, `succeeded` = `spec.completions` (default 1), `active: 0`;
//! - with `sim.operator-host.dev/fail: "true"`: conditions `FailureTarget` then `Failed`
//!   (`True`, reason `BackoffLimitExceeded`, message `Job has reached the specified backoff
//!   limit`), `failed` = `spec.backoffLimit` + 1 (the failures it takes to exceed the limit;
//!   1 with `backoffLimit: 0`), `active: 0`, no `completionTime`.
//!
//! Suspended Jobs are left alone (no `Suspended` condition is written).

use super::{ClusterConfig, Next, annotation, builtin, deleting, flag, meta_str, now, opts, parse_duration};
use apiserver::rest::{Core, Sub};
use apiserver::store::EventType;
use serde_json::{Value, json};
use std::collections::{HashMap, HashSet};
use std::time::Duration;
use tokio::time::Instant;

const MANAGER: &str = "job-controller";

/// How long a sync whose write failed waits before it runs again.
const RETRY_AFTER: Duration = Duration::from_millis(100);

/// The Job runner's state: its view of the watch, its work queue and the Jobs it runs.
#[derive(Debug)]
pub struct JobRunner {
    config: ClusterConfig,
    /// The resourceVersion up to which the watch has been read; `None` lists every Job first
    /// (the initial list, and the relist when the event window has moved past it).
    watched_to: Option<u64>,
    /// When every Job is queued again, as an informer's resync.
    resync_at: Option<Instant>,
    queue: WorkQueue,
    /// Jobs seen running, by uid.
    running: HashMap<String, Run>,
}

/// A Job the runner has seen running.
#[derive(Debug, Clone)]
struct Run {
    /// The server's time when the runner first saw the Job: its `startTime`.
    started: String,
    /// When the first status may be written (the Pods would exist).
    first_status_at: Instant,
    finishes_at: Instant,
}

/// A delaying work queue of `(namespace, name)` keys, as client-go's: a key is queued once,
/// at the earliest instant anyone asked for.
#[derive(Debug, Default)]
struct WorkQueue {
    due: HashMap<(String, String), Instant>,
}

impl WorkQueue {
    fn add_at(&mut self, key: (String, String), at: Instant) {
        let entry = self.due.entry(key).or_insert(at);
        *entry = (*entry).min(at);
    }

    /// Removes and returns the keys due at `now`, in key order.
    fn take_due(&mut self, now: Instant) -> Vec<(String, String)> {
        let mut keys: Vec<_> = self.due.iter().filter(|(_, at)| **at <= now).map(|(k, _)| k.clone()).collect();
        keys.sort();
        for k in &keys {
            self.due.remove(k);
        }
        keys
    }

    fn next_due(&self) -> Option<Instant> {
        self.due.values().min().copied()
    }
}

fn sim(job: &Value, name: &str) -> Option<String> {
    annotation(job, name).or_else(|| job.pointer("/spec/template").and_then(|t| annotation(t, name))).map(String::from)
}

fn finished(job: &Value) -> bool {
    job.pointer("/status/conditions")
        .and_then(Value::as_array)
        .is_some_and(|cs| cs.iter().any(|c| (c["type"] == "Complete" || c["type"] == "Failed") && c["status"] == "True"))
}

fn condition(t: &str, reason: &str, message: &str, ts: &str) -> Value {
    json!({"type": t, "status": "True", "reason": reason, "message": message, "lastProbeTime": ts, "lastTransitionTime": ts})
}

/// Whether a commit concerns the Job runner: Jobs.
pub(crate) fn relevant(e: &apiserver::store::Event) -> bool {
    e.key.gr.group == "batch" && e.key.gr.resource == "jobs"
}

impl JobRunner {
    /// A runner with these durations.
    pub fn new(config: ClusterConfig) -> Self {
        JobRunner { config, watched_to: None, resync_at: None, queue: WorkQueue::default(), running: HashMap::new() }
    }

    /// One pass: queue the keys the watch brought, then sync every key that is due.
    pub(crate) fn pass(&mut self, core: &Core) -> Next {
        let res = builtin(core, "batch", "v1", "jobs");
        let clock = Instant::now();
        self.watch(core, &res, clock);
        for key in self.queue.take_due(clock) {
            if !self.sync(core, &res, &key, clock) {
                self.queue.add_at(key, clock + RETRY_AFTER);
            }
        }
        let mut next = Next::default();
        if let Some(at) = self.queue.next_due() {
            next.at(at);
        }
        if let Some(at) = self.resync_at {
            next.at(at);
        }
        next
    }

    /// Reads the Job events since the last pass into the queue; lists every Job instead at
    /// the start, after the event window moved past the runner, and at each resync.
    fn watch(&mut self, core: &Core, res: &apiserver::resources::Resource, clock: Instant) {
        let gr = res.group_resource();
        let events = match self.watched_to {
            Some(rv) if self.resync_at.is_none_or(|at| clock < at) => core.store.events_since(&gr, rv).ok(),
            _ => None,
        };
        match events {
            Some((events, rv)) => {
                for e in events {
                    if e.kind == EventType::Deleted {
                        self.running.remove(meta_str(&e.object, "uid"));
                    } else {
                        self.queue.add_at((e.key.namespace.clone(), e.key.name.clone()), clock);
                    }
                }
                self.watched_to = Some(rv);
            }
            None => {
                let (jobs, rv) = core.store.list_shared(&gr, None);
                let live: HashSet<&str> = jobs.iter().map(|j| meta_str(j, "uid")).collect();
                self.running.retain(|uid, _| live.contains(uid.as_str()));
                for job in &jobs {
                    self.queue.add_at((meta_str(job, "namespace").to_string(), meta_str(job, "name").to_string()), clock);
                }
                self.watched_to = Some(rv);
                self.resync_at = Some(clock + self.config.resync_interval);
            }
        }
    }

    /// Syncs one Job from its latest copy. False when a write failed (try again).
    fn sync(&mut self, core: &Core, res: &apiserver::resources::Resource, (namespace, name): &(String, String), clock: Instant) -> bool {
        let Some(job) = core.store.get(&core.key(res, namespace, name)) else {
            return true;
        };
        let uid = meta_str(&job, "uid").to_string();
        if deleting(&job) || finished(&job) || job.pointer("/spec/suspend") == Some(&json!(true)) {
            self.running.remove(&uid);
            return true;
        }
        let duration = sim(&job, "duration").as_deref().and_then(parse_duration).unwrap_or(self.config.job_duration);
        let first_status_after = self.config.job_first_status_after;
        let run = self
            .running
            .entry(uid)
            .or_insert_with(|| Run { started: now(core), first_status_at: clock + first_status_after, finishes_at: clock + duration })
            .clone();
        let key = (namespace.clone(), name.clone());
        let mut job = job;
        if job.pointer("/status/startTime").is_none_or(Value::is_null) {
            if clock < run.first_status_at {
                self.queue.add_at(key, run.first_status_at);
                return true;
            }
            let mut status = job.get("status").cloned().filter(Value::is_object).unwrap_or_else(|| json!({}));
            status["startTime"] = json!(run.started);
            status["active"] = json!(1);
            status["ready"] = json!(0);
            status["terminating"] = json!(0);
            status["uncountedTerminatedPods"] = json!({});
            match write_status(core, res, &job, status) {
                Some(written) => job = written,
                None => return false,
            }
        }
        if clock < run.finishes_at {
            self.queue.add_at(key, run.finishes_at);
            return true;
        }
        let ts = now(core);
        let mut status = job["status"].clone();
        status["active"] = json!(0);
        status["ready"] = json!(0);
        status["terminating"] = json!(0);
        status["uncountedTerminatedPods"] = json!({});
        if flag(sim(&job, "fail").as_deref()) {
            let limit = job.pointer("/spec/backoffLimit").and_then(Value::as_i64).unwrap_or(6);
            let msg = "Job has reached the specified backoff limit";
            status["failed"] = json!(limit.max(0) + 1);
            status["conditions"] =
                json!([condition("FailureTarget", "BackoffLimitExceeded", msg, &ts), condition("Failed", "BackoffLimitExceeded", msg, &ts)]);
        } else {
            let completions = job.pointer("/spec/completions").and_then(Value::as_i64).unwrap_or(1);
            let msg = "Reached expected number of succeeded pods";
            status["succeeded"] = json!(completions);
            status["completionTime"] = json!(ts);
            status["conditions"] =
                json!([condition("SuccessCriteriaMet", "CompletionsReached", msg, &ts), condition("Complete", "CompletionsReached", msg, &ts)]);
        }
        if write_status(core, res, &job, status).is_none() {
            return false;
        }
        self.running.remove(meta_str(&job, "uid"));
        true
    }
}

/// PUTs `status` on `job` (at the resourceVersion it was read at): the Job as written, or
/// `None` when the write failed. A Job gone meanwhile needs nothing more: it is returned as is.
fn write_status(core: &Core, res: &apiserver::resources::Resource, job: &Value, status: Value) -> Option<Value> {
    let mut new = job.clone();
    new["status"] = status;
    match apiserver::rest::wait(core.update(res, meta_str(job, "namespace"), meta_str(job, "name"), new, Sub::Status, &opts(MANAGER))) {
        Ok(written) => Some(written),
        Err(e) if e.code == 404 => Some(job.clone()),
        Err(e) => {
            tracing::debug!(error = %e.message, "job runner could not write status");
            None
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key(name: &str) -> (String, String) {
        ("default".to_string(), name.to_string())
    }

    #[test]
    fn a_key_is_queued_once_at_the_earliest_instant_asked_for() {
        let t0 = Instant::now();
        let mut q = WorkQueue::default();
        q.add_at(key("b"), t0 + Duration::from_secs(5));
        q.add_at(key("b"), t0 + Duration::from_secs(1));
        q.add_at(key("b"), t0 + Duration::from_secs(3));
        q.add_at(key("a"), t0 + Duration::from_secs(2));
        assert_eq!(q.next_due(), Some(t0 + Duration::from_secs(1)));
        assert!(q.take_due(t0).is_empty());
        assert_eq!(q.take_due(t0 + Duration::from_secs(1)), [key("b")]);
        assert_eq!(q.take_due(t0 + Duration::from_secs(9)), [key("a")]);
        assert_eq!(q.next_due(), None);
    }

    #[test]
    fn due_keys_come_out_in_key_order() {
        let t0 = Instant::now();
        let mut q = WorkQueue::default();
        for name in ["c", "a", "b"] {
            q.add_at(key(name), t0);
        }
        assert_eq!(q.take_due(t0), [key("a"), key("b"), key("c")]);
    }
}
