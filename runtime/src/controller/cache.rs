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

use std::collections::{BTreeSet, HashMap, HashSet, VecDeque};
use std::sync::{Arc, RwLock};

use futures::StreamExt;
use kube::api::{Api, ApiResource, DynamicObject, TypeMeta};
use kube::runtime::WatchStreamExt;
use kube::runtime::watcher::{self, Event};
use sha2::{Digest, Sha256};
use tokio::sync::watch;

/// `namespace/name` (namespace empty for cluster-scoped objects).
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ObjectKey {
    pub namespace: String,
    pub name: String,
}

impl ObjectKey {
    pub fn new(namespace: impl Into<String>, name: impl Into<String>) -> Self {
        Self { namespace: namespace.into(), name: name.into() }
    }

    pub fn of(obj: &DynamicObject) -> Self {
        Self::new(obj.metadata.namespace.clone().unwrap_or_default(), obj.metadata.name.clone().unwrap_or_default())
    }
}

impl std::fmt::Display for ObjectKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        if self.namespace.is_empty() { write!(f, "{}", self.name) } else { write!(f, "{}/{}", self.namespace, self.name) }
    }
}

/// The controller ownerReference of an object.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ControllerRef {
    pub api_version: String,
    pub kind: String,
    pub name: String,
    pub uid: String,
}

/// One object as the cache keeps it: its JSON text (type fields filled in,
/// managedFields dropped), shared with every plugin call that reads it, and
/// the fields the indexes, the queue mappers and the reconcile driver read
/// without parsing it.
#[derive(Debug)]
pub struct CachedObject {
    pub key: ObjectKey,
    pub uid: Option<String>,
    pub resource_version: Option<String>,
    /// `metadata.generation` (objects without a spec have none).
    pub generation: Option<i64>,
    /// `metadata.finalizers`, in order.
    pub finalizers: Vec<String>,
    /// `metadata.deletionTimestamp` is set.
    pub deleting: bool,
    /// Boxed: most cached objects have none, and four strings inline would
    /// cost each of them 96 bytes.
    pub controller: Option<Box<ControllerRef>>,
    /// `metadata.labels`, for related kinds picked by a label selector.
    pub labels: Labels,
    /// A digest of everything but `status` and `metadata.resourceVersion`:
    /// equal fingerprints mean the object changed by a status write at most.
    pub fingerprint: Fingerprint,
    json: Arc<str>,
}

/// `metadata.labels` sorted by key, as one boxed slice: a `BTreeMap` node
/// costs about half a KiB per object however few labels it holds, which
/// at 100,000 cached objects was a quarter of the cache.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Labels(Box<[(Box<str>, Box<str>)]>);

impl Labels {
    pub fn get(&self, key: &str) -> Option<&str> {
        self.0.binary_search_by(|(k, _)| (**k).cmp(key)).ok().map(|i| &*self.0[i].1)
    }

    pub fn contains_key(&self, key: &str) -> bool {
        self.get(key).is_some()
    }
}

impl Labels {
    /// Copies the map's labels; its order is the key order lookups rely on.
    pub fn of(map: &std::collections::BTreeMap<String, String>) -> Self {
        Self(map.iter().map(|(k, v)| (Box::from(k.as_str()), Box::from(v.as_str()))).collect())
    }
}

impl From<std::collections::BTreeMap<String, String>> for Labels {
    fn from(map: std::collections::BTreeMap<String, String>) -> Self {
        Self(map.into_iter().map(|(k, v)| (k.into_boxed_str(), v.into_boxed_str())).collect())
    }
}

/// See [`CachedObject::fingerprint`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Fingerprint(pub [u8; 32]);

/// Feeds serialized bytes into a hash without building the text.
struct HashWriter<'a>(&'a mut Sha256);

