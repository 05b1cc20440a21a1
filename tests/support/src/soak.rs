//! The ledger of the soak suites (`fault_soak.rs`, `crash_soak.rs`): fed every
//! committed change of Jobs and Pods in order, it counts what the issue's
//! figures are about.
//!
//! - **Runs.** A CronJob's run is its scheduled time; each Job is filed under
//!   (namespace, CronJob, `batch.kubernetes.io/cronjob-scheduled-timestamp`)
//!   by uid, so a Job deleted and made again for the same time is a duplicate
//!   too. A scheduled time of the window without a Job is a lost run.
//! - **Surge.** MyDeployment's bound as its README defines it (upstream's
//!   Deployment): under the default `podReplacementPolicy`
//!   (`TerminationStarted`) the Pods without `deletionTimestamp`, under
//!   `TerminationComplete` all Pods, never exceed `replicas + maxSurge`
//!   (`maxSurge` a count or a percentage of `replicas` rounded up). Checked
//!   after every Pod change.

use std::collections::{HashMap, HashSet};

use chrono::{DateTime, TimeDelta, Utc};
use serde_json::{Value, json};

pub const SCHEDULED_AT: &str = "batch.kubernetes.io/cronjob-scheduled-timestamp";

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Change {
    Added,
    Modified,
    Deleted,
}

/// A MyDeployment's bound on its Pods.
#[derive(Debug, Clone)]
pub struct Bound {
    pub replicas: i64,
    pub max_surge: i64,
    /// `podReplacementPolicy: TerminationComplete`: terminating Pods count.
    pub termination_complete: bool,
}

impl Bound {
    /// `maxSurge` as `strategy.rollingUpdate.maxSurge` gives it (`25%` when unset).
    pub fn new(replicas: i64, max_surge: &Value, termination_complete: bool) -> Bound {
        let max_surge = match max_surge {
            Value::Number(n) => n.as_i64().expect("an integer maxSurge"),
            Value::String(s) => {
                let percent: i64 = s.strip_suffix('%').and_then(|p| p.parse().ok()).expect("maxSurge N%");
                (replicas * percent + 99) / 100
            }
            _ => (replicas * 25 + 99) / 100,
        };
        Bound { replicas, max_surge, termination_complete }
    }

    /// The bound of a MyDeployment object.
    pub fn of(md: &Value) -> Bound {
        let replicas = md.pointer("/spec/replicas").and_then(Value::as_i64).unwrap_or(1);
        let surge = md.pointer("/spec/strategy/rollingUpdate/maxSurge").cloned().unwrap_or(Value::Null);
        let complete = md.pointer("/spec/podReplacementPolicy").and_then(Value::as_str) == Some("TerminationComplete");
        Bound::new(replicas, &surge, complete)
    }

    fn limit(&self) -> i64 {
        self.replicas + self.max_surge
    }
}

#[derive(Debug, Default)]
struct Counted {
    active: i64,
    all: i64,
}

#[derive(Debug, Default)]
pub struct Ledger {
    /// (namespace, CronJob, scheduled time) → uids of the Jobs made for it.
    runs: HashMap<(String, String, DateTime<Utc>), Vec<String>>,
    job_uids: HashSet<String>,
    /// Jobs whose name does not say the scheduled time their annotation does.
    pub misnamed_jobs: Vec<String>,
    /// namespace/name of a MyDeployment → its bound.
    bounds: HashMap<String, Bound>,
    /// Pod uid → (owner namespace/name, terminating).
    pods: HashMap<String, (String, bool)>,
    counted: HashMap<String, Counted>,
    /// Highest (counted Pods − (replicas + maxSurge)) seen, over every MyDeployment and every
    /// Pod change; 0 or below means the bound always held.
    pub worst_over_surge: i64,
    /// What the worst moment was.
    pub worst: String,
    /// Pod changes checked.
    pub pod_changes: u64,
}

fn str_at<'a>(v: &'a Value, pointer: &str) -> Option<&'a str> {
    v.pointer(pointer).and_then(Value::as_str)
}

fn controller_name(obj: &Value, kind: &str) -> Option<String> {
    let refs = obj.pointer("/metadata/ownerReferences")?.as_array()?;
    refs.iter().find(|r| r["controller"] == true && r["kind"] == kind).and_then(|r| r["name"].as_str()).map(String::from)
}

impl Ledger {
    /// Sets (or changes) a MyDeployment's bound.
    pub fn bound(&mut self, namespace: &str, name: &str, bound: Bound) {
        self.worst_over_surge = self.worst_over_surge.max(-bound.limit());
        self.bounds.insert(format!("{namespace}/{name}"), bound);
    }

    /// One committed change of a Job or a Pod (anything else is ignored).
    pub fn observe(&mut self, change: Change, obj: &Value) {
        match obj.get("kind").and_then(Value::as_str) {
            Some("Job") => self.observe_job(change, obj),
            Some("Pod") => self.observe_pod(change, obj),
            _ => {}
        }
    }

