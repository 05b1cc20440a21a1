//! Admission checks: the tutorial's webhook (the schedule parses, the name
//! leaves room for the Job suffix) plus upstream's API validation (no TZ in
//! the schedule, a known time zone, non-negative numbers, a runnable Job
//! template). Field paths and wording follow the API server's.
//!
//! Two entry points share the value checks: [`validate_object`] for
//! admission, over the object as sent (a wrongly typed field is an error on
//! that field), and [`validate`] for reconcile, over the typed CronJob.

use operator_plugin_sdk::{FieldError, FieldErrorKind, FieldValue, Object};
use serde_json::Value;

use crate::api::{ConcurrencyPolicy, CronJob, MAX_NAME_LENGTH};
use crate::schedule;

/// Every problem with a CronJob read into its type; empty when it is valid.
/// Reconcile runs it on what is stored, which admission may not have seen.
pub fn validate(cron_job: &CronJob) -> Vec<FieldError> {
    let mut errors = Vec::new();
    validate_name(cron_job.name(), &mut errors);
    let spec = &cron_job.spec;
    validate_schedule(spec.schedule.as_deref(), &mut errors);
    if let Some(zone) = &spec.time_zone {
        validate_time_zone(zone, &mut errors);
    }
    if let Some(policy) = &spec.concurrency_policy {
        validate_concurrency_policy(policy, &mut errors);
    }
    for (field, value) in [
        ("startingDeadlineSeconds", spec.starting_deadline_seconds),
        ("successfulJobsHistoryLimit", spec.successful_jobs_history_limit),
        ("failedJobsHistoryLimit", spec.failed_jobs_history_limit),
    ] {
        if let Some(n) = value {
            validate_non_negative(field, n, &mut errors);
        }
    }
    validate_job_template(spec.job_template.as_ref(), &mut errors);
    errors
}

/// Admission's checks over the object as sent: a field of the wrong JSON
/// type is reported on that field, as the API server reports it ("must be a
/// boolean"), and the values of the others are checked as [`validate`] does,
/// in the same order.
pub fn validate_object(object: &Object) -> Vec<FieldError> {
    let mut errors = Vec::new();
    validate_name(object.name(), &mut errors);
    let spec = object.spec();
    if !spec.is_object() {
        errors.push(FieldError::required("spec", ""));
        return errors;
    }
    match spec.get("schedule") {
        None | Some(Value::Null) => validate_schedule(None, &mut errors),
        Some(Value::String(s)) => validate_schedule(Some(s), &mut errors),
        Some(other) => errors.push(FieldError::invalid("spec.schedule", text(other), "must be a string")),
    }
    match spec.get("timeZone") {
        None | Some(Value::Null) => {}
        Some(Value::String(zone)) => validate_time_zone(zone, &mut errors),
        Some(other) => errors.push(FieldError::invalid("spec.timeZone", text(other), "must be a string")),
    }
    match spec.get("concurrencyPolicy") {
        None | Some(Value::Null) => {}
        Some(Value::String(policy)) => validate_concurrency_policy(policy, &mut errors),
        Some(other) => errors.push(FieldError::not_supported("spec.concurrencyPolicy", text(other), &ConcurrencyPolicy::NAMES)),
    }
    if let Some(v) = spec.get("suspend").filter(|v| !v.is_null() && !v.is_boolean()) {
        errors.push(FieldError::invalid("spec.suspend", text(v), "must be a boolean"));
    }
    for field in ["startingDeadlineSeconds", "successfulJobsHistoryLimit", "failedJobsHistoryLimit"] {
        match spec.get(field) {
            None | Some(Value::Null) => {}
            Some(v) if v.is_i64() => validate_non_negative(field, v.as_i64().unwrap_or_default(), &mut errors),
            Some(v) if v.is_u64() => errors.push(FieldError::invalid(format!("spec.{field}"), text(v), "must be greater than or equal to 0")),
            Some(v) => errors.push(FieldError::invalid(format!("spec.{field}"), text(v), "must be an integer")),
        }
    }
    validate_job_template(spec.get("jobTemplate").filter(|t| !t.is_null()), &mut errors);
    errors
}

