//! The kubebuilder book's status conditions: `Available`, `Progressing` and
//! `Degraded`, kept beside the plugin's own `Valid` (and the host's
//! `Reconciled`) as `meta.SetStatusCondition` keeps them: one entry per
//! type, `lastTransitionTime` moved only when the status changes, and
//! `observedGeneration` the generation this pass read.
//!
//! Every reconcile applies the book's table, in this order:
//!
//! | when | conditions set |
//! | --- | --- |
//! | none of the three types recorded yet | `Progressing=Unknown` `Reconciling`, before anything else |
//! | the child Jobs cannot be read | `Degraded=True` `ReconciliationError` |
//! | `spec.suspend` | `Available=False` `Suspended` |
//! | else any failed child Job | `Degraded=True` and `Available=False`, `JobsFailed` ("N job(s) have failed") |
//! | else any active child Job | `Progressing=True` and `Available=True`, `JobsActive` |
//! | else | `Available=True` `AllJobsCompleted`, `Progressing=False` `NoJobsActive` |
//!
//! A type a branch does not name keeps what it had, as in the book: a
//! `Degraded=True` stays until something sets it again.
//!
//! The book's "no conditions yet" is read as "none of the book's types yet":
//! `Valid` and `Reconciled` are this project's and must not hide the first
//! pass of a CronJob written before these conditions existed.

use operator_plugin_sdk::{Condition, Time, conditions};

use crate::api::CronJobStatus;

pub const AVAILABLE: &str = "Available";
pub const PROGRESSING: &str = "Progressing";
pub const DEGRADED: &str = "Degraded";

/// What the table reads from the child Jobs and the spec.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Observed {
    pub suspended: bool,
    /// Children with a `Failed=True` condition.
    pub failed: usize,
    /// Children with neither `Complete=True` nor `Failed=True`.
    pub active: usize,
}

/// Sets the book's conditions in `status` for one reconcile that could read
/// its children.
pub fn set_from_children(status: &mut CronJobStatus, observed: Observed, generation: i64, now: Time) {
    let mut set = Setter { status, generation, now };
    set.starting();
    if observed.suspended {
        set.condition(AVAILABLE, Status::False, "Suspended", "CronJob is suspended".into());
    } else if observed.failed > 0 {
        let message = format!("{} job(s) have failed", observed.failed);
        set.condition(DEGRADED, Status::True, "JobsFailed", message.clone());
        set.condition(AVAILABLE, Status::False, "JobsFailed", message);
    } else if observed.active > 0 {
        let message = format!("{} job(s) are currently active", observed.active);
        set.condition(PROGRESSING, Status::True, "JobsActive", message.clone());
        set.condition(AVAILABLE, Status::True, "JobsActive", message);
    } else {
        set.condition(AVAILABLE, Status::True, "AllJobsCompleted", "All jobs have completed".into());
        set.condition(PROGRESSING, Status::False, "NoJobsActive", "No jobs are currently active".into());
    }
}

/// Sets the book's conditions in `status` for a reconcile whose child Jobs
/// could not be read (the book's failed List).
pub fn set_children_unreadable(status: &mut CronJobStatus, error: &str, generation: i64, now: Time) {
    let mut set = Setter { status, generation, now };
    set.starting();
    set.condition(DEGRADED, Status::True, "ReconciliationError", format!("cannot read the child Jobs: {error}"));
}

#[derive(Clone, Copy)]
enum Status {
    True,
    False,
    Unknown,
}

struct Setter<'a> {
    status: &'a mut CronJobStatus,
    generation: i64,
    now: Time,
}

