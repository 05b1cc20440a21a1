//! The host's clock reading, as a UTC instant with the API server's
//! formatting (`metav1.Time`: RFC 3339, whole seconds, `Z`).

use chrono::{DateTime, SecondsFormat, TimeZone, Utc};

/// An instant in UTC. Plugins get `now` as one and never read a clock.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Time(pub DateTime<Utc>);

impl Time {
    /// From milliseconds since the Unix epoch, as `reconcile` receives `now`.
    /// Out-of-range values clamp to the epoch.
    pub fn from_unix_millis(ms: i64) -> Self {
        Time(Utc.timestamp_millis_opt(ms).single().unwrap_or_default())
    }

    /// Milliseconds since the Unix epoch.
    pub fn unix_millis(self) -> i64 {
        self.0.timestamp_millis()
    }

    /// Parses RFC 3339, as in `creationTimestamp` or `--now`.
    pub fn parse_rfc3339(text: &str) -> Result<Self, chrono::ParseError> {
        DateTime::parse_from_rfc3339(text).map(|t| Time(t.with_timezone(&Utc)))
    }

    /// Formats as `metav1.Time` does: `2026-01-02T03:04:05Z`.
    pub fn to_rfc3339(self) -> String {
        self.0.to_rfc3339_opts(SecondsFormat::Secs, true)
    }
}

impl From<DateTime<Utc>> for Time {
    fn from(t: DateTime<Utc>) -> Self {
        Time(t)
    }
}

impl std::fmt::Display for Time {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.to_rfc3339())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn millis_round_trip_and_format_in_whole_seconds() {
        let t = Time::from_unix_millis(1_767_225_600_123);
        assert_eq!(t.unix_millis(), 1_767_225_600_123);
        assert_eq!(t.to_rfc3339(), "2026-01-01T00:00:00Z");
        assert_eq!(Time::parse_rfc3339("2026-01-01T01:00:00+01:00").unwrap().to_rfc3339(), "2026-01-01T00:00:00Z");
    }
}
