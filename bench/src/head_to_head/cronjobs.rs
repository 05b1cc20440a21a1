//! Workload 1: N CronJobs all due at the same instant, on a fresh control
//! plane per run; measured from that instant until every Job exists.
//!
//! Each CronJob's schedule names one minute of the hour (`M * * * *`), a
//! minute boundary at least `lead` after the run begins, so exactly one run
//! of each is due in the window and none before it. The contestant starts
//! after the CronJobs exist and must be ready (caches synced) well before
//! the due instant, so the window holds only the due work: the Jobs'
//! creation and whatever status writes follow. Jobs are seen in etcd (a
//! poll every 25 ms costs kube-apiserver nothing); after the last Job the
//! window stays open until the contestant has been idle (CPU) and kube-apiserver
//! counted no new request for a second, so trailing status writes and Events
//! are counted too.

use std::path::Path;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use real_cluster::ControlPlane;
use serde_json::{Value, json};

use super::contestant::{self, Contestant, Programs};
use super::observe::{self, NewKeys, Requests};

/// What one run measured.
#[derive(Clone, Debug, serde::Serialize)]
pub struct Run {
    pub contestant: Contestant,
    pub round: usize,
    /// Due instant → last Job seen, seconds.
    pub wall: f64,
    /// Due instant → each Job seen: p50 and p99, seconds.
    pub p50: f64,
    pub p99: f64,
    /// Requests in the window, by verb.
    pub requests: std::collections::BTreeMap<String, f64>,
    pub requests_total: f64,
    pub requests_detail: String,
    /// Mean server-side milliseconds per request of each kind
    /// (`apiserver_request_duration_seconds`).
    pub server_ms: String,
    /// The contestant's CPU seconds in the window, and those of
    /// kube-apiserver + etcd (the server side of the same work).
    pub cpu: f64,
    pub server_cpu: f64,
    /// The window's length (due instant → quiet), seconds.
    pub window: f64,
    /// The contestant's peak RSS over its life (VmHWM), MiB: start-up
    /// (the initial lists; the host's plugin compile, its cache being empty)
    /// included.
    pub peak_rss_mib: f64,
    /// Its peak RSS from a second before the due instant to the end of the
    /// window (VmHWM reset then), MiB: the burst alone.
    pub burst_peak_rss_mib: f64,
    /// The machine's 1-minute load average at the due instant.
    pub load: f64,
}

const CRONJOB_PREFIX: &str = "/registry/jobs/default/";
const POLL: Duration = Duration::from_millis(25);
const GIVE_UP: Duration = Duration::from_secs(900);
/// Annotations holding a Job's scheduled time: the tutorial's, upstream's.
const TUTORIAL_SCHEDULED: &str = "batch.tutorial.kubebuilder.io/scheduled-at";
const UPSTREAM_SCHEDULED: &str = "batch.kubernetes.io/cronjob-scheduled-timestamp";

fn cronjob(upstream: bool, i: usize, minute: u32) -> Value {
    let api_version = if upstream { "batch/v1" } else { "batch.tutorial.kubebuilder.io/v1" };
    json!({
        "apiVersion": api_version, "kind": "CronJob",
        "metadata": {"name": format!("cj-{i:05}"), "namespace": "default"},
        // A late run is still started within ten minutes, so a slow
        // contestant creates every Job rather than skipping some.
        "spec": {"schedule": format!("{minute} * * * *"), "startingDeadlineSeconds": 600, "concurrencyPolicy": "Allow",
            "jobTemplate": {"spec": {"template": {"spec": {
                "containers": [{"name": "hello", "image": "busybox", "args": ["/bin/sh", "-c", "date"]}],
                "restartPolicy": "OnFailure"}}}}}
    })
}

