//! The replayer: sends a recorded request sequence to another server with
//! the recorded pacing, and records what that server answers.
//!
//! Requests carry values only the recorded server assigned (resourceVersions
//! in a replace or a watch, continue tokens, uids in preconditions, names it
//! generated). Walking each recorded answer beside the replayed one learns
//! which of the replayed server's values stands for each of them, and later
//! requests are rewritten with it, so the replayed server is asked the same
//! question about its own objects.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use bytes::Bytes;
use http_body_util::BodyExt;
use serde_json::Value;

use crate::exchange::{Body, Exchange, watch_events};
use crate::proxy::{build_request, recorded_headers};
use crate::upstream::Upstream;

/// Keys whose values the servers assign independently and requests echo back.
const ASSIGNED_KEYS: &[&str] = &["resourceVersion", "uid", "continue"];
/// How long a replayed watch may take beyond what the recording took.
const WATCH_GRACE: Duration = Duration::from_secs(5);

/// Values of the recorded server and the replayed one that stand for each other.
#[derive(Debug, Default)]
pub struct Mapping {
    values: BTreeMap<String, String>,
}

impl Mapping {
    /// Learns from a recorded answer and the replayed one (same shape).
    pub fn learn(&mut self, recorded: &Value, replayed: &Value) {
        match (recorded, replayed) {
            (Value::Object(a), Value::Object(b)) => {
                for (key, va) in a {
                    let Some(vb) = b.get(key) else { continue };
                    match (va, vb) {
                        (Value::String(sa), Value::String(sb)) if ASSIGNED_KEYS.contains(&key.as_str()) && !sa.is_empty() => {
                            self.values.insert(sa.clone(), sb.clone());
                        }
                        _ => self.learn(va, vb),
                    }
                }
                // A name the server generated from `generateName`.
                if let (Some(ga), Some(na), Some(nb)) = (a.get("generateName"), a.get("name"), b.get("name"))
                    && let (Some(ga), Some(na), Some(nb)) = (ga.as_str(), na.as_str(), nb.as_str())
                    && na.starts_with(ga)
                {
                    self.values.insert(na.to_string(), nb.to_string());
                }
            }
            (Value::Array(a), Value::Array(b)) => {
                for (va, vb) in a.iter().zip(b) {
                    self.learn(va, vb);
                }
            }
            _ => {}
        }
    }

    /// The request of `exchange` as it is asked of the replayed server.
    pub fn rewrite(&self, exchange: &Exchange) -> Exchange {
        let mut out = exchange.clone();
        let (path, query) = exchange.path.split_once('?').map_or((exchange.path.as_str(), None), |(p, q)| (p, Some(q)));
        let path: Vec<String> = path.split('/').map(|segment| self.values.get(segment).cloned().unwrap_or_else(|| segment.to_string())).collect();
        out.path = path.join("/");
        if let Some(query) = query {
            let pairs: Vec<String> = query
                .split('&')
                .map(|pair| match pair.split_once('=') {
                    // A uid in a field selector (kubectl describe's events).
                    Some(("fieldSelector", v)) => {
                        let mut decoded = percent_decode(v);
                        for (real, replayed) in self.values.iter().filter(|(k, _)| k.len() == 36 && k.matches('-').count() == 4) {
                            decoded = decoded.replace(real.as_str(), replayed);
                        }
                        format!("fieldSelector={}", percent_encode(&decoded))
                    }
                    Some((k, v)) if matches!(k, "resourceVersion" | "continue") => {
                        let decoded = percent_decode(v);
                        match self.values.get(&decoded) {
                            Some(mapped) => format!("{k}={}", percent_encode(mapped)),
                            None => pair.to_string(),
                        }
                    }
                    _ => pair.to_string(),
                })
                .collect();
            out.path = format!("{}?{}", out.path, pairs.join("&"));
        }
        if let Body::Json(body) = &mut out.request_body {
            self.rewrite_body(body);
        }
        out
    }

    fn rewrite_body(&self, value: &mut Value) {
        match value {
            Value::Object(map) => {
                // A JSON Patch `test` of a value the server assigned.
                let assigned_path =
                    map.get("path").and_then(Value::as_str).is_some_and(|p| ASSIGNED_KEYS.iter().any(|k| p.ends_with(&format!("/{k}"))));
                for (key, v) in map.iter_mut() {
                    if let Value::String(s) = v
                        && (ASSIGNED_KEYS.contains(&key.as_str()) || key == "name" || (assigned_path && key == "value"))
                    {
                        if let Some(mapped) = self.values.get(s.as_str()) {
                            *s = mapped.clone();
                        }
                    } else {
                        self.rewrite_body(v);
                    }
                }
            }
            Value::Array(items) => items.iter_mut().for_each(|v| self.rewrite_body(v)),
            _ => {}
        }
    }
}

/// Replays `recorded` on `upstream`; each answer is returned in a copy of
/// its exchange (the request as recorded, so both sides compare by it).
pub async fn replay(upstream: &Upstream, recorded: &[Exchange]) -> Vec<Exchange> {
    let started = Instant::now();
    let mut mapping = Mapping::default();
    let mut answers = Vec::with_capacity(recorded.len());
    for exchange in recorded {
        let due = Duration::from_millis(exchange.at_ms);
        if let Some(wait) = due.checked_sub(started.elapsed()) {
            tokio::time::sleep(wait).await;
        }
        let request = mapping.rewrite(exchange);
        let answer = send(upstream, exchange, &request).await;
        if let (Body::Json(a), Body::Json(b)) = (&exchange.body, &answer.body) {
            mapping.learn(a, b);
        }
        if let (Some(a), Some(b)) = (&exchange.watch, &answer.watch) {
            mapping.learn(&Value::Array(a.clone()), &Value::Array(b.clone()));
        }
        answers.push(answer);
    }
    answers
}

