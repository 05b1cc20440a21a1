//! What one reconcile decided: the changes to make, and apart from them
//! when to look again and whether cleanup is complete. The contract carries
//! all three as one action list; [`Outcome::into_actions`] writes it.

use std::time::Duration;

use serde::Serialize;
use serde_json::Value;

use crate::contract::{Action, ObjectRef, Propagation, ReconcileError};

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
            Action::RequeueAfterMs(ms) => self.requeue_after = Some(Duration::from_millis(ms)),
            Action::Finalized {} => self.finalized = true,
            other => self.actions.push(other),
        }
        self
    }

    /// Reconcile again after `after` (rounded up to whole milliseconds).
    #[must_use]
    pub fn requeue_after(mut self, after: Duration) -> Self {
        self.requeue_after = Some(after);
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

    /// Whether [`finalized`](Self::finalized) was called.
    pub fn is_finalized(&self) -> bool {
        self.finalized
    }

    /// The contract's action list: changes first, then requeue, then `finalized`.
    pub fn into_actions(self) -> Vec<Action> {
        let mut actions = self.actions;
        actions.extend(self.requeue_after.map(Action::requeue_after));
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
