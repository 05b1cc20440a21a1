//! One shared cache per kind: kube-runtime's `watcher` (list + watch,
//! resume, relist on 410, backoff) feeding a store indexed by key, by uid and
//! by controller-owner uid. Every plugin that uses the kind shares it.
//!
//! kube-runtime's `reflector::Store` has no secondary indexes; this store is
//! the same idea (atomic replace on `InitDone`) plus the owner index the
//! reconcile driver needs, the uid index the expectations need, and change
//! handlers called synchronously with (old, new) so the queue mappers can
//! compare generations.
//!
//! Objects are kept compact ([`CachedObject`]): the JSON text the plugins
//! receive, serialized once per resourceVersion and shared with every call,
//! plus the few fields the indexes, mappers, expectations and the reconcile
//! driver read (so neither parses the text again per event or per call). A parsed `DynamicObject` costs
//! several times its text in heap (every map and string its own allocation),
//! and the text was serialized again for every child on every reconcile.
//! The indexes hold the entries themselves, looked up by the strings the
//! entry keeps, rather than copies of keys and uids.

use std::collections::{HashMap, HashSet, VecDeque};
use std::hash::BuildHasher;
use std::sync::{Arc, RwLock};

use hashbrown::HashTable;

use futures::StreamExt;
use kube::api::{Api, ApiResource, DynamicObject, TypeMeta};
use kube::runtime::WatchStreamExt;
use kube::runtime::watcher::{self, Event};
use tokio::sync::watch;

pub use super::cached::{CachedObject, ControllerRef, Fingerprint, Labels, ObjectKey};

/// Called with (old, new, origin) on every change the cache applies; `new`
/// is `None` on deletion.
pub type Handler = Arc<dyn Fn(Option<&CachedObject>, Option<&CachedObject>, Origin) + Send + Sync>;

/// Where a change the cache applies comes from: the controllers queue the
/// first list's objects below fresh changes (controller-runtime's
/// priority queue treats its informers' initial list the same way).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Origin {
    /// The first list of a watch: the state found at start-up, not news.
    InitialList,
    /// A watch event, or a difference a later relist found.
    Change,
}

/// Names a registered [`Handler`] so it can be removed again.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct HandlerId(u64);

type Entry = Arc<CachedObject>;

#[derive(Default)]
struct Inner {
    hasher: std::hash::RandomState,
    /// By namespace and name.
    objects: HashTable<Entry>,
    /// By uid.
    by_uid: HashTable<Entry>,
    /// Controller-owner uid → the objects it controls, by key order.
    by_controller: HashMap<Box<str>, Vec<Entry>>,
    /// Uids of recently deleted objects, so an expectation "the cache has
    /// seen my create" holds even if the object was deleted before the
    /// reconcile looked.
    tombstones: HashSet<String>,
    tomb_order: VecDeque<String>,
    /// The sum of the entries' [`CachedObject::retained_bytes`].
    bytes: usize,
}

/// How many deleted uids the cache remembers.
const TOMBSTONES: usize = 4096;

/// The order `controlled_by` and `in_namespace` list objects in.
fn by_key(a: &CachedObject, b: &CachedObject) -> std::cmp::Ordering {
    (a.namespace(), a.name()).cmp(&(b.namespace(), b.name()))
}

impl Inner {
    fn key_hash(&self, namespace: &str, name: &str) -> u64 {
        self.hasher.hash_one((namespace, name))
    }

    fn uid_hash(&self, uid: &str) -> u64 {
        self.hasher.hash_one(uid)
    }

    fn get(&self, key: &ObjectKey) -> Option<&Entry> {
        self.objects.find(self.key_hash(&key.namespace, &key.name), |o| o.is(key))
    }

    fn get_by_uid(&self, uid: &str) -> Option<&Entry> {
        self.by_uid.find(self.uid_hash(uid), |o| o.uid() == Some(uid))
    }

