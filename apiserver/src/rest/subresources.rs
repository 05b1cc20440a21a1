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

/// The Scale object of `obj` under `spec`, as upstream's `autoscaling/v1` type serializes it:
/// `spec.replicas` and `status.selector` are `omitempty` (a Deployment scaled to 0 answers
/// `"spec": {}`), `status.replicas` is always there.
pub fn scale_of(obj: &Value, spec: &crate::resources::ScaleSpec) -> Value {
    let replicas = obj.pointer(&pointer(&spec.spec_replicas_path)).cloned().unwrap_or(json!(0));
    let status_replicas = obj.pointer(&pointer(&spec.status_replicas_path)).cloned().unwrap_or(json!(0));
    let mut status = json!({"replicas": status_replicas});
    if let Some(p) = &spec.label_selector_path {
        let selector = match obj.pointer(&pointer(p)) {
            Some(Value::String(s)) => s.clone(),
            Some(sel @ Value::Object(_)) => selector_string(sel),
            _ => String::new(),
        };
        if !selector.is_empty() {
            status["selector"] = json!(selector);
        }
    }
    let m = &obj["metadata"];
    let mut metadata = json!({"name": m["name"]});
    if let Some(ns) = m.get("namespace") {
        metadata["namespace"] = ns.clone();
    }
    for field in ["uid", "resourceVersion", "creationTimestamp"] {
        metadata[field] = m[field].clone();
    }
    let spec = if replicas == json!(0) { json!({}) } else { json!({"replicas": replicas}) };
    json!({"kind": "Scale", "apiVersion": "autoscaling/v1", "metadata": metadata, "spec": spec, "status": status})
}

/// A built-in kind's selector as the Scale's `status.selector` string: a LabelSelector
/// (`matchLabels` as `k=v`, `matchExpressions` as `k in (a,b)`, `k notin (a)`, `k`, `!k`) or a
/// ReplicationController's plain map, requirements sorted by key and set values sorted, as
/// upstream's `labels.Selector.String()` prints them.
pub fn selector_string(sel: &Value) -> String {
    let Some(map) = sel.as_object() else { return String::new() };
    let label_selector = map.contains_key("matchLabels") || map.contains_key("matchExpressions");
    let mut requirements: Vec<(String, String)> = vec![];
    let labels = if label_selector { sel.get("matchLabels").and_then(Value::as_object) } else { Some(map) };
    for (k, v) in labels.into_iter().flatten() {
        requirements.push((k.clone(), format!("{k}={}", v.as_str().unwrap_or_default())));
    }
    for e in sel.get("matchExpressions").and_then(Value::as_array).into_iter().flatten().filter(|_| label_selector) {
        let key = e["key"].as_str().unwrap_or_default().to_string();
        let mut values: Vec<&str> = e["values"].as_array().into_iter().flatten().filter_map(Value::as_str).collect();
        values.sort_unstable();
        values.dedup();
        let text = match e["operator"].as_str().unwrap_or_default() {
            "In" => format!("{key} in ({})", values.join(",")),
            "NotIn" => format!("{key} notin ({})", values.join(",")),
            "Exists" => key.clone(),
            "DoesNotExist" => format!("!{key}"),
            _ => continue,
        };
        requirements.push((key, text));
    }
    requirements.sort_by(|a, b| a.0.cmp(&b.0));
    requirements.into_iter().map(|(_, text)| text).collect::<Vec<_>>().join(",")
}

