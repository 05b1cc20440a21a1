//! The sharder: on the elected leader, places every parent of every
//! plugin on a shard of the ring, as replicas come and go.
//!
//! Each pass (every retry period) reads the ring's shard Leases, takes over
//! those that expired (the shard has stopped by its own renew deadline), and
//! builds the ring from the live ones; then per plugin it lists its parents'
//! metadata and writes what [`operator_sharding::sharder::decide`] says:
//! an unassigned parent is assigned, a parent on a live shard the ring no
//! longer names is drained (its shard hands it over, see
//! [`super::acknowledge`]), and a parent on a stopped shard is moved at once,
//! its children first, from a consistent list (at least as new as the Lease
//! write that showed the shard stopped). Every write carries the
//! resourceVersion it was decided on, so a stale decision fails with 409 and
//! is taken again on the next pass; and since the pass's own list predates
//! its writes, a parent is read again (a metadata GET) before its children
//! move, and before a child is sent after it.
//!
//! Cost: one metadata list of each parent kind per pass, and of each child
//! kind when a parent moves off a stopped shard or every
//! [`CHILD_SWEEP_PASSES`] passes (to relabel children that do not follow
//! their parent, e.g. made before sharding was turned on). The reference
//! design assigns new objects from a mutating webhook instead and lists
//! nothing; here a new parent waits for the next pass (at most one retry
//! period) and the lists are served from the API server's watch cache.
//!
//! Memory: the sharder keeps nothing between passes but Lease observations
//! and drains. A list is read in pages of [`LIST_PAGE`] objects, and of each
//! object only what a decision and a conditional write need is kept
//! ([`Listed`]: no managedFields, annotations or other labels); every pass
//! hands the freed pages back to the OS (`malloc_trim`, a few milliseconds
//! per retry period), since glibc keeps a freed peak in every thread's arena
//! and a leader listing several thousand children's metadata grew by
//! hundreds of MiB that way.

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;
use std::time::Duration;

use futures::StreamExt;
use k8s_openapi::api::coordination::v1::Lease;
use kube::api::{Api, ApiResource, DeleteParams, DynamicObject, ListParams, Patch, PatchParams, PostParams, Preconditions};
use kube::core::PartialObjectMeta;
use operator_plugin_sdk::GroupVersionKind;
use operator_sharding::key;
use operator_sharding::labels::{Placement, RING_LABEL};
use operator_sharding::membership::{self, LeaseObservation, ShardState};
use operator_sharding::ring::Ring;
use operator_sharding::sharder::{Decision, decide, decide_child};
use serde_json::json;
use tokio::time::Instant;

use super::{Sharding, api};
use crate::Running;
use crate::metrics::Metrics;
use crate::metrics::shard::{DecisionLabels, StateLabels};

/// A child's kind, resource and what the sharder keeps of it.
type ChildMeta<'a> = (&'a GroupVersionKind, &'a ApiResource, Listed);

/// Objects per page of the sharder's lists: a page's response is parsed
/// whole, so this bounds the memory one request costs.
pub const LIST_PAGE: u32 = 500;

/// What the sharder keeps of a listed object: what it decides on and what
/// its conditional writes name.
#[derive(Clone, Debug)]
pub struct Listed {
    name: String,
    namespace: Option<String>,
    uid: String,
    resource_version: Option<String>,
    placement: Placement,
    /// The uid of the object's controller (its owner reference with
    /// `controller: true`), for a child.
    controller: Option<String>,
}

impl Listed {
    fn of(sharding: &Sharding, meta: PartialObjectMeta<DynamicObject>) -> Listed {
        let m = meta.metadata;
        let labels = m.labels.as_ref();
        Listed {
            placement: Placement::from_labels(&sharding.ring, |key| labels.and_then(|l| l.get(key).cloned())),
            controller: m.owner_references.iter().flatten().find(|r| r.controller == Some(true)).map(|r| r.uid.clone()),
            name: m.name.unwrap_or_default(),
            namespace: m.namespace,
            uid: m.uid.unwrap_or_default(),
            resource_version: m.resource_version,
        }
    }
}