    fn bury(&mut self, uid: Option<&str>) {
        let Some(uid) = uid else {
            return;
        };
        if self.tombstones.insert(uid.to_string()) {
            self.tomb_order.push_back(uid.to_string());
            if self.tomb_order.len() > TOMBSTONES
                && let Some(oldest) = self.tomb_order.pop_front()
            {
                self.tombstones.remove(&oldest);
            }
        }
    }

    fn insert(&mut self, obj: Entry) -> Option<Entry> {
        let old = self.remove(&obj.key());
        let hasher = self.hasher.clone();
        if let Some(uid) = obj.uid() {
            let hash = self.uid_hash(uid);
            match self.by_uid.entry(hash, |o| o.uid() == Some(uid), |o| hasher.hash_one(o.uid().unwrap_or_default())) {
                hashbrown::hash_table::Entry::Occupied(mut e) => *e.get_mut() = obj.clone(),
                hashbrown::hash_table::Entry::Vacant(e) => {
                    e.insert(obj.clone());
                }
            }
        }
        if let Some(owner) = obj.controller() {
            let children = self.by_controller.entry(owner.uid.into()).or_default();
            let at = children.binary_search_by(|c| by_key(c, &obj)).unwrap_or_else(|at| at);
            children.insert(at, obj.clone());
        }
        let hash = self.key_hash(obj.namespace(), obj.name());
        self.bytes += obj.retained_bytes();
        self.objects.insert_unique(hash, obj, |o| hasher.hash_one((o.namespace(), o.name())));
        old
    }

    fn remove(&mut self, key: &ObjectKey) -> Option<Entry> {
        let hash = self.key_hash(&key.namespace, &key.name);
        let old = self.objects.find_entry(hash, |o| o.is(key)).ok()?.remove().0;
        self.bytes -= old.retained_bytes();
        // Another object may have taken the uid since (the index follows the newest).
        let uid_hash = old.uid().map(|uid| self.uid_hash(uid));
        if let Some(hash) = uid_hash
            && let Ok(e) = self.by_uid.find_entry(hash, |o| Arc::ptr_eq(o, &old))
        {
            e.remove();
        }
        if let Some(owner) = old.controller()
            && let Some(children) = self.by_controller.get_mut(owner.uid)
        {
            children.retain(|c| !Arc::ptr_eq(c, &old));
            if children.is_empty() {
                self.by_controller.remove(owner.uid);
            }
        }
        Some(old)
    }
}

/// kubectl's client-side apply keeps the whole applied object here.
pub const LAST_APPLIED: &str = "kubectl.kubernetes.io/last-applied-configuration";

/// Drops managedFields and kubectl's [`LAST_APPLIED`] annotation: nobody
/// downstream reads them, and they are often the largest part of an object
/// (controller-runtime's `TransformStripManagedFields`; published figures
/// are ~16 KiB per object untrimmed against ~6 KiB trimmed). Both would be
/// kept in memory and copied into every plugin call.
pub fn trim(obj: &mut DynamicObject) {
    obj.metadata.managed_fields = None;
    if let Some(annotations) = &mut obj.metadata.annotations {
        annotations.remove(LAST_APPLIED);
        if annotations.is_empty() {
            obj.metadata.annotations = None;
        }
    }
}

/// A cache of one kind.
pub struct KindCache {
    resource: ApiResource,
    namespaced: bool,
    inner: RwLock<Inner>,
    handlers: RwLock<Vec<(HandlerId, Handler)>>,
    next_handler: std::sync::atomic::AtomicU64,
    synced: watch::Sender<bool>,
    changes: watch::Sender<u64>,
    /// The highest resourceVersion of any object event applied (see
    /// [`KindCache::seen_revision`]).
    seen_revision: std::sync::atomic::AtomicU64,
}

impl crate::metrics::CacheProbe for KindCache {
    fn objects(&self) -> usize {
        self.len()
    }
    fn bytes(&self) -> usize {
        self.retained_bytes()
    }
}

impl std::fmt::Debug for KindCache {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("KindCache").field("kind", &self.resource.kind).finish()
    }
}

