//! `bench`: the operator host measured against its alternatives, side by
//! side in one run. `cargo xtask bench` builds what is needed and runs
//! `bench all`, which prints ratios and writes docs/benchmarks.md with
//! plots; each measurement also runs alone (`bench reconcile`, ...).

mod e2e;
mod head_to_head;
mod hook;
mod memory;
mod native;
mod plot;
mod process;
mod reconcile;
mod report;
mod simulate;
mod startup;
mod stats;
mod ten_controllers;
mod workload;

use std::path::PathBuf;
use std::time::Duration;

use clap::{Parser, Subcommand};
use operator_runtime::sandbox::{LoadedPlugin, PrecompiledCache, Sandbox, SandboxConfig};

use workload::Kind;

#[derive(Debug, Parser)]
#[command(about = "Benchmarks of the operator host against native logic and a loopback HTTP hook")]
struct Cli {
    /// A short smoke run: few iterations and small sizes (numbers are not
    /// meaningful, only that everything runs).
    #[arg(long, global = true)]
    quick: bool,
    /// The cargo target dir holding `release/host` and the built plugins
    /// (default: two levels above this binary).
    #[arg(long, global = true, env = "CARGO_TARGET_DIR")]
    target_dir: Option<PathBuf>,
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Every benchmark, then the report and plots.
    All {
        /// Where the markdown report goes.
        #[arg(long, default_value = "docs/benchmarks.md")]
        report: PathBuf,
        /// Where the PNG plots go.
        #[arg(long, default_value = "docs/benchmarks")]
        plots: PathBuf,
    },
    /// 1: one reconcile, Wasm vs native, by number of children.
    Reconcile,
    /// 2: the Wasm call vs the same logic behind a loopback HTTP hook.
    Hook {
        /// First make 20 Wasm calls of each plugin with this many children,
        /// as `bench all` runs the reconcile benchmark (up to 1,000) first:
        /// shows what earlier large calls cost later small ones.
        #[arg(long)]
        after_calls_with: Option<usize>,
    },
    /// 3: 10,000 CronJobs / 1,000 MyDeployments end to end, Wasm vs native in-host.
    E2e {
        /// Only this workload (default: both).
        #[arg(long, value_enum)]
        kind: Option<Kind>,
        /// Parents per run (default: the profile's size).
        #[arg(long)]
        count: Option<usize>,
    },
    /// 4: the host's RSS with cached objects and per extra plugin.
    Memory {
        /// Only these numbers of cached objects (default: the profile's), no per-plugin steps.
        #[arg(long, value_delimiter = ',')]
        objects: Vec<usize>,
        /// Only the row "ten controllers: one host vs ten hosts".
        #[arg(long, conflicts_with = "objects")]
        ten_controllers: bool,
    },
    /// 5: hot-swap latency and cold start.
    Startup,
    /// Not a benchmark: calls one plugin's Wasm reconcile in a loop, for a
    /// profiler (`valgrind --tool=callgrind`, `perf record`) to look at.
    Loop {
        /// `cronjob` or `mydeployment`.
        #[arg(long, default_value = "cronjob")]
        plugin: String,
        #[arg(long, default_value_t = 10)]
        children: usize,
        #[arg(long, default_value_t = 1000)]
        calls: usize,
        /// Call the native logic instead.
        #[arg(long)]
        native: bool,
        /// Write a perf map (`/tmp/perf-<pid>.map`) of the guest functions
        /// for `perf record`/`perf report`.
        #[arg(long)]
        perf_map: bool,
    },
    /// 6: `host simulate` throughput, simulated hours per wall second.
    Simulate,
    /// 7: the host against controller-runtime and kube-controller-manager
    /// on a real control plane (needs Go: `cargo xtask bench head-to-head`);
    /// writes its own block of docs/benchmarks.md.
    HeadToHead(head_to_head::Args),
    /// Not a benchmark: the host's manager with the CronJob logic linked
    /// natively, against KUBECONFIG's cluster (head-to-head starts it).
    #[command(hide = true)]
    ServeNative {
        #[arg(long, default_value_t = 4)]
        concurrency: usize,
        #[arg(long)]
        ready_addr: std::net::SocketAddr,
    },
    /// Not part of `all`: two builds of one plugin, interleaved, by number
    /// of children (to measure a guest-side change under the same load).
    Compare {
        /// `cronjob` or `mydeployment`.
        #[arg(long, default_value = "cronjob")]
        plugin: String,
        before: PathBuf,
        after: PathBuf,
    },
}

