//! `host run`: plugins as controllers against the kubeconfig's cluster, or
//! with `--embedded` against an in-process API server served on loopback.
//! SIGINT/SIGTERM drain in-flight reconciles and exit 0.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use super::{Failure, SandboxArgs, parse_duration};
use crate::clock::SystemClock;
use crate::controller::{self, queue::Backoff};
use crate::manager::{self, Options};
use crate::metrics::Metrics;

#[derive(Debug, clap::Args)]
pub struct Args {
    /// A plugin component (.wasm); repeat for several.
    #[arg(long = "plugin", required = true)]
    plugins: Vec<PathBuf>,
    /// Run against an embedded API server instead of the kubeconfig's cluster.
    #[arg(long)]
    embedded: bool,
    /// Port of the embedded API server on 127.0.0.1 (0 = a free port).
    #[arg(long, default_value_t = 0, requires = "embedded")]
    embedded_port: u16,
    /// Where to write the embedded server's kubeconfig (default: a file under the temp dir).
    #[arg(long, requires = "embedded")]
    kubeconfig_out: Option<PathBuf>,
    /// Watch only this namespace; repeat for several (default: all).
    #[arg(long = "namespace", short = 'n')]
    namespaces: Vec<String>,
    /// Label selector for parent objects, e.g. `team=a`.
    #[arg(long, short = 'l')]
    selector: Option<String>,
    /// Reconcile every parent at least this often.
    #[arg(long, default_value = "10m", value_parser = parse_duration)]
    resync: Duration,
    /// Parents reconciled at once, per plugin.
    #[arg(long, default_value_t = 4, value_parser = clap::value_parser!(u16).range(1..=1024))]
    concurrency: u16,
    /// Cap of the per-object error backoff (starts at 5ms, doubles).
    #[arg(long, default_value = "6h", value_parser = parse_duration)]
    max_backoff: Duration,
    /// Address for /metrics, /healthz and /readyz; `0` disables.
    #[arg(long, default_value = "127.0.0.1:8080")]
    metrics_addr: String,
    /// Serve each plugin's default/validate as HTTPS admission webhooks on
    /// this address (for a real cluster), e.g. `0.0.0.0:9443`. Off by default.
    #[arg(long)]
    webhook_addr: Option<SocketAddr>,
    /// Directory holding the webhook's `tls.crt` and `tls.key`.
    #[arg(long, default_value = "/tmp/k8s-webhook-server/serving-certs")]
    webhook_cert_dir: PathBuf,
    /// How long shutdown waits for in-flight reconciles.
    #[arg(long, default_value = "30s", value_parser = parse_duration)]
    shutdown_grace: Duration,
    #[command(flatten)]
    embedded_args: Box<super::embedded_args::EmbeddedArgs>,
}

pub fn run(sandbox: &SandboxArgs, args: &Args) -> Result<(), Failure> {
    if !args.embedded && !args.embedded_args.faults.is_empty() {
        return Err(Failure::bad_input("--fault (or OPERATOR_HOST_FAULTS) needs --embedded: faults are injected by the embedded API server"));
    }
    let metrics_addr: Option<SocketAddr> = match args.metrics_addr.as_str() {
        "0" | "" => None,
        a => Some(a.parse().map_err(|e| Failure::bad_input(format!("--metrics-addr {a}: {e}")))?),
    };
    let sandbox = sandbox.sandbox().map_err(|e| Failure::bad_input(format!("{e:#}")))?;
    let mut plugins = Vec::new();
    for path in &args.plugins {
        let p = sandbox.load_file(path).map_err(|e| Failure::plugin(crate::error_chain(&e)))?;
        tracing::info!(plugin = p.name(), parent = %p.manifest().parent.kind, "loaded");
        plugins.push(p);
    }
    manager::check_parents(&plugins).map_err(|e| Failure { code: e.exit_code(), message: e.to_string() })?;
    let runtime = tokio::runtime::Builder::new_multi_thread().enable_all().build().map_err(|e| Failure::plugin(format!("tokio: {e}")))?;
    runtime.block_on(run_async(args, plugins, metrics_addr))
}

async fn run_async(args: &Args, plugins: Vec<crate::sandbox::LoadedPlugin>, metrics_addr: Option<SocketAddr>) -> Result<(), Failure> {
    let mut embedded = None;
    let client = if args.embedded {
        let path = args.kubeconfig_out.clone().unwrap_or_else(crate::embedded::default_kubeconfig_path);
        let e = crate::embedded::start(args.embedded_port, &path, &args.embedded_args.options())
            .await
            .map_err(|e| Failure::bad_input(format!("embedded API server: {e}")))?;
        crate::embedded::register_admission(&e.server, &plugins);
        println!("embedded API server at {}", e.handle.url());
        println!("kubeconfig written to {}", path.display());
        println!("export KUBECONFIG={}", path.display());
        let client = e.server.kube_client();
        embedded = Some(e);
        client
    } else {
        kube::Client::try_default().await.map_err(|e| Failure::plugin(format!("cannot reach the cluster: {}", crate::error_chain(&e))))?
    };

    let metrics = Arc::new(Metrics::new());
    let (stop_tx, stop_rx) = tokio::sync::watch::channel(false);
    if let Some(addr) = metrics_addr {
        let mut rx = stop_rx.clone();
        let (bound, _task) = crate::metrics::serve(addr, metrics.clone(), async move {
            let _ = rx.wait_for(|s| *s).await;
        })
        .await
        .map_err(|e| Failure::bad_input(format!("--metrics-addr {addr}: {e}")))?;
        println!("metrics at http://{bound}/metrics");
    }
    if let Some(addr) = args.webhook_addr {
        let mut rx = stop_rx.clone();
        let (bound, _task) = crate::webhook::serve(addr, &args.webhook_cert_dir, plugins.clone(), async move {
            let _ = rx.wait_for(|s| *s).await;
        })
        .await
        .map_err(|e| Failure::bad_input(format!("--webhook-addr {addr}: {}", crate::error_chain(&e))))?;
        println!("admission webhooks at https://{bound}");
    }
    let options = Options {
        namespaces: args.namespaces.clone(),
        selector: args.selector.clone(),
        resync: args.resync,
        controller: controller::Config {
            concurrency: usize::from(args.concurrency),
            backoff: Backoff { max: args.max_backoff, ..Backoff::default() },
            ..controller::Config::default()
        },
        ..Options::default()
    };
    let running = tokio::select! {
        r = manager::start(client, plugins, options, Arc::new(SystemClock), metrics) => {
            r.map_err(|e| Failure { code: e.exit_code(), message: crate::error_chain(&e) })?
        }
        _ = shutdown_signal() => return Ok(()),
    };
    shutdown_signal().await;
    tracing::info!("shutting down: draining in-flight reconciles");
    running.shutdown(args.shutdown_grace).await;
    let _ = stop_tx.send(true);
    if let Some(e) = embedded {
        e.handle.shutdown().await;
    }
    Ok(())
}

async fn shutdown_signal() {
    #[cfg(unix)]
    {
        let mut term = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()).expect("SIGTERM handler");
        tokio::select! {
            _ = tokio::signal::ctrl_c() => {}
            _ = term.recv() => {}
        }
    }
    #[cfg(not(unix))]
    let _ = tokio::signal::ctrl_c().await;
}
