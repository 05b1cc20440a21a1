//! The numbers of a rollout, as upstream's `deployment/util` computes them: `maxSurge` and
//! `maxUnavailable` against `spec.replicas` (percentages: surge rounded up, unavailable rounded
//! down; both zero means one may be unavailable), how far the new ReplicaSet may grow, and the
//! share of a scaling event each ReplicaSet gets.

use crate::spec_replicas;
use serde_json::Value;
use workload_math::IntOrPercent;

/// `ResolveFenceposts` over the JSON fields (`workload_math`'s, shared with the plugins); unset
/// or malformed values count as 0, as validation refuses malformed ones on write.
pub(crate) fn fenceposts(max_surge: Option<&Value>, max_unavailable: Option<&Value>, desired: i32) -> (i32, i32) {
    let resolve = |v: Option<&Value>, round_up| {
        v.and_then(IntOrPercent::from_json).and_then(|v| workload_math::scaled_value(v, desired, round_up).ok()).unwrap_or(0)
    };
    let surge = resolve(max_surge, true);
    let unavailable = resolve(max_unavailable, false);
    // Both zero: one may be unavailable (a rollout must progress).
    workload_math::resolve_fenceposts(IntOrPercent::Int(surge.into()), IntOrPercent::Int(unavailable.into()), desired).unwrap_or((surge, unavailable))
}

fn rolling_update(d: &Value) -> Option<&Value> {
    let strategy = d.pointer("/spec/strategy")?;
    let kind = strategy.get("type").and_then(Value::as_str).unwrap_or("RollingUpdate");
    (kind == "RollingUpdate").then(|| strategy.get("rollingUpdate").unwrap_or(&Value::Null))
}

/// Whether the Deployment rolls (rather than recreates).
pub(crate) fn is_rolling(d: &Value) -> bool {
    rolling_update(d).is_some()
}

/// `MaxSurge`: 0 for Recreate.
pub(crate) fn max_surge(d: &Value) -> i32 {
    let Some(ru) = rolling_update(d) else { return 0 };
    fenceposts(ru.get("maxSurge"), ru.get("maxUnavailable"), spec_replicas(d)).0
}

/// `MaxUnavailable`: 0 for Recreate or no replicas, at most `spec.replicas`.
pub(crate) fn max_unavailable(d: &Value) -> i32 {
    let replicas = spec_replicas(d);
    let Some(ru) = rolling_update(d) else { return 0 };
    if replicas == 0 {
        return 0;
    }
    fenceposts(ru.get("maxSurge"), ru.get("maxUnavailable"), replicas).1.min(replicas)
}

/// `NewRSNewReplicas`: what the new ReplicaSet may be scaled to now, given the Pods all
/// ReplicaSets ask for (`all_replicas`) and what it has (`new_replicas`).
pub(crate) fn new_rs_new_replicas(d: &Value, all_replicas: i32, new_replicas: i32) -> i32 {
    let replicas = spec_replicas(d);
    if !is_rolling(d) {
        return replicas;
    }
    let max_total = replicas + max_surge(d);
    if all_replicas >= max_total {
        return new_replicas;
    }
    new_replicas + (max_total - all_replicas).min(replicas - new_replicas)
}

/// `integer.RoundToInt32`: half away from zero.
pub(crate) fn round(x: f64) -> i32 {
    if x < 0.0 { (x - 0.5) as i32 } else { (x + 0.5) as i32 }
}

