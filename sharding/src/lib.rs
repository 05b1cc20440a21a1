//! Sharding a controller's parents across replicas of the host.
//!
//! One replica reconciling everything caps a controller at one process's CPU,
//! memory and API client. With sharding every replica reconciles a share of
//! the parents, caches only that share, and a key is reconciled by exactly one
//! replica at a time. The design follows timebertt/kubernetes-controller-sharding
//! (controller-runtime issues #2576 and #2836 ask for it upstream); here the
//! sharder is part of the host instead of an add-on.
//!
//! - [`ring`]: the consistent-hash ring (XXH64, 100 virtual nodes per shard)
//!   that names the shard a key belongs to.
//! - [`key`]: the hash key of a parent, and of a child (its controller's key,
//!   so children follow their parent).
//! - [`labels`]: the shard and drain labels the sharder writes, which each
//!   replica's watches select on.
//! - [`membership`]: a shard's state from its Lease, as the sharder sees it.
//! - [`sharder`]: what the sharder does with one object: assign, drain, move
//!   or leave it.
//! - [`replica`]: when a replica may reconcile a key, and when it acknowledges
//!   a drain.
//!
//! # The protocol
//! 1. Each replica holds a Lease named after itself, labelled with the ring's
//!    name, and renews it as leader election renews its Lease. A replica whose
//!    renewal has not succeeded within its renew deadline stops reconciling
//!    everything; one that finds its Lease lost exits, and its restart joins
//!    as a new shard (a new name per process start, never reused), so a
//!    stale cache can never act under a name the sharder has declared dead.
//! 2. The sharder (the elected leader among the replicas) builds the ring
//!    from the Leases in state [`membership::ShardState::is_available`].
//! 3. An object without the shard label is given one (on sight, or by the
//!    mutating webhook). An object on a shard that is gone (released its
//!    Lease, or the sharder took its expired Lease) is moved at once: its
//!    owner has stopped by rule 1. An object whose shard is alive but no
//!    longer the one the ring names gets the drain label.
//! 4. A replica never starts a reconcile of an object that carries the drain
//!    label. Once no reconcile of the key is running (and the writes of the
//!    last one are in its caches), it hands the object over to the shard the
//!    drain label names: it relabels the object's children (which it alone
//!    caches), then sets the object's shard label to the target and removes
//!    the drain label. That write is the acknowledgement.
//! 5. Children follow their parent and move before it: the old owner (rule
//!    4), or for a stopped shard the sharder, relabels a parent's children
//!    before the parent, the sharder from a view of children at least as new
//!    as the Lease write that shows the shard stopped. The parent carries the
//!    revision of the last child relabel, and a replica that gains a parent
//!    reconciles it only once its child caches are at least that new. So a
//!    new owner never misses what the old one made. A child already on the
//!    target (a move whose parent write was refused) counts with its version;
//!    a handover whose parent write was refused after it relabelled children
//!    (those children have left its cache) keeps the revisions it wrote for
//!    its retry.
//! 6. A child that does not follow its settled parent is relabelled only on a
//!    parent read after the child was (a GET, a current read), never on the
//!    parent view a sharder pass began with: that view can predate the
//!    pass's own writes and a handover since, and would send a child back to
//!    where its parent no longer is (the handover model found this). Before
//!    a parent moves, the sharder reads it again, and the move goes ahead
//!    only if its version is still the one decided on.

pub mod key;
pub mod labels;
pub mod membership;
pub mod replica;
pub mod ring;
pub mod sharder;
