//! What a plugin may do, decided before anything is written: a pure
//! function from (parent, declared child kinds, what the cache shows, the
//! actions) to the writes to make or the first refusal.
//!
//! Rules:
//! 1. Children only of the kinds the manifest declares, only in the parent's
//!    namespace. A namespaced parent has no cluster-scoped children: such an
//!    object cannot carry a namespaced owner (the garbage collector treats
//!    that ownerReference as unresolvable, so nothing would ever clean it up).
//!    The parent itself is never a target: the host alone writes it (the
//!    plugin's part is `set-status`, which has no target to point elsewhere).
//! 2. Replace, patch and delete only objects this parent controls: present in
//!    the cache with a controller ownerReference whose uid is the parent's.
//! 3. Creates get the parent's namespace and the controller ownerReference
//!    (controller, blockOwnerDeletion); a create that names another
//!    controller is refused. Patches may not touch ownerReferences; a replace
//!    keeps the parent as controller.
//! 4. Status must be an object; Events need a reason.
//! 5. An apply (contract 0.3) names its child by `metadata.name` (never
//!    `generateName`); one the cache shows controlled by another owner, or
//!    by none, is refused, as a replace would be. It gets the parent's
//!    namespace and controller ownerReference, and its `resourceVersion`
//!    is dropped (apply takes the object as the plugin's intent, not as an
//!    edit of one version). The children applied are the whole desired set:
//!    [`prune`] adds the deletes of children applied earlier and no longer
//!    applied.
//! 6. At most [`MAX_WRITES`] writes per reconcile: a plugin that answers
//!    with a flood (say 200,000 Events) is refused before anything is
//!    written, instead of holding the executor and the API server for
//!    minutes.

use std::time::Duration;

use operator_plugin_sdk::{Action, EventType, GroupVersionKind, ObjectRef, Propagation};
use serde_json::{Value, json};

use crate::object_reference::ObjectReference;
use crate::queue::Priority;

/// What the cache knows about a child the plugin names.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Existing {
    pub uid: String,
    pub resource_version: String,
    /// Uid of its controller ownerReference.
    pub controller_uid: Option<String>,
}

/// Cache lookups the policy needs.
pub trait Lookup {
    /// The object of this kind at namespace/name, if the cache has it.
    fn find(&self, gvk: &GroupVersionKind, namespace: &str, name: &str) -> Option<Existing>;

    /// Whether objects of this kind live in a namespace (as discovery says).
    /// Unknown kinds count as namespaced.
    fn namespaced(&self, gvk: &GroupVersionKind) -> bool;
}

/// A checked write, ready to execute.
#[derive(Clone, Debug, PartialEq)]
pub enum Write {
    Create {
        gvk: GroupVersionKind,
        namespace: String,
        object: Value,
        fixed_name: bool,
    },
    Replace {
        gvk: GroupVersionKind,
        namespace: String,
        name: String,
        object: Value,
        existing: Existing,
    },
    Patch {
        gvk: GroupVersionKind,
        namespace: String,
        name: String,
        patch: Value,
        existing: Existing,
    },
    /// Server-side apply of the child as the plugin wants it; `existing` is
    /// what the cache shows of it (none: the apply creates it).
    Apply {
        gvk: GroupVersionKind,
        namespace: String,
        name: String,
        object: Value,
        existing: Option<Existing>,
    },
    Delete {
        gvk: GroupVersionKind,
        namespace: String,
        name: String,
        propagation: Propagation,
        existing: Existing,
    },
    SetStatus(Value),
    Event {
        event_type: EventType,
        reason: String,
        message: String,
    },
}

/// The checked plan: writes in order, the soonest requeue, and whether the
/// plugin declared its cleanup done.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Plan {
    pub writes: Vec<Write>,
    pub requeue: Option<Requeue>,
    pub finalized: bool,
}

/// When the plugin asked to be called again, and at which priority once
/// that time has come (`requeue-after`: normal; contract 0.4's low requeue:
/// low).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Requeue {
    pub after: Duration,
    pub priority: Priority,
}

