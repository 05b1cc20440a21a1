//! Sharding a controller's parents across replicas of the host (`host run
//! --sharded`), on the protocol of [`operator_sharding`].
//!
//! What a controller knows of sharding: every replica runs every plugin's
//! workers, but its caches hold only the parents and children labelled with
//! its shard: [`Sharding::parent_selector`] and [`Sharding::child_selector`]
//! go on the watches, and the host puts the label on every child it creates
//! ([`Sharding::child_label`]). A replica acknowledges a drain from its
//! reconcile worker ([`acknowledge`]), so a key being reconciled is never let
//! go mid-pass. The replica's Lease and the sharder that assigns, drains and
//! moves parents are the manager's (`crate::shard`).

pub mod acknowledge;

use std::time::Duration;

use operator_sharding::labels;

/// The API of `resource` in `namespace` (`None` or empty: every namespace,
/// or a cluster-scoped kind), for the sharder's and the handover's writes.
pub fn api(client: &kube::Client, resource: &kube::api::ApiResource, namespace: Option<&str>) -> kube::Api<kube::api::DynamicObject> {
    match namespace {
        Some(ns) if !ns.is_empty() => kube::Api::namespaced_with(client.clone(), ns, resource),
        _ => kube::Api::all_with(client.clone(), resource),
    }
}

/// What `--sharded` decides for this process.
#[derive(Clone, Debug)]
pub struct Sharding {
    /// The ring: one per host deployment (`--leader-election-id`).
    pub ring: String,
    /// This process's shard name: new for every process start.
    pub shard: String,
    /// Where the shard Leases live (the leader election namespace).
    pub namespace: String,
    /// As leader election's: how long the sharder waits on an unrenewed Lease.
    pub lease_duration: Duration,
    /// As leader election's: a replica that cannot renew for this long stops.
    pub renew_deadline: Duration,
    /// Time between renewals, and between the sharder's passes.
    pub retry_period: Duration,
}

/// A ring or shard name that cannot be a label.
#[derive(Debug, thiserror::Error)]
#[error("--sharded: {0}")]
pub struct InvalidSharding(#[from] labels::InvalidName);

impl Sharding {
    /// Sharding for the process `identity` (unique per start, as leader
    /// election's `hostname_<uuid>`) in `ring`.
    pub fn new(
        ring: &str,
        identity: &str,
        namespace: &str,
        lease_duration: Duration,
        renew_deadline: Duration,
        retry_period: Duration,
    ) -> Result<Sharding, InvalidSharding> {
        let sharding = Sharding {
            ring: ring.to_owned(),
            shard: labels::shard_name(identity),
            namespace: namespace.to_owned(),
            lease_duration,
            renew_deadline,
            retry_period,
        };
        labels::selector(&sharding.ring, &sharding.shard)?;
        Ok(sharding)
    }

    /// The shard label's key in this ring.
    pub fn shard_label(&self) -> String {
        labels::shard_label(&self.ring).expect("checked in Sharding::new")
    }

    /// The drain label's key in this ring.
    pub fn drain_label(&self) -> String {
        labels::drain_label(&self.ring).expect("checked in Sharding::new")
    }

    /// The selector of this shard's children watches.
    pub fn child_selector(&self) -> String {
        labels::selector(&self.ring, &self.shard).expect("checked in Sharding::new")
    }

    /// The selector of this shard's parent watches: the shard's, and the
    /// user's `--selector` when there is one (both must match).
    pub fn parent_selector(&self, user: Option<&str>) -> String {
        match user {
            Some(user) if !user.trim().is_empty() => format!("{user},{}", self.child_selector()),
            _ => self.child_selector(),
        }
    }

    /// The label every child this replica creates carries, so it lands in
    /// this shard's cache at once.
    pub fn child_label(&self) -> (String, String) {
        (self.shard_label(), self.shard.clone())
    }

    /// Where an object's labels place it.
    pub fn placement_of(&self, object: &crate::cache::CachedObject) -> labels::Placement {
        let labels = object.labels();
        labels::Placement::from_labels(&self.ring, |key| labels.get(key).map(str::to_owned))
    }

    /// The annotation on a handed-over parent: per child kind, the revision
    /// of the last relabel of its children (`group/Kind=revision,...`).
    pub fn handover_annotation(&self) -> String {
        format!("handover.operator-host.dev/{}", self.ring)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sharding() -> Sharding {
        let d = Duration::from_secs(1);
        Sharding::new("operator-host", "host-7c9d_0f3c5a1e-9b1d-4c1e-8a7a-3f1f2b9c0d11", "default", d * 15, d * 10, d * 2).unwrap()
    }

    #[test]
    fn selectors_combine_with_the_users() {
        let s = sharding();
        assert!(s.child_selector().starts_with("shard.operator-host.dev/operator-host=host-7c9d"));
        assert_eq!(s.parent_selector(None), s.child_selector());
        assert_eq!(s.parent_selector(Some("team=a")), format!("team=a,{}", s.child_selector()));
    }

    #[test]
    fn a_bad_ring_name_is_refused() {
        let d = Duration::from_secs(1);
        let e = Sharding::new("bad ring", "x", "default", d * 15, d * 10, d * 2).unwrap_err();
        assert!(e.to_string().contains("ring name \"bad ring\""), "{e}");
    }
}
