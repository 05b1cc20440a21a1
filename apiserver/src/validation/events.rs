//! Event validation as upstream's `ValidateEventCreate` / `ValidateEventUpdate`: every Event
//! passes the legacy rules (its namespace matches its object's; an Event with an `eventTime`
//! names its reporter, action and reason), and one written through events.k8s.io/v1 also the
//! strict ones (an `eventTime`, a known `type`, no deprecated core fields, a sane `series`, and
//! on update nothing but the series and metadata may change). Fields are named as the core
//! Event names them, whichever version the request was made in, as upstream's messages do.

use super::{immutable, invalid, required};
use crate::status::Cause;
use operator_selector::label::qualified_name_errors;
use serde_json::Value;

const REPORTING_INSTANCE_LENGTH_LIMIT: usize = 128;
const ACTION_LENGTH_LIMIT: usize = 128;
const REASON_LENGTH_LIMIT: usize = 128;
const NOTE_LENGTH_LIMIT: usize = 1024;

fn text<'a>(event: &'a Value, pointer: &str) -> &'a str {
    event.pointer(pointer).and_then(Value::as_str).unwrap_or_default()
}

/// A Go zero `metav1.Time`/`MicroTime`: absent or null.
fn zero_time(event: &Value, field: &str) -> bool {
    event.get(field).is_none_or(Value::is_null)
}

fn at_most(field: &str, limit: usize) -> Cause {
    invalid("", &format!("can have at most {limit} characters"), field)
}

/// Causes for a create (`old` = None) or update of a core Event written through the API group
/// `request_group` ("" for core/v1, "events.k8s.io" for events.k8s.io/v1).
pub fn validate(event: &Value, old: Option<&Value>, request_group: &str) -> Vec<Cause> {
    let mut causes = legacy(event);
    if request_group.is_empty() {
        return causes; // core/v1: no further validation, for backwards compatibility
    }
    match old {
        None => strict_create(event, &mut causes),
        Some(old) => strict_update(event, old, &mut causes),
    }
    causes
}

/// `legacyValidateEvent`.
fn legacy(event: &Value) -> Vec<Cause> {
    let mut causes = vec![];
    let namespace = text(event, "/metadata/namespace");
    let object_namespace = text(event, "/involvedObject/namespace");
    let mismatch = || invalid(object_namespace, "does not match event.namespace", "involvedObject.namespace");
    if zero_time(event, "eventTime") {
        // An old-style Event: its namespace is its object's ("default" allowed for a cluster-scoped one).
        let matches = if object_namespace.is_empty() { namespace.is_empty() || namespace == "default" } else { namespace == object_namespace };
        if !matches {
            causes.push(mismatch());
        }
        return causes;
    }
    if object_namespace.is_empty() && namespace != "default" && namespace != "kube-system" {
        causes.push(mismatch());
    }
    let controller = text(event, "/reportingComponent");
    if controller.is_empty() {
        causes.push(required("reportingController"));
    }
    causes.extend(qualified_name_errors(controller).iter().map(|m| invalid(controller, m, "reportingController")));
    let instance = text(event, "/reportingInstance");
    if instance.is_empty() {
        causes.push(required("reportingInstance"));
    }
    if instance.len() > REPORTING_INSTANCE_LENGTH_LIMIT {
        causes.push(at_most("reportingInstance", REPORTING_INSTANCE_LENGTH_LIMIT));
    }
    for (field, limit) in [("action", ACTION_LENGTH_LIMIT), ("reason", REASON_LENGTH_LIMIT)] {
        let value = text(event, &format!("/{field}"));
        if value.is_empty() {
            causes.push(required(field));
        }
        if value.len() > limit {
            causes.push(at_most(field, limit));
        }
    }
    if text(event, "/message").len() > NOTE_LENGTH_LIMIT {
        causes.push(at_most("message", NOTE_LENGTH_LIMIT));
    }
    causes
}

/// `validateV1EventSeries`.
fn series(event: &Value, causes: &mut Vec<Cause>) {
    let Some(series) = event.get("series").filter(|s| !s.is_null()) else { return };
    if series.get("count").and_then(Value::as_i64).unwrap_or(0) < 2 {
        causes.push(invalid("", "should be at least 2", "series.count"));
    }
    if zero_time(series, "lastObservedTime") {
        causes.push(required("series.lastObservedTime"));
    }
}

