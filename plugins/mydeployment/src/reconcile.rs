//! One reconcile: read the MyDeployment, its Pods and its revisions; decide
//! the next safe step; answer with actions, Events and the rebuilt status.
//!
//! Order of actions, always the same for the same input: the desired
//! template's ControllerRevision first (as upstream creates the new
//! ReplicaSet before any of its Pods), then Pod creations and deletions step
//! by step, then pruning of old revisions, then Events, the status and a
//! requeue.

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use operator_plugin_sdk::k8s_openapi::api::apps::v1::ControllerRevision;
use operator_plugin_sdk::k8s_openapi::api::core::v1::ConfigMap;
use operator_plugin_sdk::serde_json::{Map, Value};
use operator_plugin_sdk::{Action, Children, Outcome, ReconcileError, Related, Time, json};

use crate::api::{POD_TEMPLATE_HASH_LABEL, ResolvedStrategy, Status};
use crate::config_hash;
use crate::crd::{MyDeployment, MyDeploymentSpec};
use crate::fenceposts::{max_surge, max_unavailable};
use crate::history::{self, Revision, Target};
use crate::pods::{Pod, PodView};
use crate::rollout::{self, Plan, Step, World};
use crate::status::{self, Observed};
use crate::validate;

/// Event reason for every change of a template's Pod count (upstream's
/// `ScalingReplicaSet`, for a controller without ReplicaSets).
pub const SCALING: &str = "ScalingPods";

/// At most this many Pods are created, and this many deleted, per reconcile
/// (the ReplicaSet controller's `burstReplicas`), so a large scale-up does
/// not turn into one flood of API calls; the next reconcile continues.
pub const BURST_REPLICAS: i32 = 500;

/// Victims named in one scale-down Event before the rest are only counted.
const NAMED_VICTIMS: usize = 10;

