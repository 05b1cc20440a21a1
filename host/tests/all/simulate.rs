//! Virtual time: `host simulate` runs a week of a CronJob in seconds and
//! gives exactly the Jobs upstream Kubernetes' CronJob controller would, the
//! same bytes on every run; `host run --embedded --clock-speed N` runs the
//! cluster N times as fast as the wall clock.

use crate::common;

use std::io::{BufRead, BufReader, Read};
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use chrono::{DateTime, TimeDelta, Utc};
use serde_json::Value;

use common::wasm;

fn cache_dir() -> std::path::PathBuf {
    common::plugin_cache_dir("simulate")
}

fn host() -> Command {
    let mut c = Command::new(env!("CARGO_BIN_EXE_host"));
    c.env("HOST_LOG", "warn").arg("--plugin-cache-dir").arg(cache_dir());
    c
}

fn at(text: &str) -> DateTime<Utc> {
    DateTime::parse_from_rfc3339(text).unwrap().with_timezone(&Utc)
}

/// A `*/5` Forbid CronJob whose Jobs run 7 minutes (the Job runner reads the
/// duration annotation the plugin copies from `jobTemplate.metadata`).
fn forbid_cronjob(starting_deadline: Option<u32>) -> String {
    let deadline = starting_deadline.map(|s| format!("  startingDeadlineSeconds: {s}\n")).unwrap_or_default();
    format!(
        "apiVersion: batch.tutorial.kubebuilder.io/v1
kind: CronJob
metadata:
  name: every5
  namespace: default
spec:
  schedule: \"*/5 * * * *\"
  concurrencyPolicy: Forbid
{deadline}  jobTemplate:
    metadata:
      annotations:
        sim.operator-host.dev/duration: 7m
    spec:
      template:
        spec:
          containers:
            - name: work
              image: busybox
          restartPolicy: OnFailure
"
    )
}

/// What one simulation printed, and what it cost.
struct Simulated {
    stdout: Vec<u8>,
    wall: Duration,
    /// User + system CPU of the `host` process (None where /proc is not there).
    cpu: Option<Duration>,
}

/// CPU a finished-but-unreaped child used (its /proc entry stays until it is reaped).
fn cpu_of_zombie(pid: u32) -> Option<Duration> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let fields: Vec<&str> = stat.rsplit_once(')')?.1.split_whitespace().collect();
    // After the command name: state is field 3, utime 14, stime 15 (1-based), in USER_HZ (100).
    let ticks: u64 = fields.get(11)?.parse::<u64>().ok()? + fields.get(12)?.parse::<u64>().ok()?;
    Some(Duration::from_millis(ticks * 10))
}

