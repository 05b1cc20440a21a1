//! The verbs: get, list, create, update, patch, delete and deletecollection on a [`Resource`],
//! with upstream's object semantics (system metadata, generation, status isolation, finalizers
//! and deletionTimestamp, generateName, admission and CRD schema). HTTP concerns live in
//! [`crate::http`]; this module takes parsed requests and returns JSON objects or [`ApiError`]s.

use crate::admission::Admission;
use crate::clock::{SharedClock, timestamp};
use crate::crd;
use crate::fields::{self, Writer};
use crate::patch::{self, PatchType};
use crate::resources::{Registry, Resource};
use crate::schema;
use crate::selector::{FieldSelector, LabelSelector};
use crate::status::{ApiError, Cause, Result, success};
use crate::store::{ObjectKey, Store, StoreError, Write, object_rv};
use base64::Engine;
use serde_json::{Map, Value, json};
use std::collections::VecDeque;
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

/// Server tunables. Every default is chosen to match a real kube-apiserver where it matters.
#[derive(Clone)]
pub struct Config {
    /// Events retained for watch resumption (default 10 000; older resourceVersions get 410).
    pub event_window: usize,
    /// Interval between BOOKMARK events on watches that asked for them (default 60 s, roughly
    /// upstream's cadence).
    pub bookmark_interval: Duration,
    /// Upper bound on a watch that gave no `timeoutSeconds` (default 30 min, like
    /// `--min-request-timeout` × 2 upstream).
    pub max_watch_timeout: Duration,
    /// Maintain `metadata.managedFields` (default true).
    pub managed_fields: bool,
    /// Time source (default: system clock).
    pub clock: SharedClock,
    /// Address to bind for HTTP serving; port 0 picks a free one (default 127.0.0.1:0).
    pub bind: std::net::SocketAddr,
    /// Answer aggregated discovery (`apidiscovery.k8s.io/v2`) when asked (default true, as 1.32).
    pub aggregated_discovery: bool,
}

impl Default for Config {
    fn default() -> Self {
        Self {
            event_window: 10_000,
            bookmark_interval: Duration::from_secs(60),
            max_watch_timeout: Duration::from_secs(1800),
            managed_fields: true,
            clock: std::sync::Arc::new(crate::clock::SystemClock),
            bind: ([127, 0, 0, 1], 0).into(),
            aggregated_discovery: true,
        }
    }
}

impl std::fmt::Debug for Config {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Config")
            .field("event_window", &self.event_window)
            .field("bookmark_interval", &self.bookmark_interval)
            .field("bind", &self.bind)
            .finish()
    }
}

/// Options shared by writes.
#[derive(Debug, Clone, Default)]
pub struct WriteOptions {
    /// `dryRun=All`: run everything but the commit.
    pub dry_run: bool,
    /// `fieldManager` (or derived from the User-Agent).
    pub field_manager: String,
    /// `force` (apply only).
    pub force: bool,
    /// `fieldValidation=Strict`: unknown fields are a 400 instead of being dropped.
    pub strict: bool,
}

/// LIST options.
#[derive(Debug, Clone, Default)]
pub struct ListOptions {
    /// `labelSelector`.
    pub labels: LabelSelector,
    /// `fieldSelector`.
    pub fields: FieldSelector,
    /// `limit` (0 = all).
    pub limit: usize,
    /// `continue`.
    pub continue_token: Option<String>,
}

/// DELETE options (query or body `DeleteOptions`).
#[derive(Debug, Clone, Default)]
pub struct DeleteOptions {
    /// `Background`, `Foreground` or `Orphan`.
    pub propagation: Option<String>,
    /// `preconditions.uid`.
    pub uid: Option<String>,
    /// `preconditions.resourceVersion`.
    pub resource_version: Option<String>,
    /// `dryRun=All`.
    pub dry_run: bool,
}

/// Which part of an object a write targets.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Sub {
    /// The main resource.
    Main,
    /// `/status`.
    Status,
    /// `/scale`.
    Scale,
}

impl Sub {
    fn name(self) -> &'static str {
        match self {
            Sub::Main => "",
            Sub::Status => "status",
            Sub::Scale => "scale",
        }
    }
}

/// What a DELETE did.
#[derive(Debug)]
pub enum Deleted {
    /// Gone now (200): the object, or a Status for kinds that answer with one.
    Now(Value),
    /// Pending finalizers (202): the object with deletionTimestamp.
    Pending(Value),
}

struct Snapshot {
    id: u64,
    rv: u64,
    items: Vec<Value>,
}

/// The cluster state behind every endpoint.
pub struct Core {
    /// Objects and events.
    pub store: Store,
    /// Servable resources.
    pub registry: Registry,
    /// Admission hooks.
    pub admission: Admission,
    /// Tunables.
    pub config: Config,
    /// Injected faults.
    pub faults: crate::faults::Faults,
    snapshots: Mutex<VecDeque<Snapshot>>,
    next_snapshot: AtomicU64,
}

const GENERATE_ALPHABET: &[u8] = b"bcdfghjklmnpqrstvwxz2456789";
const SYSTEM_NAMESPACES: &[&str] = &["default", "kube-system", "kube-public", "kube-node-lease"];

/// A random 5-character suffix from upstream's alphabet (no vowels, no confusable digits).
pub fn random_suffix() -> String {
    use rand::Rng;
    let mut rng = rand::thread_rng();
    (0..5).map(|_| GENERATE_ALPHABET[rng.gen_range(0..GENERATE_ALPHABET.len())] as char).collect()
}

fn meta(obj: &mut Value) -> &mut Map<String, Value> {
    schema::as_map(obj);
    let m = obj.as_object_mut().expect("object");
    if !m.get("metadata").is_some_and(Value::is_object) {
        m.insert("metadata".into(), json!({}));
    }
    m.get_mut("metadata").and_then(Value::as_object_mut).expect("metadata")
}

fn meta_str(obj: &Value, field: &str) -> String {
    obj.get("metadata").and_then(|m| m.get(field)).and_then(Value::as_str).unwrap_or_default().to_string()
}

fn finalizers(obj: &Value) -> Vec<String> {
    obj.pointer("/metadata/finalizers")
        .and_then(Value::as_array)
        .map(|a| a.iter().filter_map(|f| f.as_str().map(String::from)).collect())
        .unwrap_or_default()
}

