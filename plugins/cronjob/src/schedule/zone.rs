//! Time zones by IANA name, as Go's `time.LoadLocation` finds them, from the
//! tz database compiled into chrono-tz (a plugin has no filesystem to read
//! zoneinfo from, and its answer must not depend on the host's copy).

use chrono_tz::Tz;

/// Loads a zone: `""` and `"UTC"` are UTC, as in Go; `"Local"` is the
/// controller's local zone, which for this plugin is always UTC (the
/// kube-controller-manager image runs in UTC too).
pub fn load(name: &str) -> Result<Tz, String> {
    match name {
        "" | "UTC" | "Local" => Ok(chrono_tz::UTC),
        _ if name.contains("..") || name.starts_with('/') || name.starts_with('\\') => Err("time: invalid location name".to_string()),
        _ => name.parse::<Tz>().map_err(|_| format!("unknown time zone {name}")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn iana_names_load_and_unknown_ones_do_not() {
        assert_eq!(load("America/New_York"), Ok(chrono_tz::America::New_York));
        assert_eq!(load(""), Ok(chrono_tz::UTC));
        assert_eq!(load("Mars/Olympus_Mons"), Err("unknown time zone Mars/Olympus_Mons".into()));
        assert_eq!(load("america/new_york"), Err("unknown time zone america/new_york".into()));
        assert!(load("../etc/passwd").is_err());
    }
}
