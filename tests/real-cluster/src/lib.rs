//! A real Kubernetes control plane for the host's tests, built from
//! upstream's Go modules by `cargo xtask real-cluster` (pinned in
//! `tests/real-cluster/go/*/go.mod` and `go.sum`) and started on loopback.
//!
//! - [`control_plane`]: etcd, kube-apiserver, kube-controller-manager,
//!   kube-scheduler and kwok, started with free ports and stopped on drop;
//!   faults only a real server has (restarts, etcd compaction).
//! - [`storage`]: a default StorageClass and an external provisioner, so
//!   claims (a StatefulSet's `volumeClaimTemplates`) get volumes.
//! - [`host`]: the `host` binary run against it as a user runs it.
//! - kubectl: the real kubectl of the same release, run through `operator_test_kit::kubectl`.
//! - [`binaries`]: where the binaries are, and the loud skip without Go.
//! - [`process`]: child processes that cannot outlive the test.
//!
//! ```no_run
//! let Some(cluster) = real_cluster::ControlPlane::builder().start() else { return };
//! cluster.admin().ok(&["get", "--raw", "/readyz?verbose"]);
//! ```

pub mod binaries;
pub mod control_plane;
pub mod host;
pub mod http;
pub mod pki;
pub mod process;
pub mod storage;

pub use control_plane::{Builder, ControlPlane};
pub use host::HostProcess;
pub use operator_test_kit::Kubectl;
pub use serde_json::{Value, json};

use std::time::Duration;

/// How long an expectation may take by default.
pub const WAIT: Duration = Duration::from_secs(90);

/// A port free on 127.0.0.1 right now (bound, then released, as envtest does).
pub fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0").and_then(|l| l.local_addr()).map(|a| a.port()).expect("bind a free loopback port")
}

/// Polls `f` until it returns `Some`, for up to [`WAIT`].
pub fn eventually<T>(what: &str, f: impl FnMut() -> Option<T>) -> T {
    operator_test_kit::wait::blocking(what, WAIT, f)
}

/// Polls `f` until it returns `Some`, for up to `limit`.
pub use operator_test_kit::wait::blocking as eventually_within;

/// A file built by `cargo xtask build`, e.g. `plugins/cronjob.wasm`, `release/host`.
pub fn built(relative: &str) -> std::path::PathBuf {
    let path = binaries::target_dir().join(relative);
    assert!(path.exists(), "{} is missing: run `cargo xtask build` first", path.display());
    path
}

/// A repository file, e.g. `plugins/cronjob/samples/batch_v1_cronjob.yaml`.
pub fn repo_file(relative: &str) -> std::path::PathBuf {
    binaries::workspace_root().join(relative)
}
