//! The parts of a cluster an operator relies on besides the API server, simulated next to it
//! (stand-ins for kube-controller-manager, kube-scheduler and the kubelet):
//!
//! | module | what |
//! | --- | --- |
//! | [`gc`] | the garbage collector: ownerReferences by uid; Background, Foreground and Orphan propagation; dangling dependents found at start or on a resync |
//! | [`kubelet`] | fake Nodes (`node-1`..), a scheduler binding unscheduled Pods, kwok-style Pod lifecycle (Running, Ready after a delay, annotations), graceful deletion |
//! | [`jobs`] | a Job runner: batch/v1 Jobs start, then complete (or fail) after a duration, with upstream's status shape; fed by the watch through a work queue |
//! | [`replicasets`] | the ReplicaSet controller: Pods from the template, adoption and release by selector, surplus deleted in upstream's order, status |
//! | [`statefulsets`] | the StatefulSet controller: ordered `<set>-<ordinal>` Pods (`OrderedReady`, `Parallel`), ControllerRevisions, RollingUpdate with `partition` (and `maxUnavailable`), OnDelete, claims from `volumeClaimTemplates` with the retention policy, status |
//! | [`storage`] | a default StorageClass, a simulated provisioner and the PersistentVolume binder (claims bound to volumes, as kube-controller-manager's PV controller) |
//! | [`deployments`] | the Deployment controller: a ReplicaSet per template, RollingUpdate and Recreate at upstream's arithmetic, proportional scaling, revisions, history cleanup, conditions |
//! | [`disruption`] | the disruption controller: PodDisruptionBudget status (healthy, desired, expected Pods, disruptions allowed), which `pods/eviction` reads; runs with the kubelet |
//! | [`events`] | Event expiry, as kube-apiserver's `--event-ttl` (1 h): Events not written for that long are deleted |
//!
//! Start them with [`start`]; every controller reads and writes through the server's
//! [`Core`] (the same verbs HTTP clients use), wakes on every store commit
//! ([`Store::subscribe`](apiserver::store::Store::subscribe)) and re-reads the whole state it cares
//! about (level-based, so no event can be missed), and waits on tokio time only: under a paused
//! tokio clock with an injected [`Clock`](apiserver::Clock) that follows it, the cluster runs in
//! virtual time. Timestamps come from the server's clock; delays are measured from when a
//! controller first saw an object.
//!
//! ## Annotations (`sim.operator-host.dev/...`)
//!
//! | annotation | on | effect |
//! | --- | --- | --- |
//! | `ready-after: 5s` | Pod | Ready after this long instead of [`ClusterConfig::ready_after`] (`500ms`, `5s`, `2m`, `1h`, or plain seconds) |
//! | `never-ready: "true"` | Pod | Running, containers started but never ready |
//! | `restarts: "3"` | Pod | Running, not ready: containers waiting in `CrashLoopBackOff` with this restartCount |
//! | `fail: "true"` | Pod | Running, then (after the ready delay) phase `Failed`, containers terminated with exit code 1 |
//! | `duration: 10s` | Job or its pod template | the Job runs this long instead of [`ClusterConfig::job_duration`] |
//! | `fail: "true"` | Job or its pod template | the Job fails (`BackoffLimitExceeded`) instead of completing |

mod controller_ref;
pub mod deployments;
pub mod disruption;
pub mod events;
pub mod gc;
pub mod jobs;
pub mod kubelet;
mod recorder;
pub mod replicasets;
pub mod statefulsets;
pub mod storage;

use apiserver::ApiServer;
use apiserver::resources::Resource;
use apiserver::rest::Core;
use apiserver::store::Event;
use serde_json::Value;
use std::sync::Arc;
use std::time::Duration;
use tokio::time::Instant;

/// Annotation prefix for per-object simulation overrides.
pub const ANNOTATION_PREFIX: &str = "sim.operator-host.dev/";

