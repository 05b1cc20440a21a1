//! The reconcile driver as a pipeline of named steps, one reconcile of one
//! parent:
//!
//! ```text
//! wait for expectations → read the parent from the cache
//!   → finalizer (wrapper: add it / Apply / Cleanup, remove it when done)
//!     → validity gate (`validate`, remembered per generation)
//!     → gather inputs (shared text: parent, children, related, now;
//!       more related objects than the cap: refused)
//!     → permanent-error gate (same inputs as a refusal for good: stop)
//!     → call plugin → check (policy) → execute (writes, expectations)
//!   → record the verdict (Reconciled condition + status, Warning Event)
//! → the queue (by [`Ended`])
//! ```
//!
//! Each step returns what the next needs; only `record` writes the verdict.

use std::sync::Arc;

use chrono::{DateTime, Utc};
use kube::api::{Patch, PatchParams};
use operator_plugin_sdk::Action;
use serde_json::{Value, json};

use super::cache::{CachedObject, ObjectKey};
use super::hook::CallInput;
use super::finalizer::{Event, Reconciled};
use super::{CacheLookup, Controller, Ended, permanent, related};
use crate::actions::{self, Executor, Existing, Expectation, FIELD_MANAGER, Plan, status};
use crate::api_error::ApiErrorClass;
use crate::clock::timestamp;
use crate::object_reference::ObjectReference;
use crate::sandbox::{CallError, LoadedPlugin};

/// What a pass concluded, before it is recorded.
#[derive(Debug)]
struct Pass {
    /// The `Reconciled` condition to record; `None` writes nothing (a
    /// conflict: the next pass, at once, decides).
    verdict: Option<status::Verdict>,
    /// The status the plugin set, if any.
    plugin_status: Option<Value>,
    ended: Ended,
    /// Set when the plugin refused these inputs for good: remembered once
    /// the refusal is on record.
    refused_for_good: Option<permanent::Inputs>,
}

impl Pass {
    fn failed(verdict: status::Verdict) -> Self {
        Self { verdict: Some(verdict), plugin_status: None, ended: Ended::Failed, refused_for_good: None }
    }
}

/// The parent as the policy, the executor and the Event recorder name it.
fn parent_reference(controller: &Controller, key: &ObjectKey, cached: &CachedObject) -> ObjectReference {
    ObjectReference {
        api_version: controller.parent_gvk.api_version(),
        kind: controller.parent_gvk.kind.clone(),
        namespace: key.namespace.clone(),
        name: key.name.clone(),
        uid: cached.uid().unwrap_or_default().to_string(),
    }
}

impl Controller {
    /// One reconcile of `key`, start to end.
    pub(super) async fn reconcile(&self, key: &ObjectKey) -> Ended {
        self.wait_for_expectations(key).await;
        let plugin = self.plugin();
        let Some(parent) = self.parent_cache().get(key) else {
            self.forget(key);
            return Ended::Done;
        };
        if let Some(sharding) = &self.config.sharding {
            match self.sharded(sharding, key, &parent).await {
                Sharded::Reconcile => {}
                Sharded::Ended(ended) => return ended,
            }
        }
        let finalizer = plugin.manifest().finalizer.clone();
        self.with_finalizer(key, &parent, finalizer.as_deref(), |event| self.reconcile_parent(key, &plugin, &parent, event)).await
    }

