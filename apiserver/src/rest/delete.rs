//! DELETE: preconditions, propagation finalizers, deletionTimestamp, namespace termination, CRD
//! cleanup, deletecollection.

use super::*;

/// Registries that set `ReturnDeletedObject: true` upstream (pkg/registry/*/storage/storage.go,
/// 1.32): a DELETE that removes the object at once answers with it. Every other kind, custom
/// resources included, answers `Status{status: Success, details: {name, group, kind: <plural>,
/// uid}}`. CRDs answer with the object too: upstream's first DELETE of a CRD only adds the
/// `customresourcecleanup` finalizer and returns the CRD (ours removes it at once).
const RETURNS_DELETED_OBJECT: &[(&str, &str)] = &[
    ("", "namespaces"),
    ("", "persistentvolumeclaims"),
    ("", "persistentvolumes"),
    ("", "pods"),
    ("", "podtemplates"),
    ("", "resourcequotas"),
    ("", "serviceaccounts"),
    ("", "services"),
    ("apiextensions.k8s.io", "customresourcedefinitions"),
    ("storage.k8s.io", "csidrivers"),
    ("storage.k8s.io", "csinodes"),
    ("storage.k8s.io", "storageclasses"),
    ("storage.k8s.io", "volumeattachments"),
    ("storage.k8s.io", "volumeattributesclasses"),
];

/// Whether a DELETE of `res` answers with the deleted object (else a Success Status).
pub(crate) fn returns_deleted_object(res: &Resource) -> bool {
    !res.custom && RETURNS_DELETED_OBJECT.contains(&(res.group.as_str(), res.plural.as_str()))
}

impl Core {
    /// DELETE one object.
    pub fn delete(&self, res: &Resource, ns: &str, name: &str, opts: &DeleteOptions) -> Result<Deleted> {
        loop {
            let key = self.key(res, ns, name);
            let old = self.store.get(&key).ok_or_else(|| ApiError::not_found(&res.group, &res.plural, name))?;
            if let Some(uid) = &opts.uid {
                let actual = meta_str(&old, "uid");
                if *uid != actual {
                    return Err(ApiError::conflict(
                        &res.group,
                        &res.kind,
                        name,
                        &format!(
                            "the UID in the precondition ({uid}) does not match the UID in record ({actual}). The object might have been deleted and then recreated"
                        ),
                    ));
                }
            }
            if let Some(rv) = &opts.resource_version {
                let actual = object_rv(&old).to_string();
                if *rv != actual {
                    return Err(ApiError::conflict(
                        &res.group,
                        &res.kind,
                        name,
                        &format!(
                            "the ResourceVersion in the precondition ({rv}) does not match the ResourceVersion in record ({actual}). The object might have been modified"
                        ),
                    ));
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
                    return Err(ApiError::invalid(
                        "meta.k8s.io",
                        "DeleteOptions",
                        "",
                        vec![Cause::new(
                            "FieldValueNotSupported",
                            format!("Unsupported value: {other:?}: supported values: \"Foreground\", \"Background\", \"Orphan\""),
                            "propagationPolicy",
                        )],
                    ));
                }
            }
            if opts.dry_run {
                return Ok(Deleted::Now(self.deleted_answer(res, old)));
            }
            if let Some(grace) = self.graceful_pod_delete(res, &old, opts) {
                let current = old.pointer("/metadata/deletionGracePeriodSeconds").and_then(Value::as_i64);
                if old.pointer("/metadata/deletionTimestamp").is_some() && current.is_some_and(|c| c <= grace) {
                    return Ok(Deleted::Pending(self.present(res, old)));
                }
                let mut new = old.clone();
                {
                    let m = meta(&mut new);
                    let at = self.config.clock.now() + chrono::Duration::seconds(grace);
                    m.insert("deletionTimestamp".into(), json!(crate::clock::timestamp(at)));
                    m.insert("deletionGracePeriodSeconds".into(), json!(grace));
                    if !fins.is_empty() {
                        m.insert("finalizers".into(), json!(fins));
                    }
                }
                match self.store.commit(&key, Some(object_rv(&old)), Write::Put(new)) {
                    Ok(ev) => return Ok(Deleted::Pending(self.present(res, (*ev.object).clone()))),
                    Err(StoreError::Persist(e)) => return Err(persist_failed(e)),
                    Err(_) => continue,
                }
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
                if equal_but_volatile_meta(&new, &old) {
                    return Ok(Deleted::Pending(self.present(res, old)));
                }
                match self.store.commit(&key, Some(object_rv(&old)), Write::Put(new)) {
                    Ok(ev) => return Ok(Deleted::Pending(self.present(res, (*ev.object).clone()))),
                    Err(StoreError::Persist(e)) => return Err(persist_failed(e)),
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
                    return Ok(Deleted::Now(self.deleted_answer(res, gone)));
                }
                Err(StoreError::Persist(e)) => return Err(persist_failed(e)),
                Err(_) => continue,
            }
        }
    }

