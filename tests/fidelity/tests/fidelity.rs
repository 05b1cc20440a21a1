//! The embedded API server answers the corpus as the real kube-apiserver
//! does, up to the reviewed normalization rules and the allowed differences;
//! and the allowed list, the corpus and apiserver/README.md agree.

use fidelity::allowed::{self, Allowed};
use fidelity::report::Report;

#[test]
fn the_corpus_and_the_allowed_list_parse() {
    let corpus = fidelity::corpus::load(&fidelity::corpus::default_dir()).expect("the corpus parses");
    assert!(corpus.iter().map(|f| f.steps.len()).sum::<usize>() > 0, "the corpus has steps");
    Allowed::load(&Allowed::default_path()).expect("the allowed list parses and names known causes");
}

/// The README's "Not faithful (yet)" list is generated from the causes.
#[test]
fn the_readme_lists_exactly_the_allowed_causes() {
    let allowed = Allowed::load(&Allowed::default_path()).expect("the allowed list");
    let readme = std::fs::read_to_string(allowed::readme_path()).expect("apiserver/README.md");
    let block = allowed::readme_block_in(&readme).expect("apiserver/README.md has the fidelity block marks");
    assert_eq!(block, allowed.readme_block(), "apiserver/README.md's generated list is stale: run `cargo xtask fidelity` (it rewrites it)");
}

/// Every cause is used by an entry (a cause no difference has is not faithful to nothing).
#[test]
fn every_cause_has_a_difference() {
    let allowed = Allowed::load(&Allowed::default_path()).expect("the allowed list");
    for cause in &allowed.causes {
        assert!(allowed.differences.iter().any(|e| e.cause == cause.name), "the cause {:?} names no difference", cause.name);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_embedded_server_answers_as_the_real_one() {
    let Some(plane) = real_cluster::ControlPlane::builder().start() else { return };
    let allowed = Allowed::load(&Allowed::default_path()).expect("the allowed list");
    let corpus = fidelity::corpus::load(&fidelity::corpus::default_dir()).expect("the corpus");
    let run = fidelity::run(&plane, &corpus).await.expect("the corpus runs and replays");
    let report = Report::build(&run.recorded, &run.replayed, &allowed);
    let path = fidelity::write_files(&run, &report).expect("the report is written");
    eprintln!("{}", report.summary(40));
    assert!(
        report.unexplained().is_empty() && report.stale.is_empty(),
        "{} differences are not on tests/fidelity/allowed.yaml and {} listed ones no longer occur (fix the embedded server, or list them with their cause); see {}",
        report.unexplained().len(),
        report.stale.len(),
        path.display()
    );
}

/// The API surface the embedded server serves (apiserver/surface/: version,
/// discovery, OpenAPI v3 documents, `/openapi/v2` as JSON and protobuf, Table
/// columns) is the real server's: a
/// fresh capture from the real control plane equals the committed files.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_committed_api_surface_is_the_real_servers() {
    let Some(plane) = real_cluster::ControlPlane::builder().pods_run(false).start() else { return };
    plane.wait_ready();
    let committed = fidelity::surface::Surface::load(&fidelity::surface::committed_dir()).expect("apiserver/surface loads");
    let captured = fidelity::surface::capture_plane(&plane).await.expect("the real server's surface is captured");
    let drift = committed.differences(&captured);
    assert!(drift.is_empty(), "apiserver/surface differs from the real server; run `cargo xtask api-surface` and review:\n{}", drift.join("\n"));
}
