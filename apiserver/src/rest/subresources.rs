//! Subresources besides `/status`: `/scale` (autoscaling/v1 Scale), `pods/binding`, `pods/log`;
//! and the computed `componentstatuses`.

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
    let mut metadata =
        json!({"name": m["name"], "uid": m["uid"], "resourceVersion": m["resourceVersion"], "creationTimestamp": m["creationTimestamp"]});
    if let Some(ns) = m.get("namespace") {
        metadata["namespace"] = ns.clone();
    }
    json!({"kind": "Scale", "apiVersion": "autoscaling/v1", "metadata": metadata, "spec": {"replicas": replicas}, "status": status})
}

impl Core {
    /// POST `pods/binding`: assign a pod to a node (what the scheduler does).
    pub async fn bind(&self, res: &Resource, ns: &str, name: &str, body: &Value, opts: &WriteOptions) -> Result<Value> {
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
            let prepared = self.prepare_update(res, &old, new, Sub::Scale, opts, Decoded::Body).await?;
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
    pub async fn update_scale(
        &self,
        res: &Resource,
        ns: &str,
        name: &str,
        ptype: Option<PatchType>,
        body: &[u8],
        opts: &WriteOptions,
    ) -> Result<Value> {
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
            let prepared = self.prepare_update(res, &old, new, Sub::Scale, opts, Decoded::Body).await?;
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

/// Names of a pod's containers in one list (`containers`, `initContainers`), space-separated.
fn container_names(pod: &Value, list: &str) -> Vec<String> {
    pod.pointer(&format!("/spec/{list}"))
        .and_then(Value::as_array)
        .map(|cs| cs.iter().filter_map(|c| c["name"].as_str().map(String::from)).collect())
        .unwrap_or_default()
}

impl Core {
    /// GET `pods/{name}/log`. The simulated containers print nothing, so a started container's
    /// log is empty; the refusals are worded as the apiserver (container choice) and the
    /// kubelet (container state) word them.
    pub fn pod_log(&self, pods: &Resource, ns: &str, name: &str, container: Option<&str>, previous: bool) -> Result<String> {
        let pod = self.store.get(&self.key(pods, ns, name)).ok_or_else(|| ApiError::not_found("", "pods", name))?;
        let containers = container_names(&pod, "containers");
        let container = match container.filter(|c| !c.is_empty()) {
            Some(c) => {
                let all = ["containers", "initContainers", "ephemeralContainers"].iter().flat_map(|l| container_names(&pod, l)).collect::<Vec<_>>();
                if !all.iter().any(|n| n == c) {
                    return Err(ApiError::bad_request(format!("container {c} is not valid for pod {name}")));
                }
                c.to_string()
            }
            None if containers.len() == 1 => containers[0].clone(),
            None if containers.is_empty() => return Err(ApiError::bad_request(format!("a container name must be specified for pod {name}"))),
            None => {
                let mut e = format!("a container name must be specified for pod {name}, choose one of: [{}]", containers.join(" "));
                let init = container_names(&pod, "initContainers");
                if !init.is_empty() {
                    e += &format!(" or one of the init containers: [{}]", init.join(" "));
                }
                return Err(ApiError::bad_request(e));
            }
        };
        if pod.pointer("/spec/nodeName").and_then(Value::as_str).is_none_or(str::is_empty) {
            return Ok(String::new()); // not scheduled: upstream has no kubelet to ask and answers nothing
        }
        let status = ["containerStatuses", "initContainerStatuses", "ephemeralContainerStatuses"]
            .iter()
            .filter_map(|l| pod.pointer(&format!("/status/{l}")).and_then(Value::as_array))
            .flatten()
            .find(|s| s["name"] == container.as_str());
        let waiting_reason = |s: &Value| s.pointer("/state/waiting/reason").and_then(Value::as_str).map(String::from);
        let refused = |why: String| Err(ApiError::bad_request(format!("container {container:?} in pod {name:?} {why}")));
        match status {
            _ if previous && status.is_none_or(|s| s.pointer("/lastState/terminated").is_none()) => {
                Err(ApiError::bad_request(format!("previous terminated container {container:?} in pod {name:?} not found")))
            }
            None => refused("is waiting to start: ContainerCreating".into()),
            Some(s) if s.pointer("/state/terminated").is_some() || s.pointer("/lastState/terminated").is_some() => Ok(String::new()),
            Some(s) if s.pointer("/state/running").is_some() => Ok(String::new()),
            Some(s) => match waiting_reason(s).as_deref() {
                Some("ErrImagePull") => refused("is waiting to start: image can't be pulled".into()),
                Some("ImagePullBackOff") => refused("is waiting to start: trying and failing to pull image".into()),
                Some(reason) => refused(format!("is waiting to start: {reason}")),
                None => refused("is waiting to start - no logs yet".into()),
            },
        }
    }

    /// GET `componentstatuses[/name]` (deprecated upstream, still served): the store stands in
    /// for `etcd-0`; the scheduler and controller-manager are the simulated cluster's, healthy
    /// while it runs.
    pub fn component_statuses(&self, name: Option<&str>) -> Result<Value> {
        let cluster_runs = self.pod_grace_period().is_some();
        let item = |name: &str, healthy: bool, message: &str, error: &str| {
            let mut cond = json!({"type": "Healthy", "status": if healthy { "True" } else { "False" }});
            if healthy {
                cond["message"] = json!(message);
            } else {
                cond["error"] = json!(error);
            }
            json!({"kind": "ComponentStatus", "apiVersion": "v1", "metadata": {"name": name, "creationTimestamp": null}, "conditions": [cond]})
        };
        let down = "the simulated cluster (scheduler, kubelet, controllers) is not running";
        let items =
            vec![item("controller-manager", cluster_runs, "ok", down), item("scheduler", cluster_runs, "ok", down), item("etcd-0", true, "ok", "")];
        match name {
            Some(n) => items.into_iter().find(|i| i["metadata"]["name"] == n).ok_or_else(|| ApiError::not_found("", "componentstatuses", n)),
            None => Ok(json!({"kind": "ComponentStatusList", "apiVersion": "v1", "metadata": {}, "items": items})),
        }
    }
}
