//! `host run --sharded`: the replica's shard Lease, held while the host
//! runs and released when it stops, and the sharder on the elected leader.

use std::sync::Arc;

use operator_runtime::manager::Running;
use operator_runtime::metrics::Metrics;
use operator_runtime::shard::Sharding;
use operator_runtime::shard::lease::{Lost, ShardLease};
use operator_runtime::shard::sharder::Sharder;
use tokio::sync::watch;
use tokio::task::JoinHandle;

use super::Failure;

/// This replica's membership of the ring.
pub struct Member {
    stop: watch::Sender<bool>,
    hold: Option<JoinHandle<Result<(), Lost>>>,
    sharder: Option<JoinHandle<()>>,
}

impl Member {
    /// Creates the shard Lease and keeps renewing it.
    pub async fn join(client: &kube::Client, sharding: &Sharding) -> Result<Member, Failure> {
        let lease = ShardLease::create(client.clone(), sharding.clone()).await.map_err(|e| Failure::plugin(operator_runtime::error_chain(&e)))?;
        println!("shard {} of ring {}", sharding.shard, sharding.ring);
        let (stop, stopped) = watch::channel(false);
        let hold = tokio::spawn(async move { lease.hold(stopped).await });
        Ok(Member { stop, hold: Some(hold), sharder: None })
    }

    /// Runs the sharder whenever `leading` is true.
    pub fn start_sharder(&mut self, sharder: Sharder, leading: watch::Receiver<bool>) {
        self.sharder = Some(tokio::spawn(sharder.run(leading)));
    }

    /// Resolves when the shard is lost (pending while it is held).
    pub async fn lost(&mut self) -> Lost {
        let Some(hold) = self.hold.as_mut() else { return std::future::pending().await };
        let result = hold.await;
        self.hold = None;
        match result {
            Ok(Err(lost)) => lost,
            _ => std::future::pending().await,
        }
    }

    /// Stops the sharder (if it runs here) and waits until it has stopped,
    /// so none of its writes is still in flight.
    pub async fn stop_sharder(&mut self) {
        if let Some(s) = self.sharder.take() {
            s.abort();
            let _ = s.await;
        }
    }

    /// Stops the sharder and releases the Lease (the sharder then moves this
    /// shard's parents at once).
    pub async fn leave(mut self) {
        self.stop_sharder().await;
        let _ = self.stop.send(true);
        if let Some(hold) = self.hold.take() {
            let _ = hold.await;
        }
    }
}

/// The sharder for `sharding`'s ring, over the plugins `manager` runs.
pub fn sharder(
    client: &kube::Client,
    sharding: &Sharding,
    identity: &str,
    manager: &Running,
    namespaces: &[String],
    metrics: &Arc<Metrics>,
) -> Sharder {
    Sharder::new(client.clone(), sharding.clone(), identity.to_owned(), manager.clone(), namespaces.to_vec(), metrics.clone())
}
