//! The workqueue: client-go's rate-limited delaying queue, as one explicit
//! state machine ([`QueueState`], time passed in, so tests need no clock)
//! and a thin async wrapper ([`WorkQueue`]) that workers pull from.
//!
//! Guarantees, as controller-runtime's:
//! - a key is queued at most once (dedupe);
//! - a key being processed is never handed out again until [`QueueState::finish`];
//!   adds during processing mark it dirty and it is queued again on finish;
//! - delayed adds keep the soonest deadline;
//! - errors back off per key, `base × 2^(failures-1)` capped, reset on success.

use std::collections::{BTreeMap, HashMap, HashSet, VecDeque};
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
    /// Done; optionally come back after a delay. Resets the backoff.
    Success { requeue_after: Option<Duration> },
    /// Failed: come back after the key's next backoff delay.
    Error,
    /// Come back at once without counting a failure (409 Conflict: the cache
    /// was stale, the next pass will see the newer object).
    RequeueNow,
}

/// The queue's state. Pure: every method takes `now`.
#[derive(Debug)]
pub struct QueueState<K> {
    ready: VecDeque<K>,
    queued: HashSet<K>,
    waiting: BTreeMap<(Instant, u64), K>,
    waiting_at: HashMap<K, (Instant, u64)>,
    processing: HashSet<K>,
    dirty: HashSet<K>,
    after_processing: HashMap<K, Instant>,
    failures: HashMap<K, u32>,
    backoff: Backoff,
    seq: u64,
    stats: QueueStats,
}

impl<K: Clone + Eq + Hash + Ord> QueueState<K> {
    pub fn new(backoff: Backoff) -> Self {
        Self {
            ready: VecDeque::new(),
            queued: HashSet::new(),
            waiting: BTreeMap::new(),
            waiting_at: HashMap::new(),
            processing: HashSet::new(),
            dirty: HashSet::new(),
            after_processing: HashMap::new(),
            failures: HashMap::new(),
            backoff,
            seq: 0,
            stats: QueueStats::default(),
        }
    }

    /// Queue `key` now.
    pub fn add(&mut self, key: K) {
        self.stats.adds += 1;
        if self.processing.contains(&key) {
            self.dirty.insert(key);
            return;
        }
        if self.queued.contains(&key) {
            return;
        }
        if let Some(at) = self.waiting_at.remove(&key) {
            self.waiting.remove(&at);
        }
        self.queued.insert(key.clone());
        self.ready.push_back(key);
    }

    /// Queue `key` at `at` (or sooner if it already is).
    pub fn add_at(&mut self, key: K, at: Instant, now: Instant) {
        if at <= now {
            return self.add(key);
        }
        if self.processing.contains(&key) {
            let slot = self.after_processing.entry(key).or_insert(at);
            *slot = (*slot).min(at);
            return;
        }
        if self.queued.contains(&key) {
            return;
        }
        if let Some(&(existing, seq)) = self.waiting_at.get(&key) {
            if existing <= at {
                return;
            }
            self.waiting.remove(&(existing, seq));
        }
        self.seq += 1;
        self.waiting.insert((at, self.seq), key.clone());
        self.waiting_at.insert(key, (at, self.seq));
    }

    /// Moves due delayed keys to the ready list.
    fn promote(&mut self, now: Instant) {
        while let Some((&(at, seq), _)) = self.waiting.first_key_value() {
            if at > now {
                break;
            }
            let key = self.waiting.remove(&(at, seq)).expect("present");
            self.waiting_at.remove(&key);
            if !self.queued.contains(&key) && !self.processing.contains(&key) {
                self.queued.insert(key.clone());
                self.ready.push_back(key);
            }
        }
    }

    /// The next key to process, marked as processing.
    pub fn pop(&mut self, now: Instant) -> Option<K> {
        self.promote(now);
        let key = self.ready.pop_front()?;
        self.queued.remove(&key);
        self.processing.insert(key.clone());
        Some(key)
    }

    /// When the soonest delayed key becomes due.
    pub fn next_deadline(&self) -> Option<Instant> {
        self.waiting.first_key_value().map(|(&(at, _), _)| at)
    }

    /// Ends processing of `key`; returns the delay scheduled, if any.
    pub fn finish(&mut self, key: K, outcome: Outcome, now: Instant) -> Option<Duration> {
        self.processing.remove(&key);
        let pending = self.after_processing.remove(&key);
        let delay = match outcome {
            Outcome::Success { requeue_after } => {
                self.failures.remove(&key);
                requeue_after
            }
            Outcome::Error => {
                let n = self.failures.entry(key.clone()).or_insert(0);
                *n = n.saturating_add(1);
                self.stats.retries += 1;
                Some(self.backoff.delay(*n))
            }
            Outcome::RequeueNow => Some(Duration::ZERO),
        };
        if self.dirty.remove(&key) {
            self.add(key.clone());
        }
        if let Some(at) = pending {
            self.add_at(key.clone(), at, now);
        }
        if let Some(d) = delay {
            self.add_at(key, now + d, now);
        }
        delay
    }

    /// Forgets a key that no longer exists (its backoff and delayed entries).
    pub fn forget(&mut self, key: &K) {
        self.failures.remove(key);
        if let Some(at) = self.waiting_at.remove(key) {
            self.waiting.remove(&at);
        }
    }

