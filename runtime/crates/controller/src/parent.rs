//! The host's own writes to a parent (its finalizers, its status): the
//! parent's endpoint, and after each write the expectation that the next
//! pass waits for. The plugin never writes its parent; the driver's
//! finalizer step and its verdict step do, through [`ParentWrites`].

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use chrono::{DateTime, Utc};
use kube::api::{Patch, PatchParams};
use operator_plugin_sdk::GroupVersionKind;
use serde_json::{Value, json};

use super::cache::{CachedObject, KindCache, ObjectKey};
use super::expectations::Expectations;
use crate::actions::{Expectation, FIELD_MANAGER, status};
use crate::api_answer::ResourceEndpoint;
use crate::api_error::ApiErrorClass;
use crate::clock::timestamp;

/// Writes to the parents of one controller.
pub struct ParentWrites {
    client: kube::Client,
    gvk: GroupVersionKind,
    /// The parents' cache (their API resource and scope).
    cache: Arc<KindCache>,
    expectations: Arc<Expectations>,
    /// Set once the API server was seen dropping `status.conditions`.
    conditions_pruned: AtomicBool,
}

impl ParentWrites {
    pub fn new(client: kube::Client, gvk: GroupVersionKind, cache: Arc<KindCache>, expectations: Arc<Expectations>) -> Self {
        Self { client, gvk, cache, expectations, conditions_pruned: AtomicBool::new(false) }
    }

    /// The parent's endpoint, for writes whose answer is read for its
    /// resourceVersion and conditions only ([`crate::api_answer`]).
    fn endpoint<'a>(&'a self, key: &'a ObjectKey) -> ResourceEndpoint<'a> {
        let namespace = if self.cache.namespaced() { key.namespace.as_str() } else { "" };
        ResourceEndpoint { client: &self.client, resource: self.cache.resource(), namespace }
    }

    /// Writes `metadata.finalizers`, guarded by the resourceVersion read (a
    /// newer parent answers 409).
    pub async fn finalizers(&self, key: &ObjectKey, parent: &CachedObject, list: Vec<String>) -> kube::Result<()> {
        let patch = json!({"metadata": {"finalizers": list, "resourceVersion": parent.resource_version()}});
        let params = PatchParams { field_manager: Some(FIELD_MANAGER.into()), ..PatchParams::default() };
        let new = self.endpoint(key).patch(&key.name, None, &params, &Patch::Merge(&patch)).await?;
        self.expect_update(key, parent, new.metadata.resource_version.as_deref());
        Ok(())
    }

    /// Merges the plugin's status and the verdict into the parent's status;
    /// writes only what differs.
    pub async fn status(
        &self,
        key: &ObjectKey,
        parent: &CachedObject,
        plugin_status: Option<Value>,
        verdict: &status::Verdict,
        now: DateTime<Utc>,
    ) -> kube::Result<()> {
        let current = parent.status();
        let base = plugin_status.unwrap_or_else(|| current.clone());
        let pruned = self.conditions_pruned.load(Ordering::Relaxed);
        let desired = if pruned { base } else { status::with_verdict(base, &current, verdict, parent.generation(), &timestamp(now)) };
        let Some(diff) = status::merge_diff(&current, &desired) else {
            return Ok(());
        };
        let params = PatchParams { field_manager: Some(FIELD_MANAGER.into()), ..PatchParams::default() };
        let body = json!({"status": diff});
        let endpoint = self.endpoint(key);
        let new = match endpoint.patch(&key.name, Some("status"), &params, &Patch::Merge(&body)).await {
            // A CRD without the status subresource: status is part of the object.
            Err(e) if ApiErrorClass::of(&e) == ApiErrorClass::NotFound && self.cache.get(key).is_some() => {
                endpoint.patch(&key.name, None, &params, &Patch::Merge(&body)).await?
            }
            other => other?,
        };
        if !pruned && !new.has_condition(status::RECONCILED) {
            // The CRD's status schema has no `conditions` (and does not
            // preserve unknown fields): the API server drops the condition.
            // Stop computing it, or every reconcile would write status again.
            self.conditions_pruned.store(true, Ordering::Relaxed);
            tracing::warn!(
                kind = %self.gvk.kind,
                "the CRD's status schema prunes status.conditions; the host's Reconciled condition cannot be recorded (Events and metrics still report failures)"
            );
        }
        self.expect_update(key, parent, new.metadata.resource_version.as_deref());
        Ok(())
    }

    /// After a write of the parent (its answer's resourceVersion `new`): the
    /// next pass waits until the cache shows a resourceVersion newer than the
    /// one this pass read.
    fn expect_update(&self, key: &ObjectKey, old: &CachedObject, new: Option<&str>) {
        let from = old.resource_version().unwrap_or_default().to_string();
        if new != Some(from.as_str()) {
            let uid = old.uid().unwrap_or_default().to_string();
            self.expectations.add(key, vec![Expectation::Updated { gvk: self.gvk.clone(), uid, from }]);
        }
    }
}
