//! The simulated cluster's integration tests, one binary (as the API server's `tests/all`).
//!
//! They drive the controllers through the API server exactly as its own tests drive it, so they
//! share its helpers (raw requests in-process, the real kubectl over HTTP) rather than copy them.

#[path = "../../../apiserver/tests/common/mod.rs"]
mod common;

mod cluster;
mod deployments;
mod kubelet;
mod persist;
mod statefulsets;

use common::kubectl::Cluster;
use simulated_cluster::{ClusterConfig, ClusterHandle};

/// A server over HTTP (kubectl's view) with the simulated cluster running next to it; dropping
/// it stops the controllers.
pub struct Simulated {
    kubectl: Cluster,
    _controllers: ClusterHandle,
}

impl std::ops::Deref for Simulated {
    type Target = Cluster;
    fn deref(&self) -> &Cluster {
        &self.kubectl
    }
}

/// The API server with the simulated cluster, served over HTTP.
pub async fn simulated(config: ClusterConfig) -> Simulated {
    let server = apiserver::ApiServer::new();
    let controllers = simulated_cluster::start(&server, config);
    Simulated { kubectl: Cluster::serve(server).await, _controllers: controllers }
}
