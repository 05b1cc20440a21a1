//! Waiting on a condition: poll it until it holds or a limit passes, then fail the test naming
//! what it waited for. Tests wait on state, never on a fixed sleep, so they hold on a loaded
//! machine; the limit is only how long a broken build takes to fail.
//!
//! The poll interval follows the limit (a thousandth of it, 20 ms to 200 ms): short waits answer
//! quickly, and long ones under tokio's paused clock (the simulated cluster's tests) do not spin
//! through thousands of polls of virtual time.

use std::future::Future;
use std::time::{Duration, Instant};

/// How long to sleep between two polls of a wait of at most `limit`.
fn interval(limit: Duration) -> Duration {
    (limit / 1000).clamp(Duration::from_millis(20), Duration::from_millis(200))
}

/// Polls `check` until it returns `Some`, for up to `limit` (tokio's clock, so paused time
/// works); the value it returned.
///
/// # Panics
/// When `limit` passes first: "timed out after {limit} waiting until {what}".
pub async fn eventually<T, F, Fut>(what: &str, limit: Duration, mut check: F) -> T
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Option<T>>,
{
    let deadline = tokio::time::Instant::now() + limit;
    loop {
        if let Some(v) = check().await {
            return v;
        }
        assert!(tokio::time::Instant::now() < deadline, "timed out after {limit:?} waiting until {what}");
        tokio::time::sleep(interval(limit)).await;
    }
}

/// Polls `check` until it returns `true`, for up to `limit`: [`eventually`] of a yes/no check.
pub async fn until<F, Fut>(what: &str, limit: Duration, mut check: F)
where
    F: FnMut() -> Fut,
    Fut: Future<Output = bool>,
{
    eventually(what, limit, || {
        let done = check();
        async move { done.await.then_some(()) }
    })
    .await
}

/// [`eventually`] for tests without a runtime (the ones that drive processes): polls `check` on
/// this thread every 200 ms (a poll there usually runs kubectl or reads a process's output, so
/// not faster), for up to `limit`; the value it returned.
///
/// # Panics
/// When `limit` passes first: "timed out after {limit} waiting until {what}".
pub fn blocking<T>(what: &str, limit: Duration, mut check: impl FnMut() -> Option<T>) -> T {
    let deadline = Instant::now() + limit;
    loop {
        if let Some(v) = check() {
            return v;
        }
        assert!(Instant::now() < deadline, "timed out after {limit:?} waiting until {what}");
        std::thread::sleep(Duration::from_millis(200));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::cell::Cell;

    #[tokio::test(start_paused = true)]
    async fn eventually_returns_the_first_value_the_check_gives() {
        let polls = Cell::new(0);
        let got = eventually("the third poll", Duration::from_secs(10), || {
            polls.set(polls.get() + 1);
            let n = polls.get();
            async move { (n == 3).then_some(n) }
        })
        .await;
        assert_eq!(got, 3);
    }

    #[tokio::test(start_paused = true)]
    #[should_panic(expected = "timed out after 1s waiting until never")]
    async fn eventually_fails_naming_what_it_waited_for() {
        until("never", Duration::from_secs(1), || async { false }).await;
    }

    #[test]
    fn blocking_polls_until_the_check_holds() {
        let mut polls = 0;
        let got = blocking("the second poll", Duration::from_secs(10), || {
            polls += 1;
            (polls == 2).then_some("done")
        });
        assert_eq!((got, polls), ("done", 2));
    }

    #[test]
    fn the_interval_follows_the_limit_within_bounds() {
        assert_eq!(interval(Duration::from_secs(1)), Duration::from_millis(20));
        assert_eq!(interval(Duration::from_secs(90)), Duration::from_millis(90));
        assert_eq!(interval(Duration::from_secs(600)), Duration::from_millis(200));
    }
}