    /// The steps inside the finalizer wrapper.
    async fn reconcile_parent(&self, key: &ObjectKey, plugin: &LoadedPlugin, parent: &CachedObject, event: Event) -> Reconciled {
        let target = parent_reference(self, key, parent);
        // A parent on its way out is not re-validated: an invalid spec must
        // not hold up the cleanup that lets it go.
        if event == Event::Apply
            && let Some(refused) = self.refuse_if_invalid(key, plugin, parent, &target).await
        {
            return Reconciled::Ended(refused);
        }
        let input = match self.gather(plugin, parent, &target.uid) {
            Ok(input) => input,
            Err(verdict) => {
                tracing::warn!(reason = %verdict.reason, message = %verdict.message, "related objects not passed");
                self.metrics.plugin_call_error(&self.name, "related_refused");
                let now = self.clock.now();
                return Reconciled::Ended(self.record(key, parent, &target, Pass::failed(verdict), event, now).await);
            }
        };
        // Related objects are inputs too: a refusal for good ends when one changes.
        let read = [&input.children[..], &input.related[..]].concat();
        let inputs = permanent::Inputs::of(&parent.fingerprint, &read, &plugin.info().digest);
        if self.permanent.still_refused(key, &inputs) {
            // Reported once already; only a change of the inputs can help.
            tracing::debug!("the plugin refused these inputs for good; waiting for a change");
            return Reconciled::Ended(Ended::Done);
        }
        // Each call's outcome by plugin version feeds automatic rollback.
        let digest = &plugin.info().digest;
        let pass = match self.call_plugin(plugin, &input).await {
            Err(e) => {
                self.metrics.plugin_outcome(&self.name, digest, Some(e.kind()));
                self.plugin_failed(&e, inputs)
            }
            Ok(actions) => {
                self.permanent.forget(key);
                let lookup = CacheLookup(&self.caches);
                match self.check(plugin, &target, &lookup, actions) {
                    Err(refused) => {
                        self.metrics.plugin_outcome(&self.name, digest, Some("action_refused"));
                        refused
                    }
                    Ok(mut plan) => {
                        // A parent on its way out keeps its children until the
                        // garbage collector (or an orphaning delete) decides.
                        if event == Event::Apply {
                            actions::prune(&target, &mut plan, self.applied_earlier(plugin, &target.uid));
                        }
                        self.metrics.plugin_outcome(&self.name, digest, None);
                        let finalized = plan.finalized;
                        let pass = self.execute(key, &target, &lookup, plan, &plugin.manifest().name).await;
                        if event == Event::Cleanup && finalized && pass.verdict.as_ref().is_some_and(|v| v.ok) {
                            return Reconciled::CleanedUp;
                        }
                        pass
                    }
                }
            }
        };
        Reconciled::Ended(self.record(key, parent, &target, pass, event, input.now).await)
    }

    /// The parent is gone from the cache: drop what was remembered for it.
    /// Sharded: a drained parent is handed over instead of reconciled (no
    /// other pass of the key runs now, and the last one's writes are in the
    /// caches); one on another shard is not this replica's; one gained by a
    /// handover waits for its children first.
    async fn sharded(&self, sharding: &crate::shard::Sharding, key: &ObjectKey, parent: &CachedObject) -> Sharded {
        let placement = sharding.placement_of(parent);
        if placement.shard.as_deref() != Some(sharding.shard.as_str()) {
            // The cache shows the object until the watch reports it left.
            self.forget(key);
            return Sharded::Ended(Ended::Done);
        }
        if placement.draining() {
            let kinds = self.plugin().manifest().children.clone();
            let handover = crate::shard::acknowledge::Handover {
                client: &self.client,
                sharding,
                parent_resource: &self.resources[&self.parent_gvk],
                parent,
                children: kinds.iter().filter(|g| **g != self.parent_gvk).map(|g| (g, &self.resources[g], &*self.caches[g])).collect(),
                gate: &self.handovers,
            };
            let started = std::time::Instant::now();
            return Sharded::Ended(match handover.run().await {
                Ok(to) => {
                    tracing::info!(object = %key, to = %to, "handed over to another shard");
                    self.metrics.shard_handover(&self.name, started.elapsed().as_secs_f64());
                    self.forget(key);
                    Ended::Done
                }
                Err(e) if crate::api_error::ApiErrorClass::of(&e) == crate::api_error::ApiErrorClass::Conflict => Ended::Conflict,
                Err(e) => {
                    tracing::warn!(object = %key, error = %crate::error_chain(&e), "handover failed; retrying");
                    Ended::Failed
                }
            });
        }
        self.handovers.wait(key, &self.caches, self.config.expectations_timeout).await;
        Sharded::Reconcile
    }