/// How long and how big: `--quick` for a smoke run, else the full run.
#[derive(Clone, Copy, Debug)]
pub struct Profile {
    pub quick: bool,
}

impl Profile {
    /// Time spent per micro-benchmark measurement (both variants together).
    pub fn per_measurement(&self) -> Duration {
        if self.quick { Duration::from_millis(100) } else { Duration::from_secs(4) }
    }
    pub fn min_iterations(&self) -> usize {
        if self.quick { 5 } else { 30 }
    }
    /// Parents per end-to-end run: the 10,000 CronJobs (about
    /// 20-40 s per run on this shared machine, parents' creation included)
    /// and 1,000 MyDeployments (3,000 Pods, about 30 s per run).
    pub fn e2e_count(&self, kind: Kind) -> usize {
        match (self.quick, kind) {
            (true, Kind::CronJob) => 50,
            (true, Kind::MyDeployment) => 10,
            (false, Kind::CronJob) => 10_000,
            (false, Kind::MyDeployment) => 1000,
        }
    }
    /// Rounds of each end-to-end workload, Wasm and native alternated. Five,
    /// not two: single runs of 10,000 CronJobs moved by 30% on this shared
    /// machine (4.3 and 5.7 s for the same build in one run), and a median
    /// of two is their mean.
    pub fn e2e_rounds(&self) -> usize {
        if self.quick { 1 } else { 5 }
    }
    pub fn memory_objects(&self) -> Vec<usize> {
        if self.quick { vec![0, 1000] } else { vec![0, 10_000, 100_000] }
    }
    /// Pods, Jobs and ConfigMaps each, seeded for the ten-controllers row.
    pub fn ten_controllers_objects_per_kind(&self) -> usize {
        if self.quick { 100 } else { 1000 }
    }
    pub fn swaps(&self) -> usize {
        if self.quick { 2 } else { 20 }
    }
    pub fn cold_starts(&self) -> usize {
        if self.quick { 1 } else { 7 }
    }
}

/// Where the built artifacts are.
pub struct Paths {
    pub target: PathBuf,
    pub host: PathBuf,
    /// Scratch space for logs of child processes.
    pub work: PathBuf,
}

impl Paths {
    fn new(target: PathBuf) -> anyhow::Result<Paths> {
        let host = target.join("release/host");
        anyhow::ensure!(host.exists(), "{} is missing: run `cargo xtask bench` (it builds the host and plugins first)", host.display());
        let work = target.join("bench");
        std::fs::create_dir_all(&work)?;
        Ok(Paths { host, work, target })
    }

    /// A shipped plugin, `target/plugins/<name>.wasm`.
    pub fn plugin(&self, name: &str) -> PathBuf {
        self.target.join("plugins").join(format!("{name}.wasm"))
    }

    pub fn hello(&self) -> PathBuf {
        self.target.join("wasm32-wasip2/release/hello.wasm")
    }

    /// The hot-swap test plugin, version 1 or 2.
    pub fn versioned(&self, version: u8) -> PathBuf {
        if version == 1 { self.target.join("wasm32-wasip2/release/versioned.wasm") } else { self.plugin("versioned-v2") }
    }
}

/// The shipped plugins loaded as Wasm, in one sandbox with `host run`'s
/// default limits, and their native comparator.
pub struct Plugins {
    pub sandbox: Sandbox,
    cronjob: LoadedPlugin,
    mydeployment: LoadedPlugin,
    /// Loaded on first use: only the call benchmarks compare with it.
    native: std::sync::OnceLock<std::sync::Arc<native::NativeLib>>,
    target: PathBuf,
}

