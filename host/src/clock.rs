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
