//! The verbs: get, list, create, update, patch, delete and deletecollection on a [`Resource`],
//! with upstream's object semantics (system metadata, generation, status isolation, finalizers
//! and deletionTimestamp, generateName, admission and CRD schema). HTTP concerns live in
//! the `http` module; this module takes parsed requests and returns JSON objects or [`ApiError`]s.

use crate::admission::Admission;
use crate::clock::timestamp;
pub use crate::config::Config;
use crate::crd;
pub use crate::field_validation::FieldValidation;
use crate::field_validation::{self, Decoded};
use crate::fields::{self, Writer};
use crate::patch::{self, PatchType};
use crate::resources::{Registry, Resource};
use crate::schema;
use crate::selector::{FieldSelector, LabelSelector};
use crate::status::{ApiError, Cause, Result, success};
use crate::store::{ObjectKey, Store, StoreError, Write, object_rv};
use crate::typed;
use base64::Engine;
use operator_selector::dns1123;

mod delete;
mod eviction;
mod patching;
mod subresources;
mod tokens;

use serde_json::{Map, Value, json};
use std::collections::VecDeque;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
pub use subresources::{pointer, scale_of};

/// Options shared by writes.
#[derive(Debug, Clone, Default)]
pub struct WriteOptions {
    /// `dryRun=All`: run everything but the commit.
    pub dry_run: bool,
    /// `fieldManager` (or derived from the User-Agent).
    pub field_manager: String,
    /// `force` (apply only).
    pub force: bool,
    /// `fieldValidation`: what unknown and duplicate fields do (warn by default, as upstream).
    pub field_validation: FieldValidation,
    /// Strict decoding errors found before the object was parsed (duplicate members of the
    /// request's JSON body, `duplicate field "metadata.name"`), enforced with the unknown ones.
    pub duplicate_fields: Vec<String>,
    /// The view the request was made through, when it is not the storage's own resource
    /// (events.k8s.io/v1 Events are written through core Events' storage): upstream records
    /// managed fields in the version the request was made in, and validates an Event by it.
    pub view: Option<Resource>,
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
    /// `gracePeriodSeconds` (pods only; honoured while a simulated kubelet runs, see
    /// [`Core::set_pod_grace_period`]).
    pub grace_period: Option<i64>,
    /// The deprecated `orphanDependents`, as sent: `Some(false)` is the one case where
    /// upstream answers a deletion that is not done yet with 202 rather than 200.
    pub orphan_dependents: Option<bool>,
}

impl DeleteOptions {
    /// The HTTP status of a DELETE's answer: 200, or 202 for a deletion left pending
    /// (finalizers, graceful deletion, a terminating namespace) when the client sent
    /// `orphanDependents: false`, as upstream's `DeleteResource` does (its comment says a 202
    /// for every pending deletion would break clients).
    pub fn status_code(&self, deleted: &Deleted) -> u16 {
        match deleted {
            Deleted::Pending(_) if self.orphan_dependents == Some(false) => 202,
            _ => 200,
        }
    }
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
    /// `pods/ephemeralcontainers`: only `spec.ephemeralContainers` changes.
    EphemeralContainers,
    /// `certificatesigningrequests/approval`: only `status.conditions` changes.
    Approval,
    /// `namespaces/finalize`: only `spec.finalizers` changes.
    Finalize,
}

impl Sub {
    fn name(self) -> &'static str {
        match self {
            Sub::Main => "",
            Sub::Status => "status",
            Sub::Scale => "scale",
            Sub::EphemeralContainers => "ephemeralcontainers",
            Sub::Approval => "approval",
            Sub::Finalize => "finalize",
        }
    }

    /// The one part of the object a write through this subresource may change (JSON pointer).
    fn owned_field(self) -> Option<&'static str> {
        match self {
            Sub::Status => Some("/status"),
            Sub::EphemeralContainers => Some("/spec/ephemeralContainers"),
            Sub::Approval => Some("/status/conditions"),
            Sub::Finalize => Some("/spec/finalizers"),
            Sub::Main | Sub::Scale => None,
        }
    }
}

/// `old` with only the part at `pointer` taken from `new` (removed when `new` has none).
fn with_part_of(old: &Value, new: &Value, pointer: &str) -> Value {
    let mut out = old.clone();
    let (parent, key) = pointer.rsplit_once('/').expect("a pointer");
    let mut cur = &mut out;
    for p in parent.split('/').filter(|p| !p.is_empty()) {
        if !cur.get(p).is_some_and(Value::is_object) {
            schema::as_map(cur).insert(p.into(), json!({}));
        }
        cur = cur.get_mut(p).expect("just inserted");
    }
    match new.pointer(pointer) {
        Some(v) => {
            schema::as_map(cur).insert(key.into(), v.clone());
        }
        None => {
            schema::as_map(cur).remove(key);
        }
    }
    out
}

