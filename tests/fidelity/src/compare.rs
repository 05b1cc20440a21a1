//! The comparator: one recorded exchange against its replay, after both
//! pass the normalization rules. Status codes, the recorded headers, bodies
//! and watch events are compared; each difference names its JSON path and
//! both values.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::exchange::{Body, Exchange};
use crate::normalize::normalize;

/// One difference: where, and what each server answered.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
pub struct Difference {
    /// The exchange's stable name (`exchange_id`).
    pub exchange: String,
    /// `status`, `header <name>`, or a JSON path into the body (`$...`) or
    /// into the watch events (`$events[i]...`).
    pub path: String,
    pub real: Value,
    pub embedded: Value,
}

/// Stable names for a run's exchanges: `step METHOD path`, with the query's
/// assigned values (resourceVersion, continue) blanked, and `(n)` on the
/// n-th repeat of the same name.
pub fn exchange_ids(exchanges: &[Exchange]) -> Vec<String> {
    let mut seen: BTreeMap<String, usize> = BTreeMap::new();
    exchanges
        .iter()
        .map(|e| {
            let base = format!("{} {} {}", e.step, e.method, blank_assigned(&e.path));
            let n = seen.entry(base.clone()).or_default();
            *n += 1;
            if *n == 1 { base } else { format!("{base} ({n})") }
        })
        .collect()
}

fn blank_assigned(path: &str) -> String {
    let Some((p, q)) = path.split_once('?') else { return path.to_string() };
    let q: Vec<String> = q
        .split('&')
        .map(|kv| match kv.split_once('=') {
            Some((k @ ("resourceVersion" | "continue"), v)) if v != "0" && !v.is_empty() => format!("{k}=*"),
            // A content hash (OpenAPI) and kubectl's randomized watch timeout.
            Some((k @ ("hash" | "timeoutSeconds"), _)) => format!("{k}=*"),
            // A uid in a field selector (kubectl describe's events).
            Some(("fieldSelector", v)) => format!("fieldSelector={}", blank_uids(v)),
            _ => kv.to_string(),
        })
        .collect();
    format!("{p}?{}", q.join("&"))
}

/// `involvedObject.uid%3D<uid>` -> `involvedObject.uid%3D*` in an encoded selector.
/// The terms are sorted: kubectl builds describe's selector from a Go map, in random order.
fn blank_uids(selector: &str) -> String {
    let mut terms: Vec<String> = selector
        .split("%2C")
        .map(|term| match term.split_once("%3D") {
            Some((k, _)) if k.ends_with(".uid") => format!("{k}%3D*"),
            _ => term.to_string(),
        })
        .collect();
    terms.sort();
    terms.join("%2C")
}

/// Every difference between `real` and `embedded` (the same request).
pub fn compare(id: &str, real: &Exchange, embedded: &Exchange) -> Vec<Difference> {
    let mut out = Vec::new();
    let mut push = |path: String, a: Value, b: Value| out.push(Difference { exchange: id.to_string(), path, real: a, embedded: b });
    if real.status != embedded.status {
        push("status".into(), real.status.into(), embedded.status.into());
    }
    for name in crate::exchange::RECORDED_RESPONSE_HEADERS {
        let (a, b) = (real.headers.get(*name), embedded.headers.get(*name));
        if a != b {
            push(format!("header {name}"), a.map_or(Value::Null, |v| v.as_str().into()), b.map_or(Value::Null, |v| v.as_str().into()));
        }
    }
    let (a, b) = (comparable(real), comparable(embedded));
    let mut diffs = Vec::new();
    diff("$", &a, &b, &mut diffs);
    for (path, a, b) in diffs {
        push(path, a, b);
    }
    out
}

