//! The object store: JSON objects keyed by (group, resource, namespace, name), one global
//! monotonically increasing resourceVersion, and a bounded window of past events that watches
//! resume from.
//!
//! Every write goes through [`Store::commit`], a compare-and-swap on the object's current
//! resourceVersion, so the REST layer can compute new objects outside the lock (admission,
//! validation) and retry on a lost race, as upstream's `GuaranteedUpdate` does. Persistence
//! plugs in behind [`Backend`]: it sees every committed event in order and can seed the store at
//! start; the in-memory default ([`NullBackend`]) keeps nothing.

use crate::resources::GroupResource;
use serde_json::Value;
use std::collections::{BTreeMap, VecDeque};
use std::sync::{Arc, Mutex};

/// Where an object lives.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ObjectKey {
    /// Group and plural resource.
    pub gr: GroupResource,
    /// Namespace; empty for cluster-scoped objects.
    pub namespace: String,
    /// Object name.
    pub name: String,
}

/// Watch event type.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EventType {
    /// Object created.
    Added,
    /// Object changed.
    Modified,
    /// Object removed.
    Deleted,
}

impl EventType {
    /// Wire name.
    pub fn as_str(self) -> &'static str {
        match self {
            EventType::Added => "ADDED",
            EventType::Modified => "MODIFIED",
            EventType::Deleted => "DELETED",
        }
    }
}

/// A committed change.
#[derive(Debug, Clone)]
pub struct Event {
    /// resourceVersion of this change.
    pub rv: u64,
    /// What happened.
    pub kind: EventType,
    /// Where.
    pub key: ObjectKey,
    /// The object after the change (for deletes: the last state, stamped with the delete's rv).
    pub object: Arc<Value>,
    /// The object before a modification (watches use it to turn selector moves into
    /// ADDED/DELETED as upstream's watch cache does).
    pub prev: Option<Arc<Value>>,
}

/// What a commit does to a key.
#[derive(Debug, Clone)]
pub enum Write {
    /// Create or replace with this object (its resourceVersion is assigned by the store).
    Put(Value),
    /// Remove the object.
    Delete,
}

/// Why a commit failed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum StoreError {
    /// The object exists although the caller expected it not to.
    #[error("object already exists")]
    AlreadyExists,
    /// The object does not exist although the caller expected it to.
    #[error("object not found")]
    NotFound,
    /// The object's resourceVersion moved since the caller read it.
    #[error("resource version changed: expected {expected}, found {found}")]
    Conflict {
        /// What the caller read.
        expected: u64,
        /// What is there now.
        found: u64,
    },
    /// The backend could not persist the change; nothing was committed.
    #[error("the change could not be persisted: {0}")]
    Persist(String),
}

/// A backend's failure to persist an event.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct BackendError(pub String);

/// Persistence hook ([`crate::persist::RedbBackend`] keeps a data directory): sees every event
/// in commit order and may seed objects at start.
pub trait Backend: Send + Sync + 'static {
    /// Called under the store lock for every event, in order, *before* the store applies it: an
    /// `Ok` means the event is durable; an error refuses the commit (the caller answers 500) and
    /// leaves the store unchanged.
    fn record(&self, event: &Event) -> Result<(), BackendError>;
    /// Objects to load at start, with the resourceVersion to continue from.
    fn load(&self) -> (Vec<(ObjectKey, Value)>, u64) {
        (vec![], 0)
    }
}

/// Keeps nothing: a purely in-memory cluster.
#[derive(Debug, Default)]
pub struct NullBackend;

impl Backend for NullBackend {
    fn record(&self, _event: &Event) -> Result<(), BackendError> {
        Ok(())
    }
}

struct State {
    /// Shared with the events that wrote them: a commit, a list or a watch event clones an
    /// `Arc`, not the object's tree (deep clones of every listed object were most of the
    /// simulated cluster's CPU time).
    objects: BTreeMap<ObjectKey, Arc<Value>>,
    rv: u64,
    events: VecDeque<Event>,
    /// Oldest resourceVersion a watch can resume from (events after it are all retained).
    window_start: u64,
}

/// The store. Cheap to share behind an `Arc`.
pub struct Store {
    state: Mutex<State>,
    window: usize,
    backend: Box<dyn Backend>,
    notify: tokio::sync::watch::Sender<u64>,
}

/// Read the resourceVersion an object carries (0 if absent or malformed).
pub fn object_rv(obj: &Value) -> u64 {
    obj.pointer("/metadata/resourceVersion").and_then(Value::as_str).and_then(|s| s.parse().ok()).unwrap_or(0)
}

