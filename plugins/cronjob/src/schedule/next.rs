//! robfig/cron v3's `SpecSchedule.Next`, step for step: find the first
//! matching month, then day, hour, minute and second, incrementing a field
//! until it matches and starting over from the month whenever an increment
//! wraps. Increments are Go's: months and days through `time.Date`
//! normalisation, hours and minutes as absolute durations. That choice is
//! what fixes the DST behaviour upstream Kubernetes has: a wall time skipped
//! by spring-forward never matches (a daily 02:30 job does not run that day),
//! and a wall time repeated by fall-back matches twice.

use super::SpecSchedule;
use super::gotime::{self, Wall};
use super::parse::STAR_BIT;

const HOUR: i64 = 3_600;
const MINUTE: i64 = 60;

fn has(bits: u64, value: u32) -> bool {
    bits & (1 << value) != 0
}

/// robfig's `dayMatches`: when either day field is `*` (or `?`) both must
/// match; when both are restricted, either may match (Vixie cron's rule).
fn day_matches(spec: &SpecSchedule, w: &Wall) -> bool {
    let dom = has(spec.dom, w.day);
    let dow = has(spec.dow, w.weekday);
    if spec.dom & STAR_BIT != 0 || spec.dow & STAR_BIT != 0 { dom && dow } else { dom || dow }
}

/// The next activation strictly after `after` (Unix seconds), or `None`
/// when none falls within five years.
pub fn next(spec: &SpecSchedule, after: i64) -> Option<i64> {
    let zone = spec.location;
    // Start at the earliest possible time: the upcoming whole second.
    let mut t = after.checked_add(1)?;
    let mut added = false;
    let year_limit = gotime::wall(t, zone).year + 5;

    'wrap: loop {
        let mut w = gotime::wall(t, zone);
        if w.year > year_limit {
            return None;
        }

        while !has(spec.month, w.month) {
            if !added {
                added = true;
                t = gotime::date(zone, w.year, i64::from(w.month), 1, 0, 0, 0)?;
            }
            t = gotime::add_date(t, zone, 1, 0)?;
            w = gotime::wall(t, zone);
            if w.month == 1 {
                continue 'wrap;
            }
        }

        while !day_matches(spec, &w) {
            if !added {
                added = true;
                t = gotime::date(zone, w.year, i64::from(w.month), i64::from(w.day), 0, 0, 0)?;
            }
            t = gotime::add_date(t, zone, 0, 1)?;
            w = gotime::wall(t, zone);
            // Where DST moves midnight, the day starts at 01:00 or 23:00: pull back to the day.
            if w.hour != 0 {
                t += if w.hour > 12 { i64::from(24 - w.hour) * HOUR } else { -i64::from(w.hour) * HOUR };
                w = gotime::wall(t, zone);
            }
            if w.day == 1 {
                continue 'wrap;
            }
        }

        while !has(spec.hour, w.hour) {
            if !added {
                added = true;
                t = gotime::date(zone, w.year, i64::from(w.month), i64::from(w.day), i64::from(w.hour), 0, 0)?;
            }
            t += HOUR;
            w = gotime::wall(t, zone);
            if w.hour == 0 {
                continue 'wrap;
            }
        }

        while !has(spec.minute, w.minute) {
            if !added {
                added = true;
                t = gotime::truncate(t, MINUTE);
            }
            t += MINUTE;
            w = gotime::wall(t, zone);
            if w.minute == 0 {
                continue 'wrap;
            }
        }

        // Standard schedules match second 0 only. robfig steps one second
        // at a time; when the zone's offset is the same at the next whole
        // wall minute as now, no transition lies between (the tz database
        // has no two within a minute), so the wall clock runs with the
        // instant and the stepping would land exactly there: jump.
        if w.second != 0 {
            if !added {
                added = true;
                t = gotime::truncate(t, 1);
            }
            let to_minute = i64::from(60 - w.second);
            if gotime::offset_at(t, zone) == gotime::offset_at(t + to_minute, zone) {
                t += to_minute;
                continue 'wrap;
            }
        }
        while w.second != 0 {
            if !added {
                added = true;
                t = gotime::truncate(t, 1);
            }
            t += 1;
            w = gotime::wall(t, zone);
            if w.second == 0 {
                continue 'wrap;
            }
        }

        return Some(t);
    }
}