/// One reconcile of `parent`, given its Pods and ControllerRevisions
/// (children) and the ConfigMaps its template names (related: their
/// content's digest is part of the template, see `config_hash`).
pub fn reconcile(parent: &MyDeployment, children: &Children, related: &Related, now: Time) -> Result<Outcome, ReconcileError> {
    // The garbage collector removes the Pods and revisions through their
    // ownerReferences; creating anything now would only race it.
    if parent.metadata.deletion_timestamp.is_some() {
        return Ok(Outcome::new());
    }
    let spec = &parent.spec;
    let mut errors = Vec::new();
    validate::validate_spec(spec, &mut errors);
    if !errors.is_empty() {
        return Err(ReconcileError::permanent("InvalidSpec", validate::summary(&errors)));
    }
    // A status the types cannot read was read as empty (`crd::Lenient`): it
    // is ours to rebuild.
    let previous: Status = parent.status.as_ref().map(|s| Status::from(&s.0)).unwrap_or_default();
    let name = parent.metadata.name.as_deref().unwrap_or_default();

    let mut pods: Vec<PodView> = children.of::<Pod>()?.into_iter().map(PodView::from_pod).collect();
    pods.sort_by(|a, b| a.name.cmp(&b.name));
    let mut revisions: Vec<Revision> = children.of::<ControllerRevision>()?.into_iter().map(|r| Revision::from_revision(r, name)).collect();
    revisions.sort_by(|a, b| a.number.cmp(&b.number).then_with(|| a.name.cmp(&b.name)));

    let mut template = spec.template().clone();
    config_hash::annotate(&mut template, &related.of::<ConfigMap>()?);
    let target = history::resolve_target(name, &template, spec.rollback_to.as_ref().map(|r| r.revision()), &revisions, previous.collision_count)?;
    let paused = spec.paused();

    let mut out = Outcome::new();
    let (revision_action, target_number) = record_revision(&target, &revisions, paused);
    let new_revision_created = matches!(revision_action, Some(Action::Create(_)));
    if let Some(action) = revision_action {
        out.push(action);
    }

    let number_of =
        |hash: &str| -> Option<i64> { if hash == target.hash { target_number } else { revisions.iter().find(|r| r.hash == hash).map(|r| r.number) } };
    let min_ready = spec.min_ready_seconds();
    let world = World::new(&target.hash, number_of, pods.iter().collect(), min_ready, now);
    let replicas = spec.replicas();
    let strategy = spec.strategy();
    let surge = max_surge(&strategy, replicas);
    let unavailable = max_unavailable(&strategy, replicas);

    let plan = if paused {
        let latest = revisions.iter().max_by_key(|r| r.number).map(|r| r.hash.as_str());
        rollout::paused(&world, replicas, surge, matches!(strategy, ResolvedStrategy::RollingUpdate { .. }), latest)
    } else {
        match strategy {
            ResolvedStrategy::Recreate => rollout::recreate(&world, replicas),
            ResolvedStrategy::RollingUpdate { .. } => rollout::rolling(&world, replicas, surge, unavailable, spec.waits_for_termination()),
        }
    };

    // Events follow every change, as the contract's action list has always
    // listed them.
    let mut events = Vec::new();
    apply_plan(name, &plan, &target, &revisions, &number_of, &mut out, &mut events)?;
    prune(spec, &previous, &target, &revisions, &pods, &mut out);

    // A paused deployment has not started rolling out an unrecorded
    // template: it still reports the revision it runs, as upstream keeps the
    // Deployment's revision annotation until the new ReplicaSet exists.
    let (update_revision, update_number) = if target_number.is_none() && !previous.update_revision.is_empty() {
        (previous.update_revision.clone(), previous.revision)
    } else {
        (target.name.clone(), target_number)
    };
    let observed = observe(&world, &pods);
    let current_revision = current_revision(&previous, &target, &revisions, &world, replicas, observed);
    let computed = status::compute(&status::Input {
        name,
        generation: parent.metadata.generation.unwrap_or(0),
        spec,
        previous: &previous,
        observed,
        max_unavailable: unavailable,
        selector: spec.selector.as_ref().map(ToString::to_string).unwrap_or_default(),
        target_name: &update_revision,
        target_number: update_number,
        current_revision,
        collision_count: target.collision_count,
        rollback: &target.rollback,
        new_revision_created,
        now,
    });
    for event in events.into_iter().chain(computed.events) {
        out.push(event);
    }
    out.status(&computed.status)?;

    Ok(match next_look(&pods, min_ready, now, computed.requeue_after_ms) {
        Some(ms) => out.requeue_after(Duration::from_millis(ms)),
        None => out,
    })
}

/// The desired template's ControllerRevision: created with the next number
/// when new, renumbered to the newest when an earlier template comes back.
/// A paused deployment starts no rollout, so it records nothing. Returns the
/// action, if any, and the target's revision number afterwards.
fn record_revision(target: &Target, revisions: &[Revision], paused: bool) -> (Option<Action>, Option<i64>) {
    let newest = revisions.iter().map(|r| r.number).max().unwrap_or(0);
    let stored = target.stored.map(|i| &revisions[i]);
    match stored {
        _ if paused => (None, stored.map(|r| r.number)),
        None => (Some(Action::Create(history::new_revision_object(target, newest + 1))), Some(newest + 1)),
        Some(r) if r.number < newest => {
            let patch = history::renumber_patch(r, newest + 1);
            (Some(Action::Patch { target: r.reference.clone(), patch }), Some(newest + 1))
        }
        Some(r) => (None, Some(r.number)),
    }
}

/// When to look again even if nothing changes: when a Ready Pod passes
/// `minReadySeconds` (Pod changes trigger a reconcile anyway, the passing of
/// time does not), or when the progress deadline passes.
fn next_look(pods: &[PodView], min_ready: i32, now: Time, progress: Option<u64>) -> Option<u64> {
    let availability = pods
        .iter()
        .filter(|p| p.is_active())
        .filter_map(|p| p.available_at(min_ready, now))
        .map(|at| u64::try_from(at - now.unix_millis()).unwrap_or(0))
        .min();
    [availability, progress].into_iter().flatten().min().map(|ms| ms.max(1))
}

