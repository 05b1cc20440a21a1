//! Kubernetes Events on parents, written to `events.k8s.io/v1` with
//! `reportingController: operator-host/<plugin>`, deduplicated as client-go's
//! events recorder does: a repeat of the same (object, type, reason, note)
//! patches `series.count` and `series.lastObservedTime` on the Event already
//! written instead of creating another.

use std::collections::HashMap;
use std::sync::Mutex;

use k8s_openapi::api::events::v1::Event;
use kube::api::{ApiResource, Patch, PatchParams, PostParams};
use serde_json::json;

use crate::api_error::ApiErrorClass;
use crate::clock::{SharedClock, micro_timestamp};

/// The object an Event is about.
#[derive(Clone, Debug)]
pub struct Regarding {
    pub api_version: String,
    pub kind: String,
    pub namespace: String,
    pub name: String,
    pub uid: String,
}

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

/// Records Events for one plugin.
pub struct Recorder {
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
        f.debug_struct("Recorder").field("controller", &self.controller).finish()
    }
}

impl Recorder {
    pub fn new(client: kube::Client, plugin: &str, clock: SharedClock) -> Self {
        let host = std::env::var("HOSTNAME").ok().filter(|h| !h.is_empty()).unwrap_or_else(|| "local".into());
        Self {
            client,
            controller: format!("operator-host/{plugin}"),
            instance: format!("operator-host/{plugin}-{host}"),
            clock,
            seen: Mutex::new((0, HashMap::new())),
            resource: ApiResource::erase::<Event>(&()),
        }
    }

    /// `reportingController` of the Events this recorder writes.
    pub fn controller(&self) -> &str {
        &self.controller
    }

    /// Records one Event (type `Normal` or `Warning`).
    pub async fn publish(&self, regarding: &Regarding, event_type: &str, reason: &str, note: &str) -> kube::Result<()> {
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
    fn target<'a>(&'a self, namespace: &'a str) -> crate::api_answer::Target<'a> {
        crate::api_answer::Target { client: &self.client, resource: &self.resource, namespace }
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
