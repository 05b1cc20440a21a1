//! Echoes: the watch events of the children a low-priority pass creates.
//!
//! Such an event is the pass's own write coming back, not news from outside,
//! so the parent it queues stays at the pass's low priority; a child's
//! change made by anyone else queues its parent at normal priority. Without
//! this, every start-up pass that creates a child (1,000 CronJobs due when
//! the host starts) queues its parent's next pass, the one that records the
//! child in the status, ahead of the start-up passes still waiting, and the
//! last child is made only after nearly every status write.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use operator_plugin_sdk::GroupVersionKind;

/// How long a create's echo is waited for. A watch delivers within
/// milliseconds; a create whose event never comes (the child was deleted
/// first) must not lower a later change of the same name for long.
const WINDOW: Duration = Duration::from_secs(30);
/// Past this many entries, expired ones are dropped on the next [`Echoes::expect`].
const PRUNE_AT: usize = 4096;

type ChildName = (GroupVersionKind, String, String);

/// Children created by low-priority passes whose ADDED event has not come yet.
#[derive(Debug, Default)]
pub struct Echoes {
    pending: Mutex<HashMap<ChildName, Instant>>,
}

impl Echoes {
    /// A low-priority pass is about to create `namespace/name`.
    pub fn expect(&self, gvk: &GroupVersionKind, namespace: &str, name: &str) {
        let mut pending = self.pending.lock().unwrap();
        let now = Instant::now();
        if pending.len() >= PRUNE_AT {
            pending.retain(|_, at| now.duration_since(*at) < WINDOW);
        }
        pending.insert((gvk.clone(), namespace.to_owned(), name.to_owned()), now);
    }

    /// The create failed: no event will come for it.
    pub fn cancel(&self, gvk: &GroupVersionKind, namespace: &str, name: &str) {
        self.pending.lock().unwrap().remove(&(gvk.clone(), namespace.to_owned(), name.to_owned()));
    }

    /// Whether the ADDED event of `namespace/name` is a low-priority pass's
    /// own create (once: the entry is consumed).
    pub fn take(&self, gvk: &GroupVersionKind, namespace: &str, name: &str) -> bool {
        let mut pending = self.pending.lock().unwrap();
        // Every child's ADDED event asks; with no low pass running there is
        // nothing to look up (and no key to build).
        if pending.is_empty() {
            return false;
        }
        let created = pending.remove(&(gvk.clone(), namespace.to_owned(), name.to_owned()));
        created.is_some_and(|at| at.elapsed() < WINDOW)
    }

    #[cfg(test)]
    fn len(&self) -> usize {
        self.pending.lock().unwrap().len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn job() -> GroupVersionKind {
        GroupVersionKind { group: "batch".into(), version: "v1".into(), kind: "Job".into() }
    }

    #[test]
    fn an_expected_create_is_an_echo_once() {
        let echoes = Echoes::default();
        echoes.expect(&job(), "ns", "a");
        assert!(echoes.take(&job(), "ns", "a"));
        assert!(!echoes.take(&job(), "ns", "a"), "a second ADDED of the name is someone else's");
    }

    #[test]
    fn another_name_namespace_or_kind_is_not_an_echo() {
        let echoes = Echoes::default();
        echoes.expect(&job(), "ns", "a");
        assert!(!echoes.take(&job(), "ns", "b"));
        assert!(!echoes.take(&job(), "other", "a"));
        let pod = GroupVersionKind { group: String::new(), version: "v1".into(), kind: "Pod".into() };
        assert!(!echoes.take(&pod, "ns", "a"));
        assert!(echoes.take(&job(), "ns", "a"));
    }

    #[test]
    fn a_failed_create_is_forgotten() {
        let echoes = Echoes::default();
        echoes.expect(&job(), "ns", "a");
        echoes.cancel(&job(), "ns", "a");
        assert_eq!(echoes.len(), 0);
        assert!(!echoes.take(&job(), "ns", "a"));
    }
}