impl KindCache {
    pub fn new(resource: ApiResource, namespaced: bool) -> Self {
        Self {
            resource,
            namespaced,
            inner: RwLock::default(),
            handlers: RwLock::default(),
            next_handler: std::sync::atomic::AtomicU64::new(0),
            synced: watch::channel(false).0,
            changes: watch::channel(0).0,
            seen_revision: std::sync::atomic::AtomicU64::new(0),
        }
    }

    /// The highest resourceVersion among the objects and deletions this cache
    /// applied, read as a number (an etcd revision; 0 when none was). A
    /// sharded replica waits for it to reach the revision a handover wrote
    /// its children at ([`crate::shard::acknowledge::Gate`]).
    pub fn seen_revision(&self) -> u64 {
        self.seen_revision.load(std::sync::atomic::Ordering::Acquire)
    }

    fn saw(&self, resource_version: Option<&str>) {
        if let Some(rv) = resource_version.and_then(|rv| rv.parse::<u64>().ok()) {
            self.seen_revision.fetch_max(rv, std::sync::atomic::Ordering::AcqRel);
        }
    }

    pub fn resource(&self) -> &ApiResource {
        &self.resource
    }

    pub fn namespaced(&self) -> bool {
        self.namespaced
    }

    /// Registers a change handler (before the watch starts, to see the initial list).
    pub fn on_change(&self, handler: Handler) -> HandlerId {
        let id = HandlerId(self.next_handler.fetch_add(1, std::sync::atomic::Ordering::Relaxed));
        self.handlers.write().unwrap().push((id, handler));
        id
    }

    /// Unregisters a handler (a plugin that was stopped or replaced).
    pub fn remove_handler(&self, id: HandlerId) {
        self.handlers.write().unwrap().retain(|(h, _)| *h != id);
    }

    pub fn get(&self, key: &ObjectKey) -> Option<Arc<CachedObject>> {
        self.inner.read().unwrap().get(key).cloned()
    }

    pub fn get_by_uid(&self, uid: &str) -> Option<Arc<CachedObject>> {
        self.inner.read().unwrap().get_by_uid(uid).cloned()
    }

    /// Objects whose controller ownerReference has this uid, by key order.
    pub fn controlled_by(&self, owner_uid: &str) -> Vec<Arc<CachedObject>> {
        self.inner.read().unwrap().by_controller.get(owner_uid).cloned().unwrap_or_default()
    }

    /// The objects in `namespace` (`""`: cluster-scoped objects), by key order.
    pub fn in_namespace(&self, namespace: &str) -> Vec<Arc<CachedObject>> {
        let inner = self.inner.read().unwrap();
        let mut found: Vec<_> = inner.objects.iter().filter(|o| o.namespace() == namespace).cloned().collect();
        found.sort_by(|a, b| by_key(a, b));
        found
    }

    pub fn keys(&self) -> Vec<ObjectKey> {
        self.inner.read().unwrap().objects.iter().map(|o| o.key()).collect()
    }

