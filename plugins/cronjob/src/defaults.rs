//! The tutorial's defaulting webhook: `concurrencyPolicy: Allow`,
//! `suspend: false`, and history limits of 3 successful and 1 failed Jobs.
//! Only unset fields are filled; explicit values (even 0) stay.

use operator_plugin_sdk::{Object, ReconcileError, json};
use serde_json::Value;

pub fn default(mut object: Object) -> Result<Object, ReconcileError> {
    let Some(root) = object.value_mut().as_object_mut() else {
        return Err(ReconcileError::permanent("InvalidObject", "a CronJob must be a JSON object"));
    };
    let spec = root.entry("spec").or_insert_with(|| json!({}));
    if spec.is_null() {
        *spec = json!({});
    }
    let Some(spec) = spec.as_object_mut() else {
        return Err(ReconcileError::permanent("InvalidSpec", "spec must be an object"));
    };
    let unset = |v: Option<&Value>| v.is_none_or(|v| v.is_null() || v.as_str() == Some(""));
    let defaults = [
        ("concurrencyPolicy", json!("Allow")),
        ("suspend", json!(false)),
        ("successfulJobsHistoryLimit", json!(3)),
        ("failedJobsHistoryLimit", json!(1)),
    ];
    for (field, value) in defaults {
        if unset(spec.get(field)) {
            spec.insert(field.into(), value);
        }
    }
    Ok(object)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unset_fields_get_the_tutorials_defaults() {
        let got = default(Object::new(json!({"spec": {"schedule": "@hourly"}}))).unwrap();
        assert_eq!(
            got.value()["spec"],
            json!({"schedule": "@hourly", "concurrencyPolicy": "Allow", "suspend": false,
                   "successfulJobsHistoryLimit": 3, "failedJobsHistoryLimit": 1})
        );
    }

    #[test]
    fn explicit_values_are_kept_even_when_zero() {
        let spec = json!({"concurrencyPolicy": "Forbid", "suspend": true, "successfulJobsHistoryLimit": 0, "failedJobsHistoryLimit": 0});
        assert_eq!(default(Object::new(json!({"spec": spec.clone()}))).unwrap().value()["spec"], spec);
    }

    #[test]
    fn an_empty_policy_is_allow_and_a_missing_spec_is_created() {
        assert_eq!(default(Object::new(json!({"spec": {"concurrencyPolicy": ""}}))).unwrap().value()["spec"]["concurrencyPolicy"], "Allow");
        assert_eq!(default(Object::new(json!({"metadata": {}}))).unwrap().value()["spec"]["suspend"], false);
        assert!(default(Object::new(json!({"spec": "nope"}))).is_err());
    }
}
