//! Differential fidelity of the embedded API server: the same requests
//! asked of the real kube-apiserver and of the embedded server, and what
//! they answer compared.
//!
//! - [`corpus`]: the requests, as data (kubectl invocations and raw requests
//!   shaped as the host's kube-rs client sends them).
//! - [`proxy`]: the recorder at the HTTP boundary that kubectl talks to.
//! - [`upstream`]: the servers it forwards to (HTTPS with a token, or HTTP).
//! - [`replay`]: the recorded sequence sent again to a fresh embedded server.
//! - [`normalize`]: the reviewed rules for what may legitimately differ.
//! - [`compare`]: the differences, by exchange and JSON path.
//! - [`allowed`]: the known differences with their causes, as data.
//! - [`report`]: figures, differences grouped by cause, stale entries.
//! - [`surface`]: the real server's API surface (version, discovery,
//!   OpenAPI, Table columns), captured into `apiserver/surface/`.

pub mod allowed;
pub mod compare;
pub mod corpus;
pub mod exchange;
pub mod normalize;
pub mod proxy;
pub mod record;
pub mod replay;
pub mod report;
pub mod surface;
pub mod upstream;

use std::path::PathBuf;

use exchange::Exchange;
use record::StepOutcome;

#[derive(Debug, thiserror::Error)]
pub enum RunError {
    #[error(transparent)]
    Upstream(#[from] upstream::UpstreamError),
    #[error("the control plane's kubeconfig has no token")]
    NoToken,
    #[error("{what}: {source}")]
    Io {
        what: String,
        #[source]
        source: std::io::Error,
    },
    #[error("capturing the API surface: {0}")]
    Surface(#[from] surface::SurfaceError),
    #[error("starting the embedded cluster: {0}")]
    Embedded(#[from] embedded_cluster::StartError),
}

fn io(what: &str) -> impl FnOnce(std::io::Error) -> RunError + '_ {
    move |source| RunError::Io { what: what.to_string(), source }
}

/// A run: what the real server answered, and the replay's answers, in order.
#[derive(Debug, serde::Serialize)]
pub struct Run {
    pub recorded: Vec<Exchange>,
    pub replayed: Vec<Exchange>,
    pub steps: Vec<StepOutcome>,
}

/// Runs `corpus` against `plane` through the recorder, then replays it on a
/// fresh embedded cluster (server and simulated cluster parts, as the host
/// starts them).
pub async fn run(plane: &real_cluster::ControlPlane, corpus: &[corpus::CorpusFile]) -> Result<Run, RunError> {
    let kubeconfig = std::fs::read_to_string(&plane.kubeconfig).map_err(io("reading the control plane's kubeconfig"))?;
    let token = kubeconfig.lines().find_map(|l| l.trim().strip_prefix("token: ")).ok_or(RunError::NoToken)?;
    let real = upstream::Upstream::https(&plane.server, &plane.pki.ca_pem, token.trim())?;
    let dir = tempfile::Builder::new().prefix("fidelity-").tempdir().map_err(io("creating a temporary directory"))?;
    let recorder = proxy::Recorder::start(real).await.map_err(io("starting the recorder"))?;
    let client = record::Client::new(&plane.binaries.path("kubectl"), &recorder, dir.path()).map_err(io("writing the recorder's kubeconfig"))?;
    let steps = client.run(&recorder, corpus).await;
    let recorded = recorder.exchanges();
    drop(recorder);

    let embedded = embedded_cluster::start(0, &dir.path().join("embedded-kubeconfig"), &embedded_cluster::Options::default()).await?;
    let target = upstream::Upstream::http(&embedded.handle.url())?;
    let replayed = replay::replay(&target, &recorded).await;
    Ok(Run { recorded, replayed, steps })
}

/// `target/fidelity/`: the report and the run's exchanges.
pub fn out_dir() -> PathBuf {
    real_cluster::binaries::target_dir().join("fidelity")
}

/// Writes `report.json`, `run.json` and `unexplained.yaml` into [`out_dir`]; returns the report's path.
pub fn write_files(run: &Run, report: &report::Report) -> Result<PathBuf, RunError> {
    let dir = out_dir();
    std::fs::create_dir_all(&dir).map_err(io("creating target/fidelity"))?;
    let run_json = serde_json::to_string_pretty(run).unwrap_or_default();
    std::fs::write(dir.join("run.json"), run_json).map_err(io("writing run.json"))?;
    let path = dir.join("report.json");
    std::fs::write(&path, serde_json::to_string_pretty(report).unwrap_or_default()).map_err(io("writing report.json"))?;
    // The unexplained differences as allowed-list entries, for a reviewer
    // who decides their cause (the cause is left for them to fill in).
    let entries: String = report
        .unexplained()
        .iter()
        .map(|d| format!("- exchange: {}\n  path: {}\n  cause: \n", yaml_string(&d.exchange), yaml_string(&d.path)))
        .collect();
    std::fs::write(dir.join("unexplained.yaml"), entries).map_err(io("writing unexplained.yaml"))?;
    Ok(path)
}

/// A YAML double-quoted string (JSON's escaping is valid YAML).
fn yaml_string(s: &str) -> String {
    serde_json::Value::String(s.to_string()).to_string()
}
