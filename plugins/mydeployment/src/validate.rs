//! Validation, worded and pathed as the API server's `ValidateDeployment`
//! (`pkg/apis/apps/validation`), plus our `spec.rollbackTo`.

use std::collections::BTreeMap;

use operator_plugin_sdk::serde::Deserialize;
use operator_plugin_sdk::serde_json::{self, Value};
use operator_plugin_sdk::{FieldError, FieldErrorKind, Object};

use crate::api::{IntOrPercent, LabelSelector, RECREATE, ROLLING_UPDATE, Strategy, TERMINATION_COMPLETE, TERMINATION_STARTED};
use crate::crd::MyDeploymentSpec;
use crate::fenceposts::parse_percent;
use crate::selector::OPERATORS;
use operator_selector::label::{qualified_name_errors, value_errors};

const NON_NEGATIVE: &str = "must be greater than or equal to 0";
const PERCENT_FORMAT: &str =
    "a valid percent string must be a numeric string followed by an ending '%' (e.g. '1%',  or '93%', regex used for validation is '[0-9]+%')";

/// Field errors of `object` as sent; `old` is the stored object on update.
/// It reads the raw object rather than the typed MyDeployment so that a
/// spec the types cannot hold is one error on `spec` ("cannot be read: ..."), and
/// a malformed `metadata` or `status` does not hide the spec's errors.
pub fn validate(object: &Object, old: Option<&Object>) -> Vec<FieldError> {
    let spec = match parse_spec(object.spec()) {
        Ok(spec) => spec,
        Err(e) => return vec![e],
    };
    let mut errors = Vec::new();
    validate_spec(&spec, &mut errors);
    if let Some(old) = old
        && let Ok(old_spec) = parse_spec(old.spec())
        && old_spec.selector != spec.selector
    {
        // apps/v1 made the selector immutable: Pods of the old selector would
        // otherwise be orphaned or, worse, adopted from someone else.
        let value = serde_json::to_string(&spec.selector).unwrap_or_default();
        errors.push(FieldError::invalid("spec.selector", value, "field is immutable"));
    }
    errors
}

/// Parses the spec; a shape the types cannot hold is an error on `spec`.
pub fn parse_spec(spec: &Value) -> Result<MyDeploymentSpec, FieldError> {
    if spec.is_null() {
        return Err(FieldError::required("spec", ""));
    }
    MyDeploymentSpec::deserialize(spec).map_err(|e| FieldError::invalid("spec", "", format!("cannot be read: {e}")))
}

fn non_negative(field: &str, value: Option<i32>, errors: &mut Vec<FieldError>) {
    if let Some(v) = value.filter(|v| *v < 0) {
        errors.push(FieldError::invalid(field, v, NON_NEGATIVE));
    }
}

pub fn validate_spec(spec: &MyDeploymentSpec, errors: &mut Vec<FieldError>) {
    non_negative("spec.replicas", spec.replicas, errors);
    non_negative("spec.minReadySeconds", spec.min_ready_seconds, errors);
    non_negative("spec.revisionHistoryLimit", spec.revision_history_limit, errors);
    if let Some(deadline) = spec.progress_deadline_seconds {
        non_negative("spec.progressDeadlineSeconds", Some(deadline), errors);
        if deadline <= spec.min_ready_seconds() {
            errors.push(FieldError::invalid("spec.progressDeadlineSeconds", deadline, "must be greater than minReadySeconds"));
        }
    }
    match &spec.selector {
        None => errors.push(FieldError::required("spec.selector", "")),
        Some(sel) if sel.is_empty() => {
            errors.push(FieldError::invalid("spec.selector", "{}", "empty selector is invalid for deployment"));
        }
        Some(sel) => validate_selector(sel, errors),
    }
    validate_template(spec.template(), spec.selector.as_ref(), errors);
    if let Some(strategy) = &spec.strategy {
        validate_strategy(strategy, errors);
    }
    if let Some(policy) = spec.pod_replacement_policy.as_deref()
        && policy != TERMINATION_STARTED
        && policy != TERMINATION_COMPLETE
    {
        errors.push(FieldError::not_supported("spec.podReplacementPolicy", policy, &[TERMINATION_COMPLETE, TERMINATION_STARTED]));
    }
    if let Some(rb) = &spec.rollback_to
        && rb.revision() < 1
    {
        // Upstream's RollbackConfig allowed 0 for "the previous revision";
        // a level-based pin needs a number that stays put, so 0 is refused.
        errors.push(FieldError::invalid("spec.rollbackTo.revision", rb.revision(), "must be greater than or equal to 1"));
    }
}

