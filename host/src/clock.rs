//! The host's one source of "now". Everything that stamps or schedules by
//! wall time (the `now` a plugin sees, condition and Event times) reads it
//! through [`Clock`], so virtual time can be swapped in later (`host
//! simulate`). Delays (queue deadlines, backoff) use `tokio::time`, which
//! follows tokio's paused clock in tests.

use std::sync::Arc;

use chrono::{DateTime, Utc};

/// A source of wall-clock time.
pub trait Clock: Send + Sync + 'static {
    fn now(&self) -> DateTime<Utc>;
}

/// The system clock (production).
#[derive(Clone, Copy, Debug, Default)]
pub struct SystemClock;

impl Clock for SystemClock {
    fn now(&self) -> DateTime<Utc> {
        Utc::now()
    }
}

/// Shared handle.
pub type SharedClock = Arc<dyn Clock>;

/// RFC 3339, second precision, `Z` (metav1.Time).
pub fn timestamp(t: DateTime<Utc>) -> String {
    t.to_rfc3339_opts(chrono::SecondsFormat::Secs, true)
}

/// RFC 3339, microseconds, `Z` (metav1.MicroTime).
pub fn micro_timestamp(t: DateTime<Utc>) -> String {
    t.to_rfc3339_opts(chrono::SecondsFormat::Micros, true)
}

/// A clock that reads what it is set to, for tests and (later) virtual time.
#[derive(Debug)]
pub struct ManualClock {
    now: std::sync::Mutex<DateTime<Utc>>,
}

impl ManualClock {
    pub fn new(at: DateTime<Utc>) -> Self {
        Self { now: std::sync::Mutex::new(at) }
    }

    pub fn set(&self, at: DateTime<Utc>) {
        *self.now.lock().unwrap() = at;
    }

    pub fn advance(&self, by: std::time::Duration) {
        let mut now = self.now.lock().unwrap();
        *now += chrono::Duration::from_std(by).expect("a sane duration");
    }
}

impl Clock for ManualClock {
    fn now(&self) -> DateTime<Utc> {
        *self.now.lock().unwrap()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_manual_clock_reads_what_it_is_set_to() {
        let t0 = DateTime::parse_from_rfc3339("2026-01-01T00:00:00Z").unwrap().with_timezone(&Utc);
        let c = ManualClock::new(t0);
        c.advance(std::time::Duration::from_secs(90));
        assert_eq!(timestamp(c.now()), "2026-01-01T00:01:30Z");
        c.set(t0);
        assert_eq!(c.now(), t0);
    }
}
