//! `host run --sharded` on a real control plane: three replicas share the
//! CronJobs, one is SIGKILLed, a fourth joins, one stops gracefully, and
//! every CronJob gets exactly one Job per scheduled minute throughout.
//!
//! Two sizes: the CI scenario (`SHARDING_CRONJOBS`, default 90: each
//! shard's share then says something, and their Jobs fit the test machine
//! beside the control plane), and the scale run, ignored in CI and run by
//! `cargo xtask sharding-scale [--cronjobs N] [--phase-secs S]` (default
//! 3,000 CronJobs, each phase held for 60 s), which prints the figures
//! docs/operations.md reports.
//! The schedule is `@every 10s`, but a CronJob names its Jobs by the minute
//! of their scheduled time (as upstream's controller does), so one Job per
//! minute is what a correct controller makes: the check is that every minute
//! from a CronJob's first Job to its last has exactly one, read from the
//! Jobs' scheduled-time annotations. Jobs do not run (no Job controller).
//! The CI scenario shortens the Lease timings (4 s / 3 s / 1 s) as a user
//! with a tighter takeover budget would set them; the scale run keeps the
//! host's defaults (15 s / 10 s / 2 s), which a loaded API server answers
//! within.

use std::collections::{BTreeMap, BTreeSet};
use std::path::PathBuf;
use std::time::{Duration, Instant};

use real_cluster::binaries::Binaries;
use real_cluster::process::{Process, Spec};
use real_cluster::{ControlPlane, HostProcess, Kubectl, Value, built, eventually_within};

use crate::common::{CRONJOB_CRD, wait_for_crds};

const SHARD_LABEL: &str = "shard.operator-host.dev/operator-host";
const SCHEDULED_AT: &str = "batch.tutorial.kubebuilder.io/scheduled-at";

/// The API server the replicas share, and what keeps it running.
struct Target {
    kubeconfig: PathBuf,
    logs: PathBuf,
    admin: Kubectl,
    /// Whether kubectl can validate against the server's OpenAPI (the
    /// embedded server does not serve it).
    openapi: bool,
    /// The control plane, or the embedded cluster's process and directory:
    /// stopped when the scenario ends, however it ends.
    _running: Box<dyn std::any::Any>,
}

/// The real control plane, without the Job controller (Jobs are counted, not run).
fn real() -> Option<Target> {
    let cluster = ControlPlane::builder().without_controller("job-controller").start()?;
    let (kubeconfig, logs, admin) = (cluster.kubeconfig.clone(), cluster.dir().join("logs"), cluster.admin());
    Some(Target { kubeconfig, logs, admin, openapi: true, _running: Box::new(cluster) })
}

/// The embedded cluster served on loopback by `host cluster` in its own
/// process (without its Job runner, as the real one runs without the Job
/// controller), driven by the real kubectl.
fn embedded() -> Option<Target> {
    let binaries = Binaries::find()?;
    let dir = tempfile::Builder::new().prefix("sharding-embedded-").tempdir().expect("a temporary directory");
    let (kubeconfig, logs) = (dir.path().join("kubeconfig"), dir.path().join("logs"));
    std::fs::create_dir_all(&logs).expect("the log directory");
    let spec = Spec::new("embedded-cluster", built("release/host")).args([
        "cluster",
        "--no-sim-jobs",
        "--kubeconfig-out",
        &kubeconfig.display().to_string(),
    ]);
    let mut server = Process::start(spec, logs.join("embedded-cluster.log"));
    let admin = Kubectl::new(binaries.path("kubectl"), kubeconfig.clone());
    eventually_within("the embedded cluster serving", Duration::from_secs(60), || {
        assert!(server.exited().is_none(), "host cluster exited:\n{}", server.log_tail(40));
        (kubeconfig.exists() && admin.run(&["get", "namespaces"]).status.success()).then_some(())
    });
    Some(Target { kubeconfig, logs, admin, openapi: false, _running: Box::new((server, dir)) })
}

/// The CI scenario's Lease timings (duration, renew deadline, retry period),
/// as a user with a tighter takeover budget would set them; the scale run
/// uses the host's defaults (15 s, 10 s, 2 s: controller-runtime's).
const SHORT_LEASES: [&str; 3] = ["4s", "3s", "1s"];