async fn send(upstream: &Upstream, recorded: &Exchange, request: &Exchange) -> Exchange {
    let mut answer = Exchange { status: 0, headers: BTreeMap::new(), body: Body::Empty, watch: None, ..recorded.clone() };
    let response = match upstream.send(build_request(request)).await {
        Ok(r) => r,
        Err(e) => {
            answer.status = 502;
            answer.body = Body::Text(e.to_string());
            return answer;
        }
    };
    answer.status = response.status().as_u16();
    answer.headers = recorded_headers(response.headers());
    let mut body = response.into_body();
    match &recorded.watch {
        Some(events) if recorded.status == answer.status => {
            // As many events as the recording saw, or the stream's end, or
            // the time the recording took plus some grace.
            let limit = watch_limit(recorded);
            let deadline = Instant::now() + limit;
            let want = events.len();
            let mut seen = Vec::new();
            while want == 0 || watch_events(&seen).len() < want {
                let left = deadline.saturating_duration_since(Instant::now());
                match tokio::time::timeout(left, body.frame()).await {
                    Ok(Some(Ok(frame))) => {
                        if let Ok(data) = frame.into_data() {
                            seen.extend_from_slice(&data);
                        }
                    }
                    _ => break,
                }
            }
            let mut replayed = watch_events(&seen);
            if want > 0 {
                replayed.truncate(want);
            }
            answer.watch = Some(replayed);
        }
        _ => {
            let bytes: Bytes = body.collect().await.map(|b| b.to_bytes()).unwrap_or_default();
            answer.body = Body::from_bytes(&bytes);
        }
    }
    answer
}

/// How long the recorded watch lasted (or its `timeoutSeconds`), plus grace.
fn watch_limit(recorded: &Exchange) -> Duration {
    if recorded.duration_ms > 0 {
        return Duration::from_millis(recorded.duration_ms) + WATCH_GRACE;
    }
    let timeout = recorded
        .path
        .split_once('?')
        .and_then(|(_, q)| q.split('&').find_map(|kv| kv.strip_prefix("timeoutSeconds=")))
        .and_then(|v| v.parse::<u64>().ok())
        .map_or(Duration::ZERO, Duration::from_secs);
    timeout + WATCH_GRACE
}

fn percent_decode(s: &str) -> String {
    let bytes = s.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'%'
            && i + 2 < bytes.len()
            && let Ok(b) = u8::from_str_radix(&s[i + 1..i + 3], 16)
        {
            out.push(b);
            i += 3;
            continue;
        }
        out.push(if bytes[i] == b'+' { b' ' } else { bytes[i] });
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

fn percent_encode(s: &str) -> String {
    s.bytes().map(|b| if b.is_ascii_alphanumeric() || b"-_.~".contains(&b) { (b as char).to_string() } else { format!("%{b:02X}") }).collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn exchange(path: &str, body: Value) -> Exchange {
        Exchange {
            step: "t#0".into(),
            at_ms: 0,
            method: "PUT".into(),
            path: path.into(),
            request_headers: BTreeMap::new(),
            request_body: Body::Json(body),
            status: 200,
            headers: BTreeMap::new(),
            body: Body::Empty,
            watch: None,
            duration_ms: 0,
            incidental: false,
        }
    }

    #[test]
    fn assigned_values_learned_from_answers_rewrite_later_requests() {
        let mut mapping = Mapping::default();
        mapping.learn(
            &json!({"metadata": {"resourceVersion": "812", "uid": "u-real", "continue": "abc=", "generateName": "w-", "name": "w-x1y2z"}}),
            &json!({"metadata": {"resourceVersion": "7", "uid": "u-emb", "continue": "zz", "generateName": "w-", "name": "w-q9r8s"}}),
        );
        let request = exchange(
            "/api/v1/namespaces/a/configmaps/w-x1y2z?resourceVersion=812&continue=abc%3D&limit=2",
            json!({"metadata": {"name": "w-x1y2z", "resourceVersion": "812", "labels": {"n": "812"}}, "preconditions": {"uid": "u-real"}}),
        );
        let rewritten = mapping.rewrite(&request);
        assert_eq!(rewritten.path, "/api/v1/namespaces/a/configmaps/w-q9r8s?resourceVersion=7&continue=zz&limit=2");
        assert_eq!(
            rewritten.request_body,
            Body::Json(json!({"metadata": {"name": "w-q9r8s", "resourceVersion": "7", "labels": {"n": "812"}}, "preconditions": {"uid": "u-emb"}}))
        );
    }

    #[test]
    fn a_json_patch_test_of_the_resource_version_is_rewritten() {
        let mut mapping = Mapping::default();
        mapping.learn(&json!({"resourceVersion": "90"}), &json!({"resourceVersion": "3"}));
        let request =
            exchange("/x", json!([{"op": "test", "path": "/metadata/resourceVersion", "value": "90"}, {"op": "add", "path": "/a", "value": "90"}]));
        assert_eq!(
            mapping.rewrite(&request).request_body,
            Body::Json(json!([{"op": "test", "path": "/metadata/resourceVersion", "value": "3"}, {"op": "add", "path": "/a", "value": "90"}]))
        );
    }
}
