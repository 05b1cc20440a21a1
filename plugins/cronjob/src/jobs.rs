//! The child Jobs: how finished they are, when they were scheduled, in which
//! order they age, and how a new one is made from the template.

use chrono::{DateTime, SecondsFormat, Utc};
use chrono_tz::Tz;
use operator_plugin_sdk::{Object, json};
use serde_json::{Map, Value};

use crate::api::{SCHEDULED_AT_ANNOTATION, UPSTREAM_SCHEDULED_TIMESTAMP_ANNOTATION};

/// How a Job finished.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Finished {
    Complete,
    Failed,
}

impl Finished {
    pub fn as_str(self) -> &'static str {
        match self {
            Finished::Complete => "Complete",
            Finished::Failed => "Failed",
        }
    }
}

/// One child Job, with what the controller reads from it.
#[derive(Clone, Debug)]
pub struct ChildJob<'a> {
    pub object: &'a Object,
    pub finished: Option<Finished>,
    pub start_time: Option<DateTime<Utc>>,
    pub completion_time: Option<DateTime<Utc>>,
    pub scheduled_at: Option<DateTime<Utc>>,
}

fn time_at(object: &Object, pointer: &str) -> Option<DateTime<Utc>> {
    let text = object.pointer(pointer)?.as_str()?;
    DateTime::parse_from_rfc3339(text)
        .ok()
        .map(|t| t.with_timezone(&Utc))
}

impl<'a> ChildJob<'a> {
    pub fn new(object: &'a Object) -> Self {
        let scheduled_at = [
            SCHEDULED_AT_ANNOTATION,
            UPSTREAM_SCHEDULED_TIMESTAMP_ANNOTATION,
        ]
        .iter()
        .find_map(|key| {
            object
                .annotation(key)
                .and_then(|t| DateTime::parse_from_rfc3339(t).ok())
        })
        .map(|t| t.with_timezone(&Utc));
        ChildJob {
            object,
            finished: finished(object),
            start_time: time_at(object, "/status/startTime"),
            completion_time: time_at(object, "/status/completionTime"),
            scheduled_at,
        }
    }

    pub fn name(&self) -> &str {
        self.object.name()
    }

    pub fn uid(&self) -> &str {
        self.object.uid()
    }

    pub fn is_active(&self) -> bool {
        self.finished.is_none()
    }

    pub fn is_being_deleted(&self) -> bool {
        self.object.is_being_deleted()
    }

    /// True when the Job carries the name this controller gives the run it
    /// records as scheduled, i.e. this controller created it.
    pub fn is_ours(&self, cron_job_name: &str) -> bool {
        self.scheduled_at
            .is_some_and(|at| self.name() == job_name(cron_job_name, at))
    }
}

/// Upstream's `IsJobFinished`/`FinishedCondition`: a `Complete` or `Failed`
/// condition with status `True`. `SuccessCriteriaMet` and `FailureTarget`
/// only announce those: the Job is still terminating its pods until the
/// terminal condition is added, and upstream's CronJob controller waits for it.
pub fn finished(job: &Object) -> Option<Finished> {
    let conditions = job.pointer("/status/conditions")?.as_array()?;
    conditions.iter().find_map(|c| {
        if c.get("status").and_then(Value::as_str) != Some("True") {
            return None;
        }
        match c.get("type").and_then(Value::as_str)? {
            "Complete" => Some(Finished::Complete),
            "Failed" => Some(Finished::Failed),
            _ => None,
        }
    })
}

