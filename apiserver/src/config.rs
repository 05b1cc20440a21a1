//! Server tunables. Every default is chosen to match a real kube-apiserver where it matters.

use crate::clock::SharedClock;
use std::time::Duration;

/// Server tunables. Every default is chosen to match a real kube-apiserver where it matters.
#[derive(Clone)]
pub struct Config {
    /// Events retained for watch resumption (default 10 000; older resourceVersions get 410).
    pub event_window: usize,
    /// Interval between BOOKMARK events on watches that asked for them (default 60 s, roughly
    /// upstream's cadence).
    pub bookmark_interval: Duration,
    /// Upper bound on a watch that gave no `timeoutSeconds` (default 30 min, like
    /// `--min-request-timeout` × 2 upstream).
    pub max_watch_timeout: Duration,
    /// Maintain `metadata.managedFields` (default true).
    pub managed_fields: bool,
    /// Time source (default: system clock).
    pub clock: SharedClock,
    /// Address to bind for HTTP serving; port 0 picks a free one (default 127.0.0.1:0).
    pub bind: std::net::SocketAddr,
    /// Answer aggregated discovery (`apidiscovery.k8s.io/v2`) when asked (default true, as upstream).
    pub aggregated_discovery: bool,
    /// Do what kube-controller-manager does besides the server (default true, a real
    /// cluster): each namespace gets its `default` ServiceAccount and `kube-root-ca.crt`
    /// ConfigMap, ClusterRoles with an `aggregationRule` are filled, and a deleted namespace's
    /// contents are deleted before it goes (the namespace controller). false is envtest's
    /// kube-apiserver alone (no controller manager, ServiceAccount admission disabled):
    /// nothing a client did not write appears, and a deleted namespace stays `Terminating`.
    pub controllers: bool,
}

impl Default for Config {
    fn default() -> Self {
        Self {
            event_window: 10_000,
            bookmark_interval: Duration::from_secs(60),
            max_watch_timeout: Duration::from_secs(1800),
            managed_fields: true,
            clock: std::sync::Arc::new(crate::clock::SystemClock),
            bind: ([127, 0, 0, 1], 0).into(),
            aggregated_discovery: true,
            controllers: true,
        }
    }
}

impl std::fmt::Debug for Config {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Config")
            .field("event_window", &self.event_window)
            .field("bookmark_interval", &self.bookmark_interval)
            .field("bind", &self.bind)
            .field("controllers", &self.controllers)
            .finish()
    }
}