fn text(value: &Value) -> FieldValue {
    FieldValue::from(value)
}

fn validate_name(name: &str, errors: &mut Vec<FieldError>) {
    if name.len() > MAX_NAME_LENGTH {
        errors.push(FieldError::invalid("metadata.name", name, format!("must be no more than {MAX_NAME_LENGTH} characters")));
    }
}

fn validate_schedule(schedule: Option<&str>, errors: &mut Vec<FieldError>) {
    const FIELD: &str = "spec.schedule";
    let Some(schedule) = schedule.filter(|s| !s.is_empty()) else {
        return errors.push(FieldError::required(FIELD, ""));
    };
    if let Err(e) = schedule::parse(schedule, chrono_tz::UTC) {
        errors.push(FieldError::invalid(FIELD, schedule, e.0));
    }
    // Upstream rejects a zone inside the schedule on create: spec.timeZone says it.
    if schedule.contains("TZ") {
        errors.push(FieldError::invalid(FIELD, schedule, "cannot use TZ or CRON_TZ in schedule, use timeZone field instead"));
    }
}

fn validate_concurrency_policy(policy: &str, errors: &mut Vec<FieldError>) {
    if ConcurrencyPolicy::parse(Some(policy)).is_none() {
        errors.push(FieldError::not_supported("spec.concurrencyPolicy", policy, &ConcurrencyPolicy::NAMES));
    }
}

fn validate_non_negative(field: &str, value: i64, errors: &mut Vec<FieldError>) {
    if value < 0 {
        errors.push(FieldError::invalid(format!("spec.{field}"), value, "must be greater than or equal to 0"));
    }
}

/// Upstream's `validateTimeZone`.
fn validate_time_zone(zone: &str, errors: &mut Vec<FieldError>) {
    const FIELD: &str = "spec.timeZone";
    if zone.is_empty() {
        return errors.push(FieldError::invalid(FIELD, zone, "timeZone must be nil or non-empty string"));
    }
    let valid_part = |p: &str| {
        p != "."
            && p != ".."
            && !p.starts_with('-')
            && (1..=14).contains(&p.len())
            && p.bytes().all(|b| b.is_ascii_alphanumeric() || b"._-+".contains(&b))
    };
    if !zone.split('/').all(valid_part) {
        return errors.push(FieldError::invalid(FIELD, zone, format!("unknown time zone {zone}")));
    }
    if zone.eq_ignore_ascii_case("Local") {
        return errors.push(FieldError::invalid(FIELD, zone, "timeZone must be an explicit time zone as defined in https://www.iana.org/time-zones"));
    }
    if let Err(e) = schedule::zone::load(zone) {
        errors.push(FieldError::invalid(FIELD, zone, e));
    }
}

