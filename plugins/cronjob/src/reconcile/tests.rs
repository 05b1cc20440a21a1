//! Table-driven and scenario tests of every branch of the reconcile,
//! natively. Times are UTC unless a zone is named.

use chrono::{DateTime, Utc};
use operator_plugin_sdk::{Action, EventType, Object, Plugin, ReconcileError, Time, json};
use serde_json::Value;

use crate::CronJobPlugin;
use crate::jobs::job_name;

/// Through the SDK, as the host calls it: the parent read into `CronJob`,
/// the children into `Job`s.
fn reconcile(parent: &Object, children: &[Object], now: Time) -> Result<Vec<Action>, ReconcileError> {
    <CronJobPlugin as Plugin>::reconcile(parent, children, now)
}

const CREATED: &str = "2024-05-01T09:00:30Z";

fn t(text: &str) -> DateTime<Utc> {
    DateTime::parse_from_rfc3339(text).unwrap().with_timezone(&Utc)
}

/// A CronJob `hello` with the tutorial's defaults, `*/5 * * * *`, merged with `spec` and given `status`.
fn cron_job(spec: Value, status: Value) -> Object {
    let mut base = json!({
        "schedule": "*/5 * * * *",
        "concurrencyPolicy": "Allow",
        "suspend": false,
        "successfulJobsHistoryLimit": 3,
        "failedJobsHistoryLimit": 1,
        "jobTemplate": {
            "metadata": {"labels": {"app": "hello"}, "annotations": {"team": "a"}},
            "spec": {"template": {"spec": {
                "containers": [{"name": "hello", "image": "busybox", "args": ["/bin/sh", "-c", "date"]}],
                "restartPolicy": "OnFailure"
            }}}
        }
    });
    for (k, v) in spec.as_object().unwrap() {
        base[k] = v.clone();
    }
    Object::new(json!({
        "apiVersion": "batch.tutorial.kubebuilder.io/v1",
        "kind": "CronJob",
        "metadata": {"name": "hello", "namespace": "default", "uid": "cj-uid", "generation": 2,
                     "resourceVersion": "100", "creationTimestamp": CREATED},
        "spec": base,
        "status": status,
    }))
}