/// Every this many passes the sharder also lists children, to relabel those
/// that do not follow their parent.
pub const CHILD_SWEEP_PASSES: u32 = 15;

/// How many parents the sharder assigns or moves at once. Each parent's
/// writes stay in order (children, then the parent); parents are
/// independent, and one at a time made a crashed shard's thousand parents
/// (and their several thousand children) wait minutes for their move.
pub const PARENTS_AT_ONCE: usize = 32;

/// A parent kind and its child kinds, as a plugin declares them.
#[derive(Clone, Debug)]
pub struct ShardedKind {
    pub parent: GroupVersionKind,
    pub parent_resource: ApiResource,
    pub children: Vec<(GroupVersionKind, ApiResource)>,
}

struct ObservedLease {
    resource_version: String,
    holder: Option<String>,
    lease_duration: Duration,
    at: Instant,
}

/// The sharder of one ring.
pub struct Sharder {
    client: kube::Client,
    sharding: Sharding,
    /// The leader's identity: holder of the Leases it takes over.
    identity: String,
    manager: Running,
    namespaces: Vec<String>,
    metrics: Arc<Metrics>,
    leases: HashMap<String, ObservedLease>,
    /// Drained parents (kind, namespace/name) → target and when drained.
    drains: HashMap<(String, String), (String, Instant)>,
    passes: u32,
}

fn revision(rv: Option<&str>) -> u64 {
    rv.and_then(|rv| rv.parse().ok()).unwrap_or(0)
}

impl Sharder {
    pub fn new(client: kube::Client, sharding: Sharding, identity: String, manager: Running, namespaces: Vec<String>, metrics: Arc<Metrics>) -> Self {
        Sharder { client, sharding, identity, manager, namespaces, metrics, leases: HashMap::new(), drains: HashMap::new(), passes: 0 }
    }

    /// Places parents while `leading` is true, until the task is dropped.
    pub async fn run(mut self, mut leading: tokio::sync::watch::Receiver<bool>) {
        loop {
            if leading.wait_for(|l| *l).await.is_err() {
                return;
            }
            // A new term observes every Lease afresh: none has expired yet.
            self.leases.clear();
            self.drains.clear();
            tracing::info!(ring = %self.sharding.ring, "sharder started");
            let mut tick = tokio::time::interval(self.sharding.retry_period);
            tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
            loop {
                tokio::select! {
                    changed = leading.changed() => {
                        if changed.is_err() || !*leading.borrow() {
                            break;
                        }
                    }
                    _ = tick.tick() => {
                        if let Err(e) = self.pass().await {
                            tracing::warn!(ring = %self.sharding.ring, error = %crate::error_chain(&e), "sharder pass failed; retrying");
                        }
                    }
                }
            }
            tracing::info!(ring = %self.sharding.ring, "sharder stopped: no longer leading");
        }
    }

    fn decided(&self, decision: &str) {
        self.metrics.shard.decisions.get_or_create(&DecisionLabels { decision: decision.into() }).inc();
    }

    /// One pass: membership, then every plugin's parents.
    pub async fn pass(&mut self) -> Result<(), kube::Error> {
        self.passes = self.passes.wrapping_add(1);
        let states = self.membership().await?;
        let ring = Ring::new(states.iter().filter(|(_, s)| s.is_available()).map(|(name, _)| name));
        for kind in kinds(&self.manager) {
            self.place(&kind, &ring, &states).await?;
        }
        // What the pass listed and wrote is freed; glibc would keep it.
        operator_sandbox::heap::release_free_pages();
        Ok(())
    }

