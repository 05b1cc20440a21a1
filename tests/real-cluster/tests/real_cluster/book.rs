//! The kubebuilder book's CronJob controller test (`tests/book`, Go, with
//! controller-runtime's client through envtest's `UseExistingCluster`)
//! against the host with cronjob.wasm on the real control plane. The test
//! plays the Job controller itself (it writes each Job's status, as envtest,
//! which runs no controllers, lets it), so kube-controller-manager runs
//! without its Job controller: with it, the Job the test says is running
//! two Pods really runs them (kwok), completes, and joins the successful
//! history the test counts. The Go test reads only `KUBECONFIG`.

use real_cluster::{ControlPlane, built};

use crate::common::{CRONJOB_CRD, wait_for_crds};

#[test]
fn the_books_cronjob_test_passes_against_the_host_on_a_real_control_plane() {
    let Some(cluster) = ControlPlane::builder().without_controller("job-controller").start() else { return };
    let cronjob = built("plugins/cronjob.wasm").display().to_string();
    let mut host = real_cluster::HostProcess::start("host", &cluster.kubeconfig, &cluster.dir().join("logs"), &["--plugin", &cronjob]);
    host.wait_ready();
    wait_for_crds(&cluster.admin(), &[CRONJOB_CRD]);
    // The control plane was built with Go, so `go` is on PATH here.
    e2e::book_test_passes_against(std::path::Path::new("go"), &cluster.kubeconfig);
}