/// What the simulated cluster does, with defaults chosen to keep tests fast.
#[derive(Debug, Clone)]
pub struct ClusterConfig {
    /// Fake Nodes `node-1`..`node-N` created at start (default 1; 0 = no kubelet or scheduler).
    pub nodes: usize,
    /// How long a Pod runs before it is Ready (default 1 s).
    pub ready_after: Duration,
    /// How long a Job runs before it completes or fails (default 2 s).
    pub job_duration: Duration,
    /// How long after the Job runner first sees a Job it writes the Job's first status
    /// (default 100 ms): upstream's Job controller creates the Pods before that write, so a
    /// client's own status write right after its create lands first, as on a real cluster.
    pub job_first_status_after: Duration,
    /// Grace period for deleting Pods bound to a node when the request gives none (default 1 s;
    /// stands in for the pod's `terminationGracePeriodSeconds`, upstream 30 s). Whole seconds;
    /// zero deletes pods at once.
    pub pod_grace_period: Duration,
    /// Full re-scan interval even when nothing changed (default 30 s).
    pub resync_interval: Duration,
    /// Run the garbage collector (default true).
    pub garbage_collector: bool,
    /// Run the Job runner (default true).
    pub jobs: bool,
    /// Run the ReplicaSet and Deployment controllers (default true).
    pub deployments: bool,
    /// Run the StatefulSet controller (default true).
    pub statefulsets: bool,
    /// The StatefulSet controller honours `rollingUpdate.maxUnavailable` (default false, as
    /// kube-controller-manager 1.36, whose `MaxUnavailableStatefulSet` gate is beta and off:
    /// one Pod at a time).
    pub statefulset_max_unavailable: bool,
    /// A default StorageClass `standard`, the simulated provisioner and the PersistentVolume
    /// binder (default true).
    pub storage: bool,
    /// Delete Events not written for this long (default 1 h, kube-apiserver's `--event-ttl`);
    /// `None` keeps them forever.
    pub event_ttl: Option<Duration>,
    /// The next pass of a controller waits at least this many times the wall-clock duration
    /// of its last one (default 2). Every pass re-reads all the objects it watches, so its
    /// cost grows with the cluster; with back-to-back passes on every commit a large cluster
    /// had its controllers take the cores from the API server and its clients. A controller
    /// now uses at most 1 / (1 + factor) of a core; a pass batches what arrived meanwhile.
    /// 0 keeps the fixed 5 ms minimum, which virtual-time runs need to stay reproducible
    /// (a wall-clock duration must not decide a virtual-time wait).
    pub pass_cost_factor: u32,
}

impl Default for ClusterConfig {
    fn default() -> Self {
        Self {
            nodes: 1,
            ready_after: Duration::from_secs(1),
            job_duration: Duration::from_secs(2),
            job_first_status_after: Duration::from_millis(100),
            pod_grace_period: Duration::from_secs(1),
            resync_interval: Duration::from_secs(30),
            garbage_collector: true,
            jobs: true,
            deployments: true,
            statefulsets: true,
            statefulset_max_unavailable: false,
            storage: true,
            event_ttl: Some(Duration::from_secs(3600)),
            pass_cost_factor: 2,
        }
    }
}

impl ClusterConfig {
    /// No simulated part but the API server's own (Event expiry), as envtest runs
    /// kube-apiserver alone: no Nodes, scheduler or kubelet, Job runner, garbage collector,
    /// ReplicaSet, Deployment or StatefulSet controller, StorageClass, provisioner or binder.
    pub fn api_server_only() -> Self {
        Self { nodes: 0, garbage_collector: false, jobs: false, deployments: false, statefulsets: false, storage: false, ..Self::default() }
    }
}

/// The running controllers. Stop them with [`ClusterHandle::stop`] (dropping the handle stops
/// them too).
pub struct ClusterHandle {
    core: Arc<Core>,
    stop: tokio::sync::watch::Sender<bool>,
    tasks: Vec<tokio::task::JoinHandle<()>>,
    nodes: Vec<String>,
}

impl std::fmt::Debug for ClusterHandle {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ClusterHandle").field("nodes", &self.nodes).field("tasks", &self.tasks.len()).finish()
    }
}

impl ClusterHandle {
    /// Names of the fake nodes.
    pub fn nodes(&self) -> &[String] {
        &self.nodes
    }

    /// Stop every controller and wait for them to finish their current pass. Pods are deleted
    /// at once again afterwards (no kubelet left to finish a graceful deletion).
    pub async fn stop(mut self) {
        let _ = self.stop.send(true);
        for t in std::mem::take(&mut self.tasks) {
            let _ = t.await;
        }
        self.core.set_pod_grace_period(None);
    }
}

impl Drop for ClusterHandle {
    fn drop(&mut self) {
        let _ = self.stop.send(true);
        for t in &self.tasks {
            t.abort();
        }
        self.core.set_pod_grace_period(None);
    }
}