    fn forget(&self, key: &ObjectKey) {
        self.queue.forget(key);
        self.expectations.lock().unwrap().remove(key);
        self.validity.forget(key);
        self.permanent.forget(key);
    }

    /// The call's inputs, read from the caches: the parent's text, its
    /// controlled children of every declared kind, the related objects that
    /// attach to it, and the clock's `now`. Refused (never truncated: the
    /// plugin would take a part for the whole) over the related cap, or when
    /// the parent's selector is malformed.
    fn gather(&self, plugin: &LoadedPlugin, parent: &CachedObject, parent_uid: &str) -> Result<CallInput, status::Verdict> {
        let children =
            plugin.manifest().children.iter().flat_map(|gvk| self.caches[gvk].controlled_by(parent_uid)).map(|c| c.shared_json()).collect();
        let related = self.gather_related(plugin, parent)?;
        Ok(CallInput { parent: parent.shared_json(), children, related, now: self.clock.now() })
    }

    fn gather_related(&self, plugin: &LoadedPlugin, parent: &CachedObject) -> Result<Arc<[Arc<str>]>, status::Verdict> {
        let kinds = &plugin.manifest().related;
        if kinds.is_empty() {
            return Ok(Arc::from([]));
        }
        let value: Value = serde_json::from_str(parent.json()).unwrap_or_default();
        let references = related::references(kinds, &value, parent.namespace())
            .map_err(|e| status::Verdict::failure("InvalidRelatedSelector", format!("the parent's related-object reference is malformed: {e}")))?;
        let mut seen = std::collections::HashSet::new();
        let mut found: Vec<Arc<str>> = Vec::new();
        for ((reference, kind), cache) in references.iter().zip(kinds).zip(&self.related_caches) {
            let objects = match &reference.refs {
                related::Refs::Names(names) => names.iter().filter_map(|n| cache.get(&ObjectKey::new(reference.scope.clone(), n.clone()))).collect(),
                related::Refs::Selector(_) => cache.in_namespace(&reference.scope).into_iter().filter(|o| reference.covers(o)).collect(),
                related::Refs::Nothing => Vec::new(),
            };
            for o in objects {
                if seen.insert((kind.kind.clone(), o.key())) {
                    found.push(o.shared_json());
                }
            }
        }
        if found.len() > self.config.max_related {
            return Err(status::Verdict::failure(
                "TooManyRelated",
                format!(
                    "{} related objects attach to this parent; the cap per reconcile is {} (narrow the selector, or raise --max-related)",
                    found.len(),
                    self.config.max_related
                ),
            ));
        }
        Ok(found.into())
    }

    /// The plugin's `reconcile`: the one place the driver calls it, through
    /// the hook its observers (a recording, a staged candidate) watch.
    pub(super) async fn call_plugin(&self, plugin: &LoadedPlugin, input: &CallInput) -> Result<Vec<Action>, CallError> {
        self.config.tap.reconcile(plugin, input).await
    }

    /// A failed call: retried with backoff, or (not retryable) reported once
    /// and then left until the inputs change.
    fn plugin_failed(&self, e: &CallError, inputs: permanent::Inputs) -> Pass {
        self.metrics.plugin_call_error(&self.name, e.kind());
        tracing::warn!(error = %e, retryable = e.retryable(), "plugin call failed");
        let verdict = status::Verdict::failure(e.reason(), e.to_string());
        if e.retryable() {
            Pass::failed(verdict)
        } else {
            Pass { verdict: Some(verdict), plugin_status: None, ended: Ended::FailedForGood, refused_for_good: Some(inputs) }
        }
    }