/// The body (or the watch's events as `{"events": [...]}`) as JSON, normalized.
///
/// A protobuf answer (kubectl's typed clients ask for it; the Content-Type
/// header is compared on its own) is decoded to the JSON it stands for with
/// upstream's descriptors as the embedded server carries them (v1.36, so a
/// field newer than that is not seen), so its content is compared too.
fn comparable(e: &Exchange) -> Value {
    let protobuf = e.headers.get("content-type").is_some_and(|t| t.starts_with("application/vnd.kubernetes.protobuf"));
    let mut value = match (&e.watch, &e.body) {
        (Some(events), _) => serde_json::json!({ "events": events }),
        (None, Body::Empty) => Value::Null,
        (None, Body::Json(v)) => v.clone(),
        (None, Body::Text(t)) => Value::String(t.clone()),
        (None, body @ Body::Base64(b)) if protobuf => apiserver::decode_protobuf(&body.to_bytes())
            .unwrap_or_else(|err| serde_json::json!({ "undecodable protobuf": err.to_string(), "bytes(base64)": b })),
        (None, Body::Base64(b)) => serde_json::json!({ "bytes(base64)": b }),
    };
    normalize(&e.path, &mut value);
    value
}

/// Keys that name an element of a list, in the order they are tried.
const IDENTITY_KEYS: &[&str] = &["metadata.name", "name", "type", "version", "resource", "subresource", "group", "kind", "key", "path"];

/// An array's elements by identity, when every element of both arrays has
/// the same identity key with distinct values.
fn identities(a: &[Value], b: &[Value]) -> Option<(&'static str, Vec<String>, Vec<String>)> {
    if a.is_empty() && b.is_empty() {
        return None;
    }
    // A managedFields entry is one manager's for one operation and subresource.
    let entry = |v: &Value| -> Option<String> {
        let (m, o) = (v.get("manager")?.as_str()?, v.get("operation")?.as_str()?);
        Some(format!("{m}/{o}/{}", v.get("subresource").and_then(Value::as_str).unwrap_or("")))
    };
    if let (Some(ia), Some(ib)) = (a.iter().map(entry).collect::<Option<Vec<_>>>(), b.iter().map(entry).collect::<Option<Vec<_>>>()) {
        return Some(("manager", ia, ib));
    }
    for key in IDENTITY_KEYS {
        let id = |v: &Value| -> Option<String> {
            let mut cur = v;
            for part in key.split('.') {
                cur = cur.get(part)?;
            }
            cur.as_str().map(str::to_string)
        };
        let ia: Option<Vec<String>> = a.iter().map(id).collect();
        let ib: Option<Vec<String>> = b.iter().map(id).collect();
        if let (Some(ia), Some(ib)) = (ia, ib) {
            let distinct = |v: &Vec<String>| v.iter().collect::<std::collections::BTreeSet<_>>().len() == v.len();
            if distinct(&ia) && distinct(&ib) {
                return Some((key, ia, ib));
            }
        }
    }
    None
}

fn diff(path: &str, a: &Value, b: &Value, out: &mut Vec<(String, Value, Value)>) {
    match (a, b) {
        (Value::Object(ma), Value::Object(mb)) => {
            let keys: std::collections::BTreeSet<&String> = ma.keys().chain(mb.keys()).collect();
            for key in keys {
                let sub = format!("{path}.{key}");
                match (ma.get(key), mb.get(key)) {
                    (Some(va), Some(vb)) => diff(&sub, va, vb, out),
                    (va, vb) => out.push((sub, va.cloned().unwrap_or(absent()), vb.cloned().unwrap_or(absent()))),
                }
            }
        }
        // Watch events are a sequence; everything else named is matched by name.
        (Value::Array(va), Value::Array(vb)) if !path.ends_with(".events") => match identities(va, vb) {
            Some((key, ia, ib)) => {
                let short = key.rsplit('.').next().unwrap_or(key);
                for (i, id) in ia.iter().enumerate() {
                    let sub = format!("{path}[{short}={id}]");
                    match ib.iter().position(|x| x == id) {
                        Some(j) => diff(&sub, &va[i], &vb[j], out),
                        None => out.push((sub, va[i].clone(), absent())),
                    }
                }
                for (j, id) in ib.iter().enumerate() {
                    if !ia.contains(id) {
                        out.push((format!("{path}[{short}={id}]"), absent(), vb[j].clone()));
                    }
                }
            }
            None => diff_by_index(path, va, vb, out),
        },
        (Value::Array(va), Value::Array(vb)) => diff_by_index(path, va, vb, out),
        _ if a == b => {}
        _ => out.push((path.to_string(), a.clone(), b.clone())),
    }
}

