//! The kubebuilder book's CronJob controller test, `tests/book` (Go, controller-runtime's client
//! through envtest's `UseExistingCluster`), against the host with cronjob.wasm on the embedded
//! cluster: with the simulated controllers (the default), and as the API server alone
//! (`--api-server-only`, as envtest). The Go test reads only `KUBECONFIG`. Where Go is absent
//! each test says so on stderr and records the skip (`e2e::record_skip`).

use e2e::{Host, go, record_skip, repo_file};
use std::path::Path;
use std::process::{Command, Stdio};

/// Starts the host with `host_args` and runs `go test` in `tests/book` against it; fails with
/// Go's output when it fails.
fn book_test_passes_against_a_host_with(host_args: &[&str], test: &str) {
    let Some(go) = go() else {
        record_skip(test, "Go is not installed (no `go` on PATH), so the kubebuilder book's controller test in tests/book did not run");
        return;
    };
    let host = Host::start(host_args);
    book_test_passes_against(&go, &host.kubeconfig);
}

/// `go test` in `tests/book` against the cluster `kubeconfig` names (any cluster where the
/// cronjob plugin runs); fails with Go's output when it fails.
pub fn book_test_passes_against(go: &Path, kubeconfig: &Path) {
    let out = Command::new(go)
        .current_dir(repo_file("tests/book"))
        .args(["test", "-count=1", "-timeout=5m", "-v", "./..."])
        .env("KUBECONFIG", kubeconfig)
        .env_remove("USE_EXISTING_CLUSTER")
        .env_remove("BOOK_TEST_NAMESPACE")
        .stdin(Stdio::null())
        .output()
        .expect("run go test");
    let text = String::from_utf8_lossy(&out.stdout).into_owned() + &String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "go test in tests/book failed ({}):\n{text}", out.status);
    assert!(text.contains("--- PASS: TestCronJobControllerKeepsStatusConditionsAndHistoryLimits"), "the Go test did not run:\n{text}");
}

#[test]
fn the_books_cronjob_test_passes_with_the_simulated_controllers() {
    book_test_passes_against_a_host_with(&[], "the_books_cronjob_test_passes_with_the_simulated_controllers");
}

#[test]
fn the_books_cronjob_test_passes_on_the_api_server_alone() {
    book_test_passes_against_a_host_with(&["--api-server-only"], "the_books_cronjob_test_passes_on_the_api_server_alone");
}
