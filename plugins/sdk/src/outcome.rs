//! What one reconcile decided: the changes to make, and apart from them
//! when to look again and whether cleanup is complete. The contract carries
//! all three as one action list; [`Outcome::into_actions`] writes it.

use std::time::Duration;

use serde::Serialize;
use serde_json::Value;

use crate::contract::{Action, ObjectRef, Propagation, ReconcileError};

/// How soon a requeued parent is reconciled once its time has come, against
/// the other parents ready then (contract 0.4, `prioritized.priority`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum RequeuePriority {
    /// As a fresh change: the default, for work the plugin scheduled (a
    /// CronJob's next run).
    #[default]
    Normal,
    /// Behind fresh changes of other parents, with the host's start-up and
    /// resync passes, never starved: for periodic re-checks that need no
    /// promptness. See [`Outcome::at_low_priority`].
    Low,
}

/// The result of [`Controller::reconcile`](crate::Controller::reconcile).
///
/// ```
/// # use operator_plugin_sdk::{Outcome, ReconcileError};
/// # use operator_plugin_sdk::k8s_openapi::api::core::v1::ConfigMap;
/// # fn f() -> Result<Outcome, ReconcileError> {
/// let mut out = Outcome::new();
/// out.create(&ConfigMap::default())?;
/// out.event_normal("Created", format!("created ConfigMap {}", "x"));
/// Ok(out.requeue_after(std::time::Duration::from_secs(60)))
/// # }
/// ```
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Outcome {
    actions: Vec<Action>,
    requeue_after: Option<Duration>,
    requeue_priority: RequeuePriority,
    finalized: bool,
}

/// Serializes a typed object for an action; only maps with non-string keys
/// fail, which no Kubernetes object has.
fn to_json(what: &str, value: &impl Serialize) -> Result<Value, ReconcileError> {
    serde_json::to_value(value).map_err(|e| ReconcileError::permanent("SerializationFailed", format!("cannot serialize {what}: {e}")))
}

impl Outcome {
    /// Nothing to do.
    pub fn new() -> Self {
        Self::default()
    }

    /// Creates a child (any k8s-openapi type, your own `CustomResource`, or
    /// JSON). The host sets its namespace and controller ownerReference.
    pub fn create(&mut self, child: &impl Serialize) -> Result<&mut Self, ReconcileError> {
        self.actions.push(Action::Create(to_json("child to create", child)?));
        Ok(self)
    }

    /// Applies a child server-side (contract 0.3): `child` is the object as
    /// this plugin wants it, with `metadata.name` and only the fields the
    /// plugin cares about (a typed k8s-openapi object serializes only the
    /// fields that are set). The host applies it with the field manager
    /// `operator-host/<plugin>`, forcing conflicts, and sets the namespace,
    /// the controller ownerReference and the label
    /// `operator-host.dev/applied-by`. Applying the same child again writes
    /// nothing, whatever the API server defaulted (Service `protocol`, volume
    /// `defaultMode`, ...), so no comparison with the live child is needed.
    ///
    /// The children one reconcile applies are the whole desired set: a child
    /// this plugin applied to the parent before and does not apply now is
    /// deleted by the host.
    ///
    /// ```
    /// # use operator_plugin_sdk::{Outcome, ReconcileError};
    /// # use operator_plugin_sdk::k8s_openapi::api::core::v1::ConfigMap;
    /// # use operator_plugin_sdk::k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
    /// # fn f() -> Result<Outcome, ReconcileError> {
    /// let mut out = Outcome::new();
    /// out.apply(&ConfigMap {
    ///     metadata: ObjectMeta { name: Some("site-content".into()), ..Default::default() },
    ///     data: Some([("index.html".to_string(), "<h1>hi</h1>".to_string())].into()),
    ///     ..Default::default()
    /// })?;
    /// # Ok(out)
    /// # }
    /// ```
    pub fn apply(&mut self, child: &impl Serialize) -> Result<&mut Self, ReconcileError> {
        self.actions.push(Action::Apply(to_json("child to apply", child)?));
        Ok(self)
    }

