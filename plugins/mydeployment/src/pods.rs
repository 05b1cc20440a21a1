//! What the controller reads from a Pod: readiness and availability
//! (`podutil.IsPodReady` / `IsPodAvailable`), whether it still counts
//! (`controller.IsPodActive`), and the order in which surplus Pods are deleted
//! (`controller.ActivePodsWithRanks`, as the ReplicaSet controller's
//! `getPodsToDelete` uses it).

use std::cmp::Ordering;
use std::collections::BTreeMap;

use operator_plugin_sdk::k8s_openapi;
use operator_plugin_sdk::k8s_openapi::api::core::v1::PodCondition;
use operator_plugin_sdk::k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, Time as MetaTime};
use operator_plugin_sdk::{ObjectRef, Time};
use serde::Deserialize;

use crate::api::POD_TEMPLATE_HASH_LABEL;

/// The annotation users set to steer which Pods go first on scale down.
pub const POD_DELETION_COST_ANNOTATION: &str = "controller.kubernetes.io/pod-deletion-cost";

/// A child `v1` Pod as the controller reads it: metadata, `spec.nodeName`,
/// and the status fields below; everything else is skipped unparsed.
/// Reading children as k8s-openapi's whole `Pod` links PodSpec's
/// deserializer into the plugin (mydeployment.wasm 0.64 MB -> 1.39 MB) and
/// parses every Pod's containers on every reconcile.
#[derive(Clone, Debug, Default, Deserialize)]
pub struct Pod {
    #[serde(default)]
    pub metadata: ObjectMeta,
    #[serde(default)]
    pub spec: Option<PodSpec>,
    #[serde(default)]
    pub status: Option<PodStatus>,
}

/// The part of a PodSpec the controller reads.
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PodSpec {
    #[serde(default)]
    pub node_name: Option<String>,
}

/// The part of a PodStatus the controller reads.
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PodStatus {
    #[serde(default)]
    pub phase: Option<String>,
    #[serde(default)]
    pub conditions: Option<Vec<PodCondition>>,
    #[serde(default)]
    pub container_statuses: Option<Vec<ContainerStatus>>,
}

/// The part of a ContainerStatus the controller reads.
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ContainerStatus {
    #[serde(default)]
    pub restart_count: i32,
}

operator_plugin_sdk::view_of!(Pod, k8s_openapi::api::core::v1::Pod);

/// The facts about one Pod the controller decides on.
#[derive(Clone, Debug, PartialEq)]
pub struct PodView {
    pub name: String,
    pub uid: String,
    /// `pod-template-hash` label; empty for a Pod without one.
    pub hash: String,
    pub node_name: String,
    pub phase: String,
    pub created: Option<Time>,
    /// `lastTransitionTime` of `Ready=True`, when the Pod is ready.
    pub ready_since: Option<Time>,
    pub ready: bool,
    pub restarts: i64,
    pub deletion_cost: i32,
    pub terminating: bool,
    pub labels: BTreeMap<String, String>,
    /// What a delete names.
    pub reference: ObjectRef,
}

fn time(t: &MetaTime) -> Time {
    Time::from_unix_millis(t.0.as_millisecond())
}

impl PodView {
    pub fn from_pod(pod: Pod) -> Self {
        let reference = ObjectRef::of(&pod);
        let meta = pod.metadata;
        let status = pod.status.unwrap_or_default();
        let ready_condition = status.conditions.as_deref().and_then(|cs| cs.iter().find(|c| c.type_ == "Ready"));
        let ready = ready_condition.is_some_and(|c| c.status == "True");
        let ready_since = ready_condition.filter(|_| ready).and_then(|c| c.last_transition_time.as_ref()).map(time);
        let restarts = status.container_statuses.as_deref().and_then(|cs| cs.iter().map(|c| i64::from(c.restart_count)).max()).unwrap_or(0);
        let labels = meta.labels.unwrap_or_default();
        // Invalid or missing cost counts as 0, as `GetDeletionCostFromPodAnnotations` callers treat it.
        let deletion_cost =
            meta.annotations.as_ref().and_then(|a| a.get(POD_DELETION_COST_ANNOTATION)).and_then(|v| v.parse::<i32>().ok()).unwrap_or(0);
        PodView {
            name: meta.name.unwrap_or_default(),
            uid: meta.uid.unwrap_or_default(),
            hash: labels.get(POD_TEMPLATE_HASH_LABEL).cloned().unwrap_or_default(),
            node_name: pod.spec.and_then(|s| s.node_name).unwrap_or_default(),
            phase: status.phase.unwrap_or_default(),
            created: meta.creation_timestamp.as_ref().map(time),
            ready_since,
            ready,
            restarts,
            deletion_cost,
            terminating: meta.deletion_timestamp.is_some(),
            labels,
            reference,
        }
    }

