//! Subresources besides `/status`: `/scale` (autoscaling/v1 Scale) and `pods/binding`.

use super::*;

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

impl Core {
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
                Err(StoreError::Persist(e)) => return Err(persist_failed(e)),
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
                Some(PatchType::Apply) => crate::yaml::from_slice(body).map_err(ApiError::bad_request)?,
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
                Err(StoreError::Persist(e)) => return Err(persist_failed(e)),
                Err(_) => continue,
            }
        }
        Err(ApiError::stale(&res.group, &res.plural, name))
    }
}
