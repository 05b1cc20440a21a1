//! The reviewed normalization rules: every value the two servers may
//! legitimately answer differently, each with why. Both sides of an
//! exchange pass through the same rules before they are compared; a rule
//! replaces a value by `<rule name>`, so a field one side lacks still shows.
//! Nothing else is normalized: every other difference is reported.

use serde_json::Value;

/// A rule: its name (what replaces the value) and why the value may differ.
pub struct Rule {
    pub name: &'static str,
    pub reason: &'static str,
}

pub const RULES: &[Rule] = &[
    Rule {
        name: "uid",
        reason: "a random UUID each server draws at creation (also where it is copied: a Job's controller-uid labels and selector, an error message quoting it)",
    },
    Rule {
        name: "resourceVersion",
        reason: "kube-apiserver answers etcd's revision, the embedded server its own counter; both are opaque to clients",
    },
    Rule { name: "continue", reason: "a continue token is opaque and encodes the server's revision and its own key format" },
    Rule { name: "time", reason: "a wall-clock time: the two runs happen at different moments" },
    Rule { name: "age", reason: "a Table's Age cell is the time since creation, rendered from the wall clock" },
    Rule { name: "generated-name", reason: "a name made from generateName ends in random characters" },
    Rule {
        name: "pod-template-hash",
        reason: "upstream hashes the Go struct's dump of the pod template (hashutil.DeepHashObject), which only Go reproduces; the embedded server hashes the template's JSON",
    },
    Rule { name: "allocated-ip", reason: "Service and Pod IPs are allocated from a range; which one is the allocator's choice" },
    Rule {
        name: "openapi-hash",
        reason: "an OpenAPI document's URL carries a hash of its content; the document itself is compared where it is fetched",
    },
    Rule {
        name: "cause-order",
        reason: "upstream validates a custom resource's schema properties in Go map order (random), so the order of an Invalid Status' causes, and of its message's list, varies from run to run",
    },
    Rule { name: "cluster-ca", reason: "each cluster has its own CA; kube-root-ca.crt holds it" },
    Rule { name: "server-build", reason: "/version names the binary's build (commit, date, Go version, platform), not API behaviour" },
];

/// Keys holding wall-clock times (metav1.Time / MicroTime fields of the kinds the corpus touches).
const TIME_KEYS: &[&str] = &[
    "creationTimestamp",
    "deletionTimestamp",
    "time",
    "lastTransitionTime",
    "lastUpdateTime",
    "lastProbeTime",
    "lastHeartbeatTime",
    "startTime",
    "completionTime",
    "eventTime",
    "firstTimestamp",
    "lastTimestamp",
    "renewTime",
    "acquireTime",
    "lastScheduleTime",
    "lastSuccessfulTime",
    "startedAt",
    "finishedAt",
    "expirationTimestamp",
];

const IP_KEYS: &[&str] = &["clusterIP", "clusterIPs", "podIP", "podIPs", "hostIP", "hostIPs"];

/// `/version`'s fields that name the build.
const BUILD_KEYS: &[&str] = &[
    "gitCommit",
    "gitTreeState",
    "buildDate",
    "goVersion",
    "compiler",
    "platform",
    "gitVersion",
    "emulationMajor",
    "emulationMinor",
    "minCompatibilityMajor",
    "minCompatibilityMinor",
];

fn mark(rule: &str) -> Value {
    Value::String(format!("<{rule}>"))
}

/// Applies every rule to a body (or watch event) of the exchange at `path`.
pub fn normalize(path: &str, value: &mut Value) {
    if path.split('?').next() == Some("/version")
        && let Value::Object(map) = value
    {
        for key in BUILD_KEYS {
            if let Some(v) = map.get_mut(*key) {
                *v = mark("server-build");
            }
        }
    }
    sort_invalid_causes(value);
    let mut hashes = Vec::new();
    collect_template_hashes(value, &mut hashes);
    // A uid copied into a label or selector (a Job's controller-uid) is the same random value.
    let mut uids = Vec::new();
    collect_uids(value, &mut uids);
    collect_status_message_uids(value, &mut uids);
    hashes.extend(uids.into_iter().map(|u| (u, "uid")));
    walk(value, &hashes);
}

