//! The Job runner: a stand-in for the Job controller and the Pods it would run, with no Pods.
//!
//! A batch/v1 Job that is not suspended and not finished gets `status.startTime`, `active: 1`
//! (`ready`, `terminating` 0, `uncountedTerminatedPods: {}`), as the Job controller writes once
//! its first Pod exists. After [`ClusterConfig::job_duration`] (or the Job's or its template's
//! `sim.operator-host.dev/duration`) it finishes with current upstream's (1.31+) status shape:
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
use crate::rest::{Core, Sub};
use serde_json::{Value, json};
use std::collections::{HashMap, HashSet};
use tokio::time::Instant;

const MANAGER: &str = "job-controller";

/// The Job runner's state: when each running Job finishes.
#[derive(Debug)]
pub struct JobRunner {
    config: ClusterConfig,
    running: HashMap<String, Instant>,
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
pub(crate) fn relevant(e: &crate::store::Event) -> bool {
    e.key.gr.group == "batch" && e.key.gr.resource == "jobs"
}

impl JobRunner {
    /// A runner with these durations.
    pub fn new(config: ClusterConfig) -> Self {
        JobRunner { config, running: HashMap::new() }
    }

    /// One pass over every Job.
    pub(crate) fn pass(&mut self, core: &Core) -> Next {
        let mut next = Next::default();
        let res = builtin(core, "batch", "v1", "jobs");
        let jobs = core.store.list_shared(&res.group_resource(), None).0;
        let live: HashSet<&str> = jobs.iter().map(|j| meta_str(j, "uid")).collect();
        self.running.retain(|uid, _| live.contains(uid.as_str()));
        let clock = Instant::now();
        for job in &jobs {
            let uid = meta_str(job, "uid");
            if deleting(job) || finished(job) || job.pointer("/spec/suspend") == Some(&json!(true)) {
                self.running.remove(uid);
                continue;
            }
            let duration = sim(job, "duration").as_deref().and_then(parse_duration).unwrap_or(self.config.job_duration);
            let ts = now(core);
            let mut status = job.get("status").cloned().filter(Value::is_object).unwrap_or_else(|| json!({}));
            if status.get("startTime").is_none_or(Value::is_null) {
                status["startTime"] = json!(ts);
                status["active"] = json!(1);
                status["ready"] = json!(0);
                status["terminating"] = json!(0);
                status["uncountedTerminatedPods"] = json!({});
                if !write_status(core, &res, job, status) {
                    next.retry = true;
                    continue;
                }
                self.running.insert(uid.to_string(), clock + duration);
            }
            let at = *self.running.entry(uid.to_string()).or_insert(clock + duration);
            if clock < at {
                next.at(at);
                continue;
            }
            let current = core.store.get(&core.key(&res, meta_str(job, "namespace"), meta_str(job, "name"))).unwrap_or_else(|| Value::clone(job));
            let mut status = current["status"].clone();
            status["active"] = json!(0);
            status["ready"] = json!(0);
            status["terminating"] = json!(0);
            status["uncountedTerminatedPods"] = json!({});
            if flag(sim(job, "fail").as_deref()) {
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
            if write_status(core, &res, &current, status) {
                self.running.remove(uid);
            } else {
                next.retry = true;
            }
        }
        next
    }
}

fn write_status(core: &Core, res: &crate::resources::Resource, job: &Value, status: Value) -> bool {
    let mut new = job.clone();
    new["status"] = status;
    match crate::rest::wait(core.update(res, meta_str(job, "namespace"), meta_str(job, "name"), new, Sub::Status, &opts(MANAGER))) {
        Ok(_) => true,
        Err(e) if e.code == 404 => true,
        Err(e) => {
            tracing::debug!(error = %e.message, "job runner could not write status");
            false
        }
    }
}
