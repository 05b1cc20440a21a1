//! One level-based reconcile of a CronJob: the tutorial's steps 1-7 with
//! upstream Kubernetes' decisions and Events.
//!
//! 1. Sort the children into active, successful and failed Jobs, and note
//!    what changed since the stored status (SawCompletedJob, MissingJob,
//!    UnexpectedJob).
//! 2. Rebuild the status from the children: active references, the last
//!    scheduled time (the later of the stored one and the children's
//!    scheduled-time annotations, so a lost status write is recovered from
//!    the Jobs themselves) and the last successful time. The book's
//!    `Available`/`Progressing`/`Degraded` conditions are set from the
//!    children as sorted here (`status_conditions`), once `Valid` is.
//! 3. Delete finished Jobs beyond the history limits, oldest first.
//! 4. Stop on an invalid spec (Warning Event, `Valid=False` condition, no
//!    requeue), a parent being deleted, or a suspended CronJob.
//! 5. Find the most recent due run and the next one; honour
//!    `startingDeadlineSeconds`.
//! 6. Apply the concurrency policy and create the Job, named
//!    deterministically from its scheduled time.
//! 7. Requeue for the next run.
//!
//! Actions come out in the order the host should carry them out: Events of
//! what was observed, deletions, the new Job, then the status, then the
//! requeue. A pass that creates a Job does not record it in the status: as
//! in the kubebuilder tutorial, `active` and `lastScheduleTime` are rebuilt
//! from the children, so the pass that first sees the Job writes both at
//! once (a failed create so records nothing).

use std::time::Duration as StdDuration;

use chrono::{DateTime, Duration, SecondsFormat, Utc};
use chrono_tz::Tz;
use operator_plugin_sdk::{Condition, FieldError, Outcome, ReconcileError, Time, conditions};

use crate::api::{ConcurrencyPolicy, CronJob, CronJobStatus, JobReference, VALID_CONDITION};
use crate::jobs::{self, ChildJob, Finished, Job};
use crate::runs::{self, Missed};
use crate::schedule::{self, Schedule};
use crate::status_conditions::{self, Observed};
use crate::validate;

/// Upstream pads every requeue by 100 ms so that clock skew never wakes the
/// controller just before the scheduled time.
const NEXT_SCHEDULE_DELTA_MS: i64 = 100;

/// One reconcile of `cron_job` over its child Jobs.
pub fn reconcile(cron_job: &CronJob, children: &[Job], now: Time) -> Result<Outcome, ReconcileError> {
    let now = now.0;
    let mut jobs: Vec<ChildJob<'_>> = children.iter().map(ChildJob::new).collect();
    jobs.sort_by(|a, b| a.name().cmp(b.name()));

    let mut r = Reconciler { cron_job, jobs: &jobs, now, out: Outcome::new() };
    r.observe();
    let observed = r.observed();
    let mut status = r.rebuild_status();
    r.delete_old_jobs();
    let requeue = r.schedule(&mut status)?;
    // After `Valid`, which so stays first in a new list; the children as listed at the start.
    status_conditions::set_from_children(&mut status, observed, cron_job.generation(), Time(now));
    let mut out = r.out;
    out.status(&status)?;
    Ok(match requeue {
        Some(at) => {
            let ms = (at - now).num_milliseconds().max(0) + NEXT_SCHEDULE_DELTA_MS;
            out.requeue_after(StdDuration::from_millis(u64::try_from(ms).unwrap_or(u64::MAX)))
        }
        None => out,
    })
}

/// A reconcile whose child Jobs cannot be read (one is not a `batch/v1`
/// Job, which the API server never serves): the stored status with the
/// book's `Degraded=True`/`ReconciliationError`, and nothing else. Without
/// the children nothing else can be decided, and no requeue: retrying the
/// same objects cannot help, a change to them arrives through the watch.
pub fn children_unreadable(cron_job: &CronJob, error: &ReconcileError, now: Time) -> Result<Outcome, ReconcileError> {
    let mut status = cron_job.stored_status().clone();
    status_conditions::set_children_unreadable(&mut status, &error.message, cron_job.generation(), now);
    let mut out = Outcome::new();
    out.status(&status)?;
    Ok(out)
}

