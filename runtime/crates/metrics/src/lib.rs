//! What the runtime observes of itself: Prometheus metrics under controller-runtime's names and
//! the probes they read, the sharding metrics ([`shard`]), and the two records other parts take
//! decisions from: the recent [`activity`] the status page shows and the reconcile [`outcomes`]
//! automatic rollback compares. The controllers, the webhook server, the manager and the plugin
//! sources all write here; this crate imports none of them.
//!
//! Crate: `prometheus-client` (the Prometheus project's own Rust client):
//! typed label sets, no global registry, OpenMetrics/text encoding without
//! protobuf. The `prometheus` crate would pull protobuf and a global default
//! registry we do not want.
//!
//! Served on `--metrics-addr`: `/metrics`, `/healthz` (always ok while the
//! process serves), `/readyz` (ok once every cache has synced) and `/status`
//! (the JSON `Snapshot` of `operator-plugin-sources`' `status`, which `host status` prints).

pub mod activity;
pub mod http;
pub mod outcomes;
pub mod shard;

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, OnceLock};

use bytes::Bytes;
use http_body_util::Full;
use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::{Histogram, exponential_buckets};
use prometheus_client::registry::Registry;

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct ResultLabels {
    pub controller: String,
    pub result: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct ControllerLabels {
    pub controller: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct NameLabels {
    pub name: String,
}

/// `workqueue_depth`'s labels, controller-runtime's (0.20+): the queue's
/// name, its controller (the same here) and the priority level.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct DepthLabels {
    pub name: String,
    pub controller: String,
    /// `0` for fresh changes, `-100` for initial lists, resyncs and fan-out.
    pub priority: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct SwapLabels {
    pub plugin: String,
    /// `started`, `swapped`, `restarted`, `removed`, `rejected`, `staged` or `rolled_back`.
    pub result: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct ShadowLabels {
    /// The id of the running plugin the candidate shadows.
    pub plugin: String,
    /// `agree`, `differ` or `error`.
    pub result: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct TrustLabels {
    pub plugin: String,
    /// `unsigned`, `malformed_signature`, `bad_signature` or `digest_not_pinned`.
    pub reason: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct RollbackLabels {
    pub plugin: String,
    /// The failure kind most of the new version's failures had (`trap`, `plugin_error`, `action_refused`, ...).
    pub cause: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct WebhookLabels {
    /// The path served, e.g. `/validate-batch-tutorial-kubebuilder-io-v1-cronjob`.
    pub webhook: String,
    /// The AdmissionReview's result code (the HTTP status is always 200):
    /// 200 allowed, 422 invalid object, 403 the plugin call failed, 400 a
    /// malformed review, 404 no plugin at that path, 500 the host failed.
    pub code: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct PluginErrorLabels {
    pub plugin: String,
    pub kind: String,
}

fn reconcile_histogram() -> Histogram {
    // controller-runtime's buckets: 5 ms .. ~80 s.
    Histogram::new(exponential_buckets(0.005, 2.0, 15))
}

/// Counters a workqueue keeps for the metrics.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct QueueStats {
    pub adds: u64,
    pub retries: u64,
}

/// Something whose queue counters the metrics read at scrape time.
pub trait QueueProbe: Send + Sync {
    fn depth(&self) -> usize;
    /// The depth per priority level, by its label value.
    fn depth_by_priority(&self) -> Vec<(&'static str, usize)>;
    fn stats(&self) -> QueueStats;
}

struct QueueEntry {
    name: String,
    probe: Arc<dyn QueueProbe>,
    last: QueueStats,
}

/// A cache whose size the metrics read at scrape time.
pub trait CacheProbe: Send + Sync {
    /// Objects held.
    fn objects(&self) -> usize;
    /// The heap they hold, estimated from their sizes (JSON text and
    /// entries; allocator rounding and index slots not counted).
    fn bytes(&self) -> usize;
}

/// `host_cache_objects` and `host_cache_bytes`: one series per cached kind.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct CacheLabels {
    pub group: String,
    pub version: String,
    pub kind: String,
}

/// Reads how many parents a controller's shard holds.
pub type OwnedCount = Arc<dyn Fn() -> usize + Send + Sync>;

/// What `/status` serves besides the metrics (`operator-plugin-sources`' `status::Source`);
/// a trait here so that the metrics do not import what reads them.
pub trait StatusSource: Send + Sync {
    fn snapshot_json(&self, metrics: &Metrics) -> serde_json::Value;
}

/// All metrics of the process.
pub struct Metrics {
    registry: Registry,
    pub reconcile_total: Family<ResultLabels, Counter>,
    pub reconcile_errors: Family<ControllerLabels, Counter>,
    /// Reconciles that failed in a way only a change can mend (controller-runtime's TerminalError).
    pub terminal_errors: Family<ControllerLabels, Counter>,
    pub webhook_requests: Family<WebhookLabels, Counter>,
    pub reconcile_time: Family<ControllerLabels, Histogram, fn() -> Histogram>,
    pub plugin_call_errors: Family<PluginErrorLabels, Counter>,
    pub plugin_swaps: Family<SwapLabels, Counter>,
    pub plugin_shadow_reconciles: Family<ShadowLabels, Counter>,
    pub plugin_trust_refusals: Family<TrustLabels, Counter>,
    pub plugin_rollbacks: Family<RollbackLabels, Counter>,
    /// Events dropped because the background sender's queue was full.
    pub events_dropped: Family<ControllerLabels, Counter>,
    /// Recent reconcile outcomes per plugin version, read by automatic rollback.
    pub outcomes: crate::outcomes::Outcomes,
    pub active_workers: Family<ControllerLabels, Gauge>,
    pub max_concurrent: Family<ControllerLabels, Gauge>,
    depth: Family<DepthLabels, Gauge>,
    adds: Family<NameLabels, Counter>,
    retries: Family<NameLabels, Counter>,
    /// 1 while this process holds the leader lease `name`, else 0 (client-go's name).
    leader: Family<NameLabels, Gauge>,
    /// The same, readable: lease name → leading.
    leases: Mutex<BTreeMap<String, bool>>,
    queues: Mutex<Vec<QueueEntry>>,
    cache_objects: Family<CacheLabels, Gauge>,
    cache_bytes: Family<CacheLabels, Gauge>,
    /// The caches reported, until dropped.
    caches: Mutex<Vec<(CacheLabels, std::sync::Weak<dyn CacheProbe>)>>,
    ready: AtomicBool,
    /// `--sharded`: ownership, handovers and the sharder's decisions.
    pub shard: crate::shard::ShardMetrics,
    /// Per controller, how many parents its shard holds (read at scrape).
    owned: Mutex<Vec<(String, OwnedCount)>>,
    /// Recent reconciles, last errors and rollbacks for `/status`.
    pub activity: crate::activity::Activity,
    /// Set once the manager runs; `/status` answers 503 until then.
    status: OnceLock<Box<dyn StatusSource>>,
}

impl std::fmt::Debug for Metrics {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Metrics").finish_non_exhaustive()
    }
}

impl Default for Metrics {
    fn default() -> Self {
        Self::new()
    }
}

impl Metrics {
    pub fn new() -> Self {
        let mut registry = Registry::default();
        let reconcile_total = Family::<ResultLabels, Counter>::default();
        let reconcile_errors = Family::<ControllerLabels, Counter>::default();
        let terminal_errors = Family::<ControllerLabels, Counter>::default();
        let webhook_requests = Family::<WebhookLabels, Counter>::default();
        let reconcile_time = Family::<ControllerLabels, Histogram, fn() -> Histogram>::new_with_constructor(reconcile_histogram as fn() -> Histogram);
        let plugin_call_errors = Family::<PluginErrorLabels, Counter>::default();
        let plugin_swaps = Family::<SwapLabels, Counter>::default();
        let plugin_shadow_reconciles = Family::<ShadowLabels, Counter>::default();
        let plugin_trust_refusals = Family::<TrustLabels, Counter>::default();
        let plugin_rollbacks = Family::<RollbackLabels, Counter>::default();
        let events_dropped = Family::<ControllerLabels, Counter>::default();
        let active_workers = Family::<ControllerLabels, Gauge>::default();
        let max_concurrent = Family::<ControllerLabels, Gauge>::default();
        let depth = Family::<DepthLabels, Gauge>::default();
        let adds = Family::<NameLabels, Counter>::default();
        let retries = Family::<NameLabels, Counter>::default();
        let leader = Family::<NameLabels, Gauge>::default();
        let cache_objects = Family::<CacheLabels, Gauge>::default();
        let cache_bytes = Family::<CacheLabels, Gauge>::default();
        registry.register("host_cache_objects", "Objects held in the shared cache of each kind", cache_objects.clone());
        registry.register(
            "host_cache_bytes",
            "Heap held by the shared cache of each kind, estimated from its objects' sizes (JSON text and entries)",
            cache_bytes.clone(),
        );
        registry.register("controller_runtime_reconcile", "Total number of reconciliations per controller", reconcile_total.clone());
        registry.register("controller_runtime_reconcile_errors", "Total number of reconciliation errors per controller", reconcile_errors.clone());
        registry.register(
            "controller_runtime_terminal_reconcile_errors",
            "Total number of terminal reconciliation errors per controller",
            terminal_errors.clone(),
        );
        registry.register(
            "controller_runtime_webhook_requests",
            "Total number of admission requests by webhook path and result code",
            webhook_requests.clone(),
        );
        registry.register("controller_runtime_reconcile_time_seconds", "Length of time per reconciliation per controller", reconcile_time.clone());
        registry.register("controller_runtime_active_workers", "Number of currently used workers per controller", active_workers.clone());
        registry.register(
            "controller_runtime_max_concurrent_reconciles",
            "Maximum number of concurrent reconciles per controller",
            max_concurrent.clone(),
        );
        registry.register("workqueue_depth", "Current depth of workqueue by workqueue and priority", depth.clone());
        registry.register("workqueue_adds", "Total number of adds handled by workqueue", adds.clone());
        registry.register("workqueue_retries", "Total number of retries handled by workqueue", retries.clone());
        registry.register("leader_election_master_status", "Whether this process leads the named lease (1) or not (0)", leader.clone());
        registry.register("plugin_call_errors", "Failed plugin calls by plugin and error kind", plugin_call_errors.clone());
        registry.register("plugin_swaps", "Plugin loads and hot swaps by plugin (id) and result", plugin_swaps.clone());
        registry.register(
            "plugin_shadow_reconciles",
            "Reconciles run again on a staged candidate, by plugin (id) and whether the answers agree, differ or the candidate failed",
            plugin_shadow_reconciles.clone(),
        );
        registry.register(
            "plugin_trust_refusals",
            "Plugin versions refused by the trust policy, by plugin (id) and reason",
            plugin_trust_refusals.clone(),
        );
        registry.register(
            "plugin_rollbacks",
            "Automatic rollbacks of a failing new plugin version, by plugin (id) and cause",
            plugin_rollbacks.clone(),
        );
        registry.register(
            "plugin_events_dropped",
            "Events not recorded because the queue to the background sender was full, by controller",
            events_dropped.clone(),
        );
        let shard = crate::shard::ShardMetrics::new(&mut registry);
        Self {
            registry,
            shard,
            owned: Mutex::new(Vec::new()),
            reconcile_total,
            reconcile_errors,
            terminal_errors,
            webhook_requests,
            reconcile_time,
            plugin_call_errors,
            plugin_swaps,
            plugin_shadow_reconciles,
            plugin_trust_refusals,
            plugin_rollbacks,
            events_dropped,
            outcomes: Default::default(),
            active_workers,
            max_concurrent,
            depth,
            adds,
            retries,
            leader,
            leases: Mutex::default(),
            queues: Mutex::new(Vec::new()),
            cache_objects,
            cache_bytes,
            caches: Mutex::new(Vec::new()),
            ready: AtomicBool::new(false),
            activity: Default::default(),
            status: OnceLock::new(),
        }
    }

    /// Counts one reconcile of `controller` with `result` (`success`,
    /// `error`, `requeue`, `requeue_after`) taking `seconds`.
    pub fn observe_reconcile(&self, controller: &str, result: &str, seconds: f64) {
        let c = ControllerLabels { controller: controller.into() };
        self.reconcile_total.get_or_create(&ResultLabels { controller: controller.into(), result: result.into() }).inc();
        // Created at zero with the first reconcile, as controller-runtime
        // initializes them, so an error ratio exists before the first error.
        let errors = self.reconcile_errors.get_or_create(&c);
        if result == "error" {
            errors.inc();
        }
        drop(errors);
        let _ = self.terminal_errors.get_or_create(&c);
        self.reconcile_time.get_or_create(&c).observe(seconds);
        self.activity.reconciled(controller, result == "error");
    }

    /// Counts a reconcile that failed for good (counted as an error too).
    pub fn terminal_error(&self, controller: &str) {
        self.terminal_errors.get_or_create(&ControllerLabels { controller: controller.into() }).inc();
    }

    /// Counts one admission request answered at `webhook` with `code`.
    pub fn webhook_request(&self, webhook: &str, code: u16) {
        self.webhook_requests.get_or_create(&WebhookLabels { webhook: webhook.into(), code: code.to_string() }).inc();
    }

    /// Sets `leader_election_master_status{name}`.
    pub fn set_leader(&self, name: &str, leading: bool) {
        self.leader.get_or_create(&NameLabels { name: name.into() }).set(i64::from(leading));
        self.leases.lock().unwrap().insert(name.into(), leading);
    }

    /// Every lease this process takes part in, by name: whether it leads it.
    pub fn leases(&self) -> Vec<(String, bool)> {
        self.leases.lock().unwrap().iter().map(|(n, l)| (n.clone(), *l)).collect()
    }

    /// The queue registered as `name` now, as `workqueue_*{name}` report it.
    pub fn queue(&self, name: &str) -> Option<crate::activity::Queue> {
        let queues = self.queues.lock().unwrap();
        let q = queues.iter().find(|q| q.name == name)?;
        let stats = q.probe.stats();
        Some(crate::activity::Queue { depth: q.probe.depth() as u64, adds: stats.adds, retries: stats.retries })
    }

    /// What `/status` reads besides the metrics; the first call wins.
    pub fn set_status_source(&self, source: Box<dyn StatusSource>) {
        let _ = self.status.set(source);
    }

    /// The state `/status` serves (JSON), once the manager runs.
    pub fn status(&self) -> Option<serde_json::Value> {
        Some(self.status.get()?.snapshot_json(self))
    }

    pub fn plugin_call_error(&self, plugin: &str, kind: &str) {
        self.plugin_call_errors.get_or_create(&PluginErrorLabels { plugin: plugin.into(), kind: kind.into() }).inc();
    }

    pub fn plugin_swap(&self, plugin: &str, result: &str) {
        self.plugin_swaps.get_or_create(&SwapLabels { plugin: plugin.into(), result: result.into() }).inc();
    }

    /// Counts one shadow reconcile of the candidate staged for `plugin`.
    pub fn plugin_shadow_reconcile(&self, plugin: &str, result: &str) {
        self.plugin_shadow_reconciles.get_or_create(&ShadowLabels { plugin: plugin.into(), result: result.into() }).inc();
    }

    pub fn plugin_trust_refusal(&self, plugin: &str, reason: &str) {
        self.plugin_trust_refusals.get_or_create(&TrustLabels { plugin: plugin.into(), reason: reason.into() }).inc();
    }

    pub fn plugin_rollback(&self, plugin: &str, cause: &str) {
        self.plugin_rollbacks.get_or_create(&RollbackLabels { plugin: plugin.into(), cause: cause.into() }).inc();
    }

    /// One reconcile that called the plugin version `digest` of `controller`:
    /// `failure` is the plugin's failure kind, `None` if its answer was accepted.
    pub fn plugin_outcome(&self, controller: &str, digest: &str, failure: Option<&'static str>) {
        self.outcomes.record(controller, digest, failure);
    }

    /// Registers a queue to report as `workqueue_*{name}`, replacing the
    /// queue of a controller of that name that was restarted.
    pub fn add_queue(&self, name: &str, probe: Arc<dyn QueueProbe>) {
        let mut queues = self.queues.lock().unwrap();
        queues.retain(|q| q.name != name);
        queues.push(QueueEntry { name: name.into(), probe, last: QueueStats::default() });
        let _ = self.adds.get_or_create(&NameLabels { name: name.into() });
        let _ = self.retries.get_or_create(&NameLabels { name: name.into() });
    }

    /// Reports `cache` as `host_cache_*{group,version,kind}` until it is
    /// dropped (a kind no plugin uses any more), replacing an earlier cache
    /// of that kind.
    pub fn add_cache(&self, labels: CacheLabels, cache: std::sync::Weak<dyn CacheProbe>) {
        let mut caches = self.caches.lock().unwrap();
        caches.retain(|(l, _)| *l != labels);
        caches.push((labels, cache));
    }

    pub fn set_ready(&self, ready: bool) {
        self.ready.store(ready, Ordering::SeqCst);
    }

    pub fn is_ready(&self) -> bool {
        self.ready.load(Ordering::SeqCst)
    }

    /// The Prometheus text exposition.
    /// Sharded: reports `count()` as the parents `controller` owns.
    pub fn add_owned(&self, controller: &str, count: OwnedCount) {
        let mut owned = self.owned.lock().unwrap();
        owned.retain(|(name, _)| name != controller);
        owned.push((controller.to_owned(), count));
    }

    /// Counts a handover of `controller` that took `seconds`.
    pub fn shard_handover(&self, controller: &str, seconds: f64) {
        let labels = crate::shard::ControllerLabels { controller: controller.into() };
        self.shard.handovers.get_or_create(&labels).inc();
        self.shard.handover_seconds.get_or_create(&labels).observe(seconds);
    }

    pub fn render(&self) -> String {
        self.caches.lock().unwrap().retain(|(labels, cache)| match cache.upgrade() {
            Some(cache) => {
                self.cache_objects.get_or_create(labels).set(cache.objects() as i64);
                self.cache_bytes.get_or_create(labels).set(cache.bytes() as i64);
                true
            }
            None => {
                self.cache_objects.remove(labels);
                self.cache_bytes.remove(labels);
                false
            }
        });
        for (controller, count) in self.owned.lock().unwrap().iter() {
            self.shard.owned.get_or_create(&crate::shard::ControllerLabels { controller: controller.clone() }).set(count() as i64);
        }
        for q in self.queues.lock().unwrap().iter_mut() {
            let labels = NameLabels { name: q.name.clone() };
            let now = q.probe.stats();
            for (priority, depth) in q.probe.depth_by_priority() {
                let labels = DepthLabels { name: q.name.clone(), controller: q.name.clone(), priority: priority.into() };
                self.depth.get_or_create(&labels).set(depth as i64);
            }
            self.adds.get_or_create(&labels).inc_by(now.adds.saturating_sub(q.last.adds));
            self.retries.get_or_create(&labels).inc_by(now.retries.saturating_sub(q.last.retries));
            q.last = now;
        }
        let mut out = String::new();
        prometheus_client::encoding::text::encode(&mut out, &self.registry).expect("writing to a String");
        out
    }
}

/// Serves `/metrics`, `/healthz`, `/readyz` until `shutdown` resolves.
/// Returns the bound address.
pub async fn serve(
    addr: SocketAddr,
    metrics: Arc<Metrics>,
    shutdown: impl std::future::Future<Output = ()> + Send + 'static,
) -> std::io::Result<(SocketAddr, tokio::task::JoinHandle<()>)> {
    let listener = tokio::net::TcpListener::bind(addr).await?;
    let bound = listener.local_addr()?;
    let task = tokio::spawn(http::serve(listener, shutdown, move |stream| {
        let metrics = metrics.clone();
        let service = hyper::service::service_fn(move |req: hyper::Request<hyper::body::Incoming>| {
            let metrics = metrics.clone();
            async move { Ok::<_, std::convert::Infallible>(respond(&metrics, req.uri().path())) }
        });
        http::serve_http1(stream, service)
    }));
    Ok((bound, task))
}

fn respond(metrics: &Metrics, path: &str) -> hyper::Response<Full<Bytes>> {
    let (code, content_type, body) = match path {
        "/metrics" => (200, "text/plain; version=0.0.4; charset=utf-8", metrics.render()),
        "/healthz" | "/livez" => (200, "text/plain", "ok".to_string()),
        "/readyz" if metrics.is_ready() => (200, "text/plain", "ok".to_string()),
        "/readyz" => (503, "text/plain", "caches not synced".to_string()),
        "/status" => match metrics.status() {
            Some(s) => (200, "application/json", serde_json::to_string_pretty(&s).expect("a snapshot serializes") + "\n"),
            None => (503, "text/plain", "starting: no plugins run yet".to_string()),
        },
        _ => (404, "text/plain", "not found".to_string()),
    };
    hyper::Response::builder().status(code).header("content-type", content_type).body(Full::new(Bytes::from(body))).expect("valid response")
}

#[cfg(test)]
mod tests {
    use super::*;

    struct Q;
    impl QueueProbe for Q {
        fn depth(&self) -> usize {
            2
        }
        fn depth_by_priority(&self) -> Vec<(&'static str, usize)> {
            vec![("0", 2), ("-100", 0)]
        }
        fn stats(&self) -> QueueStats {
            QueueStats { adds: 5, retries: 1 }
        }
    }

    #[test]
    fn metrics_use_controller_runtime_names() {
        let m = Metrics::new();
        m.observe_reconcile("cronjob", "success", 0.01);
        m.observe_reconcile("cronjob", "error", 0.01);
        m.plugin_call_error("cronjob", "trap");
        m.add_queue("cronjob", Arc::new(Q));
        m.max_concurrent.get_or_create(&ControllerLabels { controller: "cronjob".into() }).set(4);
        let text = m.render();
        for needle in [
            "controller_runtime_reconcile_total{controller=\"cronjob\",result=\"success\"} 1",
            "controller_runtime_reconcile_errors_total{controller=\"cronjob\"} 1",
            "controller_runtime_reconcile_time_seconds_bucket",
            "workqueue_depth{name=\"cronjob\",controller=\"cronjob\",priority=\"0\"} 2",
            "workqueue_depth{name=\"cronjob\",controller=\"cronjob\",priority=\"-100\"} 0",
            "workqueue_adds_total{name=\"cronjob\"} 5",
            "workqueue_retries_total{name=\"cronjob\"} 1",
            "plugin_call_errors_total{plugin=\"cronjob\",kind=\"trap\"} 1",
            "controller_runtime_max_concurrent_reconciles{controller=\"cronjob\"} 4",
        ] {
            assert!(text.contains(needle), "{needle} missing from\n{text}");
        }
        struct C;
        impl CacheProbe for C {
            fn objects(&self) -> usize {
                3
            }
            fn bytes(&self) -> usize {
                4096
            }
        }
        let cache: Arc<dyn CacheProbe> = Arc::new(C);
        let labels = CacheLabels { group: "batch".into(), version: "v1".into(), kind: "Job".into() };
        m.add_cache(labels, Arc::downgrade(&cache));
        let text = m.render();
        for needle in [
            "host_cache_objects{group=\"batch\",version=\"v1\",kind=\"Job\"} 3",
            "host_cache_bytes{group=\"batch\",version=\"v1\",kind=\"Job\"} 4096",
        ] {
            assert!(text.contains(needle), "{needle} missing from\n{text}");
        }
        drop(cache);
        assert!(!m.render().contains("host_cache_objects{"), "a dropped cache is no longer reported");
        let again = m.render();
        assert!(again.contains("workqueue_adds_total{name=\"cronjob\"} 5"), "counters do not double on a second scrape");
    }
}