impl Store {
    /// A store retaining `window` events for watch resumption.
    pub fn new(window: usize, backend: Box<dyn Backend>) -> Self {
        let (objects, rv) = backend.load();
        let (notify, _) = tokio::sync::watch::channel(rv);
        Store {
            state: Mutex::new(State {
                objects: objects.into_iter().map(|(k, v)| (k, Arc::new(v))).collect(),
                rv,
                events: VecDeque::new(),
                window_start: rv,
            }),
            window: window.max(1),
            backend,
            notify,
        }
    }

    /// The current (latest) resourceVersion.
    pub fn current_rv(&self) -> u64 {
        self.state.lock().unwrap().rv
    }

    /// One object.
    pub fn get(&self, key: &ObjectKey) -> Option<Value> {
        self.state.lock().unwrap().objects.get(key).map(|v| Value::clone(v))
    }

    /// One object, shared (no copy), for readers that only look.
    pub fn get_shared(&self, key: &ObjectKey) -> Option<Arc<Value>> {
        self.state.lock().unwrap().objects.get(key).cloned()
    }

    /// All objects of a resource (in one namespace, or all), sorted by namespace then name, and
    /// the resourceVersion the snapshot is consistent at.
    pub fn list(&self, gr: &GroupResource, namespace: Option<&str>) -> (Vec<Value>, u64) {
        let (items, rv) = self.list_shared(gr, namespace);
        (items.into_iter().map(Arc::unwrap_or_clone).collect(), rv)
    }

    /// [`list`](Self::list) without copying the objects, for readers that only look.
    pub fn list_shared(&self, gr: &GroupResource, namespace: Option<&str>) -> (Vec<Arc<Value>>, u64) {
        let st = self.state.lock().unwrap();
        // Keys sort by (gr, namespace, name): walk only this resource's (and namespace's) range.
        let start = ObjectKey { gr: gr.clone(), namespace: namespace.unwrap_or_default().to_string(), name: String::new() };
        let items = st
            .objects
            .range(start..)
            .take_while(|(k, _)| &k.gr == gr && namespace.is_none_or(|ns| k.namespace == ns))
            .map(|(_, v)| v.clone())
            .collect();
        (items, st.rv)
    }

    /// Keys of all objects in a namespace (any resource).
    pub fn keys_in_namespace(&self, namespace: &str) -> Vec<ObjectKey> {
        let st = self.state.lock().unwrap();
        st.objects.keys().filter(|k| k.namespace == namespace).cloned().collect()
    }

    /// Compare-and-swap: apply `write` to `key` if the object's current resourceVersion is
    /// `expected` (`None` = must not exist). Returns the committed event.
    pub fn commit(&self, key: &ObjectKey, expected: Option<u64>, write: Write) -> Result<Event, StoreError> {
        let mut st = self.state.lock().unwrap();
        // One lookup: the current object decides the check and is the event's `prev`.
        let prev = st.objects.get(key).cloned();
        let current = prev.as_deref().map(object_rv);
        match (expected, current) {
            (None, Some(_)) => return Err(StoreError::AlreadyExists),
            (Some(_), None) => return Err(StoreError::NotFound),
            (Some(e), Some(c)) if e != c => {
                return Err(StoreError::Conflict { expected: e, found: c });
            }
            _ => {}
        }
        let rv = st.rv + 1;
        // Build the event without touching the state, persist it, then apply it: a refused
        // write leaves memory and disk as they were.
        let event = match write {
            Write::Put(mut obj) => {
                set_rv(&mut obj, rv);
                let kind = if current.is_some() { EventType::Modified } else { EventType::Added };
                Event { rv, kind, key: key.clone(), object: Arc::new(obj), prev }
            }
            Write::Delete => {
                let mut obj = prev.as_deref().cloned().expect("checked above");
                set_rv(&mut obj, rv);
                Event { rv, kind: EventType::Deleted, key: key.clone(), object: Arc::new(obj), prev: None }
            }
        };
        self.backend.record(&event).map_err(|e| StoreError::Persist(e.0))?;
        st.rv = rv;
        match event.kind {
            EventType::Deleted => {
                st.objects.remove(key);
            }
            _ => {
                st.objects.insert(key.clone(), event.object.clone());
            }
        }
        st.events.push_back(event.clone());
        while st.events.len() > self.window {
            let old = st.events.pop_front().expect("non-empty");
            st.window_start = old.rv;
        }
        drop(st);
        self.notify.send_replace(rv);
        Ok(event)
    }