/// JSON pointer from a simple `.a.b.c` path.
pub fn pointer(path: &str) -> String {
    path.trim_start_matches('.').split('.').fold(String::new(), |acc, p| format!("{acc}/{p}"))
}

fn set_path(obj: &mut Value, path: &str, v: Value) {
    let parts: Vec<&str> = path.trim_start_matches('.').split('.').collect();
    let mut cur = obj;
    for (i, p) in parts.iter().enumerate() {
        let m = schema::as_map(cur);
        if i + 1 == parts.len() {
            m.insert(p.to_string(), v);
            return;
        }
        cur = m.entry(p.to_string()).or_insert_with(|| json!({}));
    }
}

const DNS1123_SUBDOMAIN: &str = "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character (e.g. 'example.com', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')";
const DNS1123_LABEL: &str = "a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', and must start and end with an alphanumeric character (e.g. 'my-name',  or '123-abc', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?')";

fn valid_subdomain(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= 253
        && name.split('.').all(|l| {
            !l.is_empty()
                && l.chars().all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-')
                && !l.starts_with('-')
                && !l.ends_with('-')
        })
}

fn valid_label(name: &str) -> bool {
    valid_subdomain(name) && !name.contains('.') && name.len() <= 63
}

fn strip_for_compare(obj: &Value, status: bool) -> Value {
    let mut o = obj.clone();
    if let Some(m) = o.as_object_mut() {
        m.remove("metadata");
        if status {
            m.remove("status");
        }
    }
    o
}

fn without_volatile_meta(obj: &Value) -> Value {
    let mut o = obj.clone();
    if let Some(m) = o.get_mut("metadata").and_then(Value::as_object_mut) {
        m.remove("managedFields");
        m.remove("resourceVersion");
    }
    o
}

impl Core {
    /// A core over a store.
    pub fn new(store: Store, config: Config, admission: Admission) -> Self {
        Core {
            store,
            registry: Registry::default(),
            admission,
            config,
            faults: crate::faults::Faults::default(),
            snapshots: Mutex::new(VecDeque::new()),
            next_snapshot: AtomicU64::new(1),
        }
    }

    /// Create the namespaces every cluster starts with.
    pub fn bootstrap(&self) {
        let crds = self.registry.find("apiextensions.k8s.io", "v1", "customresourcedefinitions").expect("crds");
        for crd in self.store.list(&crds.group_resource(), None).0 {
            self.after_write(&crds, &crd); // CRDs loaded from a persistence backend serve again
        }
        let ns = self.registry.find("", "v1", "namespaces").expect("namespaces");
        for name in SYSTEM_NAMESPACES {
            if self.store.get(&self.key(&ns, "", name)).is_none() {
                let _ = self.create(&ns, "", json!({"metadata": {"name": name}}), &WriteOptions { field_manager: "kube-apiserver".into(), ..Default::default() });
            }
        }
    }

    fn now(&self) -> String {
        timestamp(self.config.clock.now())
    }

    /// Storage key of an object.
    pub fn key(&self, res: &Resource, ns: &str, name: &str) -> ObjectKey {
        ObjectKey { gr: res.group_resource(), namespace: if res.namespaced { ns.to_string() } else { String::new() }, name: name.to_string() }
    }

    /// Stamp apiVersion/kind of the version being served (converting shared-storage views).
    pub fn present(&self, res: &Resource, mut obj: Value) -> Value {
        if res.alias_of.is_some() && res.group == "events.k8s.io" && obj.get("apiVersion").and_then(Value::as_str) == Some("v1") {
            obj = crate::convert::event_to_v1(obj);
        }
        if let Some(m) = obj.as_object_mut() {
            m.insert("apiVersion".into(), json!(res.api_version()));
            m.insert("kind".into(), json!(res.kind));
        }
        obj
    }

