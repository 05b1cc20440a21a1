//! One controller per plugin: the shared [`cache`]s of its parent and child
//! kinds feed its [`queue`]; workers take keys and run the reconcile driver
//! ([`pipeline`]), a sequence of steps over narrow contexts: wait for the
//! [`expectations`] of the last pass, then the finalizer wrapper
//! ([`finalizer`]) → validity gate ([`validity`]) → read the inputs
//! ([`read`]) → call the plugin through the [`hook`] → policy → execute →
//! write the verdict ([`verdict`], through [`parent`]), and tell the queue
//! how it [`Ended`]. A parent the plugin refused for good is not called
//! again until its inputs change ([`permanent`]).

pub mod actions;

use operator_api::api_answer;
use operator_api::api_error;
use operator_api::error_chain;
use operator_api::events;
use operator_api::object_reference;
use operator_clock as clock;
use operator_metrics as metrics;
use operator_sandbox as sandbox;

pub mod cache;
pub mod cached;
pub mod echoes;
mod ended;
pub mod expectations;
pub mod finalizer;
#[cfg(test)]
mod footprint;
pub mod hook;
pub mod parent;
pub mod permanent;
pub mod pipeline;
pub mod queue;
pub mod read;
pub mod related;
pub mod shard;
pub mod validity;
pub mod verdict;

pub use ended::Ended;
pub use hook::{CallHook, CallInput};

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use kube::api::ApiResource;
use operator_plugin_sdk::GroupVersionKind;

use crate::clock::SharedClock;
use crate::events::Recorder;
use crate::metrics::{Metrics, QueueProbe};
use crate::sandbox::LoadedPlugin;
use cache::{CachedObject, HandlerId, KindCache, ObjectKey, Origin};
use echoes::Echoes;
use expectations::Expectations;
use parent::ParentWrites;
use queue::{Priority, WorkQueue};

/// Tunables of a controller.
#[derive(Clone, Debug)]
pub struct Config {
    /// Keys reconciled at once (default 4). One key is never reconciled twice at once.
    pub concurrency: usize,
    /// How long a reconcile waits for the cache to show the previous pass's
    /// writes before going ahead anyway (default 30 s; a watch normally
    /// delivers within milliseconds).
    pub expectations_timeout: Duration,
    /// Per-key backoff on errors.
    pub backoff: queue::Backoff,
    /// What observes each plugin call (`--record`, shadow runs of a staged
    /// candidate: see `record::tap`); by default nothing, and the call is
    /// the plain call.
    pub tap: CallHook,
    /// The most related objects one reconcile is given (default
    /// [`DEFAULT_MAX_RELATED`]); over it the call is refused, not truncated.
    pub max_related: usize,
    /// `--sharded`: this replica's shard; its parents are handed over from
    /// the reconcile worker when drained, and its children labelled.
    pub sharding: Option<crate::shard::Sharding>,
}

/// See [`Config::max_related`]; documented in `wit/plugin.wit`.
pub const DEFAULT_MAX_RELATED: usize = 1000;

impl Default for Config {
    fn default() -> Self {
        Self {
            concurrency: 4,
            expectations_timeout: Duration::from_secs(30),
            backoff: queue::Backoff::default(),
            tap: CallHook::default(),
            max_related: DEFAULT_MAX_RELATED,
            sharding: None,
        }
    }
}