/// The parts of upstream's Job validation that decide whether a Job can be
/// created at all; the API server checks the rest when the Job is created.
fn validate_job_template(template: Option<&Value>, errors: &mut Vec<FieldError>) {
    let Some(template) = template else {
        return errors.push(FieldError::required("spec.jobTemplate", ""));
    };
    let pod_spec = template.pointer("/spec/template/spec");
    let has_containers = pod_spec.and_then(|s| s.get("containers")).and_then(Value::as_array).is_some_and(|c| !c.is_empty());
    if !has_containers {
        errors.push(FieldError::required("spec.jobTemplate.spec.template.spec.containers", ""));
    }
    let restart_policy = pod_spec.and_then(|s| s.get("restartPolicy")).and_then(Value::as_str).unwrap_or("");
    if restart_policy != "OnFailure" && restart_policy != "Never" {
        errors.push(FieldError {
            field: "spec.jobTemplate.spec.template.spec.restartPolicy".into(),
            kind: if restart_policy.is_empty() { FieldErrorKind::Required } else { FieldErrorKind::NotSupported },
            value: (!restart_policy.is_empty()).then(|| restart_policy.to_string()),
            detail: "supported values: \"OnFailure\", \"Never\"".into(),
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use operator_plugin_sdk::json;

    fn cron_job(name: &str, spec_patch: Value) -> Object {
        let mut spec = json!({
            "schedule": "*/1 * * * *",
            "jobTemplate": {"spec": {"template": {"spec": {
                "containers": [{"name": "hello", "image": "busybox"}],
                "restartPolicy": "OnFailure"
            }}}}
        });
        for (k, v) in spec_patch.as_object().unwrap() {
            if v.is_null() {
                spec.as_object_mut().unwrap().remove(k);
            } else {
                spec[k] = v.clone();
            }
        }
        Object::new(json!({"apiVersion": "batch.tutorial.kubebuilder.io/v1", "kind": "CronJob", "metadata": {"name": name}, "spec": spec}))
    }

    /// The errors as the API server would print them. Reconcile's check of
    /// the typed CronJob finds exactly what admission's finds.
    fn errors(name: &str, spec_patch: Value) -> Vec<String> {
        let object = cron_job(name, spec_patch);
        let found = validate_object(&object);
        let typed: CronJob = object.parse().expect("a CronJob");
        assert_eq!(validate(&typed), found, "typed and raw checks differ on {}", object.value());
        found.iter().map(ToString::to_string).collect()
    }

    #[test]
    fn a_tutorial_cronjob_is_valid() {
        assert_eq!(errors("cronjob-sample", json!({})), Vec::<String>::new());
        let full = json!({"timeZone": "America/New_York", "concurrencyPolicy": "Forbid", "suspend": false,
            "startingDeadlineSeconds": 0, "successfulJobsHistoryLimit": 3, "failedJobsHistoryLimit": 1});
        assert_eq!(errors("cronjob-sample", full), Vec::<String>::new());
        for schedule in ["@hourly", "@every 1h30m", "0 9 * JAN-MAR MON-FRI", "0 0 1 * MON", "?/5 * * * *"] {
            assert_eq!(errors("c", json!({"schedule": schedule})), Vec::<String>::new(), "{schedule}");
        }
    }

    #[test]
    fn each_invalid_field_is_named_as_the_api_server_names_it() {
        #[rustfmt::skip]
        let cases: &[(&str, &str, Value, &str)] = &[
            ("a name too long for the Job suffix", "a-name-that-is-exactly-fifty-three-characters-long-xx", json!({}),
                r#"metadata.name: Invalid value: "a-name-that-is-exactly-fifty-three-characters-long-xx": must be no more than 52 characters"#),
            ("a missing schedule", "c", json!({"schedule": null}), "spec.schedule: Required value"),
            ("an unparseable schedule", "c", json!({"schedule": "* * * *"}),
                r#"spec.schedule: Invalid value: "* * * *": expected exactly 5 fields, found 4: [* * * *]"#),
            ("a seconds field", "c", json!({"schedule": "0 */1 * * * *"}),
                r#"spec.schedule: Invalid value: "0 */1 * * * *": expected exactly 5 fields, found 6: [0 */1 * * * *]"#),
            ("TZ inside the schedule", "c", json!({"schedule": "TZ=UTC 0 * * * *"}),
                r#"spec.schedule: Invalid value: "TZ=UTC 0 * * * *": cannot use TZ or CRON_TZ in schedule, use timeZone field instead"#),
            ("CRON_TZ inside the schedule", "c", json!({"schedule": "CRON_TZ=UTC 0 * * * *"}),
                r#"spec.schedule: Invalid value: "CRON_TZ=UTC 0 * * * *": cannot use TZ or CRON_TZ in schedule, use timeZone field instead"#),
            ("an unknown time zone", "c", json!({"timeZone": "Mars/Olympus_Mons"}),
                r#"spec.timeZone: Invalid value: "Mars/Olympus_Mons": unknown time zone Mars/Olympus_Mons"#),
            ("an empty time zone", "c", json!({"timeZone": ""}),
                r#"spec.timeZone: Invalid value: "": timeZone must be nil or non-empty string"#),
            ("the Local time zone", "c", json!({"timeZone": "Local"}),
                r#"spec.timeZone: Invalid value: "Local": timeZone must be an explicit time zone as defined in https://www.iana.org/time-zones"#),
            ("a time zone path", "c", json!({"timeZone": "../../etc/passwd"}),
                r#"spec.timeZone: Invalid value: "../../etc/passwd": unknown time zone ../../etc/passwd"#),
            ("an unknown concurrency policy", "c", json!({"concurrencyPolicy": "Sometimes"}),
                r#"spec.concurrencyPolicy: Unsupported value: "Sometimes": supported values: "Allow", "Forbid", "Replace""#),
            ("a negative deadline", "c", json!({"startingDeadlineSeconds": -1}),
                r#"spec.startingDeadlineSeconds: Invalid value: -1: must be greater than or equal to 0"#),
            ("a negative successful history limit", "c", json!({"successfulJobsHistoryLimit": -3}),
                r#"spec.successfulJobsHistoryLimit: Invalid value: -3: must be greater than or equal to 0"#),
            ("a negative failed history limit", "c", json!({"failedJobsHistoryLimit": -1}),
                r#"spec.failedJobsHistoryLimit: Invalid value: -1: must be greater than or equal to 0"#),
            ("a missing job template", "c", json!({"jobTemplate": null}), "spec.jobTemplate: Required value"),
            ("a pod template without containers", "c", json!({"jobTemplate": {"spec": {"template": {"spec": {"restartPolicy": "Never"}}}}}),
                "spec.jobTemplate.spec.template.spec.containers: Required value"),
            ("a restart policy Jobs refuse", "c", json!({"jobTemplate": {"spec": {"template": {"spec": {"containers": [{"name": "x"}], "restartPolicy": "Always"}}}}}),
                r#"spec.jobTemplate.spec.template.spec.restartPolicy: Unsupported value: "Always": supported values: "OnFailure", "Never""#),
        ];
        for (what, name, patch, want) in cases {
            assert_eq!(errors(name, patch.clone()), vec![want.to_string()], "{what}");
        }
    }

    /// Admission sees the object before it is read into the type: each
    /// wrongly typed field is an error of its own, as the API server words it.
    #[test]
    fn wrongly_typed_fields_are_named_one_by_one_at_admission() {
        let object = cron_job(
            "c",
            json!({"schedule": 5, "timeZone": true, "concurrencyPolicy": 1, "suspend": "yes",
                   "startingDeadlineSeconds": "60", "failedJobsHistoryLimit": 1.5, "successfulJobsHistoryLimit": 9223372036854775808u64}),
        );
        let found: Vec<String> = validate_object(&object).iter().map(ToString::to_string).collect();
        assert_eq!(
            found,
            [
                r#"spec.schedule: Invalid value: 5: must be a string"#,
                r#"spec.timeZone: Invalid value: true: must be a string"#,
                r#"spec.concurrencyPolicy: Unsupported value: 1: supported values: "Allow", "Forbid", "Replace""#,
                r#"spec.suspend: Invalid value: "yes": must be a boolean"#,
                r#"spec.startingDeadlineSeconds: Invalid value: "60": must be an integer"#,
                r#"spec.successfulJobsHistoryLimit: Invalid value: 9223372036854775808: must be greater than or equal to 0"#,
                r#"spec.failedJobsHistoryLimit: Invalid value: 1.5: must be an integer"#,
            ]
        );
        let no_spec = Object::new(json!({"metadata": {"name": "c"}, "spec": []}));
        assert_eq!(validate_object(&no_spec), vec![FieldError::required("spec", "")]);
    }

    #[test]
    fn a_name_of_exactly_52_characters_is_allowed() {
        let name = "a".repeat(52);
        assert_eq!(errors(&name, json!({})), Vec::<String>::new());
    }
}