/// The Scale a PUT or patch asks for, checked as upstream's decoding and name checks do.
fn check_scale_body(wanted: &Value, name: &str, patched: bool) -> Result<()> {
    let kind = wanted["kind"].as_str().unwrap_or_default();
    if !patched && !kind.is_empty() && kind != "Scale" {
        let version = wanted["apiVersion"].as_str().unwrap_or_default().rsplit('/').next().unwrap_or_default().to_string();
        return Err(ApiError::bad_request(format!(
            "{kind} in version {version:?} cannot be handled as a Scale: converting ({version}.{kind}) to (autoscaling.Scale): unknown conversion"
        )));
    }
    let replicas = wanted.pointer("/spec/replicas");
    if let Some(r) = replicas.filter(|r| !r.is_null() && r.as_i64().and_then(|n| i32::try_from(n).ok()).is_none()) {
        let go_type = match r {
            Value::String(_) => "string".to_string(),
            Value::Bool(_) => "bool".to_string(),
            Value::Array(_) => "array".to_string(),
            Value::Object(_) => "object".to_string(),
            n => format!("number {n}"),
        };
        let reason = format!("json: cannot unmarshal {go_type} into Go struct field ScaleSpec.spec.replicas of type int32");
        return Err(ApiError::bad_request(format!("Scale in version \"v1\" cannot be handled as a Scale: {reason}")));
    }
    match wanted.pointer("/metadata/name").and_then(Value::as_str).unwrap_or_default() {
        "" => Err(ApiError::bad_request(format!("the name of the object ({name} based on URL) was undeterminable: name must be provided"))),
        n if n != name => Err(ApiError::bad_request(format!("the name of the object ({n}) does not match the name on the URL ({name})"))),
        _ => Ok(()),
    }
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

    /// PUT/PATCH `/scale`: only the desired replicas change (checked as upstream decodes and
    /// validates a Scale; a stale `resourceVersion` conflicts).
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
        if ptype == Some(PatchType::Apply) {
            return self.apply_scale(res, ns, name, &spec, body, opts).await;
        }
        for _ in 0..16 {
            let old = self.store.get(&self.key(res, ns, name)).ok_or_else(|| ApiError::not_found(&res.group, &res.plural, name))?;
            let current = scale_of(&self.present(res, old.clone()), &spec);
            let patch: Value = serde_json::from_slice(body).map_err(|e| ApiError::bad_request(e.to_string()))?;
            let wanted = match ptype {
                None => patch,
                Some(PatchType::Apply) => unreachable!("an apply of a Scale is apply_scale's"),
                Some(PatchType::Merge) => {
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
            check_scale_body(&wanted, name, ptype.is_some())?;
            let rv = wanted.pointer("/metadata/resourceVersion").and_then(Value::as_str).unwrap_or_default();
            if !rv.is_empty() && rv != object_rv(&old).to_string() {
                return Err(ApiError::stale(&res.group, &res.plural, name));
            }
            let replicas = wanted.pointer("/spec/replicas").filter(|r| !r.is_null()).cloned().unwrap_or(json!(0));
            check_replicas(&replicas, name)?;
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

/// Upstream's `ValidateScale`: replicas may not be negative.
fn check_replicas(replicas: &Value, name: &str) -> Result<()> {
    if replicas.as_i64().is_none_or(|r| r < 0) {
        return Err(ApiError::invalid(
            "autoscaling",
            "Scale",
            name,
            vec![Cause::new("FieldValueInvalid", format!("Invalid value: {replicas}: must be greater than or equal to 0"), "spec.replicas")],
        ));
    }
    Ok(())
}

impl Core {
    /// Server-side apply of a Scale: an apply of the parent's replicas field alone, recorded
    /// for subresource `scale`, so it conflicts with (and takes over from) whoever else set the
    /// replicas, as upstream's scale handler maps Scale field sets onto the parent.
    async fn apply_scale(
        &self,
        res: &Resource,
        ns: &str,
        name: &str,
        spec: &crate::resources::ScaleSpec,
        body: &[u8],
        opts: &WriteOptions,
    ) -> Result<Value> {
        let applied: Value = crate::yaml::from_slice(body).map_err(|e| ApiError::bad_request(format!("error decoding YAML: {e}")))?;
        if applied.get("apiVersion").is_none() || applied.get("kind").is_none() {
            return Err(ApiError::bad_request("invalid object type: /, Kind="));
        }
        check_scale_body(&applied, name, false)?;
        self.store.get(&self.key(res, ns, name)).ok_or_else(|| ApiError::not_found(&res.group, &res.plural, name))?;
        let mut parent = json!({"apiVersion": res.api_version(), "kind": res.kind, "metadata": {"name": name}});
        if let Some(replicas) = applied.pointer("/spec/replicas").filter(|r| !r.is_null()) {
            check_replicas(replicas, name)?;
            set_path(&mut parent, &spec.spec_replicas_path, replicas.clone());
        }
        let stored = self.apply(res, ns, name, parent, Sub::Scale, opts).await.map_err(|mut e| {
            // Upstream applies in the Scale's terms: every manager of the replicas is named
            // `using autoscaling/v1` in a conflict.
            if e.reason == "Conflict" {
                let (ours, scale) = (format!(" using {}", res.api_version()), " using autoscaling/v1");
                e.message = e.message.replace(&ours, scale);
                e.causes.iter_mut().for_each(|c| c.message = c.message.replace(&ours, scale));
            }
            e
        })?;
        Ok(scale_of(&stored, spec))
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::resources::ScaleSpec;

    fn built_in() -> ScaleSpec {
        ScaleSpec {
            spec_replicas_path: ".spec.replicas".into(),
            status_replicas_path: ".status.replicas".into(),
            label_selector_path: Some(".spec.selector".into()),
        }
    }

    #[test]
    fn selectors_print_as_upstreams_label_selector_strings() {
        let sts = json!({"matchLabels": {"z": "1"}, "matchExpressions": [{"key": "app", "operator": "In", "values": ["sts", "b"]}]});
        assert_eq!(selector_string(&sts), "app in (b,sts),z=1", "sorted by key, set values sorted");
        let rc = json!({"tier": "x", "app": "rc"});
        assert_eq!(selector_string(&rc), "app=rc,tier=x", "a ReplicationController's map");
        let other = json!({"matchExpressions": [{"key": "a", "operator": "Exists"}, {"key": "b", "operator": "DoesNotExist"}, {"key": "c", "operator": "NotIn", "values": ["x"]}]});
        assert_eq!(selector_string(&other), "a,!b,c notin (x)");
        assert_eq!(selector_string(&json!({})), "");
    }

    #[test]
    fn a_scale_of_zero_replicas_has_an_empty_spec_and_no_empty_selector() {
        let deployment = json!({"metadata": {"name": "web", "namespace": "d", "uid": "u", "resourceVersion": "7", "creationTimestamp": "t"},
            "spec": {"replicas": 0, "selector": {}}, "status": {}});
        let scale = scale_of(&deployment, &built_in());
        assert_eq!(scale["spec"], json!({}));
        assert_eq!(scale["status"], json!({"replicas": 0}));
        let mut keys: Vec<&String> = scale["metadata"].as_object().unwrap().keys().collect();
        keys.sort();
        assert_eq!(keys, ["creationTimestamp", "name", "namespace", "resourceVersion", "uid"]);
    }

    #[test]
    fn a_scale_body_is_checked_as_upstream_decodes_it() {
        let message = |body: Value, patched: bool| check_scale_body(&body, "web", patched).unwrap_err().message;
        assert_eq!(
            message(json!({"kind": "Deployment", "apiVersion": "apps/v1", "metadata": {"name": "web"}}), false),
            "Deployment in version \"v1\" cannot be handled as a Scale: converting (v1.Deployment) to (autoscaling.Scale): unknown conversion"
        );
        assert_eq!(
            message(json!({"kind": "Scale", "metadata": {"name": "web"}, "spec": {"replicas": "x"}}), false),
            "Scale in version \"v1\" cannot be handled as a Scale: json: cannot unmarshal string into Go struct field ScaleSpec.spec.replicas of type int32"
        );
        assert_eq!(
            message(json!({"spec": {"replicas": 2}}), false),
            "the name of the object (web based on URL) was undeterminable: name must be provided"
        );
        assert_eq!(message(json!({"metadata": {"name": "zz"}}), true), "the name of the object (zz) does not match the name on the URL (web)");
        assert!(check_scale_body(&json!({"kind": "Scale", "metadata": {"name": "web"}, "spec": {}}), "web", false).is_ok());
    }
}
