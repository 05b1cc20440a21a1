//! Objects one build of a plugin found valid when they were created.
//!
//! The controller asks `validate(parent, None)` before a parent's first
//! reconcile, because a stored object may never have met the plugin's
//! admission (written before the webhook existed, with admission off, or
//! under an older build). When this host's own admission ran that very
//! call on a create, with this very build, and the API server stored the
//! object, asking again gives the same answer: the API server assigns
//! `metadata.uid` and `metadata.generation` before validating admission (as
//! upstream's registry does), so the (uid, generation) admission saw is the
//! one the controller reads, and the object it validated is the stored one.
//! Only creates are remembered: an update is validated against the old
//! object, and a plugin may allow on update (ratcheting) what it refuses on
//! a new object.
//!
//! A hot swap loads a new build with an empty memo, so nothing carries over
//! between versions. The memo is a hint and never a verdict of its own: a
//! record is taken once and forgotten, the oldest records go past
//! [`CAPACITY`] (a replica that serves the webhook but is not the leader
//! never takes any), and whatever is not found is validated again by calling the plugin.

use std::collections::{HashSet, VecDeque};
use std::sync::Mutex;

/// Records kept at most: a burst of creates the controller has not reached
/// yet. 16,384 records and their order take 2 MiB at most; past them, the
/// oldest are dropped and those parents are validated by the controller
/// (one more call each).
const CAPACITY: usize = 16_384;

/// What a record names: the object's uid and its `metadata.generation`.
type Record = (u128, Option<i64>);

#[derive(Debug, Default)]
pub(crate) struct Admitted {
    records: Mutex<Records>,
}

#[derive(Debug, Default)]
struct Records {
    set: HashSet<Record>,
    /// Insertion order, for dropping the oldest past [`CAPACITY`]; may hold
    /// records already taken (skipped when dropping).
    order: VecDeque<Record>,
}

impl Admitted {
    /// Remembers that the object `uid` at `generation` was found valid on
    /// create. A uid that is not a UUID (the API server always makes one) is
    /// not remembered.
    pub(crate) fn remember(&self, uid: &str, generation: Option<i64>) {
        let Ok(uid) = uuid::Uuid::parse_str(uid) else { return };
        let record = (uid.as_u128(), generation);
        let mut records = self.records.lock().unwrap_or_else(|e| e.into_inner());
        if !records.set.insert(record) {
            return;
        }
        records.order.push_back(record);
        while records.set.len() > CAPACITY || records.order.len() > 2 * CAPACITY {
            let Some(oldest) = records.order.pop_front() else { break };
            records.set.remove(&oldest);
        }
    }

    /// Whether the object `uid` at `generation` was found valid on create;
    /// the record is forgotten either way.
    pub(crate) fn take(&self, uid: &str, generation: Option<i64>) -> bool {
        let Ok(uid) = uuid::Uuid::parse_str(uid) else { return false };
        self.records.lock().unwrap_or_else(|e| e.into_inner()).set.remove(&(uid.as_u128(), generation))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const UID: &str = "6f1c2a5e-8d4b-4c3e-9a7f-0b1d2e3f4a5b";

    #[test]
    fn a_record_is_taken_once_and_only_for_its_uid_and_generation() {
        let admitted = Admitted::default();
        admitted.remember(UID, Some(1));
        assert!(!admitted.take(UID, Some(2)), "another generation is not the object admission saw");
        assert!(!admitted.take("7f1c2a5e-8d4b-4c3e-9a7f-0b1d2e3f4a5b", Some(1)), "another uid (same name recreated) is not either");
        assert!(admitted.take(UID, Some(1)));
        assert!(!admitted.take(UID, Some(1)), "a record is forgotten once taken");
    }

    #[test]
    fn a_uid_that_is_not_a_uuid_is_never_remembered() {
        let admitted = Admitted::default();
        admitted.remember("not-a-uid", Some(1));
        assert!(!admitted.take("not-a-uid", Some(1)));
    }

    #[test]
    fn past_the_capacity_the_oldest_records_are_dropped() {
        let admitted = Admitted::default();
        let uid = |i: usize| uuid::Uuid::from_u128(i as u128 + 1).to_string();
        for i in 0..CAPACITY + 10 {
            admitted.remember(&uid(i), Some(1));
        }
        let records = admitted.records.lock().unwrap();
        assert_eq!(records.set.len(), CAPACITY);
        drop(records);
        assert!(!admitted.take(&uid(0), Some(1)), "the oldest went first");
        assert!(!admitted.take(&uid(9), Some(1)));
        assert!(admitted.take(&uid(10), Some(1)));
        assert!(admitted.take(&uid(CAPACITY + 9), Some(1)));
    }

    #[test]
    fn taken_records_do_not_hold_the_order_queue_forever() {
        let admitted = Admitted::default();
        for i in 0..3 * CAPACITY {
            let uid = uuid::Uuid::from_u128(i as u128 + 1).to_string();
            admitted.remember(&uid, Some(1));
            assert!(admitted.take(&uid, Some(1)));
        }
        let records = admitted.records.lock().unwrap();
        assert!(records.set.is_empty());
        assert!(records.order.len() <= 2 * CAPACITY, "{} records queued", records.order.len());
    }
}
