//! Conversion between representations that share storage: `events.k8s.io/v1` Events are stored
//! as core/v1 Events (one object, two views, as upstream), so `kubectl get events` shows what
//! kube-rs's event recorder writes through events.k8s.io.

use serde_json::{Map, Value};

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

/// core/v1 Event → events.k8s.io/v1 Event.
pub fn event_to_v1(core: Value) -> Value {
    let mut v = rename(core, true);
    if let Some(m) = v.as_object_mut() {
        m.insert("apiVersion".into(), Value::String("events.k8s.io/v1".into()));
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
}
