//! The disruption controller: keeps each PodDisruptionBudget's `status` as upstream's
//! (`pkg/controller/disruption`) does, so `pods/eviction` can decide.
//!
//! - `expectedPods`: the Pods the selector matches in the budget's namespace (upstream takes
//!   the scale of their controllers for percentages and `maxUnavailable`; here the Pods are
//!   counted, which is the same for Pods that exist);
//! - `currentHealthy`: those that are Ready, not being deleted, and not recorded in
//!   `disruptedPods` by an eviction in the last 2 minutes (entries for Pods that are gone or
//!   older are dropped);
//! - `desiredHealthy`: `minAvailable` (a percentage rounds up), or `expectedPods` −
//!   `maxUnavailable` (rounded up), or 0 when neither is set;
//! - `disruptionsAllowed` = max(0, currentHealthy − desiredHealthy), `observedGeneration`, and
//!   the `DisruptionAllowed` condition (`SufficientPods` / `InsufficientPods`).

use super::{Next, builtin, deleting, meta_str, opts};
use apiserver::rest::{Core, Sub};
use apiserver::selector::LabelSelector;
use chrono::{DateTime, Utc};
use serde_json::{Map, Value, json};

const MANAGER: &str = "disruption-controller";
/// How long an eviction's entry in `disruptedPods` keeps the Pod out of `currentHealthy`.
const DISRUPTED_POD_TIMEOUT_SECONDS: i64 = 120;

/// Whether a commit concerns the disruption controller: budgets and Pods.
pub(crate) fn relevant(e: &apiserver::store::Event) -> bool {
    (e.key.gr.group == "policy" && e.key.gr.resource == "poddisruptionbudgets") || (e.key.gr.group.is_empty() && e.key.gr.resource == "pods")
}

fn ready(pod: &Value) -> bool {
    pod.pointer("/status/conditions").and_then(Value::as_array).is_some_and(|cs| cs.iter().any(|c| c["type"] == "Ready" && c["status"] == "True"))
}

/// An int-or-percent scaled against `total`, rounded up (`GetScaledValueFromIntOrPercent(.., true)`).
fn scaled(v: &Value, total: i64) -> i64 {
    match v {
        Value::String(s) => s.strip_suffix('%').and_then(|p| p.parse::<i64>().ok()).map(|p| (p * total + 99) / 100).unwrap_or(0),
        other => other.as_i64().unwrap_or(0),
    }
}

/// The status a budget should have, given the Pods in its namespace.
pub fn status_of(pdb: &Value, pods: &[&Value], now: DateTime<Utc>) -> Value {
    let selector = pdb.pointer("/spec/selector");
    let matching: Vec<&&Value> = match selector {
        Some(s) if !s.as_object().is_some_and(Map::is_empty) => pods.iter().filter(|p| LabelSelector::from_object(s).matches(p)).collect(),
        _ => vec![], // an empty or missing selector matches nothing in policy/v1
    };
    let expected = matching.len() as i64;
    let mut disrupted = Map::new();
    if let Some(old) = pdb.pointer("/status/disruptedPods").and_then(Value::as_object) {
        for (name, at) in old {
            let fresh = at
                .as_str()
                .and_then(|t| DateTime::parse_from_rfc3339(t).ok())
                .is_some_and(|t| (now - t.with_timezone(&Utc)).num_seconds() < DISRUPTED_POD_TIMEOUT_SECONDS);
            let present = matching.iter().any(|p| meta_str(p, "name") == name && !deleting(p));
            if fresh && present {
                disrupted.insert(name.clone(), at.clone());
            }
        }
    }
    let healthy = matching.iter().filter(|p| ready(p) && !deleting(p) && !disrupted.contains_key(meta_str(p, "name"))).count() as i64;
    let spec = &pdb["spec"];
    let desired = match (spec.get("minAvailable"), spec.get("maxUnavailable")) {
        (Some(min), _) => scaled(min, expected),
        (None, Some(max)) => (expected - scaled(max, expected)).max(0),
        (None, None) => 0,
    };
    let allowed = (healthy - desired).max(0);
    let generation = pdb.pointer("/metadata/generation").cloned().unwrap_or(json!(1));
    let (cond_status, reason) = if allowed > 0 { ("True", "SufficientPods") } else { ("False", "InsufficientPods") };
    let old_cond = pdb.pointer("/status/conditions/0");
    let transition = match old_cond {
        Some(c) if c["status"] == cond_status => c["lastTransitionTime"].clone(),
        _ => json!(apiserver::clock::timestamp(now)),
    };
    let mut status = json!({
        "observedGeneration": generation, "disruptionsAllowed": allowed, "currentHealthy": healthy,
        "desiredHealthy": desired, "expectedPods": expected,
        "conditions": [{"type": "DisruptionAllowed", "status": cond_status, "reason": reason, "message": "",
            "observedGeneration": generation, "lastTransitionTime": transition}],
    });
    if !disrupted.is_empty() {
        status["disruptedPods"] = Value::Object(disrupted);
    }
    status
}