/// A plugin running as a controller.
pub struct Controller {
    name: String,
    /// The current version; swapped atomically by a hot swap. A reconcile
    /// takes a clone at its start and finishes on that version.
    plugin: std::sync::RwLock<LoadedPlugin>,
    /// The change handlers this controller registered on the shared caches.
    handlers: Mutex<Vec<(Arc<KindCache>, HandlerId)>>,
    parent_gvk: GroupVersionKind,
    caches: HashMap<GroupVersionKind, Arc<KindCache>>,
    /// The caches of the related kinds, in the manifest's order (read only:
    /// neither the policy nor the executor sees them).
    related_caches: Vec<Arc<KindCache>>,
    /// Related object → the parents referring to it.
    related: Arc<related::RelatedIndex>,
    resources: HashMap<GroupVersionKind, ApiResource>,
    queue: Arc<WorkQueue<ObjectKey>>,
    /// The writes of each parent's last pass, until its next pass starts.
    expectations: Arc<Expectations>,
    /// Children low-priority passes created, so their ADDED events keep the
    /// parent at low priority.
    echoes: Arc<Echoes>,
    /// The host's own writes to the parents (finalizers, status, verdict).
    parent_writes: ParentWrites,
    client: kube::Client,
    clock: SharedClock,
    recorder: Recorder,
    metrics: Arc<Metrics>,
    config: Config,
    /// The plugin's last `validate` answer per parent.
    validity: validity::Validity,
    /// Parents the plugin refused with a non-retryable error, and for what inputs.
    permanent: permanent::PermanentErrors,
    /// Sharded: parents gained by a handover, waiting for their children.
    handovers: Arc<crate::shard::acknowledge::Gate>,
}

impl QueueProbe for WorkQueue<ObjectKey> {
    fn depth(&self) -> usize {
        WorkQueue::depth(self)
    }
    fn depth_by_priority(&self) -> Vec<(&'static str, usize)> {
        Priority::ALL.iter().map(|p| (p.label(), WorkQueue::depth_at(self, *p))).collect()
    }
    fn stats(&self) -> crate::metrics::QueueStats {
        WorkQueue::stats(self)
    }
}

/// Whether a change of a parent is worth a reconcile: anything but a
/// status-only write. The cache's fingerprint leaves out `status` and
/// `metadata.resourceVersion` (managedFields are never kept), so a write of
/// status alone keeps it; spec, labels, annotations, finalizers and the
/// deletion timestamp change it. Creation and deletion always count.
pub fn parent_changed(old: Option<&CachedObject>, new: Option<&CachedObject>) -> bool {
    match (old, new) {
        (Some(o), Some(n)) => o.uid() != n.uid() || o.fingerprint != n.fingerprint,
        _ => true,
    }
}

impl Controller {
    /// `caches` must hold the parent kind and every declared child and related kind.
    pub fn new(
        plugin: LoadedPlugin,
        caches: HashMap<GroupVersionKind, Arc<KindCache>>,
        client: kube::Client,
        clock: SharedClock,
        metrics: Arc<Metrics>,
        config: Config,
    ) -> Arc<Self> {
        let manifest = plugin.manifest().clone();
        let name = manifest.name.clone();
        let mut mine = HashMap::new();
        for gvk in std::iter::once(&manifest.parent).chain(&manifest.children) {
            let cache = caches.get(gvk).unwrap_or_else(|| panic!("no cache for {gvk:?}")).clone();
            mine.insert(gvk.clone(), cache);
        }
        let related_caches =
            manifest.related.iter().map(|r| caches.get(&r.kind).unwrap_or_else(|| panic!("no cache for {:?}", r.kind)).clone()).collect();
        let resources = mine.iter().map(|(g, c)| (g.clone(), c.resource().clone())).collect();
        let queue = Arc::new(WorkQueue::new(config.backoff));
        metrics.add_queue(&name, queue.clone());
        let expectations = Arc::new(Expectations::default());
        let parent_cache = mine[&manifest.parent].clone();
        let parent_writes = ParentWrites::new(client.clone(), manifest.parent.clone(), parent_cache, expectations.clone());
        let recorder = Recorder::new(client.clone(), &name, clock.clone())
            .count_dropped_in(metrics.events_dropped.get_or_create(&crate::metrics::ControllerLabels { controller: name.clone() }).clone());
        let this = Arc::new(Self {
            name,
            plugin: std::sync::RwLock::new(plugin),
            handlers: Mutex::new(Vec::new()),
            parent_gvk: manifest.parent.clone(),
            caches: mine,
            related_caches,
            related: Arc::new(related::RelatedIndex::new(manifest.related.clone())),
            resources,
            queue,
            expectations,
            echoes: Arc::new(Echoes::default()),
            parent_writes,
            client,
            clock,
            recorder,
            metrics,
            config,
            validity: validity::Validity::default(),
            permanent: permanent::PermanentErrors::default(),
            handovers: Arc::default(),
        });
        this.register();
        if this.config.sharding.is_some() {
            let parents = Arc::downgrade(this.parent_cache());
            this.metrics.add_owned(&this.name, Arc::new(move || parents.upgrade().map_or(0, |c| c.len())));
        }
        this
    }

