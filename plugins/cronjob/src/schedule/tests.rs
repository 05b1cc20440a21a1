//! Table-driven tests of parsing and `next`, including DST changes and
//! month ends; expectations are what robfig/cron v3 (upstream Kubernetes)
//! produces.

use super::*;
use chrono_tz::Tz;

fn t(text: &str) -> DateTime<Utc> {
    DateTime::parse_from_rfc3339(text).unwrap().with_timezone(&Utc)
}

fn zone(name: &str) -> Tz {
    zone::load(name).unwrap()
}

/// The first `n` activations after `start`.
fn upcoming(spec: &str, tz: &str, start: &str, n: usize) -> Vec<DateTime<Utc>> {
    let schedule = parse(spec, zone(tz)).unwrap_or_else(|e| panic!("{spec}: {e}"));
    let mut out = Vec::new();
    let mut at = t(start);
    for _ in 0..n {
        at = schedule.next(at).unwrap_or_else(|| panic!("{spec}: no next after {at}"));
        out.push(at);
    }
    out
}

#[test]
fn schedules_fire_when_upstream_fires_them() {
    #[rustfmt::skip]
    let cases: &[(&str, &str, &str, &str, &[&str])] = &[
        // (what, schedule, zone, start, expected activations)
        ("every minute", "*/1 * * * *", "UTC", "2024-05-01T10:00:30Z",
            &["2024-05-01T10:01:00Z", "2024-05-01T10:02:00Z"]),
        ("an activation equal to the start is not repeated", "*/5 * * * *", "UTC", "2024-05-01T10:05:00Z",
            &["2024-05-01T10:10:00Z"]),
        ("steps over a range", "10-30/10 * * * *", "UTC", "2024-05-01T10:25:00Z",
            &["2024-05-01T10:30:00Z", "2024-05-01T11:10:00Z"]),
        ("N/step means N to the maximum", "50/5 * * * *", "UTC", "2024-05-01T10:00:00Z",
            &["2024-05-01T10:50:00Z", "2024-05-01T10:55:00Z", "2024-05-01T11:50:00Z"]),
        ("lists", "0 9,17 * * *", "UTC", "2024-05-01T10:00:00Z",
            &["2024-05-01T17:00:00Z", "2024-05-02T09:00:00Z"]),
        ("month and weekday names in any case", "0 9 * jan-MAR Mon-fri", "UTC", "2024-03-29T10:00:00Z",
            &["2025-01-01T09:00:00Z", "2025-01-02T09:00:00Z", "2025-01-03T09:00:00Z", "2025-01-06T09:00:00Z"]),
        ("day of month and day of week are ORed when both are restricted", "0 0 1 * MON", "UTC", "2024-01-25T00:00:00Z",
            &["2024-01-29T00:00:00Z", "2024-02-01T00:00:00Z", "2024-02-05T00:00:00Z"]),
        ("a stepped star counts as restricted, so it is ORed too", "0 0 */10 * SUN", "UTC", "2024-06-01T00:00:00Z",
            &["2024-06-02T00:00:00Z", "2024-06-09T00:00:00Z", "2024-06-11T00:00:00Z"]),
        ("weekdays count from 0 for Sunday, so 1 is Monday", "0 0 * * 1", "UTC", "2024-06-01T00:00:00Z",
            &["2024-06-03T00:00:00Z"]),
        ("a star day of month is ANDed: only the weekday counts", "0 0 * * 0", "UTC", "2024-06-01T00:00:00Z",
            &["2024-06-02T00:00:00Z", "2024-06-09T00:00:00Z"]),
        ("a question mark is a star", "0 0 ? * 0", "UTC", "2024-06-01T00:00:00Z",
            &["2024-06-02T00:00:00Z"]),
        ("the 31st skips shorter months", "0 0 31 * *", "UTC", "2024-01-31T00:00:00Z",
            &["2024-03-31T00:00:00Z", "2024-05-31T00:00:00Z", "2024-07-31T00:00:00Z", "2024-08-31T00:00:00Z"]),
        ("February 29th waits for a leap year", "0 0 29 2 *", "UTC", "2024-03-01T00:00:00Z",
            &["2028-02-29T00:00:00Z"]),
        ("the last day of the year rolls into the next", "59 23 31 12 *", "UTC", "2024-12-31T23:59:00Z",
            &["2025-12-31T23:59:00Z"]),
        ("@yearly", "@yearly", "UTC", "2024-05-01T00:00:00Z", &["2025-01-01T00:00:00Z"]),
        ("@annually", "@annually", "UTC", "2024-05-01T00:00:00Z", &["2025-01-01T00:00:00Z"]),
        ("@monthly", "@monthly", "UTC", "2024-05-01T00:00:00Z", &["2024-06-01T00:00:00Z"]),
        ("@weekly is Sunday midnight", "@weekly", "UTC", "2024-05-01T00:00:00Z", &["2024-05-05T00:00:00Z"]),
        ("@daily", "@daily", "UTC", "2024-05-01T00:00:00Z", &["2024-05-02T00:00:00Z"]),
        ("@midnight", "@midnight", "UTC", "2024-05-01T00:00:00Z", &["2024-05-02T00:00:00Z"]),
        ("@hourly", "@hourly", "UTC", "2024-05-01T00:00:00Z", &["2024-05-01T01:00:00Z"]),
        ("@every counts from the previous activation, in whole seconds", "@every 1h30m", "UTC", "2024-05-01T00:00:10Z",
            &["2024-05-01T01:30:10Z", "2024-05-01T03:00:10Z"]),
        ("@every under a second is one second", "@every 300ms", "UTC", "2024-05-01T00:00:00Z",
            &["2024-05-01T00:00:01Z"]),
        ("a zone shifts the wall clock", "0 9 * * *", "Asia/Tokyo", "2024-05-01T00:00:00Z",
            &["2024-05-02T00:00:00Z"]),
        ("a TZ= prefix picks the zone", "TZ=Asia/Tokyo 0 9 * * *", "UTC", "2024-05-01T00:00:00Z",
            &["2024-05-02T00:00:00Z"]),
        ("a CRON_TZ= prefix picks the zone", "CRON_TZ=Asia/Tokyo 0 9 * * *", "UTC", "2024-05-01T00:00:00Z",
            &["2024-05-02T00:00:00Z"]),
        ("a zone's weekday is its own", "0 1 * * MON", "Asia/Tokyo", "2024-05-05T00:00:00Z",
            &["2024-05-05T16:00:00Z"]),
        // DST, America/New_York: 2024-03-10 02:00 EST -> 03:00 EDT; 2024-11-03 02:00 EDT -> 01:00 EST.
        ("spring forward skips a daily 02:30 for that day", "30 2 * * *", "America/New_York", "2024-03-09T02:30:00-05:00",
            &["2024-03-11T02:30:00-04:00", "2024-03-12T02:30:00-04:00"]),
        ("fall back runs a daily 02:30 once", "30 2 * * *", "America/New_York", "2024-11-02T02:30:00-04:00",
            &["2024-11-03T02:30:00-05:00", "2024-11-04T02:30:00-05:00"]),
        ("fall back runs a daily 01:30 twice, once per offset", "30 1 * * *", "America/New_York", "2024-11-02T01:30:00-04:00",
            &["2024-11-03T01:30:00-04:00", "2024-11-03T01:30:00-05:00", "2024-11-04T01:30:00-05:00"]),
        ("starting inside the repeated hour finds the second 01:30", "30 1 * * *", "America/New_York", "2024-11-03T01:15:00-05:00",
            &["2024-11-03T01:30:00-05:00"]),
        ("hourly jumps the skipped hour", "0 * * * *", "America/New_York", "2024-03-10T01:00:00-05:00",
            &["2024-03-10T03:00:00-04:00", "2024-03-10T04:00:00-04:00"]),
        ("hourly repeats the repeated hour", "0 * * * *", "America/New_York", "2024-11-03T00:30:00-04:00",
            &["2024-11-03T01:00:00-04:00", "2024-11-03T01:00:00-05:00", "2024-11-03T02:00:00-05:00"]),
        ("every 15 minutes flows straight through spring forward", "*/15 * * * *", "America/New_York", "2024-03-10T01:40:00-05:00",
            &["2024-03-10T01:45:00-05:00", "2024-03-10T03:00:00-04:00"]),
        ("London skips 01:30 when clocks go forward", "30 1 * * *", "Europe/London", "2024-03-30T01:30:00Z",
            &["2024-04-01T01:30:00+01:00"]),
        // Sao Paulo 2018-11-04: midnight did not exist (00:00 -03 -> 01:00 -02).
        ("a day whose midnight DST skips still fires", "0 9 * * *", "America/Sao_Paulo", "2018-11-03T10:00:00-03:00",
            &["2018-11-04T09:00:00-02:00", "2018-11-05T09:00:00-02:00"]),
    ];
    for (what, spec, tz, start, want) in cases {
        let want: Vec<_> = want.iter().map(|w| t(w)).collect();
        assert_eq!(upcoming(spec, tz, start, want.len()), want, "{what}: {spec:?} in {tz} after {start}");
    }
}

