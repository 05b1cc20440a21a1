//! The parent's status as the host writes it: the plugin's status (or the
//! current one) with the host-owned `Reconciled` condition merged into
//! `status.conditions`, and the RFC 7386 merge patch from old to new so only
//! a real change is written.

use serde_json::{Map, Value, json};

/// The host's condition type.
pub const RECONCILED: &str = "Reconciled";

/// The host's verdict on the last reconcile.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Verdict {
    pub ok: bool,
    pub reason: String,
    pub message: String,
}

impl Verdict {
    pub fn success() -> Self {
        Self { ok: true, reason: "ReconcileSucceeded".into(), message: "the last reconcile succeeded".into() }
    }

    pub fn failure(reason: impl Into<String>, message: impl Into<String>) -> Self {
        Self { ok: false, reason: reason.into(), message: message.into() }
    }
}

/// `status` with the `Reconciled` condition set to `verdict`. Other
/// conditions are untouched; `lastTransitionTime` moves only when the status
/// flips. `previous` is the status the object has now, used to carry the
/// condition over when the plugin's new status dropped it.
pub fn with_verdict(mut status: Value, previous: &Value, verdict: &Verdict, generation: Option<i64>, now: &str) -> Value {
    if !status.is_object() {
        status = json!({});
    }
    let prior = find(previous, RECONCILED).cloned();
    let map = status.as_object_mut().expect("object");
    let conditions = map.entry("conditions").or_insert_with(|| json!([]));
    if !conditions.is_array() {
        *conditions = json!([]);
    }
    let list = conditions.as_array_mut().expect("array");
    let state = if verdict.ok { "True" } else { "False" };
    let existing_pos = list.iter().position(|c| c["type"] == RECONCILED);
    let old = existing_pos.map(|i| list[i].clone()).or(prior);
    let transition = match &old {
        Some(o) if o["status"] == state && o["lastTransitionTime"].as_str().is_some_and(|s| !s.is_empty()) => o["lastTransitionTime"].clone(),
        _ => Value::String(now.to_string()),
    };
    let mut cond = json!({
        "type": RECONCILED,
        "status": state,
        "reason": verdict.reason,
        "message": verdict.message,
        "lastTransitionTime": transition,
    });
    if let Some(g) = generation {
        cond["observedGeneration"] = json!(g);
    }
    match existing_pos {
        Some(i) => list[i] = cond,
        None => list.push(cond),
    }
    status
}

fn find<'a>(status: &'a Value, type_: &str) -> Option<&'a Value> {
    status.get("conditions")?.as_array()?.iter().find(|c| c["type"] == type_)
}

/// The RFC 7386 merge patch that turns `old` into `new` (`None` if equal).
pub fn merge_diff(old: &Value, new: &Value) -> Option<Value> {
    if old == new {
        return None;
    }
    match (old, new) {
        (Value::Object(o), Value::Object(n)) => {
            let mut patch = Map::new();
            for (k, nv) in n {
                match o.get(k) {
                    Some(ov) if ov == nv => {}
                    Some(ov) if ov.is_object() && nv.is_object() => {
                        if let Some(d) = merge_diff(ov, nv) {
                            patch.insert(k.clone(), d);
                        }
                    }
                    _ => {
                        patch.insert(k.clone(), nv.clone());
                    }
                }
            }
            for k in o.keys() {
                if !n.contains_key(k) {
                    patch.insert(k.clone(), Value::Null);
                }
            }
            Some(Value::Object(patch))
        }
        // Null values cannot be expressed inside a merge patch; writing the
        // new value wholesale is the best RFC 7386 allows.
        _ => Some(new.clone()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_condition_is_added_without_clobbering_the_plugins_status() {
        let s =
            with_verdict(json!({"replicas": 3, "conditions": [{"type": "Valid", "status": "True"}]}), &json!({}), &Verdict::success(), Some(2), "T0");
        assert_eq!(s["replicas"], 3);
        assert_eq!(s["conditions"][0]["type"], "Valid");
        assert_eq!(s["conditions"][1]["type"], "Reconciled");
        assert_eq!(s["conditions"][1]["status"], "True");
        assert_eq!(s["conditions"][1]["observedGeneration"], 2);
    }

    #[test]
    fn the_transition_time_moves_only_when_the_status_flips() {
        let prev = with_verdict(json!({}), &json!({}), &Verdict::failure("PluginError", "x"), None, "T0");
        let again = with_verdict(json!({}), &prev, &Verdict::failure("PluginError", "y"), None, "T1");
        assert_eq!(again["conditions"][0]["lastTransitionTime"], "T0", "carried over from the previous status");
        let flipped = with_verdict(again.clone(), &again, &Verdict::success(), None, "T2");
        assert_eq!(flipped["conditions"][0]["lastTransitionTime"], "T2");
        assert_eq!(flipped["conditions"].as_array().unwrap().len(), 1);
    }

    #[test]
    fn merge_diff_nulls_removed_keys_and_recurses() {
        let old = json!({"a": 1, "b": {"c": 1, "d": 2}, "gone": true});
        let new = json!({"a": 1, "b": {"c": 1, "d": 3}, "list": [1]});
        assert_eq!(merge_diff(&old, &new), Some(json!({"b": {"d": 3}, "list": [1], "gone": null})));
        assert_eq!(merge_diff(&old, &old), None);
        let mut patched = old.clone();
        json_merge(&mut patched, &merge_diff(&old, &new).unwrap());
        assert_eq!(patched, new);
    }

    fn json_merge(target: &mut Value, patch: &Value) {
        if let Value::Object(p) = patch {
            if !target.is_object() {
                *target = json!({});
            }
            let t = target.as_object_mut().unwrap();
            for (k, v) in p {
                if v.is_null() {
                    t.remove(k);
                } else {
                    json_merge(t.entry(k.clone()).or_insert(Value::Null), v);
                }
            }
        } else {
            *target = patch.clone();
        }
    }
}