    /// `controller.IsPodActive`: not finished and not being deleted. Only
    /// active Pods count as replicas, exactly as the ReplicaSet controller
    /// counts them.
    pub fn is_active(&self) -> bool {
        !self.terminating && self.phase != "Succeeded" && self.phase != "Failed"
    }

    /// `podutil.IsPodAvailable`: ready for longer than `min_ready_seconds`
    /// (strictly: `lastTransitionTime + minReadySeconds < now`).
    pub fn is_available(&self, min_ready_seconds: i32, now: Time) -> bool {
        if !self.ready {
            return false;
        }
        if min_ready_seconds <= 0 {
            return true;
        }
        self.ready_since.is_some_and(|since| since.unix_millis() + i64::from(min_ready_seconds) * 1000 < now.unix_millis())
    }

    /// For a ready Pod not yet available: when it will be (the moment it
    /// passes `minReadySeconds`, plus one millisecond for the strict `<`).
    pub fn available_at(&self, min_ready_seconds: i32, now: Time) -> Option<i64> {
        if !self.ready || min_ready_seconds <= 0 || self.is_available(min_ready_seconds, now) {
            return None;
        }
        self.ready_since.map(|since| since.unix_millis() + i64::from(min_ready_seconds) * 1000 + 1)
    }
}

/// `podPhaseToOrdinal`: Pending < Unknown < Running; anything else is 0.
fn phase_ordinal(phase: &str) -> u8 {
    match phase {
        "Unknown" => 1,
        "Running" => 2,
        _ => 0,
    }
}

/// `afterOrZero(a, b)` as an ordering: a zero (missing) time sorts first,
/// then later times before earlier ones.
fn newer_or_zero_first(a: Option<Time>, b: Option<Time>) -> Ordering {
    match (a, b) {
        (None, None) => Ordering::Equal,
        (None, Some(_)) => Ordering::Less,
        (Some(_), None) => Ordering::Greater,
        (Some(a), Some(b)) => b.cmp(&a),
    }
}

/// `logarithmicRankDiff`: compares `floor(log2(now - t))` in nanoseconds, so
/// Pods created (or ready) within the same power-of-two age bucket tie and a
/// random-looking UID order spreads deletions across them
/// (the LogarithmicScaleDown feature, on by default since 1.22).
fn logarithmic_rank(t: Time, now: Time) -> i64 {
    let age_ns = (now.unix_millis() - t.unix_millis()) as f64 * 1e6;
    if age_ns > 0.0 { age_ns.log2().floor() as i64 } else { -1 }
}

/// Compares two times the way `ActivePodsWithRanks.Less` does with
/// LogarithmicScaleDown: younger bucket first, UIDs break ties within one.
fn compare_times(a: &PodView, at: Option<Time>, b: &PodView, bt: Option<Time>, now: Time) -> Ordering {
    match (at, bt) {
        (Some(x), Some(y)) if x != y => {
            let diff = logarithmic_rank(x, now) - logarithmic_rank(y, now);
            if diff == 0 { a.uid.cmp(&b.uid) } else { diff.cmp(&0) }
        }
        _ => newer_or_zero_first(at, bt),
    }
}

