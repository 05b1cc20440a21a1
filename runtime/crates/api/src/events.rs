//! Kubernetes Events on parents, written to `events.k8s.io/v1` with
//! `reportingController: operator-host/<plugin>`, deduplicated as client-go's
//! events recorder does: a repeat of the same (object, type, reason, note)
//! patches `series.count` and `series.lastObservedTime` on the Event already
//! written instead of creating another.
//!
//! A reconcile does not wait for its Events: [`Recorder::record`] puts them
//! on a bounded queue that one background task per recorder writes in
//! order, as client-go's broadcaster does (its queue holds 1,000 too). When
//! the queue is full the Event is dropped and counted, never waited for.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, OnceLock};

use k8s_openapi::api::events::v1::Event;
use kube::api::{ApiResource, Patch, PatchParams, PostParams};
use serde_json::json;

use crate::api_error::ApiErrorClass;
use crate::clock::{SharedClock, micro_timestamp};

/// The object an Event is about (its `regarding`).
pub use crate::object_reference::ObjectReference as Regarding;

#[derive(Clone, Debug, PartialEq, Eq, Hash)]
struct Key {
    uid: String,
    event_type: String,
    reason: String,
    note: String,
}

#[derive(Clone, Debug)]
struct Seen {
    name: String,
    namespace: String,
    count: i32,
}

/// Entries kept for deduplication; past this the oldest half is dropped
/// (client-go keeps an LRU of 4096).
const CACHE_SIZE: usize = 4096;
/// The note is truncated to what the API server accepts (1 kB).
const NOTE_MAX: usize = 1024;

/// Events waiting for the background sender; past this they are dropped
/// (client-go's broadcaster queues 1,000).
const QUEUE: usize = 1000;

/// Records Events for one plugin.
pub struct Recorder {
    writer: Arc<Writer>,
    /// The background sender's queue, made with the first [`Recorder::record`]
    /// (a recorder may be built outside a tokio runtime).
    queue: OnceLock<tokio::sync::mpsc::Sender<Pending>>,
    /// Events [`Recorder::record`] dropped because the queue was full.
    dropped: prometheus_client::metrics::counter::Counter,
}

/// An Event waiting in the queue.
struct Pending {
    regarding: Regarding,
    event_type: &'static str,
    reason: String,
    note: String,
}

/// Writes Events and remembers them for deduplication.
struct Writer {
    client: kube::Client,
    controller: String,
    instance: String,
    clock: SharedClock,
    seen: Mutex<SeenCache>,
    /// `events.k8s.io/v1` Events.
    resource: ApiResource,
}

/// (use counter, key → (last use, what was written)).
type SeenCache = (u64, HashMap<Key, (u64, Seen)>);

impl std::fmt::Debug for Recorder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Recorder").field("controller", &self.writer.controller).finish()
    }
}

impl Recorder {
    pub fn new(client: kube::Client, plugin: &str, clock: SharedClock) -> Self {
        let host = std::env::var("HOSTNAME").ok().filter(|h| !h.is_empty()).unwrap_or_else(|| "local".into());
        let writer = Writer {
            client,
            controller: format!("operator-host/{plugin}"),
            instance: format!("operator-host/{plugin}-{host}"),
            clock,
            seen: Mutex::new((0, HashMap::new())),
            resource: ApiResource::erase::<Event>(&()),
        };
        Self { writer: Arc::new(writer), queue: OnceLock::new(), dropped: Default::default() }
    }

    /// Counts the Events dropped on a full queue in `counter` (a metric).
    pub fn count_dropped_in(mut self, counter: prometheus_client::metrics::counter::Counter) -> Self {
        self.dropped = counter;
        self
    }

    /// `reportingController` of the Events this recorder writes.
    pub fn controller(&self) -> &str {
        &self.writer.controller
    }

    /// Events dropped so far because the queue was full.
    pub fn dropped(&self) -> u64 {
        self.dropped.get()
    }

    /// Queues one Event (type `Normal` or `Warning`) for the background
    /// sender and returns at once; a full queue drops it (counted). Must be
    /// called inside a tokio runtime.
    pub fn record(&self, regarding: &Regarding, event_type: &'static str, reason: &str, note: &str) {
        let queue = self.queue.get_or_init(|| {
            let (tx, rx) = tokio::sync::mpsc::channel(QUEUE);
            tokio::spawn(send(self.writer.clone(), rx));
            tx
        });
        let pending = Pending { regarding: regarding.clone(), event_type, reason: reason.into(), note: note.into() };
        if queue.try_send(pending).is_err() {
            self.dropped.inc();
            tracing::debug!(controller = %self.writer.controller, reason, "event queue full: event dropped");
        }
    }

    /// Writes one Event (type `Normal` or `Warning`) now and waits for the
    /// answer: for callers off the reconcile path that report the outcome.
    pub async fn publish(&self, regarding: &Regarding, event_type: &str, reason: &str, note: &str) -> kube::Result<()> {
        self.writer.publish(regarding, event_type, reason, note).await
    }
}