fn replica(cluster: &Target, name: &str, leases: Option<[&str; 3]>) -> HostProcess {
    let cronjob = built("plugins/cronjob.wasm").display().to_string();
    let mut args = vec!["--plugin", &cronjob, "--leader-elect", "--leader-election-namespace", "default", "--sharded"];
    if let Some([duration, deadline, retry]) = leases {
        args.extend([
            "--leader-election-lease-duration",
            duration,
            "--leader-election-renew-deadline",
            deadline,
            "--leader-election-retry-period",
            retry,
        ]);
    }
    let mut host = HostProcess::start(name, &cluster.kubeconfig, &cluster.logs, &args);
    host.wait_ready();
    host
}

/// The shard name a replica printed at start.
fn shard_of(host: &HostProcess) -> String {
    let log = host.log();
    let line = log.lines().find(|l| l.starts_with("shard ")).unwrap_or_else(|| panic!("no shard line in:\n{}", host.log_tail(30)));
    line.split_whitespace().nth(1).unwrap_or_default().to_string()
}

/// CronJobs by shard label value ("" for unassigned).
fn placement(kubectl: &Kubectl) -> BTreeMap<String, usize> {
    let mut by_shard = BTreeMap::new();
    for c in kubectl.items(&["get", "cronjobs.batch.tutorial.kubebuilder.io"]) {
        let shard = c["metadata"]["labels"][SHARD_LABEL].as_str().unwrap_or_default().to_string();
        *by_shard.entry(shard).or_default() += 1;
    }
    by_shard
}

/// SIGTERM to a replica (what a Pod's deletion sends).
fn terminate(host: &mut HostProcess) {
    let pid = host.process().pid().expect("the host runs");
    let status = std::process::Command::new("kill").args(["-TERM", &pid.to_string()]).status().expect("kill runs");
    assert!(status.success(), "kill -TERM {pid} failed");
}

/// Resident memory of a running host, in MiB.
fn rss_mib(host: &mut HostProcess) -> f64 {
    let pid = host.process().pid().expect("the host runs");
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    let kib: f64 = status.lines().find_map(|l| l.strip_prefix("VmRSS:")).and_then(|v| v.split_whitespace().next()?.parse().ok()).unwrap_or(0.0);
    kib / 1024.0
}

fn wait_until(what: &str, limit: Duration, mut done: impl FnMut() -> bool) -> Duration {
    let started = Instant::now();
    eventually_within(what, limit, || done().then_some(()));
    started.elapsed()
}