/// How a template's Pods are named in Events.
fn describe(parent: &str, hash: &str, number: Option<i64>) -> String {
    match (number, hash) {
        (Some(n), _) => format!("revision {n} ({})", history::revision_name(parent, hash)),
        (None, "") => "pods without a pod-template-hash".to_string(),
        (None, h) => format!("pods with pod-template-hash {h}"),
    }
}

fn apply_plan(
    parent: &str,
    plan: &Plan,
    target: &Target,
    revisions: &[Revision],
    number_of: &dyn Fn(&str) -> Option<i64>,
    out: &mut Outcome,
    events: &mut Vec<Action>,
) -> Result<(), ReconcileError> {
    let (mut create_budget, mut delete_budget) = (BURST_REPLICAS, BURST_REPLICAS);
    for step in &plan.steps {
        match step {
            Step::ScaleUp { hash, from, to } => {
                let template =
                    if *hash == target.hash { Some(&target.template) } else { revisions.iter().find(|r| r.hash == *hash).map(|r| &r.template) };
                let Some(template) = template else {
                    events
                        .push(Action::warning("MissingRevision", format!("cannot create Pods with pod-template-hash {hash}: its revision is gone")));
                    continue;
                };
                let n = (to - from).min(create_budget);
                if n <= 0 {
                    continue;
                }
                create_budget -= n;
                let pod = pod_from_template(parent, hash, template);
                for _ in 0..n {
                    out.create(&pod)?;
                }
                events.push(Action::normal(SCALING, format!("Scaled up {} from {from} to {}", describe(parent, hash, number_of(hash)), from + n)));
            }
            Step::ScaleDown { hash, from, victims, .. } => {
                let n = victims.len().min(usize::try_from(delete_budget).unwrap_or(0));
                if n == 0 {
                    continue;
                }
                delete_budget -= i32::try_from(n).unwrap_or(i32::MAX);
                let victims = &victims[..n];
                for pod in victims {
                    out.delete(pod.reference.clone());
                }
                let mut names = victims.iter().take(NAMED_VICTIMS).map(|p| p.name.as_str()).collect::<Vec<_>>().join(", ");
                if n > NAMED_VICTIMS {
                    names.push_str(&format!(" and {} more", n - NAMED_VICTIMS));
                }
                let to = from - i32::try_from(n).unwrap_or(i32::MAX);
                events.push(Action::normal(
                    SCALING,
                    format!("Scaled down {} from {from} to {to}: deleting {names}", describe(parent, hash, number_of(hash))),
                ));
            }
        }
    }
    Ok(())
}

/// A Pod for `template` (`controller.GetPodFromTemplate`): the template's
/// labels plus `pod-template-hash`, its annotations and finalizers, its
/// spec, and `generateName: <name>-<hash>-` so the API server picks the
/// suffix. The host adds the namespace and the controller ownerReference.
pub fn pod_from_template(parent: &str, hash: &str, template: &Value) -> Value {
    let mut labels: Map<String, Value> = template.pointer("/metadata/labels").and_then(Value::as_object).cloned().unwrap_or_default();
    labels.insert(POD_TEMPLATE_HASH_LABEL.into(), Value::String(hash.into()));
    let mut metadata = Map::new();
    metadata.insert("generateName".into(), Value::String(format!("{}-", history::revision_name(parent, hash))));
    metadata.insert("labels".into(), Value::Object(labels));
    for key in ["annotations", "finalizers"] {
        if let Some(v) = template.pointer(&format!("/metadata/{key}")).filter(|v| !v.is_null()) {
            metadata.insert(key.into(), v.clone());
        }
    }
    json!({
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": metadata,
        "spec": template.get("spec").cloned().unwrap_or_else(|| json!({})),
    })
}

