//! Time source for everything the server stamps (creationTimestamp, deletionTimestamp, Event
//! times, table ages). Injectable so the whole cluster can run under virtual time; nothing else
//! in this crate reads the system clock.

use chrono::{DateTime, SecondsFormat, Utc};
use std::sync::Arc;

/// A source of "now".
pub trait Clock: Send + Sync + 'static {
    /// The current time.
    fn now(&self) -> DateTime<Utc>;
}

/// The wall clock (default).
#[derive(Debug, Default, Clone, Copy)]
pub struct SystemClock;

impl Clock for SystemClock {
    fn now(&self) -> DateTime<Utc> {
        Utc::now()
    }
}

impl<F> Clock for F
where
    F: Fn() -> DateTime<Utc> + Send + Sync + 'static,
{
    fn now(&self) -> DateTime<Utc> {
        self()
    }
}

/// Shared clock handle.
pub type SharedClock = Arc<dyn Clock>;

/// RFC 3339 with second precision and a `Z` suffix, as Kubernetes serialises `metav1.Time`.
pub fn timestamp(t: DateTime<Utc>) -> String {
    t.to_rfc3339_opts(SecondsFormat::Secs, true)
}

/// RFC 3339 with microseconds, as Kubernetes serialises `metav1.MicroTime`.
pub fn micro_timestamp(t: DateTime<Utc>) -> String {
    t.to_rfc3339_opts(SecondsFormat::Micros, true)
}
