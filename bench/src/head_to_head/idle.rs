//! Workload 2: idle memory with a warm cache. N tutorial CronJobs and one
//! Job owned by each exist on a fresh control plane (no CronJob is due
//! within the run); each side starts, syncs its caches, reconciles every
//! CronJob once, goes idle, and its resident memory is read.
//!
//! Four configurations, one after another on the same objects (two at once
//! would fight over the CronJobs' status):
//! - one host with `cronjob.wasm` against one controller-runtime manager;
//! - one host with ten plugins against ten managers with one controller
//!   each. The ten plugins are the project's ten controllers of distinct
//!   kinds (`bench memory`'s set: cronjob, mydeployment, the examples and
//!   the test plugins); the host refuses two plugins with one parent kind,
//!   and the plugins carry their kinds, so "the CronJob plugin ten times"
//!   does not exist. The ten managers run the same CronJob controller, ten
//!   processes on the same objects, each caching every CronJob and Job.
//!   So the host's nine other plugins cache their own (empty) kinds where
//!   each manager caches N CronJobs + N Jobs again: the comparison is
//!   between what a user runs for ten controllers, not equal work.
//!
//! Resident memory: `VmRSS` (what `ps` shows) and `Pss` from
//! `/proc/PID/smaps_rollup` (shared pages split among their users: ten Go
//! processes of one binary share its text).

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use real_cluster::ControlPlane;
use real_cluster::process::{Process, Spec};
use serde_json::{Value, json};

use super::contestant::{Programs, Running};
use super::cronjobs;
use super::observe;

/// Managers and plugins on the "ten" side.
pub const TEN: usize = 10;

/// What workload 2 measured, MiB (median of five readings each).
#[derive(Clone, Debug, Default, serde::Serialize)]
pub struct Idle {
    pub cronjobs: usize,
    pub host_one: Memory,
    pub host_ten: Memory,
    pub manager_one: Memory,
    /// The ten managers' sum.
    pub managers_ten: Memory,
    /// The ten plugins of the host, by name.
    pub plugins: Vec<String>,
    /// The machine's 1-minute load average when each was read.
    pub loads: Vec<f64>,
}

#[derive(Clone, Copy, Debug, Default, serde::Serialize)]
pub struct Memory {
    pub rss_mib: f64,
    pub pss_mib: f64,
}

impl std::ops::Add for Memory {
    type Output = Memory;
    fn add(self, o: Memory) -> Memory {
        Memory { rss_mib: self.rss_mib + o.rss_mib, pss_mib: self.pss_mib + o.pss_mib }
    }
}

/// The ten plugins of the host (distinct parent kinds), by name and file.
fn plugins(target: &Path, programs: &Programs) -> Vec<(&'static str, PathBuf)> {
    let built = |name: &str| target.join("wasm32-wasip2/release").join(format!("{name}.wasm"));
    let shipped = |name: &str| target.join("plugins").join(format!("{name}.wasm"));
    vec![
        ("cronjob", programs.cronjob_wasm.clone()),
        ("mydeployment", shipped("mydeployment")),
        ("hello", built("hello")),
        ("memcached", built("memcached")),
        ("versioned", built("versioned")),
        ("sprocket", shipped("sprocket")),
        ("finalizing", built("finalizing")),
        ("related", built("related")),
        ("hostile", built("hostile")),
        ("gizmo", shipped("gizmo")),
    ]
}