impl Requeue {
    /// Of two requeues the soonest; of equally soon ones the higher priority
    /// (a low request never delays a normal one).
    fn sooner(self, other: Requeue) -> Requeue {
        match self.after.cmp(&other.after) {
            std::cmp::Ordering::Less => self,
            std::cmp::Ordering::Greater => other,
            std::cmp::Ordering::Equal => Requeue { after: self.after, priority: self.priority.max(other.priority) },
        }
    }
}

/// Why an action was refused.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("action {index} ({action}) refused: {reason}")]
pub struct Refusal {
    pub index: usize,
    pub action: &'static str,
    pub reason: String,
}

fn action_name(a: &Action) -> &'static str {
    match a {
        Action::Create(_) => "create",
        Action::Replace(_) => "replace",
        Action::Patch { .. } => "patch",
        Action::Delete { .. } => "delete",
        Action::SetStatus(_) => "set-status",
        Action::Event { .. } => "event",
        Action::RequeueAfterMs(_) => "requeue-after",
        Action::RequeueLowAfterMs(_) => "requeue (low priority)",
        Action::Finalized {} => "finalized",
        Action::Apply(_) => "apply",
    }
}

/// Splits `apiVersion` into (group, version).
pub fn split_api_version(api_version: &str) -> (&str, &str) {
    match api_version.split_once('/') {
        Some((g, v)) => (g, v),
        None => ("", api_version),
    }
}

/// Writes one reconcile may ask for. Controllers take large changes in
/// steps (upstream's ReplicaSet controller creates at most `burstReplicas`,
/// 500, Pods per sync; MyDeployment does the same), so 1,000 leaves room
/// for a full burst plus its Events and status.
pub const MAX_WRITES: usize = 1000;

/// Checks every action; the first refusal refuses the whole batch.
pub fn check(parent: &ObjectReference, children: &[GroupVersionKind], lookup: &dyn Lookup, actions: Vec<Action>) -> Result<Plan, Refusal> {
    let writes = actions.iter().filter(|a| !matches!(a, Action::RequeueAfterMs(_) | Action::RequeueLowAfterMs(_) | Action::Finalized {})).count();
    if writes > MAX_WRITES {
        return Err(Refusal {
            index: MAX_WRITES,
            action: action_name(&actions[MAX_WRITES]),
            reason: format!("the reconcile asked for {writes} writes; at most {MAX_WRITES} are made per reconcile (take large changes in steps)"),
        });
    }
    let mut plan = Plan::default();
    for (index, action) in actions.into_iter().enumerate() {
        let name = action_name(&action);
        let refuse = |reason: String| Refusal { index, action: name, reason };
        match action {
            Action::Create(object) => plan.writes.push(check_create(parent, children, lookup, object).map_err(refuse)?),
            Action::Replace(object) => plan.writes.push(check_replace(parent, children, lookup, object).map_err(refuse)?),
            Action::Apply(object) => {
                let write = check_apply(parent, children, lookup, object).map_err(refuse)?;
                if let Write::Apply { gvk, name, .. } = &write
                    && plan.writes.iter().any(|w| matches!(w, Write::Apply { gvk: g, name: n, .. } if g == gvk && n == name))
                {
                    return Err(refuse(format!("{} {name} is applied twice in one reconcile", gvk.kind)));
                }
                plan.writes.push(write);
            }
            Action::Patch { target, patch } => {
                let (gvk, existing) = check_target(parent, children, lookup, &target).map_err(refuse)?;
                if !patch.is_object() {
                    return Err(refuse("a merge patch must be a JSON object".into()));
                }
                if patch.pointer("/metadata/ownerReferences").is_some() {
                    return Err(refuse("a patch may not change ownerReferences".into()));
                }
                if patch.pointer("/metadata/namespace").is_some() || patch.pointer("/metadata/name").is_some() {
                    return Err(refuse("a patch may not change the name or namespace".into()));
                }
                plan.writes.push(Write::Patch { gvk, namespace: parent.namespace.clone(), name: target.name, patch, existing });
            }
            Action::Delete { target, propagation } => {
                let (gvk, existing) = check_target(parent, children, lookup, &target).map_err(refuse)?;
                plan.writes.push(Write::Delete { gvk, namespace: parent.namespace.clone(), name: target.name, propagation, existing });
            }
            Action::SetStatus(status) => {
                if !status.is_object() {
                    return Err(refuse("status must be a JSON object".into()));
                }
                plan.writes.push(Write::SetStatus(status));
            }
            Action::Event { event_type, reason, message } => {
                if reason.is_empty() {
                    return Err(refuse("an Event needs a reason".into()));
                }
                plan.writes.push(Write::Event { event_type, reason, message });
            }
            Action::RequeueAfterMs(ms) => plan.requeue_after(Requeue { after: Duration::from_millis(ms), priority: Priority::Normal }),
            Action::RequeueLowAfterMs(ms) => plan.requeue_after(Requeue { after: Duration::from_millis(ms), priority: Priority::Low }),
            Action::Finalized {} => plan.finalized = true,
        }
    }
    Ok(plan)
}