/// The metadata a built-in kind's `/status` write changes besides its status, as upstream's
/// status strategies leave it: labels, annotations, finalizers and owner references as sent
/// (controller-runtime's `Status().Patch` of a metadata-only change relies on it), except
/// that a Deployment keeps its labels and a Pod its owner references. Custom resources'
/// status writes change no metadata (upstream's CRD status strategy resets it all).
fn status_write_metadata(res: &Resource, kept: &mut Value, sent: &Value) {
    let reset: &[&str] = match (res.group.as_str(), res.kind.as_str()) {
        ("apps", "Deployment") => &["labels"],
        ("", "Pod") => &["ownerReferences"],
        _ => &[],
    };
    for field in ["labels", "annotations", "finalizers", "ownerReferences"].into_iter().filter(|f| !reset.contains(f)) {
        match sent.pointer(&format!("/metadata/{field}")) {
            Some(v) => {
                meta(kept).insert(field.into(), v.clone());
            }
            None => {
                meta(kept).remove(field);
            }
        }
    }
}

/// What a DELETE did.
#[derive(Debug)]
pub enum Deleted {
    /// Gone now: the object, or a Status for kinds that answer with one.
    Now(Value),
    /// Not gone yet (finalizers, graceful deletion): the object with deletionTimestamp.
    Pending(Value),
}

struct Snapshot {
    id: u64,
    rv: u64,
    /// What was listed: a token only continues the list it came from.
    scope: (crate::resources::GroupResource, Option<String>),
    /// The store's own objects (shared, not copied): each page copies only its own items.
    items: Arc<[Arc<Value>]>,
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
    /// Tokens, impersonation and RBAC refusals.
    pub access: crate::auth::Access,
    snapshots: Mutex<VecDeque<Snapshot>>,
    next_snapshot: AtomicU64,
    /// Default grace period (seconds) for deleting pods bound to a node, or -1: pods are deleted
    /// at once (no kubelet to finish them). Set by the embedded cluster while its kubelet runs.
    pod_grace: std::sync::atomic::AtomicI64,
    /// Held from reading the taken Service IPs and ports to the commit of a new Service.
    service_allocation: Mutex<()>,
    /// Set while the ClusterRole aggregation runs (its own writes call it again).
    pub(crate) aggregating: std::sync::atomic::AtomicBool,
}

/// `generateName` suffixes draw from apimachinery's `rand.String` alphabet, the pod-template hash's.
const GENERATE_ALPHABET: &[u8] = workload_math::SAFE_ALPHABET;
const SYSTEM_NAMESPACES: &[&str] = &["default", "kube-system", "kube-public", "kube-node-lease"];

/// The answer to a write the persistence backend refused (nothing was committed).
pub(crate) fn persist_failed(reason: String) -> ApiError {
    ApiError::internal(format!("the change could not be persisted: {reason}"))
}

/// The `StorageObjectInUseProtection` admission plugin (on by default in kube-apiserver): a new
/// claim or volume gets its protection finalizer, which kube-controller-manager's protection
/// controllers remove once nothing uses it (so a claim deleted under a running Pod, or a bound
/// volume, stays until then; with no controllers, as in API-only mode and envtest, it stays).
fn add_finalizer(obj: &mut Value, finalizer: &str) {
    let finalizers = meta(obj).entry("finalizers").or_insert_with(|| json!([]));
    if let Some(list) = finalizers.as_array_mut()
        && !list.iter().any(|f| f == finalizer)
    {
        list.push(json!(finalizer));
    }
}

/// A random 5-character suffix from upstream's alphabet (no vowels, no confusable digits).
/// The namespace strategy's `PrepareForCreate`: a new Namespace has the `kubernetes` finalizer
/// (after any the request asked for), which the namespace controller removes once its content is gone.
fn namespace_finalizer(namespace: &mut Value) {
    if !namespace.get("spec").is_some_and(Value::is_object) {
        namespace["spec"] = json!({});
    }
    let spec = namespace["spec"].as_object_mut().expect("just made an object");
    if !spec.get("finalizers").is_some_and(Value::is_array) {
        spec.insert("finalizers".into(), json!([]));
    }
    let finalizers = spec["finalizers"].as_array_mut().expect("just made an array");
    if !finalizers.iter().any(|f| f == "kubernetes") {
        finalizers.push(json!("kubernetes"));
    }
}

