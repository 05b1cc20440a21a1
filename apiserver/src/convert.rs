//! Conversion between representations that share storage: `events.k8s.io/v1` Events are stored
//! as core/v1 Events (one object, two views, as upstream), so `kubectl get events` shows what
//! kube-rs's event recorder writes through events.k8s.io. `autoscaling/v1`
//! HorizontalPodAutoscalers are stored as `autoscaling/v2` (upstream's storage version); the v1
//! view carries the CPU utilization target only, as upstream's v1 does (other metrics are not
//! kept in annotations here; see the README). Also the steps of upstream's v1 → internal
//! conversion that change what is stored ([`secret_string_data`]).

use crate::resources::Resource;
use serde_json::{Map, Value, json};

/// A view's object → its storage representation.
pub fn to_storage(view: &Resource, v: Value) -> Value {
    match view.group.as_str() {
        "events.k8s.io" => event_to_core(v),
        "autoscaling" => hpa_v1_to_v2(v),
        _ => v,
    }
}

/// A stored object → the view's representation.
pub fn to_view(view: &Resource, v: Value) -> Value {
    match view.group.as_str() {
        "events.k8s.io" => event_to_v1(v),
        "autoscaling" => hpa_v2_to_v1(v),
        _ => v,
    }
}

/// A Secret's `stringData` merged into `data` (base64) and dropped, as upstream's
/// `Convert_v1_Secret_To_core_Secret` does while decoding every write (create, update, each
/// patch type and apply): a key in both takes the `stringData` value. A value that is not a
/// string is refused in the words of Go's decoder (`json: cannot unmarshal number into Go
/// struct field Secret.stringData of type string`); null is the empty string, as in Go.
pub fn secret_string_data(secret: &mut Value) -> Result<(), String> {
    use base64::Engine;
    let Some(obj) = secret.as_object_mut() else { return Ok(()) };
    let strings = match obj.remove("stringData") {
        None | Some(Value::Null) => return Ok(()),
        Some(Value::Object(strings)) => strings,
        Some(other) => return Err(cannot_unmarshal(&other, "Secret.stringData", "map[string]string")),
    };
    if let Some((_, bad)) = strings.iter().find(|(_, v)| !matches!(v, Value::String(_) | Value::Null)) {
        return Err(cannot_unmarshal(bad, "Secret.stringData", "string"));
    }
    if strings.is_empty() {
        return Ok(());
    }
    if !obj.get("data").is_some_and(Value::is_object) {
        obj.insert("data".into(), json!({}));
    }
    let data = obj.get_mut("data").and_then(Value::as_object_mut).expect("just made an object");
    for (key, value) in strings {
        let text = value.as_str().unwrap_or_default();
        data.insert(key, json!(base64::engine::general_purpose::STANDARD.encode(text)));
    }
    Ok(())
}

/// Go's `json.UnmarshalTypeError` text for `value` found where `go_type` was expected.
fn cannot_unmarshal(value: &Value, field: &str, go_type: &str) -> String {
    let found = match value {
        Value::Bool(_) => "bool",
        Value::Number(_) => "number",
        Value::String(_) => "string",
        Value::Array(_) => "array",
        Value::Object(_) => "object",
        Value::Null => "null",
    };
    format!("json: cannot unmarshal {found} into Go struct field {field} of type {go_type}")
}

fn cpu_metric(utilization: &Value) -> Value {
    json!({"type": "Resource", "resource": {"name": "cpu", "target": {"type": "Utilization", "averageUtilization": utilization}}})
}

/// autoscaling/v1 → autoscaling/v2 HorizontalPodAutoscaler.
pub fn hpa_v1_to_v2(mut v: Value) -> Value {
    if let Some(m) = v.as_object_mut().filter(|m| m.contains_key("apiVersion")) {
        m.insert("apiVersion".into(), json!("autoscaling/v2"));
    }
    if let Some(spec) = v.get_mut("spec").and_then(Value::as_object_mut)
        && let Some(target) = spec.remove("targetCPUUtilizationPercentage")
    {
        spec.insert("metrics".into(), json!([cpu_metric(&target)]));
    }
    if let Some(status) = v.get_mut("status").and_then(Value::as_object_mut)
        && let Some(current) = status.remove("currentCPUUtilizationPercentage")
    {
        status
            .insert("currentMetrics".into(), json!([{"type": "Resource", "resource": {"name": "cpu", "current": {"averageUtilization": current}}}]));
    }
    v
}

/// autoscaling/v2 → autoscaling/v1 HorizontalPodAutoscaler.
pub fn hpa_v2_to_v1(mut v: Value) -> Value {
    if let Some(m) = v.as_object_mut() {
        m.insert("apiVersion".into(), json!("autoscaling/v1"));
    }
    let is_cpu = |m: &&Value| m["type"] == "Resource" && m.pointer("/resource/name") == Some(&json!("cpu"));
    if let Some(spec) = v.get_mut("spec").and_then(Value::as_object_mut) {
        let target = spec
            .get("metrics")
            .and_then(Value::as_array)
            .and_then(|ms| ms.iter().find(is_cpu))
            .and_then(|m| m.pointer("/resource/target/averageUtilization"))
            .cloned();
        spec.remove("metrics");
        spec.remove("behavior");
        if let Some(t) = target {
            spec.insert("targetCPUUtilizationPercentage".into(), t);
        }
    }
    if let Some(status) = v.get_mut("status").and_then(Value::as_object_mut) {
        let current = status
            .get("currentMetrics")
            .and_then(Value::as_array)
            .and_then(|ms| ms.iter().find(is_cpu))
            .and_then(|m| m.pointer("/resource/current/averageUtilization"))
            .cloned();
        for f in ["currentMetrics", "conditions"] {
            status.remove(f);
        }
        if let Some(c) = current {
            status.insert("currentCPUUtilizationPercentage".into(), c);
        }
    }
    v
}