/// Deletes revisions beyond `revisionHistoryLimit`, and with each the
/// finished Pods of its template (upstream's garbage collector would take
/// them with their ReplicaSet).
fn prune(spec: &MyDeploymentSpec, previous: &Status, target: &Target, revisions: &[Revision], pods: &[PodView], out: &mut Outcome) {
    let live: BTreeSet<String> = pods.iter().filter(|p| p.is_active() || p.terminating).map(|p| p.hash.clone()).collect();
    for r in history::revisions_to_prune(revisions, &target.name, &live, &previous.current_revision, spec.revision_history_limit()) {
        for pod in pods.iter().filter(|p| p.hash == r.hash && !p.terminating) {
            out.delete(pod.reference.clone());
        }
        out.delete(r.reference.clone());
    }
}

fn observe(world: &World, pods: &[PodView]) -> Observed {
    let active: Vec<&PodView> = pods.iter().filter(|p| p.is_active()).collect();
    let count = |n: usize| i32::try_from(n).unwrap_or(i32::MAX);
    Observed {
        replicas: count(active.len()),
        updated: world.target_group().size(),
        ready: count(active.iter().filter(|p| p.ready).count()),
        available: world.available(&active),
        terminating: count(pods.iter().filter(|p| p.terminating).count()),
    }
}

