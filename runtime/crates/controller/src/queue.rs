//! The workqueue: controller-runtime's priority queue (client-go's
//! rate-limited delaying queue, plus a [`Priority`] per key), as one
//! explicit state machine ([`QueueState`], time passed in, so tests need no
//! clock) and a thin async wrapper ([`WorkQueue`]) that workers pull from.
//!
//! Guarantees, as controller-runtime's:
//! - a key is queued at most once (dedupe), at the highest priority it was
//!   added with; within a priority, in arrival order;
//! - low-priority keys (initial lists, resyncs, fan-out) wait behind fresh
//!   changes, but never starve ([`NORMAL_PER_LOW`]);
//! - a key being processed is never handed out again until [`QueueState::finish`];
//!   adds during processing mark it dirty and it is queued again on finish;
//! - delayed adds keep the soonest deadline;
//! - errors back off per key, `base × 2^(failures-1)` capped, reset on success.

use std::collections::{BTreeMap, HashMap};
use std::hash::Hash;
use std::sync::Mutex;
use std::time::Duration;

use tokio::sync::Notify;
use tokio::time::Instant;

use crate::metrics::QueueStats;

/// Per-key exponential backoff (controller-runtime's
/// `ItemExponentialFailureRateLimiter`).
#[derive(Clone, Copy, Debug)]
pub struct Backoff {
    /// Delay after the first failure. Default 5 ms (controller-runtime).
    pub base: Duration,
    /// Upper bound. Default 6 h: an object that keeps failing is retried a
    /// few times a day, not hammered.
    pub max: Duration,
}

impl Default for Backoff {
    fn default() -> Self {
        Self { base: Duration::from_millis(5), max: Duration::from_secs(6 * 3600) }
    }
}

impl Backoff {
    /// The delay after the `failures`-th consecutive failure (1-based).
    pub fn delay(&self, failures: u32) -> Duration {
        let exp = failures.saturating_sub(1).min(40);
        let factor = 1u64 << exp;
        let nanos = (self.base.as_nanos() as u64).saturating_mul(factor);
        Duration::from_nanos(nanos).min(self.max)
    }
}

/// How a reconcile ended, as the queue needs to know it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Outcome {
    /// Done; optionally come back after a delay, at `priority` (`None`:
    /// the priority the key was handed out at). Resets the backoff.
    Success { requeue_after: Option<Duration>, priority: Option<Priority> },
    /// Failed: come back after the key's next backoff delay.
    Error,
    /// Come back at once without counting a failure (409 Conflict: the cache
    /// was stale, the next pass will see the newer object).
    RequeueNow,
}

/// How soon a queued key is handed out: controller-runtime's priority
/// queue (0.20+) with its two levels in use, 0 and `handler.LowPriority`
/// (-100). Keys from initial lists, resyncs, related-object fan-out and hot
/// swaps are [`Priority::Low`]; fresh changes of a parent or of its
/// children are [`Priority::Normal`], so a user's edit after a restart is
/// not stuck behind thousands of start-up reconciles.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Priority {
    Low,
    Normal,
}

impl Priority {
    /// Both levels, highest first.
    pub const ALL: [Priority; 2] = [Priority::Normal, Priority::Low];

    /// The `priority` label of `workqueue_depth`, controller-runtime's values.
    pub fn label(self) -> &'static str {
        match self {
            Priority::Low => "-100",
            Priority::Normal => "0",
        }
    }

    fn index(self) -> usize {
        match self {
            Priority::Normal => 0,
            Priority::Low => 1,
        }
    }
}

/// While low-priority keys wait, at most this many normal-priority keys are
/// handed out in a row before one low-priority key is. controller-runtime
/// serves strictly by priority and lets a steady stream of high-priority
/// adds starve the rest; here a low-priority key always gets at least one
/// pop in `NORMAL_PER_LOW + 1`, and a fresh change still waits behind at
/// most one start-up key per `NORMAL_PER_LOW` fresh ones.
pub const NORMAL_PER_LOW: u32 = 8;

