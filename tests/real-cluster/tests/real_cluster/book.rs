//! The kubebuilder book's CronJob controller test (`tests/book`, Go, with
//! controller-runtime's client through envtest's `UseExistingCluster`)
//! against the host with cronjob.wasm on the real control plane. The test
//! plays the Job controller itself (it writes each Job's status, as envtest,
//! which runs no controllers, lets it), so kube-controller-manager runs
//! without its Job controller: with it, the Job the test says is running
//! two Pods really runs them (kwok), completes, and joins the successful
//! history the test counts. The Go test reads only `KUBECONFIG`.

use std::process::{Command, Stdio};

use real_cluster::{ControlPlane, built, repo_file};

use crate::common::{CRONJOB_CRD, wait_for_crds};

#[test]
fn the_books_cronjob_test_passes_against_the_host_on_a_real_control_plane() {
    let Some(cluster) = ControlPlane::builder().without_controller("job-controller").start() else { return };
    let cronjob = built("plugins/cronjob.wasm").display().to_string();
    let mut host = real_cluster::HostProcess::start("host", &cluster.kubeconfig, &cluster.dir().join("logs"), &["--plugin", &cronjob]);
    host.wait_ready();
    wait_for_crds(&cluster.admin(), &[CRONJOB_CRD]);
    // The control plane was built with Go, so `go` is on PATH here.
    let out = Command::new("go")
        .current_dir(repo_file("tests/book"))
        .args(["test", "-count=1", "-timeout=5m", "-v", "./..."])
        .env("KUBECONFIG", &cluster.kubeconfig)
        .env_remove("USE_EXISTING_CLUSTER")
        .env_remove("BOOK_TEST_NAMESPACE")
        .stdin(Stdio::null())
        .output()
        .expect("run go test");
    let text = String::from_utf8_lossy(&out.stdout).into_owned() + &String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "go test in tests/book failed ({}):\n{text}", out.status);
    assert!(text.contains("--- PASS: TestCronJobControllerKeepsStatusConditionsAndHistoryLimits"), "the Go test did not run:\n{text}");
}
