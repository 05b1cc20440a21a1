//! `maxSurge` / `maxUnavailable` against a replica count: upstream's
//! `intstr.GetScaledValueFromIntOrPercent` (an integer as is; `"N%"` of the total, rounded up
//! for surge and down for unavailable) and `deploymentutil.ResolveFenceposts` (when both come
//! to zero, one Pod may be unavailable, "on the theory that surge might not work due to quota",
//! so a rollout can always progress).

use serde_json::Value;

/// An `intstr.IntOrString` as the rolling-update fields hold it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum IntOrPercent<'a> {
    Int(i64),
    Str(&'a str),
}

impl<'a> IntOrPercent<'a> {
    /// A JSON number or string; `None` for any other JSON (or a number that is not an integer).
    pub fn from_json(value: &'a Value) -> Option<Self> {
        match value {
            Value::Number(n) => n.as_i64().map(IntOrPercent::Int),
            Value::String(s) => Some(IntOrPercent::Str(s)),
            _ => None,
        }
    }
}

/// Why an int-or-percent cannot be scaled (upstream's `getIntOrPercentValueSafely` errors).
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum ScaleError {
    #[error("invalid value {0:?}: a string must be a percentage (`<integer>%`)")]
    NotAPercentage(String),
}

/// `GetScaledValueFromIntOrPercent`: an integer as is; `"N%"` of `total`, rounded up when
/// `round_up`, else down. Integer arithmetic: upstream's `math.Ceil(float64(v*total)/100)` is
/// exact for every `i32` total, so the results agree.
pub fn scaled_value(value: IntOrPercent<'_>, total: i32, round_up: bool) -> Result<i32, ScaleError> {
    match value {
        IntOrPercent::Int(i) => Ok(clamp_i32(i)),
        IntOrPercent::Str(s) => {
            let percent: i64 = s.strip_suffix('%').and_then(|p| p.parse().ok()).ok_or_else(|| ScaleError::NotAPercentage(s.to_string()))?;
            let product = percent * i64::from(total);
            let scaled = if round_up { product.div_euclid(100) + i64::from(product.rem_euclid(100) != 0) } else { product.div_euclid(100) };
            Ok(clamp_i32(scaled))
        }
    }
}

fn clamp_i32(v: i64) -> i32 {
    v.clamp(i64::from(i32::MIN), i64::from(i32::MAX)) as i32
}

/// `ResolveFenceposts`: (surge, unavailable) for `desired` replicas, surge rounded up and
/// unavailable down; both zero makes unavailable one.
pub fn resolve_fenceposts(max_surge: IntOrPercent<'_>, max_unavailable: IntOrPercent<'_>, desired: i32) -> Result<(i32, i32), ScaleError> {
    let surge = scaled_value(max_surge, desired, true)?;
    let mut unavailable = scaled_value(max_unavailable, desired, false)?;
    if surge == 0 && unavailable == 0 {
        unavailable = 1;
    }
    Ok((surge, unavailable))
}

#[cfg(test)]
mod tests {
    use super::*;
    use IntOrPercent::{Int, Str};

    #[test]
    fn scaled_values_are_upstreams() {
        // The cases of upstream's `TestGetIntFromIntOrPercent` (v0.36.3), which calls
        // `GetScaledValueFromIntOrPercent` (k8s.io/apimachinery/pkg/util/intstr/intstr_test.go):
        // (value, total, round up) -> want; -1 where upstream expects an error.
        let cases = [
            (Int(123), 0, false, 123),
            (Str("90%"), 100, true, 90),
            (Str("90%"), 95, true, 86),
            (Str("90%"), 95, false, 85),
            (Str("%"), 0, false, -1),
            (Str("90#"), 0, false, -1),
            (Str("#%"), 0, false, -1),
            (Str("90"), 0, false, -1),
        ];
        for (value, total, round_up, want) in cases {
            let got = scaled_value(value, total, round_up);
            if want < 0 {
                assert!(matches!(got, Err(ScaleError::NotAPercentage(_))), "{value:?}: {got:?}");
            } else {
                assert_eq!(got, Ok(want), "{value:?} of {total}, round up {round_up}");
            }
        }
    }

    #[test]
    fn fenceposts_round_surge_up_and_unavailable_down() {
        // (maxSurge, maxUnavailable, replicas) -> (surge, unavailable)
        let cases = [
            (Str("25%"), Str("25%"), 3, (1, 0)),
            (Str("25%"), Str("25%"), 4, (1, 1)),
            (Str("25%"), Str("25%"), 5, (2, 1)),
            (Str("25%"), Str("25%"), 10, (3, 2)),
            (Str("30%"), Str("30%"), 1, (1, 0)),
            (Str("100%"), Str("100%"), 7, (7, 7)),
            (Str("0%"), Str("10%"), 5, (0, 1)),
            (Int(1), Int(0), 3, (1, 0)),
            (Int(0), Int(1), 3, (0, 1)),
            (Int(2), Int(5), 3, (2, 5)),
            (Int(0), Str("0%"), 5, (0, 1)),
            (Str("0%"), Str("0%"), 0, (0, 1)),
        ];
        for (surge, unavailable, replicas, want) in cases {
            assert_eq!(resolve_fenceposts(surge, unavailable, replicas), Ok(want), "{surge:?}/{unavailable:?} of {replicas}");
        }
    }

    #[test]
    fn a_string_that_is_not_a_percentage_is_refused_with_its_value() {
        let e = resolve_fenceposts(Str("25"), Str("25%"), 4).unwrap_err();
        assert_eq!(e.to_string(), r#"invalid value "25": a string must be a percentage (`<integer>%`)"#);
        assert_eq!(IntOrPercent::from_json(&serde_json::json!(true)), None);
    }
}
