//! Where the timeline's entries come from, without touching the host:
//! - [`RecordingService`] wraps the in-process API server's `tower::Service`
//!   under the host's kube client and records every write the host makes
//!   (its plugins' actions, status and Events) as it was sent and answered;
//! - [`StoreFeed`] follows the API server's commits and records how parent
//!   and child objects changed, whoever changed them (the host, the simulated
//!   kubelet and Job runner, the garbage collector).

use std::collections::HashSet;
use std::convert::Infallible;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};

use apiserver::rest::Core;
use apiserver::store::EventType;
use bytes::Bytes;
use futures::future::BoxFuture;
use http_body_util::{BodyExt, Full};
use serde_json::Value;

use super::timeline::{self, Category, ObjectRef, Timeline};
use operator_runtime::clock::{Clock, TokioClock};

/// The timeline being recorded, shared by the recorders.
#[derive(Debug)]
pub struct Recording {
    timeline: Mutex<Timeline>,
    on: AtomicBool,
    clock: TokioClock,
    /// (group, kind) of every parent and child kind.
    tracked: HashSet<(String, String)>,
}

impl Recording {
    /// Records nothing until [`Recording::start`].
    pub fn new(clock: TokioClock, tracked: HashSet<(String, String)>) -> Arc<Self> {
        Arc::new(Self { timeline: Mutex::new(Timeline::default()), on: AtomicBool::new(false), clock, tracked })
    }

    pub fn start(&self) {
        self.on.store(true, Ordering::SeqCst);
    }

    pub fn stop(&self) {
        self.on.store(false, Ordering::SeqCst);
    }

    fn on(&self) -> bool {
        self.on.load(Ordering::SeqCst)
    }

    /// Records an object the user applied.
    pub fn applied(&self, sent: &Value, answer: &Value) {
        let rv = resource_version(answer).unwrap_or_default();
        let body = timeline::written_object(sent);
        self.timeline.lock().unwrap().push(self.clock.now(), rv, Category::Apply, "create", ObjectRef::of(answer), None, Some(body));
    }

    /// The recorded timeline.
    pub fn take(&self) -> Timeline {
        std::mem::take(&mut *self.timeline.lock().unwrap())
    }

    fn tracks(&self, obj: &Value) -> bool {
        let api_version = obj.get("apiVersion").and_then(Value::as_str).unwrap_or_default();
        let group = api_version.rsplit_once('/').map_or("", |(g, _)| g);
        let kind = obj.get("kind").and_then(Value::as_str).unwrap_or_default();
        self.tracked.contains(&(group.to_string(), kind.to_string()))
    }

    /// Records one write the host made, from its request and the answer.
    fn host_write(&self, at: chrono::DateTime<chrono::Utc>, write: Write, current_rv: u64) {
        let answer: Value = serde_json::from_slice(&write.answer).unwrap_or(Value::Null);
        let sent: Value = serde_json::from_slice(&write.sent).unwrap_or(Value::Null);
        let ok = (200..300).contains(&write.status);
        let answered_object = ok && answer.get("kind").and_then(Value::as_str) != Some("Status");
        let rv = if answered_object { resource_version(&answer) } else { None }.unwrap_or(current_rv);
        let path = ApiPath::parse(&write.path);
        let mut object = if answered_object { ObjectRef::of(&answer) } else { path.object_ref(&sent, &write.kind) };
        let failure = (!ok).then(|| {
            let reason = answer.get("reason").and_then(Value::as_str).unwrap_or_default();
            let message = answer.get("message").and_then(Value::as_str).unwrap_or_default();
            format!("failed: {} {reason}: {message}", write.status)
        });
        let mut timeline = self.timeline.lock().unwrap();
        if path.resource == "events" {
            if write.status == 409 && write.method == "POST" {
                // A name taken by an Event of the same instant: the host retries
                // under the next name; the retry is what the timeline shows.
                return;
            }
            // An Event: show what it says about which object.
            let event = if answered_object { &answer } else { &sent };
            let regarding = event.get("regarding").or_else(|| event.get("involvedObject"));
            if let Some(r) = regarding {
                object = ObjectRef::of(&serde_json::json!({
                    "apiVersion": r.get("apiVersion"), "kind": r.get("kind"),
                    "metadata": {"namespace": r.get("namespace"), "name": r.get("name")},
                }));
            }
            let text = |k: &str| event.get(k).and_then(Value::as_str).unwrap_or_default().to_string();
            let what = format!("{} {}", text("type"), text("reason"));
            let note = if event.get("note").is_some() { text("note") } else { text("message") };
            let count = event.pointer("/series/count").and_then(Value::as_i64);
            let detail = match (count, failure) {
                (_, Some(f)) => format!("{note} ({f})"),
                (Some(n), None) => format!("{note} (x{n})"),
                (None, None) => note,
            };
            timeline.push(at, rv, Category::Event, what, object, Some(detail), None);
            return;
        }
        let verb = match (write.method.as_str(), path.subresource.as_str()) {
            ("POST", _) => "create",
            ("PUT", "status") | ("PATCH", "status") => "status",
            ("PUT", _) => "replace",
            ("PATCH", _) => "patch",
            ("DELETE", _) => "delete",
            (other, _) => other,
        };
        let (detail, body) = match verb {
            "status" => (timeline::status_detail(&sent), Some(sent)),
            "create" | "replace" => (None, Some(timeline::written_object(&sent))),
            "patch" => (Some(timeline::sanitize(sent.clone()).to_string()), Some(sent)),
            _ => (sent.get("propagationPolicy").and_then(Value::as_str).map(|p| format!("propagation {p}")), None),
        };
        let detail = match (failure, detail) {
            (Some(f), _) => Some(f),
            (None, d) => d,
        };
        timeline.push(at, rv, Category::Action, verb, object, detail, body);
    }

