//! Status conditions (`metav1.Condition`) with the upstream rule for
//! `lastTransitionTime`: it changes only when `status` changes
//! (`meta.SetStatusCondition` in apimachinery).
//!
//! ```
//! use operator_plugin_sdk::prelude::*;
//!
//! let mut list = Vec::new();
//! conditions::set(&mut list, Condition::new("Available", true, "MinimumReplicasAvailable", "2 of 2 ready"), Time::from_unix_millis(0));
//! assert!(conditions::find(&list, "Available").is_some_and(Condition::is_true));
//! ```

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::time::Time;

/// One entry of `status.conditions`. Put a `Vec<Condition>` in your status
/// type: the host writes its own `Reconciled` condition there (leave it to
/// the host: do not set or copy it), and a status schema without
/// `conditions` would have the API server prune it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
// Doc comments here become descriptions in the schema of every CRD that
// embeds `Condition` (and would make their checked-in crd.json stale), so
// the fields are described in comments: `type_` (`type` in JSON) is the
// condition's type in CamelCase, e.g. `Available`; `observed_generation` the
// parent's `metadata.generation` it was computed from; `last_transition_time`
// when `status` last changed (RFC 3339), which `set` maintains; `reason` why,
// in one CamelCase word; `message` why, for a person.
#[allow(missing_docs)]
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
    /// A condition of `type_` with status `True` or `False`; [`set`] fills
    /// in `lastTransitionTime`.
    ///
    /// ```
    /// # use operator_plugin_sdk::Condition;
    /// let c = Condition::new("Ready", false, "Waiting", "0 of 1 ready");
    /// assert_eq!((c.status.as_str(), c.reason.as_str()), ("False", "Waiting"));
    /// ```
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

    /// The same condition, stamped with the generation it was computed from.
    ///
    /// ```
    /// # use operator_plugin_sdk::Condition;
    /// assert_eq!(Condition::new("Ready", true, "Up", "").observed(3).observed_generation, Some(3));
    /// ```
    #[must_use]
    pub fn observed(mut self, generation: i64) -> Self {
        self.observed_generation = Some(generation);
        self
    }

    /// Whether `status` is `True`.
    ///
    /// ```
    /// # use operator_plugin_sdk::Condition;
    /// assert!(Condition::new("Ready", true, "Up", "").is_true());
    /// ```
    pub fn is_true(&self) -> bool {
        self.status == "True"
    }
}

/// Reads `status.conditions` from a status value; missing or malformed
/// entries are skipped.
///
/// ```
/// # use operator_plugin_sdk::{conditions, json};
/// let status = json!({"conditions": [{"type": "Ready", "status": "True"}, {"type": 5}]});
/// assert_eq!(conditions::conditions_of(&status).len(), 1);
/// ```
pub fn conditions_of(status: &Value) -> Vec<Condition> {
    status.get("conditions").and_then(Value::as_array).map(|a| a.iter().filter_map(|c| Condition::deserialize(c).ok()).collect()).unwrap_or_default()
}

/// For `#[serde(default, deserialize_with = "conditions::lenient")]` on a
/// status type's `conditions`: reads them as [`conditions_of`] does, so a
/// condition written by another controller without the fields this type
/// requires is skipped instead of failing the whole object (and the object
/// need not be copied to take the conditions out first).
///
/// ```
/// # use operator_plugin_sdk::prelude::*;
/// #[derive(Deserialize)]
/// struct Status {
///     #[serde(default, deserialize_with = "conditions::lenient")]
///     conditions: Vec<Condition>,
/// }
/// let status: Status = serde_json::from_value(json!({"conditions": [{"type": "Ready", "status": "True"}, {"status": 1}]}))?;
/// assert_eq!(status.conditions.len(), 1);
/// # Ok::<(), serde_json::Error>(())
/// ```
pub fn lenient<'de, D: serde::Deserializer<'de>>(deserializer: D) -> Result<Vec<Condition>, D::Error> {
    let conditions = Value::deserialize(deserializer)?;
    Ok(conditions.as_array().map(|a| a.iter().filter_map(|c| Condition::deserialize(c).ok()).collect()).unwrap_or_default())
}

/// Finds a condition by type.
///
/// ```
/// # use operator_plugin_sdk::{Condition, conditions};
/// let list = vec![Condition::new("Ready", true, "Up", "")];
/// assert!(conditions::find(&list, "Ready").is_some());
/// assert!(conditions::find(&list, "Degraded").is_none());
/// ```
pub fn find<'a>(conditions: &'a [Condition], type_: &str) -> Option<&'a Condition> {
    conditions.iter().find(|c| c.type_ == type_)
}

/// Adds or updates `new` in `conditions`. `lastTransitionTime` is kept when
/// the status did not change, and set to `now` when it did (or is new).
///
/// ```
/// # use operator_plugin_sdk::{Condition, Time, conditions};
/// let mut list = Vec::new();
/// conditions::set(&mut list, Condition::new("Ready", true, "Up", ""), Time::from_unix_millis(0));
/// conditions::set(&mut list, Condition::new("Ready", true, "StillUp", ""), Time::from_unix_millis(60_000));
/// assert_eq!(list[0].last_transition_time, "1970-01-01T00:00:00Z");
/// ```
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
