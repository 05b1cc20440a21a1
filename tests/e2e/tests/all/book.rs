//! The kubebuilder book's CronJob controller test, `tests/book` (Go, controller-runtime's client
//! through envtest's `UseExistingCluster`), against the host with cronjob.wasm on the embedded
//! cluster: with the simulated controllers (the default), and as the API server alone
//! (`--api-server-only`, as envtest). The Go test reads only `KUBECONFIG`. Where Go is absent
//! each test says so on stderr and records the skip (`e2e::record_skip`).

use e2e::{Host, book_test_passes_against, go, record_skip};

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

#[test]
fn the_books_cronjob_test_passes_with_the_simulated_controllers() {
    book_test_passes_against_a_host_with(&[], "the_books_cronjob_test_passes_with_the_simulated_controllers");
}

#[test]
fn the_books_cronjob_test_passes_on_the_api_server_alone() {
    book_test_passes_against_a_host_with(&["--api-server-only"], "the_books_cronjob_test_passes_on_the_api_server_alone");
}