impl Plan {
    fn requeue_after(&mut self, requeue: Requeue) {
        self.requeue = Some(self.requeue.map_or(requeue, |r| r.sooner(requeue)));
    }
}

fn declared(children: &[GroupVersionKind], api_version: &str, kind: &str) -> Result<GroupVersionKind, String> {
    let (group, version) = split_api_version(api_version);
    children.iter().find(|c| c.group == group && c.version == version && c.kind == kind).cloned().ok_or_else(|| {
        let list: Vec<String> = children.iter().map(|c| format!("{}/{}", c.api_version(), c.kind)).collect();
        format!("kind {api_version}/{kind} is not among the plugin's declared children [{}]", list.join(", "))
    })
}

/// Refuses a cluster-scoped child kind for a namespaced parent.
fn scoped(parent: &ObjectReference, lookup: &dyn Lookup, gvk: &GroupVersionKind) -> Result<(), String> {
    if parent.namespace.is_empty() || lookup.namespaced(gvk) {
        return Ok(());
    }
    Err(format!(
        "kind {}/{} is cluster-scoped and cannot be a child of the namespaced {} (a cluster-scoped object cannot carry a namespaced owner)",
        gvk.api_version(),
        gvk.kind,
        parent.kind
    ))
}

/// Refuses actions aimed at the parent itself.
fn not_the_parent(parent: &ObjectReference, api_version: &str, kind: &str, name: &str) -> Result<(), String> {
    let (group, _) = split_api_version(api_version);
    let (parent_group, _) = split_api_version(&parent.api_version);
    if group == parent_group && kind == parent.kind && name == parent.name {
        return Err(format!("the parent {kind} {}/{name} itself is not a child; only the host writes it (use set-status)", parent.namespace));
    }
    Ok(())
}

fn same_namespace(parent: &ObjectReference, namespace: &str) -> Result<(), String> {
    if namespace.is_empty() || namespace == parent.namespace {
        Ok(())
    } else {
        Err(format!("namespace {namespace:?} is not the parent's namespace {:?}", parent.namespace))
    }
}

fn type_of(object: &Value) -> Result<(String, String), String> {
    if !object.is_object() {
        return Err("the object must be a JSON object".into());
    }
    let api_version = object["apiVersion"].as_str().filter(|s| !s.is_empty()).ok_or("the object has no apiVersion")?;
    let kind = object["kind"].as_str().filter(|s| !s.is_empty()).ok_or("the object has no kind")?;
    Ok((api_version.to_string(), kind.to_string()))
}

fn check_create(parent: &ObjectReference, children: &[GroupVersionKind], lookup: &dyn Lookup, mut object: Value) -> Result<Write, String> {
    let (api_version, kind) = type_of(&object)?;
    let gvk = declared(children, &api_version, &kind)?;
    scoped(parent, lookup, &gvk)?;
    let meta = object.as_object_mut().expect("checked").entry("metadata").or_insert_with(|| json!({}));
    let meta = meta.as_object_mut().ok_or("metadata must be an object")?;
    same_namespace(parent, meta.get("namespace").and_then(Value::as_str).unwrap_or(""))?;
    let name = meta.get("name").and_then(Value::as_str).unwrap_or("");
    let generate = meta.get("generateName").and_then(Value::as_str).unwrap_or("");
    if name.is_empty() && generate.is_empty() {
        return Err("the object has neither metadata.name nor metadata.generateName".into());
    }
    let fixed_name = !name.is_empty();
    let mut refs = match meta.get("ownerReferences") {
        None | Some(Value::Null) => Vec::new(),
        Some(Value::Array(a)) => a.clone(),
        Some(_) => return Err("metadata.ownerReferences must be a list".into()),
    };
    if let Some(other) = refs.iter().find(|r| r["controller"] == true && r["uid"] != parent.uid.as_str()) {
        return Err(format!("the object names another controller ({})", other["uid"]));
    }
    refs.retain(|r| r["uid"] != parent.uid.as_str());
    refs.push(parent.owner_reference());
    meta.insert("ownerReferences".into(), Value::Array(refs));
    if !parent.namespace.is_empty() {
        meta.insert("namespace".into(), Value::String(parent.namespace.clone()));
    }
    Ok(Write::Create { gvk, namespace: parent.namespace.clone(), object, fixed_name })
}

