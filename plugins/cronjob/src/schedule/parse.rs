//! robfig/cron v3's `ParseStandard`: five fields (minute, hour, day of month,
//! month, day of week), descriptors (`@hourly` ... `@every <duration>`) and an
//! optional `TZ=` / `CRON_TZ=` prefix, with the same bounds, names, ranges,
//! steps and error wording.

use chrono_tz::Tz;

use super::{Schedule, ScheduleError, SpecSchedule, zone};

/// Set on a field written as `*` or `?` (without a step above 1). robfig uses
/// it to decide whether day-of-month and day-of-week are ANDed or ORed.
pub const STAR_BIT: u64 = 1 << 63;

struct Bounds {
    min: u32,
    max: u32,
    names: &'static [(&'static str, u32)],
}

const MINUTES: Bounds = Bounds { min: 0, max: 59, names: &[] };
const HOURS: Bounds = Bounds { min: 0, max: 23, names: &[] };
const DOM: Bounds = Bounds { min: 1, max: 31, names: &[] };
const MONTHS: Bounds = Bounds {
    min: 1,
    max: 12,
    names: &[
        ("jan", 1),
        ("feb", 2),
        ("mar", 3),
        ("apr", 4),
        ("may", 5),
        ("jun", 6),
        ("jul", 7),
        ("aug", 8),
        ("sep", 9),
        ("oct", 10),
        ("nov", 11),
        ("dec", 12),
    ],
};
const DOW: Bounds = Bounds { min: 0, max: 6, names: &[("sun", 0), ("mon", 1), ("tue", 2), ("wed", 3), ("thu", 4), ("fri", 5), ("sat", 6)] };

/// Parses a schedule; `default_zone` applies unless the text starts with `TZ=`
/// or `CRON_TZ=` (upstream passes `spec.timeZone` this way, or the
/// controller's local zone, UTC, when unset).
pub fn parse(text: &str, default_zone: Tz) -> Result<Schedule, ScheduleError> {
    let err = |message: String| ScheduleError(message);
    if text.is_empty() {
        return Err(err("empty spec string".into()));
    }
    let mut spec = text;
    let mut location = default_zone;
    if spec.starts_with("TZ=") || spec.starts_with("CRON_TZ=") {
        let eq = spec.find('=').unwrap_or(0);
        let space = spec.find(' ').ok_or_else(|| err(format!("provided bad location {}: missing schedule", &spec[eq + 1..])))?;
        let name = &spec[eq + 1..space];
        location = zone::load(name).map_err(|e| err(format!("provided bad location {name}: {e}")))?;
        spec = spec[space..].trim();
    }
    if spec.starts_with('@') {
        return parse_descriptor(spec, location);
    }
    let fields: Vec<&str> = spec.split_whitespace().collect();
    if fields.len() != 5 {
        return Err(err(format!("expected exactly 5 fields, found {}: [{}]", fields.len(), fields.join(" "))));
    }
    Ok(Schedule::Spec(SpecSchedule {
        minute: field(fields[0], &MINUTES)?,
        hour: field(fields[1], &HOURS)?,
        dom: field(fields[2], &DOM)?,
        month: field(fields[3], &MONTHS)?,
        dow: field(fields[4], &DOW)?,
        location,
    }))
}

/// A comma-separated list of ranges, as a bit set (bit n set: value n matches).
fn field(text: &str, bounds: &Bounds) -> Result<u64, ScheduleError> {
    // Go's strings.FieldsFunc drops empty pieces, so "1,,2" is "1,2".
    text.split(',').filter(|r| !r.is_empty()).try_fold(0, |bits, r| Ok(bits | range(r, bounds)?))
}

