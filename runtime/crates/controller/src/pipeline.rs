//! The reconcile driver: one reconcile of one parent as a sequence of
//! steps, each a function that takes what it needs and returns what the
//! next needs:
//!
//! ```text
//! wait for expectations ([`Expectations`](super::expectations::Expectations))
//!   → read the parent from the cache → sharding (hand over, or not ours)
//!   → finalizer ([`with_finalizer`]: add it / Apply / Cleanup, remove it when done)
//!     → validity gate ([`validity::gate`], remembered per generation; an
//!       invalid parent is a refusal for good, left until it changes)
//!     → read the inputs ([`CacheView::inputs`]: parent, children, related,
//!       now; more related objects than the cap: refused)
//!     → permanent-error gate (same inputs as a refusal for good: stop)
//!     → call the plugin (through the [`CallHook`](super::hook::CallHook))
//!     → policy ([`actions::check`], then [`actions::prune`])
//!     → execute (the writes, in order; their expectations)
//!   → write the verdict ([`VerdictSink::record`], the one place:
//!     Reconciled condition + status, Warning Event)
//! → the queue (by [`Ended`])
//! ```
//!
//! A step that ends the pass early returns the [`Pass`] to record; only the
//! verdict step writes it.

use operator_plugin_sdk::Action;

use super::cache::{CachedObject, ObjectKey};
use super::finalizer::{Event, Reconciled, with_finalizer};
use super::queue::Priority;
use super::read::{CacheLookup, CacheView};
use super::verdict::{Pass, VerdictSink};
use super::{Controller, Ended, permanent, validity};
use crate::actions::{self, Executed, Executor, Plan, status};
use crate::object_reference::ObjectReference;
use crate::sandbox::{CallError, LoadedPlugin};

/// How the steps inside the finalizer wrapper ended.
enum Outcome {
    /// With a verdict to record, as of `now`.
    Record(Pass, chrono::DateTime<chrono::Utc>),
    /// With nothing to record (the refusal for good is on record already).
    Quiet(Ended),
    /// The plugin's cleanup is done ([`Reconciled::CleanedUp`]).
    CleanedUp,
}

impl Controller {
    /// One reconcile of `key`, start to end.
    pub(super) async fn reconcile(&self, key: &ObjectKey) -> Ended {
        self.expectations.wait(key, &self.caches, self.config.expectations_timeout).await;
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
        with_finalizer(&self.parent_writes, key, &parent, finalizer.as_deref(), |event| self.reconcile_parent(key, &plugin, &parent, event)).await
    }

    /// The steps inside the finalizer wrapper, then the verdict.
    async fn reconcile_parent(&self, key: &ObjectKey, plugin: &LoadedPlugin, parent: &CachedObject, event: Event) -> Reconciled {
        let reference = parent_reference(&self.parent_gvk, key, parent);
        let (pass, now) = match self.steps(key, plugin, parent, &reference, event).await {
            Outcome::Record(pass, now) => (pass, now),
            Outcome::Quiet(ended) => return Reconciled::Ended(ended),
            Outcome::CleanedUp => return Reconciled::CleanedUp,
        };
        let sink = VerdictSink {
            controller: &self.name,
            writes: &self.parent_writes,
            recorder: &self.recorder,
            metrics: &self.metrics,
            permanent: &self.permanent,
        };
        Reconciled::Ended(sink.record(key, parent, &reference, pass, event, now).await)
    }

    /// Validity gate → read the inputs → permanent-error gate → call the
    /// plugin → policy → execute.
    async fn steps(&self, key: &ObjectKey, plugin: &LoadedPlugin, parent: &CachedObject, reference: &ObjectReference, event: Event) -> Outcome {
        // A parent on its way out is not re-validated: an invalid spec must
        // not hold up the cleanup that lets it go.
        if event == Event::Apply {
            // A parent the plugin's `validate` refuses is a terminal error
            // (controller-runtime's `reconcile.TerminalError`): reported
            // once, then left until the parent (or the plugin) changes.
            let as_validated = permanent::Inputs::of(&parent.fingerprint, &[], &plugin.info().digest);
            if self.permanent.still_refused(key, &as_validated) {
                tracing::debug!("the plugin found this parent invalid; waiting for a change");
                return Outcome::Quiet(Ended::Done);
            }
            if let Err(refused) = validity::gate(&self.validity, key, plugin, parent).await {
                self.metrics.plugin_call_error(&self.name, refused.error_kind);
                return Outcome::Record(refused.into_pass(as_validated), self.clock.now());
            }
        }
        let view = CacheView { caches: &self.caches, related: &self.related_caches, max_related: self.config.max_related };
        let input = match view.inputs(plugin, parent, &reference.uid, self.clock.now()) {
            Ok(input) => input,
            Err(verdict) => {
                tracing::warn!(reason = %verdict.reason, message = %verdict.message, "related objects not passed");
                self.metrics.plugin_call_error(&self.name, "related_refused");
                return Outcome::Record(Pass::failed(verdict), self.clock.now());
            }
        };
        // Related objects are inputs too: a refusal for good ends when one changes.
        let read = [&input.children[..], &input.related[..]].concat();
        let inputs = permanent::Inputs::of(&parent.fingerprint, &read, &plugin.info().digest);
        if self.permanent.still_refused(key, &inputs) {
            // Reported once already; only a change of the inputs can help.
            tracing::debug!("the plugin refused these inputs for good; waiting for a change");
            return Outcome::Quiet(Ended::Done);
        }
        // Each call's outcome by plugin version feeds automatic rollback.
        let digest = &plugin.info().digest;
        let actions = match self.config.tap.reconcile(plugin, &input).await {
            Ok(actions) => actions,
            Err(e) => {
                self.metrics.plugin_outcome(&self.name, digest, Some(e.kind()));
                self.metrics.plugin_call_error(&self.name, e.kind());
                return Outcome::Record(call_failed(&e, inputs), input.now);
            }
        };
        self.permanent.forget(key);
        let lookup = CacheLookup(&self.caches);
        let mut plan = match check(plugin, reference, &lookup, actions) {
            Ok(plan) => plan,
            Err(refused) => {
                self.metrics.plugin_call_error(&self.name, "action_refused");
                self.metrics.plugin_outcome(&self.name, digest, Some("action_refused"));
                return Outcome::Record(refused, input.now);
            }
        };
        // A parent on its way out keeps its children until the garbage
        // collector (or an orphaning delete) decides.
        if event == Event::Apply {
            actions::prune(reference, &mut plan, view.applied_earlier(plugin, &reference.uid));
        }
        self.metrics.plugin_outcome(&self.name, digest, None);
        let finalized = plan.finalized;
        let pass = self.execute(key, reference, &lookup, plan, &plugin.manifest().name).await;
        if event == Event::Cleanup && finalized && pass.verdict.as_ref().is_some_and(|v| v.ok) {
            return Outcome::CleanedUp;
        }
        Outcome::Record(pass, input.now)
    }