/// Start the simulated cluster next to `server`: creates the Nodes (synchronously, so they exist
/// when this returns), turns on graceful pod deletion and spawns the controllers as tokio tasks.
/// Must be called inside a tokio runtime.
///
/// ```
/// # tokio::runtime::Runtime::new().unwrap().block_on(async {
/// let server = apiserver::ApiServer::new();
/// let cluster = simulated_cluster::start(&server, simulated_cluster::ClusterConfig::default());
/// assert_eq!(cluster.nodes(), ["node-1"]);
/// cluster.stop().await;
/// # });
/// ```
pub fn start(server: &ApiServer, config: ClusterConfig) -> ClusterHandle {
    let core = server.core().clone();
    let (stop, stop_rx) = tokio::sync::watch::channel(false);
    let mut tasks = vec![];
    if config.garbage_collector {
        let mut gc = gc::GarbageCollector::default();
        tasks.push(tokio::spawn(run(core.clone(), stop_rx.clone(), config.resync_interval, config.pass_cost_factor, gc::relevant, move |c| {
            gc.pass(c)
        })));
    }
    let nodes = if config.nodes > 0 {
        let names = kubelet::create_nodes(&core, config.nodes);
        core.set_pod_grace_period(Some(config.pod_grace_period.as_secs() as i64));
        let mut k = kubelet::Kubelet::new(names.clone(), config.clone());
        tasks.push(tokio::spawn(run(core.clone(), stop_rx.clone(), config.resync_interval, config.pass_cost_factor, kubelet::relevant, move |c| {
            k.pass(c)
        })));
        // Budgets count Ready Pods, which only the kubelet makes.
        tasks.push(tokio::spawn(run(
            core.clone(),
            stop_rx.clone(),
            config.resync_interval,
            config.pass_cost_factor,
            disruption::relevant,
            disruption::pass,
        )));
        names
    } else {
        vec![]
    };
    if config.jobs {
        let mut j = jobs::JobRunner::new(config.clone());
        tasks.push(tokio::spawn(run(core.clone(), stop_rx.clone(), config.resync_interval, config.pass_cost_factor, jobs::relevant, move |c| {
            j.pass(c)
        })));
    }
    if config.deployments {
        let mut r = replicasets::ReplicaSetController::default();
        tasks.push(tokio::spawn(run(
            core.clone(),
            stop_rx.clone(),
            config.resync_interval,
            config.pass_cost_factor,
            replicasets::relevant,
            move |c| r.pass(c),
        )));
        let mut d = deployments::DeploymentController::default();
        tasks.push(tokio::spawn(run(
            core.clone(),
            stop_rx.clone(),
            config.resync_interval,
            config.pass_cost_factor,
            deployments::relevant,
            move |c| d.pass(c),
        )));
    }
    if config.statefulsets {
        let mut s = statefulsets::StatefulSetController { max_unavailable: config.statefulset_max_unavailable };
        tasks.push(tokio::spawn(run(
            core.clone(),
            stop_rx.clone(),
            config.resync_interval,
            config.pass_cost_factor,
            statefulsets::relevant,
            move |c| s.pass(c),
        )));
    }
    if config.storage {
        storage::create_default_class(&core);
        tasks.push(tokio::spawn(run(
            core.clone(),
            stop_rx.clone(),
            config.resync_interval,
            config.pass_cost_factor,
            storage::relevant,
            storage::pass,
        )));
    }
    if let Some(ttl) = config.event_ttl {
        let mut e = events::EventExpiry::new(ttl);
        tasks.push(tokio::spawn(run(core.clone(), stop_rx.clone(), config.resync_interval, config.pass_cost_factor, events::relevant, move |c| {
            e.pass(c)
        })));
    }
    ClusterHandle { core, stop, tasks, nodes }
}

/// What one pass of a controller asks for next.
#[derive(Debug, Default)]
pub(crate) struct Next {
    /// Wake at this instant even if nothing changes (a delay runs out).
    pub at: Option<Instant>,
    /// A write failed (conflict, transient error): try again soon.
    pub retry: bool,
}

impl Next {
    pub(crate) fn at(&mut self, t: Instant) {
        self.at = Some(self.at.map_or(t, |a| a.min(t)));
    }

    /// Takes in what syncing one object answered: the instant it wants another look, or a retry.
    pub(crate) fn record(&mut self, synced: Result<Option<Instant>, Retry>) {
        match synced {
            Ok(Some(at)) => self.at(at),
            Ok(None) => {}
            Err(Retry) => self.retry = true,
        }
    }
}