/// Runs workload 2 with `count` CronJobs (and as many Jobs).
pub fn run(target: &Path, programs: &Programs, count: usize) -> anyhow::Result<Idle> {
    let ten = plugins(target, programs);
    for (name, path) in &ten {
        anyhow::ensure!(path.exists(), "plugin {name} is missing at {}: run `cargo xtask build`", path.display());
    }
    let plane = cronjobs::fresh_plane()?;
    let dir = plane.dir().to_path_buf();
    install_hostile_crd(&plane);
    // Half an hour away: nothing is due while the run lasts.
    let minute = ((SystemTime::now().duration_since(UNIX_EPOCH)?.as_secs() / 60 + 30) % 60) as u32;
    cronjobs::create_cronjobs(&plane, &dir, false, count, minute)?;
    create_jobs(&plane, &dir)?;
    let cache = dir.join("plugin-cache");
    let paths: Vec<&Path> = ten.iter().map(|(_, p)| p.as_path()).collect();
    // The measured hosts load precompiled code, as on any restart: a first
    // start compiles every plugin into the cache (Cranelift before ready).
    let mut warm = host(programs, &plane, &cache, &paths, &dir, "host-warm-up", true);
    warm.wait_ready(Duration::from_secs(600))?;
    warm.stop();

    let mut loads = Vec::new();
    let mut measure = |mut running: Vec<Running>| -> anyhow::Result<Memory> {
        for r in &mut running {
            r.wait_ready(Duration::from_secs(600))?;
        }
        let pids: Vec<u32> = running.iter().map(Running::pid).collect::<anyhow::Result<_>>()?;
        settle(&pids)?;
        loads.push(observe::load1());
        let total = pids.iter().map(|p| read(*p)).try_fold(Memory::default(), |a, m| m.map(|m| a + m));
        for r in running {
            r.stop();
        }
        total
    };
    let host_one = measure(vec![host(programs, &plane, &cache, &paths[..1], &dir, "host-one", false)])?;
    let manager_one = measure(vec![manager(programs, &plane, &dir, 0)])?;
    let host_ten = measure(vec![host(programs, &plane, &cache, &paths, &dir, "host-ten", false)])?;
    let managers_ten = measure((0..TEN).map(|i| manager(programs, &plane, &dir, i)).collect())?;
    let idle =
        Idle { cronjobs: count, host_one, host_ten, manager_one, managers_ten, plugins: ten.iter().map(|(n, _)| n.to_string()).collect(), loads };
    eprintln!(
        "bench: head-to-head idle ×{count}: host (cronjob) {:.1} MiB RSS / {:.1} PSS, one manager {:.1} / {:.1}; host with ten plugins {:.1} / {:.1}, ten managers {:.1} / {:.1}",
        idle.host_one.rss_mib,
        idle.host_one.pss_mib,
        idle.manager_one.rss_mib,
        idle.manager_one.pss_mib,
        idle.host_ten.rss_mib,
        idle.host_ten.pss_mib,
        idle.managers_ten.rss_mib,
        idle.managers_ten.pss_mib
    );
    Ok(idle)
}

/// The test plugin `hostile` carries no CRD (its tests install one).
fn install_hostile_crd(plane: &ControlPlane) {
    let crd = json!({
        "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
        "metadata": {"name": "hostiles.test.operator.dev"},
        "spec": {"group": "test.operator.dev", "scope": "Namespaced",
            "names": {"kind": "Hostile", "plural": "hostiles", "singular": "hostile", "listKind": "HostileList"},
            "versions": [{"name": "v1", "served": true, "storage": true, "subresources": {"status": {}},
                "schema": {"openAPIV3Schema": {"type": "object", "x-kubernetes-preserve-unknown-fields": true}}}]},
    });
    let file = plane.dir().join("hostile-crd.json");
    std::fs::write(&file, crd.to_string()).expect("write the Hostile CRD");
    plane.admin().ok(&["apply", "-f", &file.display().to_string()]);
    plane.admin().ok(&["wait", "--for=condition=Established", "crd/hostiles.test.operator.dev", "--timeout=60s"]);
}