#[test]
fn a_schedule_that_never_fires_has_no_next() {
    let schedule = parse("0 0 30 2 *", chrono_tz::UTC).unwrap();
    assert_eq!(schedule.next(t("2024-01-01T00:00:00Z")), None);
}

#[test]
fn malformed_schedules_are_refused_with_robfigs_reasons() {
    #[rustfmt::skip]
    let cases: &[(&str, &str)] = &[
        ("", "empty spec string"),
        ("* * * *", "expected exactly 5 fields, found 4: [* * * *]"),
        ("0 * * * * *", "expected exactly 5 fields, found 6: [0 * * * * *]"),
        ("60 * * * *", "end of range (60) above maximum (59): 60"),
        ("* 24 * * *", "end of range (24) above maximum (23): 24"),
        ("* * 0 * *", "beginning of range (0) below minimum (1): 0"),
        ("* * * 13 *", "end of range (13) above maximum (12): 13"),
        ("* * * * 7", "end of range (7) above maximum (6): 7"),
        ("5-1 * * * *", "beginning of range (5) beyond end of range (1): 5-1"),
        ("1-2-3 * * * *", "too many hyphens: 1-2-3"),
        ("*/2/3 * * * *", "too many slashes: */2/3"),
        ("*/0 * * * *", "step of range should be a positive number: */0"),
        ("x * * * *", "failed to parse int from x: strconv.Atoi: parsing \"x\": invalid syntax"),
        ("* * * FOO *", "failed to parse int from FOO: strconv.Atoi: parsing \"FOO\": invalid syntax"),
        ("@fortnightly", "unrecognized descriptor: @fortnightly"),
        ("@every 5", "failed to parse duration @every 5: time: missing unit in duration \"5\""),
        ("TZ=Nowhere/Land * * * * *", "provided bad location Nowhere/Land: unknown time zone Nowhere/Land"),
    ];
    for (spec, want) in cases {
        assert_eq!(parse(spec, chrono_tz::UTC).map(|_| ()), Err(ScheduleError(want.to_string())), "{spec:?}");
    }
}