fn owned(parent: &ObjectReference, lookup: &dyn Lookup, gvk: &GroupVersionKind, name: &str) -> Result<Existing, String> {
    let existing = lookup
        .find(gvk, &parent.namespace, name)
        .ok_or_else(|| format!("{} {}/{} is not in the cache (only existing children may be changed)", gvk.kind, parent.namespace, name))?;
    if existing.controller_uid.as_deref() != Some(parent.uid.as_str()) {
        return Err(format!("{} {}/{} is not controlled by this {}", gvk.kind, parent.namespace, name, parent.kind));
    }
    Ok(existing)
}

fn check_target(
    parent: &ObjectReference,
    children: &[GroupVersionKind],
    lookup: &dyn Lookup,
    target: &ObjectRef,
) -> Result<(GroupVersionKind, Existing), String> {
    not_the_parent(parent, &target.api_version, &target.kind, &target.name)?;
    let gvk = declared(children, &target.api_version, &target.kind)?;
    scoped(parent, lookup, &gvk)?;
    same_namespace(parent, &target.namespace)?;
    if target.name.is_empty() {
        return Err("the target has no name".into());
    }
    let existing = owned(parent, lookup, &gvk, &target.name)?;
    Ok((gvk, existing))
}

fn check_replace(parent: &ObjectReference, children: &[GroupVersionKind], lookup: &dyn Lookup, mut object: Value) -> Result<Write, String> {
    let (api_version, kind) = type_of(&object)?;
    let name = object.pointer("/metadata/name").and_then(Value::as_str).unwrap_or("");
    not_the_parent(parent, &api_version, &kind, name)?;
    let gvk = declared(children, &api_version, &kind)?;
    scoped(parent, lookup, &gvk)?;
    let meta = object.as_object_mut().expect("checked").entry("metadata").or_insert_with(|| json!({}));
    let meta = meta.as_object_mut().ok_or("metadata must be an object")?;
    same_namespace(parent, meta.get("namespace").and_then(Value::as_str).unwrap_or(""))?;
    let name = meta.get("name").and_then(Value::as_str).filter(|n| !n.is_empty()).ok_or("a replace needs metadata.name")?.to_string();
    let existing = owned(parent, lookup, &gvk, &name)?;
    let mut refs = match meta.get("ownerReferences") {
        None | Some(Value::Null) => Vec::new(),
        Some(Value::Array(a)) => a.clone(),
        Some(_) => return Err("metadata.ownerReferences must be a list".into()),
    };
    if refs.iter().any(|r| r["controller"] == true && r["uid"] != parent.uid.as_str()) {
        return Err("a replace may not hand the object to another controller".into());
    }
    if !refs.iter().any(|r| r["uid"] == parent.uid.as_str()) {
        refs.push(parent.owner_reference());
    }
    meta.insert("ownerReferences".into(), Value::Array(refs));
    if !parent.namespace.is_empty() {
        meta.insert("namespace".into(), Value::String(parent.namespace.clone()));
    }
    if meta.get("resourceVersion").and_then(Value::as_str).is_none_or(str::is_empty) {
        meta.insert("resourceVersion".into(), Value::String(existing.resource_version.clone()));
    }
    Ok(Write::Replace { gvk, namespace: parent.namespace.clone(), name, object, existing })
}

