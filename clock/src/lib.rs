//! The process's one source of "now", shared by the controller runtime and
//! the embedded API server. Everything that stamps or schedules by wall time
//! (the `now` a plugin sees, condition and Event times, every timestamp the
//! embedded server writes) reads it through [`Clock`]. Delays (queue
//! deadlines, requeue-after, resync, backoff) use `tokio::time`.
//!
//! Virtual time is therefore one thing: a [`TokioClock`] reads a fixed start
//! plus how far tokio's clock has moved, and the same clock is given to the
//! embedded API server, so every "now" and every delay in the process follow
//! tokio's clock. On a runtime whose clock is paused, tokio moves it:
//! - `host simulate`: tokio itself jumps to the next timer whenever every
//!   task is idle (and never while a plugin call runs on the blocking pool),
//!   so a week passes in seconds, and the same way on every run;
//! - `host run --embedded --clock-speed N`: `drive_paused_clock` (feature
//!   `paused`) moves it
//!   N× as fast as the wall clock, so every delay is N× shorter when slept.

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

/// Any `Fn() -> DateTime<Utc>` is a clock (tests, adapters).
impl<F> Clock for F
where
    F: Fn() -> DateTime<Utc> + Send + Sync + 'static,
{
    fn now(&self) -> DateTime<Utc> {
        self()
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

/// Virtual time: `start` plus the time tokio's clock has moved since the
/// clock was made. Under a paused tokio clock this is simulated time; on a
/// normal runtime it is wall time from `start`.
#[derive(Clone, Copy, Debug)]
pub struct TokioClock {
    start: DateTime<Utc>,
    origin: tokio::time::Instant,
}

impl TokioClock {
    /// A clock reading `start` now. Make it inside the runtime whose clock it follows.
    pub fn starting_at(start: DateTime<Utc>) -> Self {
        Self { start, origin: tokio::time::Instant::now() }
    }
}

impl Clock for TokioClock {
    fn now(&self) -> DateTime<Utc> {
        let elapsed = chrono::Duration::from_std(self.origin.elapsed()).expect("under 292 years of virtual time");
        self.start + elapsed
    }
}

/// How often `drive_paused_clock` moves the clock: the granularity of
/// virtual time at `--clock-speed` (a timer fires at most this much wall time late).
const PACER_TICK: std::time::Duration = std::time::Duration::from_millis(5);

/// Moves this runtime's paused clock `speed` times as fast as the wall
/// clock until the returned task is dropped or aborted. Must run on a
/// current-thread runtime started with a paused clock.
///
/// tokio does not auto-advance a paused clock while a blocking task is in
/// flight, so a blocking task is the ticker: while it lives only this
/// function moves time, and every `tokio::time` delay (a plugin's
/// requeue-after, resync, the simulated kubelet's and Job runner's timers,
/// the error backoff) is slept `speed` times shorter.
pub fn drive_paused_clock(speed: f64) -> tokio::task::JoinHandle<()> {
    assert!(speed.is_finite() && speed > 0.0, "clock speed must be a positive number");
    let (tick_tx, mut tick_rx) = tokio::sync::mpsc::channel::<()>(1);
    let wall_origin = std::time::Instant::now();
    let origin = tokio::time::Instant::now();
    tokio::task::spawn_blocking(move || {
        loop {
            std::thread::sleep(PACER_TICK);
            if let Err(tokio::sync::mpsc::error::TrySendError::Closed(())) = tick_tx.try_send(()) {
                return;
            }
        }
    });
    tokio::spawn(async move {
        while tick_rx.recv().await.is_some() {
            let target = wall_origin.elapsed().mul_f64(speed);
            let now = origin.elapsed();
            if target > now {
                tokio::time::advance(target - now).await;
            }
        }
    })
}

/// The one duration syntax of the host's flags and of the text specs both
/// sides read (`--fault latency:50ms`): humantime's `500ms`, `2s`, `1m`,
/// `1h30m`. The error says what was expected.
pub fn parse_duration(text: &str) -> Result<std::time::Duration, String> {
    humantime::parse_duration(text.trim()).map_err(|e| format!("{e} (expected e.g. 500ms, 2s, 1m, 1h30m)"))
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

    fn new_year() -> DateTime<Utc> {
        DateTime::parse_from_rfc3339("2026-01-01T00:00:00Z").unwrap().with_timezone(&Utc)
    }

    fn paused_runtime() -> tokio::runtime::Runtime {
        tokio::runtime::Builder::new_current_thread().enable_all().start_paused(true).build().unwrap()
    }

    #[test]
    fn a_tokio_clock_follows_the_paused_clock_not_the_wall() {
        paused_runtime().block_on(async {
            let clock = TokioClock::starting_at(new_year());
            let server: SharedClock = Arc::new(clock);
            let wall = std::time::Instant::now();
            tokio::time::sleep(std::time::Duration::from_secs(7 * 24 * 3600)).await;
            assert_eq!(timestamp(clock.now()), "2026-01-08T00:00:00Z");
            assert_eq!(server.now(), clock.now());
            assert!(wall.elapsed() < std::time::Duration::from_secs(5), "a paused clock jumps to the timer");
        });
    }

    #[test]
    fn a_driven_clock_runs_at_the_given_speed() {
        paused_runtime().block_on(async {
            let clock = TokioClock::starting_at(new_year());
            let pacer = drive_paused_clock(600.0);
            let wall = std::time::Instant::now();
            // Ten virtual minutes at 600× take about a wall second.
            tokio::time::sleep(std::time::Duration::from_secs(600)).await;
            let took = wall.elapsed();
            assert!(clock.now() >= new_year() + chrono::Duration::seconds(600));
            assert!(took >= std::time::Duration::from_millis(900), "slept only {took:?}: the clock ran faster than 600x");
            assert!(took < std::time::Duration::from_secs(30), "took {took:?}");
            pacer.abort();
        });
    }

    #[test]
    fn durations_read_as_every_flag_reads_them() {
        assert_eq!(parse_duration("1h30m"), Ok(std::time::Duration::from_secs(5400)));
        assert_eq!(parse_duration(" 250ms "), Ok(std::time::Duration::from_millis(250)));
        assert!(parse_duration("soon").unwrap_err().contains("expected e.g. 500ms"));
    }
}