    /// One committed change of a Job.
    pub fn observe_job(&mut self, change: Change, job: &Value) {
        let Some(cronjob) = controller_name(job, "CronJob") else { return };
        let uid = str_at(job, "/metadata/uid").unwrap_or_default().to_string();
        if change == Change::Deleted || !self.job_uids.insert(uid.clone()) {
            return;
        }
        let namespace = str_at(job, "/metadata/namespace").unwrap_or_default().to_string();
        let name = str_at(job, "/metadata/name").unwrap_or_default();
        let scheduled = str_at(job, &format!("/metadata/annotations/{}", SCHEDULED_AT.replace('/', "~1")))
            .and_then(|t| DateTime::parse_from_rfc3339(t).ok())
            .map(|t| t.with_timezone(&Utc));
        let Some(scheduled) = scheduled else {
            self.misnamed_jobs.push(format!("{namespace}/{name} (no {SCHEDULED_AT})"));
            return;
        };
        if name != format!("{cronjob}-{}", scheduled.timestamp() / 60) {
            self.misnamed_jobs.push(format!("{namespace}/{name} (scheduled {scheduled})"));
        }
        self.runs.entry((namespace, cronjob, scheduled)).or_default().push(uid);
    }

    /// One committed change of a Pod.
    pub fn observe_pod(&mut self, change: Change, pod: &Value) {
        let uid = str_at(pod, "/metadata/uid").unwrap_or_default().to_string();
        let namespace = str_at(pod, "/metadata/namespace").unwrap_or_default();
        let Some(owner) = controller_name(pod, "MyDeployment").map(|o| format!("{namespace}/{o}")) else { return };
        self.pod_changes += 1;
        if let Some((old_owner, terminating)) = self.pods.remove(&uid) {
            let c = self.counted.entry(old_owner).or_default();
            c.all -= 1;
            c.active -= i64::from(!terminating);
        }
        if change != Change::Deleted {
            let terminating = pod.pointer("/metadata/deletionTimestamp").is_some_and(|t| !t.is_null());
            let c = self.counted.entry(owner.clone()).or_default();
            c.all += 1;
            c.active += i64::from(!terminating);
            self.pods.insert(uid, (owner.clone(), terminating));
        }
        self.check(&owner);
    }

    fn check(&mut self, owner: &str) {
        let (Some(bound), Some(c)) = (self.bounds.get(owner), self.counted.get(owner)) else { return };
        let counted = if bound.termination_complete { c.all } else { c.active };
        let over = counted - bound.limit();
        if over > self.worst_over_surge {
            self.worst_over_surge = over;
            self.worst = format!(
                "{owner}: {counted} Pods counted ({} active, {} in all) against replicas {} + maxSurge {}",
                c.active, c.all, bound.replicas, bound.max_surge
            );
        }
    }

    /// After a relist: the listed Pods are all there is, taken as one
    /// change (a mix of before and after the relist was never on the server).
    pub fn replace_pods(&mut self, listed: &[Value]) {
        self.pods.clear();
        self.counted.clear();
        let mut owners = HashSet::new();
        for pod in listed {
            let namespace = str_at(pod, "/metadata/namespace").unwrap_or_default();
            let Some(owner) = controller_name(pod, "MyDeployment").map(|o| format!("{namespace}/{o}")) else { continue };
            let terminating = pod.pointer("/metadata/deletionTimestamp").is_some_and(|t| !t.is_null());
            let c = self.counted.entry(owner.clone()).or_default();
            c.all += 1;
            c.active += i64::from(!terminating);
            let uid = str_at(pod, "/metadata/uid").unwrap_or_default().to_string();
            self.pods.insert(uid, (owner.clone(), terminating));
            owners.insert(owner);
        }
        for owner in owners {
            self.check(&owner);
        }
    }

    /// Pods counted now for a MyDeployment: (without deletionTimestamp, all).
    pub fn pods_of(&self, namespace: &str, name: &str) -> (i64, i64) {
        self.counted.get(&format!("{namespace}/{name}")).map_or((0, 0), |c| (c.active, c.all))
    }

    /// Every Job made for a CronJob, filed by scheduled time.
    pub fn jobs_created(&self) -> usize {
        self.job_uids.len()
    }

    /// Scheduled times with more than one Job, and how many extra Jobs they had.
    pub fn duplicates(&self) -> (Vec<String>, usize) {
        let mut which = Vec::new();
        let mut extra = 0;
        for ((ns, cj, at), uids) in &self.runs {
            if uids.len() > 1 {
                which.push(format!("{ns}/{cj} at {at}: {} Jobs", uids.len()));
                extra += uids.len() - 1;
            }
        }
        which.sort();
        (which, extra)
    }

