//! Expectations: the writes of a parent's last pass that the caches must
//! show before its next pass reads them (controller-runtime's
//! expectations). Without the wait a pass would read a cache that does not
//! yet hold the child the previous pass created, and create it again.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use operator_plugin_sdk::GroupVersionKind;
use tokio::time::Instant;

use super::cache::{KindCache, ObjectKey};
use crate::actions::Expectation;

/// The writes each parent's last pass made, until its next pass starts.
#[derive(Debug, Default)]
pub struct Expectations {
    pending: Mutex<HashMap<ObjectKey, Vec<Expectation>>>,
}

impl Expectations {
    /// Adds writes of the pass of `key` now running.
    pub fn add(&self, key: &ObjectKey, new: Vec<Expectation>) {
        if !new.is_empty() {
            self.pending.lock().unwrap().entry(key.clone()).or_default().extend(new);
        }
    }

    /// Drops what was expected for a parent that is gone.
    pub fn forget(&self, key: &ObjectKey) {
        self.pending.lock().unwrap().remove(key);
    }

    /// Holds the pass of `key` until `caches` show the writes of its
    /// previous pass, or `timeout` passes.
    pub async fn wait(&self, key: &ObjectKey, caches: &HashMap<GroupVersionKind, Arc<KindCache>>, timeout: Duration) {
        let Some(pending) = self.pending.lock().unwrap().remove(key) else {
            return;
        };
        let deadline = Instant::now() + timeout;
        let mut receivers: Vec<_> = caches.values().map(|c| c.subscribe_changes()).collect();
        loop {
            if pending.iter().all(|e| satisfied(caches, e)) {
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
}

/// Whether the caches show the write `e` (a kind without a cache here: yes).
fn satisfied(caches: &HashMap<GroupVersionKind, Arc<KindCache>>, e: &Expectation) -> bool {
    let (gvk, uid) = match e {
        Expectation::Created { gvk, uid } | Expectation::Updated { gvk, uid, .. } | Expectation::Deleted { gvk, uid } => (gvk, uid),
    };
    let Some(cache) = caches.get(gvk) else {
        return true;
    };
    let seen = cache.get_by_uid(uid);
    match e {
        Expectation::Created { .. } => seen.is_some() || cache.has_seen_uid(uid),
        Expectation::Updated { from, .. } => seen.is_none_or(|o| o.resource_version() != Some(from.as_str())),
        Expectation::Deleted { .. } => seen.is_none_or(|o| o.deleting),
    }
}