/// UUIDs a Status' message quotes (a failed uid precondition names the object's uid).
fn collect_status_message_uids(value: &Value, out: &mut Vec<String>) {
    if value.get("kind").and_then(Value::as_str) != Some("Status") {
        return;
    }
    let Some(message) = value.get("message").and_then(Value::as_str) else { return };
    for word in message.split(|c: char| !(c.is_ascii_hexdigit() || c == '-')) {
        let groups: Vec<usize> = word.split('-').map(str::len).collect();
        if groups == [8, 4, 4, 4, 12] && !out.iter().any(|u| u == word) {
            out.push(word.to_string());
        }
    }
}

fn collect_uids(value: &Value, out: &mut Vec<String>) {
    match value {
        Value::Object(map) => {
            for (key, v) in map {
                match (key.as_str(), v) {
                    ("uid", Value::String(u)) if u.len() >= 8 && !out.contains(u) => out.push(u.clone()),
                    _ => collect_uids(v, out),
                }
            }
        }
        Value::Array(items) => items.iter().for_each(|v| collect_uids(v, out)),
        _ => {}
    }
}

/// An Invalid Status' causes sorted by field and message, and its message's
/// list rebuilt in that order (when it is the list of those causes).
fn sort_invalid_causes(value: &mut Value) {
    if value.get("kind").and_then(Value::as_str) != Some("Status") || value.get("reason").and_then(Value::as_str) != Some("Invalid") {
        return;
    }
    let Some(causes) = value.pointer_mut("/details/causes").and_then(Value::as_array_mut) else { return };
    let line = |c: &Value| {
        let (field, message) = (c["field"].as_str().unwrap_or(""), c["message"].as_str().unwrap_or(""));
        if field.is_empty() { message.to_string() } else { format!("{field}: {message}") }
    };
    let original: Vec<String> = causes.iter().map(line).collect();
    causes.sort_by_key(|c| (c["field"].as_str().unwrap_or("").to_string(), c["message"].as_str().unwrap_or("").to_string()));
    let sorted: Vec<String> = causes.iter().map(line).collect();
    if original.len() < 2 {
        return;
    }
    let (was, now) = (format!("[{}]", original.join(", ")), format!("[{}]", sorted.join(", ")));
    if let Some(Value::String(message)) = value.get_mut("message")
        && message.ends_with(&was)
    {
        let stem = message[..message.len() - was.len()].to_string();
        *message = format!("{stem}{now}");
    }
}