    fn writer<'a>(&self, res: &'a Resource, opts: &'a WriteOptions, sub: Sub, api_version: &'a str) -> Writer<'a> {
        Writer {
            manager: &opts.field_manager,
            api_version,
            subresource: sub.name(),
            time: self.now(),
            status_subresource: res.status,
            schema: res.schema.as_deref(),
        }
    }

    fn namespace_exists(&self, ns: &str) -> bool {
        let nsr = self.registry.find("", "v1", "namespaces").expect("namespaces");
        self.store.get(&self.key(&nsr, "", ns)).is_some()
    }

    /// GET.
    pub fn get(&self, res: &Resource, ns: &str, name: &str) -> Result<Value> {
        self.store
            .get(&self.key(res, ns, name))
            .map(|o| self.present(res, o))
            .ok_or_else(|| ApiError::not_found(&res.group, &res.plural, name))
    }

    /// LIST: a `XList` with metadata.resourceVersion, honouring selectors, limit and continue.
    pub fn list(&self, res: &Resource, ns: Option<&str>, opts: &ListOptions) -> Result<Value> {
        let (items, rv, offset, snap_id) = match &opts.continue_token {
            Some(tok) if !tok.is_empty() => {
                let (id, offset) = decode_continue(tok)?;
                let snaps = self.snapshots.lock().unwrap();
                let snap = snaps.iter().find(|s| s.id == id).ok_or_else(|| {
                    ApiError::expired("The provided continue parameter is too old to display a consistent list result. You can start a new list without the continue parameter.")
                })?;
                (snap.items.clone(), snap.rv, offset, Some(id))
            }
            _ => {
                let (items, rv) = self.store.list(&res.group_resource(), ns.filter(|_| res.namespaced));
                let items: Vec<Value> =
                    items.into_iter().filter(|o| opts.labels.matches(o) && opts.fields.matches(o)).collect();
                (items, rv, 0, None)
            }
        };
        let total = items.len();
        let end = if opts.limit > 0 { (offset + opts.limit).min(total) } else { total };
        let page: Vec<Value> = items[offset.min(total)..end].iter().map(|o| self.present(res, o.clone())).collect();
        let mut list_meta = json!({"resourceVersion": rv.to_string()});
        if end < total {
            let id = match snap_id {
                Some(id) => id,
                None => {
                    let id = self.next_snapshot.fetch_add(1, Ordering::Relaxed);
                    let mut snaps = self.snapshots.lock().unwrap();
                    snaps.push_back(Snapshot { id, rv, items });
                    while snaps.len() > 64 {
                        snaps.pop_front();
                    }
                    id
                }
            };
            list_meta["continue"] = json!(encode_continue(id, end));
            if opts.labels.0.is_empty() {
                list_meta["remainingItemCount"] = json!(total - end);
            }
        }
        Ok(json!({
            "kind": res.list_kind,
            "apiVersion": res.api_version(),
            "metadata": list_meta,
            "items": page,
        }))
    }

    /// Admission + schema pipeline shared by create and update, in upstream's order.
    /// Decoding as upstream does it: drop unknown fields (returning their paths), then default.
    fn decode(&self, res: &Resource, obj: &mut Value, creating: bool) -> Vec<String> {
        if let Some(s) = &res.schema {
            let pruned = schema::prune(s, obj, true);
            schema::apply_defaults(s, obj);
            pruned
        } else {
            let pruned = crate::builtin_schema::prune(&res.group, &res.kind, obj);
            crate::defaults::apply(&res.group, &res.kind, obj, creating);
            pruned
        }
    }

    fn admit(&self, res: &Resource, mut obj: Value, old: Option<&Value>, opts: &WriteOptions) -> Result<Value> {
        let name = meta_str(&obj, "name");
        let unknown = self.decode(res, &mut obj, old.is_none());
        if opts.strict && !unknown.is_empty() {
            let list: Vec<String> = unknown.iter().map(|p| format!("unknown field \"{p}\"")).collect();
            return Err(ApiError::bad_request(format!(
                "{kind} in version {version:?} cannot be handled as a {kind}: strict decoding error: {}",
                list.join(", "),
                kind = res.kind,
                version = res.version,
            )));
        }
        obj = self.admission.mutate(&res.group, &res.kind, obj, old)?;
        self.decode(res, &mut obj, old.is_none());
        if let Some(s) = &res.schema {
            let causes = schema::validate(s, &obj);
            if !causes.is_empty() {
                return Err(ApiError::invalid(&res.group, &res.kind, &name, causes));
            }
        }
        let mut causes = vec![];
        if res.group == "apiextensions.k8s.io" && res.kind == "CustomResourceDefinition" {
            causes.extend(crd::validate(&obj));
        }
        causes.extend(crate::validation::metadata(&obj));
        if !res.custom {
            causes.extend(crate::validation::validate(&res.group, &res.kind, &obj, old));
        }
        if !causes.is_empty() {
            return Err(ApiError::invalid(&res.group, &res.kind, &name, causes));
        }
        self.admission.validate(&res.group, &res.kind, &name, &obj, old)?;
        Ok(obj)
    }

    /// POST.
    pub fn create(&self, res: &Resource, ns: &str, body: Value, opts: &WriteOptions) -> Result<Value> {
        self.create_with(res, ns, body, opts, None)
    }

    fn create_with(&self, res: &Resource, ns: &str, body: Value, opts: &WriteOptions, managed: Option<Value>) -> Result<Value> {
        if !body.is_object() {
            return Err(ApiError::bad_request("the body of the request was not a JSON object"));
        }
        let mut obj = body;
        check_type(res, &obj)?;
        obj = self.present(res, obj);
        let now = self.now();
        {
            let m = meta(&mut obj);
            for f in ["uid", "resourceVersion", "creationTimestamp", "deletionTimestamp", "deletionGracePeriodSeconds", "selfLink", "generation", "managedFields"] {
                m.remove(f);
            }
            m.insert("uid".into(), json!(uuid::Uuid::new_v4().to_string()));
            m.insert("creationTimestamp".into(), json!(now));
            if res.generation {
                m.insert("generation".into(), json!(1));
            }
        }
        if res.namespaced {
            let body_ns = meta_str(&obj, "namespace");
            if !body_ns.is_empty() && body_ns != ns {
                return Err(ApiError::bad_request(
                    "the namespace of the provided object does not match the namespace sent on the request",
                ));
            }
            meta(&mut obj).insert("namespace".into(), json!(ns));
        } else {
            meta(&mut obj).remove("namespace");
        }
        if res.status && !res.keep_status_on_create {
            obj.as_object_mut().expect("object").remove("status");
        }
        self.kind_defaults_on_create(res, &mut obj, &now);
        let generate = meta_str(&obj, "generateName");
        if meta_str(&obj, "name").is_empty() {
            if generate.is_empty() {
                return Err(ApiError::invalid(
                    &res.group,
                    &res.kind,
                    "",
                    vec![Cause::new("FieldValueRequired", "Required value: name or generateName is required", "metadata.name")],
                ));
            }
            meta(&mut obj).insert("name".into(), json!(format!("{generate}{}", random_suffix())));
        }
        self.check_name(res, &obj)?;
        let mut obj = self.admit(res, obj, None, opts)?;
        if res.namespaced && !self.namespace_exists(ns) {
            return Err(ApiError::not_found("", "namespaces", ns));
        }
        if res.namespaced && self.namespace_terminating(ns) {
            let name = meta_str(&obj, "name");
            let mut e = ApiError::forbidden(format!(
                "{} \"{name}\" is forbidden: unable to create new content in namespace {ns} because it is being terminated",
                crate::status::qualified(&res.group, &res.plural)
            ));
            e.name = Some(name);
            e.group = Some(res.group.clone());
            e.kind = Some(res.plural.clone());
            return Err(e);
        }
        if let Some(m) = managed {
            meta(&mut obj).insert("managedFields".into(), m);
        } else if self.config.managed_fields && !opts.field_manager.is_empty() {
            let api_version = res.api_version();
            fields::record_update(None, &mut obj, &self.writer(res, opts, Sub::Main, &api_version));
        }
        for attempt in 0..8 {
            let name = meta_str(&obj, "name");
            let key = self.key(res, ns, &name);
            if opts.dry_run {
                if self.store.get(&key).is_some() {
                    return Err(ApiError::already_exists(&res.group, &res.plural, &name));
                }
                return Ok(obj);
            }
            match self.store.commit(&key, None, Write::Put(obj.clone())) {
                Ok(ev) => {
                    let created = (*ev.object).clone();
                    self.after_write(res, &created);
                    return Ok(self.present(res, created));
                }
                Err(StoreError::AlreadyExists) if !generate.is_empty() && attempt < 7 => {
                    meta(&mut obj).insert("name".into(), json!(format!("{generate}{}", random_suffix())));
                }
                Err(_) => return Err(ApiError::already_exists(&res.group, &res.plural, &name)),
            }
        }
        Err(ApiError::internal("could not generate a unique name"))
    }

    fn check_name(&self, res: &Resource, obj: &Value) -> Result<()> {
        let name = meta_str(obj, "name");
        let (ok, msg) = if res.kind == "Namespace" && res.group.is_empty() {
            (valid_label(&name), DNS1123_LABEL)
        } else {
            (valid_subdomain(&name), DNS1123_SUBDOMAIN)
        };
        if !ok {
            return Err(ApiError::invalid(
                &res.group,
                &res.kind,
                &name,
                vec![Cause::new("FieldValueInvalid", format!("Invalid value: {name:?}: {msg}"), "metadata.name")],
            ));
        }
        Ok(())
    }

    fn kind_defaults_on_create(&self, res: &Resource, obj: &mut Value, now: &str) {
        match (res.group.as_str(), res.kind.as_str()) {
            ("", "Namespace") => {
                obj["spec"] = json!({"finalizers": ["kubernetes"]});
                obj["status"] = json!({"phase": "Active"});
                let name = meta_str(obj, "name");
                let labels = meta(obj).entry("labels").or_insert_with(|| json!({}));
                labels["kubernetes.io/metadata.name"] = json!(name);
            }
            ("", "Pod") => {
                obj["status"] = json!({"phase": "Pending", "qosClass": "BestEffort"});
            }
            ("batch", "Job") => crate::defaults::job_selector(obj),
            ("", "Service") => {
                let ip_needed = obj.pointer("/spec/type").and_then(Value::as_str) != Some("ExternalName")
                    && obj.pointer("/spec/clusterIP").and_then(Value::as_str).is_none_or(str::is_empty);
                if ip_needed && obj.get("spec").is_some_and(Value::is_object) {
                    let n = self.next_snapshot.fetch_add(1, Ordering::Relaxed);
                    let ip = format!("10.96.{}.{}", (n / 250) % 250, n % 250 + 2);
                    obj["spec"]["clusterIP"] = json!(ip);
                    obj["spec"]["clusterIPs"] = json!([ip]);
                    obj["spec"]["ipFamilies"] = json!(["IPv4"]);
                    obj["spec"]["ipFamilyPolicy"] = json!("SingleStack");
                }
            }
            ("apiextensions.k8s.io", "CustomResourceDefinition") => {
                let status = crd::accepted_status(obj, now);
                obj["status"] = status;
            }
            _ => {}
        }
    }

    fn after_write(&self, res: &Resource, obj: &Value) {
        if res.group == "apiextensions.k8s.io" && res.kind == "CustomResourceDefinition" {
            let group = obj.pointer("/spec/group").and_then(Value::as_str).unwrap_or_default();
            let plural = obj.pointer("/spec/names/plural").and_then(Value::as_str).unwrap_or_default();
            self.registry.set_custom(group, plural, crd::resources(obj));
        }
    }

    /// Compute the object an update of `old` to `new` stores. Returns `None` when nothing
    /// changes (a no-op keeps the resourceVersion, as upstream).
    fn prepare_update(&self, res: &Resource, old: &Value, new: Value, sub: Sub, opts: &WriteOptions) -> Result<Option<Value>> {
        let mut new = if sub == Sub::Status {
            let mut o = old.clone();
            match new.get("status") {
                Some(s) => o["status"] = s.clone(),
                None => {
                    o.as_object_mut().expect("object").remove("status");
                }
            }
            o
        } else {
            new
        };
        if !new.is_object() {
            return Err(ApiError::bad_request("the body of the request was not a JSON object"));
        }
        check_type(res, &new)?;
        new = self.present(res, new);
        let name = meta_str(old, "name");
        let body_name = meta_str(&new, "name");
        if !body_name.is_empty() && body_name != name {
            return Err(ApiError::bad_request(format!(
                "the name of the object ({body_name}) does not match the name on the URL ({name})"
            )));
        }
        {
            let old_meta = old.get("metadata").cloned().unwrap_or_default();
            let m = meta(&mut new);
            for f in ["name", "namespace", "uid", "creationTimestamp", "deletionTimestamp", "deletionGracePeriodSeconds", "generation", "managedFields", "generateName"] {
                match old_meta.get(f) {
                    Some(v) => {
                        m.insert(f.into(), v.clone());
                    }
                    None => {
                        m.remove(f);
                    }
                }
            }
            m.insert("resourceVersion".into(), old_meta.get("resourceVersion").cloned().unwrap_or_default());
        }
        if sub == Sub::Main && res.status {
            match old.get("status") {
                Some(s) => new["status"] = s.clone(),
                None => {
                    new.as_object_mut().expect("object").remove("status");
                }
            }
        }
        if old.pointer("/metadata/deletionTimestamp").is_some() {
            let before = finalizers(old);
            if let Some(added) = finalizers(&new).into_iter().find(|f| !before.contains(f)) {
                return Err(ApiError::invalid(
                    &res.group,
                    &res.kind,
                    &name,
                    vec![Cause::new(
                        "FieldValueForbidden",
                        format!("Forbidden: no new finalizers can be added if the object is being deleted, found new finalizers []string{{{added:?}}}"),
                        "metadata.finalizers",
                    )],
                ));
            }
        }
        let mut new = self.admit(res, new, Some(old), opts)?;
        if res.generation && strip_for_compare(old, res.status) != strip_for_compare(&new, res.status) {
            let g = old.pointer("/metadata/generation").and_then(Value::as_i64).unwrap_or(0);
            meta(&mut new).insert("generation".into(), json!(g + 1));
        }
        if res.group == "apiextensions.k8s.io" && res.kind == "CustomResourceDefinition" && sub == Sub::Main {
            let status = crd::accepted_status(&new, &self.now());
            new["status"] = status;
        }
        if without_volatile_meta(old) == without_volatile_meta(&new) {
            return Ok(None);
        }
        if self.config.managed_fields && !opts.field_manager.is_empty() {
            let api_version = res.api_version();
            fields::record_update(Some(old), &mut new, &self.writer(res, opts, sub, &api_version));
        }
        Ok(Some(new))
    }

    /// Commit an update computed from `old`; an object being deleted whose last finalizer went
    /// away is deleted instead.
    fn commit_update(&self, res: &Resource, ns: &str, old: &Value, new: Option<Value>, opts: &WriteOptions) -> std::result::Result<Value, StoreError> {
        let Some(new) = new else { return Ok(self.present(res, old.clone())) };
        if opts.dry_run {
            return Ok(self.present(res, new));
        }
        let key = self.key(res, ns, &meta_str(old, "name"));
        let gone = new.pointer("/metadata/deletionTimestamp").is_some() && finalizers(&new).is_empty();
        if gone {
            self.store.commit(&key, Some(object_rv(old)), Write::Put(new.clone()))?;
            let ev = self.store.commit(&key, Some(self.store.get(&key).map(|o| object_rv(&o)).unwrap_or(0)), Write::Delete)?;
            self.after_delete(res, &ev.object);
            return Ok(self.present(res, (*ev.object).clone()));
        }
        let ev = self.store.commit(&key, Some(object_rv(old)), Write::Put(new))?;
        let obj = (*ev.object).clone();
        self.after_write(res, &obj);
        Ok(self.present(res, obj))
    }

    /// PUT (main resource or `/status`).
    pub fn update(&self, res: &Resource, ns: &str, name: &str, body: Value, sub: Sub, opts: &WriteOptions) -> Result<Value> {
        let wanted_rv = body.pointer("/metadata/resourceVersion").and_then(Value::as_str).map(String::from).filter(|s| !s.is_empty());
        loop {
            let old = self.store.get(&self.key(res, ns, name)).ok_or_else(|| ApiError::not_found(&res.group, &res.plural, name))?;
            if let Some(rv) = &wanted_rv
                && rv.parse::<u64>().ok() != Some(object_rv(&old)) {
                    return Err(ApiError::stale(&res.group, &res.plural, name));
                }
            let new = self.prepare_update(res, &old, body.clone(), sub, opts)?;
            match self.commit_update(res, ns, &old, new, opts) {
                Ok(v) => return Ok(v),
                Err(StoreError::NotFound) => return Err(ApiError::not_found(&res.group, &res.plural, name)),
                Err(_) if wanted_rv.is_some() => return Err(ApiError::stale(&res.group, &res.plural, name)),
                Err(_) => continue,
            }
        }
    }

    /// PATCH (any patch type; main resource or `/status`).
    #[allow(clippy::too_many_arguments)] // mirrors the request: target, patch type, body, subresource, options
    pub fn patch(&self, res: &Resource, ns: &str, name: &str, ptype: PatchType, body: &[u8], sub: Sub, opts: &WriteOptions) -> Result<Value> {
        if ptype == PatchType::Strategic && res.custom {
            return Err(ApiError::unsupported_media_type(&[
                "application/json-patch+json",
                "application/merge-patch+json",
                "application/apply-patch+yaml",
            ]));
        }
        let patch: Value = match ptype {
            PatchType::Apply => serde_yaml::from_slice(body).map_err(|e| ApiError::bad_request(format!("error decoding YAML: {e}")))?,
            _ => serde_json::from_slice(body).map_err(|e| ApiError::bad_request(format!("error decoding patch: {e}")))?,
        };
        if ptype == PatchType::Apply {
            return self.apply(res, ns, name, patch, sub, opts);
        }
        for _ in 0..16 {
            let old = self.store.get(&self.key(res, ns, name)).ok_or_else(|| ApiError::not_found(&res.group, &res.plural, name))?;
            let current = self.present(res, old.clone());
            let patched = match ptype {
                PatchType::Merge => {
                    let mut v = current.clone();
                    patch::merge_patch(&mut v, &patch)?;
                    v
                }
                PatchType::Json => {
                    let mut v = current.clone();
                    patch::json_patch(&mut v, &patch)?;
                    v
                }
                PatchType::Strategic => patch::strategic_merge(&current, &patch)?,
                PatchType::Apply => unreachable!(),
            };
            let patched_rv = patched.pointer("/metadata/resourceVersion").and_then(Value::as_str).unwrap_or_default();
            if !patched_rv.is_empty() && patched_rv != object_rv(&old).to_string() {
                return Err(ApiError::stale(&res.group, &res.plural, name));
            }
            let new = self.prepare_update(res, &old, patched, sub, opts)?;
            match self.commit_update(res, ns, &old, new, opts) {
                Ok(v) => return Ok(v),
                Err(StoreError::NotFound) => return Err(ApiError::not_found(&res.group, &res.plural, name)),
                Err(_) => continue,
            }
        }
        Err(ApiError::stale(&res.group, &res.plural, name))
    }

    fn apply(&self, res: &Resource, ns: &str, name: &str, applied: Value, sub: Sub, opts: &WriteOptions) -> Result<Value> {
        if opts.field_manager.is_empty() {
            return Err(ApiError::bad_request("PatchOptions.meta.k8s.io \"\" is invalid: fieldManager: Required value: is required for apply patch"));
        }
        if !applied.is_object() {
            return Err(ApiError::bad_request("error decoding YAML: not an object"));
        }
        if applied.get("apiVersion").is_none() || applied.get("kind").is_none() {
            return Err(ApiError::bad_request("invalid object type: /, Kind="));
        }
        check_type(res, &applied)?;
        let body_name = meta_str(&applied, "name");
        if !body_name.is_empty() && body_name != name {
            return Err(ApiError::bad_request(format!("the name of the object ({body_name}) does not match the name on the URL ({name})")));
        }
        let api_version = res.api_version();
        for _ in 0..16 {
            let old = self.store.get(&self.key(res, ns, name));
            let w = self.writer(res, opts, sub, &api_version);
            let merged = fields::apply(old.as_ref(), &applied, &w, opts.force, (&res.group, &res.plural, name))?;
            match old {
                None => {
                    let mut body = merged;
                    meta(&mut body).insert("name".into(), json!(name));
                    let managed = body.pointer("/metadata/managedFields").cloned().filter(|_| self.config.managed_fields);
                    match self.create_with(res, ns, body, opts, managed) {
                        Err(e) if e.code == 409 => continue,
                        other => return other,
                    }
                }
                Some(old) => {
                    let managed = merged.pointer("/metadata/managedFields").cloned();
                    let no_fm = WriteOptions { field_manager: String::new(), ..opts.clone() };
                    let new = self.prepare_update(res, &old, merged, sub, &no_fm)?;
                    let new = new.map(|mut n| {
                        match &managed {
                            Some(m) => {
                                meta(&mut n).insert("managedFields".into(), m.clone());
                            }
                            None => {
                                meta(&mut n).remove("managedFields");
                            }
                        }
                        n
                    });
                    match self.commit_update(res, ns, &old, new, opts) {
                        Ok(v) => return Ok(v),
                        Err(StoreError::NotFound) => continue,
                        Err(_) => continue,
                    }
                }
            }
        }
        Err(ApiError::stale(&res.group, &res.plural, name))
    }

    /// The resource whose storage `res` shares, if it is a view (events.k8s.io Events).
    pub fn storage_of(&self, res: &Resource) -> Option<Resource> {
        let gr = res.alias_of.as_ref()?;
        self.registry.all().into_iter().find(|r| r.alias_of.is_none() && r.group == gr.group && r.plural == gr.resource)
    }

    /// PATCH through a view sharing another resource's storage: the patch applies to the view's
    /// representation, the result is converted back and stored.
    #[allow(clippy::too_many_arguments)] // mirrors `patch`
    pub fn patch_view(&self, view: &Resource, storage: &Resource, ns: &str, name: &str, ptype: PatchType, body: &[u8], opts: &WriteOptions) -> Result<Value> {
        if ptype == PatchType::Apply {
            let applied: Value = serde_yaml::from_slice(body).map_err(|e| ApiError::bad_request(format!("error decoding YAML: {e}")))?;
            let core = crate::convert::event_to_core(applied);
            let bytes = serde_json::to_vec(&core).expect("json");
            return self.patch(storage, ns, name, ptype, &bytes, Sub::Main, opts).map(|o| self.present(view, o));
        }
        let patch: Value = serde_json::from_slice(body).map_err(|e| ApiError::bad_request(format!("error decoding patch: {e}")))?;
        for _ in 0..16 {
            let old = self.store.get(&self.key(storage, ns, name)).ok_or_else(|| ApiError::not_found(&view.group, &view.plural, name))?;
            let mut current = self.present(view, old.clone());
            match ptype {
                PatchType::Json => patch::json_patch(&mut current, &patch)?,
                PatchType::Strategic => current = patch::strategic_merge(&current, &patch)?,
                _ => patch::merge_patch(&mut current, &patch)?,
            }
            let rv = current.pointer("/metadata/resourceVersion").and_then(Value::as_str).unwrap_or_default();
            if !rv.is_empty() && rv != object_rv(&old).to_string() {
                return Err(ApiError::stale(&view.group, &view.plural, name));
            }
            let new = self.prepare_update(storage, &old, crate::convert::event_to_core(current), Sub::Main, opts)?;
            match self.commit_update(storage, ns, &old, new, opts) {
                Ok(v) => return Ok(self.present(view, v)),
                Err(StoreError::NotFound) => return Err(ApiError::not_found(&view.group, &view.plural, name)),
                Err(_) => continue,
            }
        }
        Err(ApiError::stale(&view.group, &view.plural, name))
    }

    /// POST `pods/binding`: assign a pod to a node (what the scheduler does).
    pub fn bind(&self, res: &Resource, ns: &str, name: &str, body: &Value, opts: &WriteOptions) -> Result<Value> {
        let node = body.pointer("/target/name").and_then(Value::as_str).unwrap_or_default().to_string();
        if node.is_empty() {
            return Err(ApiError::invalid("", "Binding", name, vec![Cause::new("FieldValueRequired", "Required value", "target.name")]));
        }
        for _ in 0..16 {
            let old = self.store.get(&self.key(res, ns, name)).ok_or_else(|| ApiError::not_found(&res.group, &res.plural, name))?;
            if let Some(current) = old.pointer("/spec/nodeName").and_then(Value::as_str).filter(|n| !n.is_empty()) {
                return Err(ApiError::conflict("", "pods/binding", name, &format!("pod {name} is already assigned to node {current:?}")));
            }
            let mut new = old.clone();
            new["spec"]["nodeName"] = json!(node);
            let now = self.now();
            let cond = json!({"type": "PodScheduled", "status": "True", "lastProbeTime": null, "lastTransitionTime": now});
            let status = new.as_object_mut().expect("object").entry("status").or_insert_with(|| json!({}));
            let conds = schema::as_map(status).entry("conditions").or_insert_with(|| json!([]));
            if let Some(list) = conds.as_array_mut() {
                list.retain(|c| c["type"] != "PodScheduled");
                list.push(cond);
            }
            if opts.dry_run {
                return Ok(success(None));
            }
            // Sub::Scale: a subresource write that keeps the status it is given.
            let prepared = self.prepare_update(res, &old, new, Sub::Scale, opts)?;
            match self.commit_update(res, ns, &old, prepared, opts) {
                Ok(_) => return Ok(success(None)),
                Err(StoreError::NotFound) => return Err(ApiError::not_found(&res.group, &res.plural, name)),
                Err(_) => continue,
            }
        }
        Err(ApiError::stale(&res.group, &res.plural, name))
    }

    /// The autoscaling/v1 Scale view of an object.
    pub fn get_scale(&self, res: &Resource, ns: &str, name: &str) -> Result<Value> {
        let spec = res.scale.clone().ok_or_else(ApiError::no_route)?;
        let obj = self.get(res, ns, name)?;
        Ok(scale_of(&obj, &spec))
    }

    /// PUT/PATCH `/scale`: only the desired replicas change.
    pub fn update_scale(&self, res: &Resource, ns: &str, name: &str, ptype: Option<PatchType>, body: &[u8], opts: &WriteOptions) -> Result<Value> {
        let spec = res.scale.clone().ok_or_else(ApiError::no_route)?;
        for _ in 0..16 {
            let old = self.store.get(&self.key(res, ns, name)).ok_or_else(|| ApiError::not_found(&res.group, &res.plural, name))?;
            let current = scale_of(&self.present(res, old.clone()), &spec);
            let patch: Value = match ptype {
                Some(PatchType::Apply) => serde_yaml::from_slice(body).map_err(|e| ApiError::bad_request(e.to_string()))?,
                _ => serde_json::from_slice(body).map_err(|e| ApiError::bad_request(e.to_string()))?,
            };
            let wanted = match ptype {
                None => patch,
                Some(PatchType::Merge) | Some(PatchType::Apply) => {
                    let mut v = current.clone();
                    patch::merge_patch(&mut v, &patch)?;
                    v
                }
                Some(PatchType::Json) => {
                    let mut v = current.clone();
                    patch::json_patch(&mut v, &patch)?;
                    v
                }
                Some(PatchType::Strategic) => patch::strategic_merge(&current, &patch)?,
            };
            let rv = wanted.pointer("/metadata/resourceVersion").and_then(Value::as_str).unwrap_or_default();
            if !rv.is_empty() && rv != object_rv(&old).to_string() {
                return Err(ApiError::stale(&res.group, &res.plural, name));
            }
            let replicas = wanted.pointer("/spec/replicas").cloned().unwrap_or(json!(0));
            if replicas.as_i64().is_none_or(|r| r < 0) {
                return Err(ApiError::invalid(
                    "autoscaling",
                    "Scale",
                    name,
                    vec![Cause::new("FieldValueInvalid", format!("Invalid value: {replicas}: must be greater than or equal to 0"), "spec.replicas")],
                ));
            }
            let mut new = old.clone();
            set_path(&mut new, &spec.spec_replicas_path, replicas);
            let prepared = self.prepare_update(res, &old, new, Sub::Scale, opts)?;
            match self.commit_update(res, ns, &old, prepared, opts) {
                Ok(v) => return Ok(scale_of(&v, &spec)),
                Err(StoreError::NotFound) => return Err(ApiError::not_found(&res.group, &res.plural, name)),
                Err(_) => continue,
            }
        }
        Err(ApiError::stale(&res.group, &res.plural, name))
    }

    /// DELETE one object.
    pub fn delete(&self, res: &Resource, ns: &str, name: &str, opts: &DeleteOptions) -> Result<Deleted> {
        loop {
            let key = self.key(res, ns, name);
            let old = self.store.get(&key).ok_or_else(|| ApiError::not_found(&res.group, &res.plural, name))?;
            if let Some(uid) = &opts.uid {
                let actual = meta_str(&old, "uid");
                if *uid != actual {
                    return Err(ApiError::conflict(&res.group, &res.plural, name, &format!(
                        "Precondition failed: UID in precondition: {uid}, UID in object meta: {actual}"
                    )));
                }
            }
            if let Some(rv) = &opts.resource_version {
                let actual = object_rv(&old).to_string();
                if *rv != actual {
                    return Err(ApiError::conflict(&res.group, &res.plural, name, &format!(
                        "Precondition failed: ResourceVersion in precondition: {rv}, ResourceVersion in object meta: {actual}"
                    )));
                }
            }
            let mut fins = finalizers(&old);
            match opts.propagation.as_deref() {
                Some("Foreground") => {
                    if !fins.iter().any(|f| f == "foregroundDeletion") {
                        fins.push("foregroundDeletion".into());
                    }
                    fins.retain(|f| f != "orphan");
                }
                Some("Orphan") => {
                    if !fins.iter().any(|f| f == "orphan") {
                        fins.push("orphan".into());
                    }
                    fins.retain(|f| f != "foregroundDeletion");
                }
                Some("Background") | None => {}
                Some(other) => {
                    return Err(ApiError::invalid("meta.k8s.io", "DeleteOptions", "", vec![Cause::new(
                        "FieldValueNotSupported",
                        format!("Unsupported value: {other:?}: supported values: \"Foreground\", \"Background\", \"Orphan\""),
                        "propagationPolicy",
                    )]));
                }
            }
            if opts.dry_run {
                return Ok(Deleted::Now(self.present(res, old)));
            }
            if !fins.is_empty() {
                let mut new = old.clone();
                {
                    let m = meta(&mut new);
                    if !m.contains_key("deletionTimestamp") {
                        m.insert("deletionTimestamp".into(), json!(self.now()));
                        m.insert("deletionGracePeriodSeconds".into(), json!(0));
                    }
                    m.insert("finalizers".into(), json!(fins));
                }
                if without_volatile_meta(&new) == without_volatile_meta(&old) {
                    return Ok(Deleted::Pending(self.present(res, old)));
                }
                match self.store.commit(&key, Some(object_rv(&old)), Write::Put(new)) {
                    Ok(ev) => return Ok(Deleted::Pending(self.present(res, (*ev.object).clone()))),
                    Err(_) => continue,
                }
            }
            if res.kind == "Namespace" && res.group.is_empty() {
                return self.delete_namespace(res, &key, old);
            }
            match self.store.commit(&key, Some(object_rv(&old)), Write::Delete) {
                Ok(ev) => {
                    let gone = (*ev.object).clone();
                    self.after_delete(res, &gone);
                    let returns_object = res.custom || (res.group.is_empty() && matches!(res.kind.as_str(), "Pod" | "Namespace"));
                    return Ok(Deleted::Now(if returns_object {
                        self.present(res, gone)
                    } else {
                        success(Some(json!({"name": name, "group": res.group, "kind": res.plural, "uid": meta_str(&gone, "uid")})))
                    }));
                }
                Err(_) => continue,
            }
        }
    }

    /// Namespace deletion as the namespace controller drives it: the namespace turns
    /// `Terminating`, its contents are deleted (honouring their finalizers), and it goes away
    /// once empty.
    fn delete_namespace(&self, res: &Resource, key: &ObjectKey, old: Value) -> Result<Deleted> {
        let name = key.name.clone();
        let terminating = if old.pointer("/metadata/deletionTimestamp").is_some() {
            old
        } else {
            let mut t = old.clone();
            meta(&mut t).insert("deletionTimestamp".into(), json!(self.now()));
            meta(&mut t).insert("deletionGracePeriodSeconds".into(), json!(0));
            t["status"] = json!({"phase": "Terminating"});
            match self.store.commit(key, Some(object_rv(&old)), Write::Put(t)) {
                Ok(ev) => (*ev.object).clone(),
                Err(_) => return Err(ApiError::stale("", "namespaces", &name)),
            }
        };
        for k in self.store.keys_in_namespace(&name) {
            if let Some(r) = self.registry.all().into_iter().find(|r| r.group_resource() == k.gr && r.namespaced && r.alias_of.is_none()) {
                let _ = self.delete(&r, &name, &k.name, &DeleteOptions::default());
            }
        }
        if self.finalize_namespace(&name) {
            return Ok(Deleted::Now(self.present(res, terminating)));
        }
        let current = self.store.get(key).unwrap_or(terminating);
        Ok(Deleted::Pending(self.present(res, current)))
    }

    /// Remove a terminating namespace once it is empty. Returns whether it is gone.
    fn finalize_namespace(&self, ns: &str) -> bool {
        let nsr = self.registry.find("", "v1", "namespaces").expect("namespaces");
        let key = self.key(&nsr, "", ns);
        let Some(obj) = self.store.get(&key) else { return true };
        if obj.pointer("/metadata/deletionTimestamp").is_none() || !finalizers(&obj).is_empty() {
            return false;
        }
        if !self.store.keys_in_namespace(ns).is_empty() {
            return false;
        }
        self.store.commit(&key, Some(object_rv(&obj)), Write::Delete).is_ok()
    }

    fn namespace_terminating(&self, ns: &str) -> bool {
        let nsr = self.registry.find("", "v1", "namespaces").expect("namespaces");
        self.store.get(&self.key(&nsr, "", ns)).is_some_and(|o| o.pointer("/metadata/deletionTimestamp").is_some())
    }

    fn after_delete(&self, res: &Resource, obj: &Value) {
        if res.namespaced {
            let ns = meta_str(obj, "namespace");
            if !ns.is_empty() && self.namespace_terminating(&ns) {
                self.finalize_namespace(&ns);
            }
        }
        if res.group == "apiextensions.k8s.io" && res.kind == "CustomResourceDefinition" {
            let group = obj.pointer("/spec/group").and_then(Value::as_str).unwrap_or_default().to_string();
            let plural = obj.pointer("/spec/names/plural").and_then(Value::as_str).unwrap_or_default().to_string();
            if let Some(r) = self.registry.all().into_iter().find(|r| r.custom && r.group == group && r.plural == plural) {
                let (items, _) = self.store.list(&r.group_resource(), None);
                for item in items {
                    let key = self.key(&r, &meta_str(&item, "namespace"), &meta_str(&item, "name"));
                    let _ = self.store.commit(&key, Some(object_rv(&item)), Write::Delete);
                }
            }
            self.registry.remove_custom(&group, &plural);
        }
    }

    /// DELETE on a collection: deletes every matching object, returns the list of them.
    pub fn delete_collection(&self, res: &Resource, ns: Option<&str>, list: &ListOptions, opts: &DeleteOptions) -> Result<Value> {
        let all = self.list(res, ns, &ListOptions { limit: 0, continue_token: None, ..list.clone() })?;
        let mut deleted = vec![];
        for item in all["items"].as_array().cloned().unwrap_or_default() {
            match self.delete(res, &meta_str(&item, "namespace"), &meta_str(&item, "name"), opts) {
                Ok(Deleted::Now(_)) => deleted.push(item),
                Ok(Deleted::Pending(o)) => deleted.push(o),
                Err(e) if e.code == 404 => {}
                Err(e) => return Err(e),
            }
        }
        Ok(json!({"kind": res.list_kind, "apiVersion": res.api_version(), "metadata": {"resourceVersion": self.store.current_rv().to_string()}, "items": deleted}))
    }
}