    /// Records the state changes of tracked objects in commits after `since`;
    /// returns the last resourceVersion seen.
    fn follow(&self, core: &Core, since: u64) -> u64 {
        let Ok(events) = core.store.all_events_since(since) else {
            tracing::warn!("the timeline fell behind the API server's event window; some changes are missing");
            return core.store.current_rv();
        };
        let mut last = since;
        let mut timeline = self.timeline.lock().unwrap();
        for e in events {
            last = e.rv;
            if !self.on() || !self.tracks(&e.object) {
                continue;
            }
            let deleted = e.kind == EventType::Deleted;
            if e.kind == EventType::Added {
                timeline.note_generated(&e.object);
            }
            let prev = if e.kind == EventType::Added { None } else { e.prev.as_deref().or(Some(&*e.object)) };
            for change in timeline::changes(prev, &e.object, deleted) {
                timeline.push(self.clock.now(), e.rv, Category::State, change, ObjectRef::of(&e.object), None, None);
            }
        }
        last
    }
}

fn resource_version(obj: &Value) -> Option<u64> {
    obj.pointer("/metadata/resourceVersion").and_then(Value::as_str).and_then(|s| s.parse().ok())
}

/// Follows the API server's commits until dropped. Each wake-up happens at
/// the virtual instant of the commit (tokio only moves a paused clock when
/// every task is idle), so the entries carry the commit's time.
pub struct StoreFeed {
    core: Arc<Core>,
    recording: Arc<Recording>,
    seen: u64,
}

impl StoreFeed {
    /// Starts after everything already committed.
    pub fn new(core: Arc<Core>, recording: Arc<Recording>) -> Self {
        let seen = core.store.current_rv();
        Self { core, recording, seen }
    }

    /// Records the commits since the last call.
    fn catch_up(&mut self) {
        self.seen = self.recording.follow(&self.core, self.seen);
    }

    /// Records commits as they happen until `stop` fires, then records what
    /// was committed up to that instant.
    pub async fn run(mut self, stop: tokio::sync::oneshot::Receiver<()>) {
        let mut changes = self.core.store.subscribe();
        tokio::pin!(stop);
        loop {
            self.catch_up();
            tokio::select! {
                r = changes.changed() => if r.is_err() { return },
                _ = &mut stop => {
                    self.catch_up();
                    return;
                }
            }
        }
    }
}

/// What a request wrote, as sent and as answered.
struct Write {
    method: String,
    /// The kind the path names (for writes answered without an object).
    kind: String,
    path: String,
    sent: Bytes,
    status: u16,
    answer: Bytes,
}

/// The parts of an API path the timeline needs.
#[derive(Debug, Default, PartialEq, Eq)]
struct ApiPath {
    api_version: String,
    namespace: String,
    resource: String,
    name: String,
    subresource: String,
}

