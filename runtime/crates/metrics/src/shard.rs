//! What sharding exports: per replica the parents it owns and the handovers
//! it made; on the sharder the decisions it took and the shards it sees.

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::{Histogram, exponential_buckets};
use prometheus_client::registry::Registry;

/// Per controller (the plugin's name), as controller-runtime's metrics.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct ControllerLabels {
    pub controller: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct DecisionLabels {
    /// `assign` (an unassigned parent), `drain`, `move` (off a stopped
    /// shard), `takeover` (an expired shard Lease), `child` (a child relabelled
    /// to follow its parent).
    pub decision: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct StateLabels {
    /// `ready`, `expired`, `dead`, `orphaned`.
    pub state: String,
}

fn handover_histogram() -> Histogram {
    // 5 ms .. ~40 s: a handover is a few writes; a drain waits for the
    // running reconcile.
    Histogram::new(exponential_buckets(0.005, 2.0, 14))
}

/// The sharding metrics (registered with the rest by [`crate::Metrics`]).
pub struct ShardMetrics {
    /// Parents in this replica's shard, per controller (set at scrape).
    pub owned: Family<ControllerLabels, Gauge>,
    pub handovers: Family<ControllerLabels, Counter>,
    pub handover_seconds: Family<ControllerLabels, Histogram, fn() -> Histogram>,
    pub decisions: Family<DecisionLabels, Counter>,
    /// From the drain label written to the parent seen on its new shard.
    pub drain_seconds: Histogram,
    pub members: Family<StateLabels, Gauge>,
}

impl ShardMetrics {
    pub fn new(registry: &mut Registry) -> ShardMetrics {
        let m = ShardMetrics {
            owned: Family::default(),
            handovers: Family::default(),
            handover_seconds: Family::new_with_constructor(handover_histogram as fn() -> Histogram),
            decisions: Family::default(),
            drain_seconds: handover_histogram(),
            members: Family::default(),
        };
        registry.register("shard_owned_parents", "Parents in this replica's shard, per controller", m.owned.clone());
        registry.register("shard_handovers", "Drained parents this replica handed to another shard, per controller", m.handovers.clone());
        registry.register("shard_handover_seconds", "Time a handover took (children relabelled, then the parent)", m.handover_seconds.clone());
        registry.register("sharder_decisions", "Placements the sharder wrote, by decision", m.decisions.clone());
        registry.register("sharder_drain_seconds", "From the drain label written to the parent seen on its new shard", m.drain_seconds.clone());
        registry.register("sharder_shards", "Shards of the ring by state, as the sharder sees their Leases", m.members.clone());
        m
    }
}