    /// Consecutive failures of `key`.
    pub fn failures(&self, key: &K) -> u32 {
        self.failures.get(key).copied().unwrap_or(0)
    }

    /// Keys ready now (client-go's `workqueue_depth`).
    pub fn depth(&self) -> usize {
        self.ready.len()
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

    pub fn add(&self, key: K) {
        self.state.lock().unwrap().0.add(key);
        self.notify.notify_waiters();
    }

    pub fn add_after(&self, key: K, after: Duration) {
        let now = Instant::now();
        self.state.lock().unwrap().0.add_at(key, now + after, now);
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

    fn q() -> QueueState<&'static str> {
        QueueState::new(Backoff::default())
    }

    #[test]
    fn a_key_added_twice_is_handed_out_once() {
        let mut q = q();
        let now = Instant::now();
        q.add("a");
        q.add("a");
        assert_eq!(q.depth(), 1);
        assert_eq!(q.pop(now), Some("a"));
        assert_eq!(q.pop(now), None);
        assert_eq!(q.stats().adds, 2);
    }

    #[test]
    fn a_key_in_process_is_not_handed_out_again_until_finished() {
        let mut q = q();
        let now = Instant::now();
        q.add("a");
        assert_eq!(q.pop(now), Some("a"));
        q.add("a");
        assert_eq!(q.pop(now), None, "never two reconciles of one key at once");
        q.finish("a", Outcome::Success { requeue_after: None }, now);
        assert_eq!(q.pop(now), Some("a"), "the change seen during processing is not lost");
    }

    #[test]
    fn other_keys_proceed_while_one_is_processing() {
        let mut q = q();
        let now = Instant::now();
        q.add("a");
        q.add("b");
        assert_eq!(q.pop(now), Some("a"));
        assert_eq!(q.pop(now), Some("b"));
    }

    #[test]
    fn requeue_after_comes_due_at_its_time_and_the_soonest_wins() {
        let mut q = q();
        let t0 = Instant::now();
        q.add_at("a", t0 + Duration::from_secs(10), t0);
        q.add_at("a", t0 + Duration::from_secs(3), t0);
        q.add_at("a", t0 + Duration::from_secs(7), t0);
        assert_eq!(q.next_deadline(), Some(t0 + Duration::from_secs(3)));
        assert_eq!(q.pop(t0 + Duration::from_secs(2)), None);
        assert_eq!(q.pop(t0 + Duration::from_secs(3)), Some("a"));
        assert_eq!(q.next_deadline(), None);
    }

    #[test]
    fn an_immediate_add_overrides_a_delayed_one() {
        let mut q = q();
        let t0 = Instant::now();
        q.add_at("a", t0 + Duration::from_secs(10), t0);
        q.add("a");
        assert_eq!(q.pop(t0), Some("a"));
        q.finish("a", Outcome::Success { requeue_after: None }, t0);
        assert_eq!(q.pop(t0 + Duration::from_secs(11)), None, "the delayed entry was consumed");
    }

    #[test]
    fn errors_back_off_exponentially_from_5ms_and_success_resets() {
        let mut q = q();
        let t0 = Instant::now();
        let mut delays = Vec::new();
        q.add("a");
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
        q.finish("a", Outcome::Success { requeue_after: None }, now);
        assert_eq!(q.failures(&"a"), 0);
        q.add("a");
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
        q.add("a");
        assert_eq!(q.pop(t0), Some("a"));
        q.add("a");
        q.finish("a", Outcome::Error, t0);
        assert_eq!(q.pop(t0), Some("a"));
    }

    #[test]
    fn requeue_now_does_not_count_as_a_failure() {
        let mut q = q();
        let t0 = Instant::now();
        q.add("a");
        q.pop(t0);
        assert_eq!(q.finish("a", Outcome::RequeueNow, t0), Some(Duration::ZERO));
        assert_eq!(q.failures(&"a"), 0);
        assert_eq!(q.pop(t0), Some("a"));
    }

    #[test]
    fn a_delayed_add_during_processing_is_kept_for_after() {
        let mut q = q();
        let t0 = Instant::now();
        q.add("a");
        q.pop(t0);
        q.add_at("a", t0 + Duration::from_secs(5), t0);
        q.finish("a", Outcome::Success { requeue_after: None }, t0);
        assert_eq!(q.pop(t0), None);
        assert_eq!(q.pop(t0 + Duration::from_secs(5)), Some("a"));
    }

    #[test]
    fn forget_drops_delayed_entries_and_backoff() {
        let mut q = q();
        let t0 = Instant::now();
        q.add("a");
        q.pop(t0);
        q.finish("a", Outcome::Error, t0);
        q.forget(&"a");
        assert_eq!(q.failures(&"a"), 0);
        assert_eq!(q.pop(t0 + Duration::from_secs(1)), None);
    }

    #[tokio::test(start_paused = true)]
    async fn workers_wait_for_delayed_keys_and_stop_on_shutdown() {
        let q = std::sync::Arc::new(WorkQueue::new(Backoff::default()));
        q.add_after("a", Duration::from_secs(60));
        let got = tokio::time::timeout(Duration::from_secs(120), q.next()).await.unwrap();
        assert_eq!(got, Some("a"));
        let q2 = q.clone();
        let waiter = tokio::spawn(async move { q2.next().await });
        tokio::task::yield_now().await;
        q.shut_down();
        assert_eq!(waiter.await.unwrap(), None);
    }
}