fn check_apply(parent: &ObjectReference, children: &[GroupVersionKind], lookup: &dyn Lookup, mut object: Value) -> Result<Write, String> {
    let (api_version, kind) = type_of(&object)?;
    let name = object.pointer("/metadata/name").and_then(Value::as_str).unwrap_or("");
    not_the_parent(parent, &api_version, &kind, name)?;
    let gvk = declared(children, &api_version, &kind)?;
    scoped(parent, lookup, &gvk)?;
    let meta = object.as_object_mut().expect("checked").entry("metadata").or_insert_with(|| json!({}));
    let meta = meta.as_object_mut().ok_or("metadata must be an object")?;
    same_namespace(parent, meta.get("namespace").and_then(Value::as_str).unwrap_or(""))?;
    if meta.get("generateName").is_some() {
        return Err("an applied child is named by metadata.name; generateName cannot be applied".into());
    }
    let name = meta.get("name").and_then(Value::as_str).filter(|n| !n.is_empty()).ok_or("an apply needs metadata.name")?.to_string();
    let existing = lookup.find(&gvk, &parent.namespace, &name);
    if let Some(e) = &existing
        && e.controller_uid.as_deref() != Some(parent.uid.as_str())
    {
        return Err(format!("{} {}/{} exists and is not controlled by this {}", gvk.kind, parent.namespace, name, parent.kind));
    }
    let mut refs = match meta.get("ownerReferences") {
        None | Some(Value::Null) => Vec::new(),
        Some(Value::Array(a)) => a.clone(),
        Some(_) => return Err("metadata.ownerReferences must be a list".into()),
    };
    if refs.iter().any(|r| r["controller"] == true && r["uid"] != parent.uid.as_str()) {
        return Err("the object names another controller".into());
    }
    refs.retain(|r| r["uid"] != parent.uid.as_str());
    refs.push(parent.owner_reference());
    meta.insert("ownerReferences".into(), Value::Array(refs));
    meta.remove("resourceVersion");
    if !parent.namespace.is_empty() {
        meta.insert("namespace".into(), Value::String(parent.namespace.clone()));
    }
    Ok(Write::Apply { gvk, namespace: parent.namespace.clone(), name, object, existing })
}

/// The label the host puts on every child it applies, with the plugin's
/// name as value: how "applied by this plugin" is known later. The cache
/// keeps labels (it drops managedFields), and a label reads the same on
/// every API server.
pub const APPLIED_BY: &str = "operator-host.dev/applied-by";

/// A child the parent controls that carries [`APPLIED_BY`] with this
/// plugin's name.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct AppliedEarlier {
    pub gvk: GroupVersionKind,
    pub name: String,
    pub existing: Existing,
}