/// `GetReplicaSetProportion`: the part of `to_add` (positive or negative) one ReplicaSet of
/// `rs_replicas` gets in a scaling event, given what was handed out already (`added`) and the
/// Deployment's size when the ReplicaSet was last scaled (`annotated_max`, its
/// `max-replicas` annotation, else `status.replicas`).
pub(crate) fn proportion(rs_replicas: i32, d_replicas: i32, d_max_surge: i32, annotated_max: i32, to_add: i32, added: i32) -> i32 {
    if rs_replicas == 0 || to_add == 0 || to_add == added {
        return 0;
    }
    let fraction = if d_replicas == 0 {
        -rs_replicas
    } else if annotated_max == 0 {
        0
    } else {
        let size = f64::from(rs_replicas * (d_replicas + d_max_surge)) / f64::from(annotated_max);
        round(size) - rs_replicas
    };
    let allowed = to_add - added;
    if to_add > 0 { fraction.min(allowed) } else { fraction.max(allowed) }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn rolling(replicas: i32, surge: Value, unavailable: Value) -> Value {
        json!({"spec": {"replicas": replicas, "strategy": {"type": "RollingUpdate", "rollingUpdate": {"maxSurge": surge, "maxUnavailable": unavailable}}}})
    }

    #[test]
    fn percentages_round_surge_up_and_unavailable_down() {
        // 25% of 10 = 2.5: surge 3, unavailable 2 (upstream's defaults on 10 replicas).
        let d = rolling(10, json!("25%"), json!("25%"));
        assert_eq!((max_surge(&d), max_unavailable(&d)), (3, 2));
        // 25% of 1 = 0.25: surge 1, unavailable 0 (a 1-replica Deployment surges).
        let d = rolling(1, json!("25%"), json!("25%"));
        assert_eq!((max_surge(&d), max_unavailable(&d)), (1, 0));
        // 25% of 3 = 0.75.
        let d = rolling(3, json!("25%"), json!("25%"));
        assert_eq!((max_surge(&d), max_unavailable(&d)), (1, 0));
    }

    #[test]
    fn zero_surge_and_zero_unavailable_let_one_pod_be_unavailable() {
        assert_eq!(fenceposts(Some(&json!(0)), Some(&json!("0%")), 5), (0, 1));
        assert_eq!(fenceposts(Some(&json!("10%")), Some(&json!("10%")), 5), (1, 0));
        assert_eq!(fenceposts(None, None, 5), (0, 1));
    }

    #[test]
    fn integers_are_taken_as_they_are_and_unavailable_is_capped_by_replicas() {
        let d = rolling(3, json!(2), json!(5));
        assert_eq!((max_surge(&d), max_unavailable(&d)), (2, 3));
        let recreate = json!({"spec": {"replicas": 3, "strategy": {"type": "Recreate"}}});
        assert_eq!((max_surge(&recreate), max_unavailable(&recreate)), (0, 0));
        assert_eq!(fenceposts(Some(&json!("abc")), Some(&json!(2)), 10), (0, 2));
    }

    #[test]
    fn the_new_replica_set_grows_within_the_surge() {
        let d = rolling(10, json!("25%"), json!("25%"));
        // Old RS at 10, new at 0: total may reach 13, so the new RS gets 3.
        assert_eq!(new_rs_new_replicas(&d, 10, 0), 3);
        // Already at the limit: no growth.
        assert_eq!(new_rs_new_replicas(&d, 13, 3), 3);
        // Old RS scaled down to 5: new may go to 8, never past 10.
        assert_eq!(new_rs_new_replicas(&d, 8, 3), 8);
        assert_eq!(new_rs_new_replicas(&d, 2, 8), 10);
        let recreate = json!({"spec": {"replicas": 4, "strategy": {"type": "Recreate"}}});
        assert_eq!(new_rs_new_replicas(&recreate, 0, 0), 4);
    }

    #[test]
    fn scaling_events_are_shared_in_proportion() {
        // upstream's TestScale "proportional scaling: 5 -> 10": RSs of 4 and 2 with
        // max-replicas 6 (5 + surge 1 ... annotated 6), deployment now 10 + surge 3 = 13.
        assert_eq!(proportion(4, 10, 3, 6, 7, 0), round(4.0 * 13.0 / 6.0) - 4);
        // Capped by what is left to hand out.
        assert_eq!(proportion(4, 10, 3, 6, 2, 0), 2);
        // Scaling to zero takes the whole ReplicaSet.
        assert_eq!(proportion(4, 0, 0, 6, -6, 0), -4);
        assert_eq!(proportion(0, 10, 3, 6, 7, 0), 0);
        assert_eq!((round(2.5), round(-2.5), round(2.4)), (3, -3, 2));
    }
}