pub fn random_suffix() -> String {
    use rand::RngExt;
    let mut rng = rand::rng();
    (0..5).map(|_| GENERATE_ALPHABET[rng.random_range(0..GENERATE_ALPHABET.len())] as char).collect()
}

fn meta(obj: &mut Value) -> &mut Map<String, Value> {
    schema::as_map(obj);
    let m = obj.as_object_mut().expect("object");
    if !m.get("metadata").is_some_and(Value::is_object) {
        m.insert("metadata".into(), json!({}));
    }
    m.get_mut("metadata").and_then(Value::as_object_mut).expect("metadata")
}

pub(crate) fn meta_str(obj: &Value, field: &str) -> String {
    obj.get("metadata").and_then(|m| m.get(field)).and_then(Value::as_str).unwrap_or_default().to_string()
}

fn finalizers(obj: &Value) -> Vec<String> {
    obj.pointer("/metadata/finalizers")
        .and_then(Value::as_array)
        .map(|a| a.iter().filter_map(|f| f.as_str().map(String::from)).collect())
        .unwrap_or_default()
}

/// What upstream's `path.ValidatePathSegmentName` finds wrong with a name, if anything.
fn path_segment_problem(name: &str) -> Option<&'static str> {
    match name {
        "." => Some("may not be '.'"),
        ".." => Some("may not be '..'"),
        n if n.contains('/') => Some("may not contain '/'"),
        n if n.contains('%') => Some("may not contain '%'"),
        _ => None,
    }
}

/// Whether `a` and `b` are equal but for the members named in `skip` (compared in place: the
/// copies this took were a share of every update's cost).
fn equal_except(a: &Value, b: &Value, skip: &[&str]) -> bool {
    match (a.as_object(), b.as_object()) {
        (Some(a), Some(b)) => {
            let kept = |(k, _): &(&String, &Value)| !skip.contains(&k.as_str());
            a.iter().filter(kept).eq(b.iter().filter(kept))
        }
        _ => a == b,
    }
}

/// Whether an update changes anything but metadata (and status, when `status` is a subresource).
fn spec_changed(old: &Value, new: &Value, status: bool) -> bool {
    !equal_except(old, new, if status { &["metadata", "status"] } else { &["metadata"] })
}