    /// Replaces a child (PUT); carry its `resourceVersion`.
    pub fn replace(&mut self, child: &impl Serialize) -> Result<&mut Self, ReconcileError> {
        self.actions.push(Action::Replace(to_json("child to replace", child)?));
        Ok(self)
    }

    /// Merge-patches a child (RFC 7386): `patch` holds the fields to change.
    pub fn patch(&mut self, target: ObjectRef, patch: &impl Serialize) -> Result<&mut Self, ReconcileError> {
        let patch = to_json("patch", patch)?;
        self.actions.push(Action::Patch { target, patch });
        Ok(self)
    }

    /// Deletes a child with background propagation, as `kubectl delete` does.
    pub fn delete(&mut self, target: ObjectRef) -> &mut Self {
        self.delete_with(target, Propagation::Background)
    }

    /// Deletes a child with the given propagation policy (`delete` uses `Background`).
    pub fn delete_with(&mut self, target: ObjectRef, propagation: Propagation) -> &mut Self {
        self.actions.push(Action::Delete { target, propagation });
        self
    }

    /// Sets the parent's status (the host writes it only when it changed).
    /// Keep `conditions` in the status schema: the host adds its own
    /// `Reconciled` condition there, which a plugin neither writes nor copies.
    pub fn status(&mut self, status: &impl Serialize) -> Result<&mut Self, ReconcileError> {
        self.actions.push(Action::SetStatus(to_json("status", status)?));
        Ok(self)
    }

    /// Records a Normal Event on the parent.
    pub fn event_normal(&mut self, reason: impl Into<String>, message: impl Into<String>) -> &mut Self {
        self.actions.push(Action::normal(reason, message));
        self
    }

    /// Records a Warning Event on the parent.
    pub fn event_warning(&mut self, reason: impl Into<String>, message: impl Into<String>) -> &mut Self {
        self.actions.push(Action::warning(reason, message));
        self
    }

    /// Adds an action as the contract states it.
    pub fn push(&mut self, action: Action) -> &mut Self {
        match action {
            Action::RequeueAfterMs(ms) => {
                self.requeue_after = Some(Duration::from_millis(ms));
                self.requeue_priority = RequeuePriority::Normal;
            }
            Action::RequeueLowAfterMs(ms) => {
                self.requeue_after = Some(Duration::from_millis(ms));
                self.requeue_priority = RequeuePriority::Low;
            }
            Action::Finalized {} => self.finalized = true,
            other => self.actions.push(other),
        }
        self
    }

    /// Reconcile again after `after` (rounded up to whole milliseconds), at
    /// normal priority unless [`at_low_priority`](Self::at_low_priority)
    /// follows.
    #[must_use]
    pub fn requeue_after(mut self, after: Duration) -> Self {
        self.requeue_after = Some(after);
        self
    }

    /// The requeue, once due, waits behind fresh changes (contract 0.4):
    /// the host's work queue hands the parent out after parents whose
    /// objects just changed, with its start-up and resync passes, as
    /// controller-runtime's `reconcile.Result{Priority: handler.LowPriority}`
    /// does. It is never starved (the queue hands out a low-priority key at
    /// least once in every 9), and a change of the parent or its children
    /// while the timer waits still reconciles it at once, at normal priority.
    /// Meant for periodic re-checks that need no promptness: drift
    /// detection, polling something outside the cluster. Without a requeue
    /// it does nothing.
    ///
    /// ```
    /// # use operator_plugin_sdk::{Action, Outcome};
    /// # use std::time::Duration;
    /// let out = Outcome::new().requeue_after(Duration::from_secs(300)).at_low_priority();
    /// assert_eq!(out.into_actions(), vec![Action::RequeueLowAfterMs(300_000)]);
    /// ```
    #[must_use]
    pub fn at_low_priority(mut self) -> Self {
        self.requeue_priority = RequeuePriority::Low;
        self
    }

