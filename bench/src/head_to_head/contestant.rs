//! The controllers a head-to-head run pits against each other, each started
//! as its own process against the control plane (so its CPU time and peak
//! RSS are its own), at its defaults or at limits equal to the host's.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use real_cluster::ControlPlane;
use real_cluster::process::{Process, Spec};

/// The host's default reconcile workers per plugin (`host run --concurrency`);
/// the host has no client-side rate limit. "Equal limits" means these.
pub const HOST_WORKERS: u32 = 4;

/// kube-controller-manager's client rate limit when its flags are left
/// alone (`--kube-api-qps`, `--kube-api-burst`) and its CronJob workers
/// (`--concurrent-cron-job-syncs`).
pub const KCM_DEFAULT_QPS: u32 = 20;
pub const KCM_DEFAULT_BURST: u32 = 30;
pub const KCM_DEFAULT_CRONJOB_WORKERS: u32 = 5;

/// kube-controller-manager cannot turn its client limiter off; this is far
/// above what the API server on two cores serves.
pub const UNLIMITED_QPS: u32 = 100_000;

#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize)]
pub enum Contestant {
    /// `host run --plugin cronjob.wasm` (its defaults are the equal limits).
    HostWasm,
    /// The same manager with the CronJob logic compiled natively into the
    /// process (`bench serve-native`).
    HostNative,
    /// The tutorial's controller on controller-runtime at its defaults.
    ControllerRuntime,
    /// The same with the host's workers (rate limiter off in both).
    ControllerRuntimeTuned,
    /// kube-controller-manager `--controllers=cronjob-controller` at its defaults.
    Kcm,
    /// The same with the host's workers and no effective client limit.
    KcmTuned,
}

impl Contestant {
    pub const CRONJOB: [Contestant; 6] = [
        Contestant::HostWasm,
        Contestant::HostNative,
        Contestant::ControllerRuntime,
        Contestant::ControllerRuntimeTuned,
        Contestant::Kcm,
        Contestant::KcmTuned,
    ];

    pub fn label(self) -> &'static str {
        match self {
            Contestant::HostWasm => "host + cronjob.wasm",
            Contestant::HostNative => "host, native logic",
            Contestant::ControllerRuntime => "controller-runtime (defaults)",
            Contestant::ControllerRuntimeTuned => "controller-runtime (equal limits)",
            Contestant::Kcm => "kube-controller-manager (defaults)",
            Contestant::KcmTuned => "kube-controller-manager (equal limits)",
        }
    }

    /// A label short enough for a plot's axis.
    pub fn short(self) -> &'static str {
        match self {
            Contestant::HostWasm => "host Wasm",
            Contestant::HostNative => "host native",
            Contestant::ControllerRuntime => "c-r default",
            Contestant::ControllerRuntimeTuned => "c-r equal",
            Contestant::Kcm => "KCM default",
            Contestant::KcmTuned => "KCM equal",
        }
    }

    /// Reconcile workers and client rate limit (QPS, burst; `None`: none).
    pub fn limits(self) -> (u32, Option<(u32, u32)>) {
        match self {
            Contestant::HostWasm | Contestant::HostNative | Contestant::ControllerRuntimeTuned => (HOST_WORKERS, None),
            Contestant::ControllerRuntime => (1, None),
            Contestant::Kcm => (KCM_DEFAULT_CRONJOB_WORKERS, Some((KCM_DEFAULT_QPS, KCM_DEFAULT_BURST))),
            Contestant::KcmTuned => (HOST_WORKERS, Some((UNLIMITED_QPS, UNLIMITED_QPS))),
        }
    }

    pub fn limits_text(self) -> String {
        let (workers, qps) = self.limits();
        let qps = match qps {
            None => "no client rate limit".to_string(),
            Some((q, _)) if q >= UNLIMITED_QPS => format!("client QPS {q} (no effective limit)"),
            Some((q, b)) => format!("client QPS {q}, burst {b}"),
        };
        format!("{workers} worker{}, {qps}", if workers == 1 { "" } else { "s" })
    }

    /// Whether it reconciles upstream's batch/v1 CronJobs (else the
    /// tutorial's batch.tutorial.kubebuilder.io/v1 ones).
    pub fn upstream_api(self) -> bool {
        matches!(self, Contestant::Kcm | Contestant::KcmTuned)
    }
}

/// What the contestants are built from.
pub struct Programs {
    /// The production host (`target/image/host`: no embedded cluster,
    /// symbols stripped), the binary the image ships.
    pub host: PathBuf,
    /// The shipped plugins as that host compiled them
    /// (`target/image/precompiled`), which the image ships and names in
    /// `HOST_PLUGIN_PRECOMPILED_DIR`.
    pub precompiled: PathBuf,
    pub cronjob_wasm: PathBuf,
    /// This benchmark's own binary (`bench serve-native`).
    pub bench: PathBuf,
    /// The controller-runtime CronJob controller built by `cargo xtask bench`.
    pub controller_runtime: PathBuf,
}