    /// Reads the ring's Leases, takes over the expired ones and deletes the
    /// orphaned ones; returns each shard's state.
    async fn membership(&mut self) -> Result<BTreeMap<String, ShardState>, kube::Error> {
        let leases: Api<Lease> = Api::namespaced(self.client.clone(), &self.sharding.namespace);
        let list = leases.list(&ListParams::default().labels(&format!("{RING_LABEL}={}", self.sharding.ring))).await?;
        let mut states = BTreeMap::new();
        let mut present = Vec::new();
        for lease in list.items {
            let Some(name) = lease.metadata.name.clone() else { continue };
            present.push(name.clone());
            let spec = lease.spec.clone().unwrap_or_default();
            let rv = lease.metadata.resource_version.clone().unwrap_or_default();
            let holder = spec.holder_identity.clone().filter(|h| !h.is_empty());
            let duration = Duration::from_secs(spec.lease_duration_seconds.unwrap_or(15).max(1) as u64);
            let seen = self.leases.entry(name.clone()).or_insert_with(|| ObservedLease {
                resource_version: rv.clone(),
                holder: holder.clone(),
                lease_duration: duration,
                at: Instant::now(),
            });
            if seen.resource_version != rv {
                *seen = ObservedLease { resource_version: rv, holder, lease_duration: duration, at: Instant::now() };
            }
            let mut state = membership::state(&LeaseObservation {
                shard: name.clone(),
                holder: seen.holder.clone(),
                lease_duration: seen.lease_duration,
                unchanged_for: seen.at.elapsed(),
            });
            if state == ShardState::Expired {
                state = self.take_over(&leases, lease).await.unwrap_or(state);
            } else if state == ShardState::Orphaned {
                let params = DeleteParams {
                    preconditions: Some(Preconditions { resource_version: Some(self.leases[&name].resource_version.clone()), uid: None }),
                    ..DeleteParams::default()
                };
                if leases.delete(&name, &params).await.is_ok() {
                    tracing::info!(shard = %name, "deleted the Lease of a shard gone for a minute");
                }
            }
            states.insert(name, state);
        }
        self.leases.retain(|name, _| present.contains(name));
        for state in [ShardState::Ready, ShardState::Expired, ShardState::Dead, ShardState::Orphaned] {
            let n = states.values().filter(|s| **s == state).count();
            let label = StateLabels { state: format!("{state:?}").to_lowercase() };
            self.metrics.shard.members.get_or_create(&label).set(n as i64);
        }
        Ok(states)
    }

    /// Takes an expired shard Lease over (conditional on the version
    /// observed): from then on the shard counts as stopped, and a replica
    /// that comes back finds its Lease taken and exits.
    async fn take_over(&mut self, leases: &Api<Lease>, mut lease: Lease) -> Option<ShardState> {
        let name = lease.metadata.name.clone()?;
        let spec = lease.spec.get_or_insert_with(Default::default);
        spec.holder_identity = Some(format!("sharder:{}", self.identity));
        match leases.replace(&name, &PostParams::default(), &lease).await {
            Ok(written) => {
                tracing::warn!(shard = %name, "shard Lease expired; taken over, its parents move");
                self.decided("takeover");
                let holder = written.spec.and_then(|s| s.holder_identity);
                let seen = self.leases.get_mut(&name)?;
                *seen = ObservedLease {
                    resource_version: written.metadata.resource_version.unwrap_or_default(),
                    holder,
                    lease_duration: seen.lease_duration,
                    at: Instant::now(),
                };
                Some(ShardState::Dead)
            }
            Err(e) => {
                tracing::debug!(shard = %name, error = %crate::error_chain(&e), "shard Lease takeover lost a race; next pass");
                None
            }
        }
    }