struct Reconciler<'a> {
    cron_job: &'a CronJob,
    /// Sorted by name, so every list the plugin emits is in a stable order.
    jobs: &'a [ChildJob<'a>],
    now: DateTime<Utc>,
    out: Outcome,
}

fn rfc3339(t: DateTime<Utc>) -> String {
    t.to_rfc3339_opts(SecondsFormat::Secs, true)
}

fn parse_time(text: Option<&str>) -> Option<DateTime<Utc>> {
    DateTime::parse_from_rfc3339(text?).ok().map(|t| t.with_timezone(&Utc))
}

fn reference(job: &ChildJob<'_>) -> JobReference {
    JobReference {
        api_version: "batch/v1".into(),
        kind: "Job".into(),
        namespace: job.namespace().into(),
        name: job.name().into(),
        uid: job.uid().into(),
    }
}

impl Reconciler<'_> {
    fn stored(&self) -> &CronJobStatus {
        self.cron_job.stored_status()
    }

    /// A stored active reference matches a child by UID, or by name when it has none.
    fn refers_to(r: &JobReference, job: &ChildJob<'_>) -> bool {
        if r.uid.is_empty() { r.name == job.name() } else { r.uid == job.uid() }
    }

    /// Step 1: what changed since the status was written, as upstream reports it.
    fn observe(&mut self) {
        for job in self.jobs {
            let was_active = self.stored().active.iter().any(|r| Self::refers_to(r, job));
            match job.finished {
                Some(how) if was_active => {
                    self.out.event_normal("SawCompletedJob", format!("Saw completed job: {}, condition: {}", job.name(), how.as_str()));
                }
                None if !was_active && !job.is_ours(self.cron_job.name()) => {
                    self.out.event_warning("UnexpectedJob", format!("Saw a job that the controller did not create or forgot: {}", job.name()));
                }
                _ => {}
            }
        }
        let mut missing: Vec<String> =
            self.stored().active.iter().filter(|r| !self.jobs.iter().any(|j| Self::refers_to(r, j))).map(|r| r.name.clone()).collect();
        missing.sort();
        for name in missing {
            self.out.event_normal("MissingJob", format!("Active job went missing: {name}"));
        }
    }

    /// Step 2: the status as the children show it.
    fn rebuild_status(&self) -> CronJobStatus {
        let stored = self.stored();
        let last_schedule = self.jobs.iter().filter_map(|j| j.scheduled_at).chain(parse_time(stored.last_schedule_time.as_deref())).max();
        let last_successful = self
            .jobs
            .iter()
            .filter(|j| j.finished == Some(Finished::Complete))
            .filter_map(|j| j.completion_time)
            .chain(parse_time(stored.last_successful_time.as_deref()))
            .max();
        CronJobStatus {
            active: self.jobs.iter().filter(|j| j.is_active()).map(reference).collect(),
            last_schedule_time: last_schedule.map(rfc3339),
            last_successful_time: last_successful.map(rfc3339),
            conditions: stored.conditions.clone(),
        }
    }

    /// What the book's condition table reads: every child, as the book
    /// lists them (Jobs being deleted included).
    fn observed(&self) -> Observed {
        Observed {
            suspended: self.cron_job.spec.suspend == Some(true),
            failed: self.jobs.iter().filter(|j| j.finished == Some(Finished::Failed)).count(),
            active: self.jobs.iter().filter(|j| j.is_active()).count(),
        }
    }

    /// Step 3: upstream's `cleanupFinishedJobs`. Jobs already being deleted
    /// are neither counted nor deleted again.
    fn delete_old_jobs(&mut self) {
        let spec = &self.cron_job.spec;
        for (limit, kind) in [(spec.successful_jobs_history_limit, Finished::Complete), (spec.failed_jobs_history_limit, Finished::Failed)] {
            let Some(limit) = limit.and_then(|l| usize::try_from(l).ok()) else {
                continue;
            };
            let mut finished: Vec<&ChildJob<'_>> = self.jobs.iter().filter(|j| j.finished == Some(kind) && !j.is_being_deleted()).collect();
            if finished.len() <= limit {
                continue;
            }
            jobs::sort_by_start_time(&mut finished);
            let excess = finished.len() - limit;
            for job in &finished[..excess] {
                self.delete(job);
            }
        }
    }

    fn delete(&mut self, job: &ChildJob<'_>) {
        self.out.delete(job.object_ref());
        self.out.event_normal("SuccessfulDelete", format!("Deleted job {}", job.name()));
    }

    /// Sets the plugin's `Valid` condition; returns whether its status or
    /// message changed (a Warning is emitted only then, not on every pass).
    fn set_valid(&self, status: &mut CronJobStatus, valid: bool, reason: &str, message: String) -> bool {
        let before = conditions::find(&status.conditions, VALID_CONDITION).cloned();
        let condition = Condition::new(VALID_CONDITION, valid, reason, message).observed(self.cron_job.generation());
        conditions::set(&mut status.conditions, condition, Time(self.now));
        let after = conditions::find(&status.conditions, VALID_CONDITION);
        before.as_ref().map(|c| (&c.status, &c.reason, &c.message)) != after.map(|c| (&c.status, &c.reason, &c.message))
    }

    /// Steps 4-7: refuse an invalid spec, else schedule. Returns when to
    /// reconcile again, if at all.
    fn schedule(&mut self, status: &mut CronJobStatus) -> Result<Option<DateTime<Utc>>, ReconcileError> {
        let errors = validate::validate(self.cron_job);
        if !errors.is_empty() {
            self.refuse(status, &errors);
            return Ok(None);
        }
        self.run(status)
    }

    /// Step 4's stops for a deleted or suspended CronJob, then steps 5-7.
    fn run(&mut self, status: &mut CronJobStatus) -> Result<Option<DateTime<Utc>>, ReconcileError> {
        let cron_job = self.cron_job;
        let spec = &cron_job.spec;
        let schedule_text = spec.schedule.as_deref().unwrap_or_default();
        // validate() has checked both, so neither fails here; stay defensive anyway.
        let zone: Tz = schedule::zone::load(spec.time_zone.as_deref().unwrap_or("")).unwrap_or(chrono_tz::UTC);
        let Ok(schedule) = schedule::parse(schedule_text, zone) else {
            return Ok(None);
        };
        self.set_valid(status, true, "Valid", "the spec can be scheduled".into());

        if cron_job.metadata.deletion_timestamp.is_some() || spec.suspend == Some(true) {
            return Ok(None);
        }

        let last = parse_time(status.last_schedule_time.as_deref());
        // Upstream: with no run recorded, count from the CronJob's creation.
        let earliest = last.or_else(|| cron_job.metadata.creation_timestamp.as_ref().and_then(jobs::utc)).unwrap_or(self.now);
        // A deadline too large to subtract from now (up to i64::MAX is
        // valid, as upstream) is no limit at all.
        let deadline_start = spec.starting_deadline_seconds.and_then(Duration::try_seconds).and_then(|d| self.now.checked_sub_signed(d));
        let earliest_in_deadline = deadline_start.map_or(earliest, |t| earliest.max(t));

        let due = match runs::most_recent(&schedule, earliest_in_deadline, self.now) {
            Ok(due) => due,
            Err(e) => {
                self.out.event_warning("InvalidSchedule", format!("invalid schedule: {schedule_text} : {}", e.0));
                return Ok(None);
            }
        };
        let next = runs::next_run(&schedule, earliest, self.now);
        let Some(scheduled) = due.most_recent else {
            self.report_missed_deadline(&schedule, earliest, earliest_in_deadline);
            return Ok(next);
        };
        if due.missed == Missed::Many {
            self.out.event_warning(
                "TooManyMissedTimes",
                "too many missed start times. Set or decrease .spec.startingDeadlineSeconds or check clock skew",
            );
        }
        if deadline_start.is_some_and(|start| scheduled < start) {
            self.push_miss_schedule(scheduled);
            return Ok(next);
        }
        let name = jobs::job_name(cron_job.name(), scheduled);
        if self.jobs.iter().any(|j| j.name() == name) {
            // Already run (its annotation may have been edited away): nothing to do until the next run.
            return Ok(next);
        }
        let active: Vec<&ChildJob<'_>> = self.jobs.iter().filter(|j| j.is_active()).collect();
        match spec.concurrency_policy() {
            Some(ConcurrencyPolicy::Forbid) if !active.is_empty() => {
                self.out.event_normal("JobAlreadyActive", "Not starting job because prior execution is running and concurrency policy is Forbid");
                return Ok(next);
            }
            Some(ConcurrencyPolicy::Replace) => {
                for job in active.iter().filter(|j| !j.is_being_deleted()) {
                    self.delete(job);
                    status.active.retain(|r| r.name != job.name());
                }
            }
            _ => {}
        }
        let template = spec.job_template.as_ref().unwrap_or(&serde_json::Value::Null);
        self.out.create(&jobs::job_from_template(cron_job, template, scheduled, zone))?;
        self.out.event_normal("SuccessfulCreate", format!("Created job {name}"));
        // `lastScheduleTime` is left for the next pass, which sees the new
        // Job (the host waits for its cache to show a created object before
        // reconciling again) and records the run from the Job's annotation
        // together with its `active` reference and the `JobsActive`
        // conditions: one status write per run instead of two. The Job's
        // UID, which `active` needs, exists only once it is created.
        Ok(runs::next_run(&schedule, scheduled, self.now))
    }

    /// Upstream's MissSchedule check can never fire (its search already starts
    /// at the deadline); here a run whose deadline passed unrun is reported.
    fn report_missed_deadline(&mut self, schedule: &Schedule, earliest: DateTime<Utc>, earliest_in_deadline: DateTime<Utc>) {
        if earliest_in_deadline == earliest {
            return;
        }
        if let Ok(runs::Due { most_recent: Some(missed), .. }) = runs::most_recent(schedule, earliest, self.now) {
            self.push_miss_schedule(missed);
        }
    }

    fn push_miss_schedule(&mut self, scheduled: DateTime<Utc>) {
        self.out.event_warning("MissSchedule", format!("Missed scheduled time to start a job: {}", scheduled.format("%a, %d %b %Y %H:%M:%S %z")));
    }

    /// An invalid CronJob already stored (admission is not guaranteed): say
    /// why, once per distinct problem, and wait for an edit. No requeue: the
    /// watch delivers the edit, and retrying cannot help before it.
    fn refuse(&mut self, status: &mut CronJobStatus, errors: &[FieldError]) {
        let spec = &self.cron_job.spec;
        let message = errors.iter().map(ToString::to_string).collect::<Vec<_>>().join("; ");
        let first = &errors[0];
        let (reason, event) = match first.field.as_str() {
            "spec.timeZone" => ("UnknownTimeZone", format!("invalid timeZone: {:?}: {}", spec.time_zone.clone().unwrap_or_default(), first.detail)),
            "spec.schedule" if spec.schedule.as_deref().is_some_and(|s| s.contains("TZ")) => (
                "UnsupportedSchedule",
                format!(
                    "CRON_TZ or TZ used in schedule {:?} is not officially supported, see https://kubernetes.io/docs/concepts/workloads/controllers/cron-jobs/ for more details",
                    spec.schedule.clone().unwrap_or_default()
                ),
            ),
            "spec.schedule" => {
                ("UnparseableSchedule", format!("unparseable schedule: {:?} : {}", spec.schedule.clone().unwrap_or_default(), first.detail))
            }
            _ => ("InvalidSpec", message.clone()),
        };
        if self.set_valid(status, false, reason, message) {
            self.out.event_warning(reason, event);
        }
    }
}

#[cfg(test)]
mod tests;
