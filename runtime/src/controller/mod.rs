//! One controller per plugin: the shared [`cache`]s of its parent and child
//! kinds feed its [`queue`]; workers take keys and run the reconcile driver:
//! wait for the expectations of the last pass, read parent + children from
//! the cache, call the plugin with the clock's `now`, check and execute the
//! actions, write the `Reconciled` condition, requeue. Before the plugin's
//! `reconcile`, its `validate` re-checks the stored parent ([`validity`]);
//! a parent the plugin refused for good is not called again until its
//! inputs change ([`permanent`]).

pub mod cache;
pub mod permanent;
pub mod queue;
pub mod validity;

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use kube::api::{Api, ApiResource, DynamicObject, Patch, PatchParams};
use operator_plugin_sdk::GroupVersionKind;
use serde_json::{Value, json};
use tokio::time::Instant;

use crate::actions::{self, Executor, Existing, Expectation, FIELD_MANAGER, Lookup, Parent, status};
use crate::api_error::ApiErrorClass;
use crate::clock::{SharedClock, timestamp};
use crate::events::{Recorder, Regarding};
use crate::metrics::{Metrics, QueueProbe};
use crate::sandbox::LoadedPlugin;
use cache::{CachedObject, HandlerId, KindCache, ObjectKey};
use queue::{Outcome, WorkQueue};

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
}

impl Default for Config {
    fn default() -> Self {
        Self { concurrency: 4, expectations_timeout: Duration::from_secs(30), backoff: queue::Backoff::default() }
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
    resources: HashMap<GroupVersionKind, ApiResource>,
    queue: Arc<WorkQueue<ObjectKey>>,
    expectations: Mutex<HashMap<ObjectKey, Vec<Expectation>>>,
    client: kube::Client,
    clock: SharedClock,
    recorder: Recorder,
    metrics: Arc<Metrics>,
    config: Config,
    /// Set once the API server was seen dropping `status.conditions`.
    conditions_pruned: std::sync::atomic::AtomicBool,
    /// The plugin's last `validate` answer per parent.
    validity: validity::Validity,
    /// Parents the plugin refused with a non-retryable error, and for what inputs.
    permanent: permanent::PermanentErrors,
}

fn has_condition(obj: &DynamicObject, type_: &str) -> bool {
    obj.data.pointer("/status/conditions").and_then(Value::as_array).is_some_and(|cs| cs.iter().any(|c| c["type"] == type_))
}

impl QueueProbe for WorkQueue<ObjectKey> {
    fn depth(&self) -> usize {
        WorkQueue::depth(self)
    }
    fn stats(&self) -> queue::Stats {
        WorkQueue::stats(self)
    }
}

/// Whether a change of a parent is worth a reconcile: anything but a
/// status-only write (compared by generation, labels, annotations,
/// finalizers, deletionTimestamp; objects without a generation compare
/// everything but status and bookkeeping).
pub fn parent_changed(old: Option<&DynamicObject>, new: Option<&DynamicObject>) -> bool {
    let (Some(o), Some(n)) = (old, new) else {
        return true;
    };
    let (om, nm) = (&o.metadata, &n.metadata);
    if om.uid != nm.uid
        || om.generation != nm.generation
        || om.labels != nm.labels
        || om.annotations != nm.annotations
        || om.finalizers != nm.finalizers
        || om.deletion_timestamp != nm.deletion_timestamp
    {
        return true;
    }
    if nm.generation.is_none() {
        let strip = |d: &Value| {
            let mut d = d.clone();
            if let Some(m) = d.as_object_mut() {
                m.remove("status");
            }
            d
        };
        return strip(&o.data) != strip(&n.data);
    }
    false
}

struct CacheLookup<'a>(&'a HashMap<GroupVersionKind, Arc<KindCache>>);

impl Lookup for CacheLookup<'_> {
    fn find(&self, gvk: &GroupVersionKind, namespace: &str, name: &str) -> Option<Existing> {
        let obj = self.0.get(gvk)?.get(&ObjectKey::new(namespace, name))?;
        Some(Existing {
            uid: obj.uid.clone().unwrap_or_default(),
            resource_version: obj.resource_version.clone().unwrap_or_default(),
            controller_uid: obj.controller.as_ref().map(|c| c.uid.clone()),
        })
    }

    fn namespaced(&self, gvk: &GroupVersionKind) -> bool {
        self.0.get(gvk).is_none_or(|c| c.namespaced())
    }
}

