//! Status and conditions, rebuilt on every reconcile as upstream's
//! `calculateStatus`, `checkPausedConditions` and `syncRolloutStatus` do,
//! plus the Events that announce a condition's change.
//!
//! The previous status is the controller's only memory: the Progressing
//! deadline is measured from its `lastUpdateTime`, progress is judged by
//! comparing counts with it, and an Event is emitted only when a condition's
//! reason changes, so a repeated reconcile does not repeat Events.

use operator_plugin_sdk::{Action, Time};

use crate::api::{DeploymentCondition, Status};
use crate::crd::MyDeploymentSpec;
use crate::history::Rollback;

pub const AVAILABLE: &str = "Available";
pub const PROGRESSING: &str = "Progressing";
/// Ours: whether `spec.rollbackTo` currently overrides `spec.template`.
pub const ROLLED_BACK: &str = "RolledBack";

// Upstream's condition reasons (deploymentutil), kept verbatim because tools
// such as `kubectl rollout status` key on them.
pub const NEW_RS_CREATED: &str = "NewReplicaSetCreated";
pub const FOUND_NEW_RS: &str = "FoundNewReplicaSet";
pub const RS_UPDATED: &str = "ReplicaSetUpdated";
pub const NEW_RS_AVAILABLE: &str = "NewReplicaSetAvailable";
pub const TIMED_OUT: &str = "ProgressDeadlineExceeded";
pub const PAUSED: &str = "DeploymentPaused";
pub const RESUMED: &str = "DeploymentResumed";
pub const MIN_AVAILABLE: &str = "MinimumReplicasAvailable";
pub const MIN_UNAVAILABLE: &str = "MinimumReplicasUnavailable";
pub const ROLLBACK: &str = "DeploymentRollback";
pub const ROLLBACK_NOT_FOUND: &str = "DeploymentRollbackRevisionNotFound";
pub const ROLLBACK_CLEARED: &str = "DeploymentRollbackCleared";

/// Counts of the Pods as they are now.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Observed {
    pub replicas: i32,
    pub updated: i32,
    pub ready: i32,
    pub available: i32,
    pub terminating: i32,
}

/// What the status is computed from.
#[derive(Clone, Debug)]
pub struct Input<'a> {
    pub name: &'a str,
    pub generation: i64,
    pub spec: &'a MyDeploymentSpec,
    pub previous: &'a Status,
    pub observed: Observed,
    pub max_unavailable: i32,
    pub selector: String,
    pub target_name: &'a str,
    pub target_number: Option<i64>,
    pub current_revision: String,
    pub collision_count: Option<i32>,
    pub rollback: &'a Rollback,
    /// The desired template's revision is created by this reconcile.
    pub new_revision_created: bool,
    pub now: Time,
}

/// The new status, Events about its changes, and when to look again.
#[derive(Clone, Debug, PartialEq)]
pub struct Output {
    pub status: Status,
    pub events: Vec<Action>,
    pub requeue_after_ms: Option<u64>,
}

fn condition(type_: &str, status: &str, reason: &str, message: impl Into<String>, now: Time) -> DeploymentCondition {
    DeploymentCondition {
        type_: type_.into(),
        status: status.into(),
        last_update_time: now.to_rfc3339(),
        last_transition_time: now.to_rfc3339(),
        reason: reason.into(),
        message: message.into(),
    }
}

fn find<'c>(conditions: &'c [DeploymentCondition], type_: &str) -> Option<&'c DeploymentCondition> {
    conditions.iter().find(|c| c.type_ == type_)
}

/// `SetDeploymentCondition`: nothing changes when status and reason are the
/// same; `lastTransitionTime` survives when only the reason changes.
fn set(conditions: &mut Vec<DeploymentCondition>, mut new: DeploymentCondition) {
    if let Some(current) = conditions.iter().find(|c| c.type_ == new.type_) {
        if current.status == new.status && current.reason == new.reason {
            return;
        }
        if current.status == new.status {
            new.last_transition_time = current.last_transition_time.clone();
        }
    }
    remove(conditions, &new.type_);
    conditions.push(new);
}

fn remove(conditions: &mut Vec<DeploymentCondition>, type_: &str) {
    conditions.retain(|c| c.type_ != type_);
}

/// `DeploymentComplete`.
fn complete(replicas: i32, s: &Status) -> bool {
    s.updated_replicas == replicas && s.replicas == replicas && s.available_replicas == replicas
}