/// The queue's state. Pure: every method takes `now`.
#[derive(Debug)]
pub struct QueueState<K> {
    /// Ready keys per priority ([`Priority::index`]), by arrival.
    ready: [BTreeMap<u64, K>; 2],
    /// Ready key → its priority and arrival.
    queued: HashMap<K, (Priority, u64)>,
    waiting: BTreeMap<(Instant, u64), K>,
    waiting_at: HashMap<K, (Instant, u64, Priority)>,
    /// Keys being processed, with the priority they were handed out at
    /// (their requeues keep it, as controller-runtime's).
    processing: HashMap<K, Priority>,
    /// Keys added while processing: queued again on finish, at this priority.
    dirty: HashMap<K, Priority>,
    after_processing: HashMap<K, (Instant, Priority)>,
    failures: HashMap<K, u32>,
    backoff: Backoff,
    seq: u64,
    /// Normal-priority keys handed out in a row while low-priority ones waited.
    normal_in_a_row: u32,
    stats: QueueStats,
}

impl<K: Clone + Eq + Hash + Ord> QueueState<K> {
    pub fn new(backoff: Backoff) -> Self {
        Self {
            ready: [BTreeMap::new(), BTreeMap::new()],
            queued: HashMap::new(),
            waiting: BTreeMap::new(),
            waiting_at: HashMap::new(),
            processing: HashMap::new(),
            dirty: HashMap::new(),
            after_processing: HashMap::new(),
            failures: HashMap::new(),
            backoff,
            seq: 0,
            normal_in_a_row: 0,
            stats: QueueStats::default(),
        }
    }

    fn next_seq(&mut self) -> u64 {
        self.seq += 1;
        self.seq
    }

    /// Makes `key` ready at `priority`, or raises it to `priority` if it is
    /// ready lower (never lowers it). Keeps its place by arrival.
    fn make_ready(&mut self, key: K, priority: Priority) {
        match self.queued.get_mut(&key) {
            Some((current, seq)) => {
                if priority > *current {
                    let seq = *seq;
                    self.ready[current.index()].remove(&seq);
                    *current = priority;
                    self.ready[priority.index()].insert(seq, key);
                }
            }
            None => {
                let seq = self.next_seq();
                self.queued.insert(key.clone(), (priority, seq));
                self.ready[priority.index()].insert(seq, key);
            }
        }
    }

    /// Queue `key` now at `priority` (an already queued key keeps the higher
    /// of its priority and this one).
    pub fn add(&mut self, key: K, priority: Priority) {
        self.stats.adds += 1;
        if self.processing.contains_key(&key) {
            let slot = self.dirty.entry(key).or_insert(priority);
            *slot = (*slot).max(priority);
            return;
        }
        // A delayed entry not yet due is consumed by the add (the pass sets
        // its timer again) and its priority with it: that priority is for
        // the timer's instant. Kept, a plugin's normal-priority timer would
        // lift every low-priority add before it (a start-up pass's own
        // child coming back) ahead of the start-up passes still waiting.
        if let Some((at, seq, _)) = self.waiting_at.remove(&key) {
            self.waiting.remove(&(at, seq));
        }
        self.make_ready(key, priority);
    }

    /// Queue `key` at `at` (or sooner if it already waits), at `priority` (or
    /// higher if it already waits); a key ready now is left as it is.
    pub fn add_at(&mut self, key: K, at: Instant, priority: Priority, now: Instant) {
        if at <= now {
            return self.add(key, priority);
        }
        if self.processing.contains_key(&key) {
            let slot = self.after_processing.entry(key).or_insert((at, priority));
            *slot = (slot.0.min(at), slot.1.max(priority));
            return;
        }
        if self.queued.contains_key(&key) {
            // Already ready, which is sooner: that pass sets its timer again.
            // The timer's priority is for its instant and does not lift it.
            return;
        }
        let (at, priority) = match self.waiting_at.remove(&key) {
            Some((existing, seq, waited)) => {
                self.waiting.remove(&(existing, seq));
                (existing.min(at), waited.max(priority))
            }
            None => (at, priority),
        };
        let seq = self.next_seq();
        self.waiting.insert((at, seq), key.clone());
        self.waiting_at.insert(key, (at, seq, priority));
    }

