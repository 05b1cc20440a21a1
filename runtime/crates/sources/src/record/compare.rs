//! The one comparison of two answers to the same inputs, used by `host
//! replay` (recorded answer vs a candidate's) and by shadow runs (active vs
//! candidate). Actions are paired by what they act on (create of kind +
//! name, patch of an object, set status, Event by reason, requeue), in
//! order; each pair is compared field by field. A difference names the
//! action, the JSON path inside it, and the old and new value (`None` when
//! absent on that side).

use operator_plugin_sdk::Action;
use serde::Serialize;
use serde_json::Value;

use super::{Answer, Failure};

/// One way two answers differ.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Difference {
    /// The action, e.g. `create ConfigMap w1-*` or `set status`.
    pub action: String,
    /// Where in the action, as a jq-style path (`.data.version`); `.` is the whole action.
    pub path: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub old: Option<Value>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub new: Option<Value>,
}

impl std::fmt::Display for Difference {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let show = |v: &Option<Value>| v.as_ref().map_or_else(|| "(none)".to_string(), Value::to_string);
        write!(f, "{} {}: {} → {}", self.action, self.path, show(&self.old), show(&self.new))
    }
}

/// How a candidate's answer compares with the reference answer.
#[derive(Clone, Debug, PartialEq)]
pub enum Verdict {
    Agree,
    /// Both answered (or both failed), differently.
    Differ(Vec<Difference>),
    /// The candidate failed where the reference did not fail the same way.
    Error(Failure),
}

impl Verdict {
    /// The metric label: `agree`, `differ` or `error`.
    pub fn label(&self) -> &'static str {
        match self {
            Verdict::Agree => "agree",
            Verdict::Differ(_) => "differ",
            Verdict::Error(_) => "error",
        }
    }
}

/// Compares `new` (the candidate's) with `old` (the reference). Two failures
/// agree when their kind, reason and retryability agree (messages name the
/// plugin and may differ in wording).
pub fn verdict(old: &Answer, new: &Answer) -> Verdict {
    match (old, new) {
        (Answer::Actions(a), Answer::Actions(b)) => {
            let d = actions(a, b);
            if d.is_empty() { Verdict::Agree } else { Verdict::Differ(d) }
        }
        (Answer::Error(a), Answer::Error(b)) if (&a.kind, &a.reason, a.retryable) == (&b.kind, &b.reason, b.retryable) => Verdict::Agree,
        (_, Answer::Error(b)) => Verdict::Error(b.clone()),
        (Answer::Error(a), Answer::Actions(b)) => Verdict::Differ(vec![Difference {
            action: "answer".into(),
            path: ".".into(),
            old: Some(Value::String(format!("error {}: {}", a.reason, a.message))),
            new: Some(Value::String(format!("{} action(s)", b.len()))),
        }]),
    }
}

/// The differences between two lists of actions.
pub fn actions(old: &[Action], new: &[Action]) -> Vec<Difference> {
    let old: Vec<(String, Value)> = old.iter().map(describe).collect();
    let mut new: Vec<Option<(String, Value)>> = new.iter().map(describe).map(Some).collect();
    let mut out = Vec::new();
    for (label, body) in old {
        // The first unpaired action of the candidate on the same thing.
        let pair = new.iter_mut().find(|n| n.as_ref().is_some_and(|(l, _)| *l == label)).and_then(Option::take);
        match pair {
            Some((_, other)) => values(&label, String::new(), Some(&body), Some(&other), &mut out),
            None => out.push(Difference { action: label, path: ".".into(), old: Some(body), new: None }),
        }
    }
    for (label, body) in new.into_iter().flatten() {
        out.push(Difference { action: label, path: ".".into(), old: None, new: Some(body) });
    }
    out
}

/// What an action acts on (its pairing label) and its body.
fn describe(action: &Action) -> (String, Value) {
    let object = |verb: &str, o: &Value| {
        let kind = o["kind"].as_str().unwrap_or("?");
        let name = match (o["metadata"]["name"].as_str(), o["metadata"]["generateName"].as_str()) {
            (Some(n), _) => n.to_string(),
            (None, Some(g)) => format!("{g}*"),
            (None, None) => "?".into(),
        };
        format!("{verb} {kind} {name}")
    };
    match action {
        Action::Create(o) => (object("create", o), o.clone()),
        Action::Replace(o) => (object("replace", o), o.clone()),
        Action::Patch { target, patch } => (format!("patch {target}"), serde_json::json!({"patch": patch})),
        Action::Delete { target, propagation } => (format!("delete {target}"), serde_json::json!({"propagation": propagation})),
        Action::SetStatus(s) => ("set status".into(), s.clone()),
        Action::Event { event_type, reason, message } => {
            (format!("event {reason}"), serde_json::json!({"type": event_type, "reason": reason, "message": message}))
        }
        Action::RequeueAfterMs(ms) => ("requeue after".into(), serde_json::json!({"ms": ms})),
        Action::RequeueLowAfterMs(ms) => ("requeue after".into(), serde_json::json!({"ms": ms, "priority": "low"})),
        Action::Finalized {} => ("finalized".into(), serde_json::json!({})),
        Action::Apply(o) => (object("apply", o), o.clone()),
    }
}

