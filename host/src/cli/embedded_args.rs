//! Flags of `host run --embedded` for the embedded cluster: where its store lives, which
//! faults its API server injects, and what the simulated cluster parts do
//! (`simulated_cluster::ClusterConfig`).

use std::path::PathBuf;
use std::time::Duration;

use apiserver::FaultSpec;
use simulated_cluster::ClusterConfig;

use super::parse_duration;
use embedded_cluster::Options;

#[derive(Debug, Clone, clap::Args)]
#[command(next_help_heading = "Embedded cluster (with --embedded)")]
pub struct EmbeddedArgs {
    /// Keep the embedded cluster's objects in DIR/store.redb: every acknowledged write is
    /// fsynced first, and a restart on the same DIR continues where it stopped.
    #[arg(long, value_name = "DIR", requires = "embedded")]
    pub data_dir: Option<PathBuf>,
    /// Inject faults into the embedded API server; repeatable, or `;`-separated. E.g.
    /// `500:share=0.05`, `409:share=0.1,verb=update`, `drop-watch:every=30s`, `expire-watch`,
    /// `latency:50ms,resource=pods` (see apiserver/README.md). At run time: /debug/faults.
    #[arg(long = "fault", value_name = "SPEC", env = "OPERATOR_HOST_FAULTS", value_delimiter = ';', value_parser = parse_fault)]
    pub faults: Vec<FaultSpec>,
    /// Seed of the share-based faults (same seed, same failures for the same requests).
    #[arg(long, default_value_t = 0, env = "OPERATOR_HOST_FAULT_SEED")]
    pub fault_seed: u64,
    /// Fake Nodes of the simulated cluster (0 = no scheduler or kubelet: Pods stay Pending).
    #[arg(long, default_value_t = 1, requires = "embedded")]
    pub sim_nodes: usize,
    /// How long a Pod runs before it is Ready (per Pod: annotation sim.operator-host.dev/ready-after).
    #[arg(long, default_value = "1s", value_parser = parse_duration, requires = "embedded")]
    pub sim_ready_after: Duration,
    /// How long a Job runs before it completes (per Job: annotation sim.operator-host.dev/duration).
    #[arg(long, default_value = "2s", value_parser = parse_duration, requires = "embedded")]
    pub sim_job_duration: Duration,
    /// Grace period of a Pod deletion that gives none (whole seconds; 0 deletes at once).
    #[arg(long, default_value = "1s", value_parser = parse_duration, requires = "embedded")]
    pub sim_pod_grace_period: Duration,
    /// Full re-scan interval of the simulated controllers even when nothing changed.
    #[arg(long, default_value = "30s", value_parser = parse_duration, requires = "embedded")]
    pub sim_resync: Duration,
    /// Run without the garbage collector (ownerReferences are not followed).
    #[arg(long, requires = "embedded")]
    pub no_sim_gc: bool,
    /// Run without the Job runner (Jobs never start or finish).
    #[arg(long, requires = "embedded")]
    pub no_sim_jobs: bool,
    /// Run without the ReplicaSet and Deployment controllers (Deployments get no Pods).
    #[arg(long, requires = "embedded")]
    pub no_sim_deployments: bool,
    /// Serve the API server alone, as envtest does: no Nodes, scheduler or kubelet, Job
    /// runner, garbage collector, ReplicaSet or Deployment controller, and none of the
    /// controller manager's work the server otherwise does (no `default` ServiceAccount or
    /// `kube-root-ca.crt` in new namespaces, no ClusterRole aggregation, deleted namespaces
    /// stay Terminating); the API server's own Event expiry stays. Only the operators of
    /// `host run` act on objects.
    #[arg(long, requires = "embedded", conflicts_with_all = ["sim_nodes", "no_sim_gc", "no_sim_jobs", "no_sim_deployments"])]
    pub api_server_only: bool,
}

fn parse_fault(text: &str) -> Result<FaultSpec, String> {
    text.parse::<FaultSpec>().map_err(|e| e.to_string())
}

impl EmbeddedArgs {
    /// What `embedded_cluster::start` needs.
    // `..default()` keeps this compiling when ClusterConfig gains fields.
    #[allow(clippy::needless_update)]
    pub fn options(&self) -> Options {
        Options {
            data_dir: self.data_dir.clone(),
            faults: self.faults.clone(),
            fault_seed: self.fault_seed,
            cluster: ClusterConfig {
                nodes: self.sim_nodes,
                ready_after: self.sim_ready_after,
                job_duration: self.sim_job_duration,
                pod_grace_period: self.sim_pod_grace_period,
                resync_interval: self.sim_resync,
                garbage_collector: !self.no_sim_gc,
                jobs: !self.no_sim_jobs,
                deployments: !self.no_sim_deployments,
                ..ClusterConfig::default()
            },
            api_server_only: self.api_server_only,
        }
    }
}