    /// Moves due delayed keys to the ready lists.
    fn promote(&mut self, now: Instant) {
        while let Some((&(at, seq), _)) = self.waiting.first_key_value() {
            if at > now {
                break;
            }
            let key = self.waiting.remove(&(at, seq)).expect("present");
            let (_, _, priority) = self.waiting_at.remove(&key).expect("indexed with its entry");
            if !self.processing.contains_key(&key) {
                self.make_ready(key, priority);
            }
        }
    }

    /// The next key to process, marked as processing: the oldest of the
    /// highest priority, but a low-priority key after [`NORMAL_PER_LOW`]
    /// normal ones in a row.
    pub fn pop(&mut self, now: Instant) -> Option<K> {
        self.pop_with_priority(now).map(|(key, _)| key)
    }

    /// [`QueueState::pop`], with the priority the key was handed out at.
    pub fn pop_with_priority(&mut self, now: Instant) -> Option<(K, Priority)> {
        self.promote(now);
        let low_waits = !self.ready[Priority::Low.index()].is_empty();
        let normal_waits = !self.ready[Priority::Normal.index()].is_empty();
        let priority = if normal_waits && (!low_waits || self.normal_in_a_row < NORMAL_PER_LOW) {
            self.normal_in_a_row = if low_waits { self.normal_in_a_row + 1 } else { 0 };
            Priority::Normal
        } else if low_waits {
            self.normal_in_a_row = 0;
            Priority::Low
        } else {
            return None;
        };
        let (_, key) = self.ready[priority.index()].pop_first().expect("checked non-empty");
        self.queued.remove(&key);
        self.processing.insert(key.clone(), priority);
        Some((key, priority))
    }

    /// When the soonest delayed key becomes due.
    pub fn next_deadline(&self) -> Option<Instant> {
        self.waiting.first_key_value().map(|(&(at, _), _)| at)
    }

    /// Ends processing of `key`; returns the delay scheduled, if any. The
    /// requeue keeps the priority the key was handed out at, unless the
    /// outcome names one.
    pub fn finish(&mut self, key: K, outcome: Outcome, now: Instant) -> Option<Duration> {
        let handed_out = self.processing.remove(&key).unwrap_or(Priority::Normal);
        let pending = self.after_processing.remove(&key);
        let (delay, priority) = match outcome {
            Outcome::Success { requeue_after, priority } => {
                self.failures.remove(&key);
                (requeue_after, priority.unwrap_or(handed_out))
            }
            Outcome::Error => {
                let n = self.failures.entry(key.clone()).or_insert(0);
                *n = n.saturating_add(1);
                self.stats.retries += 1;
                (Some(self.backoff.delay(*n)), handed_out)
            }
            Outcome::RequeueNow => (Some(Duration::ZERO), handed_out),
        };
        if let Some(dirty) = self.dirty.remove(&key) {
            self.add(key.clone(), dirty);
        }
        if let Some((at, p)) = pending {
            self.add_at(key.clone(), at, p, now);
        }
        if let Some(d) = delay {
            self.add_at(key, now + d, priority, now);
        }
        delay
    }

    /// The priority `key` was handed out at, while it is being processed.
    pub fn processing_priority(&self, key: &K) -> Option<Priority> {
        self.processing.get(key).copied()
    }