impl Plugins {
    fn load(paths: &Paths, perf_map: bool) -> anyhow::Result<Plugins> {
        let sandbox = Sandbox::new(SandboxConfig { cache: PrecompiledCache::disabled(), perf_map, ..SandboxConfig::default() })?;
        let load = |name: &str| sandbox.load_file(&paths.plugin(name)).map_err(|e| anyhow::anyhow!("{}", operator_runtime::error_chain(&e)));
        Ok(Plugins {
            cronjob: load("cronjob")?,
            mydeployment: load("mydeployment")?,
            sandbox,
            native: Default::default(),
            target: paths.target.clone(),
        })
    }

    /// The native comparator (`bench-native`), loaded on the first call.
    pub fn native(&self) -> anyhow::Result<std::sync::Arc<native::NativeLib>> {
        if let Some(lib) = self.native.get() {
            return Ok(lib.clone());
        }
        let lib = std::sync::Arc::new(native::NativeLib::load(&self.target)?);
        Ok(self.native.get_or_init(|| lib).clone())
    }

    pub fn get(&self, kind: Kind) -> &LoadedPlugin {
        match kind {
            Kind::CronJob => &self.cronjob,
            Kind::MyDeployment => &self.mydeployment,
        }
    }
}

fn main() -> std::process::ExitCode {
    let cli = Cli::parse();
    match run(cli) {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("bench: {e:#}");
            std::process::ExitCode::FAILURE
        }
    }
}

fn run(cli: Cli) -> anyhow::Result<()> {
    let profile = Profile { quick: cli.quick };
    let target = match cli.target_dir {
        Some(t) => t,
        None => std::env::current_exe()?
            .parent()
            .and_then(|p| p.parent())
            .map(PathBuf::from)
            .ok_or_else(|| anyhow::anyhow!("cannot tell the target dir; pass --target-dir"))?,
    };
    match &cli.command {
        Command::ServeNative { concurrency, ready_addr } => {
            let runtime = tokio::runtime::Builder::new_multi_thread().enable_all().build()?;
            return runtime.block_on(head_to_head::serve_native::run(*concurrency, *ready_addr));
        }
        // Runs on this thread: the control plane's processes die with the
        // thread that started them.
        Command::HeadToHead(args) => return head_to_head_report(&target, args),
        _ => {}
    }
    let paths = Paths::new(target)?;
    let perf_map = matches!(cli.command, Command::Loop { perf_map: true, .. });
    let plugins = Plugins::load(&paths, perf_map)?;
    let runtime = tokio::runtime::Builder::new_multi_thread().enable_all().build()?;
    let mut results = report::Results::start(profile);
    match cli.command {
        Command::Reconcile => results.reconcile = reconcile::run(&profile, &plugins)?,
        Command::Hook { after_calls_with } => {
            if let Some(n) = after_calls_with {
                for kind in Kind::ALL {
                    reconcile::call_loop(kind, &plugins, n, 20, false)?;
                }
            }
            results.hook = runtime.block_on(hook::run(&profile, &plugins))?
        }
        Command::E2e { kind, count } => {
            let kinds: Vec<Kind> = kind.map_or(Kind::ALL.to_vec(), |k| vec![k]);
            results.e2e = runtime.block_on(e2e::run(&profile, &plugins, &kinds, count))?
        }
        Command::Memory { ten_controllers: true, .. } => results.memory = Some(runtime.block_on(memory::ten_controllers_only(&profile, &paths))?),
        Command::Memory { objects, .. } => results.memory = Some(runtime.block_on(memory::run(&profile, &paths, &objects))?),
        Command::Startup => results.startup = Some(runtime.block_on(startup::run(&profile, &paths, &plugins))?),
        Command::Loop { plugin, children, calls, native, .. } => {
            let kind = Kind::ALL.into_iter().find(|k| k.plugin() == plugin).ok_or_else(|| anyhow::anyhow!("no plugin {plugin}"))?;
            reconcile::call_loop(kind, &plugins, children, calls, native)?;
            return Ok(());
        }
        Command::Compare { plugin, before, after } => {
            let kind = Kind::ALL.into_iter().find(|k| k.plugin() == plugin).ok_or_else(|| anyhow::anyhow!("no plugin {plugin}"))?;
            let load = |p: &PathBuf| plugins.sandbox.load_file(p).map_err(|e| anyhow::anyhow!("{}", operator_runtime::error_chain(&e)));
            reconcile::compare(&profile, kind, &load(&before)?, &load(&after)?)?;
            return Ok(());
        }
        Command::ServeNative { .. } | Command::HeadToHead(_) => unreachable!("handled above"),
        Command::Simulate => results.simulate = Some(simulate::run(&profile, &paths)?),
        Command::All { report, plots } => {
            results.reconcile = reconcile::run(&profile, &plugins)?;
            results.hook = runtime.block_on(hook::run(&profile, &plugins))?;
            results.e2e = runtime.block_on(e2e::run(&profile, &plugins, &Kind::ALL, None))?;
            results.memory = Some(runtime.block_on(memory::run(&profile, &paths, &[]))?);
            results.startup = Some(runtime.block_on(startup::run(&profile, &paths, &plugins))?);
            results.simulate = Some(simulate::run(&profile, &paths)?);
            results.finish();
            let images = plot::all(&results, &plots)?;
            let rel = plots.strip_prefix(report.parent().unwrap_or(std::path::Path::new(""))).unwrap_or(&plots).to_path_buf();
            std::fs::write(&report, report::markdown(&results, &rel, &images))?;
            eprintln!("bench: wrote {} and {} plots in {}", report.display(), images.len(), plots.display());
            // The head-to-head needs the real control plane, which needs Go.
            if paths.target.join("real-cluster/bin/kube-apiserver").exists() {
                let args = head_to_head::Args {
                    cronjobs: if profile.quick { 50 } else { 1000 },
                    rounds: if profile.quick { 1 } else { 2 },
                    workloads: vec![1, 2, 3],
                    deployments: if profile.quick { 5 } else { 100 },
                    only: Vec::new(),
                    report: report.clone(),
                    plots: plots.join("head-to-head"),
                    no_report: false,
                    note: String::new(),
                };
                head_to_head_report(&paths.target, &args)?;
            } else {
                eprintln!(
                    "bench: SKIPPED head-to-head: the real control plane is not built (Go absent?); its block of {} is left out",
                    report.display()
                );
            }
        }
    }
    println!("{}", report::summary(&results));
    std::fs::write(paths.work.join("results.json"), serde_json::to_string_pretty(&results)?)?;
    Ok(())
}