    pub fn name(&self) -> &str {
        &self.name
    }

    /// The API resource of every kind this controller reconciles or owns,
    /// the parent's first (what the sharder places).
    pub fn parent_and_child_resources(&self) -> Vec<(GroupVersionKind, ApiResource)> {
        let children = self.plugin().manifest().children.clone();
        let mut resources = vec![(self.parent_gvk.clone(), self.resources[&self.parent_gvk].clone())];
        resources.extend(children.into_iter().filter(|g| *g != self.parent_gvk).map(|g| (g.clone(), self.resources[&g].clone())));
        resources
    }

    /// The plugin version in use now.
    pub fn plugin(&self) -> LoadedPlugin {
        self.plugin.read().unwrap().clone()
    }

    /// Hot swap: later reconciles run `new`; reconciles in flight finish on
    /// the old version and queued keys stay queued. The caller has checked
    /// that `new` has the same parent and child kinds. Every parent is
    /// queued (at low priority, behind fresh changes) so the new logic
    /// applies soon. Returns the old version.
    pub fn swap(&self, new: LoadedPlugin) -> LoadedPlugin {
        let old = std::mem::replace(&mut *self.plugin.write().unwrap(), new);
        self.resync();
        old
    }

    /// Stops the queue and unregisters from the shared caches; workers end
    /// once their in-flight reconcile finishes.
    pub fn stop(&self) {
        self.queue.shut_down();
        for (cache, id) in self.handlers.lock().unwrap().drain(..) {
            cache.remove_handler(id);
        }
    }

    pub fn queue(&self) -> &Arc<WorkQueue<ObjectKey>> {
        &self.queue
    }

    fn parent_cache(&self) -> &Arc<KindCache> {
        &self.caches[&self.parent_gvk]
    }

    /// Maps cache changes to parent keys: the parents' own changes, their
    /// children's, and those of the related objects they refer to.
    fn register(self: &Arc<Self>) {
        let mut handlers = self.handlers.lock().unwrap();
        handlers.push(self.register_parents());
        handlers.extend(self.register_children());
        handlers.extend(self.register_related());
    }

    /// A parent's change queues it (unless only its status changed; below
    /// fresh changes when it comes from the initial list), keeps the related
    /// index current and, sharded, notes a parent gained by a handover.
    fn register_parents(&self) -> (Arc<KindCache>, HandlerId) {
        let queue = self.queue.clone();
        let index = self.related.clone();
        // Parents already listed (a plugin started on running caches) are not
        // replayed to a new handler: index them now.
        if !index.kinds().is_empty() {
            for key in self.parent_cache().keys() {
                index.update_parent(&key, self.parent_cache().get(&key).as_deref());
            }
        }
        let gained =
            self.config.sharding.as_ref().map(|s| (self.handovers.clone(), s.handover_annotation(), self.plugin().manifest().children.clone()));
        let id = self.parent_cache().on_change(Arc::new(move |old: Option<&CachedObject>, new: Option<&CachedObject>, origin: Origin| {
            // Sharded: a parent that arrives may have come by a handover, in
            // the initial list too (the child list may have been read before
            // the children were relabelled); its first reconcile here waits
            // until the child caches reach the revisions its annotation names.
            if let Some((gate, annotation, kinds)) = &gained {
                match (old, new) {
                    (None, Some(o)) => {
                        if let Some(value) = o.object().metadata.annotations.and_then(|mut a| a.remove(annotation)) {
                            gate.gained(o.key(), &value, kinds);
                        }
                    }
                    (Some(o), None) => gate.forget(&o.key()),
                    _ => {}
                }
            }
            // The related index follows every change of what a parent refers to.
            if !index.kinds().is_empty()
                && let Some(o) = new.or(old)
            {
                index.update_parent(&o.key(), new);
            }
            if parent_changed(old, new)
                && let Some(o) = new.or(old)
            {
                queue.add(o.key(), priority_of(origin));
            }
        }));
        (self.parent_cache().clone(), id)
    }

