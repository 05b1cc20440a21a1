//! The few pieces of Go's `time` package that robfig/cron's `Next` relies on,
//! over chrono-tz, so wall-clock arithmetic across DST changes lands on the
//! same instants as upstream Kubernetes.
//!
//! Instants are whole seconds since the Unix epoch (`i64`); a zone is a
//! `chrono_tz::Tz`.

use chrono::{Datelike, NaiveDate, NaiveDateTime, Offset, TimeZone, Timelike, Utc};
use chrono_tz::Tz;

/// Wall-clock fields of an instant in a zone, as Go's `t.Year()`, `t.Month()`... give them.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Wall {
    pub year: i32,
    pub month: u32,
    pub day: u32,
    pub hour: u32,
    pub minute: u32,
    pub second: u32,
    /// 0 = Sunday, as Go's `time.Weekday`.
    pub weekday: u32,
}

/// Go's `t.In(loc)` followed by field access.
pub fn wall(unix: i64, zone: Tz) -> Wall {
    let t = Utc.timestamp_opt(unix, 0).single().unwrap_or_default().with_timezone(&zone);
    Wall {
        year: t.year(),
        month: t.month(),
        day: t.day(),
        hour: t.hour(),
        minute: t.minute(),
        second: t.second(),
        weekday: t.weekday().num_days_from_sunday(),
    }
}

/// The zone's offset from UTC, in seconds, at an instant.
pub fn offset_at(unix: i64, zone: Tz) -> i64 {
    let utc = Utc.timestamp_opt(unix, 0).single().unwrap_or_default().naive_utc();
    i64::from(zone.offset_from_utc_datetime(&utc).fix().local_minus_utc())
}

/// Go's `time.Date(year, month, day, hour, min, sec, 0, loc)`: out-of-range
/// months and days are normalised (month 13 is January of the next year,
/// day 32 rolls into the next month), and a wall time that a DST change makes
/// ambiguous or skips resolves exactly as Go resolves it: look the offset up
/// at the wall time read as UTC, and if the instant that offset gives falls in
/// another zone period, use that period's offset instead. In practice: an
/// ambiguous time resolves to the earlier instant when clocks fall back away
/// from a non-zero offset, and a skipped time such as 02:30 on a
/// spring-forward night resolves to an instant one hour earlier in wall terms
/// (02:30 EDT, i.e. 01:30 EST), as Go's own `TestDate` cases pin.
pub fn date(zone: Tz, year: i32, month: i64, day: i64, hour: i64, minute: i64, second: i64) -> Option<i64> {
    let months = i64::from(year) * 12 + (month - 1);
    let (y, m) = (i32::try_from(months.div_euclid(12)).ok()?, u32::try_from(months.rem_euclid(12) + 1).ok()?);
    let first = NaiveDate::from_ymd_opt(y, m, 1)?;
    let midnight: NaiveDateTime = first.and_hms_opt(0, 0, 0)?;
    let local_as_utc = midnight.and_utc().timestamp() + (day - 1) * 86_400 + hour * 3_600 + minute * 60 + second;
    let guess = offset_at(local_as_utc, zone);
    let offset = offset_at(local_as_utc - guess, zone);
    Some(local_as_utc - offset)
}

/// Go's `t.AddDate(0, months, days)` for an instant in a zone.
pub fn add_date(unix: i64, zone: Tz, months: i64, days: i64) -> Option<i64> {
    let w = wall(unix, zone);
    date(zone, w.year, i64::from(w.month) + months, i64::from(w.day) + days, i64::from(w.hour), i64::from(w.minute), i64::from(w.second))
}

/// Go's `t.Truncate(d)` for whole-second `d`: Go truncates absolute time,
/// whose minute and second boundaries coincide with the Unix epoch's.
pub fn truncate(unix: i64, seconds: i64) -> i64 {
    unix - unix.rem_euclid(seconds)
}