    /// Places the parents of one kind.
    async fn place(&mut self, kind: &ShardedKind, ring: &Ring, states: &BTreeMap<String, ShardState>) -> Result<(), kube::Error> {
        let parents = self.list(&kind.parent_resource).await?;
        let state_of = |name: &str| states.get(name).copied();
        let mut assign = Vec::new();
        for parent in &parents {
            let (namespace, name) = (parent.namespace.as_deref().unwrap_or_default(), parent.name.as_str());
            let Ok(hash_key) = key::for_parent(&kind.parent.group, &kind.parent.kind, namespace, name) else { continue };
            let current = &parent.placement;
            let drain_key = (kind.parent.kind.clone(), format!("{namespace}/{name}"));
            if let Some((to, since)) = self.drains.get(&drain_key)
                && current.shard.as_deref() == Some(to.as_str())
                && !current.draining()
            {
                self.metrics.shard.drain_seconds.observe(since.elapsed().as_secs_f64());
                self.drains.remove(&drain_key);
            }
            match decide(current, ring.shard_for(&hash_key), state_of) {
                Decision::Assign(shard) => assign.push((parent, shard, current.shard.is_some())),
                Decision::Drain(to) => {
                    let patch = json!({"metadata": {
                        "resourceVersion": parent.resource_version,
                        "labels": {self.sharding.drain_label(): to},
                    }});
                    if self.patch(&kind.parent_resource, parent, &patch).await {
                        self.decided("drain");
                        self.drains.insert(drain_key, (to, Instant::now()));
                    }
                }
                _ => {}
            }
        }
        let moving = assign.iter().any(|(_, _, moved)| *moved);
        if !moving && !self.passes.is_multiple_of(CHILD_SWEEP_PASSES) {
            let this = &*self;
            // Collected first: a lazy iterator's closure in the future's
            // state trips the compiler's higher-ranked Send check at spawn.
            let writes: Vec<_> = assign
                .into_iter()
                .map(|(parent, shard, _)| async move { this.assign(kind, parent, &shard, BTreeMap::new(), "assign").await })
                .collect();
            futures::stream::iter(writes).buffer_unordered(PARENTS_AT_ONCE).collect::<()>().await;
            return Ok(());
        }
        // Children by their controller's uid, from a consistent list.
        let mut children: HashMap<String, Vec<ChildMeta<'_>>> = HashMap::new();
        for (gvk, resource) in &kind.children {
            for child in self.list(resource).await? {
                if let Some(uid) = child.controller.clone() {
                    children.entry(uid).or_default().push((gvk, resource, child));
                }
            }
        }
        let this = &*self;
        let children = &children;
        let moves: Vec<_> = assign
            .into_iter()
            .map(|(parent, shard, moved)| async move {
                let own = children.get(&parent.uid).map(Vec::as_slice).unwrap_or_default();
                this.move_parent(kind, parent, &shard, moved, own).await;
            })
            .collect();
        futures::stream::iter(moves).buffer_unordered(PARENTS_AT_ONCE).collect::<()>().await;
        // Children that do not follow their (settled) parent. The listed
        // parent only picks the candidates: the decision is taken again on a
        // parent read after the child list (rule 6 of the protocol), since
        // the list may predate this pass's drains and their handovers.
        for parent in &parents {
            for (_, resource, child) in children.get(&parent.uid).into_iter().flatten() {
                if !matches!(decide_child(&child.placement, Some(&parent.placement)), Decision::Assign(_)) {
                    continue;
                }
                let Some(fresh) = self.read(&kind.parent_resource, parent).await else { continue };
                if let Decision::Assign(shard) = decide_child(&child.placement, Some(&fresh.placement))
                    && self.relabel(resource, child, &shard).await.is_some()
                {
                    self.decided("child");
                }
            }
        }
        Ok(())
    }

