//! A replica hands a drained parent over (rule 4 of [`operator_sharding`]):
//! from its reconcile worker, so no reconcile of the key runs meanwhile and
//! the last pass's writes are in its caches (the worker waited for them).
//!
//! Children first: each child this replica caches is relabelled to the
//! drain's target, conditional on the version cached; then the parent gets
//! the target's shard label, loses the drain label, and carries per child
//! kind the revision of the last relabel (the new owner's child caches must
//! reach it before it reconciles; see [`Gate`]). A conflict anywhere stops
//! the handover; the worker retries it on a fresher cache. The children a
//! stopped handover relabelled have left this replica's cache by the retry,
//! so the revisions it wrote are kept (in the [`Gate`]) and the retry's
//! annotation still names them.

use std::collections::{BTreeMap, HashMap};
use std::sync::Mutex;
use std::time::Duration;

use kube::api::{ApiResource, Patch, PatchParams};
use operator_plugin_sdk::GroupVersionKind;
use serde_json::json;

use super::{Sharding, api};
use crate::cache::{CachedObject, KindCache, ObjectKey};

/// The parent and the caches a handover reads.
pub struct Handover<'a> {
    pub client: &'a kube::Client,
    pub sharding: &'a Sharding,
    pub parent_resource: &'a ApiResource,
    pub parent: &'a CachedObject,
    /// Each child kind's resource and cache.
    pub children: Vec<(&'a GroupVersionKind, &'a ApiResource, &'a KindCache)>,
    /// Where the revisions of a handover's relabels outlive a failed attempt.
    pub gate: &'a Gate,
}

/// `group/Kind`, the key of a child kind in the handover annotation.
fn kind_key(gvk: &GroupVersionKind) -> String {
    format!("{}/{}", gvk.group, gvk.kind)
}

impl Handover<'_> {
    /// Hands the parent over; returns the target shard ("" when none).
    pub async fn run(&self) -> Result<String, kube::Error> {
        let placement = self.sharding.placement_of(self.parent);
        let target = operator_sharding::replica::handover(&placement);
        let shard_label = self.sharding.shard_label();
        let to = target.shard.clone();
        let key = self.parent.key();
        let mut revisions = self.gate.written(&key);
        let parent_uid = self.parent.uid().unwrap_or_default();
        for (gvk, resource, cache) in &self.children {
            for child in cache.controlled_by(parent_uid) {
                let patch = json!({"metadata": {
                    "resourceVersion": child.resource_version(),
                    "labels": {shard_label.clone(): to.clone()},
                }});
                let written =
                    api(self.client, resource, Some(child.namespace())).patch(child.name(), &PatchParams::default(), &Patch::Merge(&patch)).await?;
                let revision = written.metadata.resource_version.as_deref().and_then(|rv| rv.parse::<u64>().ok()).unwrap_or(0);
                let at = revisions.entry(kind_key(gvk)).or_default();
                *at = (*at).max(revision);
                self.gate.wrote(&key, kind_key(gvk), revision);
            }
        }
        let annotation = revisions.iter().map(|(kind, rv)| format!("{kind}={rv}")).collect::<Vec<_>>().join(",");
        let patch = json!({"metadata": {
            "resourceVersion": self.parent.resource_version(),
            "labels": {shard_label: to, self.sharding.drain_label(): null},
            "annotations": {self.sharding.handover_annotation(): if annotation.is_empty() { None } else { Some(annotation) }},
        }});
        api(self.client, self.parent_resource, Some(self.parent.namespace()))
            .patch(self.parent.name(), &PatchParams::default(), &Patch::Merge(&patch))
            .await?;
        self.gate.handed_over(&key);
        Ok(to.unwrap_or_default())
    }
}

/// The child revisions of handovers, per parent: for parents this replica
/// gained, what its caches must reach before their first reconcile here; for
/// parents it is handing over, what its relabels wrote so far.
#[derive(Default)]
pub struct Gate {
    waiting: Mutex<HashMap<ObjectKey, Vec<(GroupVersionKind, u64)>>>,
    written: Mutex<HashMap<ObjectKey, BTreeMap<String, u64>>>,
}

impl Gate {
    /// Notes a parent that arrived in the (synced) cache with a handover
    /// annotation naming `annotation`'s revisions.
    pub fn gained(&self, key: ObjectKey, annotation: &str, child_kinds: &[GroupVersionKind]) {
        let wanted: Vec<(GroupVersionKind, u64)> = annotation
            .split(',')
            .filter_map(|entry| entry.split_once('='))
            .filter_map(|(kind, rv)| {
                let gvk = child_kinds.iter().find(|g| kind_key(g) == kind)?;
                Some((gvk.clone(), rv.parse().ok()?))
            })
            .collect();
        if !wanted.is_empty() {
            self.waiting.lock().unwrap().insert(key, wanted);
        }
    }

    /// Waits (at most `limit`) until every child cache named for `key` has
    /// seen its revision. Kubernetes calls resourceVersions opaque; they are
    /// etcd's revisions, which the API server's own watch cache compares, and
    /// a value that is not a number was never recorded.
    pub async fn wait(&self, key: &ObjectKey, caches: &HashMap<GroupVersionKind, std::sync::Arc<KindCache>>, limit: Duration) {
        let Some(wanted) = self.waiting.lock().unwrap().remove(key) else { return };
        let deadline = tokio::time::Instant::now() + limit;
        let mut receivers: Vec<_> = wanted.iter().filter_map(|(gvk, _)| caches.get(gvk)).map(|c| c.subscribe_changes()).collect();
        loop {
            let behind = wanted.iter().any(|(gvk, rv)| caches.get(gvk).is_some_and(|c| c.seen_revision() < *rv));
            if !behind {
                return;
            }
            if tokio::time::Instant::now() >= deadline {
                tracing::warn!(object = %key, "child caches did not reach the handover's revisions in time; reconciling anyway");
                return;
            }
            let changed = futures::future::select_all(receivers.iter_mut().map(|r| Box::pin(r.changed())));
            let _ = tokio::time::timeout_at(deadline, changed).await;
        }
    }

    /// Notes a child relabel of a handover of `key` (kind `group/Kind`).
    fn wrote(&self, key: &ObjectKey, kind: String, revision: u64) {
        let mut written = self.written.lock().unwrap();
        let at = written.entry(key.clone()).or_default().entry(kind).or_default();
        *at = (*at).max(revision);
    }

    /// The relabels earlier attempts of a handover of `key` wrote.
    fn written(&self, key: &ObjectKey) -> BTreeMap<String, u64> {
        self.written.lock().unwrap().get(key).cloned().unwrap_or_default()
    }

    fn handed_over(&self, key: &ObjectKey) {
        self.written.lock().unwrap().remove(key);
    }

    /// Forgets a parent that left this replica.
    pub fn forget(&self, key: &ObjectKey) {
        self.waiting.lock().unwrap().remove(key);
        self.written.lock().unwrap().remove(key);
    }
}
