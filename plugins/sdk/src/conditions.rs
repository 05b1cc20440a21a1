//! Status conditions (`metav1.Condition`) with the upstream rule for
//! `lastTransitionTime`: it changes only when `status` changes
//! (`meta.SetStatusCondition` in apimachinery).

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::time::Time;

/// One entry of `status.conditions`. Put a `Vec<Condition>` in your status
/// type: the host writes its own `Reconciled` condition there (leave it to
/// the host: do not set or copy it), and a status schema without
/// `conditions` would have the API server prune it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Condition {
    #[serde(rename = "type")]
    pub type_: String,
    /// `True`, `False` or `Unknown`.
    pub status: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub observed_generation: Option<i64>,
    #[serde(default)]
    pub last_transition_time: String,
    #[serde(default)]
    pub reason: String,
    #[serde(default)]
    pub message: String,
}

impl Condition {
    pub fn new(type_: &str, status: bool, reason: &str, message: impl Into<String>) -> Self {
        Condition {
            type_: type_.into(),
            status: if status { "True" } else { "False" }.into(),
            observed_generation: None,
            last_transition_time: String::new(),
            reason: reason.into(),
            message: message.into(),
        }
    }

    #[must_use]
    pub fn observed(mut self, generation: i64) -> Self {
        self.observed_generation = Some(generation);
        self
    }

    pub fn is_true(&self) -> bool {
        self.status == "True"
    }
}

/// Reads `status.conditions` from a status value; missing or malformed
/// entries are skipped.
pub fn conditions_of(status: &Value) -> Vec<Condition> {
    status.get("conditions").and_then(Value::as_array).map(|a| a.iter().filter_map(|c| Condition::deserialize(c).ok()).collect()).unwrap_or_default()
}

/// For `#[serde(default, deserialize_with = "conditions::lenient")]` on a
/// status type's `conditions`: reads them as [`conditions_of`] does, so a
/// condition written by another controller without the fields this type
/// requires is skipped instead of failing the whole object (and the object
/// need not be copied to take the conditions out first).
pub fn lenient<'de, D: serde::Deserializer<'de>>(deserializer: D) -> Result<Vec<Condition>, D::Error> {
    let conditions = Value::deserialize(deserializer)?;
    Ok(conditions.as_array().map(|a| a.iter().filter_map(|c| Condition::deserialize(c).ok()).collect()).unwrap_or_default())
}

/// Finds a condition by type.
pub fn find<'a>(conditions: &'a [Condition], type_: &str) -> Option<&'a Condition> {
    conditions.iter().find(|c| c.type_ == type_)
}

/// Adds or updates `new` in `conditions`. `lastTransitionTime` is kept when
/// the status did not change, and set to `now` when it did (or is new).
pub fn set(conditions: &mut Vec<Condition>, mut new: Condition, now: Time) {
    match conditions.iter_mut().find(|c| c.type_ == new.type_) {
        Some(existing) => {
            new.last_transition_time = if existing.status == new.status && !existing.last_transition_time.is_empty() {
                existing.last_transition_time.clone()
            } else {
                now.to_rfc3339()
            };
            *existing = new;
        }
        None => {
            new.last_transition_time = now.to_rfc3339();
            conditions.push(new);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lenient_conditions_skip_what_does_not_fit_and_accept_null() {
        #[derive(Deserialize)]
        struct Status {
            #[serde(default, deserialize_with = "lenient")]
            conditions: Vec<Condition>,
        }
        let read = |v: Value| serde_json::from_value::<Status>(v).unwrap().conditions;
        let ok = serde_json::json!({"type": "Ready", "status": "True"});
        assert_eq!(read(serde_json::json!({"conditions": [ok, {"type": 5}, "x"]})).len(), 1);
        assert!(read(serde_json::json!({"conditions": null})).is_empty());
        assert!(read(serde_json::json!({"conditions": {"a": 1}})).is_empty());
        assert!(read(serde_json::json!({})).is_empty());
        let text = r#"{"conditions": [{"type": "Ready", "status": "True"}, {"status": 1}]}"#;
        assert_eq!(serde_json::from_str::<Status>(text).unwrap().conditions[0].type_, "Ready");
    }

    #[test]
    fn transition_time_moves_only_when_status_changes() {
        let t0 = Time::from_unix_millis(0);
        let t1 = Time::from_unix_millis(60_000);
        let mut cs = Vec::new();
        set(&mut cs, Condition::new("Ready", true, "Up", "ok"), t0);
        set(&mut cs, Condition::new("Ready", true, "StillUp", "ok"), t1);
        assert_eq!(cs[0].last_transition_time, t0.to_rfc3339());
        assert_eq!(cs[0].reason, "StillUp");
        set(&mut cs, Condition::new("Ready", false, "Down", "no"), t1);
        assert_eq!(cs[0].last_transition_time, t1.to_rfc3339());
        assert_eq!(cs.len(), 1);
    }
}
