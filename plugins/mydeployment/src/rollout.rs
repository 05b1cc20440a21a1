//! The next safe step of a rollout, decided from the Pods that exist.
//!
//! Upstream's Deployment controller moves ReplicaSet sizes and lets the
//! ReplicaSet controller create and delete Pods. A MyDeployment owns Pods
//! directly, so here a "ReplicaSet" is the group of active Pods sharing one
//! `pod-template-hash`, its size is simply how many there are, and scaling it
//! means creating Pods from its template or deleting the Pods the ReplicaSet
//! controller would have picked. The rules are upstream's:
//! `rolloutRolling` (`reconcileNewReplicaSet`, `cleanupUnhealthyReplicas`,
//! `scaleDownOldReplicaSetsForRollingUpdate`), `rolloutRecreate`, and `scale`
//! for paused deployments.
//!
//! Terminating Pods are not active: like upstream's default
//! (`podReplacementPolicy: TerminationStarted` semantics) they neither count
//! as replicas nor against maxSurge, so a deleted Pod is replaced at once.
//! Recreate is the exception, as upstream: new Pods wait until no old Pod
//! exists at all, terminating ones included.

use operator_plugin_sdk::Time;

use crate::pods::{PodView, pods_to_delete};

/// The active Pods of one template.
#[derive(Clone, Debug)]
pub struct Group<'a> {
    pub hash: String,
    /// The revision number, when the template is stored.
    pub number: Option<i64>,
    pub pods: Vec<&'a PodView>,
}

impl Group<'_> {
    pub fn size(&self) -> i32 {
        count(self.pods.len())
    }
}

/// Everything the planner looks at.
#[derive(Clone, Debug)]
pub struct World<'a> {
    /// The hash of the desired template.
    pub target: String,
    /// Every hash that has active Pods, plus the target, oldest revision
    /// first (unknown revisions before known ones).
    pub groups: Vec<Group<'a>>,
    /// Every Pod, also finished and terminating ones.
    pub all_pods: Vec<&'a PodView>,
    pub min_ready_seconds: i32,
    pub now: Time,
}

fn count(n: usize) -> i32 {
    i32::try_from(n).unwrap_or(i32::MAX)
}

impl<'a> World<'a> {
    pub fn new(target: &str, numbered: impl Fn(&str) -> Option<i64>, all_pods: Vec<&'a PodView>, min_ready_seconds: i32, now: Time) -> Self {
        let mut groups: Vec<Group<'a>> = Vec::new();
        for pod in all_pods.iter().copied().filter(|p| p.is_active()) {
            match groups.iter_mut().find(|g| g.hash == pod.hash) {
                Some(g) => g.pods.push(pod),
                None => groups.push(Group { hash: pod.hash.clone(), number: numbered(&pod.hash), pods: vec![pod] }),
            }
        }
        if !groups.iter().any(|g| g.hash == target) {
            groups.push(Group { hash: target.to_string(), number: numbered(target), pods: Vec::new() });
        }
        groups.sort_by(|a, b| a.number.cmp(&b.number).then_with(|| a.hash.cmp(&b.hash)));
        World { target: target.to_string(), groups, all_pods, min_ready_seconds, now }
    }

    pub fn target_group(&self) -> &Group<'a> {
        self.groups.iter().find(|g| g.hash == self.target).expect("World::new always adds the target group")
    }

    pub fn old_groups(&self) -> impl Iterator<Item = &Group<'a>> {
        self.groups.iter().filter(|g| g.hash != self.target)
    }

    pub fn available(&self, pods: &[&PodView]) -> i32 {
        count(pods.iter().filter(|p| p.is_available(self.min_ready_seconds, self.now)).count())
    }

    pub fn total(&self) -> i32 {
        self.groups.iter().map(Group::size).sum()
    }

    /// Pods of `hash` (or of every template, for `None`) being deleted.
    pub fn terminating(&self, hash: Option<&str>) -> i32 {
        count(self.all_pods.iter().filter(|p| p.terminating && hash.is_none_or(|h| p.hash == h)).count())
    }

    pub fn total_available(&self) -> i32 {
        self.groups.iter().map(|g| self.available(&g.pods)).sum()
    }

    fn active_pods(&self) -> Vec<&'a PodView> {
        self.groups.iter().flat_map(|g| g.pods.iter().copied()).collect()
    }
}

