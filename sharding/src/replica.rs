//! The replica's side: when it may reconcile a key, and when it lets one go.
//!
//! A replica reconciles only what its own view says is its own, and only
//! while its own Lease is held by its own clock (renewed within the renew
//! deadline). Its view may be stale; these rules keep it safe anyway:
//! a key it reads as its own was either still its own (the sharder moves a
//! live shard's key only after the shard's acknowledgement, written by this
//! replica itself), or its Lease has lapsed and it reconciles nothing more.
//! A replica that finds its Lease lost exits; its restart is a new shard with
//! a new name and a fresh list, so a shard name is never reused and the
//! sharder's "this shard stopped" stays true forever.

use std::time::Duration;

use crate::labels::Placement;

/// The replica's own judgement of its Lease.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct LeaseHeld {
    /// Time since the last renewal that succeeded, on this process's clock.
    pub since_renewal: Duration,
    /// Stop once no renewal has succeeded for this long (less than the
    /// Lease's duration, which is what the sharder waits for).
    pub renew_deadline: Duration,
}

impl LeaseHeld {
    /// Whether the replica may act on its view.
    pub fn holds(&self) -> bool {
        self.since_renewal < self.renew_deadline
    }
}

/// Whether the replica `me` may start a reconcile of a parent it sees at
/// `placement`. `children_synced`: its child caches are at least as new as
/// the parent's version it read (see [`crate`], rule 5).
pub fn may_start(placement: &Placement, me: &str, lease: &LeaseHeld, children_synced: bool) -> bool {
    lease.holds() && !placement.draining() && placement.shard.as_deref() == Some(me) && children_synced
}

/// Whether the replica `me` should now acknowledge a drain. Only once no
/// reconcile of the key runs and the last one's writes are in its caches;
/// then it hands the key over ([`handover`]) and drops the key's
/// expectations and queue entry.
pub fn should_acknowledge(placement: &Placement, me: &str, reconciling: bool) -> bool {
    placement.draining() && placement.shard.as_deref() == Some(me) && !reconciling
}

/// Where an acknowledged parent goes: its children (which only this replica
/// caches) are relabelled to the drain's target first, each write
/// conditional on the version read; then the parent's shard label is set to
/// the target and its drain label removed, conditional on the version read.
/// With no target named, the parent is left unassigned for the sharder.
pub fn handover(placement: &Placement) -> Placement {
    match placement.drain.as_deref() {
        Some(to) if !to.is_empty() => Placement::on(to),
        _ => Placement::default(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const HELD: LeaseHeld = LeaseHeld { since_renewal: Duration::from_secs(1), renew_deadline: Duration::from_secs(10) };

    #[test]
    fn reconciles_only_its_own_undrained_keys_while_holding_its_lease() {
        assert!(may_start(&Placement::on("a"), "a", &HELD, true));
        assert!(!may_start(&Placement::on("b"), "a", &HELD, true));
        assert!(!may_start(&Placement::draining_to("a", "b"), "a", &HELD, true));
        assert!(!may_start(&Placement::on("a"), "a", &HELD, false));
        let lapsed = LeaseHeld { since_renewal: Duration::from_secs(10), ..HELD };
        assert!(!may_start(&Placement::on("a"), "a", &lapsed, true));
    }

    #[test]
    fn acknowledges_a_drain_only_when_idle() {
        let drained = Placement::draining_to("a", "b");
        assert!(should_acknowledge(&drained, "a", false));
        assert!(!should_acknowledge(&drained, "a", true));
        assert!(!should_acknowledge(&Placement::on("a"), "a", false));
        assert!(!should_acknowledge(&drained, "b", false));
    }

    #[test]
    fn a_handover_goes_to_the_drains_target() {
        assert_eq!(handover(&Placement::draining_to("a", "b")), Placement::on("b"));
        assert_eq!(handover(&Placement::draining_to("a", "")), Placement::default());
    }
}