/// How one reconcile ended: what the queue does next ([`Ended::outcome`])
/// and the `result` label of `controller_runtime_reconcile_total`
/// ([`Ended::label`], controller-runtime's values).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Ended {
    /// Done until something changes.
    Done,
    /// Done; the plugin asked to be called again after this delay.
    RequeueAfter(Duration),
    /// A write met a newer object (409): again at once, no backoff.
    Conflict,
    /// Failed: again after the key's backoff.
    Failed,
    /// Failed in a way only a change can mend (a non-retryable plugin
    /// error, reported): no backoff, no timer ([`permanent`]).
    FailedForGood,
}

impl Ended {
    fn outcome(self) -> Outcome {
        match self {
            Ended::Done | Ended::FailedForGood => Outcome::Success { requeue_after: None },
            Ended::RequeueAfter(after) => Outcome::Success { requeue_after: Some(after) },
            Ended::Conflict => Outcome::RequeueNow,
            Ended::Failed => Outcome::Error,
        }
    }

    fn label(self) -> &'static str {
        match self {
            Ended::Done => "success",
            Ended::RequeueAfter(_) => "requeue_after",
            Ended::Conflict => "requeue",
            Ended::Failed | Ended::FailedForGood => "error",
        }
    }
}

impl Controller {
    /// `caches` must hold the parent kind and every declared child kind.
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
        let resources = mine.iter().map(|(g, c)| (g.clone(), c.resource().clone())).collect();
        let queue = Arc::new(WorkQueue::new(config.backoff));
        metrics.add_queue(&name, queue.clone());
        let recorder = Recorder::new(client.clone(), &name, clock.clone());
        let this = Arc::new(Self {
            name,
            plugin: std::sync::RwLock::new(plugin),
            handlers: Mutex::new(Vec::new()),
            parent_gvk: manifest.parent.clone(),
            caches: mine,
            resources,
            queue,
            expectations: Mutex::new(HashMap::new()),
            client,
            clock,
            recorder,
            metrics,
            config,
            conditions_pruned: std::sync::atomic::AtomicBool::new(false),
            validity: validity::Validity::default(),
            permanent: permanent::PermanentErrors::default(),
        });
        this.register();
        this
    }

    pub fn name(&self) -> &str {
        &self.name
    }

    /// The plugin version in use now.
    pub fn plugin(&self) -> LoadedPlugin {
        self.plugin.read().unwrap().clone()
    }

    /// Hot swap: later reconciles run `new`; reconciles in flight finish on
    /// the old version and queued keys stay queued. The caller has checked
    /// that `new` has the same parent and child kinds. Every parent is
    /// queued so the new logic applies at once. Returns the old version.
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

    /// Maps cache changes to parent keys.
    fn register(self: &Arc<Self>) {
        let queue = self.queue.clone();
        let mut handlers = self.handlers.lock().unwrap();
        let id = self.parent_cache().on_change(Arc::new(move |old: Option<&CachedObject>, new: Option<&CachedObject>| {
            let changed = match (old, new) {
                // Only a modification needs the whole objects compared.
                (Some(o), Some(n)) => parent_changed(Some(&o.object()), Some(&n.object())),
                _ => true,
            };
            if changed && let Some(o) = new.or(old) {
                queue.add(o.key.clone());
            }
        }));
        handlers.push((self.parent_cache().clone(), id));
        let parent = self.parent_gvk.clone();
        let children = self.plugin().manifest().children.clone();
        for gvk in children.iter() {
            if *gvk == self.parent_gvk {
                continue;
            }
            let queue = self.queue.clone();
            let parent = parent.clone();
            let id = self.caches[gvk].on_change(Arc::new(move |old: Option<&CachedObject>, new: Option<&CachedObject>| {
                for obj in [old, new].into_iter().flatten() {
                    if let Some(key) = controller_key(obj, &parent) {
                        queue.add(key);
                    }
                }
            }));
            handlers.push((self.caches[gvk].clone(), id));
        }
    }

    /// Queues every parent in the cache (periodic resync).
    pub fn resync(&self) {
        for key in self.parent_cache().keys() {
            self.queue.add(key);
        }
    }

    /// Runs `concurrency` workers until the queue shuts down; in-flight
    /// reconciles finish before this returns.
    pub async fn run(self: Arc<Self>) {
        // As controller-runtime's WaitForCacheSync: until every cache a
        // reconcile reads has listed once, a parent can be seen without its
        // children, and the plugin would create them again (a restarted host
        // doubled a MyDeployment's Pods this way; `tests/crash_soak.rs`).
        for cache in self.caches.values() {
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
                        this.queue.finish(key, ended.outcome());
                    }
                })
            })
            .collect();
        for w in workers {
            let _ = w.await;
        }
    }

    fn satisfied(&self, e: &Expectation) -> bool {
        let (gvk, uid) = match e {
            Expectation::Created { gvk, uid } | Expectation::Updated { gvk, uid, .. } | Expectation::Deleted { gvk, uid } => (gvk, uid),
        };
        let Some(cache) = self.caches.get(gvk) else {
            return true;
        };
        let seen = cache.get_by_uid(uid);
        match e {
            Expectation::Created { .. } => seen.is_some() || cache.has_seen_uid(uid),
            Expectation::Updated { from, .. } => seen.is_none_or(|o| o.resource_version.as_deref() != Some(from.as_str())),
            Expectation::Deleted { .. } => seen.is_none_or(|o| o.deleting),
        }
    }

    /// Holds the reconcile of `key` until the cache has seen the writes of
    /// its previous pass (or the timeout passes).
    async fn wait_for_expectations(&self, key: &ObjectKey) {
        let Some(pending) = self.expectations.lock().unwrap().remove(key) else {
            return;
        };
        let deadline = Instant::now() + self.config.expectations_timeout;
        let mut receivers: Vec<_> = self.caches.values().map(|c| c.subscribe_changes()).collect();
        loop {
            if pending.iter().all(|e| self.satisfied(e)) {
                return;
            }
            if Instant::now() >= deadline {
                tracing::warn!(object = %key, "the cache did not show this controller's last writes in time; reconciling anyway");
                return;
            }
            let changed = futures::future::select_all(receivers.iter_mut().map(|r| Box::pin(r.changed())));
            let _ = tokio::time::timeout_at(deadline, changed).await;
        }
    }

    fn expect(&self, key: &ObjectKey, new: Vec<Expectation>) {
        if !new.is_empty() {
            self.expectations.lock().unwrap().entry(key.clone()).or_default().extend(new);
        }
    }

    async fn reconcile(&self, key: &ObjectKey) -> Ended {
        self.wait_for_expectations(key).await;
        let plugin = self.plugin();
        let Some(cached) = self.parent_cache().get(key) else {
            self.queue.forget(key);
            self.expectations.lock().unwrap().remove(key);
            self.validity.forget(key);
            self.permanent.forget(key);
            return Ended::Done;
        };
        let obj = cached.object();
        let parent = Parent {
            api_version: self.parent_gvk.api_version(),
            kind: self.parent_gvk.kind.clone(),
            namespace: key.namespace.clone(),
            name: key.name.clone(),
            uid: obj.metadata.uid.clone().unwrap_or_default(),
        };
        let regarding = Regarding {
            api_version: parent.api_version.clone(),
            kind: parent.kind.clone(),
            namespace: parent.namespace.clone(),
            name: parent.name.clone(),
            uid: parent.uid.clone(),
        };
        let deleting = obj.metadata.deletion_timestamp.is_some();
        let finalizers = obj.metadata.finalizers.clone().unwrap_or_default();
        let finalizer = plugin.manifest().finalizer.clone();
        if let Some(ended) = self.ensure_finalizer(key, &obj, finalizer.as_deref()).await {
            return ended;
        }
        // A parent on its way out is not re-validated: an invalid spec must
        // not hold up the cleanup that lets it go.
        if !deleting && let Some(refused) = self.refuse_if_invalid(key, &plugin, &obj, cached.json(), &regarding).await {
            return refused;
        }

        let mut children = Vec::new();
        for gvk in &plugin.manifest().children {
            for child in self.caches[gvk].controlled_by(&parent.uid) {
                children.push(child.json().to_string());
            }
        }
        let parent_json = cached.json().to_string();
        let inputs = permanent::Inputs::of(&parent_json, &children, &plugin.info().digest);
        if self.permanent.still_refused(key, &inputs) {
            // Reported once already; only a change of the inputs can help.
            tracing::debug!("the plugin refused these inputs for good; waiting for a change");
            return Ended::Done;
        }
        let now = self.clock.now();
        let result = plugin.reconcile(parent_json, children, now.timestamp_millis()).await;

        let mut plugin_status = None;
        // Set when the plugin says retrying cannot help: remembered once reported.
        let mut refused_for_good = None;
        let (verdict, ended) = match result {
            Err(e) => {
                self.metrics.plugin_call_error(&self.name, e.kind());
                self.metrics.plugin_outcome(&self.name, &plugin.info().digest, Some(e.kind()));
                tracing::warn!(error = %e, retryable = e.retryable(), "plugin call failed");
                let ended = if e.retryable() {
                    Ended::Failed
                } else {
                    // No backoff: the next call waits for a change of the inputs.
                    refused_for_good = Some(inputs);
                    Ended::FailedForGood
                };
                (Some(status::Verdict::failure(e.reason(), e.to_string())), ended)
            }
            Ok(actions) => {
                self.permanent.forget(key);
                let lookup = CacheLookup(&self.caches);
                match actions::check(&parent, &plugin.manifest().children, &lookup, actions) {
                    Err(refusal) => {
                        self.metrics.plugin_call_error(&self.name, "action_refused");
                        self.metrics.plugin_outcome(&self.name, &plugin.info().digest, Some("action_refused"));
                        tracing::warn!(%refusal, "action refused");
                        (Some(status::Verdict::failure("ActionRefused", refusal.to_string())), Ended::Failed)
                    }
                    Ok(plan) => {
                        self.metrics.plugin_outcome(&self.name, &plugin.info().digest, None);
                        let executor = Executor {
                            client: &self.client,
                            resources: &self.resources,
                            recorder: &self.recorder,
                            regarding: &regarding,
                            lookup: &lookup,
                            parent_uid: &parent.uid,
                        };
                        let executed = executor.execute(plan.writes).await;
                        self.expect(key, executed.expectations);
                        plugin_status = executed.status;
                        match executed.error {
                            Some(err) if err.is_conflict() => {
                                tracing::debug!(error = %crate::error_chain(&err), "conflict; requeue");
                                (None, Ended::Conflict)
                            }
                            Some(err) => {
                                tracing::warn!(error = %crate::error_chain(&err), "write failed");
                                let reason = format!("WriteFailed{}", err.reason());
                                (Some(status::Verdict::failure(reason, crate::error_chain(&err))), Ended::Failed)
                            }
                            None => {
                                if plan.finalized
                                    && deleting
                                    && let Some(f) = &finalizer
                                {
                                    // Cleanup is done: drop the finalizer and let the
                                    // object go; no status is written to a parent on
                                    // its way out.
                                    let list: Vec<String> = finalizers.iter().filter(|x| *x != f).cloned().collect();
                                    return self.patch_finalizers(key, &obj, list).await;
                                }
                                (Some(status::Verdict::success()), plan.requeue_after.map_or(Ended::Done, Ended::RequeueAfter))
                            }
                        }
                    }
                }
            }
        };
        if let Some(verdict) = verdict {
            if !verdict.ok
                && let Err(e) = self.recorder.publish(&regarding, "Warning", &verdict.reason, &verdict.message).await
            {
                tracing::warn!(error = %crate::error_chain(&e), "could not record event");
            }
            if !(deleting && verdict.ok && plugin_status.is_none())
                && let Err(e) = self.write_status(key, &obj, plugin_status, &verdict, now).await
            {
                tracing::warn!(error = %crate::error_chain(&e), "status write failed");
                if refused_for_good.is_some() {
                    // The refusal is not on record yet: retry until it is.
                    return Ended::Failed;
                }
                if ended != Ended::Failed {
                    return if ApiErrorClass::of(&e) == ApiErrorClass::Conflict { Ended::Conflict } else { Ended::Failed };
                }
            }
        }
        if let Some(inputs) = refused_for_good {
            self.permanent.record(key, inputs);
        }
        ended
    }

    fn parent_api(&self, key: &ObjectKey) -> Api<DynamicObject> {
        let ar = self.parent_cache().resource();
        if self.parent_cache().namespaced() {
            Api::namespaced_with(self.client.clone(), &key.namespace, ar)
        } else {
            Api::all_with(self.client.clone(), ar)
        }
    }

    async fn write_status(
        &self,
        key: &ObjectKey,
        obj: &DynamicObject,
        plugin_status: Option<Value>,
        verdict: &status::Verdict,
        now: chrono::DateTime<chrono::Utc>,
    ) -> kube::Result<()> {
        let current = obj.data.get("status").filter(|s| s.is_object()).cloned().unwrap_or_else(|| json!({}));
        let base = plugin_status.unwrap_or_else(|| current.clone());
        let pruned = self.conditions_pruned.load(std::sync::atomic::Ordering::Relaxed);
        let desired = if pruned { base } else { status::with_verdict(base, &current, verdict, obj.metadata.generation, &timestamp(now)) };
        let Some(diff) = status::merge_diff(&current, &desired) else {
            return Ok(());
        };
        let params = PatchParams { field_manager: Some(FIELD_MANAGER.into()), ..PatchParams::default() };
        let body = json!({"status": diff});
        let new = match self.parent_api(key).patch_status(&key.name, &params, &Patch::Merge(&body)).await {
            // A CRD without the status subresource: status is part of the object.
            Err(e) if ApiErrorClass::of(&e) == ApiErrorClass::NotFound && self.parent_cache().get(key).is_some() => {
                self.parent_api(key).patch(&key.name, &params, &Patch::Merge(&body)).await?
            }
            other => other?,
        };
        if !pruned && !has_condition(&new, status::RECONCILED) {
            // The CRD's status schema has no `conditions` (and does not
            // preserve unknown fields): the API server drops the condition.
            // Stop computing it, or every reconcile would write status again.
            self.conditions_pruned.store(true, std::sync::atomic::Ordering::Relaxed);
            tracing::warn!(
                kind = %self.parent_gvk.kind,
                "the CRD's status schema prunes status.conditions; the host's Reconciled condition cannot be recorded (Events and metrics still report failures)"
            );
        }
        self.expect_parent_update(key, obj, &new);
        Ok(())
    }

    fn expect_parent_update(&self, key: &ObjectKey, old: &DynamicObject, new: &DynamicObject) {
        let from = old.metadata.resource_version.clone().unwrap_or_default();
        if new.metadata.resource_version.as_deref() != Some(from.as_str()) {
            let uid = old.metadata.uid.clone().unwrap_or_default();
            self.expect(key, vec![Expectation::Updated { gvk: self.parent_gvk.clone(), uid, from }]);
        }
    }

    /// The finalizer step, before anything else (kube-runtime's
    /// `finalizer()`): a live parent gets the plugin's finalizer first (that
    /// write queues it again); a parent on its way out is only reconciled
    /// while the finalizer is still there, so the plugin can clean up.
    /// `Some` ends this reconcile.
    async fn ensure_finalizer(&self, key: &ObjectKey, obj: &DynamicObject, finalizer: Option<&str>) -> Option<Ended> {
        let deleting = obj.metadata.deletion_timestamp.is_some();
        let finalizers = obj.metadata.finalizers.as_deref().unwrap_or_default();
        let has = |f: &str| finalizers.iter().any(|x| x == f);
        match finalizer {
            Some(f) if !deleting && !has(f) => {
                let list = finalizers.iter().cloned().chain(std::iter::once(f.to_string())).collect();
                Some(self.patch_finalizers(key, obj, list).await)
            }
            Some(f) if deleting && !has(f) => Some(Ended::Done),
            None if deleting => Some(Ended::Done),
            _ => None,
        }
    }

    async fn patch_finalizers(&self, key: &ObjectKey, obj: &DynamicObject, list: Vec<String>) -> Ended {
        let patch = json!({"metadata": {"finalizers": list, "resourceVersion": obj.metadata.resource_version}});
        let params = PatchParams { field_manager: Some(FIELD_MANAGER.into()), ..PatchParams::default() };
        match self.parent_api(key).patch(&key.name, &params, &Patch::Merge(&patch)).await {
            Ok(new) => {
                self.expect_parent_update(key, obj, &new);
                Ended::Done
            }
            Err(e) if ApiErrorClass::of(&e) == ApiErrorClass::Conflict => Ended::Conflict,
            Err(e) if ApiErrorClass::of(&e) == ApiErrorClass::NotFound => Ended::Done,
            Err(e) => {
                tracing::warn!(error = %crate::error_chain(&e), "finalizer update failed");
                Ended::Failed
            }
        }
    }
}

/// The parent key named by `obj`'s controller ownerReference, if that
/// controller is of the `parent` kind (any version of its group).
pub fn controller_key(obj: &CachedObject, parent: &GroupVersionKind) -> Option<ObjectKey> {
    let r = obj.controller.as_ref()?;
    let (group, _) = actions::policy::split_api_version(&r.api_version);
    if group == parent.group && r.kind == parent.kind { Some(ObjectKey::new(obj.key.namespace.clone(), r.name.clone())) } else { None }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn obj(v: Value) -> DynamicObject {
        serde_json::from_value(v).unwrap()
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
        assert_eq!(controller_key(&CachedObject::new(&child), &parent), Some(ObjectKey::new("ns", "p")));
        let foreign = obj(json!({"metadata": {"name": "c", "namespace": "ns", "ownerReferences": [
            {"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "p", "uid": "2", "controller": true}]}}));
        assert_eq!(controller_key(&CachedObject::new(&foreign), &parent), None);
    }
}
