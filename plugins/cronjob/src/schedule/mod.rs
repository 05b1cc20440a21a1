//! Cron schedules with the semantics upstream Kubernetes gets from
//! robfig/cron v3 (`cron.ParseStandard` and `Schedule.Next`).
//!
//! Why not a cron crate: the `cron` crate (0.17) parses 6/7-field Quartz
//! syntax, numbers weekdays 1-7 from Sunday, always ANDs day-of-month with
//! day-of-week (robfig ORs them when both are restricted), has no `@every`
//! or `@midnight`, and given a start inside a repeated fall-back hour it can
//! return the earlier of two ambiguous instants, i.e. a time before the start.
//! `croner` follows Vixie cron (ORed day fields) but has no `@every` and no
//! `TZ=`/`CRON_TZ=` prefix, accepts what robfig refuses (`L`, `W`, `#`, a
//! sixth seconds field) and words its errors its own way, which the
//! apiserver-facing validation repeats. Either would leave most of this
//! module in place, so it implements robfig's small, well-specified parser
//! and `Next` directly and takes time zones from chrono-tz. The table tests
//! pin each form where a cron crate differs (ORed day fields, weekday
//! numbers, descriptors, `@every`, DST).

mod gotime;
mod next;
mod parse;
pub mod zone;

use chrono::{DateTime, TimeZone, Utc};
use chrono_tz::Tz;

pub use parse::parse;

/// A schedule could not be parsed; the message is robfig's wording.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ScheduleError(pub String);

impl std::fmt::Display for ScheduleError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for ScheduleError {}

/// A parsed schedule.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Schedule {
    /// Five cron fields, evaluated in a zone.
    Spec(SpecSchedule),
    /// `@every <duration>`: a fixed delay after the previous run.
    Every { seconds: i64 },
}

/// Bit sets of matching values per field (robfig's `SpecSchedule`; seconds
/// are always 0 for standard 5-field schedules).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SpecSchedule {
    pub minute: u64,
    pub hour: u64,
    pub dom: u64,
    pub month: u64,
    pub dow: u64,
    pub location: Tz,
}

impl Schedule {
    /// The first activation strictly after `after` (robfig's `Next`), or
    /// `None` when there is none within five years (robfig returns the zero
    /// time then), e.g. for `0 0 30 2 *`.
    pub fn next(&self, after: DateTime<Utc>) -> Option<DateTime<Utc>> {
        let unix = after.timestamp();
        let next = match self {
            // `t.Add(delay - t.Nanosecond())`: whole seconds after `after`.
            Schedule::Every { seconds } => unix.checked_add(*seconds)?,
            Schedule::Spec(spec) => next::next(spec, unix)?,
        };
        Utc.timestamp_opt(next, 0).single()
    }
}

#[cfg(test)]
mod tests;