/// `*`, `?`, `N`, `N-M`, each optionally with `/step`; `N/step` means `N-max/step`.
fn range(expr: &str, bounds: &Bounds) -> Result<u64, ScheduleError> {
    let err = |message: String| ScheduleError(message);
    let range_and_step: Vec<&str> = expr.split('/').collect();
    let low_and_high: Vec<&str> = range_and_step[0].split('-').collect();
    let single = low_and_high.len() == 1;
    let (start, mut end, mut extra) = if low_and_high[0] == "*" || low_and_high[0] == "?" {
        (bounds.min, bounds.max, STAR_BIT)
    } else {
        let start = int_or_name(low_and_high[0], bounds)?;
        let end = match low_and_high.len() {
            1 => start,
            2 => int_or_name(low_and_high[1], bounds)?,
            _ => return Err(err(format!("too many hyphens: {expr}"))),
        };
        (start, end, 0)
    };
    let step = match range_and_step.len() {
        1 => 1,
        2 => {
            let step = must_parse_int(range_and_step[1])?;
            if single {
                end = bounds.max;
            }
            if step > 1 {
                extra = 0;
            }
            step
        }
        _ => return Err(err(format!("too many slashes: {expr}"))),
    };
    if start < bounds.min {
        return Err(err(format!("beginning of range ({start}) below minimum ({}): {expr}", bounds.min)));
    }
    if end > bounds.max {
        return Err(err(format!("end of range ({end}) above maximum ({}): {expr}", bounds.max)));
    }
    if start > end {
        return Err(err(format!("beginning of range ({start}) beyond end of range ({end}): {expr}")));
    }
    if step == 0 {
        return Err(err(format!("step of range should be a positive number: {expr}")));
    }
    Ok(bits(start, end, step) | extra)
}

fn bits(start: u32, end: u32, step: u32) -> u64 {
    (start..=end).step_by(step as usize).fold(0, |b, v| b | (1 << v))
}

fn all(bounds: &Bounds) -> u64 {
    bits(bounds.min, bounds.max, 1) | STAR_BIT
}

fn int_or_name(text: &str, bounds: &Bounds) -> Result<u32, ScheduleError> {
    let lower = text.to_ascii_lowercase();
    match bounds.names.iter().find(|(name, _)| *name == lower) {
        Some((_, value)) => Ok(*value),
        None => must_parse_int(text),
    }
}

/// Go's `strconv.Atoi`, refusing negatives as robfig does.
fn must_parse_int(text: &str) -> Result<u32, ScheduleError> {
    let digits = text.strip_prefix('+').unwrap_or(text);
    let parsed: Result<i64, _> = if digits.is_empty() || !digits.trim_start_matches('-').bytes().all(|b| b.is_ascii_digit()) {
        Err(())
    } else {
        digits.parse::<i64>().map_err(|_| ())
    };
    match parsed {
        Err(()) => Err(ScheduleError(format!("failed to parse int from {text}: strconv.Atoi: parsing {text:?}: invalid syntax"))),
        Ok(n) if n < 0 => Err(ScheduleError(format!("negative number ({n}) not allowed: {text}"))),
        Ok(n) => u32::try_from(n).map_err(|_| ScheduleError(format!("end of range ({n}) above maximum: {text}"))),
    }
}

fn parse_descriptor(descriptor: &str, location: Tz) -> Result<Schedule, ScheduleError> {
    let spec = |minute, hour, dom, month, dow| Schedule::Spec(SpecSchedule { minute, hour, dom, month, dow, location });
    let (m, h) = (1 << MINUTES.min, 1 << HOURS.min);
    Ok(match descriptor {
        "@yearly" | "@annually" => spec(m, h, 1 << DOM.min, 1 << MONTHS.min, all(&DOW)),
        "@monthly" => spec(m, h, 1 << DOM.min, all(&MONTHS), all(&DOW)),
        "@weekly" => spec(m, h, all(&DOM), all(&MONTHS), 1 << DOW.min),
        "@daily" | "@midnight" => spec(m, h, all(&DOM), all(&MONTHS), all(&DOW)),
        "@hourly" => spec(m, all(&HOURS), all(&DOM), all(&MONTHS), all(&DOW)),
        _ => match descriptor.strip_prefix("@every ") {
            Some(duration) => {
                let nanos =
                    super::gotime::parse_duration(duration).map_err(|e| ScheduleError(format!("failed to parse duration {descriptor}: {e}")))?;
                // robfig's Every: at least one second, sub-second part dropped.
                let seconds = i64::try_from((nanos / 1_000_000_000).max(1)).unwrap_or(i64::MAX);
                Schedule::Every { seconds }
            }
            None => {
                return Err(ScheduleError(format!("unrecognized descriptor: {descriptor}")));
            }
        },
    })
}