    /// Forgets a key that no longer exists (its backoff and delayed entries).
    pub fn forget(&mut self, key: &K) {
        self.failures.remove(key);
        if let Some((at, seq, _)) = self.waiting_at.remove(key) {
            self.waiting.remove(&(at, seq));
        }
    }

    /// Consecutive failures of `key`.
    pub fn failures(&self, key: &K) -> u32 {
        self.failures.get(key).copied().unwrap_or(0)
    }

    /// Keys ready now (client-go's `workqueue_depth`).
    pub fn depth(&self) -> usize {
        self.queued.len()
    }

    /// Keys ready now at `priority` (`workqueue_depth{priority}`).
    pub fn depth_at(&self, priority: Priority) -> usize {
        self.ready[priority.index()].len()
    }

    pub fn stats(&self) -> QueueStats {
        self.stats
    }
}

/// The async queue workers share.
#[derive(Debug)]
pub struct WorkQueue<K> {
    state: Mutex<(QueueState<K>, bool)>,
    notify: Notify,
}

impl<K: Clone + Eq + Hash + Ord> WorkQueue<K> {
    pub fn new(backoff: Backoff) -> Self {
        Self { state: Mutex::new((QueueState::new(backoff), false)), notify: Notify::new() }
    }

    /// Queues `key` at `priority` (see [`QueueState::add`]).
    pub fn add(&self, key: K, priority: Priority) {
        let mut guard = self.state.lock().unwrap();
        // A timer already due is ready with its own priority before the add meets it.
        guard.0.promote(Instant::now());
        guard.0.add(key, priority);
        drop(guard);
        self.notify.notify_waiters();
    }

    pub fn add_after(&self, key: K, after: Duration, priority: Priority) {
        let now = Instant::now();
        self.state.lock().unwrap().0.add_at(key, now + after, priority, now);
        self.notify.notify_waiters();
    }

    pub fn finish(&self, key: K, outcome: Outcome) -> Option<Duration> {
        let d = self.state.lock().unwrap().0.finish(key, outcome, Instant::now());
        self.notify.notify_waiters();
        d
    }

    pub fn forget(&self, key: &K) {
        self.state.lock().unwrap().0.forget(key);
    }

    pub fn depth(&self) -> usize {
        self.state.lock().unwrap().0.depth()
    }

    /// The priority `key` was handed out at, while it is being processed.
    pub fn processing_priority(&self, key: &K) -> Option<Priority> {
        self.state.lock().unwrap().0.processing_priority(key)
    }

    pub fn depth_at(&self, priority: Priority) -> usize {
        self.state.lock().unwrap().0.depth_at(priority)
    }

    pub fn stats(&self) -> QueueStats {
        self.state.lock().unwrap().0.stats()
    }

    /// Stop handing out keys; [`WorkQueue::next`] returns `None` from now on.
    pub fn shut_down(&self) {
        self.state.lock().unwrap().1 = true;
        self.notify.notify_waiters();
    }