/// `ValidateLabels`: each key and value of a label map at `path`.
fn validate_labels(path: &str, labels: &BTreeMap<String, String>, errors: &mut Vec<FieldError>) {
    for (k, v) in labels {
        for detail in qualified_name_errors(k) {
            errors.push(FieldError::invalid(path, k.clone(), detail));
        }
        for detail in value_errors(v) {
            errors.push(FieldError::invalid(path, v.clone(), detail));
        }
    }
}

fn validate_selector(sel: &LabelSelector, errors: &mut Vec<FieldError>) {
    validate_labels("spec.selector.matchLabels", &sel.match_labels, errors);
    for (i, req) in sel.match_expressions.iter().enumerate() {
        let path = format!("spec.selector.matchExpressions[{i}]");
        for detail in qualified_name_errors(&req.key) {
            errors.push(FieldError::invalid(format!("{path}.key"), req.key.clone(), detail));
        }
        for (j, value) in req.values.iter().enumerate() {
            for detail in value_errors(value) {
                errors.push(FieldError::invalid(format!("{path}.values[{j}]"), value.clone(), detail));
            }
        }
        match req.operator.as_str() {
            "In" | "NotIn" if req.values.is_empty() => {
                errors.push(FieldError::required(format!("{path}.values"), "must be specified when `operator` is 'In' or 'NotIn'"));
            }
            "Exists" | "DoesNotExist" if !req.values.is_empty() => {
                errors.push(FieldError::forbidden(format!("{path}.values"), "may not be specified when `operator` is 'Exists' or 'DoesNotExist'"));
            }
            op if !OPERATORS.contains(&op) => {
                errors.push(FieldError::not_supported(format!("{path}.operator"), op, &OPERATORS));
            }
            _ => {}
        }
    }
}

fn validate_template(template: &Value, selector: Option<&LabelSelector>, errors: &mut Vec<FieldError>) {
    if template.is_null() {
        errors.push(FieldError::required("spec.template", ""));
        return;
    }
    let labels: BTreeMap<String, String> =
        template.pointer("/metadata/labels").and_then(|l| serde_json::from_value(l.clone()).ok()).unwrap_or_default();
    validate_labels("spec.template.metadata.labels", &labels, errors);
    if let Some(sel) = selector
        && !sel.is_empty()
        && !sel.matches(&labels)
    {
        let rendered = labels.iter().map(|(k, v)| format!("{k}:{v}")).collect::<Vec<_>>().join(",");
        errors.push(FieldError::invalid("spec.template.metadata.labels", format!("map[{rendered}]"), "`selector` does not match template `labels`"));
    }
    match template.pointer("/spec/containers").and_then(Value::as_array) {
        Some(containers) if !containers.is_empty() => {
            for (i, c) in containers.iter().enumerate() {
                for field in ["name", "image"] {
                    if c.get(field).and_then(Value::as_str).is_none_or(str::is_empty) {
                        errors.push(FieldError::required(format!("spec.template.spec.containers[{i}].{field}"), ""));
                    }
                }
            }
        }
        _ => errors.push(FieldError::required("spec.template.spec.containers", "")),
    }
    if let Some(policy) = template.pointer("/spec/restartPolicy").and_then(Value::as_str)
        && policy != "Always"
    {
        // Pods of a Deployment are replaced, never restarted to completion.
        errors.push(FieldError::not_supported("spec.template.spec.restartPolicy", policy, &["Always"]));
    }
}

fn validate_strategy(strategy: &Strategy, errors: &mut Vec<FieldError>) {
    match (strategy.type_.as_deref(), &strategy.rolling_update) {
        (Some(t), _) if t != RECREATE && t != ROLLING_UPDATE => {
            errors.push(FieldError::not_supported("spec.strategy.type", t, &[RECREATE, ROLLING_UPDATE]));
        }
        (Some(RECREATE), Some(_)) => {
            errors.push(FieldError::forbidden("spec.strategy.rollingUpdate", "may not be specified when strategy `type` is 'Recreate'"))
        }
        (Some(ROLLING_UPDATE) | None, Some(ru)) => {
            let surge_path = "spec.strategy.rollingUpdate.maxSurge";
            let unavailable_path = "spec.strategy.rollingUpdate.maxUnavailable";
            if let Some(v) = &ru.max_unavailable {
                int_or_percent(unavailable_path, v, errors);
            }
            if let Some(v) = &ru.max_surge {
                int_or_percent(surge_path, v, errors);
            }
            let zero = |v: &Option<IntOrPercent>| v.as_ref().is_some_and(|v| percent_or_int(v) == Some(0));
            if zero(&ru.max_unavailable) && zero(&ru.max_surge) {
                let value = ru.max_unavailable.as_ref().map(ToString::to_string).unwrap_or_default();
                errors.push(FieldError::invalid(unavailable_path, value, "may not be 0 when `maxSurge` is 0"));
            }
            // Upstream caps only maxUnavailable at 100%: a surge of 200% is a
            // legitimate way to ask for a blue/green-like rollout.
            if let Some(v @ IntOrPercent::Str(s)) = &ru.max_unavailable
                && parse_percent(s).is_some_and(|p| p > 100)
            {
                errors.push(FieldError::invalid(unavailable_path, v.to_string(), "must not be greater than 100%"));
            }
        }
        _ => {}
    }
}