/// The background sender: writes queued Events in order until the recorder
/// (the queue's only sender) is dropped.
async fn send(writer: Arc<Writer>, mut queue: tokio::sync::mpsc::Receiver<Pending>) {
    while let Some(p) = queue.recv().await {
        if let Err(e) = writer.publish(&p.regarding, p.event_type, &p.reason, &p.note).await {
            tracing::warn!(controller = %writer.controller, reason = p.reason, error = %crate::error_chain(&e), "could not record event");
        }
    }
}

impl Writer {
    async fn publish(&self, regarding: &Regarding, event_type: &str, reason: &str, note: &str) -> kube::Result<()> {
        let mut note = note.to_string();
        if note.len() > NOTE_MAX {
            let mut cut = NOTE_MAX - 3;
            while !note.is_char_boundary(cut) {
                cut -= 1;
            }
            note.truncate(cut);
            note.push_str("...");
        }
        let key = Key { uid: regarding.uid.clone(), event_type: event_type.into(), reason: reason.into(), note: note.clone() };
        let now = micro_timestamp(self.clock.now());
        let previous = self.seen.lock().unwrap().1.get(&key).map(|(_, s)| s.clone());
        if let Some(seen) = previous {
            let count = seen.count + 1;
            let patch = json!({"series": {"count": count, "lastObservedTime": now}});
            match self.target(&seen.namespace).patch(&seen.name, None, &PatchParams::default(), &Patch::Merge(&patch)).await {
                Ok(_) => {
                    self.remember(key, Seen { count, ..seen });
                    return Ok(());
                }
                Err(e) if ApiErrorClass::of(&e) == ApiErrorClass::NotFound => {}
                Err(e) => return Err(e),
            }
        }
        let namespace = if regarding.namespace.is_empty() { "default".to_string() } else { regarding.namespace.clone() };
        let mut nanos = self.clock.now().timestamp_nanos_opt().unwrap_or_default();
        let mut attempts = 0;
        loop {
            let name = format!("{}.{:x}", regarding.name, nanos);
            let event = self.event(&name, &namespace, &now, regarding, event_type, reason, &note);
            match self.target(&namespace).create(&PostParams::default(), &event).await {
                Ok(_) => {
                    self.remember(key, Seen { name, namespace, count: 1 });
                    return Ok(());
                }
                // The name comes from the clock, which need not have moved since the
                // last Event (virtual time stands still during a reconcile): next nanosecond.
                Err(e) if ApiErrorClass::of(&e) == ApiErrorClass::AlreadyExists && attempts < 16 => {
                    attempts += 1;
                    nanos += 1;
                }
                Err(e) => return Err(e),
            }
        }
    }

    /// Where this recorder's Events in `namespace` are written (the
    /// answers are read for nothing but success: [`crate::api_answer`]).
    fn target<'a>(&'a self, namespace: &'a str) -> crate::api_answer::ResourceEndpoint<'a> {
        crate::api_answer::ResourceEndpoint { client: &self.client, resource: &self.resource, namespace }
    }

    #[allow(clippy::too_many_arguments)]
    fn event(&self, name: &str, namespace: &str, now: &str, regarding: &Regarding, event_type: &str, reason: &str, note: &str) -> Event {
        serde_json::from_value(json!({
            "metadata": {"name": name, "namespace": namespace},
            "eventTime": now,
            "reportingController": self.controller,
            "reportingInstance": self.instance,
            "action": "Reconcile",
            "reason": reason,
            "type": event_type,
            "note": note,
            "regarding": {
                "apiVersion": regarding.api_version,
                "kind": regarding.kind,
                "namespace": regarding.namespace,
                "name": regarding.name,
                "uid": regarding.uid,
            },
        }))
        .expect("a valid Event")
    }

    fn remember(&self, key: Key, seen: Seen) {
        let mut guard = self.seen.lock().unwrap();
        let (tick, map) = &mut *guard;
        *tick += 1;
        map.insert(key, (*tick, seen));
        if map.len() > CACHE_SIZE {
            let mut ticks: Vec<u64> = map.values().map(|(t, _)| *t).collect();
            ticks.sort_unstable();
            let cutoff = ticks[ticks.len() / 2];
            map.retain(|_, (t, _)| *t > cutoff);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn regarding() -> Regarding {
        Regarding { api_version: "v1".into(), kind: "ConfigMap".into(), namespace: "default".into(), name: "c".into(), uid: "u".into() }
    }

    /// On a current-thread runtime the sender cannot run before the test
    /// yields, so the queue fills and what does not fit is dropped, counted,
    /// and `record` never waits.
    #[tokio::test]
    async fn a_full_queue_drops_and_counts_instead_of_waiting() {
        let config = kube::Config::new("http://127.0.0.1:9".parse().unwrap());
        let client = kube::Client::try_from(config).unwrap();
        let counter = prometheus_client::metrics::counter::Counter::default();
        let recorder = Recorder::new(client, "test", Arc::new(crate::clock::SystemClock)).count_dropped_in(counter.clone());
        for i in 0..QUEUE + 5 {
            recorder.record(&regarding(), "Normal", "Tick", &format!("tick {i}"));
        }
        assert_eq!(recorder.dropped(), 5);
        assert_eq!(counter.get(), 5, "the metric counts the same drops");
    }
}