#[derive(Clone, Copy)]
enum State {
    Active,
    /// Started and completed at these times.
    Complete(&'static str, &'static str),
    /// Started at this time.
    Failed(&'static str),
}

/// A child Job created by this controller for the run scheduled at `scheduled`.
fn job(scheduled: &str, state: State) -> Object {
    let at = t(scheduled);
    let name = job_name("hello", at);
    let status = match state {
        State::Active => json!({"active": 1, "startTime": scheduled}),
        State::Complete(start, done) => {
            json!({"succeeded": 1, "startTime": start, "completionTime": done,
            "conditions": [{"type": "SuccessCriteriaMet", "status": "True"}, {"type": "Complete", "status": "True"}]})
        }
        State::Failed(start) => json!({"failed": 2, "startTime": start,
            "conditions": [{"type": "FailureTarget", "status": "True"}, {"type": "Failed", "status": "True", "reason": "BackoffLimitExceeded"}]}),
    };
    Object::new(json!({
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {
            "name": name, "namespace": "default", "uid": format!("uid-{name}"),
            "annotations": {"batch.tutorial.kubebuilder.io/scheduled-at": scheduled},
            "ownerReferences": [{"apiVersion": "batch.tutorial.kubebuilder.io/v1", "kind": "CronJob", "name": "hello", "uid": "cj-uid", "controller": true}]
        },
        "status": status,
    }))
}

fn active_ref(scheduled: &str) -> Value {
    let name = job_name("hello", t(scheduled));
    json!({"apiVersion": "batch/v1", "kind": "Job", "namespace": "default", "name": name, "uid": format!("uid-{name}")})
}

struct Outcome(Vec<Action>);

fn run(parent: &Object, children: &[Object], now: &str) -> Outcome {
    Outcome(reconcile(parent, children, Time(t(now))).unwrap())
}

impl Outcome {
    fn created(&self) -> Vec<&Value> {
        self.0.iter().filter_map(|a| if let Action::Create(j) = a { Some(j) } else { None }).collect()
    }
    fn created_names(&self) -> Vec<&str> {
        self.created().iter().map(|j| j["metadata"]["name"].as_str().unwrap()).collect()
    }
    fn deleted(&self) -> Vec<&str> {
        self.0.iter().filter_map(|a| if let Action::Delete { target, .. } = a { Some(target.name.as_str()) } else { None }).collect()
    }
    fn events(&self) -> Vec<(EventType, &str, &str)> {
        self.0
            .iter()
            .filter_map(|a| match a {
                Action::Event { event_type, reason, message } => Some((*event_type, reason.as_str(), message.as_str())),
                _ => None,
            })
            .collect()
    }
    fn reasons(&self) -> Vec<&str> {
        self.events().iter().map(|e| e.1).collect()
    }
    fn status(&self) -> &Value {
        self.0.iter().find_map(|a| if let Action::SetStatus(s) = a { Some(s) } else { None }).expect("a status")
    }
    fn requeue_ms(&self) -> Option<u64> {
        self.0.iter().find_map(|a| if let Action::RequeueAfterMs(ms) = a { Some(*ms) } else { None })
    }
    /// Milliseconds from `now` until `at`, plus upstream's 100 ms.
    fn requeue_at(&self, now: &str) -> Option<String> {
        self.requeue_ms().map(|ms| {
            let at = t(now) + chrono::Duration::milliseconds(i64::try_from(ms).unwrap() - 100);
            at.to_rfc3339_opts(chrono::SecondsFormat::Secs, true)
        })
    }
}

#[test]
fn scheduling_decisions_follow_upstream() {
    struct Case {
        what: &'static str,
        spec: Value,
        status: Value,
        children: Vec<Object>,
        now: &'static str,
        created: Vec<&'static str>,
        deleted: Vec<&'static str>,
        reasons: Vec<&'static str>,
        requeue_at: Option<&'static str>,
    }
    let name = |at: &str| Box::leak(job_name("hello", t(at)).into_boxed_str()) as &'static str;
    let cases = vec![
        Case {
            what: "a new CronJob waits for its first run",
            spec: json!({}),
            status: json!({}),
            children: vec![],
            now: "2024-05-01T09:03:00Z",
            created: vec![],
            deleted: vec![],
            reasons: vec![],
            requeue_at: Some("2024-05-01T09:05:00Z"),
        },
        Case {
            what: "a due run creates its Job",
            spec: json!({}),
            status: json!({}),
            children: vec![],
            now: "2024-05-01T09:05:10Z",
            created: vec![name("2024-05-01T09:05:00Z")],
            deleted: vec![],
            reasons: vec!["SuccessfulCreate"],
            requeue_at: Some("2024-05-01T09:10:00Z"),
        },
        Case {
            what: "a restarted host runs only the most recent missed run",
            spec: json!({}),
            status: json!({"lastScheduleTime": "2024-05-01T09:05:00Z"}),
            children: vec![],
            now: "2024-05-01T09:27:00Z",
            created: vec![name("2024-05-01T09:25:00Z")],
            deleted: vec![],
            reasons: vec!["SuccessfulCreate"],
            requeue_at: Some("2024-05-01T09:30:00Z"),
        },
        Case {
            what: "more than 100 missed runs warn and still run the most recent",
            spec: json!({"schedule": "*/1 * * * *"}),
            status: json!({}),
            children: vec![],
            now: "2024-05-02T09:00:30Z",
            created: vec![name("2024-05-02T09:00:00Z")],
            deleted: vec![],
            reasons: vec!["TooManyMissedTimes", "SuccessfulCreate"],
            requeue_at: Some("2024-05-02T09:01:00Z"),
        },
        Case {
            what: "a run whose starting deadline passed is reported missed, not run",
            spec: json!({"startingDeadlineSeconds": 60}),
            status: json!({"lastScheduleTime": "2024-05-01T09:00:00Z"}),
            children: vec![],
            now: "2024-05-01T09:07:30Z",
            created: vec![],
            deleted: vec![],
            reasons: vec!["MissSchedule"],
            requeue_at: Some("2024-05-01T09:10:00Z"),
        },
        Case {
            what: "a run still within its starting deadline runs late",
            spec: json!({"startingDeadlineSeconds": 200}),
            status: json!({"lastScheduleTime": "2024-05-01T09:00:00Z"}),
            children: vec![],
            now: "2024-05-01T09:07:30Z",
            created: vec![name("2024-05-01T09:05:00Z")],
            deleted: vec![],
            reasons: vec!["SuccessfulCreate"],
            requeue_at: Some("2024-05-01T09:10:00Z"),
        },
        // Upstream searches (now - 0s, now], which never holds an activation: such a CronJob never runs.
        Case {
            what: "a deadline of zero never runs, as upstream, and says so",
            spec: json!({"startingDeadlineSeconds": 0}),
            status: json!({"lastScheduleTime": "2024-05-01T09:00:00Z"}),
            children: vec![],
            now: "2024-05-01T09:05:00Z",
            created: vec![],
            deleted: vec![],
            reasons: vec!["MissSchedule"],
            requeue_at: Some("2024-05-01T09:10:00Z"),
        },
        Case {
            what: "Forbid skips a run while a job is active",
            spec: json!({"concurrencyPolicy": "Forbid"}),
            status: json!({"lastScheduleTime": "2024-05-01T09:00:00Z", "active": [active_ref("2024-05-01T09:00:00Z")]}),
            children: vec![job("2024-05-01T09:00:00Z", State::Active)],
            now: "2024-05-01T09:05:01Z",
            created: vec![],
            deleted: vec![],
            reasons: vec!["JobAlreadyActive"],
            requeue_at: Some("2024-05-01T09:10:00Z"),
        },
        Case {
            what: "Forbid runs the pending run once the active job finished",
            spec: json!({"concurrencyPolicy": "Forbid"}),
            status: json!({"lastScheduleTime": "2024-05-01T09:00:00Z", "active": [active_ref("2024-05-01T09:00:00Z")]}),
            children: vec![job("2024-05-01T09:00:00Z", State::Complete("2024-05-01T09:00:01Z", "2024-05-01T09:06:00Z"))],
            now: "2024-05-01T09:06:01Z",
            created: vec![name("2024-05-01T09:05:00Z")],
            deleted: vec![],
            reasons: vec!["SawCompletedJob", "SuccessfulCreate"],
            requeue_at: Some("2024-05-01T09:10:00Z"),
        },
        Case {
            what: "Replace deletes the active jobs before creating",
            spec: json!({"concurrencyPolicy": "Replace"}),
            status: json!({"lastScheduleTime": "2024-05-01T09:00:00Z", "active": [active_ref("2024-05-01T09:00:00Z")]}),
            children: vec![job("2024-05-01T09:00:00Z", State::Active)],
            now: "2024-05-01T09:05:01Z",
            created: vec![name("2024-05-01T09:05:00Z")],
            deleted: vec![name("2024-05-01T09:00:00Z")],
            reasons: vec!["SuccessfulDelete", "SuccessfulCreate"],
            requeue_at: Some("2024-05-01T09:10:00Z"),
        },
        Case {
            what: "Allow runs alongside active jobs",
            spec: json!({}),
            status: json!({"lastScheduleTime": "2024-05-01T09:00:00Z", "active": [active_ref("2024-05-01T09:00:00Z")]}),
            children: vec![job("2024-05-01T09:00:00Z", State::Active)],
            now: "2024-05-01T09:05:01Z",
            created: vec![name("2024-05-01T09:05:00Z")],
            deleted: vec![],
            reasons: vec!["SuccessfulCreate"],
            requeue_at: Some("2024-05-01T09:10:00Z"),
        },
        Case {
            what: "a run recorded only on its Job (status write lost) is not repeated",
            spec: json!({}),
            status: json!({}),
            children: vec![job("2024-05-01T09:05:00Z", State::Active)],
            now: "2024-05-01T09:06:00Z",
            created: vec![],
            deleted: vec![],
            reasons: vec![],
            requeue_at: Some("2024-05-01T09:10:00Z"),
        },
        Case {
            what: "a suspended CronJob starts nothing and is not requeued",
            spec: json!({"suspend": true}),
            status: json!({}),
            children: vec![],
            now: "2024-05-01T09:05:10Z",
            created: vec![],
            deleted: vec![],
            reasons: vec![],
            requeue_at: None,
        },
        Case {
            what: "a schedule that never fires is reported and not requeued",
            spec: json!({"schedule": "0 0 30 2 *"}),
            status: json!({}),
            children: vec![],
            now: "2024-05-01T09:05:10Z",
            created: vec![],
            deleted: vec![],
            reasons: vec!["InvalidSchedule"],
            requeue_at: None,
        },
        Case {
            what: "an unparseable schedule is reported and not requeued",
            spec: json!({"schedule": "61 * * * *"}),
            status: json!({}),
            children: vec![],
            now: "2024-05-01T09:05:10Z",
            created: vec![],
            deleted: vec![],
            reasons: vec!["UnparseableSchedule"],
            requeue_at: None,
        },
        Case {
            what: "an unknown time zone is reported and not requeued",
            spec: json!({"timeZone": "Mars/Olympus_Mons"}),
            status: json!({}),
            children: vec![],
            now: "2024-05-01T09:05:10Z",
            created: vec![],
            deleted: vec![],
            reasons: vec!["UnknownTimeZone"],
            requeue_at: None,
        },
        Case {
            what: "TZ inside the schedule is reported and not run",
            spec: json!({"schedule": "TZ=UTC */5 * * * *"}),
            status: json!({}),
            children: vec![],
            now: "2024-05-01T09:05:10Z",
            created: vec![],
            deleted: vec![],
            reasons: vec!["UnsupportedSchedule"],
            requeue_at: None,
        },
        Case {
            what: "other invalid fields are reported as InvalidSpec",
            spec: json!({"concurrencyPolicy": "Sometimes"}),
            status: json!({}),
            children: vec![],
            now: "2024-05-01T09:05:10Z",
            created: vec![],
            deleted: vec![],
            reasons: vec!["InvalidSpec"],
            requeue_at: None,
        },
        Case {
            what: "the 31st skips to the next month that has one",
            spec: json!({"schedule": "0 0 31 * *"}),
            status: json!({"lastScheduleTime": "2024-01-31T00:00:00Z"}),
            children: vec![],
            now: "2024-03-31T00:00:30Z",
            created: vec![name("2024-03-31T00:00:00Z")],
            deleted: vec![],
            reasons: vec!["SuccessfulCreate"],
            requeue_at: Some("2024-05-31T00:00:00Z"),
        },
        Case {
            what: "@every runs are anchored to the creation time",
            spec: json!({"schedule": "@every 7m"}),
            status: json!({}),
            children: vec![],
            now: "2024-05-01T09:10:00Z",
            created: vec![name("2024-05-01T09:07:30Z")],
            deleted: vec![],
            reasons: vec!["SuccessfulCreate"],
            requeue_at: Some("2024-05-01T09:14:30Z"),
        },
    ];
    for c in cases {
        let parent = cron_job(c.spec.clone(), c.status.clone());
        let out = run(&parent, &c.children, c.now);
        assert_eq!(out.created_names(), c.created, "{}: created", c.what);
        assert_eq!(out.deleted(), c.deleted, "{}: deleted", c.what);
        assert_eq!(out.reasons(), c.reasons, "{}: events", c.what);
        assert_eq!(out.requeue_at(c.now).as_deref(), c.requeue_at, "{}: requeue", c.what);
    }
}

#[test]
fn the_job_carries_the_template_and_its_scheduled_time() {
    let out = run(&cron_job(json!({"timeZone": "America/New_York"}), json!({})), &[], "2024-05-01T09:05:10Z");
    let job = out.created()[0];
    assert_eq!(job["apiVersion"], "batch/v1");
    assert_eq!(job["kind"], "Job");
    assert_eq!(job["metadata"]["name"], "hello-28575905");
    assert_eq!(job["metadata"]["namespace"], "default");
    assert_eq!(job["metadata"]["labels"], json!({"app": "hello"}));
    assert_eq!(
        job["metadata"]["annotations"],
        json!({"team": "a", "batch.tutorial.kubebuilder.io/scheduled-at": "2024-05-01T09:05:00Z",
               "batch.kubernetes.io/cronjob-scheduled-timestamp": "2024-05-01T05:05:00-04:00"})
    );
    assert_eq!(job["spec"]["template"]["spec"]["restartPolicy"], "OnFailure");
    assert_eq!(out.events()[0], (EventType::Normal, "SuccessfulCreate", "Created job hello-28575905"));
}

#[test]
fn the_status_is_rebuilt_from_the_children() {
    let children = [
        job("2024-05-01T09:00:00Z", State::Complete("2024-05-01T09:00:02Z", "2024-05-01T09:01:00Z")),
        job("2024-05-01T09:05:00Z", State::Failed("2024-05-01T09:05:02Z")),
        job("2024-05-01T09:10:00Z", State::Active),
    ];
    let out = run(&cron_job(json!({}), json!({})), &children, "2024-05-01T09:11:00Z");
    let status = out.status();
    assert_eq!(status["active"], json!([active_ref("2024-05-01T09:10:00Z")]));
    assert_eq!(status["lastScheduleTime"], "2024-05-01T09:10:00Z");
    assert_eq!(status["lastSuccessfulTime"], "2024-05-01T09:01:00Z");
    assert_eq!(status["conditions"][0]["type"], "Valid");
    assert_eq!(status["conditions"][0]["status"], "True");
    assert_eq!(status["conditions"][0]["observedGeneration"], 2);
    // The job that was running and is unknown to the stored status was ours: no UnexpectedJob.
    assert_eq!(out.reasons(), Vec::<&str>::new());
}

#[test]
fn stored_times_never_move_backwards() {
    let status = json!({"lastScheduleTime": "2024-05-01T09:20:00Z", "lastSuccessfulTime": "2024-05-01T09:21:00Z"});
    let children = [job("2024-05-01T09:00:00Z", State::Complete("2024-05-01T09:00:02Z", "2024-05-01T09:01:00Z"))];
    let out = run(&cron_job(json!({}), status), &children, "2024-05-01T09:22:00Z");
    assert_eq!(out.status()["lastScheduleTime"], "2024-05-01T09:20:00Z");
    assert_eq!(out.status()["lastSuccessfulTime"], "2024-05-01T09:21:00Z");
}

#[test]
fn a_new_run_is_recorded_by_the_pass_that_sees_its_job() {
    let stored = json!({"lastScheduleTime": "2024-05-01T09:00:00Z"});
    let creating = run(&cron_job(json!({}), stored.clone()), &[], "2024-05-01T09:05:10Z");
    assert!(creating.0.iter().any(|a| matches!(a, Action::Create(_))));
    // The creating pass leaves the run out of the status: its Job has no UID yet.
    assert_eq!(creating.status()["lastScheduleTime"], "2024-05-01T09:00:00Z");
    assert!(creating.status()["active"].as_array().is_none_or(Vec::is_empty));
    let position = |pred: fn(&Action) -> bool| creating.0.iter().position(pred).unwrap();
    assert!(position(|a| matches!(a, Action::Create(_))) < position(|a| matches!(a, Action::SetStatus(_))));
    assert!(matches!(creating.0.last(), Some(Action::RequeueAfterMs(_))));

    // The next pass sees the Job and records both at once; it creates nothing.
    let seeing = run(&cron_job(json!({}), creating.status().clone()), &[job("2024-05-01T09:05:00Z", State::Active)], "2024-05-01T09:05:11Z");
    assert!(!seeing.0.iter().any(|a| matches!(a, Action::Create(_))));
    assert_eq!(seeing.status()["lastScheduleTime"], "2024-05-01T09:05:00Z");
    assert_eq!(seeing.status()["active"], json!([active_ref("2024-05-01T09:05:00Z")]));

    // And the pass after that, with the status written, has nothing new to write.
    let settled = run(&cron_job(json!({}), seeing.status().clone()), &[job("2024-05-01T09:05:00Z", State::Active)], "2024-05-01T09:05:12Z");
    assert_eq!(settled.status(), seeing.status());
}

#[test]
fn history_limits_delete_the_oldest_finished_jobs_first() {
    let children = [
        job("2024-05-01T08:00:00Z", State::Complete("2024-05-01T08:00:01Z", "2024-05-01T08:01:00Z")),
        job("2024-05-01T08:05:00Z", State::Complete("2024-05-01T08:05:01Z", "2024-05-01T08:06:00Z")),
        job("2024-05-01T08:10:00Z", State::Complete("2024-05-01T08:10:01Z", "2024-05-01T08:11:00Z")),
        job("2024-05-01T08:15:00Z", State::Complete("2024-05-01T08:15:01Z", "2024-05-01T08:16:00Z")),
        job("2024-05-01T08:20:00Z", State::Complete("2024-05-01T08:20:01Z", "2024-05-01T08:21:00Z")),
        job("2024-05-01T08:25:00Z", State::Failed("2024-05-01T08:25:01Z")),
        job("2024-05-01T08:30:00Z", State::Failed("2024-05-01T08:30:01Z")),
        job("2024-05-01T08:35:00Z", State::Active),
    ];
    let status = json!({"lastScheduleTime": "2024-05-01T08:35:00Z"});
    let out = run(&cron_job(json!({}), status), &children, "2024-05-01T08:36:00Z");
    let names = |at: &[&str]| at.iter().map(|a| job_name("hello", t(a))).collect::<Vec<_>>();
    assert_eq!(out.deleted(), names(&["2024-05-01T08:00:00Z", "2024-05-01T08:05:00Z", "2024-05-01T08:25:00Z"]));
    assert_eq!(out.reasons(), vec!["SuccessfulDelete"; 3]);
    assert_eq!(out.events()[0].2, format!("Deleted job {}", job_name("hello", t("2024-05-01T08:00:00Z"))));
}

#[test]
fn history_limits_of_zero_keep_nothing_and_unset_limits_keep_everything() {
    let children = [
        job("2024-05-01T08:00:00Z", State::Complete("2024-05-01T08:00:01Z", "2024-05-01T08:01:00Z")),
        job("2024-05-01T08:05:00Z", State::Failed("2024-05-01T08:05:01Z")),
    ];
    let zero = json!({"successfulJobsHistoryLimit": 0, "failedJobsHistoryLimit": 0});
    assert_eq!(run(&cron_job(zero, json!({})), &children, "2024-05-01T08:06:00Z").deleted().len(), 2);
    let unset = json!({"successfulJobsHistoryLimit": null, "failedJobsHistoryLimit": null});
    assert_eq!(run(&cron_job(unset, json!({})), &children, "2024-05-01T08:06:00Z").deleted().len(), 0);
}

#[test]
fn jobs_already_being_deleted_are_not_deleted_again() {
    let mut old = job("2024-05-01T08:00:00Z", State::Failed("2024-05-01T08:00:01Z"));
    old.value_mut()["metadata"]["deletionTimestamp"] = json!("2024-05-01T08:06:00Z");
    let newer = job("2024-05-01T08:05:00Z", State::Failed("2024-05-01T08:05:01Z"));
    let out = run(&cron_job(json!({}), json!({})), &[old, newer], "2024-05-01T08:06:00Z");
    assert_eq!(out.deleted(), Vec::<&str>::new());
}

#[test]
fn history_is_cleaned_up_even_while_suspended_or_invalid() {
    let children =
        [job("2024-05-01T08:00:00Z", State::Failed("2024-05-01T08:00:01Z")), job("2024-05-01T08:05:00Z", State::Failed("2024-05-01T08:05:01Z"))];
    for spec in [json!({"suspend": true}), json!({"schedule": "bogus"})] {
        let out = run(&cron_job(spec.clone(), json!({})), &children, "2024-05-01T08:06:00Z");
        assert_eq!(out.deleted(), vec![job_name("hello", t("2024-05-01T08:00:00Z"))], "{spec}");
        assert_eq!(out.requeue_ms(), None, "{spec}");
    }
}

#[test]
fn changes_since_the_stored_status_are_reported_as_upstream_does() {
    let status = json!({"lastScheduleTime": "2024-05-01T09:05:00Z",
        "active": [active_ref("2024-05-01T09:00:00Z"), active_ref("2024-05-01T08:55:00Z")]});
    let mut stranger = job("2024-05-01T08:30:00Z", State::Active);
    stranger.value_mut()["metadata"]["name"] = json!("hand-made");
    stranger.value_mut()["metadata"]["annotations"] = json!({});
    let children = [job("2024-05-01T09:00:00Z", State::Failed("2024-05-01T09:00:01Z")), stranger];
    let out = run(&cron_job(json!({}), status), &children, "2024-05-01T09:06:00Z");
    let missing = job_name("hello", t("2024-05-01T08:55:00Z"));
    let completed = job_name("hello", t("2024-05-01T09:00:00Z"));
    assert_eq!(
        out.events(),
        vec![
            // Children are visited in name order.
            (EventType::Warning, "UnexpectedJob", "Saw a job that the controller did not create or forgot: hand-made"),
            (EventType::Normal, "SawCompletedJob", format!("Saw completed job: {completed}, condition: Failed").as_str()),
            (EventType::Normal, "MissingJob", format!("Active job went missing: {missing}").as_str()),
        ]
    );
}

#[test]
fn an_invalid_cronjob_warns_once_and_keeps_a_condition() {
    let parent = cron_job(json!({"schedule": "* * * *"}), json!({}));
    let first = run(&parent, &[], "2024-05-01T09:05:10Z");
    assert_eq!(
        first.events(),
        vec![(EventType::Warning, "UnparseableSchedule", "unparseable schedule: \"* * * *\" : expected exactly 5 fields, found 4: [* * * *]")]
    );
    let condition = &first.status()["conditions"][0];
    assert_eq!(condition["type"], "Valid");
    assert_eq!(condition["status"], "False");
    assert_eq!(condition["reason"], "UnparseableSchedule");
    assert_eq!(condition["lastTransitionTime"], "2024-05-01T09:05:10Z");
    assert_eq!(first.requeue_ms(), None);

    // With that condition stored, a later pass says nothing new.
    let again = run(&cron_job(json!({"schedule": "* * * *"}), first.status().clone()), &[], "2024-05-01T09:20:00Z");
    assert_eq!(again.events(), vec![]);
    assert_eq!(again.status(), first.status());

    // Fixed: the condition turns True and scheduling resumes.
    let fixed = run(&cron_job(json!({}), first.status().clone()), &[], "2024-05-01T09:20:00Z");
    assert_eq!(fixed.status()["conditions"][0]["status"], "True");
    assert_eq!(fixed.created_names().len(), 1);
}

#[test]
fn a_cronjob_being_deleted_starts_nothing() {
    let mut parent = cron_job(json!({}), json!({}));
    parent.value_mut()["metadata"]["deletionTimestamp"] = json!("2024-05-01T09:05:00Z");
    let out = run(&parent, &[], "2024-05-01T09:05:10Z");
    assert_eq!(out.created_names(), Vec::<&str>::new());
    assert_eq!(out.requeue_ms(), None);
}

#[test]
fn objects_other_than_jobs_are_ignored() {
    let pod = Object::new(json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"}}));
    let out = run(&cron_job(json!({}), json!({})), &[pod], "2024-05-01T09:03:00Z");
    assert_eq!(out.status().get("active"), None);
}

#[test]
fn a_malformed_parent_is_a_permanent_error() {
    let mut parent = cron_job(json!({}), json!({}));
    parent.value_mut()["spec"]["startingDeadlineSeconds"] = json!("soon");
    let err = reconcile(&parent, &[], Time(t("2024-05-01T09:03:00Z"))).unwrap_err();
    assert_eq!(err.reason, "InvalidSpec");
    assert!(!err.retryable);
}

/// The types are wider than the CRD schema: what admission would have
/// refused is still read, and reported through the `Valid` condition.
#[test]
fn a_stored_cronjob_the_schema_would_refuse_is_read_and_reported() {
    let mut parent = cron_job(json!({"concurrencyPolicy": "Sometimes", "successfulJobsHistoryLimit": 3_000_000_000i64}), json!({}));
    let spec = parent.value_mut()["spec"].as_object_mut().unwrap();
    spec.remove("schedule");
    spec.remove("jobTemplate");
    let out = run(&parent, &[], "2024-05-01T09:05:10Z");
    assert_eq!(out.reasons(), ["UnparseableSchedule"]);
    assert_eq!(out.created_names(), Vec::<&str>::new());
    let condition = &out.status()["conditions"][0];
    assert_eq!(
        condition["message"],
        r#"spec.schedule: Required value; spec.concurrencyPolicy: Unsupported value: "Sometimes": supported values: "Allow", "Forbid", "Replace"; spec.jobTemplate: Required value"#
    );
}

#[test]
fn a_parent_without_spec_cannot_be_read() {
    let mut parent = cron_job(json!({}), json!({}));
    parent.value_mut().as_object_mut().unwrap().remove("spec");
    let err = reconcile(&parent, &[], Time(t("2024-05-01T09:03:00Z"))).unwrap_err();
    assert_eq!(err, ReconcileError::permanent("InvalidSpec", "cannot read CronJob hello: missing field `spec`"));
}

/// A daily 02:30 in America/New_York around both DST changes of 2024.
#[test]
fn a_daily_0230_in_new_york_follows_dst_as_upstream_does() {
    let spec = json!({"schedule": "30 2 * * *", "timeZone": "America/New_York"});
    #[rustfmt::skip]
    let cases: &[(&str, &str, &str, Option<&str>, &str)] = &[
        // (what, last scheduled, now, run created for, next requeue)
        ("the night before spring forward runs", "2024-03-08T02:30:00-05:00", "2024-03-09T02:30:05-05:00",
            Some("2024-03-09T02:30:00-05:00"), "2024-03-11T06:30:00Z"),
        ("02:30 does not exist on spring-forward day: nothing runs", "2024-03-09T02:30:00-05:00", "2024-03-10T12:00:00-04:00",
            None, "2024-03-11T06:30:00Z"),
        ("the day after runs at 02:30 EDT", "2024-03-09T02:30:00-05:00", "2024-03-11T02:30:05-04:00",
            Some("2024-03-11T02:30:00-04:00"), "2024-03-12T06:30:00Z"),
        ("fall back: 02:30 EST runs once", "2024-11-02T02:30:00-04:00", "2024-11-03T02:30:05-05:00",
            Some("2024-11-03T02:30:00-05:00"), "2024-11-04T07:30:00Z"),
    ];
    for (what, last, now, want, next) in cases {
        let parent = cron_job(spec.clone(), json!({"lastScheduleTime": t(last).to_rfc3339()}));
        let now_utc = t(now).to_rfc3339();
        let out = run(&parent, &[], &now_utc);
        let want: Vec<String> = want.iter().map(|w| job_name("hello", t(w))).collect();
        assert_eq!(out.created_names(), want, "{what}");
        assert_eq!(out.requeue_at(&now_utc).as_deref(), Some(*next), "{what}");
    }
}

#[test]
fn a_daily_0130_in_new_york_runs_twice_when_clocks_fall_back() {
    let spec = json!({"schedule": "30 1 * * *", "timeZone": "America/New_York"});
    let first = run(&cron_job(spec.clone(), json!({"lastScheduleTime": "2024-11-02T05:30:00Z"})), &[], "2024-11-03T05:30:05Z");
    assert_eq!(first.created()[0]["metadata"]["annotations"]["batch.kubernetes.io/cronjob-scheduled-timestamp"], "2024-11-03T01:30:00-04:00");
    assert_eq!(first.requeue_at("2024-11-03T05:30:05Z").as_deref(), Some("2024-11-03T06:30:00Z"));
    let second = run(&cron_job(spec, first.status().clone()), &[], "2024-11-03T06:30:05Z");
    assert_eq!(second.created()[0]["metadata"]["annotations"]["batch.kubernetes.io/cronjob-scheduled-timestamp"], "2024-11-03T01:30:00-05:00");
    assert_ne!(first.created_names(), second.created_names());
}

fn condition<'a>(status: &'a Value, type_: &str) -> Option<&'a Value> {
    status["conditions"].as_array()?.iter().find(|c| c["type"] == type_)
}

