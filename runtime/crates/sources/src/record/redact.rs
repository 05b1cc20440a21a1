//! Secret values never reach the log unless asked: a plugin's children may
//! be Secrets, and a record directory is read by people who may not read
//! Secrets. Every value under `data` and `stringData` of a core/v1 Secret (in
//! the inputs and in create, replace and patch actions) becomes
//! [`REDACTED`]; the keys stay, so a replay still sees which keys exist.

use operator_plugin_sdk::Action;
use serde_json::Value;

use super::{Answer, Call};

/// What a redacted Secret value reads as.
pub const REDACTED: &str = "<redacted>";

fn is_secret(kind: &str, api_version: &str) -> bool {
    kind == "Secret" && api_version == "v1"
}

/// Replaces the values of `data` and `stringData` in `object` (a Secret's
/// body or a patch of one). Returns whether anything changed.
fn values(object: &mut Value) -> bool {
    let mut changed = false;
    for field in ["data", "stringData"] {
        if let Some(map) = object.get_mut(field).and_then(Value::as_object_mut) {
            for v in map.values_mut() {
                if !v.is_null() && *v != REDACTED {
                    *v = Value::String(REDACTED.into());
                    changed = true;
                }
            }
        }
    }
    changed
}

/// An object's JSON text, with Secret values redacted when it is a Secret.
pub fn object_text(text: &str) -> Option<String> {
    let mut v: Value = serde_json::from_str(text).ok()?;
    let secret = is_secret(v["kind"].as_str().unwrap_or_default(), v["apiVersion"].as_str().unwrap_or_default());
    (secret && values(&mut v)).then(|| v.to_string())
}

/// Redacts Secret values in `actions`.
pub fn actions(actions: &mut [Action]) {
    for a in actions {
        match a {
            Action::Create(obj) | Action::Replace(obj) | Action::Apply(obj)
                if is_secret(obj["kind"].as_str().unwrap_or_default(), obj["apiVersion"].as_str().unwrap_or_default()) =>
            {
                values(obj);
            }
            Action::Patch { target, patch } if is_secret(&target.kind, &target.api_version) => {
                values(patch);
            }
            _ => {}
        }
    }
}

/// Redacts an answer (used on a replayed answer before it is compared with a redacted record).
pub fn answer(answer: &mut Answer) {
    if let Answer::Actions(list) = answer {
        actions(list);
    }
}

/// Redacts a whole call: parent, children, related objects, answer.
pub fn call(call: &mut Call) {
    if let Some(t) = object_text(&call.inputs.parent) {
        call.inputs.parent = t;
    }
    for c in call.inputs.children.iter_mut().chain(call.inputs.related.iter_mut()) {
        if let Some(t) = object_text(c) {
            *c = t;
        }
    }
    answer(&mut call.answer);
}

#[cfg(test)]
mod tests {
    use super::*;
    use operator_plugin_sdk::{ObjectRef, json};

    #[test]
    fn secret_values_are_redacted_and_other_objects_kept_as_they_are() {
        let secret = r#"{"apiVersion":"v1","kind":"Secret","metadata":{"name":"s"},"data":{"password":"aHVudGVyMg=="},"stringData":{"token":"t"}}"#;
        let redacted: Value = serde_json::from_str(&object_text(secret).unwrap()).unwrap();
        assert_eq!(redacted["data"]["password"], REDACTED);
        assert_eq!(redacted["stringData"]["token"], REDACTED);
        assert_eq!(redacted["metadata"]["name"], "s");
        assert_eq!(object_text(r#"{"apiVersion":"v1","kind":"ConfigMap","data":{"a":"b"}}"#), None, "not a Secret: untouched");

        let mut list = vec![
            Action::Create(json!({"apiVersion": "v1", "kind": "Secret", "data": {"k": "dg=="}})),
            Action::Patch {
                target: ObjectRef { api_version: "v1".into(), kind: "Secret".into(), namespace: "ns".into(), name: "s".into() },
                patch: json!({"stringData": {"k": "v"}}),
            },
            Action::Create(json!({"apiVersion": "v1", "kind": "ConfigMap", "data": {"k": "v"}})),
            Action::Apply(json!({"apiVersion": "v1", "kind": "Secret", "stringData": {"k": "v"}})),
        ];
        actions(&mut list);
        assert_eq!(list[3], Action::Apply(json!({"apiVersion": "v1", "kind": "Secret", "stringData": {"k": REDACTED}})));
        assert_eq!(list[0], Action::Create(json!({"apiVersion": "v1", "kind": "Secret", "data": {"k": REDACTED}})));
        assert!(matches!(&list[1], Action::Patch { patch, .. } if patch["stringData"]["k"] == REDACTED));
        assert_eq!(list[2], Action::Create(json!({"apiVersion": "v1", "kind": "ConfigMap", "data": {"k": "v"}})));
    }
}