/// Upstream's `byJobStartTime`: by start time, Jobs that never started last,
/// ties by name.
pub fn sort_by_start_time(jobs: &mut [&ChildJob<'_>]) {
    jobs.sort_by(|a, b| match (a.start_time, b.start_time) {
        (Some(x), Some(y)) if x != y => x.cmp(&y),
        (Some(_), None) => std::cmp::Ordering::Less,
        (None, Some(_)) => std::cmp::Ordering::Greater,
        _ => a.name().cmp(b.name()),
    });
}

/// Upstream's `getJobName`: the CronJob's name and the scheduled time in
/// minutes since the epoch. The same run always gets the same name, so a
/// retried or repeated create of it fails with AlreadyExists instead of
/// starting it twice.
pub fn job_name(cron_job_name: &str, scheduled: DateTime<Utc>) -> String {
    format!("{cron_job_name}-{}", scheduled.timestamp().div_euclid(60))
}

fn string_map(value: Option<&Value>) -> Map<String, Value> {
    value
        .and_then(Value::as_object)
        .map(|m| {
            m.iter()
                .filter(|(_, v)| v.is_string())
                .map(|(k, v)| (k.clone(), v.clone()))
                .collect()
        })
        .unwrap_or_default()
}

/// Upstream's `getJobFromTemplate2` plus the tutorial's annotation: the
/// template's labels, annotations and spec, the deterministic name, and the
/// scheduled time recorded twice (the tutorial's key in UTC, upstream's in
/// the CronJob's zone). The host adds namespace and owner reference.
pub fn job_from_template(
    parent: &Object,
    template: &Value,
    scheduled: DateTime<Utc>,
    zone: Tz,
) -> Value {
    let labels = string_map(template.pointer("/metadata/labels"));
    let mut annotations = string_map(template.pointer("/metadata/annotations"));
    annotations.insert(
        SCHEDULED_AT_ANNOTATION.into(),
        json!(scheduled.to_rfc3339_opts(SecondsFormat::Secs, true)),
    );
    annotations.insert(
        UPSTREAM_SCHEDULED_TIMESTAMP_ANNOTATION.into(),
        json!(
            scheduled
                .with_timezone(&zone)
                .to_rfc3339_opts(SecondsFormat::Secs, true)
        ),
    );
    let mut metadata = Map::new();
    metadata.insert("name".into(), json!(job_name(parent.name(), scheduled)));
    metadata.insert("namespace".into(), json!(parent.namespace()));
    if !labels.is_empty() {
        metadata.insert("labels".into(), Value::Object(labels));
    }
    metadata.insert("annotations".into(), Value::Object(annotations));
    json!({
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": metadata,
        "spec": template.get("spec").cloned().unwrap_or_else(|| json!({})),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn job(name: &str, status: Value) -> Object {
        Object::new(
            json!({"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": name}, "status": status}),
        )
    }

    #[test]
    fn only_a_true_complete_or_failed_condition_finishes_a_job() {
        let cases = [
            (json!({}), None),
            (json!({"active": 1}), None),
            (
                json!({"conditions": [{"type": "Complete", "status": "True"}]}),
                Some(Finished::Complete),
            ),
            (
                json!({"conditions": [{"type": "Failed", "status": "True"}]}),
                Some(Finished::Failed),
            ),
            (
                json!({"conditions": [{"type": "Complete", "status": "False"}]}),
                None,
            ),
            (
                json!({"conditions": [{"type": "Suspended", "status": "True"}]}),
                None,
            ),
            (
                json!({"conditions": [{"type": "SuccessCriteriaMet", "status": "True"}]}),
                None,
            ),
            (
                json!({"conditions": [{"type": "FailureTarget", "status": "True"}]}),
                None,
            ),
            (
                json!({"conditions": [{"type": "FailureTarget", "status": "True"}, {"type": "Failed", "status": "True"}]}),
                Some(Finished::Failed),
            ),
        ];
        for (status, want) in cases {
            assert_eq!(finished(&job("j", status.clone())), want, "{status}");
        }
    }

    #[test]
    fn job_names_count_minutes_since_the_epoch() {
        let at = DateTime::parse_from_rfc3339("2024-05-01T10:01:00Z")
            .unwrap()
            .with_timezone(&Utc);
        assert_eq!(job_name("hello", at), "hello-28575961");
        assert_eq!(job_name("hello", at).len(), "hello".len() + 9);
    }

    #[test]
    fn older_starts_sort_first_and_unstarted_jobs_last() {
        let a = job("a", json!({"startTime": "2024-05-01T10:02:00Z"}));
        let b = job("b", json!({"startTime": "2024-05-01T10:01:00Z"}));
        let c = job("c", json!({}));
        let d = job("d", json!({"startTime": "2024-05-01T10:01:00Z"}));
        let (a, b, c, d) = (
            ChildJob::new(&a),
            ChildJob::new(&b),
            ChildJob::new(&c),
            ChildJob::new(&d),
        );
        let mut all = vec![&c, &a, &d, &b];
        sort_by_start_time(&mut all);
        assert_eq!(
            all.iter().map(|j| j.name()).collect::<Vec<_>>(),
            ["b", "d", "a", "c"]
        );
    }

    #[test]
    fn either_annotation_gives_the_scheduled_time() {
        let tutorial = Object::new(
            json!({"metadata": {"annotations": {SCHEDULED_AT_ANNOTATION: "2024-05-01T10:01:00Z"}}}),
        );
        let upstream = Object::new(
            json!({"metadata": {"annotations": {UPSTREAM_SCHEDULED_TIMESTAMP_ANNOTATION: "2024-05-01T06:01:00-04:00"}}}),
        );
        assert_eq!(
            ChildJob::new(&tutorial).scheduled_at,
            ChildJob::new(&upstream).scheduled_at
        );
        assert!(ChildJob::new(&tutorial).scheduled_at.is_some());
    }
}
