//! `pods/{name}/eviction` (a `policy/v1` Eviction): delete a Pod unless that would violate its
//! PodDisruptionBudget, as upstream's `pkg/registry/core/pod/storage/eviction.go` decides:
//!
//! 1. Pods that are finished, Pending or already being deleted are deleted without a budget check.
//! 2. More than one matching budget is a 500; none, the Pod is deleted.
//! 3. A budget whose status the disruption controller has not caught up with
//!    (`status.observedGeneration` < `metadata.generation`), or with `disruptionsAllowed` 0, is
//!    a 429 `Cannot evict pod as it would violate the pod's disruption budget.`, with a
//!    `DisruptionBudget` cause saying why.
//! 4. An unready Pod is deleted without spending the budget when the budget's
//!    `unhealthyPodEvictionPolicy` is `AlwaysAllow`, or (`IfHealthyBudget`, the default) when the
//!    budget is already met.
//! 5. Otherwise the budget's `disruptionsAllowed` is decremented and the Pod recorded in
//!    `status.disruptedPods` (in one compare-and-swap write), then the Pod is deleted.

use super::*;

const VIOLATION: &str = "Cannot evict pod as it would violate the pod's disruption budget.";

fn pdb_resource() -> crate::resources::GroupResource {
    crate::resources::GroupResource { group: "policy".into(), resource: "poddisruptionbudgets".into() }
}

fn too_many_requests(cause: String) -> ApiError {
    let mut e = ApiError::forbidden(VIOLATION);
    e.code = 429;
    e.reason = "TooManyRequests".into();
    e.causes = vec![Cause::new("DisruptionBudget", cause, "")];
    e
}

fn pod_is_ready(pod: &Value) -> bool {
    pod.pointer("/status/conditions").and_then(Value::as_array).is_some_and(|cs| cs.iter().any(|c| c["type"] == "Ready" && c["status"] == "True"))
}

fn i64_at(v: &Value, p: &str) -> i64 {
    v.pointer(p).and_then(Value::as_i64).unwrap_or(0)
}

impl Core {
    /// POST `pods/{name}/eviction`: answers a Success Status (201) once the Pod is deleted.
    pub fn evict(&self, pods: &Resource, ns: &str, name: &str, eviction: &Value, dry_run: bool) -> Result<Value> {
        let body_name = eviction.pointer("/metadata/name").and_then(Value::as_str).unwrap_or_default();
        if !body_name.is_empty() && body_name != name {
            return Err(ApiError::bad_request(format!("name in URL does not match name in Eviction object: {name}, {body_name}")));
        }
        let delete_options = eviction.get("deleteOptions").cloned().unwrap_or_default();
        let opts = DeleteOptions {
            propagation: delete_options["propagationPolicy"].as_str().map(String::from),
            uid: delete_options.pointer("/preconditions/uid").and_then(Value::as_str).map(String::from),
            resource_version: delete_options.pointer("/preconditions/resourceVersion").and_then(Value::as_str).map(String::from),
            dry_run: dry_run || delete_options["dryRun"].as_array().is_some_and(|a| a.iter().any(|d| d == "All")),
            grace_period: delete_options["gracePeriodSeconds"].as_i64(),
            orphan_dependents: delete_options["orphanDependents"].as_bool(),
        };
        for _ in 0..16 {
            let pod = self.store.get(&self.key(pods, ns, name)).ok_or_else(|| ApiError::not_found("", "pods", name))?;
            let phase = pod.pointer("/status/phase").and_then(Value::as_str).unwrap_or("Pending");
            if matches!(phase, "Succeeded" | "Failed" | "Pending") || pod.pointer("/metadata/deletionTimestamp").is_some() {
                return self.delete_evicted(pods, ns, name, &opts);
            }
            let (budgets, _) = self.store.list(&pdb_resource(), Some(ns));
            let mut matching = budgets.into_iter().filter(|b| {
                b.pointer("/spec/selector")
                    .is_some_and(|s| !s.as_object().is_some_and(|m| m.is_empty()) && LabelSelector::from_object(s).matches(&pod))
            });
            let Some(pdb) = matching.next() else { return self.delete_evicted(pods, ns, name, &opts) };
            if matching.next().is_some() {
                return Err(ApiError::internal("This pod has more than one PodDisruptionBudget, which the eviction subresource does not support."));
            }
            let pdb_name = meta_str(&pdb, "name").to_string();
            let (desired, current) = (i64_at(&pdb, "/status/desiredHealthy"), i64_at(&pdb, "/status/currentHealthy"));
            if !pod_is_ready(&pod) {
                let policy = pdb.pointer("/spec/unhealthyPodEvictionPolicy").and_then(Value::as_str).unwrap_or("IfHealthyBudget");
                if policy == "AlwaysAllow" || (current >= desired && desired > 0) {
                    return self.delete_evicted(pods, ns, name, &opts);
                }
            }
            if i64_at(&pdb, "/status/observedGeneration") < i64_at(&pdb, "/metadata/generation") {
                return Err(too_many_requests(format!("The disruption budget {pdb_name} is still being processed by the server.")));
            }
            let allowed = i64_at(&pdb, "/status/disruptionsAllowed");
            if allowed < 0 {
                return Err(ApiError::forbidden("pdb disruptions allowed is negative"));
            }
            if allowed == 0 {
                return Err(too_many_requests(format!("The disruption budget {pdb_name} needs {desired} healthy pods and has {current} currently")));
            }
            if opts.dry_run {
                return Ok(success(None));
            }
            let mut spent = pdb.clone();
            spent["status"]["disruptionsAllowed"] = json!(allowed - 1);
            let disrupted = schema::as_map(&mut spent["status"]).entry("disruptedPods").or_insert_with(|| json!({}));
            schema::as_map(disrupted).insert(name.into(), json!(self.now()));
            let key = ObjectKey { gr: pdb_resource(), namespace: ns.into(), name: pdb_name };
            match self.store.commit(&key, Some(object_rv(&pdb)), Write::Put(spent)) {
                Ok(_) => return self.delete_evicted(pods, ns, name, &opts),
                Err(StoreError::Persist(e)) => return Err(persist_failed(e)),
                Err(_) => continue, // the budget moved: decide again
            }
        }
        Err(ApiError::stale("policy", "poddisruptionbudgets", name))
    }

    fn delete_evicted(&self, pods: &Resource, ns: &str, name: &str, opts: &DeleteOptions) -> Result<Value> {
        self.delete(pods, ns, name, opts)?;
        Ok(success(None))
    }
}
