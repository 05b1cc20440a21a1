//! A shard's state, judged by the sharder from the shard's Lease.
//!
//! Expiry is judged as client-go's leader election judges it: by how long the
//! sharder has seen the Lease record unchanged on its own monotonic clock,
//! never by comparing the holder's `renewTime` with the sharder's wall clock,
//! so clock skew between nodes cannot expire a live shard.
//!
//! Safety rests on one inequality: a shard stops reconciling once its renewal
//! has failed for its renew deadline, and the sharder sees its Lease expire no
//! sooner than `leaseDuration` after the last renewal it observed, which
//! happened after that renewal was written. With renew deadline <
//! lease duration, an expired shard has already stopped.

use std::time::Duration;

/// How long a released or taken-over Lease is kept before it is deleted.
pub const ORPHAN_AFTER: Duration = Duration::from_secs(60);

/// What the sharder knows of one shard's Lease.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LeaseObservation {
    /// The Lease's name: the shard's name.
    pub shard: String,
    /// `spec.holderIdentity`, empty or absent when released.
    pub holder: Option<String>,
    /// `spec.leaseDurationSeconds`.
    pub lease_duration: Duration,
    /// How long the sharder has seen the Lease unchanged.
    pub unchanged_for: Duration,
}

/// A shard's state.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum ShardState {
    /// Released by the shard (graceful stop) or taken over by the sharder,
    /// for [`ORPHAN_AFTER`] or longer: the Lease can be deleted.
    Orphaned,
    /// Released or taken over: the shard has stopped; its objects move at once.
    Dead,
    /// Not renewed for the lease duration: the shard has stopped by rule, and
    /// the sharder takes the Lease over (which makes it [`ShardState::Dead`]).
    /// Its objects stay put until then.
    Expired,
    /// Held and renewed: objects can be assigned to it.
    Ready,
}

impl ShardState {
    /// Whether new assignments may go to the shard.
    pub fn is_available(self) -> bool {
        self == ShardState::Ready
    }

    /// Whether the shard's objects may be moved without its acknowledgement.
    pub fn has_stopped(self) -> bool {
        self <= ShardState::Dead
    }
}

/// The state of a shard from what the sharder observed of its Lease.
pub fn state(lease: &LeaseObservation) -> ShardState {
    if lease.holder.as_deref() != Some(lease.shard.as_str()) {
        return if lease.unchanged_for >= ORPHAN_AFTER { ShardState::Orphaned } else { ShardState::Dead };
    }
    if lease.unchanged_for >= lease.lease_duration { ShardState::Expired } else { ShardState::Ready }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn lease(holder: Option<&str>, unchanged_for: u64) -> LeaseObservation {
        LeaseObservation {
            shard: "host-0".into(),
            holder: holder.map(str::to_owned),
            lease_duration: Duration::from_secs(15),
            unchanged_for: Duration::from_secs(unchanged_for),
        }
    }

    #[test]
    fn states() {
        assert_eq!(state(&lease(Some("host-0"), 3)), ShardState::Ready);
        assert_eq!(state(&lease(Some("host-0"), 15)), ShardState::Expired);
        assert_eq!(state(&lease(None, 0)), ShardState::Dead);
        assert_eq!(state(&lease(Some("sharder"), 10)), ShardState::Dead);
        assert_eq!(state(&lease(Some(""), 60)), ShardState::Orphaned);
    }

    #[test]
    fn only_ready_takes_assignments_and_only_dead_moves_without_ack() {
        assert!(ShardState::Ready.is_available());
        assert!(!ShardState::Expired.is_available());
        assert!(!ShardState::Expired.has_stopped());
        assert!(ShardState::Dead.has_stopped() && ShardState::Orphaned.has_stopped());
    }
}
