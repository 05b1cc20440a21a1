//! Executes a checked [`Plan`](super::Plan) in order, stopping at the first
//! failed write, and reports what the cache must show before the parent is
//! reconciled again (the expectations).

use std::collections::HashMap;

use kube::api::{Api, ApiResource, DeleteParams, DynamicObject, Patch, PatchParams, PostParams, Preconditions, PropagationPolicy};
use operator_plugin_sdk::{EventType, GroupVersionKind, Propagation};
use serde_json::Value;

use super::policy::{APPLIED_BY, Existing, Write};
use crate::api_error::ApiErrorClass;
use crate::events::Recorder;
use crate::object_reference::ObjectReference;

/// The field manager of every write the host makes, except applies.
pub const FIELD_MANAGER: &str = "operator-host";

/// The field manager of the children a plugin applies: one per plugin, so
/// the API server tracks which fields each plugin wants, and two plugins
/// (or a plugin and a person with kubectl) stay apart in managedFields.
pub fn apply_manager(plugin: &str) -> String {
    format!("{FIELD_MANAGER}/{plugin}")
}

/// What the cache must show before the next reconcile of the parent.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Expectation {
    /// An object the host created (by uid).
    Created { gvk: GroupVersionKind, uid: String },
    /// An object the host changed: its resourceVersion must move on from `from`.
    Updated { gvk: GroupVersionKind, uid: String, from: String },
    /// An object the host deleted: gone, or marked for deletion.
    Deleted { gvk: GroupVersionKind, uid: String },
}

/// A write that failed.
#[derive(Debug, thiserror::Error)]
#[error("{what} failed")]
pub struct WriteError {
    pub what: String,
    #[source]
    pub source: kube::Error,
}

impl WriteError {
    /// 409 Conflict (a stale resourceVersion): the cache lags; requeue now.
    pub fn is_conflict(&self) -> bool {
        ApiErrorClass::of(&self.source) == ApiErrorClass::Conflict
    }

    /// The API's reason (e.g. `Forbidden`, `Invalid`), for conditions and metrics.
    pub fn reason(&self) -> String {
        match &self.source {
            kube::Error::Api(s) if !s.reason.is_empty() => s.reason.clone(),
            kube::Error::Api(s) => format!("HTTP{}", s.code),
            _ => "RequestFailed".into(),
        }
    }
}

/// The result of executing a plan.
#[derive(Debug, Default)]
pub struct Executed {
    pub expectations: Vec<Expectation>,
    /// The last status the plugin set before any failure.
    pub status: Option<Value>,
    pub error: Option<WriteError>,
    /// Writes made (creates, replaces, patches, deletes, and applies that
    /// changed the object: an apply of what is already there writes nothing).
    pub writes: usize,
}

/// Executes plans for one parent.
pub struct Executor<'a> {
    pub client: &'a kube::Client,
    pub resources: &'a HashMap<GroupVersionKind, ApiResource>,
    pub recorder: &'a Recorder,
    pub regarding: &'a ObjectReference,
    /// The cache, to tell an AlreadyExists of our own child from a name clash.
    pub lookup: &'a (dyn super::Lookup + Sync),
    /// The parent's uid.
    pub parent_uid: &'a str,
    /// The plugin's name: its applies' field manager and [`APPLIED_BY`] label.
    pub plugin: &'a str,
    /// Sharded: the shard label every created or replaced child carries, so
    /// it stays in this replica's cache (its watches select on it).
    pub child_label: Option<(&'a str, &'a str)>,
    /// Set when the pass runs at low priority: the children it creates are
    /// noted, so their ADDED events keep the parent low ([`crate::echoes`]).
    pub low_priority_echoes: Option<&'a crate::echoes::Echoes>,
}

