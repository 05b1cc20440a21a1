//! maxSurge / maxUnavailable of a MyDeployment's strategy, as upstream's
//! `deploymentutil.MaxSurge` and `MaxUnavailable`; the int-or-percent and fencepost rules
//! themselves are `workload_math`'s, shared with the simulated cluster.

use crate::api::{IntOrPercent, ResolvedStrategy};

pub use workload_math::ScaleError;

/// Parses `"25%"` into 25. `None` for anything else.
pub fn parse_percent(s: &str) -> Option<i64> {
    s.strip_suffix('%')?.parse::<i64>().ok()
}

fn shared(value: &IntOrPercent) -> workload_math::IntOrPercent<'_> {
    match value {
        IntOrPercent::Int(i) => workload_math::IntOrPercent::Int(*i),
        IntOrPercent::Str(s) => workload_math::IntOrPercent::Str(s),
    }
}

/// `ResolveFenceposts` (`workload_math`'s): surge rounds up, unavailable rounds down, and if
/// both come out zero unavailable becomes 1, so a rollout can always make progress.
pub fn resolve_fenceposts(max_surge: &IntOrPercent, max_unavailable: &IntOrPercent, desired: i32) -> Result<(i32, i32), ScaleError> {
    workload_math::resolve_fenceposts(shared(max_surge), shared(max_unavailable), desired)
}

/// `deploymentutil.MaxSurge`: zero for Recreate.
pub fn max_surge(strategy: &ResolvedStrategy, replicas: i32) -> i32 {
    match strategy {
        ResolvedStrategy::Recreate => 0,
        ResolvedStrategy::RollingUpdate { max_surge, max_unavailable } => {
            // Invalid values never pass validation; treat them as zero here.
            resolve_fenceposts(max_surge, max_unavailable, replicas).map(|(s, _)| s).unwrap_or(0)
        }
    }
}

/// `deploymentutil.MaxUnavailable`: zero for Recreate or zero replicas, and
/// never more than the replicas.
pub fn max_unavailable(strategy: &ResolvedStrategy, replicas: i32) -> i32 {
    match strategy {
        ResolvedStrategy::Recreate => 0,
        _ if replicas == 0 => 0,
        ResolvedStrategy::RollingUpdate { max_surge, max_unavailable } => {
            let unavailable = resolve_fenceposts(max_surge, max_unavailable, replicas).map(|(_, u)| u).unwrap_or(1);
            unavailable.min(replicas)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn p(s: &str) -> IntOrPercent {
        IntOrPercent::Str(s.into())
    }

    fn i(v: i64) -> IntOrPercent {
        IntOrPercent::Int(v)
    }

    #[test]
    fn fenceposts_round_surge_up_and_unavailable_down() {
        // (maxSurge, maxUnavailable, replicas) -> (surge, unavailable)
        let cases = [
            (p("25%"), p("25%"), 3, (1, 0)),
            (p("25%"), p("25%"), 4, (1, 1)),
            (p("25%"), p("25%"), 5, (2, 1)),
            (p("25%"), p("25%"), 10, (3, 2)),
            (p("30%"), p("30%"), 1, (1, 0)),
            (p("100%"), p("100%"), 7, (7, 7)),
            (p("0%"), p("10%"), 5, (0, 1)), // both would be zero: unavailable becomes 1
            (i(1), i(0), 3, (1, 0)),
            (i(0), i(1), 3, (0, 1)),
            (i(2), i(5), 3, (2, 5)),
            (p("0%"), p("0%"), 0, (0, 1)),
        ];
        for (surge, unavailable, replicas, want) in cases {
            assert_eq!(resolve_fenceposts(&surge, &unavailable, replicas).unwrap(), want, "{surge}/{unavailable} of {replicas}");
        }
    }

    #[test]
    fn a_string_without_percent_sign_is_refused() {
        assert_eq!(resolve_fenceposts(&p("25"), &p("25%"), 4), Err(ScaleError::NotAPercentage("25".into())));
    }

    #[test]
    fn max_unavailable_is_capped_at_replicas_and_zero_for_recreate_or_no_replicas() {
        let ru = ResolvedStrategy::RollingUpdate { max_surge: i(1), max_unavailable: i(5) };
        assert_eq!(max_unavailable(&ru, 3), 3);
        assert_eq!(max_unavailable(&ru, 0), 0);
        assert_eq!(max_unavailable(&ResolvedStrategy::Recreate, 3), 0);
        assert_eq!(max_surge(&ResolvedStrategy::Recreate, 3), 0);
        assert_eq!(max_surge(&ru, 3), 1);
    }
}