/// Values copied into other strings: (value, the rule that marks them).
type Copies = [(String, &'static str)];

fn walk(value: &mut Value, hashes: &Copies) {
    match value {
        Value::Object(map) => {
            normalize_table_age(map);
            if let (Some(Value::String(generate)), Some(Value::String(name))) = (map.get("generateName").cloned(), map.get_mut("name"))
                && name.starts_with(&generate)
                && name.len() > generate.len()
            {
                *name = format!("{}<generated-name>", replace_copies(&generate, hashes));
            }
            if let Some(Value::String(url)) = map.get_mut("serverRelativeURL")
                && let Some((stem, _)) = url.split_once("hash=")
            {
                *url = format!("{stem}hash=<openapi-hash>");
            }
            for (key, v) in map.iter_mut() {
                let rule = match key.as_str() {
                    "uid" => Some("uid"),
                    "resourceVersion" => Some("resourceVersion"),
                    "continue" => Some("continue"),
                    k if TIME_KEYS.contains(&k) => Some("time"),
                    k if IP_KEYS.contains(&k) => Some("allocated-ip"),
                    "ca.crt" => Some("cluster-ca"),
                    _ => None,
                };
                match rule {
                    Some(rule) if !v.is_null() && v.as_str() != Some("") => *v = mark(rule),
                    _ => walk(v, hashes),
                }
            }
        }
        Value::Array(items) => items.iter_mut().for_each(|v| walk(v, hashes)),
        Value::String(s) if !hashes.is_empty() => *s = replace_copies(s, hashes),
        _ => {}
    }
}

/// A Table's `Age` column, by its column definition.
fn normalize_table_age(map: &mut serde_json::Map<String, Value>) {
    let Some(Value::Array(columns)) = map.get("columnDefinitions") else { return };
    let Some(age) = columns.iter().position(|c| c["name"] == "Age") else { return };
    if let Some(Value::Array(rows)) = map.get_mut("rows") {
        for row in rows {
            if let Some(cell) = row.get_mut("cells").and_then(|c| c.get_mut(age)) {
                *cell = mark("age");
            }
        }
    }
}

fn collect_template_hashes(value: &Value, out: &mut Vec<(String, &'static str)>) {
    match value {
        Value::Object(map) => {
            for (key, v) in map {
                match (key.as_str(), v) {
                    ("pod-template-hash", Value::String(h)) if !h.is_empty() && !out.iter().any(|(x, _)| x == h) => {
                        out.push((h.clone(), "pod-template-hash"))
                    }
                    _ => collect_template_hashes(v, out),
                }
            }
        }
        Value::Array(items) => items.iter().for_each(|v| collect_template_hashes(v, out)),
        _ => {}
    }
}

fn replace_copies(s: &str, copies: &Copies) -> String {
    copies.iter().fold(s.to_string(), |s, (v, rule)| s.replace(v.as_str(), &format!("<{rule}>")))
}

/// Whether `name` is a rule.
pub fn is_rule(name: &str) -> bool {
    RULES.iter().any(|r| r.name == name)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn assigned_values_and_times_are_marked_and_the_rest_is_kept() {
        let mut v = json!({"metadata": {"name": "a", "uid": "x", "resourceVersion": "12", "creationTimestamp": "2026-01-01T00:00:00Z",
            "managedFields": [{"manager": "kubectl", "time": "2026-01-01T00:00:00Z"}]}, "spec": {"clusterIP": "10.0.0.7", "replicas": 2}});
        normalize("/api/v1/namespaces/a/services/a", &mut v);
        assert_eq!(
            v,
            json!({"metadata": {"name": "a", "uid": "<uid>", "resourceVersion": "<resourceVersion>", "creationTimestamp": "<time>",
            "managedFields": [{"manager": "kubectl", "time": "<time>"}]}, "spec": {"clusterIP": "<allocated-ip>", "replicas": 2}})
        );
    }

    #[test]
    fn generated_names_and_template_hashes_keep_their_stems() {
        let mut v = json!({"metadata": {"generateName": "web-5d8f7-", "name": "web-5d8f7-x7k2p", "labels": {"pod-template-hash": "5d8f7"}}});
        normalize("/p", &mut v);
        assert_eq!(v["metadata"]["name"], "web-<pod-template-hash>-<generated-name>");
        assert_eq!(v["metadata"]["labels"]["pod-template-hash"], "<pod-template-hash>");
    }

    #[test]
    fn a_uid_quoted_in_a_status_message_is_marked_there_too() {
        let mut v = json!({"kind": "Status", "message": "the UID in the precondition (x) does not match the UID in record (8153aa06-935d-4fcc-9306-731312dd928f). The object"});
        normalize("/api/v1/namespaces/n/configmaps/c", &mut v);
        assert_eq!(v["message"], "the UID in the precondition (x) does not match the UID in record (<uid>). The object");
    }

    #[test]
    fn a_uid_copied_into_labels_is_marked_there_too() {
        let mut v = json!({"metadata": {"uid": "0b1c2d3e-aaaa"}, "spec": {"selector": {"matchLabels": {"controller-uid": "0b1c2d3e-aaaa"}}}});
        normalize("/j", &mut v);
        assert_eq!(v["spec"]["selector"]["matchLabels"]["controller-uid"], "<uid>");
    }

    #[test]
    fn only_the_age_column_of_a_table_is_marked() {
        let mut v = json!({"kind": "Table", "columnDefinitions": [{"name": "Name"}, {"name": "Age"}], "rows": [{"cells": ["a", "3s"]}]});
        normalize("/t", &mut v);
        assert_eq!(v["rows"][0]["cells"], json!(["a", "<age>"]));
    }

    #[test]
    fn invalid_causes_and_their_message_are_put_in_one_order() {
        let mut v = json!({"kind": "Status", "reason": "Invalid", "message": "W \"w\" is invalid: [spec.b: x, spec.a: y]",
            "details": {"causes": [{"field": "spec.b", "message": "x"}, {"field": "spec.a", "message": "y"}]}});
        normalize("/p", &mut v);
        assert_eq!(v["message"], "W \"w\" is invalid: [spec.a: y, spec.b: x]");
        assert_eq!(v["details"]["causes"][0]["field"], "spec.a");
    }

    #[test]
    fn an_absent_or_empty_value_stays_visible() {
        let mut v = json!({"metadata": {"uid": "", "deletionTimestamp": null}});
        normalize("/p", &mut v);
        assert_eq!(v, json!({"metadata": {"uid": "", "deletionTimestamp": null}}));
    }
}
