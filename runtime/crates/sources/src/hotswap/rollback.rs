//! Automatic rollback: for one [`Config::window`] after a swap, the new
//! version's plugin failures (traps, plugin errors, refused actions) are
//! compared with the previous version's. When more than
//! [`Config::threshold`] of at least [`Config::min_calls`] reconciles fail
//! while the previous version's failure rate in the window before the swap
//! was at or under the threshold, the reloader swaps the previous version
//! back and remembers the bad bytes, which are not loaded again until the
//! source holds other bytes.
//!
//! Only the plugin's own failures count: API errors and conflicts are the
//! cluster's, and would otherwise blame an upgrade for an outage. A previous
//! version with no reconciles in its window counts as healthy: nothing says
//! it failed, and it is the version that ran.
//!
//! [`Outcomes`] is fed by the controller, one record per reconcile that
//! called the plugin; [`Watchdog`] holds the watches and decides.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::Duration;

use tokio::time::Instant;

use super::Origin;
use crate::outcomes::{Outcomes, Tally};
use crate::sandbox::LoadedPlugin;

/// When a new version is rolled back.
#[derive(Clone, Debug, PartialEq)]
pub struct Config {
    /// How long after a swap the new version is watched (default 5 min; 0
    /// turns rollback off). A swap queues every parent, so a version that
    /// fails every reconcile shows it within seconds; 5 minutes also covers
    /// failures that need a requeue or a child's change, and ends the watch
    /// before a later, unrelated incident can be blamed on the upgrade.
    pub window: Duration,
    /// The failure rate (0..1) the new version must exceed (default 0.5:
    /// most of its reconciles fail, which a healthy controller's occasional
    /// refused parent does not reach).
    pub threshold: f64,
    /// Reconciles of the new version needed before it is judged (default
    /// 10): 1 failure in 2 calls is noise; a failing parent is retried
    /// with backoff (5 ms, doubling), so even a single parent reaches 10
    /// calls within about 5 s.
    pub min_calls: u64,
}

impl Default for Config {
    fn default() -> Self {
        Self { window: Duration::from_secs(300), threshold: 0.5, min_calls: 10 }
    }
}

impl Config {
    pub fn enabled(&self) -> bool {
        !self.window.is_zero()
    }

    /// How often the watchdog looks: often enough to act early in the window.
    pub fn tick(&self) -> Duration {
        (self.window / 50).clamp(Duration::from_millis(100), Duration::from_secs(1))
    }
}

/// A new version under watch.
struct Watch {
    origin: Origin,
    new: LoadedPlugin,
    previous: LoadedPlugin,
    since: Instant,
    /// The previous version's outcomes in the window before the swap.
    baseline: Tally,
}

/// A decision to swap `previous` back in place of `bad`.
pub struct RollBack {
    pub origin: Origin,
    pub bad: LoadedPlugin,
    pub previous: LoadedPlugin,
    /// The bad version's outcomes since the swap.
    pub tally: Tally,
    pub baseline: Tally,
    /// How long after the swap the decision came.
    pub after: Duration,
}

/// The watches of recent swaps, and the bytes rolled back per source.
pub struct Watchdog {
    config: Config,
    watches: Mutex<HashMap<String, Watch>>,
    /// Plugin id → digest of the version rolled back from it.
    blocked: Mutex<HashMap<String, String>>,
}

impl Watchdog {
    pub fn new(config: Config) -> Self {
        Self { config, watches: Mutex::default(), blocked: Mutex::default() }
    }

    pub fn config(&self) -> &Config {
        &self.config
    }

    /// `new` replaced `previous` under `origin`'s id: watch it for one window.
    pub fn swapped(&self, outcomes: &Outcomes, origin: Origin, previous: LoadedPlugin, new: LoadedPlugin) {
        if !self.config.enabled() {
            return;
        }
        let now = Instant::now();
        let from = now.checked_sub(self.config.window).unwrap_or(now);
        let baseline = outcomes.tally(previous.name(), &previous.info().digest, from, now);
        self.watches.lock().unwrap().insert(origin.id(), Watch { origin, new, previous, since: now, baseline });
    }

    /// Whether `digest` was rolled back from `id` and the source still holds it.
    /// Other bytes from the source end the block.
    pub fn blocks(&self, id: &str, digest: &str) -> bool {
        let mut blocked = self.blocked.lock().unwrap();
        match blocked.get(id) {
            Some(bad) if bad == digest => true,
            Some(_) => {
                blocked.remove(id);
                false
            }
            None => false,
        }
    }

    /// The source of `id` is gone (or replaced): nothing to watch or block.
    pub fn forget(&self, id: &str) {
        self.watches.lock().unwrap().remove(id);
        self.blocked.lock().unwrap().remove(id);
    }

    /// Ends watches past their window and returns the versions to roll back
    /// (their watches end too, and their digests are blocked).
    pub fn judge(&self, outcomes: &Outcomes, now: Instant) -> Vec<RollBack> {
        let mut decisions = Vec::new();
        let mut watches = self.watches.lock().unwrap();
        watches.retain(|id, w| {
            let tally = outcomes.tally(w.new.name(), &w.new.info().digest, w.since, now + Duration::from_nanos(1));
            if self.failing(&tally, &w.baseline) {
                self.blocked.lock().unwrap().insert(id.clone(), w.new.info().digest.clone());
                decisions.push(RollBack {
                    origin: w.origin.clone(),
                    bad: w.new.clone(),
                    previous: w.previous.clone(),
                    tally,
                    baseline: w.baseline.clone(),
                    after: now.saturating_duration_since(w.since),
                });
                return false;
            }
            now.saturating_duration_since(w.since) < self.config.window
        });
        decisions
    }

    fn failing(&self, new: &Tally, previous: &Tally) -> bool {
        new.calls >= self.config.min_calls && new.rate() > self.config.threshold && previous.rate() <= self.config.threshold
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use super::*;

    fn tally(calls: u64, failures: u64) -> Tally {
        Tally { calls, failures, by_kind: if failures > 0 { [("trap", failures)].into() } else { BTreeMap::new() } }
    }

    #[test]
    fn a_version_is_failing_past_the_threshold_with_enough_calls_when_the_previous_one_was_not() {
        let dog = Watchdog::new(Config { window: Duration::from_secs(60), threshold: 0.5, min_calls: 10 });
        assert!(dog.failing(&tally(10, 6), &tally(100, 0)));
        assert!(dog.failing(&tally(10, 10), &tally(0, 0)), "a previous version without reconciles counts as healthy");
        assert!(!dog.failing(&tally(9, 9), &tally(100, 0)), "too few calls to judge");
        assert!(!dog.failing(&tally(10, 5), &tally(100, 0)), "at the threshold is not past it");
        assert!(!dog.failing(&tally(10, 10), &tally(10, 6)), "the previous version failed as much: not the upgrade's fault");
    }

    #[test]
    fn the_default_window_ticks_every_second_and_zero_turns_rollback_off() {
        assert_eq!(Config::default().tick(), Duration::from_secs(1));
        assert_eq!(Config { window: Duration::from_secs(5), ..Config::default() }.tick(), Duration::from_millis(100));
        assert!(!Config { window: Duration::ZERO, ..Config::default() }.enabled());
    }
}