impl ApiPath {
    /// `/api/v1/namespaces/NS/RES/NAME/SUB` or `/apis/GROUP/VERSION/...`.
    fn parse(path: &str) -> Self {
        let parts: Vec<&str> = path.split('/').filter(|p| !p.is_empty()).collect();
        let (api_version, rest) = match parts.as_slice() {
            ["api", v, rest @ ..] => (v.to_string(), rest),
            ["apis", g, v, rest @ ..] => (format!("{g}/{v}"), rest),
            _ => return Self::default(),
        };
        let (namespace, rest) = match rest {
            ["namespaces", ns, rest @ ..] if !rest.is_empty() => (ns.to_string(), rest),
            _ => (String::new(), rest),
        };
        let at = |i: usize| rest.get(i).map(|s| s.to_string()).unwrap_or_default();
        Self { api_version, namespace, resource: at(0), name: at(1), subresource: at(2) }
    }

    /// A reference from the path and what was sent (a failed write has no answer object).
    fn object_ref(&self, sent: &Value, kind: &str) -> ObjectRef {
        let from_body = ObjectRef::of(sent);
        ObjectRef {
            api_version: if from_body.api_version.is_empty() || from_body.kind == "DeleteOptions" {
                self.api_version.clone()
            } else {
                from_body.api_version
            },
            kind: if from_body.kind.is_empty() || from_body.kind == "DeleteOptions" { kind.to_string() } else { from_body.kind },
            namespace: self.namespace.clone(),
            name: if self.name.is_empty() { from_body.name } else { self.name.clone() },
        }
    }
}

/// The in-process API server under the host's kube client, recording every
/// write (POST, PUT, PATCH, DELETE) while the recording is on. Reads and
/// watches pass through untouched (a watch's body is never buffered).
#[derive(Clone)]
pub struct RecordingService {
    inner: apiserver::ApiService,
    core: Arc<Core>,
    recording: Arc<Recording>,
}

impl RecordingService {
    pub fn new(server: &apiserver::ApiServer, recording: Arc<Recording>) -> Self {
        Self { inner: server.service(), core: server.core().clone(), recording }
    }
}

impl tower::Service<http::Request<kube::client::Body>> for RecordingService {
    type Response = http::Response<apiserver::Body>;
    type Error = Infallible;
    type Future = BoxFuture<'static, Result<Self::Response, Infallible>>;

    fn poll_ready(&mut self, _cx: &mut Context<'_>) -> Poll<Result<(), Infallible>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, req: http::Request<kube::client::Body>) -> Self::Future {
        let mut inner = self.inner.clone();
        let core = self.core.clone();
        let recording = self.recording.clone();
        Box::pin(async move {
            let writes = matches!(*req.method(), http::Method::POST | http::Method::PUT | http::Method::PATCH | http::Method::DELETE);
            if !writes || !recording.on() {
                return tower::Service::call(&mut inner, req).await;
            }
            let at = recording.clock.now();
            let (parts, body) = req.into_parts();
            let sent = body.collect().await.map(|c| c.to_bytes()).unwrap_or_default();
            let (method, path) = (parts.method.to_string(), parts.uri.path().to_string());
            let answer = tower::Service::call(&mut inner, http::Request::from_parts(parts, Full::new(sent.clone()))).await?;
            let (answer_parts, answer_body) = answer.into_parts();
            let answer = answer_body.collect().await.map(|c| c.to_bytes()).unwrap_or_else(|e| match e {});
            let api = ApiPath::parse(&path);
            let (group, version) = api.api_version.rsplit_once('/').unwrap_or(("", api.api_version.as_str()));
            let kind = core.registry.find(group, version, &api.resource).map(|r| r.kind).unwrap_or(api.resource);
            let write = Write { method, kind, path, sent, status: answer_parts.status.as_u16(), answer: answer.clone() };
            recording.host_write(at, write, core.store.current_rv());
            Ok(http::Response::from_parts(answer_parts, Full::new(answer).boxed_unsync()))
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn api_paths_name_the_object_and_subresource() {
        let p = ApiPath::parse("/apis/batch.tutorial.kubebuilder.io/v1/namespaces/default/cronjobs/hello/status");
        assert_eq!(
            p,
            ApiPath {
                api_version: "batch.tutorial.kubebuilder.io/v1".into(),
                namespace: "default".into(),
                resource: "cronjobs".into(),
                name: "hello".into(),
                subresource: "status".into()
            }
        );
        let p = ApiPath::parse("/api/v1/namespaces/default/pods");
        assert_eq!((p.api_version.as_str(), p.namespace.as_str(), p.resource.as_str(), p.name.as_str()), ("v1", "default", "pods", ""));
        let p = ApiPath::parse("/api/v1/namespaces/default");
        assert_eq!((p.namespace.as_str(), p.resource.as_str(), p.name.as_str()), ("", "namespaces", "default"));
    }
}