fn check_type(res: &Resource, obj: &Value) -> Result<()> {
    if let Some(av) = obj.get("apiVersion").and_then(Value::as_str) {
        let group = av.rsplit_once('/').map(|(g, _)| g).unwrap_or("");
        if group != res.group {
            return Err(ApiError::bad_request(format!(
                "the API version in the data ({av}) does not match the expected API version ({})",
                res.api_version()
            )));
        }
    }
    if let Some(k) = obj.get("kind").and_then(Value::as_str)
        && !k.is_empty() && k != res.kind {
            return Err(ApiError::bad_request(format!("the kind in the data ({k}) does not match the expected kind ({})", res.kind)));
        }
    Ok(())
}

/// The Scale object of `obj` under `spec`.
pub fn scale_of(obj: &Value, spec: &crate::resources::ScaleSpec) -> Value {
    let replicas = obj.pointer(&pointer(&spec.spec_replicas_path)).cloned().unwrap_or(json!(0));
    let status_replicas = obj.pointer(&pointer(&spec.status_replicas_path)).cloned().unwrap_or(json!(0));
    let mut status = json!({"replicas": status_replicas});
    if let Some(p) = &spec.label_selector_path {
        match obj.pointer(&pointer(p)) {
            Some(Value::String(s)) => status["selector"] = json!(s),
            Some(sel @ Value::Object(_)) => status["selector"] = json!(LabelSelector::from_object(sel).to_string()),
            _ => {}
        }
    }
    let m = &obj["metadata"];
    let mut metadata = json!({"name": m["name"], "uid": m["uid"], "resourceVersion": m["resourceVersion"], "creationTimestamp": m["creationTimestamp"]});
    if let Some(ns) = m.get("namespace") {
        metadata["namespace"] = ns.clone();
    }
    json!({"kind": "Scale", "apiVersion": "autoscaling/v1", "metadata": metadata, "spec": {"replicas": replicas}, "status": status})
}

fn encode_continue(id: u64, offset: usize) -> String {
    base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(json!({"v": "embedded/v1", "id": id, "offset": offset}).to_string())
}

fn decode_continue(tok: &str) -> Result<(u64, usize)> {
    let bad = || ApiError::bad_request(format!("continue key is not valid: {tok}"));
    let raw = base64::engine::general_purpose::URL_SAFE_NO_PAD.decode(tok).map_err(|_| bad())?;
    let v: Value = serde_json::from_slice(&raw).map_err(|_| bad())?;
    Ok((v["id"].as_u64().ok_or_else(bad)?, v["offset"].as_u64().ok_or_else(bad)? as usize))
}
