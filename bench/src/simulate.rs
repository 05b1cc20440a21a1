//! Benchmark 6: `host simulate` throughput, simulated hours per wall-clock
//! second. The workload is a representative CronJob mix for one simulated
//! day: schedules every 1, 5, 15 and 60 minutes, Allow and Forbid, Jobs that
//! run a few minutes (the Job runner completes them; history limits delete
//! the oldest). `host simulate` runs as its own process, as a user runs it,
//! with a warm plugin cache so compilation is not part of the time.

use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use crate::stats::Summary;
use crate::{Paths, Profile};

#[derive(Clone, Debug, serde::Serialize)]
pub struct Report {
    pub cronjobs: usize,
    /// Simulated span per run, in hours.
    pub hours: f64,
    /// Wall-clock seconds per run.
    pub wall: Summary,
    /// Timeline entries of one run (the work done: creates, updates, deletes).
    pub entries: usize,
}

impl Report {
    /// Simulated hours per wall-clock second (at the median wall time).
    pub fn hours_per_second(&self) -> f64 {
        self.hours / self.wall.median
    }
}

/// (schedule, concurrencyPolicy, Job duration): one of each per group.
const MIX: [(&str, &str, &str); 4] =
    [("*/1 * * * *", "Allow", "30s"), ("*/5 * * * *", "Forbid", "7m"), ("*/15 * * * *", "Allow", "2m"), ("0 * * * *", "Forbid", "10m")];

/// `groups` copies of [`MIX`] as one multi-document YAML file.
fn workload(groups: usize) -> String {
    let mut out = String::new();
    for g in 0..groups {
        for (i, (schedule, policy, duration)) in MIX.iter().enumerate() {
            out.push_str(&format!(
                "---
apiVersion: batch.tutorial.kubebuilder.io/v1
kind: CronJob
metadata:
  name: cron-{g}-{i}
  namespace: default
spec:
  schedule: \"{schedule}\"
  concurrencyPolicy: {policy}
  successfulJobsHistoryLimit: 3
  failedJobsHistoryLimit: 1
  jobTemplate:
    metadata:
      annotations:
        sim.operator-host.dev/duration: {duration}
    spec:
      template:
        spec:
          containers:
            - name: work
              image: busybox
          restartPolicy: OnFailure
"
            ));
        }
    }
    out
}

fn simulate_once(paths: &Paths, file: &Path, cache: &Path, span: &str) -> anyhow::Result<(Duration, usize)> {
    let started = Instant::now();
    let out = Command::new(&paths.host)
        .args(["simulate", "--plugin-cache-dir"])
        .arg(cache)
        .arg("--plugin")
        .arg(paths.plugin("cronjob"))
        .arg("--apply")
        .arg(file)
        .args(["--for", span, "--output", "json"])
        .env("RUST_LOG", "warn")
        .stdin(Stdio::null())
        .output()?;
    let wall = started.elapsed();
    anyhow::ensure!(out.status.success(), "host simulate failed: {}: {}", out.status, String::from_utf8_lossy(&out.stderr));
    let entries: Vec<serde_json::Value> = serde_json::from_slice(&out.stdout)?;
    Ok((wall, entries.len()))
}

pub fn run(profile: &Profile, paths: &Paths) -> anyhow::Result<Report> {
    let dir = tempfile::tempdir()?;
    // One group: the `*/1` CronJob alone makes 1,440 Jobs a simulated day.
    let groups = 1;
    let (span, hours, runs) = if profile.quick { ("6h", 6.0, 1) } else { ("1d", 24.0, 3) };
    let file = dir.path().join("cronjobs.yaml");
    std::fs::write(&file, workload(groups))?;
    let cache = dir.path().join("plugin-cache");
    // A short warm-up run fills the plugin cache.
    simulate_once(paths, &file, &cache, "1m")?;
    let mut walls = Vec::new();
    let mut entries = 0;
    for run in 0..runs {
        let (wall, n) = simulate_once(paths, &file, &cache, span)?;
        eprintln!("bench: simulate {} CronJobs for {span}, run {run}: {:.2} s wall, {n} timeline entries", groups * MIX.len(), wall.as_secs_f64());
        walls.push(wall.as_secs_f64());
        entries = n;
    }
    Ok(Report { cronjobs: groups * MIX.len(), hours, wall: Summary::of(&walls), entries })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_workload_holds_every_schedule_of_the_mix_once_per_group() {
        let docs: Vec<serde_json::Value> = serde_saphyr::from_multiple(&workload(2)).unwrap();
        assert_eq!(docs.len(), 2 * MIX.len());
        let names: std::collections::HashSet<_> = docs.iter().map(|d| d["metadata"]["name"].as_str().unwrap().to_string()).collect();
        assert_eq!(names.len(), docs.len(), "names are unique");
        assert_eq!(docs.iter().filter(|d| d["spec"]["schedule"] == "0 * * * *").count(), 2);
    }
}