    pub fn len(&self) -> usize {
        self.inner.read().unwrap().objects.len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The heap the cached objects hold, estimated from their sizes (see
    /// [`CachedObject::retained_bytes`]): the `host_cache_bytes` metric.
    pub fn retained_bytes(&self) -> usize {
        self.inner.read().unwrap().bytes
    }

    /// Whether the initial list has been applied: changes before it are
    /// start-up state and queue at low priority.
    fn is_synced(&self) -> bool {
        *self.synced.borrow()
    }

    /// Resolves once the initial list has been applied.
    pub async fn wait_synced(&self) {
        let mut rx = self.synced.subscribe();
        let _ = rx.wait_for(|s| *s).await;
    }

    /// A receiver that changes on every applied event (for expectation waits).
    pub fn subscribe_changes(&self) -> watch::Receiver<u64> {
        self.changes.subscribe()
    }

    /// Whether the cache has ever shown an object with this uid (present or
    /// deleted since).
    pub fn has_seen_uid(&self, uid: &str) -> bool {
        let inner = self.inner.read().unwrap();
        inner.get_by_uid(uid).is_some() || inner.tombstones.contains(uid)
    }

    /// Adds the type fields when a list left them out, and trims what only
    /// the API server and kubectl read ([`trim`]).
    fn with_types(&self, mut obj: DynamicObject) -> Arc<CachedObject> {
        trim(&mut obj);
        if obj.types.as_ref().is_none_or(|t| t.kind.is_empty()) {
            obj.types = Some(TypeMeta { api_version: self.resource.api_version.clone(), kind: self.resource.kind.clone() });
        }
        Arc::new(CachedObject::new(obj))
    }

    fn notify(&self, old: Option<&CachedObject>, new: Option<&CachedObject>, origin: Origin) {
        let handlers: Vec<Handler> = self.handlers.read().unwrap().iter().map(|(_, h)| h.clone()).collect();
        for h in handlers {
            h(old, new, origin);
        }
    }

    fn bump(&self) {
        self.changes.send_modify(|n| *n += 1);
    }

    /// Applies an added or modified object.
    pub fn apply(&self, obj: DynamicObject) {
        let obj = self.with_types(obj);
        self.saw(obj.resource_version());
        let old = self.inner.write().unwrap().insert(obj.clone());
        self.bump();
        self.notify(old.as_deref(), Some(&*obj), Origin::Change);
    }

    /// Applies a deletion.
    pub fn delete(&self, obj: DynamicObject) {
        let key = ObjectKey::of(&obj);
        let old = {
            let mut inner = self.inner.write().unwrap();
            inner.bury(obj.metadata.uid.as_deref());
            inner.remove(&key)
        };
        self.saw(obj.metadata.resource_version.as_deref());
        self.bump();
        let old = old.unwrap_or_else(|| self.with_types(obj));
        self.notify(Some(&*old), None, Origin::Change);
    }

    /// Declares the cache synced, for a cache fed by something other than
    /// [`run`](Self::run) (a relay, a test): controllers start their workers
    /// only once every cache they read is synced.
    pub fn mark_synced(&self) {
        self.synced.send_replace(true);
    }

    /// Replaces everything in `scope` (a namespace, or `None` for all) with a
    /// fresh list, reporting the differences as changes: from the
    /// [`Origin::InitialList`] until the cache is marked synced.
    pub fn replace(&self, scope: Option<&str>, objects: Vec<DynamicObject>) {
        let origin = if self.is_synced() { Origin::Change } else { Origin::InitialList };
        self.replace_compact(scope, objects.into_iter().map(|o| self.with_types(o)).collect(), origin);
    }

    /// [`replace`](Self::replace) with objects already in their compact form
    /// (the watch converts each listed object as it arrives, so a large
    /// initial list never exists as parsed trees all at once).
    fn replace_compact(&self, scope: Option<&str>, fresh: Vec<Arc<CachedObject>>, origin: Origin) {
        for obj in &fresh {
            self.saw(obj.resource_version());
        }
        let mut changes = Vec::new();
        {
            let mut inner = self.inner.write().unwrap();
            let fresh_keys: HashSet<(&str, &str)> = fresh.iter().map(|o| (o.namespace(), o.name())).collect();
            let gone: Vec<ObjectKey> = inner
                .objects
                .iter()
                .filter(|o| scope.is_none_or(|ns| o.namespace() == ns) && !fresh_keys.contains(&(o.namespace(), o.name())))
                .map(|o| o.key())
                .collect();
            for key in gone {
                if let Some(old) = inner.remove(&key) {
                    inner.bury(old.uid());
                    changes.push((Some(old), None));
                }
            }
            for obj in fresh {
                let old = inner.insert(obj.clone());
                let unchanged = old.as_ref().is_some_and(|o| o.resource_version() == obj.resource_version());
                if !unchanged {
                    changes.push((old, Some(obj)));
                }
            }
        }
        self.bump();
        for (old, new) in changes {
            self.notify(old.as_deref(), new.as_deref(), origin);
        }
    }

    /// Runs the watches that fill this cache until the task is dropped:
    /// one watcher over all namespaces, or one per namespace in `namespaces`.
    pub async fn run(self: Arc<Self>, client: kube::Client, namespaces: Vec<String>, label_selector: Option<String>) {
        let scopes: Vec<Option<String>> =
            if namespaces.is_empty() || !self.namespaced { vec![None] } else { namespaces.into_iter().map(Some).collect() };
        let remaining = Arc::new(std::sync::atomic::AtomicUsize::new(scopes.len()));
        let tasks = scopes.into_iter().map(|scope| {
            let this = self.clone();
            let client = client.clone();
            let selector = label_selector.clone();
            let remaining = remaining.clone();
            async move { this.run_scope(client, scope, selector, remaining).await }
        });
        futures::future::join_all(tasks).await;
    }

    async fn run_scope(&self, client: kube::Client, scope: Option<String>, selector: Option<String>, remaining: Arc<std::sync::atomic::AtomicUsize>) {
        let api: Api<DynamicObject> = match &scope {
            Some(ns) => Api::namespaced_with(client, ns, &self.resource),
            None => Api::all_with(client, &self.resource),
        };
        let mut config = watcher::Config::default();
        if let Some(s) = &selector {
            config = config.labels(s);
        }
        let mut counted = false;
        let mut buffer = Vec::new();
        let mut stream = watcher::watcher(api, config).default_backoff().boxed();
        while let Some(event) = stream.next().await {
            match event {
                Ok(Event::Init) => buffer.clear(),
                Ok(Event::InitApply(obj)) => buffer.push(self.with_types(obj)),
                Ok(Event::InitDone) => {
                    // This scope's first list is start-up state; a relist (after
                    // a 410 or a broken watch) reports what changed meanwhile.
                    let origin = if counted { Origin::Change } else { Origin::InitialList };
                    self.replace_compact(scope.as_deref(), std::mem::take(&mut buffer), origin);
                    if !counted {
                        counted = true;
                        if remaining.fetch_sub(1, std::sync::atomic::Ordering::SeqCst) == 1 {
                            self.synced.send_replace(true);
                        }
                    }
                }
                Ok(Event::Apply(obj)) => self.apply(obj),
                Ok(Event::Delete(obj)) => self.delete(obj),
                Err(e) => {
                    tracing::warn!(kind = %self.resource.kind, error = %crate::error_chain(&e), "watch failed; retrying")
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn obj(name: &str, uid: &str, owner: Option<&str>, rv: &str) -> DynamicObject {
        let mut v = json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "namespace": "ns", "uid": uid, "resourceVersion": rv}});
        if let Some(o) = owner {
            v["metadata"]["ownerReferences"] = json!([{"apiVersion": "x/v1", "kind": "P", "name": "p", "uid": o, "controller": true}]);
        }
        serde_json::from_value(v).unwrap()
    }

    fn cache() -> KindCache {
        KindCache::new(ApiResource::erase::<k8s_openapi::api::core::v1::Pod>(&()), true)
    }

    #[test]
    fn children_are_indexed_by_their_controller_uid() {
        let c = cache();
        c.apply(obj("a", "1", Some("p1"), "1"));
        c.apply(obj("b", "2", Some("p1"), "2"));
        c.apply(obj("c", "3", Some("p2"), "3"));
        c.apply(obj("d", "4", None, "4"));
        let names: Vec<_> = c.controlled_by("p1").iter().map(|o| o.name().to_string()).collect();
        assert_eq!(names, ["a", "b"]);
        c.apply(obj("b", "2", None, "5"));
        assert_eq!(c.controlled_by("p1").len(), 1, "an orphaned child leaves the owner's index");
        assert_eq!(c.get_by_uid("2").unwrap().resource_version(), Some("5"));
    }

    #[test]
    fn deleted_object_leaves_the_store_and_its_indexes() {
        let c = cache();
        c.apply(obj("a", "1", Some("p1"), "1"));
        c.delete(obj("a", "1", Some("p1"), "2"));
        assert!(c.get(&ObjectKey::new("ns", "a")).is_none());
        assert!(c.get_by_uid("1").is_none());
        assert!(c.controlled_by("p1").is_empty());
        assert!(c.has_seen_uid("1"), "a deleted uid is remembered for expectations");
        assert!(!c.has_seen_uid("never"));
        assert_eq!(c.seen_revision(), 2, "a deletion's resourceVersion counts as seen");
    }

    #[test]
    fn managed_fields_and_the_last_applied_annotation_are_not_kept() {
        let c = cache();
        let mut o = obj("a", "1", None, "1");
        o.metadata.managed_fields = Some(vec![Default::default()]);
        o.metadata.annotations =
            Some(std::collections::BTreeMap::from([(LAST_APPLIED.to_string(), "{}".to_string()), ("mine".to_string(), "x".to_string())]));
        c.apply(o);
        let kept = c.get(&ObjectKey::new("ns", "a")).unwrap().object().metadata;
        assert!(kept.managed_fields.is_none());
        assert_eq!(kept.annotations, Some(std::collections::BTreeMap::from([("mine".to_string(), "x".to_string())])), "other annotations stay");
    }

    #[test]
    fn the_cache_counts_the_bytes_its_objects_hold() {
        let c = cache();
        assert_eq!(c.retained_bytes(), 0);
        c.apply(obj("a", "1", Some("p"), "1"));
        let one = c.get(&ObjectKey::new("ns", "a")).unwrap();
        assert_eq!(c.retained_bytes(), one.retained_bytes());
        assert!(one.retained_bytes() > one.json().len(), "the text and the entry");
        c.apply(obj("b", "2", None, "2"));
        c.apply(obj("a", "1", Some("p"), "3"));
        let sum: usize = c.keys().iter().map(|k| c.get(k).unwrap().retained_bytes()).sum();
        assert_eq!(c.retained_bytes(), sum, "a replaced entry is subtracted");
        c.delete(obj("a", "1", Some("p"), "4"));
        c.replace(None, vec![]);
        assert_eq!(c.retained_bytes(), 0);
    }

    #[test]
    fn a_relist_reports_only_what_changed() {
        let c = cache();
        let seen = Arc::new(std::sync::Mutex::new(Vec::new()));
        let s = seen.clone();
        c.on_change(Arc::new(move |old, new, _| {
            let name = new.or(old).unwrap().name().to_string();
            s.lock().unwrap().push((name, new.is_some()));
        }));
        c.replace(None, vec![obj("a", "1", None, "1"), obj("b", "2", None, "2")]);
        seen.lock().unwrap().clear();
        c.replace(None, vec![obj("a", "1", None, "1"), obj("c", "3", None, "3")]);
        let mut got = seen.lock().unwrap().clone();
        got.sort();
        assert_eq!(got, [("b".to_string(), false), ("c".to_string(), true)]);
    }

    #[test]
    fn the_first_list_is_reported_as_start_up_state_and_later_changes_as_changes() {
        let c = cache();
        let seen = Arc::new(std::sync::Mutex::new(Vec::new()));
        let s = seen.clone();
        c.on_change(Arc::new(move |old, new, origin| {
            s.lock().unwrap().push((new.or(old).unwrap().name().to_string(), origin));
        }));
        c.replace(None, vec![obj("a", "1", None, "1")]);
        c.mark_synced();
        c.apply(obj("b", "2", None, "2"));
        c.replace(None, vec![obj("a", "1", None, "3"), obj("b", "2", None, "2")]);
        c.delete(obj("b", "2", None, "4"));
        let got = seen.lock().unwrap().clone();
        let want = [("a", Origin::InitialList), ("b", Origin::Change), ("a", Origin::Change), ("b", Origin::Change)];
        assert_eq!(got, want.map(|(n, o)| (n.to_string(), o)));
    }

    #[test]
    fn objects_listed_without_type_fields_get_them_from_the_resource() {
        let c = cache();
        let mut o = obj("a", "1", None, "1");
        o.types = None;
        c.apply(o);
        let got = c.get(&ObjectKey::new("ns", "a")).unwrap();
        assert_eq!(serde_json::from_str::<serde_json::Value>(got.json()).unwrap()["kind"], "Pod");
    }
}