/// Shortest time between two passes of one controller (each pass re-reads what it watches).
const MIN_PASS_INTERVAL: Duration = Duration::from_millis(5);

/// The controller loop: a pass, then sleep until the store changes, a deadline the pass asked
/// for, a retry, the resync interval, or stop. Commits none of whose events `relevant` picks
/// skip the pass (every pass re-reads everything, so skipping loses nothing); a deadline, a
/// retry, the resync or an expired event window always runs one.
///
/// A pass runs on the runtime thread, in order with the other tasks (`host simulate` replays
/// the same timeline every run); its writes wait for admission hooks in place (`rest::wait`).
async fn run(
    core: Arc<Core>,
    mut stop: tokio::sync::watch::Receiver<bool>,
    resync: Duration,
    cost_factor: u32,
    relevant: fn(&Event) -> bool,
    mut pass: impl FnMut(&Core) -> Next + Send,
) {
    let mut changes = core.store.subscribe();
    let mut last: Option<Instant> = None;
    let mut gap = MIN_PASS_INTERVAL;
    let mut seen = *changes.borrow_and_update();
    let mut due = true;
    let mut pending = Next::default();
    let mut resync_at = Instant::now();
    loop {
        if *stop.borrow() {
            return;
        }
        // Coalesce bursts of commits: at most one pass per `gap`.
        if let Some(l) = last
            && l.elapsed() < gap
        {
            tokio::select! {
                _ = tokio::time::sleep_until(l + gap) => {}
                _ = stop.wait_for(|s| *s) => return,
            }
        }
        let rv = *changes.borrow_and_update();
        if !due && rv != seen {
            due = core.store.all_events_since(seen).map_or(true, |evs| evs.iter().any(relevant));
        }
        seen = rv;
        let now = Instant::now();
        due |= now >= resync_at || pending.retry || pending.at.is_some_and(|a| now >= a);
        if due {
            let started = std::time::Instant::now();
            last = Some(now);
            resync_at = now + resync;
            pending = pass(&core);
            due = false;
            gap = MIN_PASS_INTERVAL.max(started.elapsed() * cost_factor);
        }
        let now = Instant::now();
        let mut wake = resync_at;
        if let Some(at) = pending.at {
            wake = wake.min(at.max(now));
        }
        if pending.retry {
            wake = wake.min(now + Duration::from_millis(100));
        }
        tokio::select! {
            r = changes.changed() => if r.is_err() { return },
            _ = tokio::time::sleep_until(wake) => {}
            _ = stop.wait_for(|s| *s) => return,
        }
    }
}

/// One resource per stored (group, resource): the storage version, skipping views and
/// create-only kinds.
pub(crate) fn stored_resources(core: &Core) -> Vec<Resource> {
    let mut out: Vec<Resource> = vec![];
    for r in core.registry.all() {
        if r.alias_of.is_some() || r.ephemeral {
            continue;
        }
        match out.iter_mut().find(|o| o.group_resource() == r.group_resource()) {
            Some(o) if r.storage && !o.storage => *o = r,
            Some(_) => {}
            None => out.push(r),
        }
    }
    out
}

pub(crate) fn builtin(core: &Core, group: &str, version: &str, plural: &str) -> Resource {
    core.registry.find(group, version, plural).expect("built-in resource")
}

pub(crate) fn meta_str<'a>(obj: &'a Value, field: &str) -> &'a str {
    obj.get("metadata").and_then(|m| m.get(field)).and_then(Value::as_str).unwrap_or_default()
}

pub(crate) fn finalizers(obj: &Value) -> Vec<String> {
    obj.pointer("/metadata/finalizers")
        .and_then(Value::as_array)
        .map(|a| a.iter().filter_map(|f| f.as_str().map(String::from)).collect())
        .unwrap_or_default()
}

pub(crate) fn deleting(obj: &Value) -> bool {
    obj.pointer("/metadata/deletionTimestamp").is_some_and(|t| !t.is_null())
}

/// A `sim.operator-host.dev/<name>` annotation on `obj`.
pub(crate) fn annotation<'a>(obj: &'a Value, name: &str) -> Option<&'a str> {
    obj.pointer("/metadata/annotations").and_then(|a| a.get(format!("{ANNOTATION_PREFIX}{name}"))).and_then(Value::as_str)
}

pub(crate) fn flag(value: Option<&str>) -> bool {
    value.is_some_and(|v| v.trim().eq_ignore_ascii_case("true"))
}