    /// A child's change queues its controller of the parent kind (below
    /// fresh changes when it comes from the initial list).
    fn register_children(&self) -> Vec<(Arc<KindCache>, HandlerId)> {
        let children = self.plugin().manifest().children.clone();
        let mut handlers = Vec::new();
        for gvk in children.iter().filter(|g| **g != self.parent_gvk) {
            let queue = self.queue.clone();
            let parent = self.parent_gvk.clone();
            let echoes = self.echoes.clone();
            let child = gvk.clone();
            let id = self.caches[gvk].on_change(Arc::new(move |old: Option<&CachedObject>, new: Option<&CachedObject>, origin: Origin| {
                // A low-priority pass's own create coming back stays low.
                let echo = match (old, new, origin) {
                    (None, Some(o), Origin::Change) => {
                        let created = o.key();
                        echoes.take(&child, &created.namespace, &created.name)
                    }
                    _ => false,
                };
                for obj in [old, new].into_iter().flatten() {
                    if let Some(key) = controller_key(obj, &parent) {
                        queue.add(key, if echo { Priority::Low } else { priority_of(origin) });
                    }
                }
            }));
            handlers.push((self.caches[gvk].clone(), id));
        }
        handlers
    }

    /// A related object's change (any: a Pod's readiness is in its status)
    /// requeues the parents that refer to it before or after the change, at
    /// low priority: one shared object can fan out to thousands of parents,
    /// which must not hold up the parents that changed themselves.
    fn register_related(&self) -> Vec<(Arc<KindCache>, HandlerId)> {
        let mut handlers = Vec::new();
        for (i, cache) in self.related_caches.iter().enumerate() {
            let queue = self.queue.clone();
            let index = self.related.clone();
            let id = cache.on_change(Arc::new(move |old: Option<&CachedObject>, new: Option<&CachedObject>, _: Origin| {
                for obj in [old, new].into_iter().flatten() {
                    for key in index.parents_of(i, obj) {
                        queue.add(key, Priority::Low);
                    }
                }
            }));
            handlers.push((cache.clone(), id));
        }
        handlers
    }

    /// Queues every parent in the cache at low priority, behind fresh
    /// changes: the periodic resync, a hot swap, a plugin started on caches
    /// that had listed already (they replay nothing to a new handler).
    pub fn resync(&self) {
        for key in self.parent_cache().keys() {
            self.queue.add(key, Priority::Low);
        }
    }

    /// Runs `concurrency` workers until the queue shuts down; in-flight
    /// reconciles finish before this returns.
    pub async fn run(self: Arc<Self>) {
        // As controller-runtime's WaitForCacheSync: until every cache a
        // reconcile reads has listed once, a parent can be seen without its
        // children, and the plugin would create them again (a restarted host
        // doubled a MyDeployment's Pods this way; `host/tests/all/crash_soak.rs`).
        for cache in self.caches.values().chain(&self.related_caches) {
            cache.wait_synced().await;
        }
        let labels = crate::metrics::ControllerLabels { controller: self.name.clone() };
        self.metrics.max_concurrent.get_or_create(&labels).set(self.config.concurrency.max(1) as i64);
        let workers: Vec<_> = (0..self.config.concurrency.max(1))
            .map(|_| {
                let this = self.clone();
                tokio::spawn(async move {
                    while let Some(key) = this.queue.next().await {
                        let started = std::time::Instant::now();
                        let span = tracing::info_span!("reconcile", controller = %this.name, object = %key);
                        let labels = crate::metrics::ControllerLabels { controller: this.name.clone() };
                        this.metrics.active_workers.get_or_create(&labels).inc();
                        // A panic in the host's own reconcile code must not leave the
                        // key marked as processing forever (controller-runtime's RecoverPanic).
                        let run = std::panic::AssertUnwindSafe(tracing::Instrument::instrument(this.reconcile(&key), span));
                        let ended = match futures::FutureExt::catch_unwind(run).await {
                            Ok(ended) => ended,
                            Err(_) => {
                                tracing::error!(controller = %this.name, object = %key, "reconcile panicked; backing off");
                                Ended::Failed
                            }
                        };
                        this.metrics.active_workers.get_or_create(&labels).dec();
                        this.metrics.observe_reconcile(&this.name, ended.label(), started.elapsed().as_secs_f64());
                        if ended == Ended::FailedForGood {
                            this.metrics.terminal_error(&this.name);
                        }
                        this.queue.finish(key, ended.outcome());
                    }
                })
            })
            .collect();
        for w in workers {
            let _ = w.await;
        }
    }
}