/// The number in an int-or-percent, for the both-zero check.
fn percent_or_int(v: &IntOrPercent) -> Option<i64> {
    match v {
        IntOrPercent::Int(i) => Some(*i),
        IntOrPercent::Str(s) => parse_percent(s),
    }
}

/// `ValidatePositiveIntOrPercent`.
fn int_or_percent(path: &str, v: &IntOrPercent, errors: &mut Vec<FieldError>) {
    match v {
        IntOrPercent::Int(i) if *i < 0 => errors.push(FieldError::invalid(path, i.to_string(), NON_NEGATIVE)),
        IntOrPercent::Str(s) if !is_valid_percent(s) => errors.push(FieldError::invalid(path, s.clone(), PERCENT_FORMAT)),
        _ => {}
    }
}

/// `validation.IsValidPercent`: `^[0-9]+%$`.
fn is_valid_percent(s: &str) -> bool {
    s.strip_suffix('%').is_some_and(|digits| !digits.is_empty() && digits.bytes().all(|b| b.is_ascii_digit()))
}

/// The field errors as one message, for a reconcile refused on an invalid spec.
pub fn summary(errors: &[FieldError]) -> String {
    errors.iter().map(ToString::to_string).collect::<Vec<_>>().join("; ")
}

/// Used by tests and callers that only care about the paths.
pub fn fields(errors: &[FieldError]) -> Vec<(String, FieldErrorKind)> {
    errors.iter().map(|e| (e.field.clone(), e.kind)).collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use operator_plugin_sdk::json;

    fn valid_spec() -> Value {
        json!({
            "replicas": 3,
            "selector": {"matchLabels": {"app": "web"}},
            "template": {"metadata": {"labels": {"app": "web"}}, "spec": {"containers": [{"name": "nginx", "image": "nginx:1.7.9"}]}},
            "strategy": {"type": "RollingUpdate", "rollingUpdate": {"maxSurge": "25%", "maxUnavailable": "25%"}}
        })
    }

    fn with(patch: Value) -> Object {
        let mut spec = valid_spec();
        merge(&mut spec, &patch);
        Object::new(json!({"apiVersion": "apps.example.com/v1", "kind": "MyDeployment", "metadata": {"name": "web"}, "spec": spec}))
    }

    /// RFC 7386 merge, enough for test patches.
    fn merge(target: &mut Value, patch: &Value) {
        match (target.as_object_mut(), patch.as_object()) {
            (Some(t), Some(p)) => {
                for (k, v) in p {
                    if v.is_null() {
                        t.remove(k);
                    } else {
                        merge(t.entry(k.clone()).or_insert(Value::Null), v);
                    }
                }
            }
            _ => *target = patch.clone(),
        }
    }

    fn errors_of(patch: Value) -> Vec<(String, FieldErrorKind)> {
        fields(&validate(&with(patch), None))
    }

    #[test]
    fn a_complete_spec_is_valid() {
        assert_eq!(errors_of(json!({})), vec![]);
    }

    #[test]
    fn each_rule_reports_its_field_as_the_api_server_does() {
        use FieldErrorKind::*;
        let cases: Vec<(Value, Vec<(&str, FieldErrorKind)>)> = vec![
            (json!({"replicas": -1}), vec![("spec.replicas", Invalid)]),
            (json!({"minReadySeconds": -5}), vec![("spec.minReadySeconds", Invalid)]),
            (json!({"revisionHistoryLimit": -1}), vec![("spec.revisionHistoryLimit", Invalid)]),
            (json!({"minReadySeconds": 30, "progressDeadlineSeconds": 30}), vec![("spec.progressDeadlineSeconds", Invalid)]),
            (json!({"selector": null}), vec![("spec.selector", Required)]),
            (json!({"selector": {"matchLabels": null}}), vec![("spec.selector", Invalid)]),
            (json!({"selector": {"matchLabels": {"app": "other"}}}), vec![("spec.template.metadata.labels", Invalid)]),
            (
                json!({"selector": {"matchExpressions": [{"key": "app", "operator": "Near", "values": ["web"]}]}}),
                vec![("spec.selector.matchExpressions[0].operator", NotSupported), ("spec.template.metadata.labels", Invalid)],
            ),
            (
                json!({"selector": {"matchExpressions": [{"key": "app", "operator": "In"}]}}),
                vec![("spec.selector.matchExpressions[0].values", Required), ("spec.template.metadata.labels", Invalid)],
            ),
            (
                json!({"selector": {"matchExpressions": [{"key": "app", "operator": "Exists", "values": ["x"]}]}}),
                vec![("spec.selector.matchExpressions[0].values", Forbidden)],
            ),
            (json!({"template": {"spec": {"containers": []}}}), vec![("spec.template.spec.containers", Required)]),
            (json!({"template": {"spec": {"containers": [{"name": "c"}]}}}), vec![("spec.template.spec.containers[0].image", Required)]),
            (json!({"template": {"spec": {"restartPolicy": "OnFailure"}}}), vec![("spec.template.spec.restartPolicy", NotSupported)]),
            (json!({"template": null}), vec![("spec.template", Required)]),
            (json!({"strategy": {"type": "Recreate"}}), vec![("spec.strategy.rollingUpdate", Forbidden)]),
            (json!({"strategy": {"type": "BlueGreen", "rollingUpdate": null}}), vec![("spec.strategy.type", NotSupported)]),
            (json!({"replicas": "three"}), vec![("spec", Invalid)]),
            (
                json!({"strategy": {"rollingUpdate": {"maxSurge": 0, "maxUnavailable": "0%"}}}),
                vec![("spec.strategy.rollingUpdate.maxUnavailable", Invalid)],
            ),
            (json!({"strategy": {"rollingUpdate": {"maxUnavailable": "101%"}}}), vec![("spec.strategy.rollingUpdate.maxUnavailable", Invalid)]),
            (json!({"strategy": {"rollingUpdate": {"maxSurge": -1}}}), vec![("spec.strategy.rollingUpdate.maxSurge", Invalid)]),
            (json!({"strategy": {"rollingUpdate": {"maxSurge": "25"}}}), vec![("spec.strategy.rollingUpdate.maxSurge", Invalid)]),
            (json!({"strategy": {"rollingUpdate": {"maxSurge": "-5%"}}}), vec![("spec.strategy.rollingUpdate.maxSurge", Invalid)]),
            (json!({"rollbackTo": {"revision": 0}}), vec![("spec.rollbackTo.revision", Invalid)]),
            (json!({"podReplacementPolicy": "Whenever"}), vec![("spec.podReplacementPolicy", NotSupported)]),
            (
                json!({"selector": {"matchLabels": {"app": "web", "bad key": "x"}}, "template": {"metadata": {"labels": {"bad key": "x"}}}}),
                vec![("spec.selector.matchLabels", Invalid), ("spec.template.metadata.labels", Invalid)],
            ),
            (
                json!({"selector": {"matchExpressions": [{"key": "tier", "operator": "In", "values": ["-web"]}]}}),
                vec![("spec.selector.matchExpressions[0].values[0]", Invalid), ("spec.template.metadata.labels", Invalid)],
            ),
        ];
        for (patch, want) in cases {
            let want: Vec<(String, FieldErrorKind)> = want.into_iter().map(|(f, k)| (f.to_string(), k)).collect();
            assert_eq!(errors_of(patch.clone()), want, "patch {patch}");
        }
    }

    #[test]
    fn a_surge_above_100_percent_is_allowed_as_upstream() {
        assert_eq!(errors_of(json!({"strategy": {"rollingUpdate": {"maxSurge": "200%"}}})), vec![]);
    }

    #[test]
    fn the_selector_is_immutable_on_update() {
        let old = with(json!({}));
        let new = with(json!({"selector": {"matchLabels": {"app": "web", "tier": "x"}}, "template": {"metadata": {"labels": {"tier": "x"}}}}));
        let errors = validate(&new, Some(&old));
        assert_eq!(fields(&errors), vec![("spec.selector".to_string(), FieldErrorKind::Invalid)]);
        assert_eq!(errors[0].detail, "field is immutable");
        assert!(validate(&with(json!({"replicas": 5})), Some(&old)).is_empty());
    }

    #[test]
    fn messages_read_like_the_api_server() {
        let errors = validate(&with(json!({"selector": {"matchLabels": {"app": "other"}}})), None);
        assert_eq!(
            errors[0].to_string(),
            r#"spec.template.metadata.labels: Invalid value: "map[app:web]": `selector` does not match template `labels`"#
        );
    }
}