/// One pass over every budget.
pub(crate) fn pass(core: &Core) -> Next {
    let mut next = Next::default();
    let res = builtin(core, "policy", "v1", "poddisruptionbudgets");
    let pods_res = builtin(core, "", "v1", "pods");
    let budgets = core.store.list_shared(&res.group_resource(), None).0;
    let clock = core.config.clock.now();
    for pdb in &budgets {
        let ns = meta_str(pdb, "namespace");
        let pods = core.store.list_shared(&pods_res.group_resource(), Some(ns)).0;
        let pods: Vec<&Value> = pods.iter().map(|p| &**p).collect();
        let status = status_of(pdb, &pods, clock);
        if pdb.get("status") == Some(&status) {
            continue;
        }
        let mut new = Value::clone(pdb);
        new["status"] = status;
        match apiserver::rest::wait(core.update(&res, ns, meta_str(pdb, "name"), new, Sub::Status, &opts(MANAGER))) {
            Ok(_) => {}
            Err(e) if e.code == 404 => {}
            Err(e) => {
                tracing::debug!(error = %e.message, "disruption controller could not write status");
                next.retry = true;
            }
        }
    }
    next
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pod(name: &str, ready_: bool) -> Value {
        json!({"metadata": {"name": name, "labels": {"app": "web"}}, "status": {"conditions": [{"type": "Ready", "status": if ready_ { "True" } else { "False" }}]}})
    }

    #[test]
    fn budgets_count_ready_pods_against_min_available_or_max_unavailable() {
        let now = Utc::now();
        let pods = [pod("a", true), pod("b", true), pod("c", false)];
        let refs: Vec<&Value> = pods.iter().collect();
        let min = json!({"metadata": {"generation": 1}, "spec": {"minAvailable": 2, "selector": {"matchLabels": {"app": "web"}}}});
        let s = status_of(&min, &refs, now);
        assert_eq!(
            (s["expectedPods"].as_i64(), s["currentHealthy"].as_i64(), s["desiredHealthy"].as_i64(), s["disruptionsAllowed"].as_i64()),
            (Some(3), Some(2), Some(2), Some(0))
        );
        assert_eq!(s["conditions"][0]["reason"], "InsufficientPods");
        let pct = json!({"metadata": {"generation": 1}, "spec": {"maxUnavailable": "34%", "selector": {"matchLabels": {"app": "web"}}}});
        let s = status_of(&pct, &refs, now);
        // 34% of 3 rounds up to 2 unavailable: desired 1, allowed 1.
        assert_eq!((s["desiredHealthy"].as_i64(), s["disruptionsAllowed"].as_i64()), (Some(1), Some(1)));
        let mut evicted = min.clone();
        evicted["status"] = json!({"disruptedPods": {"a": apiserver::clock::timestamp(now)}});
        assert_eq!(status_of(&evicted, &refs, now)["currentHealthy"], 1);
    }
}