/// `(status, reason)` of each of the book's condition types (`None`: absent).
fn book_conditions(status: &Value) -> [Option<(String, String)>; 3] {
    ["Available", "Progressing", "Degraded"]
        .map(|type_| condition(status, type_).map(|c| (c["status"].as_str().unwrap().to_string(), c["reason"].as_str().unwrap().to_string())))
}

#[test]
fn the_books_conditions_follow_its_table() {
    struct Case {
        what: &'static str,
        spec: Value,
        status: Value,
        children: Vec<Object>,
        /// Available, Progressing, Degraded.
        want: [Option<(&'static str, &'static str)>; 3],
    }
    let failed = || job("2024-05-01T08:50:00Z", State::Failed("2024-05-01T08:50:01Z"));
    let active = || job("2024-05-01T08:55:00Z", State::Active);
    let complete = || job("2024-05-01T08:45:00Z", State::Complete("2024-05-01T08:45:01Z", "2024-05-01T08:46:00Z"));
    let degraded_before = json!({"conditions": [{"type": "Degraded", "status": "True", "reason": "JobsFailed",
        "message": "1 job(s) have failed", "lastTransitionTime": "2024-05-01T08:51:00Z", "observedGeneration": 1}]});
    let cases = vec![
        Case {
            what: "a first pass with no children: all completed, nothing active",
            spec: json!({}),
            status: json!({}),
            children: vec![],
            want: [Some(("True", "AllJobsCompleted")), Some(("False", "NoJobsActive")), None],
        },
        Case {
            what: "a first pass while suspended: Progressing stays Unknown",
            spec: json!({"suspend": true}),
            status: json!({}),
            children: vec![active()],
            want: [Some(("False", "Suspended")), Some(("Unknown", "Reconciling")), None],
        },
        Case {
            what: "suspended comes before failed Jobs",
            spec: json!({"suspend": true}),
            status: json!({}),
            children: vec![failed()],
            want: [Some(("False", "Suspended")), Some(("Unknown", "Reconciling")), None],
        },
        Case {
            what: "a failed Job comes before an active one",
            spec: json!({}),
            status: json!({}),
            children: vec![failed(), active(), complete()],
            want: [Some(("False", "JobsFailed")), Some(("Unknown", "Reconciling")), Some(("True", "JobsFailed"))],
        },
        Case {
            what: "an active Job",
            spec: json!({}),
            status: json!({}),
            children: vec![active(), complete()],
            want: [Some(("True", "JobsActive")), Some(("True", "JobsActive")), None],
        },
        Case {
            what: "only completed Jobs",
            spec: json!({}),
            status: json!({}),
            children: vec![complete()],
            want: [Some(("True", "AllJobsCompleted")), Some(("False", "NoJobsActive")), None],
        },
        Case {
            what: "a recorded book condition skips Progressing=Unknown, and Degraded is kept as the book keeps it",
            spec: json!({"suspend": true}),
            status: degraded_before.clone(),
            children: vec![],
            want: [Some(("False", "Suspended")), None, Some(("True", "JobsFailed"))],
        },
        Case {
            what: "an invalid spec still gets the table",
            spec: json!({"schedule": "not a schedule"}),
            status: json!({}),
            children: vec![active()],
            want: [Some(("True", "JobsActive")), Some(("True", "JobsActive")), None],
        },
    ];
    for case in cases {
        let out = run(&cron_job(case.spec, case.status), &case.children, "2024-05-01T09:01:00Z");
        let status = out.status();
        let want = case.want.map(|w| w.map(|(s, r)| (s.to_string(), r.to_string())));
        assert_eq!(book_conditions(status), want, "{}: {status}", case.what);
        for type_ in ["Available", "Progressing", "Degraded"] {
            let entries = status["conditions"].as_array().unwrap().iter().filter(|c| c["type"] == type_).count();
            assert!(entries <= 1, "{}: {entries} {type_} entries", case.what);
        }
        assert!(condition(status, "Valid").is_some(), "{}: Valid is kept", case.what);
    }
}