/// One Job per CronJob, owned by it and stamped with a scheduled time an
/// hour back, as the controllers would have created it (no Job controller
/// runs: the Jobs stay active).
fn create_jobs(plane: &ControlPlane, dir: &Path) -> anyhow::Result<()> {
    let cronjobs = plane.admin().items(&["get", "cronjobs.batch.tutorial.kubebuilder.io", "-n", "default"]);
    let scheduled = (chrono::Utc::now() - chrono::Duration::hours(1)).format("%Y-%m-%dT%H:%M:00Z").to_string();
    let items: Vec<Value> = cronjobs
        .iter()
        .map(|cj| {
            let name = cj["metadata"]["name"].as_str().unwrap_or_default();
            json!({
                "apiVersion": "batch/v1", "kind": "Job",
                "metadata": {"name": format!("{name}-1"), "namespace": "default",
                    "annotations": {"batch.tutorial.kubebuilder.io/scheduled-at": scheduled},
                    "ownerReferences": [{"apiVersion": "batch.tutorial.kubebuilder.io/v1", "kind": "CronJob", "name": name,
                        "uid": cj["metadata"]["uid"], "controller": true, "blockOwnerDeletion": true}]},
                "spec": cj["spec"]["jobTemplate"]["spec"],
            })
        })
        .collect();
    let file = dir.join("jobs.json");
    std::fs::write(&file, json!({"apiVersion": "v1", "kind": "List", "items": items}).to_string())?;
    let out = plane.kubectl(&["create", "-o", "name", "-f", &file.display().to_string()]);
    anyhow::ensure!(out.status.success(), "kubectl create Jobs: {}", String::from_utf8_lossy(&out.stderr));
    Ok(())
}

fn host(programs: &Programs, plane: &ControlPlane, cache: &Path, plugins: &[&Path], dir: &Path, name: &str, warm_up: bool) -> Running {
    let port = real_cluster::free_port();
    let mut spec = Spec::new(name, &programs.host).args([
        "--plugin-cache-dir".to_string(),
        cache.display().to_string(),
        "--plugin-precompiled-dir".to_string(),
        programs.precompiled.display().to_string(),
        "run".to_string(),
    ]);
    for p in plugins {
        spec = spec.args(["--plugin".to_string(), p.display().to_string()]);
    }
    if warm_up {
        spec = spec.arg("--no-plugin-baseline");
    }
    let spec = spec
        .args(["--metrics-addr".to_string(), format!("127.0.0.1:{port}")])
        .env("KUBECONFIG", plane.kubeconfig.display().to_string())
        .env("TZ", "UTC")
        .env("HOST_LOG", "warn");
    let log = dir.join("logs").join(format!("{name}.log"));
    Running::new(Process::start(spec, log), Some(format!("http://127.0.0.1:{port}/readyz")))
}

fn manager(programs: &Programs, plane: &ControlPlane, dir: &Path, i: usize) -> Running {
    let port = real_cluster::free_port();
    let spec = Spec::new(&format!("controller-runtime-{i}"), &programs.controller_runtime)
        .arg(format!("--health-probe-bind-address=127.0.0.1:{port}"))
        .env("KUBECONFIG", plane.kubeconfig.display().to_string())
        .env("TZ", "UTC");
    let log = dir.join("logs").join(format!("controller-runtime-{i}.log"));
    Running::new(Process::start(spec, log), Some(format!("http://127.0.0.1:{port}/readyz")))
}

/// Waits until every process has used at most one clock tick of CPU in a
/// second (start-up reconciles done), up to two minutes, then two seconds
/// more for the allocators.
fn settle(pids: &[u32]) -> anyhow::Result<()> {
    let deadline = Instant::now() + Duration::from_secs(120);
    let total = || pids.iter().map(|p| observe::cpu(*p)).sum::<anyhow::Result<Duration>>();
    let mut last = total()?;
    while Instant::now() < deadline {
        std::thread::sleep(Duration::from_secs(1));
        let now = total()?;
        if now - last <= Duration::from_millis(10) * pids.len() as u32 {
            break;
        }
        last = now;
    }
    std::thread::sleep(Duration::from_secs(2));
    Ok(())
}

/// The median of five readings of `pid`'s VmRSS and Pss, MiB.
fn read(pid: u32) -> anyhow::Result<Memory> {
    let mut rss = Vec::new();
    let mut pss = Vec::new();
    for _ in 0..5 {
        rss.push(observe::status_kib(pid, "VmRSS")? as f64 / 1024.0);
        pss.push(observe::pss_kib(pid)? as f64 / 1024.0);
        std::thread::sleep(Duration::from_millis(200));
    }
    let median = |mut v: Vec<f64>| {
        v.sort_by(f64::total_cmp);
        v[v.len() / 2]
    };
    Ok(Memory { rss_mib: median(rss), pss_mib: median(pss) })
}