/// `ActivePodsWithRanks.Less`: the Pod that should be deleted first sorts
/// first. `rank` is the number of this controller's active Pods sharing the
/// Pod's node (`getPodsRankedByRelatedPodsOnSameNode`): doubled-up Pods go
/// first, spreading what remains across nodes.
pub fn deletion_order(a: &PodView, a_rank: usize, b: &PodView, b_rank: usize, now: Time) -> Ordering {
    // 1. Unassigned < assigned.
    if a.node_name != b.node_name && (a.node_name.is_empty() || b.node_name.is_empty()) {
        return if a.node_name.is_empty() { Ordering::Less } else { Ordering::Greater };
    }
    // 2. Pending < Unknown < Running.
    let phases = phase_ordinal(&a.phase).cmp(&phase_ordinal(&b.phase));
    if phases != Ordering::Equal {
        return phases;
    }
    // 3. Not ready < ready.
    if a.ready != b.ready {
        return if a.ready { Ordering::Greater } else { Ordering::Less };
    }
    // 4. Lower pod-deletion-cost < higher.
    if a.deletion_cost != b.deletion_cost {
        return a.deletion_cost.cmp(&b.deletion_cost);
    }
    // 5. Doubled up < not doubled up.
    if a_rank != b_rank {
        return b_rank.cmp(&a_rank);
    }
    // 6. Ready for less time < more time.
    if a.ready && b.ready && a.ready_since != b.ready_since {
        return compare_times(a, a.ready_since, b, b.ready_since, now);
    }
    // 7. More restarts < fewer restarts.
    if a.restarts != b.restarts {
        return b.restarts.cmp(&a.restarts);
    }
    // 8. Newer < older.
    if a.created != b.created {
        return compare_times(a, a.created, b, b.created, now);
    }
    Ordering::Equal
}

/// Picks `count` Pods out of `candidates` to delete, in upstream's order.
/// `related` are all active Pods of the controller (for the per-node rank).
/// The name breaks remaining ties, so the choice is deterministic.
pub fn pods_to_delete<'a>(candidates: &[&'a PodView], related: &[&PodView], count: usize, now: Time) -> Vec<&'a PodView> {
    let mut per_node: BTreeMap<&str, usize> = BTreeMap::new();
    for pod in related.iter().filter(|p| p.is_active() && !p.node_name.is_empty()) {
        *per_node.entry(pod.node_name.as_str()).or_default() += 1;
    }
    let rank = |p: &PodView| {
        if p.node_name.is_empty() { 0 } else { per_node.get(p.node_name.as_str()).copied().unwrap_or(0) }
    };
    let mut sorted: Vec<&PodView> = candidates.to_vec();
    sorted.sort_by(|a, b| deletion_order(a, rank(a), b, rank(b), now).then_with(|| a.name.cmp(&b.name)));
    sorted.truncate(count);
    sorted
}

#[cfg(test)]
mod tests {
    use super::*;
    use operator_plugin_sdk::json;

    const NOW: &str = "2026-03-01T12:00:00Z";

    fn now() -> Time {
        Time::parse_rfc3339(NOW).unwrap()
    }

    struct P {
        name: &'static str,
        node: &'static str,
        phase: &'static str,
        ready_since: Option<&'static str>,
        restarts: i64,
        created: &'static str,
        cost: Option<&'static str>,
    }

    impl Default for P {
        fn default() -> Self {
            P {
                name: "p",
                node: "node-a",
                phase: "Running",
                ready_since: Some("2026-03-01T10:00:00Z"),
                restarts: 0,
                created: "2026-03-01T09:00:00Z",
                cost: None,
            }
        }
    }

    fn pod(p: P) -> PodView {
        PodView::from_pod(pod_json(p))
    }

