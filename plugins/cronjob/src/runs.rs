//! Which scheduled run is due: upstream's `mostRecentScheduleTime`, with an
//! exact search for the most recent time.
//!
//! Upstream estimates how many runs were missed from the gap between the
//! first two activations after the last scheduled time, then iterates from an
//! estimated starting point. For irregular schedules (weekdays only, say)
//! after a long outage that starting point can lie past the real most recent
//! activation, and upstream then starts nothing. Here the estimate is kept
//! for what it is used for (more than 100 missed runs: warn), and the most
//! recent activation is found exactly by searching back from `now` in
//! doubling windows, which costs a few windows' worth of `next` calls however
//! long the outage was.

use chrono::{DateTime, Duration, Utc};

use crate::schedule::Schedule;

/// How many activations passed unrun since the earliest time considered.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Missed {
    /// At most one: the normal case.
    None,
    /// A few (upstream's `fewMissed`).
    Few,
    /// More than 100 by upstream's estimate: warn `TooManyMissedTimes`.
    Many,
}

/// The due run, if any.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Due {
    /// The most recent activation in `(earliest, now]`.
    pub most_recent: Option<DateTime<Utc>>,
    pub missed: Missed,
}

/// The schedule cannot be used, although it parses (e.g. `0 0 30 2 *`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct InvalidSchedule(pub String);

/// Upstream's wording for a schedule with no usable activations.
const NO_INTERVAL: &str = "time difference between two schedules is less than 1 second";

/// Cap on `next` calls per search window; never reached by real schedules
/// (a window holds at most about twice the activations since the most recent one).
const MAX_STEPS_PER_WINDOW: usize = 100_000;

/// The most recent activation after `earliest` and no later than `now`.
pub fn most_recent(schedule: &Schedule, earliest: DateTime<Utc>, now: DateTime<Utc>) -> Result<Due, InvalidSchedule> {
    let Some(t1) = schedule.next(earliest) else {
        return Err(InvalidSchedule(NO_INTERVAL.into()));
    };
    if now < t1 {
        return Ok(Due { most_recent: None, missed: Missed::None });
    }
    let Some(t2) = schedule.next(t1) else {
        // The last activation for five years: it is the one.
        return Ok(Due { most_recent: Some(t1), missed: Missed::None });
    };
    if now < t2 {
        return Ok(Due { most_recent: Some(t1), missed: Missed::None });
    }
    let interval = (t2 - t1).num_seconds();
    if interval < 1 {
        return Err(InvalidSchedule(NO_INTERVAL.into()));
    }
    let estimate = (now - t1).num_seconds() / interval + 1;
    let missed = if estimate > 100 { Missed::Many } else { Missed::Few };
    let most_recent = match schedule {
        // Activations of `@every` are `earliest + k * delay`: anchored, not absolute.
        Schedule::Every { seconds } => earliest + Duration::seconds((now - earliest).num_seconds() / seconds * seconds),
        Schedule::Spec(_) => search_back(schedule, earliest, now, interval).unwrap_or(t2),
    };
    Ok(Due { most_recent: Some(most_recent), missed })
}

/// The latest activation in `(earliest, now]` of a schedule whose activations
/// are absolute times, looking back from `now` over windows of 1, 2, 4...
/// intervals.
fn search_back(schedule: &Schedule, earliest: DateTime<Utc>, now: DateTime<Utc>, interval: i64) -> Option<DateTime<Utc>> {
    let mut span = interval.max(1);
    loop {
        let start = (now - Duration::seconds(span)).max(earliest);
        let mut latest = None;
        let mut at = schedule.next(start);
        let mut steps = 0;
        while let Some(t) = at.filter(|t| *t <= now) {
            latest = Some(t);
            steps += 1;
            if steps >= MAX_STEPS_PER_WINDOW {
                break;
            }
            at = schedule.next(t);
        }
        if latest.is_some() || start == earliest {
            return latest;
        }
        span = span.saturating_mul(2);
    }
}

