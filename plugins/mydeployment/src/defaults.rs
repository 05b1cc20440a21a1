//! Defaulting, as `apps/v1` `SetDefaults_Deployment`: replicas 1,
//! RollingUpdate with 25% / 25%, revisionHistoryLimit 10,
//! progressDeadlineSeconds 600.
//!
//! The Pod template is left exactly as written. Upstream also defaults the
//! template's PodSpec, but here the template is hashed into
//! `pod-template-hash`: defaulting it in the webhook would make the hash
//! depend on whether an object went through the webhook, and the API server
//! defaults each Pod when it is created anyway.

use operator_plugin_sdk::serde_json::{Map, Value};
use operator_plugin_sdk::{Object, json};

use crate::api::{DEFAULT_MAX_SURGE, DEFAULT_MAX_UNAVAILABLE, DEFAULT_PROGRESS_DEADLINE_SECONDS, DEFAULT_REPLICAS, DEFAULT_REVISION_HISTORY_LIMIT};

fn set_if_missing(map: &mut Map<String, Value>, key: &str, value: Value) {
    if map.get(key).is_none_or(Value::is_null) {
        map.insert(key.into(), value);
    }
}

/// Fills in every defaulted field that is missing; never overwrites.
pub fn apply(mut object: Object) -> Object {
    let Some(root) = object.value_mut().as_object_mut() else {
        return object;
    };
    let spec = root.entry("spec").or_insert_with(|| json!({}));
    let Some(spec) = spec.as_object_mut() else {
        return object;
    };

    set_if_missing(spec, "replicas", json!(DEFAULT_REPLICAS));
    set_if_missing(spec, "revisionHistoryLimit", json!(DEFAULT_REVISION_HISTORY_LIMIT));
    set_if_missing(spec, "progressDeadlineSeconds", json!(DEFAULT_PROGRESS_DEADLINE_SECONDS));

    set_if_missing(spec, "strategy", json!({}));
    if let Some(strategy) = spec.get_mut("strategy").and_then(Value::as_object_mut) {
        set_if_missing(strategy, "type", json!("RollingUpdate"));
        if strategy.get("type").and_then(Value::as_str) == Some("RollingUpdate") {
            set_if_missing(strategy, "rollingUpdate", json!({}));
            if let Some(ru) = strategy.get_mut("rollingUpdate").and_then(Value::as_object_mut) {
                set_if_missing(ru, "maxUnavailable", json!(DEFAULT_MAX_UNAVAILABLE));
                set_if_missing(ru, "maxSurge", json!(DEFAULT_MAX_SURGE));
            }
        }
    }
    object
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec_of(spec: Value) -> Value {
        apply(Object::new(json!({"apiVersion": "apps.example.com/v1", "kind": "MyDeployment", "spec": spec}))).value()["spec"].clone()
    }

    #[test]
    fn an_empty_spec_gets_every_apps_v1_default() {
        assert_eq!(
            spec_of(json!({})),
            json!({
                "replicas": 1, "revisionHistoryLimit": 10, "progressDeadlineSeconds": 600,
                "strategy": {"type": "RollingUpdate", "rollingUpdate": {"maxUnavailable": "25%", "maxSurge": "25%"}}
            })
        );
    }

    #[test]
    fn set_values_are_kept_and_partial_rolling_update_is_completed() {
        let spec = spec_of(json!({"replicas": 0, "strategy": {"rollingUpdate": {"maxSurge": 1}}}));
        assert_eq!(spec["replicas"], 0);
        assert_eq!(spec["strategy"], json!({"type": "RollingUpdate", "rollingUpdate": {"maxSurge": 1, "maxUnavailable": "25%"}}));
    }

    #[test]
    fn recreate_gets_no_rolling_update_parameters() {
        assert_eq!(spec_of(json!({"strategy": {"type": "Recreate"}}))["strategy"], json!({"type": "Recreate"}));
    }

    #[test]
    fn the_pod_template_is_left_untouched() {
        let template = json!({"metadata": {"labels": {"app": "web"}}, "spec": {"containers": [{"name": "c", "image": "nginx"}]}});
        assert_eq!(spec_of(json!({"template": template.clone()}))["template"], template);
    }
}
