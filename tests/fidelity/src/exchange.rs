//! One recorded HTTP exchange: the request a client sent and what the server
//! answered, watch streams as their events. This is the unit the recorder
//! writes, the replayer sends again and the comparator compares.

use std::collections::BTreeMap;

use base64::Engine as _;
use serde::{Deserialize, Serialize};
use serde_json::Value;

/// Request headers that are not recorded: the proxy and the replayer set
/// their own (credentials differ per server; bodies are never compressed so
/// they can be compared; hop-by-hop headers belong to one connection).
pub const UNRECORDED_REQUEST_HEADERS: &[&str] = &["authorization", "host", "accept-encoding", "connection", "content-length", "transfer-encoding"];

/// Response headers that are recorded and compared: what a client acts on.
pub const RECORDED_RESPONSE_HEADERS: &[&str] = &["content-type", "warning", "location"];

#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Exchange {
    /// The corpus step that made the request (`file#index`).
    pub step: String,
    /// Milliseconds from the start of the run to the request; the replayer
    /// keeps this pacing so controllers have the same time to act.
    pub at_ms: u64,
    pub method: String,
    /// Path and query, as sent.
    pub path: String,
    pub request_headers: BTreeMap<String, String>,
    pub request_body: Body,
    pub status: u16,
    /// [`RECORDED_RESPONSE_HEADERS`] that were present (lower-case names).
    pub headers: BTreeMap<String, String>,
    pub body: Body,
    /// Milliseconds from the request to the end of the answer (a watch: of
    /// its stream, or of the client's reading); bounds a replayed watch.
    #[serde(default)]
    pub duration_ms: u64,
    /// A discovery or OpenAPI read kubectl made on its own to refresh its
    /// cache, not what the step asked for: which step refreshes depends on
    /// timing (the cache's age, when a new CRD's resources appear), so it is
    /// replayed but not compared. Steps that ask for these documents (raw
    /// requests, `kubectl get --raw`) compare them.
    #[serde(default)]
    pub incidental: bool,
    /// The events of a watch (its body is then empty).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub watch: Option<Vec<Value>>,
}

impl Exchange {
    /// `GET /api/v1/...`, as reports name an exchange.
    pub fn label(&self) -> String {
        format!("{} {}", self.method, self.path)
    }

    /// Whether the request is a watch (streamed; recorded as events).
    pub fn is_watch(&self) -> bool {
        is_watch(&self.path)
    }
}

/// Whether a path is a discovery or OpenAPI document (`/api`, `/apis`,
/// `/openapi/v3...`), or the CRD list kubectl falls back to when discovery
/// does not know a kind yet.
pub fn is_discovery(path_and_query: &str) -> bool {
    let path = path_and_query.split('?').next().unwrap_or("");
    matches!(path, "/api" | "/apis" | "/apis/apiextensions.k8s.io/v1/customresourcedefinitions") || path.starts_with("/openapi/")
}

/// Whether a request path asks for a watch (`?watch=true|1` or `/watch/`).
pub fn is_watch(path_and_query: &str) -> bool {
    let (path, query) = path_and_query.split_once('?').unwrap_or((path_and_query, ""));
    path.contains("/watch/") || query.split('&').any(|kv| kv == "watch=true" || kv == "watch=1")
}

/// A body as recorded: JSON when it parses as JSON, text when it is UTF-8,
/// base64 otherwise (protobuf).
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
#[serde(rename_all = "lowercase")]
pub enum Body {
    Empty,
    Json(Value),
    Text(String),
    Base64(String),
}

impl Body {
    pub fn from_bytes(bytes: &[u8]) -> Body {
        if bytes.is_empty() {
            return Body::Empty;
        }
        // Protobuf (the `k8s\0` envelope) may happen to be valid UTF-8.
        if bytes.starts_with(b"k8s\0") {
            return Body::Base64(base64::engine::general_purpose::STANDARD.encode(bytes));
        }
        if let Ok(value) = serde_json::from_slice::<Value>(bytes) {
            return Body::Json(value);
        }
        match std::str::from_utf8(bytes) {
            Ok(text) => Body::Text(text.to_string()),
            Err(_) => Body::Base64(base64::engine::general_purpose::STANDARD.encode(bytes)),
        }
    }

    pub fn to_bytes(&self) -> Vec<u8> {
        match self {
            Body::Empty => Vec::new(),
            Body::Json(v) => serde_json::to_vec(v).unwrap_or_default(),
            Body::Text(t) => t.clone().into_bytes(),
            Body::Base64(b) => base64::engine::general_purpose::STANDARD.decode(b).unwrap_or_default(),
        }
    }
}

/// Splits a watch stream's bytes into its events (one JSON object a line);
/// a trailing partial line (a stream cut mid-event) is dropped.
pub fn watch_events(bytes: &[u8]) -> Vec<Value> {
    let mut stream = serde_json::Deserializer::from_slice(bytes).into_iter::<Value>();
    let mut events = Vec::new();
    while let Some(Ok(event)) = stream.next() {
        events.push(event);
    }
    events
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn watch_requests_are_recognised_by_query_or_legacy_path() {
        assert!(is_watch("/api/v1/pods?watch=true&timeoutSeconds=1"));
        assert!(is_watch("/api/v1/namespaces/a/pods?labelSelector=x&watch=1"));
        assert!(is_watch("/api/v1/watch/pods"));
        assert!(!is_watch("/api/v1/pods?watchy=true"));
    }

    #[test]
    fn a_cut_watch_stream_keeps_its_whole_events() {
        let events = watch_events(b"{\"type\":\"ADDED\"}\n{\"type\":\"MODIFIED\"}\n{\"type\":\"DEL");
        assert_eq!(events.len(), 2);
        assert_eq!(events[1]["type"], "MODIFIED");
    }

    #[test]
    fn bodies_keep_json_text_and_bytes_apart() {
        assert_eq!(Body::from_bytes(b""), Body::Empty);
        assert!(matches!(Body::from_bytes(b"{\"a\":1}"), Body::Json(_)));
        assert_eq!(Body::from_bytes(b"ok"), Body::Text("ok".into()));
        let bytes = [0x6b, 0x38, 0x73, 0x00, 0xff];
        assert_eq!(Body::from_bytes(&bytes).to_bytes(), bytes);
        assert!(matches!(Body::from_bytes(b"k8s\0\n\x0f"), Body::Base64(_)), "protobuf that is valid UTF-8");
    }
}
