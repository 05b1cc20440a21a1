//! PATCH in all its forms: merge, JSON, strategic merge, server-side apply, and patches through a view
//! that shares another resource's storage.

use super::*;

impl Core {
    /// PATCH (any patch type; main resource or `/status`).
    #[allow(clippy::too_many_arguments)] // mirrors the request: target, patch type, body, subresource, options
    pub async fn patch(&self, res: &Resource, ns: &str, name: &str, ptype: PatchType, body: &[u8], sub: Sub, opts: &WriteOptions) -> Result<Value> {
        if ptype == PatchType::Strategic && res.custom {
            // A patch type the server knows but a custom resource does not take is refused by
            // the patch handler, which lists the types it takes (an unknown content type is
            // refused before, in fewer words: `unsupported_patch_type`).
            return Err(ApiError::unsupported_media_type(&[
                "application/json-patch+json",
                "application/merge-patch+json",
                "application/apply-patch+yaml",
            ]));
        }
        let patch: Value = match ptype {
            PatchType::Apply => crate::yaml::from_slice(body).map_err(|e| ApiError::bad_request(format!("error decoding YAML: {e}")))?,
            _ => serde_json::from_slice(body).map_err(|e| ApiError::bad_request(format!("error decoding patch: {e}")))?,
        };
        if ptype == PatchType::Apply {
            return self.apply(res, ns, name, patch, sub, opts).await;
        }
        for _ in 0..16 {
            // Shared with the store: only `current` is a copy, and the patch applies to it.
            let old = self.store.get_shared(&self.key(res, ns, name)).ok_or_else(|| ApiError::not_found(&res.group, &res.plural, name))?;
            let current = self.present(res, Value::clone(&old));
            let patched = match ptype {
                PatchType::Merge => {
                    let mut v = current;
                    patch::merge_patch(&mut v, &patch)?;
                    v
                }
                PatchType::Json => {
                    let mut v = current;
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
            let decoded = if ptype == PatchType::Strategic { Decoded::Strategic(&patch) } else { Decoded::Patched };
            let new = self.prepare_update(res, &old, patched, sub, opts, decoded).await?;
            match self.commit_update(res, ns, &old, new, opts) {
                Ok(v) => return Ok(v),
                Err(StoreError::NotFound) => return Err(ApiError::not_found(&res.group, &res.plural, name)),
                Err(StoreError::Persist(e)) => return Err(persist_failed(e)),
                Err(_) => continue,
            }
        }
        Err(ApiError::stale(&res.group, &res.plural, name))
    }

    pub(super) async fn apply(&self, res: &Resource, ns: &str, name: &str, applied: Value, sub: Sub, opts: &WriteOptions) -> Result<Value> {
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
            let merged = fields::apply(old.as_ref(), &applied, &w, opts.force)?;
            match old {
                None => {
                    let mut body = merged;
                    meta(&mut body).insert("name".into(), json!(name));
                    let managed = body.pointer("/metadata/managedFields").cloned().filter(|_| self.config.managed_fields);
                    match self.create_with(res, ns, body, opts, managed).await {
                        Err(e) if e.code == 409 => continue,
                        other => return other,
                    }
                }
                Some(old) => {
                    let managed = merged.pointer("/metadata/managedFields").cloned();
                    let no_fm = WriteOptions { field_manager: String::new(), ..opts.clone() };
                    let new = self.prepare_update(res, &old, merged, sub, &no_fm, Decoded::Patched).await?;
                    // Values unchanged but ownership moved (a first apply of fields
                    // another manager set): upstream stores the new managedFields
                    // (a write); an apply that changes neither is a no-op.
                    let new = match new {
                        None if self.config.managed_fields && !fields::same_ownership(&old, managed.as_ref()) => Some(old.clone()),
                        other => other,
                    };
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
                        Err(StoreError::Persist(e)) => return Err(persist_failed(e)),
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
        self.registry.find_first(|r| r.alias_of.is_none() && r.group == gr.group && r.plural == gr.resource)
    }

    /// PATCH through a view sharing another resource's storage: the patch applies to the view's
    /// representation, the result is converted back and stored.
    #[allow(clippy::too_many_arguments)] // mirrors `patch`
    pub async fn patch_view(
        &self,
        view: &Resource,
        storage: &Resource,
        ns: &str,
        name: &str,
        ptype: PatchType,
        body: &[u8],
        opts: &WriteOptions,
    ) -> Result<Value> {
        if ptype == PatchType::Apply {
            let applied: Value = crate::yaml::from_slice(body).map_err(|e| ApiError::bad_request(format!("error decoding YAML: {e}")))?;
            let core = crate::convert::to_storage(view, applied);
            let bytes = serde_json::to_vec(&core).expect("json");
            return self.patch(storage, ns, name, ptype, &bytes, Sub::Main, opts).await.map(|o| self.present(view, o));
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
            let decoded = if ptype == PatchType::Strategic { Decoded::Strategic(&patch) } else { Decoded::Patched };
            let new = self.prepare_update(storage, &old, crate::convert::to_storage(view, current), Sub::Main, opts, decoded).await?;
            match self.commit_update(storage, ns, &old, new, opts) {
                Ok(v) => return Ok(self.present(view, v)),
                Err(StoreError::NotFound) => return Err(ApiError::not_found(&view.group, &view.plural, name)),
                Err(StoreError::Persist(e)) => return Err(persist_failed(e)),
                Err(_) => continue,
            }
        }
        Err(ApiError::stale(&view.group, &view.plural, name))
    }
}