/// The priority of a key queued for a parent's or a child's change.
fn priority_of(origin: Origin) -> Priority {
    match origin {
        Origin::InitialList => Priority::Low,
        Origin::Change => Priority::Normal,
    }
}

/// The parent key named by `obj`'s controller ownerReference, if that
/// controller is of the `parent` kind (any version of its group).
pub fn controller_key(obj: &CachedObject, parent: &GroupVersionKind) -> Option<ObjectKey> {
    let r = obj.controller()?;
    let (group, _) = actions::policy::split_api_version(r.api_version);
    if group == parent.group && r.kind == parent.kind { Some(ObjectKey::new(obj.namespace(), r.name)) } else { None }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::{Value, json};

    fn obj(v: Value) -> CachedObject {
        CachedObject::new(serde_json::from_value(v).unwrap())
    }

    #[test]
    fn a_status_only_write_does_not_trigger_a_reconcile() {
        let a = obj(json!({"metadata": {"name": "p", "generation": 1, "resourceVersion": "1"}, "spec": {"x": 1}}));
        let b = obj(json!({"metadata": {"name": "p", "generation": 1, "resourceVersion": "2"}, "spec": {"x": 1}, "status": {"y": 2}}));
        assert!(!parent_changed(Some(&a), Some(&b)));
    }

    #[test]
    fn spec_labels_finalizers_and_deletion_trigger_a_reconcile() {
        let a = obj(json!({"metadata": {"name": "p", "generation": 1}}));
        for b in [
            json!({"metadata": {"name": "p", "generation": 2}}),
            json!({"metadata": {"name": "p", "generation": 1, "labels": {"a": "b"}}}),
            json!({"metadata": {"name": "p", "generation": 1, "annotations": {"a": "b"}}}),
            json!({"metadata": {"name": "p", "generation": 1, "finalizers": ["f"]}}),
            json!({"metadata": {"name": "p", "generation": 1, "deletionTimestamp": "2026-01-01T00:00:00Z"}}),
            json!({"metadata": {"name": "p", "generation": 1, "uid": "new"}}),
        ] {
            assert!(parent_changed(Some(&a), Some(&obj(b.clone()))), "{b}");
        }
        assert!(parent_changed(None, Some(&a)));
        assert!(parent_changed(Some(&a), None));
    }

    #[test]
    fn objects_without_a_generation_compare_their_content() {
        let a = obj(json!({"metadata": {"name": "c", "resourceVersion": "1"}, "data": {"k": "1"}}));
        let b = obj(json!({"metadata": {"name": "c", "resourceVersion": "2"}, "data": {"k": "2"}}));
        let c = obj(json!({"metadata": {"name": "c", "resourceVersion": "3"}, "data": {"k": "1"}}));
        assert!(parent_changed(Some(&a), Some(&b)));
        assert!(!parent_changed(Some(&a), Some(&c)));
    }

    #[test]
    fn a_child_maps_to_its_controller_of_the_parent_kind() {
        let parent = GroupVersionKind::new("apps.example.com", "v1", "MyDeployment");
        let child = obj(json!({"metadata": {"name": "c", "namespace": "ns", "ownerReferences": [
            {"apiVersion": "other/v1", "kind": "MyDeployment", "name": "x", "uid": "1"},
            {"apiVersion": "apps.example.com/v2", "kind": "MyDeployment", "name": "p", "uid": "2", "controller": true}]}}));
        assert_eq!(controller_key(&child, &parent), Some(ObjectKey::new("ns", "p")));
        let foreign = obj(json!({"metadata": {"name": "c", "namespace": "ns", "ownerReferences": [
            {"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "p", "uid": "2", "controller": true}]}}));
        assert_eq!(controller_key(&foreign, &parent), None);
    }
}
