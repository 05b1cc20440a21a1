//! `host run`'s leader election flags (controller-runtime's names and defaults).

use std::path::Path;
use std::time::Duration;

use super::parse_duration;
use operator_runtime::leader;
use operator_runtime::shard::{InvalidSharding, Sharding};

/// Where a Pod's service account namespace is mounted.
const IN_CLUSTER_NAMESPACE: &str = "/var/run/secrets/kubernetes.io/serviceaccount/namespace";

#[derive(Debug, clap::Args)]
pub struct LeaderElectionArgs {
    /// Run reconcile workers only while holding a coordination.k8s.io Lease,
    /// so that one of several replicas reconciles (the others keep warm caches).
    #[arg(long)]
    pub leader_elect: bool,
    /// Namespace of the Lease (default: the Pod's namespace in a cluster, else `default`).
    #[arg(long)]
    pub leader_election_namespace: Option<String>,
    /// Name of the Lease.
    #[arg(long, default_value = "operator-host")]
    pub leader_election_id: String,
    /// How long standbys wait after the Lease last changed before taking it.
    #[arg(long, default_value = "15s", value_parser = parse_duration)]
    pub leader_election_lease_duration: Duration,
    /// How long the leader retries a failing renewal before it stops leading (and exits).
    #[arg(long, default_value = "10s", value_parser = parse_duration)]
    pub leader_election_renew_deadline: Duration,
    /// Time between acquire attempts and between renewals.
    #[arg(long, default_value = "2s", value_parser = parse_duration)]
    pub leader_election_retry_period: Duration,
    /// Shard the parents across all replicas instead of one leading: each
    /// replica reconciles and caches its share (a consistent-hash ring over
    /// the replicas' shard Leases, named by --leader-election-id), and the
    /// elected leader assigns and moves parents as replicas come and go.
    #[arg(long, requires = "leader_elect")]
    pub sharded: bool,
}

impl LeaderElectionArgs {
    /// The election settings with a fresh identity, or `None` without `--leader-elect`.
    pub fn config(&self) -> Result<Option<leader::Config>, leader::Error> {
        if !self.leader_elect {
            return Ok(None);
        }
        let config = leader::Config {
            namespace: self.namespace(),
            name: self.leader_election_id.clone(),
            identity: leader::default_identity(),
            lease_duration: self.leader_election_lease_duration,
            renew_deadline: self.leader_election_renew_deadline,
            retry_period: self.leader_election_retry_period,
        };
        config.validate()?;
        Ok(Some(config))
    }

    /// With `--sharded`: this process's shard (named after its election identity).
    pub fn sharding(&self, election: Option<&leader::Config>) -> Result<Option<Sharding>, InvalidSharding> {
        let Some(config) = election.filter(|_| self.sharded) else { return Ok(None) };
        Sharding::new(&config.name, &config.identity, &config.namespace, config.lease_duration, config.renew_deadline, config.retry_period).map(Some)
    }

    /// The flag, else the in-cluster namespace, else `default`.
    pub fn namespace(&self) -> String {
        self.leader_election_namespace
            .clone()
            .unwrap_or_else(|| in_cluster_namespace(Path::new(IN_CLUSTER_NAMESPACE)).unwrap_or_else(|| "default".into()))
    }
}

fn in_cluster_namespace(path: &Path) -> Option<String> {
    std::fs::read_to_string(path).ok().map(|s| s.trim().to_string()).filter(|s| !s.is_empty())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_in_cluster_namespace_file_is_read_trimmed() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("namespace");
        std::fs::write(&file, "operator-host-system\n").unwrap();
        assert_eq!(in_cluster_namespace(&file).as_deref(), Some("operator-host-system"));
        assert_eq!(in_cluster_namespace(&dir.path().join("missing")), None);
    }
}
