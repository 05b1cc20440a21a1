//! What the sharder does with one object, given where it stands and where the
//! ring wants it.
//!
//! The sharder's view of objects and Leases may be stale, so every write it
//! makes from a decision is conditional on the `resourceVersion` it decided
//! on (an update, or a patch carrying the version): a decision taken on an old
//! view fails with 409 Conflict and is taken again on a fresh one.

use crate::labels::Placement;
use crate::membership::ShardState;

/// The sharder's decision for one object.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Decision {
    /// Where it should be; nothing to do.
    Keep,
    /// Set the shard label to this shard and remove the drain label. For a
    /// parent, its children are relabelled first (see [`crate`], rule 5).
    Assign(String),
    /// Add the drain label naming this shard: the object's live shard must
    /// let it go first, and hands it over itself (see [`crate`], rule 4).
    Drain(String),
    /// Drained, waiting for the shard to acknowledge.
    AwaitAcknowledgement,
    /// The shard's Lease expired; the object moves once the sharder has taken
    /// the Lease over.
    AwaitTakeover,
    /// No shard is available; the object stays unassigned (or where it is).
    NoShard,
}

/// The decision for a parent: `current` is where its labels place it,
/// `desired` the ring's choice among available shards, `state_of` the state
/// of a named shard (`None`: no Lease seen, treated as stopped: Leases are
/// kept while a shard is alive, and the sharder decides only once its Lease
/// cache has synced).
pub fn decide(current: &Placement, desired: Option<&str>, state_of: impl Fn(&str) -> Option<ShardState>) -> Decision {
    let Some(shard) = current.shard.as_deref() else {
        return desired.map_or(Decision::NoShard, |d| Decision::Assign(d.to_owned()));
    };
    match state_of(shard) {
        Some(ShardState::Ready) => {
            if current.draining() {
                // A drain once asked stands even if the ring changed back: the
                // shard may be acknowledging right now, and cancelling would
                // race its write.
                Decision::AwaitAcknowledgement
            } else {
                match desired {
                    Some(d) if d != shard => Decision::Drain(d.to_owned()),
                    _ => Decision::Keep,
                }
            }
        }
        Some(ShardState::Expired) => Decision::AwaitTakeover,
        Some(ShardState::Dead | ShardState::Orphaned) | None => desired.map_or(Decision::NoShard, |d| Decision::Assign(d.to_owned())),
    }
}

/// Whether the sharder's view of children is new enough to move a parent
/// that became movable at revision `movable_at`: the parent's acknowledged
/// version, or the Lease write that shows its old shard stopped (whichever
/// is newer). Every child the old shard made was written before that, so a
/// view at least that new holds them all and none is left behind on the old
/// shard. Kubernetes calls resourceVersions opaque; the supported way to get
/// such a view is a list with `resourceVersion=<movable_at>` and
/// `resourceVersionMatch=NotOlderThan`, which this comparison stands for.
pub fn children_caught_up(children_seen_at: u64, movable_at: u64) -> bool {
    children_seen_at >= movable_at
}

/// The decision for a child: it follows its parent's placement (whichever
/// shard reconciles the parent caches its children), and waits while the
/// parent is unassigned or draining (the parent's move relabels it).
/// `parent` must have been read after `current` (see [`crate`], rule 6): a
/// parent view older than the child's sends a child that has moved with its
/// parent back to the parent's old shard.
pub fn decide_child(current: &Placement, parent: Option<&Placement>) -> Decision {
    match parent {
        Some(Placement { shard: Some(shard), drain: None }) if current.shard.as_deref() != Some(shard) => Decision::Assign(shard.clone()),
        _ => Decision::Keep,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn states(name: &str) -> Option<ShardState> {
        match name {
            "ready-a" | "ready-b" => Some(ShardState::Ready),
            "expired" => Some(ShardState::Expired),
            "dead" => Some(ShardState::Dead),
            _ => None,
        }
    }

    fn draining(shard: &str) -> Placement {
        Placement::draining_to(shard, "ready-b")
    }

    #[test]
    fn unassigned_objects_are_assigned() {
        assert_eq!(decide(&Placement::default(), Some("ready-a"), states), Decision::Assign("ready-a".into()));
        assert_eq!(decide(&Placement::default(), None, states), Decision::NoShard);
    }

    #[test]
    fn a_live_shard_is_drained_before_the_object_moves() {
        assert_eq!(decide(&Placement::on("ready-a"), Some("ready-a"), states), Decision::Keep);
        assert_eq!(decide(&Placement::on("ready-a"), Some("ready-b"), states), Decision::Drain("ready-b".into()));
        assert_eq!(decide(&draining("ready-a"), Some("ready-b"), states), Decision::AwaitAcknowledgement);
        assert_eq!(decide(&draining("ready-a"), Some("ready-a"), states), Decision::AwaitAcknowledgement);
    }

    #[test]
    fn a_stopped_shard_loses_its_objects_at_once() {
        assert_eq!(decide(&Placement::on("dead"), Some("ready-b"), states), Decision::Assign("ready-b".into()));
        assert_eq!(decide(&draining("dead"), Some("ready-b"), states), Decision::Assign("ready-b".into()));
        assert_eq!(decide(&Placement::on("never-seen"), Some("ready-b"), states), Decision::Assign("ready-b".into()));
    }

    #[test]
    fn an_expired_shard_keeps_its_objects_until_taken_over() {
        assert_eq!(decide(&Placement::on("expired"), Some("ready-b"), states), Decision::AwaitTakeover);
    }

    #[test]
    fn children_follow_their_parent() {
        let parent = Placement::on("ready-b");
        assert_eq!(decide_child(&Placement::on("ready-a"), Some(&parent)), Decision::Assign("ready-b".into()));
        assert_eq!(decide_child(&Placement::default(), Some(&parent)), Decision::Assign("ready-b".into()));
        assert_eq!(decide_child(&Placement::on("ready-b"), Some(&parent)), Decision::Keep);
        assert_eq!(decide_child(&Placement::on("ready-a"), Some(&draining("ready-a"))), Decision::Keep);
        assert_eq!(decide_child(&Placement::on("ready-a"), None), Decision::Keep);
    }
}