/// How big a run is and how long it holds each phase.
struct Size {
    cronjobs: usize,
    /// Held after the first assignment, the kill, the join and the graceful stop.
    settle: [Duration; 4],
    /// The longest wait for a placement (the sharder writes one label per
    /// parent per request, so it grows with the CronJobs).
    limit: Duration,
    /// The replicas' Lease timings (`None`: the host's defaults).
    leases: Option<[&'static str; 3]>,
}

fn env_number(name: &str, default: u64) -> u64 {
    match std::env::var(name) {
        Ok(v) => v.parse().unwrap_or_else(|_| panic!("{name}={v:?} is not a whole number")),
        Err(_) => default,
    }
}

#[test]
fn three_replicas_share_the_cronjobs_and_lose_and_repeat_no_scheduled_run() {
    let cronjobs = env_number("SHARDING_CRONJOBS", 90) as usize;
    let secs = Duration::from_secs;
    let Some(target) = real() else { return };
    scenario(&target, &Size { cronjobs, settle: [secs(40), secs(30), secs(30), secs(40)], limit: secs(60), leases: Some(SHORT_LEASES) });
}

/// The scale figure, too slow for CI: `cargo xtask sharding-scale`.
#[test]
#[ignore = "minutes long; run by `cargo xtask sharding-scale`"]
fn sharding_scale() {
    let cronjobs = env_number("SHARDING_CRONJOBS", 3000) as usize;
    let phase = Duration::from_secs(env_number("SHARDING_PHASE_SECS", 60));
    let size = Size { cronjobs, settle: [phase; 4], limit: Duration::from_secs(60 + cronjobs as u64 / 10), leases: None };
    let target = if std::env::var_os("SHARDING_EMBEDDED").is_some() { embedded() } else { real() };
    let Some(target) = target else { return };
    scenario(&target, &size);
}

fn scenario(cluster: &Target, size: &Size) {
    let admin = &cluster.admin;
    let count = size.cronjobs;
    let started = Instant::now();
    let mut a = replica(cluster, "host-a", size.leases);
    let mut b = replica(cluster, "host-b", size.leases);
    let mut c = replica(cluster, "host-c", size.leases);
    wait_for_crds(admin, &[CRONJOB_CRD]);
    let list: Vec<Value> = (0..count)
        .map(|i| {
            serde_json::json!({
                "apiVersion": "batch.tutorial.kubebuilder.io/v1", "kind": "CronJob",
                "metadata": {"name": format!("tick-{i:04}")},
                "spec": {
                    "schedule": "@every 10s",
                    "successfulJobsHistoryLimit": 1000, "failedJobsHistoryLimit": 1000,
                    "jobTemplate": {"spec": {"template": {"spec": {"containers": [{"name": "c", "image": "busybox"}], "restartPolicy": "OnFailure"}}}},
                },
            })
        })
        .collect();
    let list = serde_json::json!({"apiVersion": "v1", "kind": "List", "items": list});
    if cluster.openapi {
        admin.apply(&serde_json::to_string(&list).unwrap());
    } else {
        let file = cluster.logs.join("cronjobs.json");
        std::fs::write(&file, serde_json::to_string(&list).unwrap()).expect("the CronJob list written");
        let out = admin.run(&["create", "--validate=false", "-f", &file.display().to_string()]);
        assert!(out.status.success(), "kubectl create failed: {}", String::from_utf8_lossy(&out.stderr));
    }

    let shards = [shard_of(&a), shard_of(&b), shard_of(&c)];
    let assigned = wait_until("every CronJob assigned", size.limit, || {
        let p = placement(admin);
        !p.contains_key("") && p.values().sum::<usize>() == count
    });
    let spread = placement(admin);
    eprintln!("{count} CronJobs assigned in {assigned:.1?}: {spread:?}");
    for shard in &shards {
        let share = spread.get(shard).copied().unwrap_or(0) as f64 / count as f64;
        assert!((0.15..=0.55).contains(&share), "shard {shard} owns {share:.2} of the CronJobs: {spread:?}");
    }
    std::thread::sleep(size.settle[0]);

    // A crash: no release; the sharder takes the Lease over once it expires.
    let killed = shard_of(&c);
    c.kill();
    let after_kill = wait_until("the killed shard's CronJobs moved", size.limit, || {
        let p = placement(admin);
        !p.contains_key(&killed) && !p.contains_key("")
    });
    eprintln!("killed {killed}; its CronJobs moved after {after_kill:.1?}: {:?}", placement(admin));
    std::thread::sleep(size.settle[1]);

    // A fourth replica joins: the others drain a share to it.
    let mut d = replica(cluster, "host-d", size.leases);
    let joined = shard_of(&d);
    let rebalanced = wait_until("the new shard given CronJobs", size.limit, || placement(admin).get(&joined).copied().unwrap_or(0) > count / 6);
    eprintln!("{joined} joined; owns a share after {rebalanced:.1?}: {:?}", placement(admin));
    std::thread::sleep(size.settle[2]);
    let jobs_then = admin.items(&["get", "jobs"]).len();
    let rss_sharded = [rss_mib(&mut a), rss_mib(&mut b), rss_mib(&mut d)];
    let leading: Vec<bool> = [&a, &b, &d].iter().map(|h| h.log().contains("sharder started")).collect();
    eprintln!("RSS at 3 shards ({count} CronJobs, {jobs_then} Jobs): {rss_sharded:.1?} MiB; running the sharder: {leading:?}");

    // A graceful stop releases the Lease: its CronJobs move at once.
    let stopped = shard_of(&a);
    let handed_by_a = a.metric("shard_handovers_total");
    let stopping = Instant::now();
    terminate(&mut a);
    // A graceful stop drains in-flight reconciles and releases both Leases:
    // it ends by itself, long before the 30 s shutdown grace would cut a
    // drain short (a hang in it once ran into that grace and a SIGKILL).
    let exited = a.process().wait_exit(Duration::from_secs(20));
    let exit_secs = stopping.elapsed().as_secs_f64();
    assert!(exited.is_some_and(|s| s.success()), "the SIGTERMed replica did not exit by itself: {exited:?}\n{}", a.log_tail(30));
    a.process().kill();
    wait_until("the stopped shard's CronJobs moved", size.limit, || {
        let p = placement(admin);
        !p.contains_key(&stopped) && !p.contains_key("")
    });
    let after_stop = stopping.elapsed();
    eprintln!("stopped {stopped} (SIGTERM); it exited after {exit_secs:.1} s, its CronJobs moved {after_stop:.1?} after the signal");
    std::thread::sleep(size.settle[3]);

    // Every CronJob: one Job per minute, and no minute skipped.
    let mut instants: BTreeMap<String, Vec<String>> = BTreeMap::new();
    for job in admin.items(&["get", "jobs"]) {
        let Some(owner) = job["metadata"]["ownerReferences"].as_array().and_then(|o| o.iter().find(|r| r["kind"] == "CronJob")) else { continue };
        let at = job["metadata"]["annotations"][SCHEDULED_AT].as_str().unwrap_or_default().to_string();
        instants.entry(owner["name"].as_str().unwrap_or_default().to_string()).or_default().push(at);
    }
    let (mut jobs, mut duplicated, mut lost) = (0, 0, 0);
    for (cronjob, times) in &instants {
        jobs += times.len();
        let minutes: Vec<i64> =
            times.iter().filter_map(|t| chrono::DateTime::parse_from_rfc3339(t).ok()).map(|t| t.timestamp().div_euclid(60)).collect();
        let unique: BTreeSet<i64> = minutes.iter().copied().collect();
        duplicated += minutes.len() - unique.len();
        let (first, last) = (*unique.first().unwrap_or(&0), *unique.last().unwrap_or(&0));
        let skipped = (last - first + 1) as usize - unique.len();
        if skipped > 0 {
            eprintln!("{cronjob}: minutes {unique:?} skip {skipped}");
        }
        lost += skipped;
    }
    let handovers = handed_by_a + b.metric("shard_handovers_total");
    eprintln!(
        "FIGURES cronjobs={count} run_s={:.0} jobs={jobs} duplicated={duplicated} lost={lost} assigned_s={:.1} takeover_after_kill_s={:.1} rebalance_s={:.1} exit_after_sigterm_s={exit_secs:.1} move_after_stop_s={:.1} drained_to_new_shard={handovers}",
        started.elapsed().as_secs_f64(),
        assigned.as_secs_f64(),
        after_kill.as_secs_f64(),
        rebalanced.as_secs_f64(),
        after_stop.as_secs_f64()
    );
    // One replica holding everything: the last one left, after a graceful stop of the other.
    let last = shard_of(&d);
    b.process().stop(Duration::from_secs(30));
    wait_until("every CronJob on the last replica", size.limit, || placement(admin).get(&last) == Some(&count));
    std::thread::sleep(Duration::from_secs(10));
    let jobs_now = admin.items(&["get", "jobs"]).len();
    eprintln!("FIGURES rss_mib_at_3_shards={rss_sharded:.1?} ({jobs_then} Jobs) rss_mib_one_replica_all={:.1} ({jobs_now} Jobs)", rss_mib(&mut d));
    assert_eq!(instants.len(), count, "every CronJob made Jobs");
    assert_eq!(duplicated, 0, "a minute had two Jobs");
    assert_eq!(lost, 0, "a minute was skipped");
    assert!(jobs >= 2 * count, "the run spans at least two scheduled minutes per CronJob ({jobs} Jobs)");
    assert!(handovers > 0.0, "the first replicas handed CronJobs to the new shard by drain");
}