/// `DeploymentProgressing`: more updated, ready or available Pods, or fewer
/// old ones, than the previous status recorded.
fn progressing(previous: &Status, new: &Status) -> bool {
    let old_before = previous.replicas - previous.updated_replicas;
    let old_now = new.replicas - new.updated_replicas;
    new.updated_replicas > previous.updated_replicas
        || old_now < old_before
        || new.ready_replicas > previous.ready_replicas
        || new.available_replicas > previous.available_replicas
}

/// `DeploymentTimedOut`, with the deadline measured from `lastUpdateTime`.
fn timed_out(condition: Option<&DeploymentCondition>, deadline_seconds: i32, now: Time) -> bool {
    let Some(c) = condition else { return false };
    match c.reason.as_str() {
        NEW_RS_AVAILABLE => false,
        TIMED_OUT => true,
        _ => Time::parse_rfc3339(&c.last_update_time).is_ok_and(|from| from.unix_millis() + i64::from(deadline_seconds) * 1000 < now.unix_millis()),
    }
}

pub fn compute(input: &Input) -> Output {
    let spec = input.spec;
    let replicas = spec.replicas();
    let now = input.now;
    let paused = spec.paused();
    let previous = input.previous;
    let revision_label = format!("revision {:?}", input.target_name);
    let mut conditions = previous.conditions.clone();
    // `HasProgressDeadline`: MaxInt32 means "no deadline", and then upstream
    // keeps no Progressing condition at all.
    let deadline = spec.progress_deadline_seconds();
    let tracks_progress = deadline != i32::MAX;
    if !tracks_progress {
        remove(&mut conditions, PROGRESSING);
    }

    // checkPausedConditions: a timed-out rollout keeps saying so.
    let progressing_before = find(&conditions, PROGRESSING).cloned();
    if tracks_progress && progressing_before.as_ref().is_none_or(|c| c.reason != TIMED_OUT) {
        let paused_recorded = progressing_before.as_ref().is_some_and(|c| c.reason == PAUSED);
        if paused && !paused_recorded {
            set(&mut conditions, condition(PROGRESSING, "Unknown", PAUSED, "Deployment is paused", now));
        } else if !paused && paused_recorded {
            set(&mut conditions, condition(PROGRESSING, "Unknown", RESUMED, "Deployment is resumed", now));
        }
    }

    // getNewReplicaSet's conditions. Upstream says FoundNewReplicaSet only
    // when no Progressing condition exists; we also say it when the desired
    // revision changed to a stored one (a rollback, or a template reverted),
    // so the progress deadline is measured for that rollout too instead of
    // leaving the previous rollout's NewReplicaSetAvailable in place.
    let target_changed = !previous.update_revision.is_empty() && previous.update_revision != input.target_name;
    if tracks_progress && !paused {
        if input.new_revision_created {
            set(&mut conditions, condition(PROGRESSING, "True", NEW_RS_CREATED, format!("Created new {revision_label}"), now));
        } else if target_changed || find(&conditions, PROGRESSING).is_none() {
            set(&mut conditions, condition(PROGRESSING, "True", FOUND_NEW_RS, format!("Found new {revision_label}"), now));
        }
    }

    let o = input.observed;
    let mut status = Status {
        observed_generation: Some(input.generation),
        replicas: o.replicas,
        updated_replicas: o.updated,
        ready_replicas: o.ready,
        available_replicas: o.available,
        // Upstream subtracts from the ReplicaSets' desired sizes; Pods that
        // are wanted but not yet created are missing from the active count,
        // so the larger of wanted and present stands in for it.
        unavailable_replicas: (replicas.max(o.replicas) - o.available).max(0),
        terminating_replicas: o.terminating,
        selector: input.selector.clone(),
        current_revision: input.current_revision.clone(),
        update_revision: input.target_name.to_string(),
        revision: input.target_number,
        collision_count: input.collision_count,
        conditions: Vec::new(),
    };

    // calculateStatus's Available condition.
    if o.available >= replicas - input.max_unavailable {
        set(&mut conditions, condition(AVAILABLE, "True", MIN_AVAILABLE, "Deployment has minimum availability.", now));
    } else {
        set(&mut conditions, condition(AVAILABLE, "False", MIN_UNAVAILABLE, "Deployment does not have minimum availability.", now));
    }

    // syncRolloutStatus: only while rolling out (a paused deployment keeps
    // its DeploymentPaused condition).
    if tracks_progress && !paused {
        let current = find(&conditions, PROGRESSING).cloned();
        let already_complete = status.replicas == status.updated_replicas && current.as_ref().is_some_and(|c| c.reason == NEW_RS_AVAILABLE);
        if !already_complete {
            if complete(replicas, &status) {
                set(
                    &mut conditions,
                    condition(PROGRESSING, "True", NEW_RS_AVAILABLE, format!("{} has successfully progressed.", capitalised(&revision_label)), now),
                );
            } else if progressing(previous, &status) {
                let mut c = condition(PROGRESSING, "True", RS_UPDATED, format!("{} is progressing.", capitalised(&revision_label)), now);
                // Progress refreshes lastUpdateTime even when the reason stays.
                if let Some(cur) = current.as_ref().filter(|c| c.status == "True") {
                    c.last_transition_time = cur.last_transition_time.clone();
                }
                remove(&mut conditions, PROGRESSING);
                conditions.push(c);
            } else if timed_out(current.as_ref(), deadline, now) {
                set(
                    &mut conditions,
                    condition(PROGRESSING, "False", TIMED_OUT, format!("{} has timed out progressing.", capitalised(&revision_label)), now),
                );
            }
        }
    }

    // Ours: the rollback pin.
    match input.rollback {
        Rollback::None => remove(&mut conditions, ROLLED_BACK),
        Rollback::Pinned { revision, name } => set(
            &mut conditions,
            condition(
                ROLLED_BACK,
                "True",
                ROLLBACK,
                format!("spec.rollbackTo pins the Pod template to revision {revision} ({name}); clear spec.rollbackTo to follow spec.template again"),
                now,
            ),
        ),
        Rollback::NotFound { revision } => set(
            &mut conditions,
            condition(
                ROLLED_BACK,
                "False",
                ROLLBACK_NOT_FOUND,
                format!("Unable to find revision {revision} to roll back to; following spec.template"),
                now,
            ),
        ),
    }

    let events = transition_events(input, &conditions);
    let requeue_after_ms = progress_requeue(replicas, paused, deadline, &status, &conditions, now);
    status.conditions = ordered(conditions);
    Output { status, events, requeue_after_ms }
}

