//! The `host` binary (`target/release/host`) run against the control plane
//! as a user runs it: `KUBECONFIG` in its environment, `host run ...`.

use std::path::{Path, PathBuf};
use std::time::Duration;

use crate::process::{Process, Spec};
use crate::{built, eventually_within, free_port, http};

/// A running host and its metrics address.
pub struct HostProcess {
    process: Process,
    /// `http://127.0.0.1:PORT`: `/metrics`, `/healthz`, `/readyz`.
    pub metrics: String,
}

impl HostProcess {
    /// `host run --metrics-addr 127.0.0.1:<free> ARGS...` with `KUBECONFIG=kubeconfig`;
    /// the log is `log_dir/<name>.log`. Returns once it runs (not yet ready).
    pub fn start(name: &str, kubeconfig: &Path, log_dir: &Path, args: &[&str]) -> HostProcess {
        let port = free_port();
        let cache: PathBuf = log_dir.join(format!("{name}-plugin-cache"));
        let spec = Spec::new(name, built("release/host"))
            .env("KUBECONFIG", kubeconfig.display().to_string())
            .env("HOST_LOG", std::env::var("HOST_LOG").unwrap_or_else(|_| "info".into()))
            .arg("--plugin-cache-dir")
            .arg(cache.display().to_string())
            .args(["run", "--metrics-addr", &format!("127.0.0.1:{port}")])
            .args(args.iter().copied());
        let process = Process::start(spec, log_dir.join(format!("{name}.log")));
        HostProcess { process, metrics: format!("http://127.0.0.1:{port}") }
    }

    /// Waits for `/readyz` to answer 200 (caches synced, plugins loaded).
    pub fn wait_ready(&mut self) {
        let url = format!("{}/readyz", self.metrics);
        let name = self.process.name().to_string();
        let mut exited = None;
        eventually_within(&format!("{name}'s /readyz"), Duration::from_secs(90), || {
            if let Some(status) = self.process.exited() {
                exited = Some(status);
                return Some(());
            }
            http::get(&url).ok().map(|_| ())
        });
        if let Some(status) = exited {
            panic!("{name} exited ({status}) before it was ready:\n{}", self.process.log_tail(60));
        }
    }

    /// The metrics page.
    pub fn metrics(&self) -> String {
        http::get(&format!("{}/metrics", self.metrics)).unwrap_or_default()
    }

    /// The value of one sample line of `/metrics` (`name{labels}` exactly as printed), summed over matching lines.
    pub fn metric(&self, prefix: &str) -> f64 {
        self.metrics().lines().filter(|l| l.starts_with(prefix)).filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok()).sum()
    }

    pub fn process(&mut self) -> &mut Process {
        &mut self.process
    }

    /// SIGKILL (a crash or an evicted Pod).
    pub fn kill(&mut self) {
        self.process.kill();
    }

    /// The last lines of its log.
    pub fn log_tail(&self, lines: usize) -> String {
        self.process.log_tail(lines)
    }

    /// The whole log so far.
    pub fn log(&self) -> String {
        std::fs::read_to_string(self.process.log()).unwrap_or_default()
    }
}

impl Drop for HostProcess {
    fn drop(&mut self) {
        if std::thread::panicking() {
            eprintln!("----- {} ({}) -----\n{}", self.process.name(), self.process.log().display(), self.process.log_tail(60));
        }
        self.process.stop(Duration::from_secs(5));
    }
}