/// `bench head-to-head`: runs it, prints the table, writes the report block and plot.
fn head_to_head_report(target: &std::path::Path, args: &head_to_head::Args) -> anyhow::Result<()> {
    let results = head_to_head::run(target, args)?;
    std::fs::create_dir_all(target.join("bench"))?;
    std::fs::write(target.join("bench/head-to-head.json"), serde_json::to_string_pretty(&results)?)?;
    if args.no_report {
        print!("{}", head_to_head::report::markdown(&results, &head_to_head::report::Plots::default()));
        return Ok(());
    }
    let base = args.report.parent().unwrap_or(std::path::Path::new(""));
    let rel = |file: String| args.plots.strip_prefix(base).unwrap_or(&args.plots).join(file).display().to_string();
    let mut plots = head_to_head::report::Plots::default();
    if !results.runs.is_empty() {
        let rows = head_to_head::report::rows(&results);
        plots.cronjobs = Some(rel(plot::head_to_head_cronjobs(&rows, results.cronjobs, &args.plots)?.0));
    }
    if let Some(idle) = &results.idle {
        plots.idle = Some(rel(plot::head_to_head_idle(idle, &args.plots)?.0));
    }
    if !results.rollouts.is_empty() {
        plots.rollout = Some(rel(plot::head_to_head_rollout(&results.rollouts, results.deployments, &args.plots)?.0));
    }
    let block = head_to_head::report::markdown(&results, &plots);
    head_to_head::report::write_block(&args.report, &block)?;
    print!("{block}");
    eprintln!("bench: wrote the head-to-head block of {} and its plot in {}", args.report.display(), args.plots.display());
    Ok(())
}