fn diff_by_index(path: &str, va: &[Value], vb: &[Value], out: &mut Vec<(String, Value, Value)>) {
    for i in 0..va.len().max(vb.len()) {
        let sub = format!("{path}[{i}]");
        match (va.get(i), vb.get(i)) {
            (Some(x), Some(y)) => diff(&sub, x, y, out),
            (x, y) => out.push((sub, x.cloned().unwrap_or(absent()), y.cloned().unwrap_or(absent()))),
        }
    }
}

/// How a value one side lacks is shown.
pub fn absent() -> Value {
    Value::String("(absent)".into())
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn exchange(status: u16, body: Value) -> Exchange {
        Exchange {
            step: "s#0".into(),
            at_ms: 0,
            method: "GET".into(),
            path: "/api/v1/namespaces/a/pods".into(),
            request_headers: BTreeMap::new(),
            request_body: Body::Empty,
            status,
            headers: BTreeMap::from([("content-type".into(), "application/json".into())]),
            body: Body::Json(body),
            watch: None,
            duration_ms: 0,
            incidental: false,
        }
    }

    #[test]
    fn named_elements_are_matched_by_name_and_values_differ_by_path() {
        let real = exchange(200, json!({"items": [{"metadata": {"name": "a", "uid": "1"}, "x": 1}, {"metadata": {"name": "b"}}]}));
        let embedded = exchange(200, json!({"items": [{"metadata": {"name": "b"}}, {"metadata": {"name": "a", "uid": "2"}, "x": 2}]}));
        let diffs = compare("e", &real, &embedded);
        assert_eq!(diffs.len(), 1, "{diffs:?}");
        assert_eq!(diffs[0].path, "$.items[name=a].x");
        assert_eq!((diffs[0].real.clone(), diffs[0].embedded.clone()), (json!(1), json!(2)));
    }

    #[test]
    fn managed_fields_entries_are_matched_by_manager_operation_and_subresource() {
        let entry = |m: &str, s: &str, f: Value| json!({"manager": m, "operation": "Update", "subresource": s, "fieldsV1": f});
        let real = exchange(200, json!({"managedFields": [entry("kcm", "status", json!({"a": {}})), entry("kcm", "", json!({"b": {}}))]}));
        let embedded = exchange(200, json!({"managedFields": [entry("kcm", "", json!({"b": {}})), entry("kcm", "status", json!({"c": {}}))]}));
        let paths: Vec<String> = compare("e", &real, &embedded).into_iter().map(|d| d.path).collect();
        assert_eq!(paths, ["$.managedFields[manager=kcm/Update/status].fieldsV1.a", "$.managedFields[manager=kcm/Update/status].fieldsV1.c"]);
    }

    #[test]
    fn status_headers_and_missing_fields_are_reported() {
        let real = exchange(422, json!({"reason": "Invalid"}));
        let mut embedded = exchange(400, json!({}));
        embedded.headers.insert("warning".into(), "299 - \"x\"".into());
        let paths: Vec<String> = compare("e", &real, &embedded).into_iter().map(|d| d.path).collect();
        assert_eq!(paths, ["status", "header warning", "$.reason"]);
    }

    #[test]
    fn ids_blank_assigned_query_values_and_count_repeats() {
        let mut a = exchange(200, json!({}));
        a.path = "/api/v1/pods?resourceVersion=81&watch=true".into();
        let ids = exchange_ids(&[a.clone(), a]);
        assert_eq!(ids, ["s#0 GET /api/v1/pods?resourceVersion=*&watch=true", "s#0 GET /api/v1/pods?resourceVersion=*&watch=true (2)"]);
        let mut b = exchange(200, json!({}));
        b.path = "/api/v1/events?fieldSelector=involvedObject.name%3Dweb%2CinvolvedObject.uid%3D24704a74-1dee&timeoutSeconds=378".into();
        assert_eq!(exchange_ids(&[b]), ["s#0 GET /api/v1/events?fieldSelector=involvedObject.name%3Dweb%2CinvolvedObject.uid%3D*&timeoutSeconds=*"]);
        let mut c = exchange(200, json!({}));
        c.path = "/api/v1/events?fieldSelector=involvedObject.uid%3D1%2CinvolvedObject.name%3Dweb".into();
        assert_eq!(exchange_ids(&[c]), ["s#0 GET /api/v1/events?fieldSelector=involvedObject.name%3Dweb%2CinvolvedObject.uid%3D*"]);
    }
}