    /// Moves one parent to `shard`: its children first, then the parent.
    async fn move_parent(&self, kind: &ShardedKind, parent: &Listed, shard: &str, moved: bool, own: &[ChildMeta<'_>]) {
        // The pass's parent list may predate its own writes: children move
        // only for a parent still at the version decided on.
        if !own.is_empty() && !self.unchanged(&kind.parent_resource, parent).await {
            return;
        }
        let mut revisions = BTreeMap::new();
        for (gvk, resource, child) in own {
            // A child already on the target (a move whose parent write was
            // refused) counts with its version: the new owner's cache must
            // hold it too.
            let written = if child.placement.shard.as_deref() == Some(shard) {
                Some(revision(child.resource_version.as_deref()))
            } else {
                self.relabel(resource, child, shard).await
            };
            // A child left behind stops its parent's move: next pass.
            let Some(rv) = written else { return };
            let at: &mut u64 = revisions.entry(format!("{}/{}", gvk.group, gvk.kind)).or_default();
            *at = (*at).max(rv);
        }
        self.assign(kind, parent, shard, revisions, if moved { "move" } else { "assign" }).await;
    }

    /// The parent's metadata now (a GET: a current read, newer than any list
    /// this pass made); `None` if it is gone or cannot be read.
    async fn read(&self, resource: &ApiResource, parent: &Listed) -> Option<Listed> {
        let name = parent.name.as_str();
        match api(&self.client, resource, parent.namespace.as_deref()).get_metadata_opt(name).await {
            Ok(found) => found.map(|meta| Listed::of(&self.sharding, meta)),
            Err(e) => {
                tracing::debug!(object = %name, error = %crate::error_chain(&e), "parent read failed; next pass");
                None
            }
        }
    }

    /// Whether the parent is still at the version it was listed at.
    async fn unchanged(&self, resource: &ApiResource, parent: &Listed) -> bool {
        let fresh = self.read(resource, parent).await;
        fresh.is_some_and(|fresh| fresh.resource_version.is_some() && fresh.resource_version == parent.resource_version)
    }

    /// Every object of a kind in the watched namespaces, as the sharder
    /// keeps it, read in pages (the pages of one list are one consistent
    /// snapshot: the API server serves a continue token at the first page's
    /// revision).
    async fn list(&self, resource: &ApiResource) -> Result<Vec<Listed>, kube::Error> {
        let scopes: Vec<Option<&str>> =
            if self.namespaces.is_empty() { vec![None] } else { self.namespaces.iter().map(|n| Some(n.as_str())).collect() };
        let mut all = Vec::new();
        for scope in scopes {
            let api = api(&self.client, resource, scope);
            let mut params = ListParams::default().limit(LIST_PAGE);
            loop {
                let page = api.list_metadata(&params).await?;
                all.extend(page.items.into_iter().map(|meta| Listed::of(&self.sharding, meta)));
                match page.metadata.continue_.filter(|c| !c.is_empty()) {
                    Some(token) => params = params.continue_token(&token),
                    None => break,
                }
            }
        }
        Ok(all)
    }

    /// Sets an object's shard label (conditional on its version); returns the
    /// revision written.
    async fn relabel(&self, resource: &ApiResource, object: &Listed, shard: &str) -> Option<u64> {
        let patch = json!({"metadata": {
            "resourceVersion": object.resource_version,
            "labels": {self.sharding.shard_label(): shard},
        }});
        let name = object.name.as_str();
        // The metadata API answers with the object's metadata only, not the
        // whole object the patch wrote.
        match api(&self.client, resource, object.namespace.as_deref()).patch_metadata(name, &PatchParams::default(), &Patch::Merge(&patch)).await {
            Ok(written) => Some(revision(written.metadata.resource_version.as_deref())),
            Err(e) => {
                tracing::debug!(object = %name, error = %crate::error_chain(&e), "relabel failed; next pass");
                None
            }
        }
    }

    async fn assign(&self, kind: &ShardedKind, parent: &Listed, shard: &str, revisions: BTreeMap<String, u64>, decision: &str) {
        let annotation = revisions.iter().map(|(k, rv)| format!("{k}={rv}")).collect::<Vec<_>>().join(",");
        let patch = json!({"metadata": {
            "resourceVersion": parent.resource_version,
            "labels": {self.sharding.shard_label(): shard, self.sharding.drain_label(): null},
            "annotations": {self.sharding.handover_annotation(): if annotation.is_empty() { None } else { Some(annotation) }},
        }});
        if self.patch(&kind.parent_resource, parent, &patch).await {
            self.decided(decision);
        }
    }

    async fn patch(&self, resource: &ApiResource, object: &Listed, patch: &serde_json::Value) -> bool {
        match api(&self.client, resource, object.namespace.as_deref())
            .patch_metadata(&object.name, &PatchParams::default(), &Patch::Merge(patch))
            .await
        {
            Ok(_) => true,
            Err(e) => {
                tracing::debug!(object = %object.name, error = %crate::error_chain(&e), "sharder write failed; next pass");
                false
            }
        }
    }
}

/// The parent and child kinds of every running plugin.
fn kinds(manager: &Running) -> Vec<ShardedKind> {
    manager
        .controllers()
        .iter()
        .map(|c| {
            let mut resources = c.parent_and_child_resources();
            let (parent, parent_resource) = resources.remove(0);
            ShardedKind { parent, parent_resource, children: resources }
        })
        .collect()
}