    /// Events with rv > `since` for a resource and the store's current resourceVersion, or
    /// `Err(oldest)` if `since` is older than the retained window (the caller answers 410).
    pub fn events_since(&self, gr: &GroupResource, since: u64) -> Result<(Vec<Event>, u64), u64> {
        let st = self.state.lock().unwrap();
        if since < st.window_start {
            return Err(st.window_start);
        }
        // Events are sorted by rv; skip the ones already seen.
        let start = st.events.partition_point(|e| e.rv <= since);
        Ok((st.events.iter().skip(start).filter(|e| &e.key.gr == gr).cloned().collect(), st.rv))
    }

    /// Events of every resource with rv > `since`, or `Err(oldest)` if `since` is older than the
    /// retained window (controllers next to the server use it to skip passes nothing concerns).
    pub fn all_events_since(&self, since: u64) -> Result<Vec<Event>, u64> {
        let st = self.state.lock().unwrap();
        if since < st.window_start {
            return Err(st.window_start);
        }
        let start = st.events.partition_point(|e| e.rv <= since);
        Ok(st.events.iter().skip(start).cloned().collect())
    }

    /// All objects of a resource plus the current resourceVersion, atomically (watch start).
    pub fn snapshot(&self, gr: &GroupResource) -> (Vec<Value>, u64) {
        self.list(gr, None)
    }

    /// A receiver that changes whenever a commit happens (value: the new resourceVersion).
    pub fn subscribe(&self) -> tokio::sync::watch::Receiver<u64> {
        self.notify.subscribe()
    }

    /// The oldest resourceVersion a watch may resume from.
    pub fn window_start(&self) -> u64 {
        self.state.lock().unwrap().window_start
    }
}

fn set_rv(obj: &mut Value, rv: u64) {
    if let Some(meta) = obj.get_mut("metadata").and_then(Value::as_object_mut) {
        meta.insert("resourceVersion".into(), Value::String(rv.to_string()));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn key(name: &str) -> ObjectKey {
        ObjectKey { gr: GroupResource { group: "".into(), resource: "configmaps".into() }, namespace: "default".into(), name: name.into() }
    }

    #[test]
    fn commits_assign_increasing_resource_versions() {
        let s = Store::new(10, Box::new(NullBackend));
        let a = s.commit(&key("a"), None, Write::Put(json!({"metadata": {"name": "a"}}))).unwrap();
        let b = s.commit(&key("a"), Some(a.rv), Write::Put(json!({"metadata": {"name": "a"}}))).unwrap();
        assert!(b.rv > a.rv);
        assert_eq!(object_rv(&s.get(&key("a")).unwrap()), b.rv);
    }

    #[test]
    fn stale_compare_and_swap_is_refused() {
        let s = Store::new(10, Box::new(NullBackend));
        let a = s.commit(&key("a"), None, Write::Put(json!({"metadata": {}}))).unwrap();
        s.commit(&key("a"), Some(a.rv), Write::Put(json!({"metadata": {}}))).unwrap();
        assert!(matches!(s.commit(&key("a"), Some(a.rv), Write::Delete), Err(StoreError::Conflict { .. })));
        assert_eq!(s.commit(&key("a"), None, Write::Delete).unwrap_err(), StoreError::AlreadyExists);
    }

    struct Refusing;

    impl Backend for Refusing {
        fn record(&self, _event: &Event) -> Result<(), BackendError> {
            Err(BackendError("disk full".into()))
        }
    }

    #[test]
    fn a_write_the_backend_refuses_is_not_applied() {
        let s = Store::new(10, Box::new(Refusing));
        let err = s.commit(&key("a"), None, Write::Put(json!({"metadata": {}}))).unwrap_err();
        assert_eq!(err, StoreError::Persist("disk full".into()));
        assert!(s.get(&key("a")).is_none());
        assert_eq!(s.current_rv(), 0);
        assert!(s.all_events_since(0).unwrap().is_empty());
    }

    #[test]
    fn events_older_than_the_window_are_expired() {
        let s = Store::new(2, Box::new(NullBackend));
        for n in ["a", "b", "c", "d"] {
            s.commit(&key(n), None, Write::Put(json!({"metadata": {}}))).unwrap();
        }
        assert!(s.events_since(&key("a").gr, 1).is_err());
        assert_eq!(s.events_since(&key("a").gr, 2).unwrap().0.len(), 2);
    }
}