fn simulate(file: &Path, span: &str, output: &str) -> Simulated {
    let cronjob = wasm("cronjob");
    let started = Instant::now();
    let mut child = host()
        .args(["simulate", "--plugin", cronjob.to_str().unwrap(), "--apply", file.to_str().unwrap(), "--for", span, "--output", output])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn host simulate");
    let mut stdout = Vec::new();
    child.stdout.take().unwrap().read_to_end(&mut stdout).unwrap();
    let mut stderr = String::new();
    child.stderr.take().unwrap().read_to_string(&mut stderr).unwrap();
    // Both pipes closed: the process has exited (or is about to); read its CPU before reaping it.
    let mut cpu = None;
    for _ in 0..100 {
        let zombie = std::fs::read_to_string(format!("/proc/{}/stat", child.id()))
            .ok()
            .and_then(|s| s.rsplit_once(')').map(|(_, r)| r.trim_start().starts_with('Z')));
        if zombie != Some(false) {
            cpu = cpu_of_zombie(child.id());
            break;
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    let status = child.wait().unwrap();
    assert!(status.success(), "host simulate failed ({status}): {stderr}");
    Simulated { stdout, wall: started.elapsed(), cpu }
}

/// (scheduled time from the Job's name, virtual creation time) of every Job
/// the host created, in timeline order.
fn jobs_created(timeline: &[Value]) -> Vec<(DateTime<Utc>, DateTime<Utc>)> {
    timeline
        .iter()
        .filter(|e| e["type"] == "action" && e["what"] == "create" && e["object"]["kind"] == "Job")
        .map(|e| {
            assert!(e.get("detail").is_none(), "a create failed: {e}");
            let name = e["object"]["name"].as_str().unwrap();
            let minutes: i64 = name.rsplit_once('-').unwrap().1.parse().unwrap();
            (DateTime::from_timestamp(minutes * 60, 0).unwrap(), at(e["time"].as_str().unwrap()))
        })
        .collect()
}

/// Upstream's CronJob controller (`syncCronJob` in pkg/controller/cronjob)
/// reduced to what decides which Jobs exist, for a schedule every `every`,
/// Jobs that run `run`, and concurrencyPolicy Forbid. It reconciles at every
/// schedule time (plus upstream's 100 ms `nextScheduleDelta`) and whenever a
/// Job finishes (the Job update wakes it). A reconcile takes the most recent
/// schedule time after the last one run (or the CronJob's creation) and no
/// later than now; with `startingDeadlineSeconds` it looks no further back
/// than the deadline; a Job still running means skip (Forbid), otherwise the
/// Job for that time is created now. Returns (scheduled, created).
fn upstream_forbid(
    created: DateTime<Utc>,
    end: DateTime<Utc>,
    every: TimeDelta,
    run: TimeDelta,
    deadline: Option<TimeDelta>,
) -> Vec<(DateTime<Utc>, DateTime<Utc>)> {
    let delta = TimeDelta::milliseconds(100);
    let slot_after = |t: DateTime<Utc>| {
        let n = t.timestamp().div_euclid(every.num_seconds()) + 1;
        DateTime::from_timestamp(n * every.num_seconds(), 0).unwrap()
    };
    let latest_slot_at_or_before = |t: DateTime<Utc>| {
        let n = t.timestamp().div_euclid(every.num_seconds());
        DateTime::from_timestamp(n * every.num_seconds(), 0).unwrap()
    };
    let mut jobs = Vec::new();
    let mut last_scheduled: Option<DateTime<Utc>> = None;
    let mut running_until: Option<DateTime<Utc>> = None;
    let mut next_slot_wake = slot_after(created) + delta;
    loop {
        // The next reconcile: a Job finishing, or a schedule time coming due.
        let finishing = running_until.filter(|&u| u <= next_slot_wake);
        let now = finishing.unwrap_or(next_slot_wake);
        if now > end {
            return jobs;
        }
        if finishing.is_some() {
            running_until = None;
        } else {
            next_slot_wake = slot_after(next_slot_wake) + delta;
        }
        let mut earliest = last_scheduled.unwrap_or(created);
        if let Some(d) = deadline {
            earliest = earliest.max(now - d);
        }
        let due = latest_slot_at_or_before(now);
        if due <= earliest || running_until.is_some() {
            continue;
        }
        jobs.push((due, now));
        last_scheduled = Some(due);
        running_until = Some(now + run);
    }
}

#[test]
fn the_model_runs_a_late_slot_when_forbid_lets_it_and_skips_it_with_a_short_deadline() {
    let t0 = at("2026-01-01T00:00:00Z");
    let min = TimeDelta::minutes;
    let late = upstream_forbid(t0, t0 + min(30), min(5), min(7), None);
    let ms = |m: i64| t0 + min(m) + TimeDelta::milliseconds(100);
    assert_eq!(late, [(t0 + min(5), ms(5)), (t0 + min(10), ms(12)), (t0 + min(15), ms(19)), (t0 + min(25), ms(26))]);
    let strict = upstream_forbid(t0, t0 + min(30), min(5), min(7), Some(TimeDelta::seconds(60)));
    assert_eq!(strict, [(t0 + min(5), ms(5)), (t0 + min(15), ms(15)), (t0 + min(25), ms(25))]);
}

#[test]
fn a_week_of_a_forbid_cronjob_gives_the_jobs_upstream_predicts_identically_every_run() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("cronjob.yaml");
    std::fs::write(&file, forbid_cronjob(None)).unwrap();

    let first = simulate(&file, "7d", "json");
    eprintln!("a week simulated in {:?} wall, {:?} CPU", first.wall, first.cpu);
    if let Some(cpu) = first.cpu {
        assert!(cpu < Duration::from_secs(60), "a week of virtual time took {cpu:?} of CPU");
    }
    let second = simulate(&file, "7d", "json");
    assert!(first.stdout == second.stdout, "two runs of the same simulation differ");

    let timeline: Vec<Value> = serde_json::from_slice(&first.stdout).unwrap();
    let start = at("2026-01-01T00:00:00Z");
    let end = start + TimeDelta::days(7);
    for e in &timeline {
        let t = at(e["time"].as_str().unwrap());
        assert!(start <= t && t <= end, "entry outside the simulated week: {e}");
        let text = e.to_string();
        assert!(!text.contains("\"uid\"") && !text.contains("resourceVersion"), "run-specific data in the timeline: {e}");
    }
    let got = jobs_created(&timeline);
    let want = upstream_forbid(start, end, TimeDelta::minutes(5), TimeDelta::minutes(7), None);
    // Forbid without a starting deadline: a time skipped while a Job runs is run as soon as
    // the Job finishes (upstream documents this), so Jobs run back to back, one every 7 minutes.
    assert_eq!(want.len(), 1440);
    assert_eq!(got.len(), want.len(), "Jobs created");
    for (i, ((got_slot, got_at), (want_slot, want_at))) in got.iter().zip(&want).enumerate() {
        assert_eq!(got_slot, want_slot, "Job {i} runs the wrong schedule time");
        // Each Job starts within the Job runner's 5 ms pass interval of its creation, so
        // completions (and the next creation) drift by milliseconds over the week.
        let drift = *got_at - *want_at;
        assert!(drift >= TimeDelta::zero() && drift < TimeDelta::seconds(10), "Job {i} ({got_slot}) created at {got_at}, upstream at {want_at}");
    }
    let completed = timeline.iter().filter(|e| e["type"] == "state" && e["what"] == "completed").count();
    assert!((1439..=1440).contains(&completed), "{completed} Jobs completed");
    let skipped = timeline.iter().filter(|e| e["type"] == "event" && e["what"] == "Normal JobAlreadyActive").count();
    assert!(skipped > 0, "no schedule time was skipped for a running Job");
}

#[test]
fn with_a_short_starting_deadline_every_other_time_runs_on_the_minute() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("cronjob.yaml");
    std::fs::write(&file, forbid_cronjob(Some(60))).unwrap();
    let run = simulate(&file, "1d", "json");
    let timeline: Vec<Value> = serde_json::from_slice(&run.stdout).unwrap();
    let start = at("2026-01-01T00:00:00Z");
    let got = jobs_created(&timeline);
    let want = upstream_forbid(start, start + TimeDelta::days(1), TimeDelta::minutes(5), TimeDelta::minutes(7), Some(TimeDelta::seconds(60)));
    assert_eq!(want.len(), 144, "00:05, 00:15, ... 23:55");
    assert_eq!(got, want, "each Job created 100 ms after its schedule time, every other time skipped");
    let missed = timeline.iter().filter(|e| e["what"] == "Normal JobAlreadyActive").count();
    assert!(missed > 0);
}