    /// A `* * * * *` CronJob's scheduled times after `created` up to `until`
    /// (both inclusive of whole minutes after `created`), and those without a Job.
    pub fn every_minute(&self, namespace: &str, cronjob: &str, created: DateTime<Utc>, until: DateTime<Utc>) -> (usize, Vec<DateTime<Utc>>) {
        let mut t = DateTime::from_timestamp((created.timestamp() / 60 + 1) * 60, 0).expect("a time");
        let (mut runs, mut lost) = (0, Vec::new());
        while t <= until {
            runs += 1;
            if !self.runs.contains_key(&(namespace.to_string(), cronjob.to_string(), t)) {
                lost.push(t);
            }
            t += TimeDelta::minutes(1);
        }
        (runs, lost)
    }
}

/// A small seeded generator (splitmix64) for the suites' random choices: the
/// seed is printed, and the same seed makes the same choices.
#[derive(Debug, Clone)]
pub struct Rng(u64);

impl Rng {
    pub fn new(seed: u64) -> Rng {
        Rng(seed)
    }

    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// Uniform in `low..high` milliseconds.
    pub fn millis(&mut self, low: u64, high: u64) -> std::time::Duration {
        std::time::Duration::from_millis(low + self.next_u64() % (high - low).max(1))
    }
}

/// The seed of a suite: `SOAK_SEED` if set, else `default`.
pub fn seed(default: u64) -> u64 {
    std::env::var("SOAK_SEED").ok().and_then(|s| s.parse().ok()).unwrap_or(default)
}

/// A `* * * * *` CronJob with `Allow`, whose Jobs run `duration` (the Job
/// runner reads the annotation the plugin copies from `jobTemplate.metadata`).
pub fn cronjob(name: &str, duration: &str, history: Option<i64>) -> Value {
    let mut cj = json!({
        "apiVersion": "batch.tutorial.kubebuilder.io/v1",
        "kind": "CronJob",
        "metadata": {"name": name, "namespace": "default"},
        "spec": {
            "schedule": "* * * * *",
            "concurrencyPolicy": "Allow",
            "jobTemplate": {
                "metadata": {"annotations": {"sim.operator-host.dev/duration": duration}},
                "spec": {"template": {"spec": {"containers": [{"name": "work", "image": "busybox"}], "restartPolicy": "OnFailure"}}}
            }
        }
    });
    if let Some(n) = history {
        cj["spec"]["successfulJobsHistoryLimit"] = json!(n);
        cj["spec"]["failedJobsHistoryLimit"] = json!(n);
    }
    cj
}

/// MyDeployment `md-i`: 3 to 5 replicas, maxSurge 1 or 50% (2 or 3 Pods),
/// maxUnavailable 1, and every other pair with `podReplacementPolicy:
/// TerminationComplete`; image `app:v0`.
pub fn mydeployment(i: usize) -> (Value, Bound) {
    let replicas = 3 + (i % 3) as i64;
    let surge = if i.is_multiple_of(2) { json!(1) } else { json!("50%") };
    let policy = if i % 4 < 2 { "TerminationStarted" } else { "TerminationComplete" };
    let name = format!("md-{i}");
    let md = json!({
        "apiVersion": "apps.example.com/v1",
        "kind": "MyDeployment",
        "metadata": {"name": name, "namespace": "default"},
        "spec": {
            "replicas": replicas,
            "selector": {"matchLabels": {"app": name}},
            "strategy": {"type": "RollingUpdate", "rollingUpdate": {"maxSurge": surge, "maxUnavailable": 1}},
            "podReplacementPolicy": policy,
            "template": {
                "metadata": {"labels": {"app": name}},
                "spec": {"containers": [{"name": "app", "image": "app:v0"}]}
            }
        }
    });
    let bound = Bound::of(&md);
    (md, bound)
}

/// The merge patch that rolls a MyDeployment to image `app:v{n}`.
pub fn image_patch(n: usize) -> Value {
    json!({"spec": {"template": {"spec": {"containers": [{"name": "app", "image": format!("app:v{n}")}]}}}})
}

/// Whether a MyDeployment runs image `app:v{n}` and its rollout is complete
/// as upstream's `DeploymentComplete` says: the latest spec observed, every
/// replica updated and available, no old Pod left.
pub fn rolled_out(md: &Value, n: usize) -> bool {
    let image = md.pointer("/spec/template/spec/containers/0/image").and_then(Value::as_str);
    image == Some(&format!("app:v{n}")) && complete(md)
}

/// Upstream's `DeploymentComplete` on a MyDeployment's status.
pub fn complete(md: &Value) -> bool {
    let n = |p: &str| md.pointer(p).and_then(Value::as_i64).unwrap_or(-1);
    let replicas = n("/spec/replicas");
    n("/status/observedGeneration") >= n("/metadata/generation")
        && n("/status/updatedReplicas") == replicas
        && n("/status/replicas") == replicas
        && n("/status/availableReplicas") == replicas
}