impl std::io::Write for HashWriter<'_> {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0.update(buf);
        Ok(buf.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

impl CachedObject {
    /// The compact form of `obj` (serialized here, once).
    pub fn new(mut obj: DynamicObject) -> Self {
        let m = &obj.metadata;
        let controller =
            m.owner_references.as_ref().and_then(|rs| rs.iter().find(|r| r.controller == Some(true))).map(|r| {
                Box::new(ControllerRef { api_version: r.api_version.clone(), kind: r.kind.clone(), name: r.name.clone(), uid: r.uid.clone() })
            });
        let (key, uid, generation) = (ObjectKey::of(&obj), m.uid.clone(), m.generation);
        let finalizers = m.finalizers.clone().unwrap_or_default();
        let deleting = m.deletion_timestamp.is_some();
        let labels = m.labels.as_ref().map(Labels::of).unwrap_or_default();
        // The fingerprint is taken with status and resourceVersion out, then
        // both go back for the text the plugins receive.
        let status = obj.data.as_object_mut().and_then(|d| d.remove("status"));
        let resource_version = obj.metadata.resource_version.take();
        let mut hash = Sha256::new();
        serde_json::to_writer(HashWriter(&mut hash), &obj).expect("objects serialize");
        let fingerprint = Fingerprint(hash.finalize().into());
        if let (Some(status), Some(data)) = (status, obj.data.as_object_mut()) {
            data.insert("status".into(), status);
        }
        obj.metadata.resource_version = resource_version.clone();
        Self {
            key,
            uid,
            resource_version,
            generation,
            finalizers,
            deleting,
            controller,
            labels,
            fingerprint,
            json: serde_json::to_string(&obj).expect("objects serialize").into(),
        }
    }

    /// The object as JSON text, as plugins receive it.
    pub fn json(&self) -> &str {
        &self.json
    }

    /// The same text, shared (a plugin call takes it without a copy).
    pub fn shared_json(&self) -> Arc<str> {
        self.json.clone()
    }

    /// The object parsed again (for the few readers that need all of it).
    pub fn object(&self) -> DynamicObject {
        serde_json::from_str(&self.json).expect("the cache holds objects it serialized itself")
    }

    /// Only `status` parsed out of the text (`{}` when absent or not an
    /// object): the driver's status write needs it, and nothing else.
    pub fn status(&self) -> serde_json::Value {
        #[derive(serde::Deserialize)]
        struct StatusOnly {
            #[serde(default)]
            status: serde_json::Value,
        }
        let parsed: StatusOnly = serde_json::from_str(&self.json).expect("the cache holds objects it serialized itself");
        if parsed.status.is_object() { parsed.status } else { serde_json::json!({}) }
    }
}

/// Called with (old, new) on every change the cache applies; `new` is `None`
/// on deletion.
pub type Handler = Arc<dyn Fn(Option<&CachedObject>, Option<&CachedObject>) + Send + Sync>;

/// Names a registered [`Handler`] so it can be removed again.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct HandlerId(u64);

#[derive(Default)]
struct Inner {
    objects: HashMap<ObjectKey, Arc<CachedObject>>,
    by_uid: HashMap<String, ObjectKey>,
    by_controller: HashMap<String, BTreeSet<ObjectKey>>,
    /// Uids of recently deleted objects, so an expectation "the cache has
    /// seen my create" holds even if the object was deleted before the
    /// reconcile looked.
    tombstones: HashSet<String>,
    tomb_order: VecDeque<String>,
}

/// How many deleted uids the cache remembers.
const TOMBSTONES: usize = 4096;

impl Inner {
    fn bury(&mut self, uid: Option<&String>) {
        let Some(uid) = uid.cloned() else {
            return;
        };
        if self.tombstones.insert(uid.clone()) {
            self.tomb_order.push_back(uid);
            if self.tomb_order.len() > TOMBSTONES
                && let Some(oldest) = self.tomb_order.pop_front()
            {
                self.tombstones.remove(&oldest);
            }
        }
    }

    fn insert(&mut self, obj: Arc<CachedObject>) -> Option<Arc<CachedObject>> {
        let key = obj.key.clone();
        let old = self.remove(&key);
        if let Some(uid) = &obj.uid {
            self.by_uid.insert(uid.clone(), key.clone());
        }
        if let Some(owner) = &obj.controller {
            self.by_controller.entry(owner.uid.clone()).or_default().insert(key.clone());
        }
        self.objects.insert(key, obj);
        old
    }

    fn remove(&mut self, key: &ObjectKey) -> Option<Arc<CachedObject>> {
        let old = self.objects.remove(key)?;
        if let Some(uid) = &old.uid
            && self.by_uid.get(uid) == Some(key)
        {
            self.by_uid.remove(uid);
        }
        if let Some(owner) = &old.controller
            && let Some(set) = self.by_controller.get_mut(&owner.uid)
        {
            set.remove(key);
            if set.is_empty() {
                self.by_controller.remove(&owner.uid);
            }
        }
        Some(old)
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

    /// How many handlers are registered (whether anyone still uses this cache).
    pub fn handler_count(&self) -> usize {
        self.handlers.read().unwrap().len()
    }

    pub fn get(&self, key: &ObjectKey) -> Option<Arc<CachedObject>> {
        self.inner.read().unwrap().objects.get(key).cloned()
    }

    pub fn get_by_uid(&self, uid: &str) -> Option<Arc<CachedObject>> {
        let inner = self.inner.read().unwrap();
        inner.by_uid.get(uid).and_then(|k| inner.objects.get(k)).cloned()
    }

    /// Objects whose controller ownerReference has this uid, by key order.
    pub fn controlled_by(&self, owner_uid: &str) -> Vec<Arc<CachedObject>> {
        let inner = self.inner.read().unwrap();
        inner.by_controller.get(owner_uid).map(|keys| keys.iter().filter_map(|k| inner.objects.get(k).cloned()).collect()).unwrap_or_default()
    }

    /// The objects in `namespace` (`""`: cluster-scoped objects), by key order.
    pub fn in_namespace(&self, namespace: &str) -> Vec<Arc<CachedObject>> {
        let inner = self.inner.read().unwrap();
        let mut found: Vec<_> = inner.objects.values().filter(|o| o.key.namespace == namespace).cloned().collect();
        found.sort_by(|a, b| a.key.cmp(&b.key));
        found
    }

    pub fn keys(&self) -> Vec<ObjectKey> {
        self.inner.read().unwrap().objects.keys().cloned().collect()
    }

    pub fn len(&self) -> usize {
        self.inner.read().unwrap().objects.len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    pub fn is_synced(&self) -> bool {
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
        inner.by_uid.contains_key(uid) || inner.tombstones.contains(uid)
    }

    /// Adds the type fields when a list left them out, and drops
    /// managedFields (nobody downstream reads them; they are often the
    /// largest part of an object and would be copied into every plugin call).
    fn with_types(&self, mut obj: DynamicObject) -> Arc<CachedObject> {
        obj.metadata.managed_fields = None;
        if obj.types.as_ref().is_none_or(|t| t.kind.is_empty()) {
            obj.types = Some(TypeMeta { api_version: self.resource.api_version.clone(), kind: self.resource.kind.clone() });
        }
        Arc::new(CachedObject::new(obj))
    }

    fn notify(&self, old: Option<&CachedObject>, new: Option<&CachedObject>) {
        let handlers: Vec<Handler> = self.handlers.read().unwrap().iter().map(|(_, h)| h.clone()).collect();
        for h in handlers {
            h(old, new);
        }
    }

    fn bump(&self) {
        self.changes.send_modify(|n| *n += 1);
    }

    /// Applies an added or modified object.
    pub fn apply(&self, obj: DynamicObject) {
        let obj = self.with_types(obj);
        let old = self.inner.write().unwrap().insert(obj.clone());
        self.bump();
        self.notify(old.as_deref(), Some(&*obj));
    }

    /// Applies a deletion.
    pub fn delete(&self, obj: DynamicObject) {
        let key = ObjectKey::of(&obj);
        let old = {
            let mut inner = self.inner.write().unwrap();
            inner.bury(obj.metadata.uid.as_ref());
            inner.remove(&key)
        };
        self.bump();
        let old = old.unwrap_or_else(|| self.with_types(obj));
        self.notify(Some(&*old), None);
    }

    /// Declares the cache synced, for a cache fed by something other than
    /// [`run`](Self::run) (a relay, a test): controllers start their workers
    /// only once every cache they read is synced.
    pub fn mark_synced(&self) {
        self.synced.send_replace(true);
    }

    /// Replaces everything in `scope` (a namespace, or `None` for all) with a
    /// fresh list, reporting the differences as changes.
    pub fn replace(&self, scope: Option<&str>, objects: Vec<DynamicObject>) {
        self.replace_compact(scope, objects.into_iter().map(|o| self.with_types(o)).collect());
    }

    /// [`replace`](Self::replace) with objects already in their compact form
    /// (the watch converts each listed object as it arrives, so a large
    /// initial list never exists as parsed trees all at once).
    fn replace_compact(&self, scope: Option<&str>, fresh: Vec<Arc<CachedObject>>) {
        let mut changes = Vec::new();
        {
            let mut inner = self.inner.write().unwrap();
            let in_scope: Vec<ObjectKey> = inner.objects.keys().filter(|k| scope.is_none_or(|ns| k.namespace == ns)).cloned().collect();
            let fresh_keys: HashSet<&ObjectKey> = fresh.iter().map(|o| &o.key).collect();
            let gone: Vec<ObjectKey> = in_scope.into_iter().filter(|k| !fresh_keys.contains(k)).collect();
            for key in gone {
                if let Some(old) = inner.remove(&key) {
                    inner.bury(old.uid.as_ref());
                    changes.push((Some(old), None));
                }
            }
            for obj in fresh {
                let old = inner.insert(obj.clone());
                let unchanged = old.as_ref().is_some_and(|o| o.resource_version == obj.resource_version);
                if !unchanged {
                    changes.push((old, Some(obj)));
                }
            }
        }
        self.bump();
        for (old, new) in changes {
            self.notify(old.as_deref(), new.as_deref());
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
                    self.replace_compact(scope.as_deref(), std::mem::take(&mut buffer));
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
        let names: Vec<_> = c.controlled_by("p1").iter().map(|o| o.key.name.clone()).collect();
        assert_eq!(names, ["a", "b"]);
        c.apply(obj("b", "2", None, "5"));
        assert_eq!(c.controlled_by("p1").len(), 1, "an orphaned child leaves the owner's index");
        assert_eq!(c.get_by_uid("2").unwrap().resource_version.as_deref(), Some("5"));
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
    }

    #[test]
    fn labels_are_found_by_key() {
        let map: std::collections::BTreeMap<String, String> = [("tier", "web"), ("app", "a"), ("zone", "")].map(|(k, v)| (k.into(), v.into())).into();
        let labels = Labels::from(map);
        assert_eq!((labels.get("app"), labels.get("tier"), labels.get("zone")), (Some("a"), Some("web"), Some("")));
        assert!(!labels.contains_key("ap") && !labels.contains_key("zzz"));
        assert_eq!(Labels::default().get("app"), None);
    }

    #[test]
    fn managed_fields_are_not_kept() {
        let c = cache();
        let mut o = obj("a", "1", None, "1");
        o.metadata.managed_fields = Some(vec![Default::default()]);
        c.apply(o);
        assert!(c.get(&ObjectKey::new("ns", "a")).unwrap().object().metadata.managed_fields.is_none());
    }

    #[test]
    fn a_relist_reports_only_what_changed() {
        let c = cache();
        let seen = Arc::new(std::sync::Mutex::new(Vec::new()));
        let s = seen.clone();
        c.on_change(Arc::new(move |old, new| {
            let name = new.or(old).unwrap().key.name.clone();
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
    fn objects_listed_without_type_fields_get_them_from_the_resource() {
        let c = cache();
        let mut o = obj("a", "1", None, "1");
        o.types = None;
        c.apply(o);
        let got = c.get(&ObjectKey::new("ns", "a")).unwrap();
        assert_eq!(serde_json::from_str::<serde_json::Value>(got.json()).unwrap()["kind"], "Pod");
    }
}