fn strict_create(event: &Value, causes: &mut Vec<Cause>) {
    series(event, causes);
    if zero_time(event, "eventTime") {
        causes.push(required("eventTime"));
    }
    let kind = text(event, "/type");
    if kind != "Normal" && kind != "Warning" {
        causes.push(invalid("", &format!("has invalid value: {kind}"), "type"));
    }
    for field in ["firstTimestamp", "lastTimestamp"] {
        if !zero_time(event, field) {
            causes.push(invalid("", "needs to be unset", field));
        }
    }
    if event.get("count").and_then(Value::as_i64).unwrap_or(0) != 0 {
        causes.push(invalid("", "needs to be unset", "count"));
    }
    if !text(event, "/source/component").is_empty() || !text(event, "/source/host").is_empty() {
        causes.push(invalid("", "needs to be unset", "source"));
    }
}

fn strict_update(event: &Value, old: &Value, causes: &mut Vec<Cause>) {
    if event.get("series") != old.get("series") {
        series(event, causes);
    }
    // Upstream's list, `reason` twice included; the core names of the v1 fields.
    for (field, core) in [
        ("involvedObject", "involvedObject"),
        ("reason", "reason"),
        ("message", "message"),
        ("source", "source"),
        ("firstTimestamp", "firstTimestamp"),
        ("lastTimestamp", "lastTimestamp"),
        ("count", "count"),
        ("reason", "reason"),
        ("type", "type"),
        ("eventTime", "eventTime"),
        ("action", "action"),
        ("related", "related"),
        ("reportingController", "reportingComponent"),
        ("reportingInstance", "reportingInstance"),
    ] {
        let (new_value, old_value) = (event.get(core).unwrap_or(&Value::Null), old.get(core).unwrap_or(&Value::Null));
        if new_value != old_value {
            causes.push(immutable(field, new_value));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn messages(causes: &[Cause]) -> Vec<String> {
        causes.iter().map(|c| format!("{}: {}", c.field, c.message)).collect()
    }

    #[test]
    fn an_events_v1_event_without_time_object_or_valid_type_is_refused_in_upstreams_words() {
        let event = json!({"metadata": {"name": "bad", "namespace": "fidelity"}, "reason": "Synced", "type": "Sideways"});
        assert_eq!(
            messages(&validate(&event, None, "events.k8s.io")),
            [
                r#"involvedObject.namespace: Invalid value: "": does not match event.namespace"#,
                "eventTime: Required value",
                r#"type: Invalid value: "": has invalid value: Sideways"#,
            ]
        );
    }

    #[test]
    fn a_core_event_gets_the_legacy_rules_only() {
        let event = json!({"metadata": {"name": "old", "namespace": "fidelity"}, "involvedObject": {"namespace": "fidelity"}, "type": "Sideways", "count": 3});
        assert!(validate(&event, None, "").is_empty());
        let elsewhere = json!({"metadata": {"name": "old", "namespace": "fidelity"}, "involvedObject": {"namespace": "other"}});
        assert_eq!(
            messages(&validate(&elsewhere, None, "")),
            [r#"involvedObject.namespace: Invalid value: "other": does not match event.namespace"#]
        );
    }

    #[test]
    fn an_event_with_an_event_time_must_name_its_reporter_action_and_reason() {
        let event = json!({"metadata": {"name": "e", "namespace": "fidelity"}, "involvedObject": {"namespace": "fidelity"}, "eventTime": "2026-01-01T00:00:00.000000Z",
            "reportingComponent": "example.com/c"});
        assert_eq!(messages(&validate(&event, None, "")), ["reportingInstance: Required value", "action: Required value", "reason: Required value"]);
        let unnamed = json!({"metadata": {"namespace": "fidelity"}, "involvedObject": {"namespace": "fidelity"}, "eventTime": "2026-01-01T00:00:00.000000Z",
            "reportingInstance": "i", "action": "A", "reason": "R"});
        assert_eq!(messages(&validate(&unnamed, None, ""))[0], "reportingController: Required value");
    }

    #[test]
    fn an_events_v1_update_may_not_change_the_note() {
        let old = json!({"metadata": {"name": "e", "namespace": "fidelity"}, "involvedObject": {"namespace": "fidelity"}, "eventTime": "2026-01-01T00:00:00.000000Z",
            "reportingComponent": "c", "reportingInstance": "i", "action": "A", "reason": "R", "type": "Normal", "message": "before"});
        let mut new = old.clone();
        new["message"] = json!("after");
        assert_eq!(messages(&validate(&new, Some(&old), "events.k8s.io")), [r#"message: Invalid value: "after": field is immutable"#]);
        assert!(validate(&new, Some(&old), "").is_empty());
    }
}