/// (core/v1 field, events.k8s.io/v1 field); the others have the same name in both.
const EVENT_FIELDS: &[(&str, &str)] = &[
    ("involvedObject", "regarding"),
    ("message", "note"),
    ("source", "deprecatedSource"),
    ("firstTimestamp", "deprecatedFirstTimestamp"),
    ("lastTimestamp", "deprecatedLastTimestamp"),
    ("count", "deprecatedCount"),
    ("reportingComponent", "reportingController"),
];

fn rename(obj: Value, to_v1: bool) -> Value {
    let Value::Object(m) = obj else { return obj };
    let mut out = Map::new();
    for (k, v) in m {
        let renamed = EVENT_FIELDS
            .iter()
            .find(|(core, v1)| if to_v1 { core == &k } else { v1 == &k })
            .map(|(core, v1)| if to_v1 { v1.to_string() } else { core.to_string() })
            .unwrap_or(k);
        out.insert(renamed, v);
    }
    Value::Object(out)
}

/// events.k8s.io/v1 fields with `omitempty` that core/v1 writes even when empty (a core Event's
/// `reportingComponent` and `reportingInstance` are `""` when unset): Go's encoder drops their
/// zero value from the v1 view.
const EVENT_V1_OMITTED_WHEN_ZERO: &[&str] = &["reportingController", "reportingInstance", "action", "reason", "note", "type", "deprecatedCount"];

/// core/v1 Event → events.k8s.io/v1 Event.
pub fn event_to_v1(core: Value) -> Value {
    let mut v = rename(core, true);
    if let Some(m) = v.as_object_mut() {
        m.insert("apiVersion".into(), Value::String("events.k8s.io/v1".into()));
        m.retain(|k, v| !(EVENT_V1_OMITTED_WHEN_ZERO.contains(&k.as_str()) && (*v == "" || *v == 0)));
    }
    v
}

/// events.k8s.io/v1 Event → core/v1 Event.
pub fn event_to_core(v1: Value) -> Value {
    let mut v = rename(v1, false);
    if let Some(m) = v.as_object_mut().filter(|m| m.contains_key("apiVersion")) {
        m.insert("apiVersion".into(), Value::String("v1".into()));
    }
    v
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn events_round_trip_between_views() {
        let v1 = json!({"apiVersion": "events.k8s.io/v1", "kind": "Event", "metadata": {"name": "e"}, "regarding": {"kind": "Pod", "name": "p"}, "note": "hi", "reason": "R", "reportingController": "c"});
        let core = event_to_core(v1.clone());
        assert_eq!(core["involvedObject"]["name"], "p");
        assert_eq!(core["message"], "hi");
        assert_eq!(core["reportingComponent"], "c");
        assert_eq!(core["apiVersion"], "v1");
        assert_eq!(event_to_v1(core), v1);
    }

    #[test]
    fn the_v1_view_of_a_core_event_omits_what_go_omits_and_keeps_zero_structs_and_times() {
        let core = json!({"apiVersion": "v1", "kind": "Event", "metadata": {"name": "e"}, "involvedObject": {"kind": "Pod", "name": "p"},
            "reason": "R", "message": "m", "source": {}, "firstTimestamp": null, "lastTimestamp": null, "eventTime": null,
            "reportingComponent": "", "reportingInstance": ""});
        let v1 = event_to_v1(core);
        assert_eq!(
            v1,
            json!({"apiVersion": "events.k8s.io/v1", "kind": "Event", "metadata": {"name": "e"}, "regarding": {"kind": "Pod", "name": "p"},
            "reason": "R", "note": "m", "deprecatedSource": {}, "deprecatedFirstTimestamp": null, "deprecatedLastTimestamp": null, "eventTime": null})
        );
    }

    #[test]
    fn hpa_cpu_target_round_trips_between_v1_and_v2() {
        let v1 = json!({"apiVersion": "autoscaling/v1", "kind": "HorizontalPodAutoscaler", "metadata": {"name": "h"},
            "spec": {"scaleTargetRef": {"kind": "Deployment", "name": "d", "apiVersion": "apps/v1"}, "minReplicas": 1, "maxReplicas": 5, "targetCPUUtilizationPercentage": 80}});
        let v2 = hpa_v1_to_v2(v1.clone());
        assert_eq!(v2["apiVersion"], "autoscaling/v2");
        assert_eq!(v2.pointer("/spec/metrics/0/resource/target/averageUtilization"), Some(&json!(80)));
        assert_eq!(hpa_v2_to_v1(v2), v1);
    }
}