/// Puts `label` on `object` (a child about to be created or replaced): a
/// plugin that does not know about shards must not move its children out of
/// the cache that selects them by it.
fn with_label(mut object: Value, label: Option<(&str, &str)>) -> Value {
    if let Some((key, value)) = label
        && let Some(metadata) = object.get_mut("metadata").and_then(Value::as_object_mut)
    {
        let labels = metadata.entry("labels").or_insert_with(|| Value::Object(Default::default()));
        if !labels.is_object() {
            *labels = Value::Object(Default::default());
        }
        labels.as_object_mut().expect("made an object above").insert(key.to_owned(), Value::String(value.to_owned()));
    }
    object
}

impl Executor<'_> {
    /// The API resource of a declared child kind (the manager resolved them all at start).
    fn resource(&self, gvk: &GroupVersionKind) -> &ApiResource {
        self.resources.get(gvk).unwrap_or_else(|| panic!("no resource for declared child kind {gvk:?}"))
    }

    fn api(&self, gvk: &GroupVersionKind, namespace: &str) -> Api<DynamicObject> {
        let ar = self.resource(gvk);
        if namespace.is_empty() {
            // Children of a cluster-scoped parent: cluster-scoped kinds.
            Api::all_with(self.client.clone(), ar)
        } else {
            Api::namespaced_with(self.client.clone(), namespace, ar)
        }
    }

    /// Where creates go: their answer is read for the uid only.
    fn target<'t>(&'t self, gvk: &GroupVersionKind, namespace: &'t str) -> crate::api_answer::ResourceEndpoint<'t> {
        crate::api_answer::ResourceEndpoint { client: self.client, resource: self.resource(gvk), namespace }
    }

    /// The controller uid of the object that holds `name`, after a create of
    /// it answered AlreadyExists. The cache is asked first; when it does not
    /// hold the object yet (its watch event is still on the way, as for an
    /// object created just before the parent), the API server is. Treating
    /// "not in the cache" as "ours" would call a clash done and never retry,
    /// since an object with no owner reference never requeues the parent.
    /// An object deleted in between reads as uncontrolled: the reconcile
    /// fails and its retry creates the name.
    async fn controller_of(&self, gvk: &GroupVersionKind, namespace: &str, name: &str) -> kube::Result<Option<String>> {
        if let Some(cached) = self.lookup.find(gvk, namespace, name) {
            return Ok(cached.controller_uid);
        }
        let live = self.api(gvk, namespace).get_opt(name).await?;
        Ok(live.and_then(|o| o.metadata.owner_references?.into_iter().find(|r| r.controller == Some(true)).map(|r| r.uid)))
    }

    /// Runs `write`, which creates `name` (`None`: not a create, or no name
    /// yet), noted first for [`crate::echoes`] when this pass runs at low
    /// priority and forgotten again if the write fails.
    async fn noting_create<T>(
        &self,
        gvk: &GroupVersionKind,
        namespace: &str,
        name: Option<&str>,
        write: impl std::future::Future<Output = kube::Result<T>>,
    ) -> kube::Result<T> {
        let noted = self.low_priority_echoes.zip(name);
        if let Some((echoes, name)) = noted {
            echoes.expect(gvk, namespace, name);
        }
        let result = write.await;
        if let (Err(_), Some((echoes, name))) = (&result, noted) {
            echoes.cancel(gvk, namespace, name);
        }
        result
    }

    pub async fn execute(&self, writes: Vec<Write>) -> Executed {
        let mut out = Executed::default();
        let pp = PostParams { field_manager: Some(FIELD_MANAGER.into()), ..PostParams::default() };
        for write in writes {
            match write {
                Write::Create { gvk, namespace, object, fixed_name } => {
                    let what = describe("create", &gvk, &namespace, object.pointer("/metadata/name").or(object.pointer("/metadata/generateName")));
                    let obj: DynamicObject = match serde_json::from_value(with_label(object, self.child_label)) {
                        Ok(o) => o,
                        Err(e) => {
                            out.error = Some(WriteError { what, source: kube::Error::SerdeError(e) });
                            break;
                        }
                    };
                    let target = self.target(&gvk, &namespace);
                    match self.noting_create(&gvk, &namespace, obj.metadata.name.as_deref(), target.create(&pp, &obj)).await {
                        Ok(created) => {
                            out.writes += 1;
                            if let Some(uid) = created.metadata.uid {
                                out.expectations.push(Expectation::Created { gvk, uid });
                            }
                        }
                        Err(e) if fixed_name && ApiErrorClass::of(&e) == ApiErrorClass::AlreadyExists => {
                            let name = obj.metadata.name.as_deref().unwrap_or_default();
                            match self.controller_of(&gvk, &namespace, name).await {
                                Ok(Some(uid)) if uid == self.parent_uid => tracing::debug!(%what, "already exists; nothing to do"),
                                Ok(_) => {
                                    // Someone else's object holds the name: the plugin
                                    // cannot see it, so saying "done" would hide the problem.
                                    out.error = Some(WriteError {
                                        what: format!("{what} (the name is taken by an object this parent does not control)"),
                                        source: e,
                                    });
                                    break;
                                }
                                Err(source) => {
                                    out.error = Some(WriteError { what: format!("{what} (looking up who holds the name)"), source });
                                    break;
                                }
                            }
                        }
                        Err(source) => {
                            out.error = Some(WriteError { what, source });
                            break;
                        }
                    }
                }
                Write::Replace { gvk, namespace, name, object, existing } => {
                    let what = describe("replace", &gvk, &namespace, Some(&Value::String(name.clone())));
                    let obj: DynamicObject = match serde_json::from_value(with_label(object, self.child_label)) {
                        Ok(o) => o,
                        Err(e) => {
                            out.error = Some(WriteError { what, source: kube::Error::SerdeError(e) });
                            break;
                        }
                    };
                    let result = self.api(&gvk, &namespace).replace(&name, &pp, &obj).await;
                    if !out.record_update(result, what, gvk, existing) {
                        break;
                    }
                }
                Write::Patch { gvk, namespace, name, patch, existing } => {
                    let what = describe("patch", &gvk, &namespace, Some(&Value::String(name.clone())));
                    let params = PatchParams { field_manager: Some(FIELD_MANAGER.into()), ..PatchParams::default() };
                    let result = self.api(&gvk, &namespace).patch(&name, &params, &Patch::Merge(&patch)).await;
                    if !out.record_update(result, what, gvk, existing) {
                        break;
                    }
                }
                Write::Apply { gvk, namespace, name, object, existing } => {
                    if !self.apply(&mut out, gvk, &namespace, &name, object, existing).await {
                        break;
                    }
                }
                Write::Delete { gvk, namespace, name, propagation, existing } => {
                    let what = describe("delete", &gvk, &namespace, Some(&Value::String(name.clone())));
                    let params = DeleteParams {
                        propagation_policy: Some(match propagation {
                            Propagation::Background => PropagationPolicy::Background,
                            Propagation::Foreground => PropagationPolicy::Foreground,
                            Propagation::Orphan => PropagationPolicy::Orphan,
                        }),
                        preconditions: Some(Preconditions { uid: Some(existing.uid.clone()), resource_version: None }),
                        ..DeleteParams::default()
                    };
                    match self.api(&gvk, &namespace).delete(&name, &params).await {
                        Ok(_) => {
                            out.writes += 1;
                            out.expectations.push(Expectation::Deleted { gvk, uid: existing.uid });
                        }
                        Err(e) if ApiErrorClass::of(&e) == ApiErrorClass::NotFound => {
                            out.expectations.push(Expectation::Deleted { gvk, uid: existing.uid });
                        }
                        Err(source) => {
                            out.error = Some(WriteError { what, source });
                            break;
                        }
                    }
                }
                Write::SetStatus(status) => out.status = Some(status),
                Write::Event { event_type, reason, message } => {
                    let t = match event_type {
                        EventType::Normal => "Normal",
                        EventType::Warning => "Warning",
                    };
                    self.recorder.record(self.regarding, t, &reason, &message);
                }
            }
        }
        out
    }
}