    /// What a DELETE that removed `gone` answers: the object, or a Success Status naming it
    /// (upstream's `finalizeDelete`).
    fn deleted_answer(&self, res: &Resource, gone: Value) -> Value {
        if returns_deleted_object(res) {
            return self.present(res, gone);
        }
        let mut details = json!({"name": meta_str(&gone, "name"), "group": res.group, "kind": res.plural, "uid": meta_str(&gone, "uid")});
        if res.group.is_empty() {
            details.as_object_mut().expect("object").remove("group"); // omitempty
        }
        success(Some(details))
    }

    /// The grace period a pod delete waits for, if it is graceful (upstream's pod strategy:
    /// the request's `gracePeriodSeconds`, else the default; 0 for pods not bound to a node or
    /// already finished). `None`: delete now.
    fn graceful_pod_delete(&self, res: &Resource, old: &Value, opts: &DeleteOptions) -> Option<i64> {
        if !(res.group.is_empty() && res.plural == "pods") {
            return None;
        }
        let default = self.pod_grace_period()?;
        let grace = opts.grace_period.unwrap_or(default).max(0);
        let bound = old.pointer("/spec/nodeName").and_then(Value::as_str).is_some_and(|n| !n.is_empty());
        let finished = matches!(old.pointer("/status/phase").and_then(Value::as_str), Some("Succeeded" | "Failed"));
        (grace > 0 && bound && !finished).then_some(grace)
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
            // No `deletionGracePeriodSeconds`: the namespace registry's own Delete sets none.
            meta(&mut t).insert("deletionTimestamp".into(), json!(self.now()));
            t["status"] = json!({"phase": "Terminating"});
            match self.store.commit(key, Some(object_rv(&old)), Write::Put(t)) {
                Ok(ev) => (*ev.object).clone(),
                Err(StoreError::Persist(e)) => return Err(persist_failed(e)),
                Err(_) => return Err(ApiError::stale("", "namespaces", &name)),
            }
        };
        if !self.config.controllers {
            return self.delete_namespace_without_controller(res, key, terminating);
        }
        for k in self.store.keys_in_namespace(&name) {
            if let Some(r) = self.registry.find_first(|r| r.group_resource() == k.gr && r.namespaced && r.alias_of.is_none()) {
                let _ = self.delete(&r, &name, &k.name, &DeleteOptions::default());
            }
        }
        if self.finalize_namespace(&name) {
            return Ok(Deleted::Now(self.present(res, terminating)));
        }
        let current = self.store.get(key).unwrap_or(terminating);
        Ok(Deleted::Pending(self.present(res, current)))
    }

    /// Namespace deletion with no namespace controller (envtest's server): the namespace stays
    /// `Terminating` with its contents, until a client empties `spec.finalizers` (through
    /// `namespaces/finalize`) and deletes it again, which upstream's namespace registry then
    /// does at once.
    fn delete_namespace_without_controller(&self, res: &Resource, key: &ObjectKey, terminating: Value) -> Result<Deleted> {
        let spec_finalizers = terminating.pointer("/spec/finalizers").and_then(Value::as_array).is_some_and(|f| !f.is_empty());
        if spec_finalizers || !finalizers(&terminating).is_empty() {
            return Ok(Deleted::Pending(self.present(res, terminating)));
        }
        match self.store.commit(key, Some(object_rv(&terminating)), Write::Delete) {
            Ok(ev) => Ok(Deleted::Now(self.present(res, (*ev.object).clone()))),
            Err(StoreError::Persist(e)) => Err(persist_failed(e)),
            Err(_) => Err(ApiError::stale("", "namespaces", &key.name)),
        }
    }

    /// Remove a terminating namespace once it is empty (the namespace controller's last step;
    /// never without controllers). Returns whether it is gone.
    fn finalize_namespace(&self, ns: &str) -> bool {
        if !self.config.controllers {
            return false;
        }
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

    pub(crate) fn namespace_terminating(&self, ns: &str) -> bool {
        self.namespace_object(ns).is_some_and(|o| is_terminating(&o))
    }

    pub(super) fn after_delete(&self, res: &Resource, obj: &Value) {
        self.keep_cluster_objects(res, obj);
        if res.namespaced {
            let ns = meta_str(obj, "namespace");
            if !ns.is_empty() && self.namespace_terminating(&ns) {
                self.finalize_namespace(&ns);
            }
        }
        if res.group == "apiextensions.k8s.io" && res.kind == "CustomResourceDefinition" {
            let group = obj.pointer("/spec/group").and_then(Value::as_str).unwrap_or_default().to_string();
            let plural = obj.pointer("/spec/names/plural").and_then(Value::as_str).unwrap_or_default().to_string();
            if let Some(r) = self.registry.find_first(|r| r.custom && r.group == group && r.plural == plural) {
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
        Ok(
            json!({"kind": res.list_kind, "apiVersion": res.api_version(), "metadata": {"resourceVersion": self.store.current_rv().to_string()}, "items": deleted}),
        )
    }
}

/// A Namespace is terminating once it has a deletion timestamp.
pub(super) fn is_terminating(namespace: &Value) -> bool {
    namespace.pointer("/metadata/deletionTimestamp").is_some()
}