/// One scaling of one template's Pods.
#[derive(Clone, Debug, PartialEq)]
pub enum Step<'a> {
    /// Create `to - from` Pods from the template with this hash.
    ScaleUp { hash: String, from: i32, to: i32 },
    /// Delete `victims`, taking the group from `from` to `to` Pods.
    ScaleDown { hash: String, from: i32, to: i32, victims: Vec<&'a PodView> },
}

/// What to do in this reconcile.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Plan<'a> {
    pub steps: Vec<Step<'a>>,
}

impl<'a> Plan<'a> {
    fn scale_up(&mut self, group: &Group<'a>, by: i32) {
        if by > 0 {
            self.steps.push(Step::ScaleUp { hash: group.hash.clone(), from: group.size(), to: group.size() + by });
        }
    }

    /// Deletes `by` Pods of `candidates` (a subset of `group`) in upstream's order.
    fn scale_down(&mut self, world: &World<'a>, group: &Group<'a>, candidates: &[&'a PodView], by: i32, already: i32) {
        let by = usize::try_from(by).unwrap_or(0);
        if by == 0 {
            return;
        }
        let victims = pods_to_delete(candidates, &world.active_pods(), by, world.now);
        if victims.is_empty() {
            return;
        }
        let from = group.size() - already;
        let to = from - count(victims.len());
        self.steps.push(Step::ScaleDown { hash: group.hash.clone(), from, to, victims });
    }

    pub fn is_empty(&self) -> bool {
        self.steps.is_empty()
    }

    /// Pods this plan deletes from the group with `hash`.
    fn deleted_from(&self, hash: &str) -> Vec<&'a PodView> {
        self.steps
            .iter()
            .filter_map(|s| match s {
                Step::ScaleDown { hash: h, victims, .. } if h == hash => Some(victims.clone()),
                _ => None,
            })
            .flatten()
            .collect()
    }
}

/// `rolloutRolling`: first grow the new template within maxSurge (and
/// return), else shrink old templates within maxUnavailable.
/// `wait_for_termination` is `podReplacementPolicy: TerminationComplete`:
/// terminating Pods then count against the surge, and the new template's own
/// terminating Pods are not replaced until they are gone.
pub fn rolling<'a>(world: &World<'a>, replicas: i32, max_surge: i32, max_unavailable: i32, wait_for_termination: bool) -> Plan<'a> {
    let mut plan = Plan::default();
    let new = world.target_group();
    let total = world.total();
    let (terminating_all, terminating_new) =
        if wait_for_termination { (world.terminating(None), world.terminating(Some(&world.target))) } else { (0, 0) };

    // reconcileNewReplicaSet / NewRSNewReplicas.
    if new.size() > replicas {
        plan.scale_down(world, new, &new.pods, new.size() - replicas, 0);
        return plan;
    }
    if new.size() + terminating_new < replicas {
        let max_total = replicas + max_surge;
        if total + terminating_all < max_total {
            let up = (max_total - total - terminating_all).min(replicas - new.size() - terminating_new);
            plan.scale_up(new, up);
            if !plan.is_empty() {
                return plan;
            }
        }
    }

    // reconcileOldReplicaSets.
    let old_total: i32 = world.old_groups().map(Group::size).sum();
    if old_total == 0 {
        return plan;
    }
    let min_available = replicas - max_unavailable;
    let new_unavailable = new.size() - world.available(&new.pods);
    let max_scaled_down = total - min_available - new_unavailable;
    if max_scaled_down <= 0 {
        return plan;
    }

    // cleanupUnhealthyReplicas: unavailable old Pods cost no availability.
    // Upstream lowers the ReplicaSet's size and lets its ranking pick; we
    // pick among the unavailable Pods only, which is what that ranking
    // yields whenever readiness and availability agree.
    let mut cleaned = 0;
    for group in world.old_groups() {
        if cleaned >= max_scaled_down {
            break;
        }
        let unhealthy: Vec<&PodView> = group.pods.iter().copied().filter(|p| !p.is_available(world.min_ready_seconds, world.now)).collect();
        let by = (max_scaled_down - cleaned).min(count(unhealthy.len()));
        plan.scale_down(world, group, &unhealthy, by, 0);
        cleaned += by;
    }

    // scaleDownOldReplicaSetsForRollingUpdate: available Pods above the minimum.
    let available = world.total_available();
    if available <= min_available {
        return plan;
    }
    let mut budget = available - min_available;
    for group in world.old_groups() {
        if budget <= 0 {
            break;
        }
        let gone = plan.deleted_from(&group.hash);
        let remaining: Vec<&PodView> = group.pods.iter().copied().filter(|p| !gone.iter().any(|g| g.uid == p.uid && g.name == p.name)).collect();
        let by = budget.min(count(remaining.len()));
        plan.scale_down(world, group, &remaining, by, count(gone.len()));
        budget -= by;
    }
    plan
}