#[test]
fn the_books_conditions_carry_counts_generation_and_transition_times() {
    let two_failed =
        [job("2024-05-01T08:50:00Z", State::Failed("2024-05-01T08:50:01Z")), job("2024-05-01T08:55:00Z", State::Failed("2024-05-01T08:55:01Z"))];
    let spec = json!({"failedJobsHistoryLimit": 5});
    let first = run(&cron_job(spec.clone(), json!({})), &two_failed, "2024-05-01T09:01:00Z");
    let degraded = condition(first.status(), "Degraded").unwrap();
    assert_eq!(degraded["message"], "2 job(s) have failed");
    assert_eq!(condition(first.status(), "Available").unwrap()["message"], "2 job(s) have failed");
    assert_eq!(degraded["observedGeneration"], 2);
    assert_eq!(degraded["lastTransitionTime"], "2024-05-01T09:01:00Z");

    // The same status an hour later: no transition. Then an active Job only: Available turns True.
    let later = run(&cron_job(spec.clone(), first.status().clone()), &two_failed[..1], "2024-05-01T10:01:00Z");
    let degraded = condition(later.status(), "Degraded").unwrap();
    assert_eq!((degraded["message"].as_str(), degraded["lastTransitionTime"].as_str()), (Some("1 job(s) have failed"), Some("2024-05-01T09:01:00Z")));
    let recovered = run(&cron_job(spec, later.status().clone()), &[job("2024-05-01T10:00:00Z", State::Active)], "2024-05-01T10:02:00Z");
    let available = condition(recovered.status(), "Available").unwrap();
    assert_eq!((available["status"].as_str(), available["reason"].as_str()), (Some("True"), Some("JobsActive")));
    assert_eq!(available["lastTransitionTime"], "2024-05-01T10:02:00Z");
    assert_eq!(available["message"], "1 job(s) are currently active");
    let progressing = condition(recovered.status(), "Progressing").unwrap();
    assert_eq!((progressing["status"].as_str(), progressing["lastTransitionTime"].as_str()), (Some("True"), Some("2024-05-01T10:02:00Z")));
}

/// The book's failed List: here, children the plugin cannot read.
#[test]
fn unreadable_children_keep_the_status_and_report_a_reconciliation_error() {
    let stored = json!({"lastScheduleTime": "2024-05-01T08:55:00Z", "active": [active_ref("2024-05-01T08:55:00Z")]});
    let mut broken = job("2024-05-01T08:55:00Z", State::Active);
    broken.value_mut()["status"]["startTime"] = json!("yesterday");
    let out = run(&cron_job(json!({}), stored), &[broken], "2024-05-01T09:01:00Z");
    assert_eq!(out.0.len(), 1, "only the status: {:?}", out.0);
    let status = out.status();
    assert_eq!(status["lastScheduleTime"], "2024-05-01T08:55:00Z", "the stored status is kept");
    assert_eq!(status["active"].as_array().unwrap().len(), 1);
    let degraded = condition(status, "Degraded").unwrap();
    assert_eq!((degraded["status"].as_str(), degraded["reason"].as_str()), (Some("True"), Some("ReconciliationError")));
    assert!(degraded["message"].as_str().unwrap().starts_with("cannot read the child Jobs: "), "{degraded}");
    assert_eq!(condition(status, "Progressing").unwrap()["status"], "Unknown");
}