/// Creates `count` CronJobs with kubectl, four `kubectl create` at once.
pub(super) fn create_cronjobs(plane: &ControlPlane, dir: &Path, upstream: bool, count: usize, minute: u32) -> anyhow::Result<()> {
    const PARALLEL: usize = 4;
    let mut children = Vec::new();
    for part in 0..PARALLEL {
        let items: Vec<Value> = (part..count).step_by(PARALLEL).map(|i| cronjob(upstream, i, minute)).collect();
        let file = dir.join(format!("cronjobs-{part}.json"));
        std::fs::write(&file, json!({"apiVersion": "v1", "kind": "List", "items": items}).to_string())?;
        let child = std::process::Command::new(plane.binaries.path("kubectl"))
            .arg("--kubeconfig")
            .arg(&plane.kubeconfig)
            .args(["create", "-o", "name", "-f"])
            .arg(&file)
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::piped())
            .spawn()?;
        children.push(child);
    }
    for child in children {
        let out = child.wait_with_output()?;
        anyhow::ensure!(out.status.success(), "kubectl create CronJobs: {}", String::from_utf8_lossy(&out.stderr));
    }
    Ok(())
}

/// The first minute boundary at least `lead` from now.
fn due_after(lead: Duration) -> SystemTime {
    let earliest = SystemTime::now() + lead;
    let secs = earliest.duration_since(UNIX_EPOCH).expect("after 1970").as_secs();
    UNIX_EPOCH + Duration::from_secs(secs.div_ceil(60) * 60)
}

fn sleep_until(t: SystemTime) {
    if let Ok(d) = t.duration_since(SystemTime::now()) {
        std::thread::sleep(d);
    }
}

/// A fresh control plane with no controller of its own (no
/// kube-controller-manager, no scheduler or kwok: no Pods run) and both CRDs.
pub fn fresh_plane() -> anyhow::Result<ControlPlane> {
    let plane = ControlPlane::builder().pods_run(false).controller_manager(false).keep_on_failure(false).start().ok_or_else(|| {
        anyhow::anyhow!("the real control plane is not built (Go absent?): run `cargo xtask real-cluster build` first; head-to-head is skipped")
    })?;
    let crds = real_cluster::repo_file("deploy/crd/crds.yaml");
    // The host installs its CRDs by server-side apply as `operator-host`;
    // the same field manager keeps that a no-op.
    plane.admin().ok(&["apply", "--server-side", "--field-manager=operator-host", "-f", &crds.display().to_string()]);
    plane.admin().ok(&["wait", "--for=condition=Established", "crd/cronjobs.batch.tutorial.kubebuilder.io", "--timeout=60s"]);
    Ok(plane)
}

/// One run of `who` with `count` CronJobs; `lead` is how long before the
/// due instant the run begins (creating the CronJobs and starting the
/// contestant must fit in it).
pub fn run_once(who: Contestant, programs: &Programs, count: usize, lead: Duration, round: usize) -> anyhow::Result<Run> {
    let plane = fresh_plane()?;
    let dir = plane.dir().to_path_buf();
    let due = due_after(lead);
    let minute = (due.duration_since(UNIX_EPOCH)?.as_secs() / 60 % 60) as u32;
    create_cronjobs(&plane, &dir, who.upstream_api(), count, minute)?;
    let mut running = contestant::start(who, &plane, programs, &dir.join("logs"));
    running.wait_ready(Duration::from_secs(120))?;
    let pid = running.pid()?;
    let server_pids = plane.pids();
    let ready_margin = due.duration_since(SystemTime::now()).unwrap_or_default();
    anyhow::ensure!(
        ready_margin >= Duration::from_secs(5),
        "{}: ready only {ready_margin:?} before the due instant; raise --lead (creating {count} CronJobs took longer than planned)",
        who.label()
    );
    let mut jobs = NewKeys::start(&plane, CRONJOB_PREFIX);
    anyhow::ensure!(jobs.poll()? == 0, "Jobs exist before the due instant");
    // A second before the due instant, after the start-up's requests.
    sleep_until(due - Duration::from_secs(1));
    let life_peak_kib = observe::status_kib(pid, "VmHWM")?;
    observe::reset_peak(pid)?;
    let (before, before_seconds) = Requests::scrape(&plane)?;
    let cpu_before = observe::cpu(pid)?;
    let server_before = server_pids.iter().map(|p| observe::cpu(*p)).sum::<anyhow::Result<Duration>>()?;
    let load = observe::load1();
    let started = Instant::now();
    while jobs.seen.len() < count {
        anyhow::ensure!(started.elapsed() < GIVE_UP, "{}: {} of {count} Jobs after {GIVE_UP:?}", who.label(), jobs.seen.len());
        std::thread::sleep(POLL);
        jobs.poll()?;
    }
    wait_quiet(&plane, pid)?;
    let window = SystemTime::now().duration_since(due)?.as_secs_f64();
    let cpu = (observe::cpu(pid)? - cpu_before).as_secs_f64();
    let server_cpu = (server_pids.iter().map(|p| observe::cpu(*p)).sum::<anyhow::Result<Duration>>()? - server_before).as_secs_f64();
    let (after, after_seconds) = Requests::scrape(&plane)?;
    let requests = after.since(&before);
    let server_ms = requests.mean_ms(&after_seconds.since(&before_seconds));
    let burst_peak_kib = observe::status_kib(pid, "VmHWM")?;
    let (peak_rss_mib, burst_peak_rss_mib) = (life_peak_kib.max(burst_peak_kib) as f64 / 1024.0, burst_peak_kib as f64 / 1024.0);
    check_jobs(&plane, who, count, due)?;
    running.stop();

    let mut latencies: Vec<f64> = jobs.seen.iter().map(|(_, t)| t.duration_since(due).map_or(0.0, |d| d.as_secs_f64())).collect();
    latencies.sort_by(f64::total_cmp);
    let at = |q: f64| latencies[((latencies.len() - 1) as f64 * q).round() as usize];
    Ok(Run {
        contestant: who,
        round,
        wall: at(1.0),
        p50: at(0.5),
        p99: at(0.99),
        requests: requests.by_verb(),
        requests_total: requests.total(),
        requests_detail: requests.detail(),
        server_ms,
        cpu,
        server_cpu,
        window,
        peak_rss_mib,
        burst_peak_rss_mib,
        load,
    })
}