fn key_path(path: &str, key: &str) -> String {
    if key.chars().all(|c| c.is_ascii_alphanumeric() || c == '_') && !key.is_empty() {
        format!("{path}.{key}")
    } else {
        format!("{path}[{}]", Value::String(key.into()))
    }
}

/// Walks two values, pushing a difference per leaf (or subtree present on one side only).
fn values(action: &str, path: String, old: Option<&Value>, new: Option<&Value>, out: &mut Vec<Difference>) {
    match (old, new) {
        (Some(Value::Object(a)), Some(Value::Object(b))) => {
            for (k, va) in a {
                values(action, key_path(&path, k), Some(va), b.get(k), out);
            }
            for (k, vb) in b.iter().filter(|(k, _)| !a.contains_key(*k)) {
                values(action, key_path(&path, k), None, Some(vb), out);
            }
        }
        (Some(Value::Array(a)), Some(Value::Array(b))) => {
            for i in 0..a.len().max(b.len()) {
                values(action, format!("{path}[{i}]"), a.get(i), b.get(i), out);
            }
        }
        (a, b) if a == b => {}
        (a, b) => {
            out.push(Difference { action: action.into(), path: if path.is_empty() { ".".into() } else { path }, old: a.cloned(), new: b.cloned() })
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use operator_plugin_sdk::{ObjectRef, json};

    fn cm(version: &str) -> Action {
        Action::Create(json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"generateName": "w-"}, "data": {"version": version}}))
    }

    #[test]
    fn equal_answers_agree_and_a_changed_field_is_named_by_action_and_path() {
        let old = Answer::Actions(vec![cm("1"), Action::SetStatus(json!({"version": "1", "children": 0}))]);
        assert_eq!(verdict(&old, &old.clone()), Verdict::Agree);
        let new = Answer::Actions(vec![cm("2"), Action::SetStatus(json!({"version": "2", "children": 0}))]);
        let Verdict::Differ(d) = verdict(&old, &new) else { panic!("should differ") };
        let shown: Vec<String> = d.iter().map(ToString::to_string).collect();
        assert_eq!(shown, ["create ConfigMap w-* .data.version: \"1\" → \"2\"", "set status .version: \"1\" → \"2\""]);
    }

    #[test]
    fn added_and_removed_actions_are_differences_and_order_of_unrelated_actions_is_not() {
        let target = ObjectRef { api_version: "v1".into(), kind: "ConfigMap".into(), namespace: "ns".into(), name: "c".into() };
        let old = [Action::delete(target.clone()), Action::RequeueAfterMs(1000)];
        let new = [Action::RequeueAfterMs(1000), Action::normal("Done", "ok")];
        let d = actions(&old, &new);
        assert_eq!(d.len(), 2, "{d:?}");
        assert_eq!(d[0].action, "delete ConfigMap ns/c");
        assert!(d[0].new.is_none());
        assert_eq!(d[1].action, "event Done");
        assert!(d[1].old.is_none());
        assert!(
            actions(&[Action::RequeueAfterMs(1), Action::SetStatus(json!({}))], &[Action::SetStatus(json!({})), Action::RequeueAfterMs(1)])
                .is_empty()
        );
    }

    #[test]
    fn failures_agree_on_kind_and_reason_and_a_new_failure_is_an_error() {
        let trap = |m: &str| Answer::Error(Failure { kind: "trap".into(), reason: "PluginTrapped".into(), message: m.into(), retryable: true });
        assert_eq!(verdict(&trap("a"), &trap("b")), Verdict::Agree);
        assert!(matches!(verdict(&Answer::Actions(vec![]), &trap("x")), Verdict::Error(f) if f.reason == "PluginTrapped"));
        assert!(matches!(verdict(&trap("x"), &Answer::Actions(vec![])), Verdict::Differ(_)));
    }
}
