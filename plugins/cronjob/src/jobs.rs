//! The child Jobs: how finished they are, when they were scheduled, in which
//! order they age, and how a new one is made from the template.

use std::borrow::Cow;
use std::collections::BTreeMap;

use chrono::{DateTime, SecondsFormat, Utc};
use chrono_tz::Tz;
use operator_plugin_sdk::ObjectRef;
use operator_plugin_sdk::k8s_openapi;
use operator_plugin_sdk::k8s_openapi::api::batch::v1::JobStatus;
use operator_plugin_sdk::k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, Time as MetaTime};
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

use crate::api::{CronJob, SCHEDULED_AT_ANNOTATION, UPSTREAM_SCHEDULED_TIMESTAMP_ANNOTATION};

/// A child `batch/v1` Job as the controller reads it: metadata and status.
/// Its spec (the pod template) is never read, so it is skipped unparsed:
/// reading children as k8s-openapi's whole `Job` would link PodSpec's
/// deserializer into the plugin (cronjob.wasm 1.39 MB -> 2.14 MB) and parse
/// every child's pod template on every reconcile.
#[derive(Clone, Debug, Default, Deserialize)]
pub struct Job {
    #[serde(default)]
    pub metadata: ObjectMeta,
    #[serde(default)]
    pub status: Option<JobStatus>,
}

operator_plugin_sdk::view_of!(Job, k8s_openapi::api::batch::v1::Job);

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
    pub job: &'a Job,
    pub finished: Option<Finished>,
    pub start_time: Option<DateTime<Utc>>,
    pub completion_time: Option<DateTime<Utc>>,
    pub scheduled_at: Option<DateTime<Utc>>,
}

/// A `metav1.Time` as chrono's UTC instant.
pub fn utc(time: &MetaTime) -> Option<DateTime<Utc>> {
    let nanos = u32::try_from(time.0.subsec_nanosecond()).ok()?;
    DateTime::from_timestamp(time.0.as_second(), nanos)
}

impl<'a> ChildJob<'a> {
    pub fn new(job: &'a Job) -> Self {
        let annotations = job.metadata.annotations.as_ref();
        let scheduled_at = [SCHEDULED_AT_ANNOTATION, UPSTREAM_SCHEDULED_TIMESTAMP_ANNOTATION]
            .iter()
            .find_map(|key| annotations.and_then(|a| a.get(*key)).and_then(|t| DateTime::parse_from_rfc3339(t).ok()))
            .map(|t| t.with_timezone(&Utc));
        let status = job.status.as_ref();
        ChildJob {
            job,
            finished: finished(job),
            start_time: status.and_then(|s| s.start_time.as_ref()).and_then(utc),
            completion_time: status.and_then(|s| s.completion_time.as_ref()).and_then(utc),
            scheduled_at,
        }
    }

    pub fn name(&self) -> &str {
        self.job.metadata.name.as_deref().unwrap_or_default()
    }

    pub fn uid(&self) -> &str {
        self.job.metadata.uid.as_deref().unwrap_or_default()
    }

    pub fn namespace(&self) -> &str {
        self.job.metadata.namespace.as_deref().unwrap_or_default()
    }

    pub fn is_active(&self) -> bool {
        self.finished.is_none()
    }

    pub fn is_being_deleted(&self) -> bool {
        self.job.metadata.deletion_timestamp.is_some()
    }

    /// True when the Job carries the name this controller gives the run it
    /// records as scheduled, i.e. this controller created it.
    pub fn is_ours(&self, cron_job_name: &str) -> bool {
        self.scheduled_at.is_some_and(|at| self.name() == job_name(cron_job_name, at))
    }

    /// What a delete of this Job names.
    pub fn object_ref(&self) -> ObjectRef {
        ObjectRef { api_version: "batch/v1".into(), kind: "Job".into(), namespace: self.namespace().into(), name: self.name().into() }
    }
}

