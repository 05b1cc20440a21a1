//! Benchmark 7, head to head: the host against what a user would run
//! instead, on the same real control plane (etcd + kube-apiserver of the
//! `real_cluster` crate): the kubebuilder tutorial's CronJob controller on
//! controller-runtime, and upstream's CronJob controller in
//! kube-controller-manager. Each run gets a fresh control plane; the
//! contestants run one after another and their order flips every round.
//!
//! - [`contestant`]: who runs, how it is started, at which limits.
//! - [`cronjobs`]: workload 1, N CronJobs due at once.
//! - [`idle`]: workload 2, idle memory with a warm cache, one and ten controllers.
//! - [`rollout`]: workload 3, M parents of ten replicas rolled to a new image.
//! - [`observe`]: request counts, CPU, RSS and Jobs, read from outside.
//! - [`report`]: the "Head to head" section of docs/benchmarks.md.
//! - [`serve_native`]: the host's manager with native logic, as a process.

pub mod contestant;
pub mod cronjobs;
pub mod idle;
pub mod observe;
pub mod report;
pub mod rollout;
pub mod serve_native;

use std::path::PathBuf;
use std::time::Duration;

use contestant::{Contestant, Programs};

#[derive(Debug, clap::Args)]
pub struct Args {
    /// CronJobs in workload 1 (the issue asks for 10,000; at controller
    /// defaults with a client limit of 20 QPS that is ~17 minutes a run).
    #[arg(long, default_value_t = 1000)]
    pub cronjobs: usize,
    /// Workloads to run (default: all three), e.g. `1,2`.
    #[arg(long, value_delimiter = ',', default_values_t = [1u8, 2, 3], value_parser = clap::value_parser!(u8).range(1..=3))]
    pub workloads: Vec<u8>,
    /// MyDeployments / Deployments of ten replicas in workload 3.
    #[arg(long, default_value_t = 100)]
    pub deployments: usize,
    /// Rounds; the contestants' order flips every round.
    #[arg(long, default_value_t = 2)]
    pub rounds: usize,
    /// Only these contestants of workload 1 (default: all), e.g. `host-wasm,kcm`.
    #[arg(long, value_delimiter = ',', value_enum)]
    pub only: Vec<Which>,
    /// Where the report goes: the "Head to head" block of this file is
    /// replaced (or appended), nothing else in it changes.
    #[arg(long, default_value = "docs/benchmarks.md")]
    pub report: PathBuf,
    #[arg(long, default_value = "docs/benchmarks/head-to-head")]
    pub plots: PathBuf,
    /// Do not write the report (a smoke run).
    #[arg(long)]
    pub no_report: bool,
    /// A sentence about the machine during the run for the report (e.g.
    /// other work sharing the cores).
    #[arg(long, default_value = "")]
    pub note: String,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum Which {
    HostWasm,
    HostNative,
    ControllerRuntime,
    ControllerRuntimeTuned,
    Kcm,
    KcmTuned,
}

impl From<Which> for Contestant {
    fn from(w: Which) -> Contestant {
        match w {
            Which::HostWasm => Contestant::HostWasm,
            Which::HostNative => Contestant::HostNative,
            Which::ControllerRuntime => Contestant::ControllerRuntime,
            Which::ControllerRuntimeTuned => Contestant::ControllerRuntimeTuned,
            Which::Kcm => Contestant::Kcm,
            Which::KcmTuned => Contestant::KcmTuned,
        }
    }
}

/// Everything one head-to-head run measured.
#[derive(Clone, Debug, serde::Serialize)]
pub struct Results {
    pub cronjobs: usize,
    pub rounds: usize,
    pub runs: Vec<cronjobs::Run>,
    /// Workload 2, if it ran.
    pub idle: Option<idle::Idle>,
    /// Workload 3's runs.
    pub deployments: usize,
    pub rollouts: Vec<rollout::Rollout>,
    pub versions: Vec<(String, String)>,
    pub started: String,
    pub finished: String,
    pub cpu_model: String,
    pub note: String,
}

/// Time from the start of a run to the due instant: the control plane's
/// start (~5 s), creating the CronJobs (~1,000 a second on two cores) and
/// the contestant's start must fit, with a margin.
fn lead(cronjobs: usize) -> Duration {
    Duration::from_secs(25) + Duration::from_millis(cronjobs as u64 * 3)
}

pub fn run(target: &std::path::Path, args: &Args) -> anyhow::Result<Results> {
    let programs = Programs::find(target)?;
    anyhow::ensure!(args.cronjobs > 0 && args.rounds > 0 && args.deployments > 0, "--cronjobs, --deployments and --rounds must be at least 1");
    let started = now();
    let runs = if args.workloads.contains(&1) { due_at_once(&programs, args)? } else { Vec::new() };
    let idle = if args.workloads.contains(&2) { Some(idle::run(target, &programs, args.cronjobs)?) } else { None };
    let rollouts = if args.workloads.contains(&3) { rollouts(target, &programs, args)? } else { Vec::new() };
    Ok(Results {
        cronjobs: args.cronjobs,
        rounds: args.rounds,
        runs,
        idle,
        deployments: args.deployments,
        rollouts,
        versions: versions(&programs),
        started,
        finished: now(),
        cpu_model: cpu_model(),
        note: args.note.clone(),
    })
}

/// Workload 1, every contestant each round.
fn due_at_once(programs: &Programs, args: &Args) -> anyhow::Result<Vec<cronjobs::Run>> {
    let contestants: Vec<Contestant> =
        if args.only.is_empty() { Contestant::CRONJOB.to_vec() } else { args.only.iter().map(|w| (*w).into()).collect() };
    let mut runs = Vec::new();
    for round in 0..args.rounds {
        let order: Vec<Contestant> = if round % 2 == 0 { contestants.clone() } else { contestants.iter().rev().copied().collect() };
        for who in order {
            let run = cronjobs::run_once(who, programs, args.cronjobs, lead(args.cronjobs), round)?;
            eprintln!(
                "bench: head-to-head cronjobs ×{} {} round {round}: all Jobs {:.2} s (p50 {:.2} s, p99 {:.2} s), {:.0} requests ({}), CPU {:.2} s (server {:.2} s), peak RSS {:.1} MiB (burst {:.1} MiB), load {:.2}; server time per request: {}",
                args.cronjobs,
                who.label(),
                run.wall,
                run.p50,
                run.p99,
                run.requests_total,
                run.requests_detail,
                run.cpu,
                run.server_cpu,
                run.peak_rss_mib,
                run.burst_peak_rss_mib,
                run.load,
                run.server_ms
            );
            runs.push(run);
        }
    }
    Ok(runs)
}

/// Workload 3, every side each round (the order reversed every other round).
fn rollouts(target: &std::path::Path, programs: &Programs, args: &Args) -> anyhow::Result<Vec<rollout::Rollout>> {
    let mydeployment = target.join("plugins/mydeployment.wasm");
    anyhow::ensure!(mydeployment.exists(), "{} is missing: run `cargo xtask build`", mydeployment.display());
    let mut runs = Vec::new();
    for round in 0..args.rounds {
        let mut sides = vec![rollout::Side::Host, rollout::Side::Kcm, rollout::Side::KcmTuned];
        if round % 2 == 1 {
            sides.reverse();
        }
        for side in sides {
            let run = rollout::run_once(side, programs, &mydeployment, args.deployments, round)?;
            eprintln!(
                "bench: head-to-head rollout ×{} {} round {round}: first rollout {:.2} s, new image {:.2} s, {:.0} requests ({}), CPU {:.2} s (control plane {:.2} s), peak RSS {:.0} MiB, load {:.2}",
                args.deployments,
                side.label(),
                run.create_s,
                run.roll_s,
                run.requests_total,
                run.requests_detail,
                run.cpu,
                run.server_cpu,
                run.peak_rss_mib,
                run.load
            );
            runs.push(run);
        }
    }
    Ok(runs)
}

fn now() -> String {
    chrono::Utc::now().format("%Y-%m-%d %H:%M UTC").to_string()
}

fn cpu_model() -> String {
    let info = std::fs::read_to_string("/proc/cpuinfo").unwrap_or_default();
    let model = info.lines().find_map(|l| l.strip_prefix("model name")?.split(':').nth(1)).unwrap_or("unknown").trim().to_string();
    format!("{model}, {} cores", std::thread::available_parallelism().map_or(0, |n| n.get()))
}

/// Each contestant's version: the host's, controller-runtime's from the Go
/// controller's go.mod, the control plane's as it was built.
fn versions(programs: &Programs) -> Vec<(String, String)> {
    let host = std::process::Command::new(&programs.host)
        .arg("--version")
        .output()
        .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_string())
        .unwrap_or_default();
    let go_mod = std::fs::read_to_string(real_cluster::repo_file("bench/go/cronjob-controller-runtime/go.mod")).unwrap_or_default();
    let require = |module: &str| {
        go_mod.lines().find_map(|l| l.trim().strip_prefix(module)?.split_whitespace().next().map(str::to_string)).unwrap_or_else(|| "?".into())
    };
    let mut v = vec![
        // `host --version` prints `host 0.1.0`.
        ("host".to_string(), host.trim_start_matches("host ").to_string()),
        ("controller-runtime".to_string(), format!("{} (client-go {})", require("sigs.k8s.io/controller-runtime "), require("k8s.io/client-go "))),
    ];
    let built = real_cluster::binaries::Binaries::find().map(|b| b.versions()).unwrap_or_default();
    for line in built.lines() {
        if let Some((k, val)) = line.split_once(": ") {
            let k = if k == "kubernetes" { "kube-apiserver, kube-controller-manager" } else { k };
            // `go: go version go1.26.8 linux/amd64` reads as `go go1.26.8 linux/amd64`.
            v.push((k.to_string(), val.trim_start_matches("go version ").to_string()));
        }
    }
    v
}