/// `rolloutRecreate`: delete every old Pod; wait until none exists (not even
/// terminating); then bring the new template to `replicas`.
pub fn recreate<'a>(world: &World<'a>, replicas: i32) -> Plan<'a> {
    let mut plan = Plan::default();
    for group in world.old_groups() {
        plan.scale_down(world, group, &group.pods, group.size(), 0);
    }
    if !plan.is_empty() || old_pods_running(world) {
        return plan;
    }
    let new = world.target_group();
    if new.size() < replicas {
        plan.scale_up(new, replicas - new.size());
    } else if new.size() > replicas {
        plan.scale_down(world, new, &new.pods, new.size() - replicas, 0);
    }
    plan
}

/// `oldPodsRunning`: any Pod of another template not in a terminal phase.
fn old_pods_running(world: &World) -> bool {
    world.all_pods.iter().any(|p| p.hash != world.target && p.phase != "Succeeded" && p.phase != "Failed")
}

/// `scale` for a paused deployment: no template change is rolled out, but
/// the replica count is honoured. One active template (or, with none, the
/// newest stored one, `latest`) takes the whole count; several share it in
/// proportion to their sizes, up to `replicas + maxSurge` for RollingUpdate,
/// as upstream's proportional scaling does.
pub fn paused<'a>(world: &World<'a>, replicas: i32, max_surge: i32, rolling_update: bool, latest: Option<&str>) -> Plan<'a> {
    let mut plan = Plan::default();
    let active: Vec<&Group<'a>> = world.groups.iter().filter(|g| g.size() > 0).collect();
    match active.as_slice() {
        [] => {
            if let Some(group) = latest.and_then(|h| world.groups.iter().find(|g| g.hash == h)) {
                plan.scale_up(group, replicas);
            } else if let Some(hash) = latest {
                plan.steps.push(Step::ScaleUp { hash: hash.to_string(), from: 0, to: replicas });
            }
        }
        [only] => {
            if only.size() < replicas {
                plan.scale_up(only, replicas - only.size());
            } else if only.size() > replicas {
                plan.scale_down(world, only, &only.pods, only.size() - replicas, 0);
            }
        }
        several => {
            let new = world.target_group();
            // IsSaturated: the new template alone serves every replica.
            if new.size() == replicas && world.available(&new.pods) == replicas {
                for group in several.iter().filter(|g| g.hash != world.target) {
                    plan.scale_down(world, group, &group.pods, group.size(), 0);
                }
                return plan;
            }
            if rolling_update {
                proportional(world, several, replicas, max_surge, &mut plan);
            }
        }
    }
    plan
}