/// Upstream's `IsJobFinished`/`FinishedCondition`: a `Complete` or `Failed`
/// condition with status `True`. `SuccessCriteriaMet` and `FailureTarget`
/// only announce those: the Job is still terminating its pods until the
/// terminal condition is added, and upstream's CronJob controller waits for it.
pub fn finished(job: &Job) -> Option<Finished> {
    let conditions = job.status.as_ref()?.conditions.as_ref()?;
    conditions.iter().find_map(|c| {
        if c.status != "True" {
            return None;
        }
        match c.type_.as_str() {
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

/// The Job a run creates: typed metadata over the template's spec, which is
/// passed through as stored (the API server validates it on create).
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
pub struct NewJob<'a> {
    api_version: &'static str,
    kind: &'static str,
    metadata: ObjectMeta,
    spec: Cow<'a, Value>,
}

fn string_map(value: Option<&Value>) -> BTreeMap<String, String> {
    value.and_then(Value::as_object).map(|m| m.iter().filter_map(|(k, v)| Some((k.clone(), v.as_str()?.to_string()))).collect()).unwrap_or_default()
}

/// Upstream's `getJobFromTemplate2` plus the tutorial's annotation: the
/// template's labels, annotations and spec, the deterministic name, and the
/// scheduled time recorded twice (the tutorial's key in UTC, upstream's in
/// the CronJob's zone). The host adds namespace and owner reference.
pub fn job_from_template<'a>(cron_job: &CronJob, template: &'a Value, scheduled: DateTime<Utc>, zone: Tz) -> NewJob<'a> {
    let labels = string_map(template.pointer("/metadata/labels"));
    let mut annotations = string_map(template.pointer("/metadata/annotations"));
    annotations.insert(SCHEDULED_AT_ANNOTATION.into(), scheduled.to_rfc3339_opts(SecondsFormat::Secs, true));
    annotations.insert(UPSTREAM_SCHEDULED_TIMESTAMP_ANNOTATION.into(), scheduled.with_timezone(&zone).to_rfc3339_opts(SecondsFormat::Secs, true));
    NewJob {
        api_version: "batch/v1",
        kind: "Job",
        metadata: ObjectMeta {
            name: Some(job_name(cron_job.name(), scheduled)),
            namespace: Some(cron_job.namespace().into()),
            labels: (!labels.is_empty()).then_some(labels),
            annotations: Some(annotations),
            ..ObjectMeta::default()
        },
        spec: template.get("spec").map_or_else(|| Cow::Owned(json!({})), Cow::Borrowed),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn job(name: &str, status: Value) -> Job {
        serde_json::from_value(json!({"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": name}, "status": status})).unwrap()
    }

    #[test]
    fn only_a_true_complete_or_failed_condition_finishes_a_job() {
        let cases = [
            (json!({}), None),
            (json!({"active": 1}), None),
            (json!({"conditions": [{"type": "Complete", "status": "True"}]}), Some(Finished::Complete)),
            (json!({"conditions": [{"type": "Failed", "status": "True"}]}), Some(Finished::Failed)),
            (json!({"conditions": [{"type": "Complete", "status": "False"}]}), None),
            (json!({"conditions": [{"type": "Suspended", "status": "True"}]}), None),
            (json!({"conditions": [{"type": "SuccessCriteriaMet", "status": "True"}]}), None),
            (json!({"conditions": [{"type": "FailureTarget", "status": "True"}]}), None),
            (json!({"conditions": [{"type": "FailureTarget", "status": "True"}, {"type": "Failed", "status": "True"}]}), Some(Finished::Failed)),
        ];
        for (status, want) in cases {
            assert_eq!(finished(&job("j", status.clone())), want, "{status}");
        }
    }

    #[test]
    fn job_names_count_minutes_since_the_epoch() {
        let at = DateTime::parse_from_rfc3339("2024-05-01T10:01:00Z").unwrap().with_timezone(&Utc);
        assert_eq!(job_name("hello", at), "hello-28575961");
        assert_eq!(job_name("hello", at).len(), "hello".len() + 9);
    }

    #[test]
    fn older_starts_sort_first_and_unstarted_jobs_last() {
        let a = job("a", json!({"startTime": "2024-05-01T10:02:00Z"}));
        let b = job("b", json!({"startTime": "2024-05-01T10:01:00Z"}));
        let c = job("c", json!({}));
        let d = job("d", json!({"startTime": "2024-05-01T10:01:00Z"}));
        let (a, b, c, d) = (ChildJob::new(&a), ChildJob::new(&b), ChildJob::new(&c), ChildJob::new(&d));
        let mut all = vec![&c, &a, &d, &b];
        sort_by_start_time(&mut all);
        assert_eq!(all.iter().map(|j| j.name()).collect::<Vec<_>>(), ["b", "d", "a", "c"]);
    }

    #[test]
    fn either_annotation_gives_the_scheduled_time() {
        let annotated = |key: &str, at: &str| -> Job { serde_json::from_value(json!({"metadata": {"annotations": {key: at}}})).unwrap() };
        let tutorial = annotated(SCHEDULED_AT_ANNOTATION, "2024-05-01T10:01:00Z");
        let upstream = annotated(UPSTREAM_SCHEDULED_TIMESTAMP_ANNOTATION, "2024-05-01T06:01:00-04:00");
        assert_eq!(ChildJob::new(&tutorial).scheduled_at, ChildJob::new(&upstream).scheduled_at);
        assert!(ChildJob::new(&tutorial).scheduled_at.is_some());
    }
}