/// The revision of the last complete rollout (StatefulSet's
/// `currentRevision`): the target once every wanted Pod runs it and is
/// available; until then what the previous status said; failing that, the
/// template most active Pods run.
fn current_revision(previous: &Status, target: &Target, revisions: &[Revision], world: &World, replicas: i32, o: Observed) -> String {
    if o.updated == replicas && o.replicas == replicas && o.available == replicas {
        return target.name.clone();
    }
    if !previous.current_revision.is_empty()
        && (previous.current_revision == target.name || revisions.iter().any(|r| r.name == previous.current_revision))
    {
        return previous.current_revision.clone();
    }
    let sizes: BTreeMap<&str, i32> = world.groups.iter().map(|g| (g.hash.as_str(), g.size())).collect();
    revisions
        .iter()
        .filter(|r| sizes.get(r.hash.as_str()).copied().unwrap_or(0) > 0)
        .max_by_key(|r| (sizes[r.hash.as_str()], r.number))
        .map(|r| r.name.clone())
        .unwrap_or_else(|| target.name.clone())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::hash::pod_template_hash;
    use operator_plugin_sdk::Object;

    /// The plugin as the host calls it: JSON text in, the action list out.
    fn reconcile(parent: &Object, children: &[Object], now: Time) -> Result<Vec<Action>, ReconcileError> {
        let children: Vec<String> = children.iter().map(|c| c.value().to_string()).collect();
        operator_plugin_sdk::plugin::reconcile::<crate::MyDeploymentPlugin>(&parent.value().to_string(), &children, now.unix_millis())
    }

    const NOW: &str = "2026-03-01T12:00:00Z";

    fn now() -> Time {
        Time::parse_rfc3339(NOW).unwrap()
    }

    fn template(image: &str) -> Value {
        json!({"metadata": {"labels": {"app": "web"}}, "spec": {"containers": [{"name": "c", "image": image}]}})
    }

    fn parent(image: &str, replicas: i32, status: Value) -> Object {
        Object::new(json!({
            "apiVersion": "apps.example.com/v1", "kind": "MyDeployment",
            "metadata": {"name": "web", "namespace": "default", "uid": "u-web", "generation": 1},
            "spec": {"replicas": replicas, "selector": {"matchLabels": {"app": "web"}}, "template": template(image)},
            "status": status
        }))
    }

    fn pod(name: &str, hash: Option<&str>, phase: &str) -> Object {
        let mut labels = json!({"app": "web"});
        if let Some(h) = hash {
            labels["pod-template-hash"] = json!(h);
        }
        Object::new(json!({
            "apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": name, "namespace": "default", "uid": format!("u-{name}"), "labels": labels, "creationTimestamp": "2026-03-01T10:00:00Z"},
            "spec": {"nodeName": "n1"},
            "status": {"phase": phase, "conditions": [{"type": "Ready", "status": if phase == "Running" { "True" } else { "False" }, "lastTransitionTime": "2026-03-01T10:00:10Z"}]}
        }))
    }

    fn revision(name: &str, hash: &str, number: i64, data: Value) -> Object {
        Object::new(json!({
            "apiVersion": "apps/v1", "kind": "ControllerRevision",
            "metadata": {"name": name, "namespace": "default", "labels": {"app": "web", "pod-template-hash": hash}},
            "data": data, "revision": number
        }))
    }

    fn status_of(actions: &[Action]) -> Status {
        actions
            .iter()
            .find_map(|a| match a {
                Action::SetStatus(s) => Some(operator_plugin_sdk::serde_json::from_value(s.clone()).unwrap()),
                _ => None,
            })
            .expect("a SetStatus action")
    }

    fn created<'a>(actions: &'a [Action], kind: &str) -> Vec<&'a Value> {
        actions.iter().filter_map(|a| if let Action::Create(o) = a { Some(o) } else { None }).filter(|o| o["kind"] == kind).collect()
    }

    fn deleted(actions: &[Action]) -> Vec<String> {
        actions
            .iter()
            .filter_map(|a| if let Action::Delete { target, .. } = a { Some(format!("{}/{}", target.kind, target.name)) } else { None })
            .collect()
    }

    #[test]
    fn pods_copy_the_template_labels_annotations_finalizers_and_spec() {
        let t = json!({
            "metadata": {"labels": {"app": "web"}, "annotations": {"a": "1"}, "finalizers": ["example.com/keep"]},
            "spec": {"containers": [{"name": "c", "image": "nginx"}], "nodeSelector": {"disk": "ssd"}}
        });
        let pod = pod_from_template("web", "abc", &t);
        assert_eq!(
            pod,
            json!({
                "apiVersion": "v1", "kind": "Pod",
                "metadata": {
                    "generateName": "web-abc-",
                    "labels": {"app": "web", "pod-template-hash": "abc"},
                    "annotations": {"a": "1"},
                    "finalizers": ["example.com/keep"]
                },
                "spec": {"containers": [{"name": "c", "image": "nginx"}], "nodeSelector": {"disk": "ssd"}}
            })
        );
    }

    #[test]
    fn a_hash_collision_records_the_collision_count_and_uses_a_fresh_name() {
        let hash = pod_template_hash(&template("v2"), None);
        let impostor = revision(&format!("web-{hash}"), &hash, 1, template("something-else"));
        let actions = reconcile(&parent("v2", 1, json!({})), &[impostor], now()).unwrap();
        let fresh = pod_template_hash(&template("v2"), Some(1));
        assert_eq!(created(&actions, "ControllerRevision")[0]["metadata"]["name"], format!("web-{fresh}"));
        assert_eq!(created(&actions, "Pod")[0]["metadata"]["labels"]["pod-template-hash"], fresh);
        assert_eq!(status_of(&actions).collision_count, Some(1));
    }

    #[test]
    fn pods_without_a_hash_label_are_an_old_template_to_replace() {
        let pods: Vec<Object> = (0..3).map(|i| pod(&format!("adopted-{i}"), None, "Running")).collect();
        let actions = reconcile(&parent("v1", 3, json!({})), &pods, now()).unwrap();
        assert_eq!(created(&actions, "Pod").len(), 1, "one surge Pod of the template");
        let status = status_of(&actions);
        assert_eq!((status.replicas, status.updated_replicas), (3, 0));
    }

    #[test]
    fn finished_pods_of_a_pruned_revision_are_deleted_with_it() {
        let h1 = pod_template_hash(&template("v1"), None);
        let h2 = pod_template_hash(&template("v2"), None);
        let children = vec![
            revision(&format!("web-{h1}"), &h1, 1, template("v1")),
            revision(&format!("web-{h2}"), &h2, 2, template("v2")),
            pod("old-failed", Some(&h1), "Failed"),
            pod("new-0", Some(&h2), "Running"),
        ];
        let mut p = parent("v2", 1, json!({}));
        p.value_mut()["spec"]["revisionHistoryLimit"] = json!(0);
        let actions = reconcile(&p, &children, now()).unwrap();
        assert_eq!(deleted(&actions), vec!["Pod/old-failed".to_string(), format!("ControllerRevision/web-{h1}")]);
    }

    #[test]
    fn conditions_the_plugin_does_not_own_are_kept() {
        let status =
            json!({"conditions": [{"type": "Reconciled", "status": "True", "reason": "Success", "lastTransitionTime": "2026-03-01T11:00:00Z"}]});
        let actions = reconcile(&parent("v1", 0, status), &[], now()).unwrap();
        let types: Vec<String> = status_of(&actions).conditions.iter().map(|c| c.type_.clone()).collect();
        assert_eq!(types, ["Available", "Progressing", "Reconciled"]);
    }

    #[test]
    fn a_spec_missing_what_the_schema_requires_still_reads_and_gets_validations_errors() {
        let p = Object::new(json!({
            "apiVersion": "apps.example.com/v1", "kind": "MyDeployment",
            "metadata": {"name": "web", "namespace": "default", "uid": "u-web"},
            "spec": {"replicas": 1, "rollbackTo": {}}
        }));
        let err = reconcile(&p, &[], now()).unwrap_err();
        assert_eq!(err.reason, "InvalidSpec", "{err}");
        for field in ["spec.selector: Required value", "spec.template: Required value", "spec.rollbackTo.revision: Invalid value"] {
            assert!(err.message.contains(field), "{field} in {err}");
        }
    }

    #[test]
    fn an_unreadable_status_is_rebuilt_from_scratch() {
        let actions = reconcile(&parent("v1", 1, json!("garbage")), &[], now()).unwrap();
        assert_eq!(status_of(&actions).observed_generation, Some(1));
    }

    #[test]
    fn a_pod_of_a_vanished_revision_cannot_be_recreated_and_says_so() {
        // Paused, the only Pods run a template whose revision was deleted by hand.
        let mut p = parent("v2", 3, json!({}));
        p.value_mut()["spec"]["paused"] = json!(true);
        let actions = reconcile(&p, &[pod("orphan-0", Some("gone"), "Running")], now()).unwrap();
        assert!(created(&actions, "Pod").is_empty());
        assert!(actions.iter().any(|a| matches!(a, Action::Event { reason, .. } if reason == "MissingRevision")));
    }

    #[test]
    fn a_large_scale_up_creates_at_most_burst_replicas_per_reconcile() {
        let actions = reconcile(&parent("v1", 600, json!({})), &[], now()).unwrap();
        assert_eq!(created(&actions, "Pod").len(), 500);
        assert!(actions.iter().any(|a| matches!(a, Action::Event { message, .. } if message.ends_with("from 0 to 500"))));
    }

    #[test]
    fn a_large_scale_down_deletes_at_most_burst_replicas_and_names_ten() {
        let h1 = pod_template_hash(&template("v1"), None);
        let mut children = vec![revision(&format!("web-{h1}"), &h1, 1, template("v1"))];
        children.extend((0..520).map(|i| pod(&format!("p-{i:03}"), Some(&h1), "Running")));
        let actions = reconcile(&parent("v1", 0, json!({})), &children, now()).unwrap();
        assert_eq!(deleted(&actions).len(), 500);
        let message = actions
            .iter()
            .find_map(|a| match a {
                Action::Event { message, .. } if message.starts_with("Scaled down") => Some(message.clone()),
                _ => None,
            })
            .unwrap();
        assert!(message.contains("from 520 to 20") && message.ends_with("and 490 more"), "{message}");
    }
}