    /// The next key to process; `None` once shut down.
    pub async fn next(&self) -> Option<K> {
        loop {
            let notified = self.notify.notified();
            tokio::pin!(notified);
            notified.as_mut().enable();
            let deadline = {
                let mut guard = self.state.lock().unwrap();
                let (state, shut) = &mut *guard;
                if *shut {
                    return None;
                }
                if let Some(key) = state.pop(Instant::now()) {
                    return Some(key);
                }
                state.next_deadline()
            };
            match deadline {
                Some(at) => {
                    tokio::select! {
                        _ = notified => {}
                        _ = tokio::time::sleep_until(at) => {}
                    }
                }
                None => notified.await,
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const N: Priority = Priority::Normal;
    const L: Priority = Priority::Low;
    const DONE: Outcome = Outcome::Success { requeue_after: None, priority: None };

    fn q() -> QueueState<&'static str> {
        QueueState::new(Backoff::default())
    }

    #[test]
    fn a_key_added_twice_is_handed_out_once() {
        let mut q = q();
        let now = Instant::now();
        q.add("a", N);
        q.add("a", N);
        assert_eq!(q.depth(), 1);
        assert_eq!(q.pop(now), Some("a"));
        assert_eq!(q.pop(now), None);
        assert_eq!(q.stats().adds, 2);
    }

    #[test]
    fn a_key_in_process_is_not_handed_out_again_until_finished() {
        let mut q = q();
        let now = Instant::now();
        q.add("a", N);
        assert_eq!(q.pop(now), Some("a"));
        q.add("a", N);
        assert_eq!(q.pop(now), None, "never two reconciles of one key at once");
        q.finish("a", DONE, now);
        assert_eq!(q.pop(now), Some("a"), "the change seen during processing is not lost");
    }

    #[test]
    fn other_keys_proceed_while_one_is_processing() {
        let mut q = q();
        let now = Instant::now();
        q.add("a", N);
        q.add("b", N);
        assert_eq!(q.pop(now), Some("a"));
        assert_eq!(q.pop(now), Some("b"));
    }

    #[test]
    fn requeue_after_comes_due_at_its_time_and_the_soonest_wins() {
        let mut q = q();
        let t0 = Instant::now();
        q.add_at("a", t0 + Duration::from_secs(10), N, t0);
        q.add_at("a", t0 + Duration::from_secs(3), N, t0);
        q.add_at("a", t0 + Duration::from_secs(7), N, t0);
        assert_eq!(q.next_deadline(), Some(t0 + Duration::from_secs(3)));
        assert_eq!(q.pop(t0 + Duration::from_secs(2)), None);
        assert_eq!(q.pop(t0 + Duration::from_secs(3)), Some("a"));
        assert_eq!(q.next_deadline(), None);
    }

    #[test]
    fn an_immediate_add_overrides_a_delayed_one() {
        let mut q = q();
        let t0 = Instant::now();
        q.add_at("a", t0 + Duration::from_secs(10), N, t0);
        q.add("a", N);
        assert_eq!(q.pop(t0), Some("a"));
        q.finish("a", DONE, t0);
        assert_eq!(q.pop(t0 + Duration::from_secs(11)), None, "the delayed entry was consumed");
    }

    #[test]
    fn errors_back_off_exponentially_from_5ms_and_success_resets() {
        let mut q = q();
        let t0 = Instant::now();
        let mut delays = Vec::new();
        q.add("a", N);
        let mut now = t0;
        for _ in 0..4 {
            assert_eq!(q.pop(now), Some("a"));
            let d = q.finish("a", Outcome::Error, now).unwrap();
            delays.push(d);
            assert_eq!(q.pop(now + d - Duration::from_nanos(1)), None, "not before the backoff");
            now += d;
        }
        assert_eq!(delays, [5, 10, 20, 40].map(Duration::from_millis));
        assert_eq!(q.stats().retries, 4);
        assert_eq!(q.pop(now), Some("a"));
        q.finish("a", DONE, now);
        assert_eq!(q.failures(&"a"), 0);
        q.add("a", N);
        assert_eq!(q.pop(now), Some("a"));
        assert_eq!(q.finish("a", Outcome::Error, now), Some(Duration::from_millis(5)));
    }

    #[test]
    fn backoff_is_capped() {
        let b = Backoff { base: Duration::from_millis(5), max: Duration::from_secs(6 * 3600) };
        assert_eq!(b.delay(1), Duration::from_millis(5));
        assert_eq!(b.delay(30), Duration::from_secs(6 * 3600));
        assert_eq!(b.delay(u32::MAX), Duration::from_secs(6 * 3600));
    }

    #[test]
    fn a_change_during_a_failed_reconcile_is_retried_at_once() {
        let mut q = q();
        let t0 = Instant::now();
        q.add("a", N);
        assert_eq!(q.pop(t0), Some("a"));
        q.add("a", N);
        q.finish("a", Outcome::Error, t0);
        assert_eq!(q.pop(t0), Some("a"));
    }

    #[test]
    fn requeue_now_does_not_count_as_a_failure() {
        let mut q = q();
        let t0 = Instant::now();
        q.add("a", N);
        q.pop(t0);
        assert_eq!(q.finish("a", Outcome::RequeueNow, t0), Some(Duration::ZERO));
        assert_eq!(q.failures(&"a"), 0);
        assert_eq!(q.pop(t0), Some("a"));
    }

    #[test]
    fn a_delayed_add_during_processing_is_kept_for_after() {
        let mut q = q();
        let t0 = Instant::now();
        q.add("a", N);
        q.pop(t0);
        q.add_at("a", t0 + Duration::from_secs(5), N, t0);
        q.finish("a", DONE, t0);
        assert_eq!(q.pop(t0), None);
        assert_eq!(q.pop(t0 + Duration::from_secs(5)), Some("a"));
    }

    #[test]
    fn forget_drops_delayed_entries_and_backoff() {
        let mut q = q();
        let t0 = Instant::now();
        q.add("a", N);
        q.pop(t0);
        q.finish("a", Outcome::Error, t0);
        q.forget(&"a");
        assert_eq!(q.failures(&"a"), 0);
        assert_eq!(q.pop(t0 + Duration::from_secs(1)), None);
    }

    #[test]
    fn a_fresh_change_is_handed_out_before_keys_from_the_initial_list() {
        let mut q = q();
        let now = Instant::now();
        for key in ["a", "b", "c"] {
            q.add(key, L);
        }
        q.add("edit", N);
        assert_eq!((q.depth_at(N), q.depth_at(L), q.depth()), (1, 3, 4));
        assert_eq!(q.pop_with_priority(now), Some(("edit", N)));
        assert_eq!([q.pop(now), q.pop(now), q.pop(now)], [Some("a"), Some("b"), Some("c")], "low keys in arrival order");
    }

    #[test]
    fn an_add_raises_a_queued_keys_priority_and_never_lowers_it() {
        let mut q = q();
        let now = Instant::now();
        q.add("a", L);
        q.add("b", L);
        q.add("b", N);
        assert_eq!((q.depth_at(N), q.depth_at(L)), (1, 1), "raised, not queued twice");
        q.add("b", L);
        assert_eq!((q.depth_at(N), q.depth_at(L)), (1, 1), "a low add of a normal key leaves it normal");
        assert_eq!(q.pop_with_priority(now), Some(("b", N)));
        assert_eq!(q.pop_with_priority(now), Some(("a", L)));
        assert_eq!(q.pop(now), None);
    }

    #[test]
    fn a_low_priority_key_is_served_under_a_steady_stream_of_fresh_changes() {
        let mut q = QueueState::new(Backoff::default());
        let now = Instant::now();
        q.add("startup".to_string(), L);
        let mut pops = 0;
        for i in 0.. {
            // Two fresh changes arrive for every key handed out: the normal
            // keys never run out.
            q.add(format!("fresh-{}", 2 * i), N);
            q.add(format!("fresh-{}", 2 * i + 1), N);
            let got = q.pop(now).unwrap();
            q.finish(got.clone(), DONE, now);
            pops += 1;
            if got == "startup" {
                break;
            }
            assert!(pops <= NORMAL_PER_LOW, "starved");
        }
        assert_eq!(pops, NORMAL_PER_LOW + 1, "served right after {NORMAL_PER_LOW} fresh keys");
        assert!(q.depth_at(N) > 0, "fresh changes were still waiting when it was served");
    }

    #[test]
    fn requeues_keep_the_priority_the_key_was_handed_out_at_unless_the_outcome_names_one() {
        let mut q = q();
        let t0 = Instant::now();
        let later = t0 + Duration::from_secs(10);
        q.add("a", L);
        q.add("b", L);
        q.pop(t0);
        q.pop(t0);
        q.finish("a", Outcome::Success { requeue_after: Some(Duration::from_secs(10)), priority: None }, t0);
        q.finish("b", Outcome::Success { requeue_after: Some(Duration::from_secs(10)), priority: Some(N) }, t0);
        // Both come due at once, `a` first: the priorities decide.
        assert_eq!(q.pop_with_priority(later), Some(("b", N)), "the outcome's priority");
        assert_eq!(q.pop_with_priority(later), Some(("a", L)), "the priority it was handed out at");
        q.finish("a", Outcome::Error, later);
        assert_eq!(q.pop_with_priority(later + Duration::from_secs(1)), Some(("a", L)), "a retry after an error too");
    }

    #[test]
    fn a_change_during_processing_is_queued_after_at_the_higher_priority() {
        let mut q = q();
        let t0 = Instant::now();
        q.add("a", L);
        q.add("b", L);
        q.pop(t0);
        q.add("a", L);
        q.add("a", N);
        q.finish("a", DONE, t0);
        assert_eq!(q.pop_with_priority(t0), Some(("a", N)));
    }

    #[test]
    fn a_delayed_key_keeps_the_higher_priority_and_the_sooner_time() {
        let mut q = q();
        let t0 = Instant::now();
        q.add_at("a", t0 + Duration::from_secs(10), N, t0);
        q.add_at("a", t0 + Duration::from_secs(3), L, t0);
        assert_eq!(q.next_deadline(), Some(t0 + Duration::from_secs(3)));
        q.add("b", L);
        assert_eq!(q.pop_with_priority(t0 + Duration::from_secs(3)), Some(("a", N)));
        // An immediate low add (a resync) of a key whose normal timer is not
        // due yet runs low now; the timer is consumed (the pass sets it again).
        q.add_at("c", t0 + Duration::from_secs(60), N, t0);
        q.add("c", L);
        assert_eq!(q.pop_with_priority(t0 + Duration::from_secs(3)), Some(("b", L)));
        assert_eq!(q.pop_with_priority(t0 + Duration::from_secs(3)), Some(("c", L)));
        assert_eq!(q.next_deadline(), None, "the timer was consumed");
        // A timer already due keeps its priority when an add meets it.
        q.add_at("d", t0 + Duration::from_secs(5), N, t0);
        q.promote(t0 + Duration::from_secs(5));
        q.add("d", L);
        assert_eq!(q.pop_with_priority(t0 + Duration::from_secs(5)), Some(("d", N)));
    }

    #[test]
    fn a_later_timer_does_not_lift_a_key_ready_now() {
        // A start-up pass (low) whose own child came back while it ran, and
        // which asked for its next run in a minute at normal priority.
        let mut q = q();
        let t0 = Instant::now();
        q.add("a", L);
        q.add("b", L);
        assert_eq!(q.pop(t0), Some("a"));
        q.add("a", L);
        q.finish("a", Outcome::Success { requeue_after: Some(Duration::from_secs(60)), priority: Some(N) }, t0);
        assert_eq!(q.pop_with_priority(t0), Some(("b", L)), "the earlier start-up key first");
        assert_eq!(q.pop_with_priority(t0), Some(("a", L)));
    }

    #[tokio::test(start_paused = true)]
    async fn workers_wait_for_delayed_keys_and_stop_on_shutdown() {
        let q = std::sync::Arc::new(WorkQueue::new(Backoff::default()));
        q.add_after("a", Duration::from_secs(60), N);
        let got = tokio::time::timeout(Duration::from_secs(120), q.next()).await.unwrap();
        assert_eq!(got, Some("a"));
        let q2 = q.clone();
        let waiter = tokio::spawn(async move { q2.next().await });
        tokio::task::yield_now().await;
        q.shut_down();
        assert_eq!(waiter.await.unwrap(), None);
    }
}