/// Go's `time.ParseDuration`, in nanoseconds: an optional sign, then one or
/// more decimal numbers with a unit each (`ns`, `us`, `µs`, `ms`, `s`, `m`,
/// `h`), e.g. `1h30m`, `1.5h`, `90s`. `0` alone needs no unit.
pub fn parse_duration(text: &str) -> Result<i128, String> {
    let invalid = || format!("time: invalid duration {text:?}");
    let (negative, mut rest) = match text.as_bytes().first() {
        Some(b'-') => (true, &text[1..]),
        Some(b'+') => (false, &text[1..]),
        _ => (false, text),
    };
    if rest == "0" {
        return Ok(0);
    }
    if rest.is_empty() {
        return Err(invalid());
    }
    let mut total: i128 = 0;
    while !rest.is_empty() {
        let int_len = rest.bytes().take_while(u8::is_ascii_digit).count();
        let int_part = &rest[..int_len];
        rest = &rest[int_len..];
        let mut frac_part = "";
        if let Some(after_dot) = rest.strip_prefix('.') {
            let frac_len = after_dot.bytes().take_while(u8::is_ascii_digit).count();
            frac_part = &after_dot[..frac_len];
            rest = &after_dot[frac_len..];
        }
        if int_part.is_empty() && frac_part.is_empty() {
            return Err(invalid());
        }
        let unit_len = rest.find(|c: char| c == '.' || c.is_ascii_digit()).unwrap_or(rest.len());
        let unit = &rest[..unit_len];
        rest = &rest[unit_len..];
        let scale: i128 = match unit {
            "ns" => 1,
            "us" | "µs" | "μs" => 1_000,
            "ms" => 1_000_000,
            "s" => 1_000_000_000,
            "m" => 60_000_000_000,
            "h" => 3_600_000_000_000,
            "" => return Err(format!("time: missing unit in duration {text:?}")),
            other => return Err(format!("time: unknown unit {other:?} in duration {text:?}")),
        };
        let whole: i128 = if int_part.is_empty() { 0 } else { int_part.parse().map_err(|_| invalid())? };
        let mut value = whole.checked_mul(scale).ok_or_else(invalid)?;
        let mut place = scale;
        for digit in frac_part.bytes().take(30) {
            place /= 10;
            value += i128::from(digit - b'0') * place;
        }
        total = total.checked_add(value).ok_or_else(invalid)?;
        if total > i128::from(i64::MAX) {
            return Err(invalid());
        }
    }
    Ok(if negative { -total } else { total })
}

#[cfg(test)]
mod tests {
    use super::*;
    use chrono_tz::America::New_York;
    use chrono_tz::Europe::London;

    fn at(text: &str) -> i64 {
        chrono::DateTime::parse_from_rfc3339(text).unwrap().timestamp()
    }

    #[test]
    fn a_skipped_wall_time_resolves_as_go_does() {
        // Go's time_test.go: {2011, 3, 13, 2, 30, ...} is "2:30:00 PDT ≡ 1:30 PST".
        assert_eq!(date(New_York, 2024, 3, 10, 2, 30, 0), Some(at("2024-03-10T01:30:00-05:00")));
    }

    #[test]
    fn an_ambiguous_wall_time_resolves_as_go_does() {
        // Away from a non-zero offset Go picks the earlier instant...
        assert_eq!(date(New_York, 2024, 11, 3, 1, 30, 0), Some(at("2024-11-03T01:30:00-04:00")));
        // ...and falling back to GMT (offset zero) it picks the later one.
        assert_eq!(date(London, 2024, 10, 27, 1, 30, 0), Some(at("2024-10-27T01:30:00+00:00")));
    }

    #[test]
    fn months_and_days_out_of_range_are_normalised() {
        assert_eq!(date(chrono_tz::UTC, 2024, 13, 1, 0, 0, 0), Some(at("2025-01-01T00:00:00Z")));
        assert_eq!(date(chrono_tz::UTC, 2024, 1, 32, 0, 0, 0), Some(at("2024-02-01T00:00:00Z")));
        assert_eq!(add_date(at("2024-01-31T10:00:00Z"), chrono_tz::UTC, 1, 0), Some(at("2024-03-02T10:00:00Z")));
    }

    #[test]
    fn durations_parse_like_go() {
        assert_eq!(parse_duration("1h30m"), Ok(5_400_000_000_000));
        assert_eq!(parse_duration("1.5h"), Ok(5_400_000_000_000));
        assert_eq!(parse_duration("90s"), Ok(90_000_000_000));
        assert_eq!(parse_duration("300ms"), Ok(300_000_000));
        assert_eq!(parse_duration("-2m"), Ok(-120_000_000_000));
        assert_eq!(parse_duration("0"), Ok(0));
        assert!(parse_duration("5").is_err());
        assert!(parse_duration("1d").is_err());
        assert!(parse_duration("").is_err());
    }
}