    fn pod_json(p: P) -> Pod {
        let mut obj = json!({
            "apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": p.name, "uid": format!("uid-{}", p.name), "creationTimestamp": p.created, "labels": {"pod-template-hash": "h1"}},
            "spec": {"nodeName": p.node},
            "status": {"phase": p.phase, "containerStatuses": [{"name": "c", "restartCount": p.restarts}]}
        });
        if let Some(since) = p.ready_since {
            obj["status"]["conditions"] = json!([{"type": "Ready", "status": "True", "lastTransitionTime": since}]);
        } else {
            obj["status"]["conditions"] = json!([{"type": "Ready", "status": "False", "lastTransitionTime": "2026-03-01T09:00:00Z"}]);
        }
        if p.node.is_empty() {
            obj["spec"] = json!({});
        }
        if let Some(cost) = p.cost {
            obj["metadata"]["annotations"] = json!({POD_DELETION_COST_ANNOTATION: cost});
        }
        operator_plugin_sdk::serde_json::from_value(obj).expect("a Pod")
    }

    fn first_victim(a: PodView, b: PodView) -> String {
        let (a, b) = (a, b);
        let all = [&a, &b];
        pods_to_delete(&all, &all, 1, now())[0].name.clone()
    }

    #[test]
    fn victims_follow_upstream_ranking_rule_by_rule() {
        // (pod that must go first, pod that must stay, why)
        let cases: Vec<(P, P, &str)> = vec![
            (
                P { name: "unscheduled", node: "", phase: "Pending", ready_since: None, ..P::default() },
                P { name: "scheduled", ..P::default() },
                "unscheduled before scheduled",
            ),
            (
                P { name: "pending", phase: "Pending", ready_since: None, ..P::default() },
                P { name: "unknown", phase: "Unknown", ready_since: None, ..P::default() },
                "pending before unknown",
            ),
            (P { name: "unknown", phase: "Unknown", ..P::default() }, P { name: "running", ..P::default() }, "unknown before running"),
            (P { name: "not-ready", ready_since: None, ..P::default() }, P { name: "ready", ..P::default() }, "not ready before ready"),
            (
                P { name: "cheap", cost: Some("-10"), ..P::default() },
                P { name: "costly", cost: Some("100"), ..P::default() },
                "lower deletion cost first",
            ),
            (
                P { name: "ready-recently", ready_since: Some("2026-03-01T11:59:00Z"), ..P::default() },
                P { name: "ready-long", ready_since: Some("2026-02-01T00:00:00Z"), ..P::default() },
                "ready for less time first",
            ),
            (P { name: "crashy", restarts: 5, ..P::default() }, P { name: "stable", restarts: 0, ..P::default() }, "more restarts first"),
            (
                P { name: "newer", created: "2026-03-01T11:00:00Z", ..P::default() },
                P { name: "older", created: "2026-01-01T00:00:00Z", ..P::default() },
                "newer before older",
            ),
        ];
        for (go, stay, why) in cases {
            let (go, stay) = (pod(go), pod(stay));
            assert_eq!(first_victim(go.clone(), stay.clone()), go.name, "{why}");
            assert_eq!(first_victim(stay, go.clone()), go.name, "{why} (reversed input)");
        }
    }

    #[test]
    fn doubled_up_pods_go_before_pods_alone_on_their_node() {
        let a1 = pod(P { name: "a1", node: "node-a", ..P::default() });
        let a2 = pod(P { name: "a2", node: "node-a", ..P::default() });
        let b1 = pod(P { name: "b1", node: "node-b", ..P::default() });
        let all = [&b1, &a1, &a2];
        let victim = pods_to_delete(&[&b1, &a1], &all, 1, now());
        assert_eq!(victim[0].name, "a1");
    }

    #[test]
    fn pods_in_the_same_age_bucket_tie_and_uid_decides() {
        // Created 60 s and 61 s ago: the same power-of-two bucket of nanoseconds.
        let x = pod(P { name: "x", created: "2026-03-01T11:59:00Z", ..P::default() });
        let y = pod(P { name: "y", created: "2026-03-01T11:58:59Z", ..P::default() });
        assert_eq!(first_victim(y.clone(), x.clone()), "x", "uid-x < uid-y");
    }

    #[test]
    fn availability_needs_ready_for_longer_than_min_ready_seconds() {
        let p = pod(P { ready_since: Some("2026-03-01T11:59:50Z"), ..P::default() });
        assert!(p.is_available(0, now()));
        assert!(p.is_available(9, now()));
        assert!(!p.is_available(10, now()), "exactly minReadySeconds is not yet available");
        assert_eq!(p.available_at(10, now()), Some(now().unix_millis() + 1));
        assert!(!pod(P { ready_since: None, ..P::default() }).is_available(0, now()));
    }

    #[test]
    fn terminating_and_finished_pods_are_not_active() {
        let mut terminating = pod_json(P::default());
        terminating.metadata.deletion_timestamp = Some(MetaTime("2026-03-01T11:00:00Z".parse().unwrap()));
        assert!(!PodView::from_pod(terminating).is_active());
        assert!(!pod(P { phase: "Failed", ..P::default() }).is_active());
        assert!(!pod(P { phase: "Succeeded", ..P::default() }).is_active());
        assert!(pod(P::default()).is_active());
    }
}