/// Waits until `pid` used at most one clock tick of CPU in a second and
/// kube-apiserver counted no new resource request in that second (its
/// trailing status writes and Events are done), up to two minutes. CPU
/// alone is not enough: a client waiting on an overloaded server is idle
/// while its writes are still to come.
fn wait_quiet(plane: &ControlPlane, pid: u32) -> anyhow::Result<()> {
    let deadline = Instant::now() + Duration::from_secs(120);
    let mut last_cpu = observe::cpu(pid)?;
    let mut last_requests = Requests::scrape(plane)?.0.total();
    while Instant::now() < deadline {
        std::thread::sleep(Duration::from_secs(1));
        let cpu = observe::cpu(pid)?;
        let requests = Requests::scrape(plane)?.0.total();
        if cpu - last_cpu <= Duration::from_millis(10) && requests == last_requests {
            return Ok(());
        }
        (last_cpu, last_requests) = (cpu, requests);
    }
    Ok(())
}

/// Every CronJob got exactly one Job, scheduled at the due instant.
fn check_jobs(plane: &ControlPlane, who: Contestant, count: usize, due: SystemTime) -> anyhow::Result<()> {
    let jobs = plane.admin().items(&["get", "jobs", "-n", "default"]);
    anyhow::ensure!(jobs.len() == count, "{}: {} Jobs for {count} CronJobs", who.label(), jobs.len());
    let annotation = if who.upstream_api() { UPSTREAM_SCHEDULED } else { TUTORIAL_SCHEDULED };
    let due_text = chrono::DateTime::<chrono::Utc>::from(due).format("%Y-%m-%dT%H:%M:%SZ").to_string();
    let mut owners = std::collections::BTreeSet::new();
    for job in &jobs {
        let scheduled = job["metadata"]["annotations"][annotation].as_str().unwrap_or_default();
        anyhow::ensure!(scheduled == due_text, "{}: Job {} scheduled at {scheduled:?}, not {due_text}", who.label(), job["metadata"]["name"]);
        let owner =
            job["metadata"]["ownerReferences"].as_array().and_then(|o| o.iter().find(|r| r["kind"] == "CronJob")).map(|r| r["name"].to_string());
        owners.insert(owner.ok_or_else(|| anyhow::anyhow!("{}: Job {} has no CronJob owner", who.label(), job["metadata"]["name"]))?);
    }
    anyhow::ensure!(owners.len() == count, "{}: Jobs of only {} CronJobs", who.label(), owners.len());
    Ok(())
}
