//! WATCH: newline-delimited JSON events from a resourceVersion, with synthetic ADDED events for
//! the current state, `sendInitialEvents` + the `k8s.io/initial-events-end` bookmark, periodic
//! BOOKMARKs, `timeoutSeconds`, and a 410 `Expired` ERROR event for a resourceVersion older than
//! the retained event window, as upstream's watch cache behaves.

use crate::resources::Resource;
use crate::rest::Core;
use crate::selector::{FieldSelector, LabelSelector};
use crate::status::ApiError;
use crate::store::{Event, EventType};
use bytes::Bytes;
use futures::Stream;
use serde_json::{Value, json};
use std::collections::VecDeque;
use std::sync::Arc;
use std::time::Duration;
use tokio::time::Instant;

/// Parsed watch query.
#[derive(Debug, Clone, Default)]
pub struct WatchParams {
    /// `resourceVersion` ("" = unset).
    pub resource_version: String,
    /// `sendInitialEvents=true`.
    pub send_initial_events: bool,
    /// `allowWatchBookmarks=true`.
    pub bookmarks: bool,
    /// `timeoutSeconds`.
    pub timeout: Option<Duration>,
    /// Namespace filter.
    pub namespace: Option<String>,
    /// `labelSelector`.
    pub labels: LabelSelector,
    /// `fieldSelector`.
    pub fields: FieldSelector,
    /// Render each object as a one-row `Table` (`kubectl get -w`): `includeObject` value.
    pub table: Option<String>,
    /// Render each object as `PartialObjectMetadata` (kube-runtime's `metadata_watcher`).
    pub metadata_only: bool,
}

impl WatchParams {
    fn matches(&self, ns: &str, obj: &Value) -> bool {
        self.namespace.as_deref().is_none_or(|n| n == ns) && self.labels.matches(obj) && self.fields.matches(obj)
    }
}

fn line(kind: &str, object: &Value) -> Bytes {
    Bytes::from(crate::wire::watch_event(kind, object))
}

struct State {
    headers_sent: bool,
    core: Arc<Core>,
    res: Resource,
    params: WatchParams,
    last_rv: u64,
    pending: VecDeque<Bytes>,
    rx: tokio::sync::watch::Receiver<u64>,
    deadline: Instant,
    next_bookmark: Instant,
    done: bool,
}

impl State {
    fn bookmark(&self, initial_end: bool) -> Bytes {
        // No `creationTimestamp: null`: v1.36's ObjectMeta omits a zero one.
        let mut meta = json!({"resourceVersion": self.last_rv.to_string()});
        if initial_end {
            meta["annotations"] = json!({"k8s.io/initial-events-end": "true"});
        }
        let (kind, api_version) = if self.params.metadata_only {
            ("PartialObjectMetadata".to_string(), "meta.k8s.io/v1".to_string())
        } else {
            (self.res.kind.clone(), self.res.api_version())
        };
        line("BOOKMARK", &json!({"kind": kind, "apiVersion": api_version, "metadata": meta}))
    }

    /// The wire form of an object: itself, or a one-row Table (headers only on the first).
    fn render(&mut self, obj: Value) -> Value {
        if self.params.metadata_only {
            return crate::wire::partial_metadata(&obj);
        }
        match self.params.table.clone() {
            None => obj,
            Some(include) => {
                let meta = json!({"resourceVersion": obj["metadata"]["resourceVersion"]});
                let mut t = crate::table::to_table(&self.res, &[obj], meta, &include, self.core.config.clock.now());
                if self.headers_sent {
                    t["columnDefinitions"] = json!([]);
                }
                self.headers_sent = true;
                t
            }
        }
    }