    /// The checked writes, made in order (the first failure stops them);
    /// the next pass waits for the caches to show them.
    async fn execute(&self, key: &ObjectKey, reference: &ObjectReference, lookup: &CacheLookup<'_>, plan: Plan, plugin_name: &str) -> Pass {
        let child_label = self.config.sharding.as_ref().map(crate::shard::Sharding::child_label);
        let executor = Executor {
            client: &self.client,
            resources: &self.resources,
            recorder: &self.recorder,
            regarding: reference,
            lookup,
            parent_uid: &reference.uid,
            plugin: plugin_name,
            child_label: child_label.as_ref().map(|(k, v)| (k.as_str(), v.as_str())),
            low_priority_echoes: (self.queue.processing_priority(key) == Some(Priority::Low)).then_some(&*self.echoes),
        };
        let requeue = plan.requeue;
        let mut executed = executor.execute(plan.writes).await;
        self.expectations.add(key, std::mem::take(&mut executed.expectations));
        executed_pass(executed, requeue)
    }

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

    /// The parent is gone from the cache: drop what was remembered for it.
    fn forget(&self, key: &ObjectKey) {
        self.queue.forget(key);
        self.expectations.forget(key);
        self.validity.forget(key);
        self.permanent.forget(key);
    }
}

/// The parent as the policy, the executor and the Event recorder name it.
fn parent_reference(gvk: &operator_plugin_sdk::GroupVersionKind, key: &ObjectKey, cached: &CachedObject) -> ObjectReference {
    ObjectReference {
        api_version: gvk.api_version(),
        kind: gvk.kind.clone(),
        namespace: key.namespace.clone(),
        name: key.name.clone(),
        uid: cached.uid().unwrap_or_default().to_string(),
    }
}

/// A failed call: retried with backoff, or (not retryable) reported once
/// and then left until the inputs change.
fn call_failed(e: &CallError, inputs: permanent::Inputs) -> Pass {
    tracing::warn!(error = %e, retryable = e.retryable(), "plugin call failed");
    let verdict = status::Verdict::failure(e.reason(), e.to_string());
    if e.retryable() {
        Pass::failed(verdict)
    } else {
        Pass { verdict: Some(verdict), plugin_status: None, ended: Ended::FailedForGood, refused_for_good: Some(inputs) }
    }
}

/// The policy check of the plugin's answer ([`actions::check`]): the plan,
/// or the pass that ends on the refusal.
#[allow(
    clippy::result_large_err,
    reason = "the Err side is the pass ending early with its verdict, as common as Ok and returned once per reconcile, not an error to box"
)]
fn check(plugin: &LoadedPlugin, reference: &ObjectReference, lookup: &CacheLookup<'_>, actions: Vec<Action>) -> Result<Plan, Pass> {
    actions::check(reference, &plugin.manifest().children, lookup, actions).map_err(|refusal| {
        tracing::warn!(%refusal, "action refused");
        Pass::failed(status::Verdict::failure("ActionRefused", refusal.to_string()))
    })
}

/// What the writes concluded: success (and when to come back), a conflict
/// (at once, nothing recorded), or a failed write.
fn executed_pass(executed: Executed, requeue: Option<crate::actions::policy::Requeue>) -> Pass {
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
        None => (Some(status::Verdict::success()), requeue.map_or(Ended::Done, Ended::RequeueAfter)),
    };
    Pass { verdict, plugin_status: executed.status, ended, refused_for_good: None }
}

/// What sharding says about a reconcile that is about to start.
enum Sharded {
    Reconcile,
    Ended(Ended),
}