/// Whether `a` and `b` are equal but for `metadata.managedFields` and `metadata.resourceVersion`.
fn equal_but_volatile_meta(a: &Value, b: &Value) -> bool {
    if !equal_except(a, b, &["metadata"]) {
        return false;
    }
    match (a.get("metadata"), b.get("metadata")) {
        (Some(ma @ Value::Object(_)), Some(mb @ Value::Object(_))) => equal_except(ma, mb, &["managedFields", "resourceVersion"]),
        (ma, mb) => ma == mb,
    }
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
            access: crate::auth::Access::default(),
            snapshots: Mutex::new(VecDeque::new()),
            next_snapshot: AtomicU64::new(1),
            pod_grace: std::sync::atomic::AtomicI64::new(-1),
            service_allocation: Mutex::new(()),
            aggregating: std::sync::atomic::AtomicBool::new(false),
        }
    }

    /// Create the namespaces and objects every cluster starts with (the `bootstrap` module).
    pub fn bootstrap(&self) {
        let crds = self.registry.find("apiextensions.k8s.io", "v1", "customresourcedefinitions").expect("crds");
        for crd in self.store.list(&crds.group_resource(), None).0 {
            self.after_write(&crds, &crd); // CRDs loaded from a persistence backend serve again
        }
        let ns = self.registry.find("", "v1", "namespaces").expect("namespaces");
        for name in SYSTEM_NAMESPACES {
            if self.store.get(&self.key(&ns, "", name)).is_none() {
                let _ = wait(self.create(
                    &ns,
                    "",
                    json!({"metadata": {"name": name}}),
                    &WriteOptions { field_manager: "kube-apiserver".into(), ..Default::default() },
                ));
            }
        }
        for namespace in self.store.list(&ns.group_resource(), None).0 {
            self.ensure_namespace_defaults(&meta_str(&namespace, "name")); // loaded from a data dir
        }
        self.bootstrap_objects();
    }

    /// Graceful pod deletion: with `Some(seconds)`, deleting a pod bound to a node (and not
    /// finished) sets `deletionTimestamp` = now + grace and `deletionGracePeriodSeconds` instead
    /// of removing it, as upstream does; the kubelet removes it later with grace 0. The request's
    /// `gracePeriodSeconds` wins over this default (which stands in for the pod's
    /// `terminationGracePeriodSeconds`, so tests stay fast). `None` (the default, no kubelet):
    /// pods are deleted at once.
    pub fn set_pod_grace_period(&self, seconds: Option<i64>) {
        self.pod_grace.store(seconds.map(|s| s.max(0)).unwrap_or(-1), Ordering::SeqCst);
    }

    /// The default pod grace period while a kubelet runs (see [`Core::set_pod_grace_period`]).
    pub fn pod_grace_period(&self) -> Option<i64> {
        let g = self.pod_grace.load(Ordering::SeqCst);
        (g >= 0).then_some(g)
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
        if res.alias_of.is_some() && obj.get("apiVersion").and_then(Value::as_str).is_some_and(|v| v != res.api_version()) {
            obj = crate::convert::to_view(res, obj);
        }
        if let Some(m) = obj.as_object_mut() {
            m.insert("apiVersion".into(), json!(res.api_version()));
            m.insert("kind".into(), json!(res.kind));
        }
        if let Some(s) = &res.schema {
            schema::apply_defaults(s, &mut obj); // defaults apply on read too, as upstream
        }
        obj
    }

    fn writer<'a>(&self, res: &'a Resource, opts: &'a WriteOptions, sub: Sub, api_version: &'a str) -> Writer<'a> {
        Writer {
            manager: &opts.field_manager,
            api_version,
            subresource: sub.name(),
            // Upstream's scale handler rebuilds the parent's entries from the Scale's and
            // leaves the `scale` entry without a time (v1.36.3, built-ins and CRDs alike).
            time: if sub == Sub::Scale { String::new() } else { self.now() },
            status_subresource: res.status,
            schema: res.schema.as_deref(),
            root: match res.schema.as_deref() {
                Some(schema) => typed::Node::custom(schema),
                None => typed::Node::builtin(&res.group, &res.version, &res.kind).unwrap_or(typed::Node::DEDUCED),
            },
        }
    }

    /// Records the write of `new` (over `old`; `None` on create) in `new`'s managed fields. A
    /// write made through a view is recorded as upstream records it: on the object in the
    /// view's version, with that apiVersion (so a core Event written through events.k8s.io/v1
    /// shows `f:note`, not `f:message`, in whichever version it is read).
    fn record_managed_fields(&self, res: &Resource, old: Option<&Value>, new: &mut Value, sub: Sub, opts: &WriteOptions) {
        if !self.config.managed_fields || opts.field_manager.is_empty() {
            return;
        }
        let Some(view) = opts.view.as_ref().filter(|v| v.alias_of.is_some()) else {
            let api_version = res.api_version();
            fields::record_update(old, new, &self.writer(res, opts, sub, &api_version));
            return;
        };
        let old_view = old.map(|o| crate::convert::to_view(view, o.clone()));
        let mut new_view = crate::convert::to_view(view, new.clone());
        let api_version = view.api_version();
        fields::record_update(old_view.as_ref(), &mut new_view, &self.writer(view, opts, sub, &api_version));
        match new_view.pointer("/metadata/managedFields") {
            Some(m) => meta(new).insert("managedFields".into(), m.clone()),
            None => meta(new).remove("managedFields"),
        };
    }

    /// The Namespace `ns`, if it exists: one lookup for both checks a
    /// create makes (it exists; it is not terminating).
    pub(super) fn namespace_object(&self, ns: &str) -> Option<Arc<Value>> {
        let nsr = self.registry.find("", "v1", "namespaces").expect("namespaces");
        self.store.get_shared(&self.key(&nsr, "", ns))
    }

    /// GET.
    pub fn get(&self, res: &Resource, ns: &str, name: &str) -> Result<Value> {
        self.store.get(&self.key(res, ns, name)).map(|o| self.present(res, o)).ok_or_else(|| ApiError::not_found(&res.group, &res.plural, name))
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
                if snap.scope != (res.group_resource(), ns.map(String::from)) {
                    return Err(ApiError::bad_request(format!("continue key is not valid: {tok}")));
                }
                (snap.items.clone(), snap.rv, offset, Some(id))
            }
            _ => {
                // Shared, not deep-copied: a paged list of 10,000 objects copied all of them
                // for its first page and again for every continuation (the snapshot's clone).
                let (items, rv) = self.store.list_shared(&res.group_resource(), ns.filter(|_| res.namespaced));
                let items: Arc<[Arc<Value>]> = items.into_iter().filter(|o| opts.labels.matches(o) && opts.fields.matches(o)).collect();
                (items, rv, 0, None)
            }
        };
        let total = items.len();
        let end = if opts.limit > 0 { (offset + opts.limit).min(total) } else { total };
        let page: Vec<Value> = items[offset.min(total)..end].iter().map(|o| self.present(res, Value::clone(o))).collect();
        let mut list_meta = json!({"resourceVersion": rv.to_string()});
        if end < total {
            let id = match snap_id {
                Some(id) => id,
                None => {
                    let id = self.next_snapshot.fetch_add(1, Ordering::Relaxed);
                    let mut snaps = self.snapshots.lock().unwrap();
                    snaps.push_back(Snapshot { id, rv, scope: (res.group_resource(), ns.map(String::from)), items });
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
    fn decode(&self, res: &Resource, obj: &mut Value, creating: bool) -> Result<Vec<String>> {
        if res.group.is_empty() && res.kind == "Secret" {
            crate::convert::secret_string_data(obj)
                .map_err(|e| ApiError::bad_request(format!("Secret in version {:?} cannot be handled as a Secret: {e}", res.version)))?;
        }
        Ok(if let Some(s) = &res.schema {
            let pruned = schema::prune(s, obj, true);
            schema::apply_defaults(s, obj);
            pruned
        } else {
            let pruned = crate::builtin_schema::prune(&res.group, &res.version, &res.kind, obj);
            crate::defaults::apply(&res.group, &res.kind, obj, creating);
            pruned
        })
    }

    /// Decoding, defaulting, schema and built-in validation, and the admission hooks. The hooks
    /// run for writes of the main resource (and validating ones registered for `scale`, for
    /// `/scale` writes): upstream matches a webhook's rules against
    /// `resource/subresource`, and a rule for `cronjobs` does not match `cronjobs/status`. (Here
    /// they ran on every status write too, one `default` and one `validate` plugin call each.)
    #[allow(clippy::too_many_arguments)] // the write, and how its object was decoded (for strict errors' wording)
    async fn admit(&self, res: &Resource, mut obj: Value, old: Option<&Value>, sub: Sub, opts: &WriteOptions, decoded: Decoded<'_>) -> Result<Value> {
        let name = meta_str(&obj, "name");
        // A strict refusal of a patch shows the patched object as it was before decoding.
        let before = (opts.field_validation == FieldValidation::Strict && decoded == Decoded::Patched).then(|| obj.clone());
        let unknown = self.decode(res, &mut obj, old.is_none())?;
        let errors: Vec<String> = opts.duplicate_fields.iter().cloned().chain(field_validation::unknown(&unknown)).collect();
        field_validation::enforce(opts.field_validation, &errors, decoded, before.as_ref().unwrap_or(&obj), &res.kind, &res.version)?;
        if sub == Sub::Main {
            obj = self.admission.mutate(&res.group, &res.kind, obj, old).await?;
        }
        if !obj.is_object() {
            return Err(ApiError::internal("a mutating admission hook returned a non-object"));
        }
        self.decode(res, &mut obj, old.is_none())?;
        if let Some(s) = &res.schema {
            let mut causes = match &res.scale {
                Some(scale) if res.custom && sub != Sub::Status => crd::scale_spec_causes(&obj, scale),
                _ => vec![],
            };
            causes.extend(schema::validate(s, &obj));
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
        if res.group.is_empty() && res.kind == "Event" {
            let request_group = opts.view.as_ref().map_or("", |view| view.group.as_str());
            causes.extend(crate::validation::events::validate(&obj, old, request_group));
        }
        if !causes.is_empty() {
            return Err(ApiError::invalid(&res.group, &res.kind, &name, causes));
        }
        // `/scale` writes are judged too by hooks registered for them (the parent after scaling).
        match sub {
            Sub::Main => self.admission.validate((&res.group, &res.kind, ""), &name, &obj, old).await?,
            Sub::Scale if res.scale.is_some() => self.admission.validate((&res.group, &res.kind, "scale"), &name, &obj, old).await?,
            _ => {}
        }
        Ok(obj)
    }

    /// POST.
    pub async fn create(&self, res: &Resource, ns: &str, body: Value, opts: &WriteOptions) -> Result<Value> {
        self.create_with(res, ns, body, opts, None).await
    }

    async fn create_with(&self, res: &Resource, ns: &str, body: Value, opts: &WriteOptions, managed: Option<Value>) -> Result<Value> {
        if !body.is_object() {
            return Err(ApiError::bad_request("the body of the request was not a JSON object"));
        }
        let mut obj = body;
        check_type(res, &obj)?;
        obj = self.present(res, obj);
        let now = self.now();
        {
            let m = meta(&mut obj);
            for f in [
                "uid",
                "resourceVersion",
                "creationTimestamp",
                "deletionTimestamp",
                "deletionGracePeriodSeconds",
                "selfLink",
                "generation",
                "managedFields",
            ] {
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
                return Err(ApiError::bad_request("the namespace of the provided object does not match the namespace sent on the request"));
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
        let mut obj = self.admit(res, obj, None, Sub::Main, opts, Decoded::Body).await?;
        let namespace = if res.namespaced { Some(self.namespace_object(ns).ok_or_else(|| ApiError::not_found("", "namespaces", ns))?) } else { None };
        if namespace.is_some_and(|n| delete::is_terminating(&n)) {
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
        } else {
            self.record_managed_fields(res, None, &mut obj, Sub::Main, opts);
        }
        crate::defaults::go_zero_fields(&res.group, &res.kind, &mut obj);
        // After managed fields: what the strategy's `PrepareForCreate` sets is nobody's field.
        if (res.group.as_str(), res.kind.as_str()) == ("", "Namespace") {
            namespace_finalizer(&mut obj);
        }
        // After managed fields: allocated values are the server's, owned by no manager.
        let _allocating = if is_service(res) {
            let guard = self.service_allocation.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
            self.allocate_service(res, &mut obj, None)?;
            Some(guard)
        } else {
            None
        };
        for attempt in 0..8 {
            let name = meta_str(&obj, "name");
            let key = self.key(res, ns, &name);
            if opts.dry_run {
                if self.store.get(&key).is_some() {
                    return Err(ApiError::already_exists(&res.group, &res.plural, &name));
                }
                return Ok(obj);
            }
            crate::limits::check_storable(&etcd_key(res, ns, &name), &obj)?;
            // Copied only when a clash may need another try with a new generated name.
            let write = if !generate.is_empty() && attempt < 7 { obj.clone() } else { std::mem::take(&mut obj) };
            match self.store.commit(&key, None, Write::Put(write)) {
                Ok(ev) => {
                    let created = (*ev.object).clone();
                    self.after_write(res, &created);
                    return Ok(self.present(res, created));
                }
                Err(StoreError::AlreadyExists) if !generate.is_empty() && attempt < 7 => {
                    meta(&mut obj).insert("name".into(), json!(format!("{generate}{}", random_suffix())));
                }
                Err(StoreError::Persist(e)) => return Err(persist_failed(e)),
                Err(_) => return Err(ApiError::already_exists(&res.group, &res.plural, &name)),
            }
        }
        Err(ApiError::internal("could not generate a unique name"))
    }

    fn check_name(&self, res: &Resource, obj: &Value) -> Result<()> {
        let name = meta_str(obj, "name");
        let (ok, msg) = if res.kind == "Namespace" && res.group.is_empty() {
            (dns1123::is_label(&name), dns1123::LABEL_ERROR)
        } else if res.group == "rbac.authorization.k8s.io" {
            // ValidateRBACName is path.ValidatePathSegmentName: `system:node` is a valid name.
            match path_segment_problem(&name) {
                Some(why) => (false, why),
                None => (true, ""),
            }
        } else {
            (dns1123::is_subdomain(&name), dns1123::SUBDOMAIN_ERROR)
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
                obj["status"] = json!({"phase": "Active"});
                let name = meta_str(obj, "name");
                let labels = meta(obj).entry("labels").or_insert_with(|| json!({}));
                labels["kubernetes.io/metadata.name"] = json!(name);
            }
            ("", "Pod") => {
                obj["status"] = json!({"phase": "Pending", "qosClass": "BestEffort"});
            }
            ("batch", "Job") => crate::defaults::job_selector(obj),
            // The service strategy's PrepareForCreate: an empty status, `{loadBalancer: {}}`.
            ("", "Service") => obj["status"] = json!({"loadBalancer": {}}),
            // The claim and volume defaults (`SetDefaults_PersistentVolume(Claim)`): phase
            // Pending; a volume also records when it entered it (1.31's strategy).
            ("", "PersistentVolumeClaim") => {
                obj["status"] = json!({"phase": "Pending"});
                self.default_storage_class(obj);
                add_finalizer(obj, "kubernetes.io/pvc-protection");
            }
            ("", "PersistentVolume") => {
                obj["status"] = json!({"phase": "Pending", "lastPhaseTransitionTime": now});
                add_finalizer(obj, "kubernetes.io/pv-protection");
            }
            ("apiextensions.k8s.io", "CustomResourceDefinition") => {
                let status = crd::accepted_status(obj, now);
                obj["status"] = status;
            }
            _ => {}
        }
    }

    /// The `DefaultStorageClass` admission plugin (on by default in kube-apiserver): a claim
    /// that names no class (`storageClassName` absent; `""` asks for none) gets the class
    /// annotated `storageclass.kubernetes.io/is-default-class: "true"` (or its beta name), the newest when
    /// several are, then by name, as upstream's `GetDefaultClass`. No such class, no change.
    fn default_storage_class(&self, claim: &mut Value) {
        if claim.pointer("/spec/storageClassName").is_some_and(|c| !c.is_null()) {
            return;
        }
        let Some(classes) = self.registry.find("storage.k8s.io", "v1", "storageclasses") else { return };
        let mut defaults: Vec<_> = self
            .store
            .list_shared(&classes.group_resource(), None)
            .0
            .into_iter()
            .filter(|c| {
                ["storageclass.kubernetes.io~1is-default-class", "storageclass.beta.kubernetes.io~1is-default-class"]
                    .iter()
                    .any(|a| c.pointer(&format!("/metadata/annotations/{a}")).and_then(Value::as_str) == Some("true"))
            })
            .collect();
        defaults.sort_by(|a, b| {
            let created = |c: &Value| c.pointer("/metadata/creationTimestamp").and_then(Value::as_str).unwrap_or_default().to_string();
            created(b).cmp(&created(a)).then_with(|| meta_str(a, "name").cmp(&meta_str(b, "name")))
        });
        if let (Some(class), Some(spec)) = (defaults.first(), claim.get_mut("spec").and_then(Value::as_object_mut)) {
            spec.insert("storageClassName".into(), json!(meta_str(class, "name")));
        }
    }

    fn after_write(&self, res: &Resource, obj: &Value) {
        if res.group == "apiextensions.k8s.io" && res.kind == "CustomResourceDefinition" {
            let group = obj.pointer("/spec/group").and_then(Value::as_str).unwrap_or_default();
            let plural = obj.pointer("/spec/names/plural").and_then(Value::as_str).unwrap_or_default();
            self.registry.set_custom(group, plural, crd::resources(obj));
        }
        self.keep_cluster_objects(res, obj);
    }

    /// Compute the object an update of `old` to `new` stores. Returns `None` when nothing
    /// changes (a no-op keeps the resourceVersion, as upstream).
    #[allow(clippy::too_many_arguments)] // the update, and how its object was decoded (for strict errors' wording)
    async fn prepare_update(
        &self,
        res: &Resource,
        old: &Value,
        new: Value,
        sub: Sub,
        opts: &WriteOptions,
        decoded: Decoded<'_>,
    ) -> Result<Option<Value>> {
        if !new.is_object() {
            return Err(ApiError::bad_request("the body of the request was not a JSON object"));
        }
        let mut new = match sub.owned_field() {
            Some(pointer) if sub == Sub::Status && !res.custom => {
                let mut kept = with_part_of(old, &new, pointer);
                status_write_metadata(res, &mut kept, &new);
                kept
            }
            Some(pointer) => with_part_of(old, &new, pointer),
            // Ephemeral containers change only through their subresource, as upstream.
            None if res.group.is_empty() && res.kind == "Pod" => with_part_of(&new, old, "/spec/ephemeralContainers"),
            None => new,
        };
        check_type(res, &new)?;
        new = self.present(res, new);
        let name = meta_str(old, "name");
        let body_name = meta_str(&new, "name");
        if !body_name.is_empty() && body_name != name {
            return Err(ApiError::bad_request(format!("the name of the object ({body_name}) does not match the name on the URL ({name})")));
        }
        {
            let old_meta = old.get("metadata").unwrap_or(&Value::Null);
            let m = meta(&mut new);
            for f in [
                "name",
                "namespace",
                "uid",
                "creationTimestamp",
                "deletionTimestamp",
                "deletionGracePeriodSeconds",
                "generation",
                "managedFields",
                "generateName",
            ] {
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
                        format!(
                            "Forbidden: no new finalizers can be added if the object is being deleted, found new finalizers []string{{{added:?}}}"
                        ),
                        "metadata.finalizers",
                    )],
                ));
            }
        }
        if is_service(res) && sub == Sub::Main {
            crate::services::keep_allocated(&mut new, old);
        }
        let mut new = self.admit(res, new, Some(old), sub, opts, decoded).await?;
        if is_service(res) && sub == Sub::Main {
            self.allocate_service(res, &mut new, Some(old))?;
        }
        if res.generation && spec_changed(old, &new, res.status) {
            let g = old.pointer("/metadata/generation").and_then(Value::as_i64).unwrap_or(0);
            meta(&mut new).insert("generation".into(), json!(g + 1));
        }
        if res.group == "apiextensions.k8s.io" && res.kind == "CustomResourceDefinition" && sub == Sub::Main {
            let status = crd::accepted_status(&new, &self.now());
            new["status"] = status;
        }
        if equal_but_volatile_meta(old, &new) {
            return Ok(None);
        }
        self.record_managed_fields(res, Some(old), &mut new, sub, opts);
        crate::defaults::go_zero_fields(&res.group, &res.kind, &mut new);
        if !opts.dry_run {
            crate::limits::check_storable(&etcd_key(res, &meta_str(old, "namespace"), &name), &new)?;
        }
        Ok(Some(new))
    }

    /// Commit an update computed from `old`; an object being deleted whose last finalizer went
    /// away is deleted instead.
    fn commit_update(
        &self,
        res: &Resource,
        ns: &str,
        old: &Value,
        new: Option<Value>,
        opts: &WriteOptions,
    ) -> std::result::Result<Value, StoreError> {
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
    pub async fn update(&self, res: &Resource, ns: &str, name: &str, body: Value, sub: Sub, opts: &WriteOptions) -> Result<Value> {
        let wanted_rv = body.pointer("/metadata/resourceVersion").and_then(Value::as_str).map(String::from).filter(|s| !s.is_empty());
        loop {
            let old = self.store.get(&self.key(res, ns, name)).ok_or_else(|| ApiError::not_found(&res.group, &res.plural, name))?;
            if let Some(rv) = &wanted_rv
                && rv.parse::<u64>().ok() != Some(object_rv(&old))
            {
                return Err(ApiError::stale(&res.group, &res.plural, name));
            }
            let new = self.prepare_update(res, &old, body.clone(), sub, opts, Decoded::Body).await?;
            match self.commit_update(res, ns, &old, new, opts) {
                Ok(v) => return Ok(v),
                Err(StoreError::NotFound) => return Err(ApiError::not_found(&res.group, &res.plural, name)),
                Err(StoreError::Persist(e)) => return Err(persist_failed(e)),
                Err(_) if wanted_rv.is_some() => return Err(ApiError::stale(&res.group, &res.plural, name)),
                Err(_) => continue,
            }
        }
    }
}

/// Runs a write from code that is not async: the bootstrap (before any admission hook is
/// registered, so the write never waits), the server's side-effect writes and the simulated
/// controllers' passes. Only a hook registered for the kind written makes it wait.
/// Unlike `futures::executor::block_on` it may nest (a write's side effects write too).
pub fn wait<T>(write: impl std::future::Future<Output = T>) -> T {
    use std::task::{Context, Poll, Wake, Waker};
    struct Unpark(std::thread::Thread);
    impl Wake for Unpark {
        fn wake(self: Arc<Self>) {
            self.0.unpark();
        }
    }
    let waker = Waker::from(Arc::new(Unpark(std::thread::current())));
    let mut cx = Context::from_waker(&waker);
    let mut write = std::pin::pin!(write);
    loop {
        match write.as_mut().poll(&mut cx) {
            Poll::Ready(v) => return v,
            Poll::Pending => std::thread::park(),
        }
    }
}

/// Where upstream keeps the object in etcd (`/registry/<resource>/<namespace>/<name>`), for
/// the size etcd would see.
fn etcd_key(res: &Resource, ns: &str, name: &str) -> String {
    let resource = if res.group.is_empty() { res.plural.clone() } else { format!("{}/{}", res.group, res.plural) };
    if ns.is_empty() { format!("/registry/{resource}/{name}") } else { format!("/registry/{resource}/{ns}/{name}") }
}

fn is_service(res: &Resource) -> bool {
    res.group.is_empty() && res.plural == "services"
}

impl Core {
    /// Cluster IPs and node ports of a Service being created or updated (`old`), against the
    /// other stored Services.
    fn allocate_service(&self, res: &Resource, svc: &mut Value, old: Option<&Value>) -> Result<()> {
        let (services, _) = self.store.list(&res.group_resource(), None);
        let uid = old.map(|o| meta_str(o, "uid"));
        let taken = crate::services::Taken::of(&services, uid.as_deref());
        crate::services::allocate(svc, &taken).map_err(|causes| ApiError::invalid(&res.group, &res.kind, &meta_str(svc, "name"), causes))
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
        && !k.is_empty()
        && k != res.kind
    {
        return Err(ApiError::bad_request(format!("the kind in the data ({k}) does not match the expected kind ({})", res.kind)));
    }
    Ok(())
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
