//! `host run` as a separate process against an API server served by this
//! process on loopback, so the host's own RSS and start-up can be measured.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use apiserver::{ApiServer, ServerHandle};

/// An API server on loopback with a kubeconfig for child processes.
pub struct Cluster {
    pub server: ApiServer,
    pub handle: ServerHandle,
    pub kubeconfig: PathBuf,
    _dir: tempfile::TempDir,
}

impl Cluster {
    pub async fn start() -> anyhow::Result<Cluster> {
        let dir = tempfile::tempdir()?;
        let server = ApiServer::new();
        let handle = server.serve_on(([127, 0, 0, 1], 0).into()).await?;
        let kubeconfig = dir.path().join("kubeconfig");
        handle.write_kubeconfig(&kubeconfig)?;
        Ok(Cluster { server, handle, kubeconfig, _dir: dir })
    }

    /// A client that talks HTTP to the server, as the host does.
    pub async fn http_client(&self) -> anyhow::Result<kube::Client> {
        let kubeconfig = kube::config::Kubeconfig::read_from(&self.kubeconfig)?;
        let config = kube::Config::from_custom_kubeconfig(kubeconfig, &Default::default()).await?;
        Ok(kube::Client::try_from(config)?)
    }

    pub async fn stop(self) {
        self.handle.shutdown().await;
    }
}

/// A running `host run`; killed when dropped.
pub struct HostProcess {
    child: Child,
    pub metrics_port: u16,
    pub started: Instant,
}

impl HostProcess {
    /// Starts `host run <args>` against `cluster`, with /readyz on a free
    /// port. Output goes to `log`.
    pub fn spawn(host: &Path, cluster: &Cluster, args: &[String], log: &Path) -> anyhow::Result<HostProcess> {
        let metrics_port = free_port()?;
        let out = std::fs::File::create(log)?;
        let started = Instant::now();
        let child = Command::new(host)
            .arg("run")
            .args(args)
            .arg("--metrics-addr")
            .arg(format!("127.0.0.1:{metrics_port}"))
            .env("KUBECONFIG", &cluster.kubeconfig)
            .env("RUST_LOG", "warn")
            .stdin(Stdio::null())
            .stdout(out.try_clone()?)
            .stderr(out)
            .spawn()
            .map_err(|e| anyhow::anyhow!("cannot start {}: {e}", host.display()))?;
        Ok(HostProcess { child, metrics_port, started })
    }

    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// Waits until /readyz answers 200 (every cache synced).
    pub async fn wait_ready(&mut self, timeout: Duration) -> anyhow::Result<()> {
        let deadline = Instant::now() + timeout;
        loop {
            if let Some(status) = self.child.try_wait()? {
                anyhow::bail!("host exited with {status} before it was ready");
            }
            if readyz(self.metrics_port).await {
                return Ok(());
            }
            anyhow::ensure!(Instant::now() < deadline, "host not ready after {timeout:?}");
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }

    /// Resident set size in KiB (VmRSS of `/proc/<pid>/status`).
    pub fn rss_kib(&self) -> anyhow::Result<u64> {
        rss_kib(self.pid())
    }
}

impl Drop for HostProcess {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

pub fn rss_kib(pid: u32) -> anyhow::Result<u64> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status"))?;
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .ok_or_else(|| anyhow::anyhow!("no VmRSS in /proc/{pid}/status"))
}

fn free_port() -> std::io::Result<u16> {
    Ok(std::net::TcpListener::bind(("127.0.0.1", 0))?.local_addr()?.port())
}

async fn readyz(port: u16) -> bool {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let Ok(mut s) = tokio::net::TcpStream::connect(("127.0.0.1", port)).await else {
        return false;
    };
    if s.write_all(b"GET /readyz HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n").await.is_err() {
        return false;
    }
    let mut buf = Vec::new();
    let _ = s.read_to_end(&mut buf).await;
    buf.starts_with(b"HTTP/1.1 200")
}