    /// The plugin's cleanup of a parent being deleted is complete; the host
    /// then removes the manifest's finalizer.
    #[must_use]
    pub fn finalized(mut self) -> Self {
        self.finalized = true;
        self
    }

    /// The changes decided so far.
    pub fn actions(&self) -> &[Action] {
        &self.actions
    }

    /// Whether there are no changes (requeue and "finalized" are not changes).
    pub fn is_empty(&self) -> bool {
        self.actions.is_empty() && self.requeue_after.is_none() && !self.finalized
    }

    /// The requeue delay, if one was asked for.
    pub fn requeue(&self) -> Option<Duration> {
        self.requeue_after
    }

    /// The priority of the requeue (normal unless
    /// [`at_low_priority`](Self::at_low_priority) was called).
    pub fn requeue_priority(&self) -> RequeuePriority {
        self.requeue_priority
    }

    /// Whether [`finalized`](Self::finalized) was called.
    pub fn is_finalized(&self) -> bool {
        self.finalized
    }

    /// The contract's action list: changes first, then requeue, then `finalized`.
    pub fn into_actions(self) -> Vec<Action> {
        let mut actions = self.actions;
        actions.extend(self.requeue_after.map(match self.requeue_priority {
            RequeuePriority::Normal => Action::requeue_after,
            RequeuePriority::Low => Action::requeue_low_after,
        }));
        if self.finalized {
            actions.push(Action::Finalized {});
        }
        actions
    }
}

impl From<Vec<Action>> for Outcome {
    fn from(actions: Vec<Action>) -> Self {
        let mut out = Outcome::new();
        actions.into_iter().for_each(|a| {
            out.push(a);
        });
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn requeue_and_finalized_follow_the_changes_in_the_action_list() {
        let mut out = Outcome::new();
        out.create(&json!({"kind": "ConfigMap"})).unwrap();
        let actions = out.requeue_after(Duration::from_micros(1500)).finalized().into_actions();
        assert_eq!(actions, vec![Action::Create(json!({"kind": "ConfigMap"})), Action::RequeueAfterMs(2), Action::Finalized {}]);
    }

    #[test]
    fn a_low_priority_requeue_is_its_own_action_and_reads_back() {
        let out = Outcome::new().requeue_after(Duration::from_millis(1500)).at_low_priority();
        assert_eq!(out.requeue_priority(), RequeuePriority::Low);
        let actions = out.into_actions();
        assert_eq!(actions, vec![Action::RequeueLowAfterMs(1500)]);
        let back = Outcome::from(actions);
        assert_eq!((back.requeue(), back.requeue_priority()), (Some(Duration::from_millis(1500)), RequeuePriority::Low));
        assert_eq!(Outcome::new().at_low_priority().into_actions(), vec![], "no requeue, nothing to prioritize");
        assert_eq!(Outcome::new().requeue_after(Duration::from_secs(1)).into_actions(), vec![Action::RequeueAfterMs(1000)]);
    }

    #[test]
    fn an_applied_child_is_an_apply_action_with_its_type_meta() {
        let mut out = Outcome::new();
        out.apply(&k8s_openapi::api::core::v1::Service::default()).unwrap();
        assert!(matches!(&out.actions()[0], Action::Apply(v) if v["apiVersion"] == "v1" && v["kind"] == "Service"));
    }

    #[test]
    fn typed_children_serialize_with_their_type_meta() {
        let mut out = Outcome::new();
        out.create(&k8s_openapi::api::core::v1::ConfigMap::default()).unwrap();
        assert!(matches!(&out.actions()[0], Action::Create(v) if v["apiVersion"] == "v1" && v["kind"] == "ConfigMap"));
    }
}