    /// The policy check of the plugin's answer ([`actions::check`]).
    #[allow(
        clippy::result_large_err,
        reason = "the Err side is the pass ending early with its verdict, as common as Ok and returned once per reconcile, not an error to box"
    )]
    fn check(&self, plugin: &LoadedPlugin, target: &ObjectReference, lookup: &CacheLookup<'_>, actions: Vec<Action>) -> Result<Plan, Pass> {
        actions::check(target, &plugin.manifest().children, lookup, actions).map_err(|refusal| {
            self.metrics.plugin_call_error(&self.name, "action_refused");
            tracing::warn!(%refusal, "action refused");
            Pass::failed(status::Verdict::failure("ActionRefused", refusal.to_string()))
        })
    }

    /// The children of the parent that this plugin applied (they carry
    /// [`actions::APPLIED_BY`] with its name), for [`actions::prune`].
    fn applied_earlier(&self, plugin: &LoadedPlugin, parent_uid: &str) -> Vec<actions::AppliedEarlier> {
        let name = plugin.manifest().name.as_str();
        plugin
            .manifest()
            .children
            .iter()
            .flat_map(|gvk| self.caches[gvk].controlled_by(parent_uid).into_iter().map(move |c| (gvk, c)))
            .filter(|(_, c)| c.labels().get(actions::APPLIED_BY) == Some(name))
            .map(|(gvk, c)| actions::AppliedEarlier {
                gvk: gvk.clone(),
                name: c.name().to_owned(),
                existing: Existing {
                    uid: c.uid().unwrap_or_default().to_owned(),
                    resource_version: c.resource_version().unwrap_or_default().to_owned(),
                    controller_uid: c.controller().map(|r| r.uid.to_owned()),
                },
            })
            .collect()
    }

    /// The checked writes, made in order; the first failure stops them.
    async fn execute(&self, key: &ObjectKey, target: &ObjectReference, lookup: &CacheLookup<'_>, plan: Plan, plugin_name: &str) -> Pass {
        let child_label = self.config.sharding.as_ref().map(crate::shard::Sharding::child_label);
        let executor = Executor {
            client: &self.client,
            resources: &self.resources,
            recorder: &self.recorder,
            regarding: target,
            lookup,
            parent_uid: &target.uid,
            plugin: plugin_name,
            child_label: child_label.as_ref().map(|(k, v)| (k.as_str(), v.as_str())),
        };
        let executed = executor.execute(plan.writes).await;
        self.expect(key, executed.expectations);
        let (verdict, ended) = match executed.error {
            Some(err) if err.is_conflict() => {
                tracing::debug!(error = %crate::error_chain(&err), "conflict; requeue");
                (None, Ended::Conflict)
            }
            Some(err) => {
                tracing::warn!(error = %crate::error_chain(&err), "write failed");
                let reason = format!("WriteFailed{}", err.reason());
                (Some(status::Verdict::failure(reason, crate::error_chain(&err))), Ended::Failed)
            }
            None => (Some(status::Verdict::success()), plan.requeue_after.map_or(Ended::Done, Ended::RequeueAfter)),
        };
        Pass { verdict, plugin_status: executed.status, ended, refused_for_good: None }
    }

    /// Records the verdict: a Warning Event for a failure, the `Reconciled`
    /// condition (and the plugin's status) on the parent, and a refusal for
    /// good once it is on record. A failed status write decides the end when
    /// the pass itself succeeded.
    async fn record(&self, key: &ObjectKey, parent: &CachedObject, regarding: &ObjectReference, pass: Pass, event: Event, now: DateTime<Utc>) -> Ended {
        let Pass { verdict, plugin_status, ended, refused_for_good } = pass;
        if let Some(verdict) = verdict {
            if !verdict.ok {
                self.metrics.activity.failed(&self.name, &key.to_string(), &verdict.reason, &verdict.message);
            }
            if !verdict.ok {
                self.recorder.record(regarding, "Warning", &verdict.reason, &verdict.message);
            }
            // A parent on its way out gets no success condition of its own.
            let quiet = event == Event::Cleanup && verdict.ok && plugin_status.is_none();
            if !quiet && let Err(e) = self.write_status(key, parent, plugin_status, &verdict, now).await {
                tracing::warn!(error = %crate::error_chain(&e), "status write failed");
                if refused_for_good.is_some() {
                    // The refusal is not on record yet: retry until it is.
                    return Ended::Failed;
                }
                if !ended.failed() {
                    return if ApiErrorClass::of(&e) == ApiErrorClass::Conflict { Ended::Conflict } else { Ended::Failed };
                }
            }
        }
        if let Some(inputs) = refused_for_good {
            self.permanent.record(key, inputs);
        }
        ended
    }

    /// Merges the plugin's status and the verdict into the parent's status;
    /// writes only what differs.
    pub(super) async fn write_status(
        &self,
        key: &ObjectKey,
        parent: &CachedObject,
        plugin_status: Option<Value>,
        verdict: &status::Verdict,
        now: DateTime<Utc>,
    ) -> kube::Result<()> {
        let current = parent.status();
        let base = plugin_status.unwrap_or_else(|| current.clone());
        let pruned = self.conditions_pruned.load(std::sync::atomic::Ordering::Relaxed);
        let desired = if pruned { base } else { status::with_verdict(base, &current, verdict, parent.generation(), &timestamp(now)) };
        let Some(diff) = status::merge_diff(&current, &desired) else {
            return Ok(());
        };
        let params = PatchParams { field_manager: Some(FIELD_MANAGER.into()), ..PatchParams::default() };
        let body = json!({"status": diff});
        let target = self.parent_target(key);
        let new = match target.patch(&key.name, Some("status"), &params, &Patch::Merge(&body)).await {
            // A CRD without the status subresource: status is part of the object.
            Err(e) if ApiErrorClass::of(&e) == ApiErrorClass::NotFound && self.parent_cache().get(key).is_some() => {
                target.patch(&key.name, None, &params, &Patch::Merge(&body)).await?
            }
            other => other?,
        };
        if !pruned && !new.has_condition(status::RECONCILED) {
            // The CRD's status schema has no `conditions` (and does not
            // preserve unknown fields): the API server drops the condition.
            // Stop computing it, or every reconcile would write status again.
            self.conditions_pruned.store(true, std::sync::atomic::Ordering::Relaxed);
            tracing::warn!(
                kind = %self.parent_gvk.kind,
                "the CRD's status schema prunes status.conditions; the host's Reconciled condition cannot be recorded (Events and metrics still report failures)"
            );
        }
        self.expect_parent_update(key, parent, new.metadata.resource_version.as_deref());
        Ok(())
    }

    /// The parent's endpoint, for writes whose answer is read for its
    /// resourceVersion and conditions only ([`crate::api_answer`]).
    pub(super) fn parent_target<'a>(&'a self, key: &'a ObjectKey) -> crate::api_answer::ResourceEndpoint<'a> {
        let namespace = if self.parent_cache().namespaced() { key.namespace.as_str() } else { "" };
        crate::api_answer::ResourceEndpoint { client: &self.client, resource: self.parent_cache().resource(), namespace }
    }

    /// After a write of the parent (its answer's resourceVersion `new`): the
    /// next pass waits until the cache shows a resourceVersion newer than the
    /// one this pass read.
    pub(super) fn expect_parent_update(&self, key: &ObjectKey, old: &CachedObject, new: Option<&str>) {
        let from = old.resource_version().unwrap_or_default().to_string();
        if new != Some(from.as_str()) {
            let uid = old.uid().unwrap_or_default().to_string();
            self.expect(key, vec![Expectation::Updated { gvk: self.parent_gvk.clone(), uid, from }]);
        }
    }
}

/// What sharding says about a reconcile that is about to start.
enum Sharded {
    Reconcile,
    Ended(Ended),
}