/// The first instant after `after` at wall second 0 in `zone`, found one
/// second at a time: what robfig's stepping gives for `* * * * *`.
fn next_wall_minute(after: DateTime<Utc>, zone: Tz) -> DateTime<Utc> {
    let mut at = after + chrono::Duration::seconds(1);
    while chrono::Timelike::second(&at.with_timezone(&zone)) != 0 {
        at += chrono::Duration::seconds(1);
    }
    at
}

#[test]
fn every_minute_lands_on_wall_second_zero_even_where_the_offset_has_seconds() {
    // Monrovia kept -0:44:30 until 1972-01-07 00:00 local (00:44:30 UTC), then GMT:
    // wall minutes start at :30 UTC before and :00 after; `next` jumps to the
    // next whole minute, and must land where stepping a second at a time does.
    let schedule = parse("* * * * *", zone("Africa/Monrovia")).unwrap();
    assert_eq!(schedule.next(t("1971-06-01T10:00:00Z")), Some(t("1971-06-01T10:00:30Z")));
    let change = t("1972-01-07T00:44:30Z");
    for s in (-300..300).step_by(7) {
        let after = change + chrono::Duration::seconds(s);
        assert_eq!(schedule.next(after), Some(next_wall_minute(after, zone("Africa/Monrovia"))), "after {after}");
    }
}