/// `500ms`, `5s`, `2m`, `1h`, `1.5s` or plain seconds.
pub fn parse_duration(s: &str) -> Option<Duration> {
    let s = s.trim();
    let (num, unit) = match s.find(|c: char| !(c.is_ascii_digit() || c == '.')) {
        Some(i) => s.split_at(i),
        None => (s, "s"),
    };
    let n: f64 = num.parse().ok()?;
    let secs = match unit.trim() {
        "ms" => n / 1000.0,
        "s" | "" => n,
        "m" => n * 60.0,
        "h" => n * 3600.0,
        _ => return None,
    };
    (secs.is_finite() && secs >= 0.0).then(|| Duration::from_secs_f64(secs))
}

/// The server's "now" as a Kubernetes timestamp.
pub(crate) fn now(core: &Core) -> String {
    apiserver::clock::timestamp(core.config.clock.now())
}

pub(crate) fn opts(manager: &str) -> apiserver::rest::WriteOptions {
    apiserver::rest::WriteOptions { field_manager: manager.into(), ..Default::default() }
}

/// A write of this pass failed (a conflict with a newer copy, the object gone, a transient
/// error): the controller looks again on its next pass, which re-reads everything.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Retry;

/// PUT `obj` to `sub`. `obj` carries the resourceVersion it was read at, so a write based on a
/// stale copy fails (409) instead of overwriting what another writer did.
pub(crate) fn put(core: &Core, res: &Resource, obj: Value, sub: apiserver::rest::Sub, manager: &str) -> Result<Value, Retry> {
    let (ns, name) = (meta_str(&obj, "namespace").to_string(), meta_str(&obj, "name").to_string());
    apiserver::rest::wait(core.update(res, &ns, &name, obj, sub, &opts(manager))).map_err(|e| {
        tracing::debug!(%name, error = %e.message, manager, "simulated controller write failed");
        Retry
    })
}

/// An RFC 3339 timestamp of an object (`creationTimestamp`, a condition's time).
pub(crate) fn parse_time(text: Option<&str>) -> Option<chrono::DateTime<chrono::Utc>> {
    chrono::DateTime::parse_from_rfc3339(text?).ok().map(|t| t.with_timezone(&chrono::Utc))
}

/// The tokio instant at which the server's clock shows `t` (now if `t` has passed).
pub(crate) fn instant_at(core: &Core, t: chrono::DateTime<chrono::Utc>) -> Instant {
    let ahead = (t - core.config.clock.now()).to_std().unwrap_or_default();
    Instant::now() + ahead
}

/// `spec.replicas` (upstream defaults it to 1).
pub(crate) fn spec_replicas(obj: &Value) -> i32 {
    obj.pointer("/spec/replicas").and_then(Value::as_i64).unwrap_or(1) as i32
}

/// A `status` counter (absent = 0, as Go's `omitempty` writes zeros).
pub(crate) fn status_count(obj: &Value, field: &str) -> i32 {
    obj.get("status").and_then(|s| s.get(field)).and_then(Value::as_i64).unwrap_or(0) as i32
}

/// Whether a Pod's `Ready` condition is `True`.
pub(crate) fn pod_ready(pod: &Value) -> bool {
    pod_ready_condition(pod).is_some_and(|c| c["status"] == "True")
}

pub(crate) fn pod_ready_condition(pod: &Value) -> Option<&Value> {
    pod.pointer("/status/conditions").and_then(Value::as_array)?.iter().find(|c| c["type"] == "Ready")
}

/// Upstream's `IsPodAvailable`: ready, and (with `minReadySeconds`) ready for longer than that.
pub(crate) fn pod_available(pod: &Value, min_ready_seconds: i64, now: chrono::DateTime<chrono::Utc>) -> bool {
    if !pod_ready(pod) {
        return false;
    }
    if min_ready_seconds <= 0 {
        return true;
    }
    let since = pod_ready_condition(pod).and_then(|c| parse_time(c["lastTransitionTime"].as_str()));
    since.is_some_and(|t| t + chrono::Duration::seconds(min_ready_seconds) < now)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations_parse_with_units() {
        assert_eq!(parse_duration("5s"), Some(Duration::from_secs(5)));
        assert_eq!(parse_duration("500ms"), Some(Duration::from_millis(500)));
        assert_eq!(parse_duration("2m"), Some(Duration::from_secs(120)));
        assert_eq!(parse_duration("3"), Some(Duration::from_secs(3)));
        assert_eq!(parse_duration("x"), None);
    }
}