impl Setter<'_> {
    /// The book's first step: `Progressing=Unknown` while no book condition is recorded.
    fn starting(&mut self) {
        let recorded = [AVAILABLE, PROGRESSING, DEGRADED].iter().any(|t| conditions::find(&self.status.conditions, t).is_some());
        if !recorded {
            self.condition(PROGRESSING, Status::Unknown, "Reconciling", "Starting reconciliation".into());
        }
    }

    fn condition(&mut self, type_: &str, status: Status, reason: &str, message: String) {
        let mut condition = Condition::new(type_, matches!(status, Status::True), reason, message).observed(self.generation);
        if matches!(status, Status::Unknown) {
            condition.status = "Unknown".into();
        }
        conditions::set(&mut self.status.conditions, condition, self.now);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(minute: i64) -> Time {
        Time::from_unix_millis(minute * 60_000)
    }

    fn find<'a>(status: &'a CronJobStatus, type_: &str) -> &'a Condition {
        conditions::find(&status.conditions, type_).unwrap_or_else(|| panic!("no {type_} condition in {status:?}"))
    }

    #[test]
    fn progressing_unknown_comes_first_only_while_no_book_condition_is_recorded() {
        let mut status = CronJobStatus::default();
        set_from_children(&mut status, Observed { suspended: true, ..Observed::default() }, 1, at(0));
        assert_eq!((find(&status, PROGRESSING).status.as_str(), find(&status, PROGRESSING).reason.as_str()), ("Unknown", "Reconciling"));
        assert_eq!(status.conditions[0].type_, PROGRESSING, "set before anything else");

        let mut already = CronJobStatus::default();
        already.conditions.push(Condition::new(DEGRADED, true, "JobsFailed", "1 job(s) have failed"));
        set_from_children(&mut already, Observed { suspended: true, ..Observed::default() }, 1, at(0));
        assert!(conditions::find(&already.conditions, PROGRESSING).is_none());
    }

    #[test]
    fn the_plugins_own_conditions_do_not_count_as_book_conditions() {
        let mut status = CronJobStatus::default();
        status.conditions.push(Condition::new("Valid", true, "Valid", "the spec can be scheduled"));
        status.conditions.push(Condition::new("Reconciled", true, "Succeeded", ""));
        set_from_children(&mut status, Observed { failed: 1, ..Observed::default() }, 1, at(0));
        assert_eq!(find(&status, PROGRESSING).reason, "Reconciling");
        assert_eq!(status.conditions.len(), 5);
    }

    #[test]
    fn one_entry_per_type_and_the_transition_time_moves_only_with_the_status() {
        let mut status = CronJobStatus::default();
        set_from_children(&mut status, Observed { active: 2, ..Observed::default() }, 1, at(0));
        set_from_children(&mut status, Observed { active: 1, ..Observed::default() }, 2, at(1));
        let available = find(&status, AVAILABLE);
        assert_eq!((available.status.as_str(), available.reason.as_str()), ("True", "JobsActive"));
        assert_eq!(available.message, "1 job(s) are currently active");
        assert_eq!(available.last_transition_time, at(0).to_rfc3339(), "still True: no transition");
        assert_eq!(available.observed_generation, Some(2));

        set_from_children(&mut status, Observed { failed: 3, ..Observed::default() }, 2, at(2));
        let available = find(&status, AVAILABLE);
        assert_eq!((available.status.as_str(), available.reason.as_str()), ("False", "JobsFailed"));
        assert_eq!(available.last_transition_time, at(2).to_rfc3339());
        assert_eq!(find(&status, DEGRADED).message, "3 job(s) have failed");
        assert_eq!(find(&status, PROGRESSING).last_transition_time, at(0).to_rfc3339(), "a type the branch does not name is kept");
        for type_ in [AVAILABLE, PROGRESSING, DEGRADED] {
            assert_eq!(status.conditions.iter().filter(|c| c.type_ == type_).count(), 1, "{type_}");
        }
    }

    #[test]
    fn unreadable_children_degrade_with_a_reconciliation_error() {
        let mut status = CronJobStatus::default();
        set_children_unreadable(&mut status, "child 0: invalid type", 4, at(0));
        let degraded = find(&status, DEGRADED);
        assert_eq!((degraded.status.as_str(), degraded.reason.as_str()), ("True", "ReconciliationError"));
        assert_eq!(degraded.message, "cannot read the child Jobs: child 0: invalid type");
        assert_eq!(degraded.observed_generation, Some(4));
        assert_eq!(find(&status, PROGRESSING).status, "Unknown");
        assert!(conditions::find(&status.conditions, AVAILABLE).is_none());
    }
}
