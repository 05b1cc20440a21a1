//! Faults only a real control plane has, while a CronJob runs every minute
//! (real minutes: `--clock-speed` exists only with the embedded cluster, and
//! the plugin's schedules are whole minutes, as upstream's):
//!
//! 1. etcd compacted to its current revision, then kube-apiserver
//!    restarted: the host's watches resume from resourceVersions the new
//!    watch cache no longer has, get 410 Gone, and relist;
//! 2. kube-apiserver stopped for 10 s and started again;
//! 3. etcd killed across a minute boundary, 20 s down (kube-apiserver's
//!    /readyz fails meanwhile), started again. A create sent meanwhile waits
//!    in kube-apiserver for etcd, so its creationTimestamp is when it was
//!    sent, not when it was stored.
//!
//! Afterwards every minute from the first Job to the last has exactly one
//! Job: none lost, none duplicated, and the host never restarted.

use std::collections::BTreeMap;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use real_cluster::{ControlPlane, Kubectl, eventually_within};

use crate::common::{CRONJOB_CRD, host_with_both_plugins, jobs_of, wait_for_crds};

const SCHEDULED_AT: &str = "batch.tutorial.kubebuilder.io/scheduled-at";

/// Jobs of the CronJob by scheduled time (RFC 3339), each with its names
/// and how many seconds after the scheduled time it was created.
fn runs(kubectl: &Kubectl) -> BTreeMap<String, Vec<(String, i64)>> {
    let mut runs: BTreeMap<String, Vec<(String, i64)>> = BTreeMap::new();
    for job in jobs_of(kubectl, "default", "every-minute") {
        let at = job["metadata"]["annotations"][SCHEDULED_AT].as_str().unwrap_or("unannotated").to_string();
        let created = job["metadata"]["creationTimestamp"].as_str().unwrap_or_default();
        let late = seconds_of(created) - seconds_of(&at);
        runs.entry(at).or_default().push((job["metadata"]["name"].as_str().unwrap_or_default().to_string(), late));
    }
    runs
}

/// Waits for a Job scheduled after every one in `seen`, and returns the runs.
fn next_run(kubectl: &Kubectl, seen: usize) -> BTreeMap<String, Vec<(String, i64)>> {
    eventually_within(&format!("run {} of the CronJob", seen + 1), Duration::from_secs(100), || {
        let r = runs(kubectl);
        (r.len() > seen).then_some(r)
    })
}

/// Sleeps until `second` seconds past the wall clock's minute.
fn sleep_until_second(second: u64) {
    let now = SystemTime::now().duration_since(UNIX_EPOCH).unwrap();
    let into = now.as_secs() % 60;
    let wait = if into < second { second - into } else { 60 - into + second };
    std::thread::sleep(Duration::from_secs(wait));
}

#[test]
fn a_cronjob_every_minute_loses_and_duplicates_no_job_through_compaction_restarts_and_an_etcd_outage() {
    let Some(mut cluster) = ControlPlane::builder().start() else { return };
    let mut host = host_with_both_plugins(&cluster, "host", &[]);
    let kubectl = cluster.admin();
    wait_for_crds(&kubectl, &[CRONJOB_CRD]);
    kubectl.apply(
        "apiVersion: batch.tutorial.kubebuilder.io/v1\nkind: CronJob\nmetadata:\n  name: every-minute\nspec:\n  schedule: \"* * * * *\"\n  successfulJobsHistoryLimit: 100\n  failedJobsHistoryLimit: 100\n  jobTemplate:\n    spec:\n      template:\n        spec:\n          containers: [{name: c, image: busybox}]\n          restartPolicy: OnFailure\n",
    );
    let mut seen = next_run(&kubectl, 0).len();

    // 1. Compaction, then a restart that drops the watch cache.
    sleep_until_second(15);
    let revision = cluster.compact_etcd();
    cluster.restart_apiserver(Duration::from_secs(2));
    eprintln!("compacted etcd at revision {revision} and restarted kube-apiserver");
    seen = next_run(&kubectl, seen).len();

    // 2. kube-apiserver down for 10 s.
    sleep_until_second(20);
    cluster.restart_apiserver(Duration::from_secs(10));
    seen = next_run(&kubectl, seen).len();

    // 3. etcd down for 20 s across the minute boundary.
    sleep_until_second(50);
    cluster.restart_etcd(Duration::from_secs(20));
    seen = next_run(&kubectl, seen).len();
    let runs = next_run(&kubectl, seen);

    assert!(host.process().exited().is_none(), "the host kept running:\n{}", host.log_tail(40));
    let log = host.log();
    // kube-runtime's watcher surfaces a 410 as an error (then relists), which the host logs.
    let gone_lines: Vec<&str> = log
        .lines()
        .filter(|l| l.contains("too old resource version") || (l.contains("410") && (l.contains("Gone") || l.contains("Expired"))))
        .collect();
    let gone = gone_lines.len();
    if let Some(first) = gone_lines.first() {
        eprintln!("a 410 as the host logged it: {first}");
    }
    let duplicated: Vec<_> = runs.iter().filter(|(_, jobs)| jobs.len() > 1).collect();
    let delays: Vec<String> = runs.iter().map(|(at, jobs)| format!("{}+{}s", &at[11..16], jobs[0].1)).collect();
    eprintln!(
        "FIGURES runs={} (scheduled+created after: {}) duplicated={} host log lines about 410 Gone={gone}",
        runs.len(),
        delays.join(" "),
        duplicated.len()
    );
    assert!(duplicated.is_empty(), "more than one Job for a scheduled time: {duplicated:?}");
    let minutes: Vec<i64> = runs.keys().map(|at| seconds_of(at) / 60).collect();
    let lost: Vec<i64> = (minutes[0]..=*minutes.last().unwrap()).filter(|m| !minutes.contains(m)).collect();
    assert!(lost.is_empty(), "minutes without a Job: {lost:?} (runs: {runs:?})");
    assert!(minutes.len() >= 5, "{runs:?}");
    assert!(gone > 0, "the host's watches saw 410 Gone after the compaction:\n{}", host.log_tail(60));
}

/// Seconds since the epoch of an RFC 3339 UTC time (`2026-01-01T00:01:00Z`).
fn seconds_of(rfc3339: &str) -> i64 {
    let date: Vec<i64> = rfc3339[..10].split('-').map(|p| p.parse().unwrap()).collect();
    let time: Vec<i64> = rfc3339[11..19].split(':').map(|p| p.parse().unwrap()).collect();
    days_from_civil(date[0], date[1], date[2]) * 86400 + time[0] * 3600 + time[1] * 60 + time[2]
}

/// Days since 1970-01-01 of a proleptic Gregorian date (Howard Hinnant's algorithm).
fn days_from_civil(y: i64, m: i64, d: i64) -> i64 {
    let y = if m <= 2 { y - 1 } else { y };
    let era = if y >= 0 { y } else { y - 399 } / 400;
    let yoe = y - era * 400;
    let doy = (153 * (m + if m > 2 { -3 } else { 9 }) + 2) / 5 + d - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146097 + doe - 719468
}