/// Upstream's proportional scaling (`scale` with `GetProportion`). Upstream
/// scales each ReplicaSet by `size * (replicas + maxSurge) / maxReplicasAnnotation`;
/// a Pod group has no annotation, so the denominator is the current total,
/// which is what the annotation records whenever the last scaling completed.
fn proportional<'a>(world: &World<'a>, groups: &[&Group<'a>], replicas: i32, max_surge: i32, plan: &mut Plan<'a>) {
    let total: i32 = groups.iter().map(|g| g.size()).sum();
    let allowed = if replicas > 0 { replicas + max_surge } else { 0 };
    let to_add = allowed - total;
    if to_add == 0 {
        return;
    }
    let mut ordered: Vec<&Group<'a>> = groups.to_vec();
    // ReplicaSetsBySizeNewer when growing, BySizeOlder when shrinking.
    ordered.sort_by(|a, b| {
        let by_size = b.size().cmp(&a.size());
        let by_age = if to_add > 0 { b.number.cmp(&a.number) } else { a.number.cmp(&b.number) };
        by_size.then(by_age)
    });
    let mut added = 0;
    let mut sizes: Vec<i32> = Vec::with_capacity(ordered.len());
    for group in &ordered {
        let proportion = if to_add == added || group.size() == 0 {
            0
        } else {
            let fraction = if replicas == 0 {
                -group.size()
            } else {
                // integer.RoundToInt32: round half away from zero.
                let exact = f64::from(group.size()) * f64::from(allowed) / f64::from(total.max(1));
                exact.round() as i32 - group.size()
            };
            let remaining = to_add - added;
            if to_add > 0 { fraction.min(remaining) } else { fraction.max(remaining) }
        };
        added += proportion;
        sizes.push(group.size() + proportion);
    }
    // Leftovers go to the first (largest) group.
    if let Some(first) = sizes.first_mut() {
        *first = (*first + to_add - added).max(0);
    }
    for (group, size) in ordered.iter().zip(sizes) {
        if size > group.size() {
            plan.scale_up(group, size - group.size());
        } else if size < group.size() {
            plan.scale_down(world, group, &group.pods, group.size() - size, 0);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use operator_plugin_sdk::json;

    const NOW: i64 = 1_772_366_400_000; // 2026-03-01T12:00:00Z

    fn now() -> Time {
        Time::from_unix_millis(NOW)
    }

    /// A Pod of template `hash`: `state` is `available`, `ready` (ready just
    /// now, so not available under minReadySeconds), `pending`, `terminating`
    /// or `failed`.
    fn pod(hash: &str, i: usize, state: &str) -> PodView {
        let ago = |s: i64| Time::from_unix_millis(NOW - s * 1000).to_rfc3339();
        let ready = matches!(state, "available" | "ready" | "terminating");
        let mut obj = json!({
            "apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": format!("web-{hash}-{i}"), "uid": format!("{hash}-{i}"), "creationTimestamp": ago(3600 - i as i64), "labels": {"pod-template-hash": hash}},
            "spec": {"nodeName": if state == "pending" { "" } else { "node-1" }},
            "status": {
                "phase": match state { "pending" => "Pending", "failed" => "Failed", _ => "Running" },
                "conditions": [{"type": "Ready", "status": if ready { "True" } else { "False" }, "lastTransitionTime": if state == "ready" { ago(0) } else { ago(600) }}]
            }
        });
        if state == "terminating" {
            obj["metadata"]["deletionTimestamp"] = json!(ago(5));
        }
        PodView::from_pod(operator_plugin_sdk::serde_json::from_value(obj).expect("a Pod"))
    }

    fn pods(spec: &[(&str, usize, &str)]) -> Vec<PodView> {
        let mut out = Vec::new();
        for (hash, n, state) in spec {
            for _ in 0..*n {
                let i = out.len();
                out.push(pod(hash, i, state));
            }
        }
        out
    }

    fn world<'a>(target: &str, pods: &'a [PodView], min_ready: i32) -> World<'a> {
        // "old" is revision 1, "mid" 2, "new" 3.
        let number = |h: &str| match h {
            "old" => Some(1),
            "mid" => Some(2),
            "new" => Some(3),
            _ => None,
        };
        World::new(target, number, pods.iter().collect(), min_ready, now())
    }

    /// The plan as (hash, signed change) pairs; deletions list how many.
    fn summary(plan: &Plan) -> Vec<(String, i32)> {
        plan.steps
            .iter()
            .map(|s| match s {
                Step::ScaleUp { hash, from, to } | Step::ScaleDown { hash, from, to, .. } => (hash.clone(), to - from),
            })
            .collect()
    }

    fn s(pairs: &[(&str, i32)]) -> Vec<(String, i32)> {
        pairs.iter().map(|(h, n)| (h.to_string(), *n)).collect()
    }

    #[test]
    fn rolling_update_steps_match_upstream() {
        // (pods, replicas, maxSurge, maxUnavailable, minReadySeconds, expected steps, why)
        #[allow(clippy::type_complexity)]
        let cases: Vec<(Vec<(&str, usize, &str)>, i32, i32, i32, i32, Vec<(&str, i32)>, &str)> = vec![
            (vec![], 3, 1, 0, 0, vec![("new", 3)], "a new deployment creates every replica (surge headroom is the whole count)"),
            (vec![("new", 2, "available")], 3, 1, 0, 0, vec![("new", 1)], "a missing Pod is replaced"),
            (vec![("new", 5, "available")], 3, 1, 0, 0, vec![("new", -2)], "extra Pods are removed"),
            (vec![("old", 3, "available")], 3, 1, 0, 0, vec![("new", 1)], "surge 1 allows one new Pod, and then waits"),
            (vec![("old", 3, "available"), ("new", 1, "pending")], 3, 1, 0, 0, vec![], "nothing is removed while the new Pod is unavailable"),
            (vec![("old", 3, "available"), ("new", 1, "available")], 3, 1, 0, 0, vec![("old", -1)], "an available new Pod lets one old one go"),
            (vec![("old", 3, "available")], 3, 0, 1, 0, vec![("old", -1)], "no surge: one old Pod goes first"),
            (vec![("old", 2, "available")], 3, 0, 1, 0, vec![("new", 1)], "...and a new one takes its place"),
            (vec![("old", 2, "available"), ("new", 1, "ready")], 3, 0, 1, 30, vec![], "a ready Pod inside minReadySeconds is not available yet"),
            (vec![("old", 3, "pending")], 3, 0, 1, 0, vec![("old", -1)], "unavailable old Pods go, but only within total - minAvailable"),
            (
                vec![("old", 2, "available"), ("old", 1, "pending"), ("new", 1, "available")],
                3,
                1,
                0,
                0,
                vec![("old", -1)],
                "the unhealthy old Pod goes first, then availability allows no more",
            ),
            (
                vec![("old", 2, "available"), ("mid", 2, "available"), ("new", 2, "available")],
                4,
                1,
                1,
                0,
                vec![("old", -2), ("mid", -1)],
                "the oldest template shrinks first",
            ),
            (vec![("old", 3, "available"), ("old", 1, "terminating")], 3, 1, 0, 0, vec![("new", 1)], "terminating Pods do not use up the surge"),
            (vec![("old", 3, "available"), ("old", 2, "failed")], 3, 1, 0, 0, vec![("new", 1)], "failed Pods are not replicas"),
            (vec![("old", 3, "available")], 5, 2, 1, 0, vec![("new", 4)], "scale up with a new template fills up to replicas + surge"),
            (vec![("old", 5, "available")], 2, 1, 0, 0, vec![("old", -3)], "scale down with a new template removes old Pods down to the minimum"),
            (vec![("old", 3, "available")], 0, 0, 0, 0, vec![("old", -3)], "zero replicas removes everything"),
        ];
        for (spec, replicas, surge, unavailable, min_ready, want, why) in cases {
            let pods = pods(&spec);
            let plan = rolling(&world("new", &pods, min_ready), replicas, surge, unavailable, false);
            assert_eq!(summary(&plan), s(&want), "{why}");
        }
    }

    #[test]
    fn unhealthy_cleanup_picks_only_unavailable_pods() {
        let pods = pods(&[("old", 2, "available"), ("old", 1, "pending"), ("new", 1, "available")]);
        let plan = rolling(&world("new", &pods, 0), 3, 1, 0, false);
        let Step::ScaleDown { victims, from, to, .. } = &plan.steps[0] else { panic!("{plan:?}") };
        assert_eq!(victims.iter().map(|v| v.phase.as_str()).collect::<Vec<_>>(), vec!["Pending"]);
        assert_eq!((*from, *to), (3, 2));
    }

    #[test]
    fn scale_down_of_the_new_template_removes_unready_pods_first() {
        let mut pods = pods(&[("new", 3, "available"), ("new", 1, "pending")]);
        pods.sort_by(|a, b| a.name.cmp(&b.name));
        let plan = rolling(&world("new", &pods, 0), 2, 1, 0, false);
        let Step::ScaleDown { victims, .. } = &plan.steps[0] else { panic!("{plan:?}") };
        // The pending one first. The available ones were created within the
        // same power-of-two age bucket, so (LogarithmicScaleDown) the UID
        // decides among them rather than the exact creation second.
        assert_eq!(victims.iter().map(|v| v.name.as_str()).collect::<Vec<_>>(), vec!["web-new-3", "web-new-0"]);
    }

    #[test]
    fn recreate_steps_match_upstream() {
        #[allow(clippy::type_complexity)]
        let cases: Vec<(Vec<(&str, usize, &str)>, i32, Vec<(&str, i32)>, &str)> = vec![
            (vec![("old", 3, "available")], 3, vec![("old", -3)], "every old Pod goes at once"),
            (vec![("old", 2, "terminating")], 3, vec![], "new Pods wait until old ones are gone, terminating included"),
            (vec![("old", 2, "failed")], 3, vec![("new", 3)], "finished old Pods do not block"),
            (vec![], 3, vec![("new", 3)], "with no old Pods the new template is scaled up"),
            (vec![("new", 4, "available")], 3, vec![("new", -1)], "and scaled down"),
        ];
        for (spec, replicas, want, why) in cases {
            let pods = pods(&spec);
            assert_eq!(summary(&recreate(&world("new", &pods, 0), replicas)), s(&want), "{why}");
        }
    }

    #[test]
    fn paused_deployments_only_scale() {
        #[allow(clippy::type_complexity)]
        let cases: Vec<(Vec<(&str, usize, &str)>, i32, Option<&str>, Vec<(&str, i32)>, &str)> = vec![
            (vec![("old", 3, "available")], 3, Some("old"), vec![], "no rollout of the new template"),
            (vec![("old", 3, "available")], 5, Some("old"), vec![("old", 2)], "scale up the only active template"),
            (vec![("old", 3, "available")], 1, Some("old"), vec![("old", -2)], "scale down the only active template"),
            (vec![], 2, Some("old"), vec![("old", 2)], "with no Pods, the newest stored revision"),
            (vec![], 2, None, vec![], "with no Pods and no revision, nothing"),
            (
                vec![("old", 2, "available"), ("new", 2, "available")],
                6,
                Some("new"),
                // allowed 6 + surge 1 = 7 for 4 Pods: +3; each group 2*7/4 = 3.5 -> 4 (+2), capped to what is left.
                vec![("new", 2), ("old", 1)],
                "several templates grow in proportion, newer first on ties",
            ),
            (
                vec![("old", 4, "available"), ("new", 2, "available")],
                1,
                Some("new"),
                // allowed 1 + 1 = 2 for 6 Pods: -4; old 4*2/6 -> 1 (-3), new 2*2/6 -> 1 (-1).
                vec![("old", -3), ("new", -1)],
                "several templates shrink in proportion, larger first",
            ),
            (
                vec![("old", 2, "available"), ("new", 3, "available")],
                3,
                Some("new"),
                vec![("old", -2)],
                "a saturated new template retires the old ones",
            ),
        ];
        for (spec, replicas, latest, want, why) in cases {
            let pods = pods(&spec);
            let plan = paused(&world("new", &pods, 0), replicas, 1, true, latest);
            assert_eq!(summary(&plan), s(&want), "{why}");
        }
    }

    #[test]
    fn termination_complete_counts_terminating_pods_against_surge_and_replacement() {
        // (pods, wait_for_termination, expected, why)
        #[allow(clippy::type_complexity)]
        let cases: Vec<(Vec<(&str, usize, &str)>, bool, Vec<(&str, i32)>, &str)> = vec![
            (vec![("new", 2, "available"), ("new", 1, "terminating")], false, vec![("new", 1)], "TerminationStarted replaces at once"),
            (vec![("new", 2, "available"), ("new", 1, "terminating")], true, vec![], "TerminationComplete waits for the Pod to go"),
            (vec![("old", 3, "available"), ("old", 1, "terminating")], false, vec![("new", 1)], "TerminationStarted: surge ignores terminating Pods"),
            (vec![("old", 3, "available"), ("old", 1, "terminating")], true, vec![], "TerminationComplete: the terminating Pod uses up the surge"),
        ];
        for (spec, wait, want, why) in cases {
            let pods = pods(&spec);
            assert_eq!(summary(&rolling(&world("new", &pods, 0), 3, 1, 0, wait)), s(&want), "{why}");
        }
    }
}