impl Programs {
    pub fn find(target: &Path) -> anyhow::Result<Programs> {
        let programs = Programs {
            host: target.join("image/host"),
            precompiled: target.join("image/precompiled"),
            cronjob_wasm: target.join("plugins/cronjob.wasm"),
            bench: std::env::current_exe()?,
            controller_runtime: target.join("bench/go/cronjob-controller-runtime"),
        };
        for p in [&programs.host, &programs.precompiled, &programs.cronjob_wasm, &programs.controller_runtime] {
            anyhow::ensure!(
                p.exists(),
                "{} is missing: run `cargo xtask bench head-to-head` (it builds the production host, the plugins and the Go controller)",
                p.display()
            );
        }
        Ok(programs)
    }
}

/// A started contestant.
pub struct Running {
    pub process: Process,
    /// `/readyz` to poll, if it has one (kube-controller-manager runs
    /// without its serving port here).
    readyz: Option<String>,
}

impl Running {
    /// `process`, ready when `readyz` (if any) answers 200.
    pub fn new(process: Process, readyz: Option<String>) -> Running {
        Running { process, readyz }
    }

    pub fn pid(&self) -> anyhow::Result<u32> {
        self.process.pid().ok_or_else(|| anyhow::anyhow!("{} is not running", self.process.name()))
    }

    /// Waits until it reports ready (caches synced), up to `limit`.
    pub fn wait_ready(&mut self, limit: Duration) -> anyhow::Result<()> {
        let deadline = Instant::now() + limit;
        loop {
            if let Some(status) = self.process.exited() {
                anyhow::bail!("{} exited ({status}):\n{}", self.process.name(), self.process.log_tail(30));
            }
            match &self.readyz {
                Some(url) if real_cluster::http::get(url).is_ok() => return Ok(()),
                Some(_) => {}
                None => return Ok(()),
            }
            anyhow::ensure!(Instant::now() < deadline, "{} not ready after {limit:?}:\n{}", self.process.name(), self.process.log_tail(30));
            std::thread::sleep(Duration::from_millis(100));
        }
    }

    pub fn stop(mut self) {
        self.process.stop(Duration::from_secs(5));
    }
}

/// Starts `who` against `plane`; its log goes to `log_dir`. Every
/// contestant runs with `TZ=UTC`, so the same schedule means the same
/// instant to each.
pub fn start(who: Contestant, plane: &ControlPlane, programs: &Programs, log_dir: &Path) -> Running {
    let port = real_cluster::free_port();
    let kubeconfig = plane.kubeconfig.display().to_string();
    let (workers, qps) = who.limits();
    let spec = match who {
        Contestant::HostWasm => Spec::new("host", &programs.host)
            .args(["--plugin-cache-dir".to_string(), log_dir.join("plugin-cache").display().to_string()])
            .args(["--plugin-precompiled-dir".to_string(), programs.precompiled.display().to_string()])
            .args(["run", "--plugin", &programs.cronjob_wasm.display().to_string()])
            .args(["--concurrency".to_string(), workers.to_string(), "--metrics-addr".to_string(), format!("127.0.0.1:{port}")]),
        Contestant::HostNative => Spec::new("host-native", &programs.bench).args([
            "serve-native",
            "--concurrency",
            &workers.to_string(),
            "--ready-addr",
            &format!("127.0.0.1:{port}"),
        ]),
        Contestant::ControllerRuntime | Contestant::ControllerRuntimeTuned => Spec::new("controller-runtime", &programs.controller_runtime)
            .args([format!("--workers={workers}"), format!("--health-probe-bind-address=127.0.0.1:{port}")]),
        Contestant::Kcm | Contestant::KcmTuned => {
            let (qps, burst) = qps.expect("kube-controller-manager always has a client limit");
            plane.controller_manager_spec(&["cronjob-controller"]).args([
                format!("--concurrent-cron-job-syncs={workers}"),
                format!("--kube-api-qps={qps}"),
                format!("--kube-api-burst={burst}"),
            ])
        }
    };
    let spec = spec.env("KUBECONFIG", kubeconfig).env("TZ", "UTC").env("HOST_LOG", "warn");
    let readyz = (!who.upstream_api()).then(|| format!("http://127.0.0.1:{port}/readyz"));
    let log = log_dir.join(format!("{}.log", spec.name));
    Running { process: Process::start(spec, log), readyz }
}