impl Executor<'_> {
    /// Server-side apply of one child, forced: upstream's guidance for
    /// controllers is to force conflicts on the objects they manage (they
    /// cannot resolve one, and the next reconcile would meet it again), as
    /// controller-runtime's `client.ForceOwnership` does. A field another
    /// manager set and this plugin applies is taken over; fields the plugin
    /// does not apply are left to whoever set them (the API server's
    /// defaults included), so the same intent applied again is a no-op.
    /// Returns false when the write failed and execution must stop.
    async fn apply(&self, out: &mut Executed, gvk: GroupVersionKind, namespace: &str, name: &str, object: Value, existing: Option<Existing>) -> bool {
        let what = describe("apply", &gvk, namespace, Some(&Value::String(name.to_owned())));
        let object = with_label(with_label(object, Some((APPLIED_BY, self.plugin))), self.child_label);
        let params = PatchParams { field_manager: Some(apply_manager(self.plugin)), force: true, ..PatchParams::default() };
        let api = self.api(&gvk, namespace);
        let patch = Patch::Apply(&object);
        match self.noting_create(&gvk, namespace, existing.is_none().then_some(name), api.patch(name, &params, &patch)).await {
            Ok(applied) => {
                let rv = applied.metadata.resource_version.unwrap_or_default();
                match existing {
                    Some(existing) if existing.resource_version == rv => tracing::debug!(%what, "applied; nothing changed"),
                    Some(existing) => {
                        out.writes += 1;
                        out.expectations.push(Expectation::Updated { gvk, uid: existing.uid, from: existing.resource_version });
                    }
                    None => {
                        out.writes += 1;
                        if let Some(uid) = applied.metadata.uid {
                            out.expectations.push(Expectation::Created { gvk, uid });
                        }
                    }
                }
                true
            }
            Err(source) => {
                out.error = Some(WriteError { what, source });
                false
            }
        }
    }
}