#[test]
fn the_text_timeline_has_one_line_per_entry() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("cronjob.yaml");
    std::fs::write(&file, forbid_cronjob(None)).unwrap();
    let text = String::from_utf8(simulate(&file, "13m", "text").stdout).unwrap();
    let lines: Vec<&str> = text.lines().collect();
    assert!(lines[0].starts_with("2026-01-01T00:00:00.000Z  apply   create"), "{text}");
    assert!(text.contains("2026-01-01T00:05:00.100Z  action  create                       Job default/every5-29453765\n"), "{text}");
    assert!(
        text.contains("2026-01-01T00:05:00.100Z  event   Normal SuccessfulCreate      CronJob default/every5: Created job every5-29453765\n"),
        "{text}"
    );
    assert!(text.contains("2026-01-01T00:12:00.100Z  state   completed                    Job default/every5-29453765\n"), "{text}");
    assert!(text.contains("2026-01-01T00:12:00.100Z  action  create                       Job default/every5-29453770\n"), "{text}");
    let json = simulate(&file, "13m", "json");
    let entries: Vec<Value> = serde_json::from_slice(&json.stdout).unwrap();
    assert_eq!(entries.len(), lines.len());
}

#[test]
fn simulate_refuses_bad_input_with_exit_code_2() {
    let dir = tempfile::tempdir().unwrap();
    let cronjob = wasm("cronjob");
    let nameless = dir.path().join("nameless.yaml");
    std::fs::write(&nameless, "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  generateName: x-\n").unwrap();
    let good = dir.path().join("good.yaml");
    std::fs::write(&good, forbid_cronjob(None)).unwrap();
    let cases: [(&[&str], &str); 3] = [
        (&["--apply", nameless.to_str().unwrap(), "--for", "1h"], "metadata.name"),
        (&["--apply", good.to_str().unwrap(), "--for", "1h", "--start", "yesterday"], "RFC 3339"),
        (&["--apply", good.to_str().unwrap(), "--for", "soon"], "--for"),
    ];
    for (args, says) in cases {
        let o = host().args(["simulate", "--plugin", cronjob.to_str().unwrap()]).args(args).output().unwrap();
        let err = String::from_utf8_lossy(&o.stderr);
        assert_eq!(o.status.code(), Some(2), "{args:?}: {err}");
        assert!(err.contains(says), "{args:?}: {err}");
    }
}