    fn translate(&mut self, ev: &Event) -> Option<Bytes> {
        let ns = ev.key.namespace.as_str();
        let now = self.params.matches(ns, &ev.object);
        let before = ev.prev.as_ref().is_some_and(|p| self.params.matches(ns, p));
        if !(now || (ev.kind == EventType::Modified && before)) {
            return None;
        }
        let obj = self.core.present(&self.res, (*ev.object).clone());
        let obj = self.render(obj);
        match ev.kind {
            EventType::Added => now.then(|| line("ADDED", &obj)),
            EventType::Deleted => now.then(|| line("DELETED", &obj)),
            EventType::Modified => match (before, now) {
                (true, true) => Some(line("MODIFIED", &obj)),
                (false, true) => Some(line("ADDED", &obj)),
                (true, false) => Some(line("DELETED", &obj)),
                (false, false) => None,
            },
        }
    }

    /// Queue every event after `last_rv`; on an expired window queue the 410 ERROR and finish.
    fn drain(&mut self) {
        match self.core.store.events_since(&self.res.group_resource(), self.last_rv) {
            Ok((events, current)) => {
                for ev in &events {
                    if let Some(b) = self.translate(ev) {
                        self.pending.push_back(b);
                    }
                }
                self.last_rv = self.last_rv.max(current);
            }
            Err(oldest) => {
                let e = ApiError::expired(format!("too old resource version: {} ({})", self.last_rv, oldest));
                self.pending.push_back(line("ERROR", &e.to_status()));
                self.done = true;
            }
        }
    }
}

/// Start a watch. Errors before the stream starts (bad parameters) are returned directly.
pub fn watch(core: Arc<Core>, res: Resource, params: WatchParams) -> Result<impl Stream<Item = Bytes> + Send + 'static, ApiError> {
    let rx = core.store.subscribe();
    let now = Instant::now();
    let timeout = params.timeout.unwrap_or(core.config.max_watch_timeout).min(core.config.max_watch_timeout);
    let mut st = State {
        core: core.clone(),
        res,
        params,
        last_rv: 0,
        pending: VecDeque::new(),
        rx,
        deadline: now + timeout,
        next_bookmark: now + core.config.bookmark_interval,
        done: false,
        headers_sent: false,
    };
    let rv = st.params.resource_version.clone();
    if st.params.send_initial_events || rv.is_empty() || rv == "0" {
        let (items, at) = core.store.snapshot(&st.res.group_resource());
        for obj in items {
            let ns = obj.pointer("/metadata/namespace").and_then(Value::as_str).unwrap_or_default().to_string();
            if st.params.matches(&ns, &obj) {
                let rendered = st.render(core.present(&st.res, obj));
                st.pending.push_back(line("ADDED", &rendered));
            }
        }
        st.last_rv = at;
        // Upstream's watch cache ends the initial events with this bookmark for a watch that
        // asked for them and for one from resourceVersion 0 (both served from the cache).
        if st.params.bookmarks && (st.params.send_initial_events || rv == "0") {
            let b = st.bookmark(true);
            st.pending.push_back(b);
        }
    } else {
        st.last_rv = rv.parse().map_err(|_| ApiError::bad_request(format!("invalid resource version: {rv}")))?;
        st.drain();
    }
    Ok(futures::stream::unfold(st, |mut st| async move {
        loop {
            if let Some(b) = st.pending.pop_front() {
                return Some((b, st));
            }
            if st.done {
                return None;
            }
            st.drain();
            if !st.pending.is_empty() || st.done {
                continue;
            }
            let bookmarks = st.params.bookmarks;
            let next_bookmark = st.next_bookmark;
            tokio::select! {
                changed = st.rx.changed() => {
                    if changed.is_err() {
                        return None;
                    }
                }
                _ = tokio::time::sleep_until(st.deadline) => return None,
                _ = tokio::time::sleep_until(next_bookmark), if bookmarks => {
                    st.next_bookmark = Instant::now() + st.core.config.bookmark_interval;
                    let b = st.bookmark(false);
                    st.pending.push_back(b);
                }
            }
        }
    }))
}