impl Executed {
    /// Records the result of a replace or patch of `existing`: on success the
    /// cache must later show the object past its old resourceVersion (unless
    /// the write changed nothing). Returns false when the write failed and
    /// execution must stop.
    fn record_update(&mut self, result: kube::Result<DynamicObject>, what: String, gvk: GroupVersionKind, existing: Existing) -> bool {
        match result {
            Ok(new) => {
                self.writes += 1;
                if new.metadata.resource_version.as_deref() != Some(existing.resource_version.as_str()) {
                    self.expectations.push(Expectation::Updated { gvk, uid: existing.uid, from: existing.resource_version });
                }
                true
            }
            Err(source) => {
                self.error = Some(WriteError { what, source });
                false
            }
        }
    }
}

fn describe(verb: &str, gvk: &GroupVersionKind, namespace: &str, name: Option<&Value>) -> String {
    let name = name.and_then(Value::as_str).unwrap_or("?");
    format!("{verb} {} {namespace}/{name}", gvk.kind)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_sharded_child_carries_the_shard_label() {
        let label = Some(("shard.operator-host.dev/r", "host-1"));
        let labelled = with_label(json!({"metadata": {"name": "c", "labels": {"app": "a"}}}), label);
        assert_eq!(labelled["metadata"]["labels"], json!({"app": "a", "shard.operator-host.dev/r": "host-1"}));
        let bare = with_label(json!({"metadata": {"name": "c"}}), label);
        assert_eq!(bare["metadata"]["labels"]["shard.operator-host.dev/r"], "host-1");
        let unsharded = with_label(json!({"metadata": {"name": "c"}}), None);
        assert_eq!(unsharded, json!({"metadata": {"name": "c"}}));
    }
}