/// When to look again: the first activation after the most recent one (or
/// after `earliest` when none is due), as upstream's `nextScheduleTimeDuration`.
/// `@every` schedules stay anchored to their previous run this way.
pub fn next_run(schedule: &Schedule, earliest: DateTime<Utc>, now: DateTime<Utc>) -> Option<DateTime<Utc>> {
    let anchor = match most_recent(schedule, earliest, now) {
        Ok(Due { most_recent: Some(t), .. }) => t,
        Ok(Due { most_recent: None, .. }) => earliest,
        Err(_) => now,
    };
    schedule.next(anchor)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::schedule::parse;

    fn t(text: &str) -> DateTime<Utc> {
        DateTime::parse_from_rfc3339(text).unwrap().with_timezone(&Utc)
    }

    fn due(spec: &str, earliest: &str, now: &str) -> Result<Due, InvalidSchedule> {
        most_recent(&parse(spec, chrono_tz::UTC).unwrap(), t(earliest), t(now))
    }

    /// (what, schedule, earliest, now, most recent, missed)
    type Case = (&'static str, &'static str, &'static str, &'static str, Option<&'static str>, Missed);

    #[test]
    fn the_most_recent_activation_is_due() {
        #[rustfmt::skip]
        let cases: &[Case] = &[
            ("nothing due before the first activation", "*/5 * * * *", "2024-05-01T10:00:00Z", "2024-05-01T10:04:59Z", None, Missed::None),
            ("an activation at exactly now is due", "*/5 * * * *", "2024-05-01T10:00:00Z", "2024-05-01T10:05:00Z", Some("2024-05-01T10:05:00Z"), Missed::None),
            ("one activation passed", "*/5 * * * *", "2024-05-01T10:00:00Z", "2024-05-01T10:07:00Z", Some("2024-05-01T10:05:00Z"), Missed::None),
            ("a few missed: the latest wins", "*/5 * * * *", "2024-05-01T10:00:00Z", "2024-05-01T10:17:00Z", Some("2024-05-01T10:15:00Z"), Missed::Few),
            ("more than 100 missed", "* * * * *", "2024-05-01T10:00:00Z", "2024-05-01T12:00:30Z", Some("2024-05-01T12:00:00Z"), Missed::Many),
            ("exactly 100 missed is still a few", "* * * * *", "2024-05-01T10:00:00Z", "2024-05-01T11:40:00Z", Some("2024-05-01T11:40:00Z"), Missed::Few),
            ("a year of missed minutes is found quickly", "* * * * *", "2023-05-01T10:00:00Z", "2024-05-01T10:00:30Z", Some("2024-05-01T10:00:00Z"), Missed::Many),
            // Upstream's estimate would start iterating on Sunday night and find nothing.
            ("weekday schedules after a long weekend outage", "30 6-16/4 * * 1-5", "2024-05-02T14:30:00Z", "2024-05-06T05:00:00Z", Some("2024-05-03T14:30:00Z"), Missed::Few),
            ("month ends", "0 0 31 * *", "2024-01-31T00:00:00Z", "2024-05-15T00:00:00Z", Some("2024-03-31T00:00:00Z"), Missed::None),
            ("a last scheduled time in the future (clock skew) holds runs back", "* * * * *", "2024-05-01T10:10:00Z", "2024-05-01T10:05:00Z", None, Missed::None),
        ];
        for (what, spec, earliest, now, want, missed) in cases {
            let got = due(spec, earliest, now).unwrap();
            assert_eq!(got, Due { most_recent: want.map(t), missed: *missed }, "{what}");
        }
    }

    #[test]
    fn a_schedule_that_never_fires_is_invalid() {
        assert_eq!(due("0 0 30 2 *", "2024-01-01T00:00:00Z", "2024-05-01T00:00:00Z"), Err(InvalidSchedule(NO_INTERVAL.into())));
    }

    #[test]
    fn every_schedules_stay_anchored_to_their_previous_run() {
        let every = parse("@every 5m", chrono_tz::UTC).unwrap();
        let earliest = t("2024-05-01T10:00:17Z");
        let got = most_recent(&every, earliest, t("2024-05-01T10:31:00Z")).unwrap();
        assert_eq!(got.most_recent, Some(t("2024-05-01T10:30:17Z")));
        assert_eq!(next_run(&every, earliest, t("2024-05-01T10:31:00Z")), Some(t("2024-05-01T10:35:17Z")));
    }

    #[test]
    fn the_next_run_follows_the_most_recent_activation() {
        let hourly = parse("0 * * * *", chrono_tz::UTC).unwrap();
        assert_eq!(next_run(&hourly, t("2024-05-01T10:00:00Z"), t("2024-05-01T10:20:00Z")), Some(t("2024-05-01T11:00:00Z")));
        assert_eq!(next_run(&hourly, t("2024-05-01T08:00:00Z"), t("2024-05-01T10:20:00Z")), Some(t("2024-05-01T11:00:00Z")));
    }
}