#[test]
fn clock_speed_needs_embedded_and_a_positive_number() {
    let cronjob = wasm("cronjob");
    for args in [&["--clock-speed", "60"][..], &["--embedded", "--clock-speed", "0"], &["--embedded", "--clock-speed", "fast"]] {
        let o = host().args(["run", "--metrics-addr", "0", "--plugin", cronjob.to_str().unwrap()]).args(args).output().unwrap();
        assert_eq!(o.status.code(), Some(2), "{args:?}: {}", String::from_utf8_lossy(&o.stderr));
    }
}

/// Kills the child when the test ends, however it ends.
struct Child(std::process::Child);

impl Drop for Child {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

#[test]
fn at_clock_speed_60_a_minutely_cronjob_runs_jobs_within_wall_seconds() {
    let dir = tempfile::tempdir().unwrap();
    let kubeconfig = dir.path().join("kubeconfig");
    let cronjob = wasm("cronjob");
    let mut child = Child(
        host()
            .args(["run", "--embedded", "--clock-speed", "60", "--metrics-addr", "0", "--plugin", cronjob.to_str().unwrap()])
            .arg("--kubeconfig-out")
            .arg(&kubeconfig)
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .unwrap(),
    );
    let mut lines = BufReader::new(child.0.stdout.take().unwrap()).lines();
    let mut banner = false;
    for line in lines.by_ref() {
        let line = line.unwrap();
        banner |= line.starts_with("clock speed 60x");
        if line.starts_with("export KUBECONFIG=") {
            break;
        }
    }
    assert!(banner, "the speed is printed at startup");

    let runtime = tokio::runtime::Runtime::new().unwrap();
    runtime.block_on(async {
        use kube::api::{Api, DynamicObject, ListParams, PostParams};
        let config =
            kube::Config::from_custom_kubeconfig(kube::config::Kubeconfig::read_from(&kubeconfig).unwrap(), &Default::default()).await.unwrap();
        let client = kube::Client::try_from(config).unwrap();
        let gvk = kube::api::GroupVersionKind::gvk("batch.tutorial.kubebuilder.io", "v1", "CronJob");
        let wall = Instant::now();
        let (ar, _) = loop {
            // The host installs the CRD just after it prints the kubeconfig.
            match kube::discovery::pinned_kind(&client, &gvk).await {
                Ok(found) => break found,
                Err(e) => {
                    assert!(wall.elapsed() < Duration::from_secs(60), "the CronJob CRD never appeared: {e}");
                    tokio::time::sleep(Duration::from_millis(100)).await;
                }
            }
        };
        let cronjobs: Api<DynamicObject> = Api::namespaced_with(client.clone(), "default", &ar);
        let every_minute: DynamicObject = serde_json::from_value(serde_json::json!({
            "apiVersion": "batch.tutorial.kubebuilder.io/v1", "kind": "CronJob",
            "metadata": {"name": "minutely"},
            "spec": {"schedule": "*/1 * * * *", "jobTemplate": {"spec": {"template": {"spec": {
                "containers": [{"name": "c", "image": "busybox"}], "restartPolicy": "OnFailure"}}}}},
        }))
        .unwrap();
        let applied = Instant::now();
        cronjobs.create(&PostParams::default(), &every_minute).await.unwrap();
        let jobs: Api<k8s_openapi::api::batch::v1::Job> = Api::namespaced(client.clone(), "default");
        let mut seen = std::collections::BTreeSet::new();
        loop {
            for job in jobs.list(&ListParams::default()).await.unwrap() {
                let complete = job.status.and_then(|s| s.conditions).unwrap_or_default().iter().any(|c| c.type_ == "Complete" && c.status == "True");
                if complete {
                    seen.insert(job.metadata.name.unwrap());
                }
            }
            if seen.len() >= 3 {
                break;
            }
            assert!(applied.elapsed() < Duration::from_secs(120), "only {seen:?} completed in two wall minutes");
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
        let wall = applied.elapsed();
        // Three minutely runs need at least two virtual minutes after the first; the
        // cluster's own timestamps say how much virtual time passed.
        let cj = cronjobs.get("minutely").await.unwrap();
        let cj = serde_json::to_value(&cj).unwrap();
        let created = at(cj["metadata"]["creationTimestamp"].as_str().unwrap());
        let last = at(cj["status"]["lastScheduleTime"].as_str().unwrap());
        let virtual_elapsed = (last - created).to_std().unwrap();
        eprintln!("{} Jobs completed; {virtual_elapsed:?} of cluster time in {wall:?} of wall time", seen.len());
        assert!(virtual_elapsed >= Duration::from_secs(120), "{virtual_elapsed:?}");
        assert!(virtual_elapsed > wall * 10, "cluster time ({virtual_elapsed:?}) did not run faster than wall time ({wall:?})");
    });
}