/// Adds to `plan` the deletion (background propagation) of every child
/// applied earlier that the plan neither applies nor otherwise writes: the
/// children one reconcile applies are the whole desired set. A child the
/// plan replaces, patches or deletes is the plugin's to handle.
pub fn prune(parent: &ObjectReference, plan: &mut Plan, applied_earlier: Vec<AppliedEarlier>) {
    let named = |gvk: &GroupVersionKind, name: &str| {
        plan.writes.iter().any(|w| match w {
            Write::Apply { gvk: g, name: n, .. }
            | Write::Replace { gvk: g, name: n, .. }
            | Write::Patch { gvk: g, name: n, .. }
            | Write::Delete { gvk: g, name: n, .. } => g == gvk && n == name,
            _ => false,
        })
    };
    let stale: Vec<Write> = applied_earlier
        .into_iter()
        .filter(|a| a.existing.controller_uid.as_deref() == Some(parent.uid.as_str()) && !named(&a.gvk, &a.name))
        .map(|a| Write::Delete {
            gvk: a.gvk,
            namespace: parent.namespace.clone(),
            name: a.name,
            propagation: Propagation::Background,
            existing: a.existing,
        })
        .collect();
    plan.writes.extend(stale);
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;

    struct Cache(HashMap<(String, String), Existing>);

    impl Lookup for Cache {
        fn find(&self, gvk: &GroupVersionKind, namespace: &str, name: &str) -> Option<Existing> {
            assert_eq!(gvk.kind, "ConfigMap");
            self.0.get(&(namespace.to_string(), name.to_string())).cloned()
        }

        fn namespaced(&self, gvk: &GroupVersionKind) -> bool {
            gvk.kind != "Namespace"
        }
    }

    fn parent() -> ObjectReference {
        ObjectReference { api_version: "x.dev/v1".into(), kind: "Thing".into(), namespace: "team".into(), name: "p".into(), uid: "P-UID".into() }
    }

    fn children() -> Vec<GroupVersionKind> {
        vec![
            GroupVersionKind::new("", "v1", "ConfigMap"),
            GroupVersionKind::new("", "v1", "Namespace"),
            GroupVersionKind::new("x.dev", "v1", "Thing"),
        ]
    }

    fn cache() -> Cache {
        let mut m = HashMap::new();
        m.insert(("team".into(), "mine".into()), Existing { uid: "c1".into(), resource_version: "7".into(), controller_uid: Some("P-UID".into()) });
        m.insert(("team".into(), "theirs".into()), Existing { uid: "c2".into(), resource_version: "8".into(), controller_uid: Some("OTHER".into()) });
        m.insert(("team".into(), "loose".into()), Existing { uid: "c3".into(), resource_version: "9".into(), controller_uid: None });
        Cache(m)
    }

    fn target(ns: &str, name: &str) -> ObjectRef {
        ObjectRef { api_version: "v1".into(), kind: "ConfigMap".into(), namespace: ns.into(), name: name.into() }
    }

    fn run(actions: Vec<Action>) -> Result<Plan, Refusal> {
        check(&parent(), &children(), &cache(), actions)
    }

    fn cm(name: &str) -> Value {
        json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name, "resourceVersion": "3"}, "data": {"k": "v"}})
    }

    #[test]
    fn an_apply_gets_the_parent_as_controller_and_loses_its_resource_version() {
        let plan = run(vec![Action::Apply(cm("mine")), Action::Apply(cm("new"))]).unwrap();
        let Write::Apply { object, existing, name, namespace, .. } = &plan.writes[0] else { panic!("{plan:?}") };
        assert_eq!((name.as_str(), namespace.as_str()), ("mine", "team"));
        assert_eq!(existing.as_ref().map(|e| e.uid.as_str()), Some("c1"));
        assert_eq!(object["metadata"]["namespace"], "team");
        assert_eq!(object["metadata"]["ownerReferences"], json!([parent().owner_reference()]));
        assert!(object["metadata"].get("resourceVersion").is_none(), "{object}");
        assert!(matches!(&plan.writes[1], Write::Apply { existing: None, .. }), "a child not in the cache is created by the apply");
    }

    #[test]
    fn an_apply_of_someone_elses_object_or_without_a_name_is_refused() {
        for (object, why) in [
            (cm("theirs"), "not controlled by this Thing"),
            (cm("loose"), "not controlled by this Thing"),
            (json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"generateName": "g-"}}), "generateName cannot be applied"),
            (json!({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "s"}}), "not among the plugin's declared children"),
        ] {
            let refusal = run(vec![Action::Apply(object)]).unwrap_err();
            assert!(refusal.reason.contains(why), "{refusal}");
            assert_eq!(refusal.action, "apply");
        }
        let twice = run(vec![Action::Apply(cm("a")), Action::Apply(cm("a"))]).unwrap_err();
        assert!(twice.reason.contains("applied twice"), "{twice}");
    }

    #[test]
    fn children_applied_earlier_and_not_now_are_pruned() {
        let gvk = GroupVersionKind::new("", "v1", "ConfigMap");
        let earlier = |name: &str, controller: &str| AppliedEarlier {
            gvk: gvk.clone(),
            name: name.into(),
            existing: Existing { uid: format!("u-{name}"), resource_version: "1".into(), controller_uid: Some(controller.into()) },
        };
        let mut plan = run(vec![Action::Apply(cm("kept")), Action::Patch { target: target("team", "mine"), patch: json!({"data": {}}) }]).unwrap();
        prune(&parent(), &mut plan, vec![earlier("kept", "P-UID"), earlier("mine", "P-UID"), earlier("gone", "P-UID"), earlier("adopted", "OTHER")]);
        let deleted: Vec<&str> =
            plan.writes.iter().filter_map(|w| if let Write::Delete { name, .. } = w { Some(name.as_str()) } else { None }).collect();
        assert_eq!(deleted, ["gone"], "only the child no write names, and only one this parent controls");
    }

    fn events(n: usize) -> Vec<Action> {
        (0..n).map(|i| Action::Event { event_type: EventType::Normal, reason: "Flood".into(), message: format!("{i}") }).collect()
    }

    #[test]
    fn a_flood_of_writes_is_refused_before_anything_is_written() {
        let e = run(events(200_000)).unwrap_err();
        assert_eq!(e.index, MAX_WRITES);
        assert!(e.reason.contains("asked for 200000 writes; at most 1000"), "{e}");
        let mut full = events(MAX_WRITES);
        full.push(Action::RequeueAfterMs(5));
        assert_eq!(run(full).unwrap().writes.len(), MAX_WRITES, "requeues are not writes");
    }

    #[test]
    fn a_create_gets_the_parent_namespace_and_the_controller_reference() {
        let plan = run(vec![Action::Create(json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c"}}))]).unwrap();
        let Write::Create { object, fixed_name, namespace, .. } = &plan.writes[0] else { panic!() };
        assert!(fixed_name);
        assert_eq!(namespace, "team");
        assert_eq!(object["metadata"]["namespace"], "team");
        assert_eq!(object["metadata"]["ownerReferences"], json!([parent().owner_reference()]));
        assert_eq!(object["metadata"]["ownerReferences"][0]["blockOwnerDeletion"], true);
    }

    #[test]
    fn a_create_in_another_namespace_is_refused() {
        let e = run(vec![Action::Create(json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c", "namespace": "kube-system"}}))])
            .unwrap_err();
        assert!(e.reason.contains("not the parent's namespace"), "{e}");
    }

    #[test]
    fn a_create_of_an_undeclared_kind_is_refused() {
        let e = run(vec![Action::Create(json!({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "c"}}))]).unwrap_err();
        assert!(e.reason.contains("not among the plugin's declared children"), "{e}");
        let e = run(vec![Action::Create(json!({"apiVersion": "apps/v1", "kind": "ConfigMap", "metadata": {"name": "c"}}))]).unwrap_err();
        assert!(e.reason.contains("apps/v1/ConfigMap"), "the group counts too: {e}");
    }

    #[test]
    fn a_create_naming_another_controller_is_refused() {
        let e = run(vec![Action::Create(json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"generateName": "c-",
            "ownerReferences": [{"apiVersion": "v1", "kind": "X", "name": "x", "uid": "OTHER", "controller": true}]}}))])
        .unwrap_err();
        assert!(e.reason.contains("another controller"), "{e}");
    }

    #[test]
    fn a_create_without_a_name_or_generate_name_is_refused() {
        assert!(run(vec![Action::Create(json!({"apiVersion": "v1", "kind": "ConfigMap"}))]).is_err());
    }

    #[test]
    fn delete_patch_and_replace_of_an_owned_child_are_allowed() {
        let plan = run(vec![
            Action::Patch { target: target("team", "mine"), patch: json!({"data": {"a": "b"}}) },
            Action::Replace(json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "mine"}, "data": {}})),
            Action::delete(target("", "mine")),
        ])
        .unwrap();
        assert_eq!(plan.writes.len(), 3);
        let Write::Replace { object, .. } = &plan.writes[1] else { panic!() };
        assert_eq!(object["metadata"]["resourceVersion"], "7", "optimistic concurrency against the cached version");
        assert_eq!(object["metadata"]["ownerReferences"][0]["uid"], "P-UID");
    }

    #[test]
    fn changing_an_object_another_controller_owns_is_refused() {
        let e = run(vec![Action::delete(target("team", "theirs"))]).unwrap_err();
        assert!(e.reason.contains("not controlled by this Thing"), "{e}");
        let e = run(vec![Action::Patch { target: target("team", "loose"), patch: json!({}) }]).unwrap_err();
        assert!(e.reason.contains("not controlled"), "{e}");
    }

    #[test]
    fn changing_an_object_the_cache_does_not_have_is_refused() {
        let e = run(vec![Action::Replace(json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "ghost"}}))]).unwrap_err();
        assert!(e.reason.contains("not in the cache"), "{e}");
    }

    #[test]
    fn deleting_in_another_namespace_is_refused() {
        let e = run(vec![Action::delete(target("default", "mine"))]).unwrap_err();
        assert!(e.reason.contains("namespace"), "{e}");
    }

    #[test]
    fn a_patch_may_not_steal_or_rename() {
        let e = run(vec![Action::Patch { target: target("team", "mine"), patch: json!({"metadata": {"ownerReferences": []}}) }]).unwrap_err();
        assert!(e.reason.contains("ownerReferences"), "{e}");
    }

    #[test]
    fn one_refusal_refuses_the_batch_and_names_the_action() {
        let e = run(vec![Action::normal("Fine", "ok"), Action::delete(target("team", "theirs"))]).unwrap_err();
        assert_eq!((e.index, e.action), (1, "delete"));
    }

    #[test]
    fn the_soonest_requeue_wins_and_finalized_is_noted() {
        let plan = run(vec![Action::RequeueAfterMs(5000), Action::RequeueAfterMs(200), Action::Finalized {}]).unwrap();
        assert_eq!(plan.requeue, Some(Requeue { after: Duration::from_millis(200), priority: Priority::Normal }));
        assert!(plan.finalized);
    }

    #[test]
    fn a_low_requeue_keeps_its_priority_unless_a_normal_one_is_as_soon() {
        let low = |ms| Requeue { after: Duration::from_millis(ms), priority: Priority::Low };
        let normal = |ms| Requeue { after: Duration::from_millis(ms), priority: Priority::Normal };
        assert_eq!(run(vec![Action::RequeueLowAfterMs(200)]).unwrap().requeue, Some(low(200)));
        assert_eq!(run(vec![Action::RequeueAfterMs(5000), Action::RequeueLowAfterMs(200)]).unwrap().requeue, Some(low(200)));
        assert_eq!(run(vec![Action::RequeueLowAfterMs(200), Action::RequeueAfterMs(100)]).unwrap().requeue, Some(normal(100)));
        assert_eq!(run(vec![Action::RequeueLowAfterMs(200), Action::RequeueAfterMs(200)]).unwrap().requeue, Some(normal(200)));
        let e = run(vec![Action::RequeueLowAfterMs(1); MAX_WRITES + 1]);
        assert!(e.is_ok(), "a requeue is not a write: {e:?}");
    }

    #[test]
    fn a_namespaced_parent_may_not_create_or_touch_a_cluster_scoped_child() {
        let e = run(vec![Action::Create(json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "mine"}}))]).unwrap_err();
        assert!(e.reason.contains("cluster-scoped and cannot be a child of the namespaced Thing"), "{e}");
        let ns = ObjectRef { api_version: "v1".into(), kind: "Namespace".into(), namespace: "".into(), name: "team".into() };
        let e = run(vec![Action::delete(ns)]).unwrap_err();
        assert!(e.reason.contains("cluster-scoped"), "{e}");
        let cluster_parent = ObjectReference { namespace: String::new(), ..parent() };
        let plan = check(
            &cluster_parent,
            &children(),
            &cache(),
            vec![Action::Create(json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "n"}}))],
        );
        assert!(plan.is_ok(), "a cluster-scoped parent may own cluster-scoped children: {plan:?}");
    }

    #[test]
    fn the_parent_itself_is_never_a_target_even_when_its_kind_is_declared() {
        let me = ObjectRef { api_version: "x.dev/v1".into(), kind: "Thing".into(), namespace: "team".into(), name: "p".into() };
        let e = run(vec![Action::delete(me.clone())]).unwrap_err();
        assert!(e.reason.contains("the parent Thing team/p itself is not a child"), "{e}");
        let e = run(vec![Action::Patch { target: me, patch: json!({"spec": {}}) }]).unwrap_err();
        assert!(e.reason.contains("itself is not a child"), "{e}");
        let e = run(vec![Action::Replace(json!({"apiVersion": "x.dev/v1", "kind": "Thing", "metadata": {"name": "p"}}))]).unwrap_err();
        assert!(e.reason.contains("itself is not a child"), "{e}");
    }

    #[test]
    fn status_must_be_an_object() {
        assert!(run(vec![Action::SetStatus(json!([1]))]).is_err());
        assert!(run(vec![Action::SetStatus(json!({"a": 1}))]).is_ok());
    }
}
