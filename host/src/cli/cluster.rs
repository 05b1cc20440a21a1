//! `host cluster`: the embedded cluster alone (the API server and the
//! simulated garbage collector, scheduler + kubelet and Job runner), served on
//! loopback until SIGINT/SIGTERM, for a `host run` (or kubectl) in another
//! process. With `--data-dir` it comes back from its directory after a
//! restart, and `host run` processes can come and go against it. With
//! `--api-server-only` it is the API server alone, as envtest's: a test
//! cluster for controller tests (`USE_EXISTING_CLUSTER=true` and `KUBECONFIG`).

use std::path::PathBuf;

use super::Failure;
use super::embedded_args::EmbeddedArgs;

#[derive(Debug, clap::Args)]
// The embedded-cluster flags say `requires = "embedded"` for `host run`; here
// the cluster is all there is, so nothing is required.
#[command(mut_args = |a: clap::Arg| a.requires(clap::builder::Resettable::Reset))]
pub struct Args {
    /// Port of the API server on 127.0.0.1 (0 = a free port; give the
    /// printed one again to restart on the same address).
    #[arg(long, default_value_t = 0)]
    port: u16,
    /// Where to write the kubeconfig (default: a file under the temp dir).
    #[arg(long)]
    kubeconfig_out: Option<PathBuf>,
    #[command(flatten)]
    embedded_args: Box<EmbeddedArgs>,
}

pub fn run(args: &Args) -> Result<(), Failure> {
    let runtime = tokio::runtime::Builder::new_multi_thread().enable_all().build().map_err(|e| Failure::plugin(format!("tokio: {e}")))?;
    runtime.block_on(async {
        let path = args.kubeconfig_out.clone().unwrap_or_else(embedded_cluster::default_kubeconfig_path);
        let e = embedded_cluster::start(args.port, &path, &args.embedded_args.options())
            .await
            .map_err(|e| Failure::bad_input(format!("embedded API server: {e}")))?;
        println!("embedded API server at {}", e.handle.url());
        println!("kubeconfig written to {}", path.display());
        println!("export KUBECONFIG={}", path.display());
        super::run::shutdown_signal().await;
        e.cluster.stop().await;
        e.handle.shutdown().await;
        Ok(())
    })
}