fn capitalised(s: &str) -> String {
    let mut chars = s.chars();
    chars.next().map(|c| c.to_uppercase().chain(chars).collect()).unwrap_or_default()
}

/// Our conditions in a fixed order (so the status does not churn), then any
/// other types (the host's own) as they were.
fn ordered(conditions: Vec<DeploymentCondition>) -> Vec<DeploymentCondition> {
    let rank = |c: &DeploymentCondition| match c.type_.as_str() {
        AVAILABLE => 0,
        PROGRESSING => 1,
        ROLLED_BACK => 2,
        _ => 3,
    };
    let mut conditions = conditions;
    conditions.sort_by_key(rank);
    conditions
}

/// Events for Progressing and RolledBack changes, compared by reason with the
/// previous status so each change is announced once.
fn transition_events(input: &Input, conditions: &[DeploymentCondition]) -> Vec<Action> {
    let mut events = Vec::new();
    let before = |t: &str| find(&input.previous.conditions, t).map(|c| c.reason.clone());
    let after = |t: &str| find(conditions, t);

    if let Some(now) = after(PROGRESSING)
        && before(PROGRESSING).as_deref() != Some(now.reason.as_str())
    {
        events.push(if now.reason == TIMED_OUT { Action::warning(&now.reason, &now.message) } else { Action::normal(&now.reason, &now.message) });
    }

    // A rollback is announced when its condition appears or says something
    // new (another revision), and once more when it is cleared.
    let said = |c: &DeploymentCondition| (c.status.clone(), c.reason.clone(), c.message.clone());
    let rolled_back_before = find(&input.previous.conditions, ROLLED_BACK);
    let changed = after(ROLLED_BACK).is_some_and(|now| rolled_back_before.map(said) != Some(said(now)));
    match input.rollback {
        Rollback::Pinned { revision, .. } if changed => {
            events.push(Action::normal(ROLLBACK, format!("Rolled back deployment {:?} to revision {revision}", input.name)));
        }
        Rollback::NotFound { revision } if changed => {
            events.push(Action::warning(ROLLBACK_NOT_FOUND, format!("Unable to find revision {revision} to roll back to; following spec.template")));
        }
        Rollback::None if rolled_back_before.is_some_and(|c| c.reason == ROLLBACK) => {
            events.push(Action::normal(ROLLBACK_CLEARED, "spec.rollbackTo was cleared; following spec.template again"));
        }
        _ => {}
    }
    events
}

