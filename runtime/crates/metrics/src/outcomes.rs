//! Recent reconcile outcomes per controller and plugin version: fed by the
//! controller (one record per reconcile that called the plugin), read by
//! automatic rollback to compare a new version with the one it replaced.

use std::collections::{BTreeMap, HashMap, VecDeque};
use std::sync::Mutex;

use tokio::time::Instant;

/// Reconciles by one version: how many called the plugin, how many of those
/// failed, and by which failure kind.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Tally {
    pub calls: u64,
    pub failures: u64,
    pub by_kind: BTreeMap<&'static str, u64>,
}

impl Tally {
    pub fn rate(&self) -> f64 {
        if self.calls == 0 { 0.0 } else { self.failures as f64 / self.calls as f64 }
    }

    /// The most frequent failure kind (the `cause` of a rollback).
    pub fn main_kind(&self) -> &'static str {
        self.by_kind.iter().max_by_key(|(_, n)| **n).map_or("none", |(k, _)| k)
    }
}

impl std::fmt::Display for Tally {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} of {} reconciles failed", self.failures, self.calls)?;
        if !self.by_kind.is_empty() {
            let kinds: Vec<String> = self.by_kind.iter().map(|(k, n)| format!("{k}: {n}")).collect();
            write!(f, " ({})", kinds.join(", "))?;
        }
        Ok(())
    }
}

struct Record {
    at: Instant,
    digest: String,
    /// The failure kind (`trap`, `plugin_error`, `action_refused`, ...), if it failed.
    failure: Option<&'static str>,
}

/// Records kept per controller: the newest win. Enough for a rate (the
/// window is judged on at most this many calls) in bounded memory.
const KEPT: usize = 4096;

/// Recent reconcile outcomes per controller, tagged with the plugin digest
/// that produced them.
#[derive(Default)]
pub struct Outcomes {
    by_controller: Mutex<HashMap<String, VecDeque<Record>>>,
}

impl Outcomes {
    /// One reconcile of `controller` by the version `digest`; `failure` is the
    /// plugin failure kind, `None` when the plugin answered acceptably.
    pub fn record(&self, controller: &str, digest: &str, failure: Option<&'static str>) {
        self.record_at(controller, digest, failure, Instant::now());
    }

    /// As [`Self::record`], at `at` (tests place records in time).
    pub fn record_at(&self, controller: &str, digest: &str, failure: Option<&'static str>, at: Instant) {
        let mut all = self.by_controller.lock().unwrap();
        let records = all.entry(controller.to_string()).or_default();
        if records.len() >= KEPT {
            records.pop_front();
        }
        records.push_back(Record { at, digest: digest.to_string(), failure });
    }

    /// The outcomes of `digest` on `controller` recorded in `[from, to)`.
    pub fn tally(&self, controller: &str, digest: &str, from: Instant, to: Instant) -> Tally {
        let all = self.by_controller.lock().unwrap();
        let mut tally = Tally::default();
        for r in all.get(controller).into_iter().flatten().filter(|r| r.digest == digest && r.at >= from && r.at < to) {
            tally.calls += 1;
            if let Some(kind) = r.failure {
                tally.failures += 1;
                *tally.by_kind.entry(kind).or_default() += 1;
            }
        }
        tally
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    #[test]
    fn outcomes_are_tallied_by_version_and_time() {
        let outcomes = Outcomes::default();
        let t0 = Instant::now();
        outcomes.record_at("c", "v1", None, t0);
        outcomes.record_at("c", "v1", Some("trap"), t0 + Duration::from_secs(1));
        outcomes.record_at("c", "v2", Some("action_refused"), t0 + Duration::from_secs(2));
        outcomes.record_at("other", "v1", Some("trap"), t0 + Duration::from_secs(1));
        let v1 = outcomes.tally("c", "v1", t0, t0 + Duration::from_secs(5));
        assert_eq!((v1.calls, v1.failures, v1.main_kind()), (2, 1, "trap"));
        assert_eq!(outcomes.tally("c", "v1", t0 + Duration::from_secs(1), t0 + Duration::from_secs(5)).calls, 1);
        assert_eq!(outcomes.tally("c", "v2", t0, t0 + Duration::from_secs(5)).to_string(), "1 of 1 reconciles failed (action_refused: 1)");
    }

    #[test]
    fn only_the_newest_records_are_kept() {
        let outcomes = Outcomes::default();
        let t0 = Instant::now();
        for _ in 0..KEPT + 10 {
            outcomes.record_at("c", "v1", None, t0);
        }
        assert_eq!(outcomes.tally("c", "v1", t0, t0 + Duration::from_secs(1)).calls, KEPT as u64);
    }
}
