//! How one reconcile ended: what the queue does next and the `result` label
//! of `controller_runtime_reconcile_total`, in one enum so no call site
//! compares labels as strings.

use super::actions::policy::Requeue;
use super::queue::Outcome;

/// How one reconcile ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Ended {
    /// Done until something changes.
    Done,
    /// Done; the plugin asked to be called again after a delay, at the
    /// priority it asked for: [`Priority::Normal`](super::queue::Priority)
    /// for `requeue-after`, whatever priority this pass had, as it is work
    /// the plugin scheduled (a CronJob's next run), not a start-up re-check
    /// (controller-runtime's requeue keeps the pass's priority, so after a
    /// restart every schedule stays low and waits behind the status passes
    /// its own Jobs start: a burst of 1,000 due CronJobs then made its last
    /// Job 2.8x later); low only when the plugin asked for it (contract
    /// 0.4), as controller-runtime's `Result.Priority` does.
    RequeueAfter(Requeue),
    /// A write met a newer object (409): again at once, no backoff.
    Conflict,
    /// Failed: again after the key's backoff.
    Failed,
    /// Failed in a way only a change can mend (a non-retryable plugin
    /// error, reported): no backoff, no timer ([`super::permanent`]).
    FailedForGood,
}

impl Ended {
    /// What the work queue does with the key next.
    pub fn outcome(self) -> Outcome {
        match self {
            Ended::Done | Ended::FailedForGood => Outcome::Success { requeue_after: None, priority: None },
            Ended::RequeueAfter(r) => Outcome::Success { requeue_after: Some(r.after), priority: Some(r.priority) },
            Ended::Conflict => Outcome::RequeueNow,
            Ended::Failed => Outcome::Error,
        }
    }

    /// The `result` label, controller-runtime's values.
    pub fn label(self) -> &'static str {
        match self {
            Ended::Done => "success",
            Ended::RequeueAfter(_) => "requeue_after",
            Ended::Conflict => "requeue",
            Ended::Failed | Ended::FailedForGood => "error",
        }
    }

    /// Whether the pass failed (its write of the verdict may still decide
    /// between a conflict and a failure).
    pub fn failed(self) -> bool {
        matches!(self, Ended::Failed | Ended::FailedForGood)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::queue::Priority;
    use std::time::Duration;

    #[test]
    fn every_end_has_controller_runtimes_label_and_a_queue_outcome() {
        let after = Duration::from_secs(5);
        assert_eq!(Ended::Done.label(), "success");
        assert_eq!(
            Ended::RequeueAfter(Requeue { after, priority: Priority::Normal }).outcome(),
            Outcome::Success { requeue_after: Some(after), priority: Some(Priority::Normal) },
            "the plugin's timer is normal priority even after a low-priority pass"
        );
        assert_eq!(
            Ended::RequeueAfter(Requeue { after, priority: Priority::Low }).outcome(),
            Outcome::Success { requeue_after: Some(after), priority: Some(Priority::Low) },
            "a plugin that asked for a low-priority requeue gets one"
        );
        assert_eq!(Ended::Conflict.outcome(), Outcome::RequeueNow);
        assert_eq!(Ended::Failed.outcome(), Outcome::Error);
        assert_eq!(Ended::FailedForGood.label(), "error");
        assert_eq!(
            Ended::FailedForGood.outcome(),
            Outcome::Success { requeue_after: None, priority: None },
            "a permanent error waits for a change, not a timer"
        );
    }
}