/// `requeueStuckDeployment`: look again when the progress deadline passes,
/// unless the rollout is complete, timed out or paused.
fn progress_requeue(replicas: i32, paused: bool, deadline: i32, status: &Status, conditions: &[DeploymentCondition], now: Time) -> Option<u64> {
    let c = find(conditions, PROGRESSING)?;
    // Upstream also requeues a completed rollout that lost a Pod, only to
    // find that a NewReplicaSetAvailable condition never times out; skip it.
    if paused || complete(replicas, status) || c.reason == TIMED_OUT || c.reason == NEW_RS_AVAILABLE {
        return None;
    }
    let from = Time::parse_rfc3339(&c.last_update_time).ok()?;
    let after = from.unix_millis() + i64::from(deadline) * 1000 - now.unix_millis();
    // Less than a second left: check again in a second (upstream requeues
    // rate-limited); the strict `<` of timed_out needs the time to pass.
    Some(u64::try_from(after.max(1000)).unwrap_or(1000))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(s: &str) -> Time {
        Time::parse_rfc3339(s).unwrap()
    }

    fn input<'a>(spec: &'a MyDeploymentSpec, previous: &'a Status, observed: Observed, now: &str) -> Input<'a> {
        Input {
            name: "web",
            generation: 2,
            spec,
            previous,
            observed,
            max_unavailable: 0,
            selector: "app=web".into(),
            target_name: "web-abc",
            target_number: Some(2),
            current_revision: "web-old".into(),
            collision_count: None,
            rollback: &Rollback::None,
            new_revision_created: false,
            now: at(now),
        }
    }

    fn cond<'a>(s: &'a Status, t: &str) -> &'a DeploymentCondition {
        find(&s.conditions, t).unwrap_or_else(|| panic!("no {t} condition in {s:?}"))
    }

    fn spec(replicas: i32) -> MyDeploymentSpec {
        MyDeploymentSpec { replicas: Some(replicas), ..MyDeploymentSpec::default() }
    }

    #[test]
    fn a_new_revision_sets_progressing_created_and_announces_it() {
        let sp = spec(3);
        let prev = Status::default();
        let mut i = input(&sp, &prev, Observed::default(), "2026-03-01T12:00:00Z");
        i.new_revision_created = true;
        let out = compute(&i);
        let p = cond(&out.status, PROGRESSING);
        assert_eq!((p.status.as_str(), p.reason.as_str()), ("True", NEW_RS_CREATED));
        assert_eq!(cond(&out.status, AVAILABLE).status, "False");
        assert!(out.events.contains(&Action::normal(NEW_RS_CREATED, "Created new revision \"web-abc\"")));
        assert_eq!(out.requeue_after_ms, Some(600_000));
    }

    #[test]
    fn progress_refreshes_last_update_time_but_keeps_transition_time() {
        let sp = spec(3);
        let prev = Status {
            replicas: 3,
            updated_replicas: 1,
            conditions: vec![condition(PROGRESSING, "True", RS_UPDATED, "x", at("2026-03-01T11:00:00Z"))],
            ..Status::default()
        };
        let out = compute(&input(&sp, &prev, Observed { replicas: 3, updated: 2, ..Observed::default() }, "2026-03-01T12:00:00Z"));
        let p = cond(&out.status, PROGRESSING);
        assert_eq!(p.last_update_time, "2026-03-01T12:00:00Z");
        assert_eq!(p.last_transition_time, "2026-03-01T11:00:00Z");
        assert!(out.events.is_empty(), "same reason, no event: {:?}", out.events);
    }

    #[test]
    fn no_progress_past_the_deadline_times_out_with_a_warning() {
        let sp = MyDeploymentSpec { progress_deadline_seconds: Some(60), ..spec(3) };
        let prev = Status {
            replicas: 3,
            updated_replicas: 1,
            conditions: vec![condition(PROGRESSING, "True", RS_UPDATED, "x", at("2026-03-01T11:58:00Z"))],
            ..Status::default()
        };
        let out = compute(&input(&sp, &prev, Observed { replicas: 3, updated: 1, ..Observed::default() }, "2026-03-01T12:00:00Z"));
        let p = cond(&out.status, PROGRESSING);
        assert_eq!((p.status.as_str(), p.reason.as_str()), ("False", TIMED_OUT));
        assert!(matches!(&out.events[0], Action::Event { reason, .. } if reason == TIMED_OUT));
        assert_eq!(out.requeue_after_ms, None);
    }

    #[test]
    fn before_the_deadline_it_requeues_for_when_the_deadline_passes() {
        let sp = MyDeploymentSpec { progress_deadline_seconds: Some(600), ..spec(3) };
        let prev = Status {
            replicas: 3,
            updated_replicas: 1,
            conditions: vec![condition(PROGRESSING, "True", RS_UPDATED, "x", at("2026-03-01T11:55:00Z"))],
            ..Status::default()
        };
        let out = compute(&input(&sp, &prev, Observed { replicas: 3, updated: 1, ..Observed::default() }, "2026-03-01T12:00:00Z"));
        assert_eq!(out.requeue_after_ms, Some(300_000));
    }

    #[test]
    fn a_complete_rollout_says_so_once() {
        let sp = spec(3);
        let prev = Status {
            replicas: 3,
            updated_replicas: 2,
            conditions: vec![condition(PROGRESSING, "True", RS_UPDATED, "x", at("2026-03-01T11:00:00Z"))],
            ..Status::default()
        };
        let full = Observed { replicas: 3, updated: 3, ready: 3, available: 3, terminating: 0 };
        let out = compute(&input(&sp, &prev, full, "2026-03-01T12:00:00Z"));
        assert_eq!(cond(&out.status, PROGRESSING).reason, NEW_RS_AVAILABLE);
        assert_eq!(cond(&out.status, AVAILABLE).status, "True");
        assert_eq!(out.events.len(), 1);
        let again = compute(&input(&sp, &out.status, full, "2026-03-01T12:05:00Z"));
        assert_eq!(again.status, out.status);
        assert!(again.events.is_empty());
    }

    #[test]
    fn pausing_and_resuming_set_unknown_progressing() {
        let sp = MyDeploymentSpec { paused: Some(true), ..spec(3) };
        let prev = Status { conditions: vec![condition(PROGRESSING, "True", RS_UPDATED, "x", at("2026-03-01T11:00:00Z"))], ..Status::default() };
        let out = compute(&input(&sp, &prev, Observed::default(), "2026-03-01T12:00:00Z"));
        let p = cond(&out.status, PROGRESSING);
        assert_eq!((p.status.as_str(), p.reason.as_str()), ("Unknown", PAUSED));
        assert_eq!(out.requeue_after_ms, None);
        let resumed_spec = spec(3);
        let out = compute(&input(&resumed_spec, &out.status, Observed::default(), "2026-03-01T12:01:00Z"));
        assert_eq!(cond(&out.status, PROGRESSING).reason, RESUMED);
    }

    #[test]
    fn rollback_events_fire_on_pin_not_found_and_clear_only() {
        let sp = spec(3);
        let prev = Status::default();
        let pinned = Rollback::Pinned { revision: 1, name: "web-old".into() };
        let mut i = input(&sp, &prev, Observed::default(), "2026-03-01T12:00:00Z");
        i.rollback = &pinned;
        let out = compute(&i);
        assert!(out.events.contains(&Action::normal(ROLLBACK, "Rolled back deployment \"web\" to revision 1")));
        assert_eq!(cond(&out.status, ROLLED_BACK).status, "True");

        let mut again = input(&sp, &out.status, Observed::default(), "2026-03-01T12:01:00Z");
        again.rollback = &pinned;
        assert!(!compute(&again).events.iter().any(|e| matches!(e, Action::Event { reason, .. } if reason == ROLLBACK)));

        let cleared = compute(&input(&sp, &out.status, Observed::default(), "2026-03-01T12:02:00Z"));
        assert!(cleared.events.iter().any(|e| matches!(e, Action::Event { reason, .. } if reason == ROLLBACK_CLEARED)));
        assert!(find(&cleared.status.conditions, ROLLED_BACK).is_none());

        let missing = Rollback::NotFound { revision: 9 };
        let mut nf = input(&sp, &prev, Observed::default(), "2026-03-01T12:00:00Z");
        nf.rollback = &missing;
        let out = compute(&nf);
        assert!(matches!(&out.events[..], [.., Action::Event { reason, .. }] if reason == ROLLBACK_NOT_FOUND));
        assert_eq!(cond(&out.status, ROLLED_BACK).status, "False");
    }

    #[test]
    fn a_max_int32_deadline_means_no_progressing_condition() {
        let sp = MyDeploymentSpec { progress_deadline_seconds: Some(i32::MAX), ..spec(3) };
        let prev = Status { conditions: vec![condition(PROGRESSING, "True", RS_UPDATED, "x", at("2026-03-01T11:00:00Z"))], ..Status::default() };
        let mut i = input(&sp, &prev, Observed::default(), "2026-03-01T12:00:00Z");
        i.new_revision_created = true;
        let out = compute(&i);
        assert!(find(&out.status.conditions, PROGRESSING).is_none());
        assert_eq!(out.requeue_after_ms, None);
    }
}
