//! Runs the corpus through the recorder: each kubectl step as a process
//! whose kubeconfig names the recorder, each raw request sent to it.

use std::path::{Path, PathBuf};
use std::time::Duration;

use bytes::Bytes;
use http_body_util::{BodyExt, Full};

use crate::corpus::{CorpusFile, RawRequest, Step};
use crate::proxy::Recorder;
use crate::upstream::Upstream;

/// How long one kubectl step may take before it is stopped (and reported).
const STEP_LIMIT: Duration = Duration::from_secs(90);

/// What a kubectl step printed, for the report's log of the run.
#[derive(Debug, Clone, serde::Serialize)]
pub struct StepOutcome {
    pub step: String,
    pub command: String,
    pub exit: Option<i32>,
    pub stderr: String,
}

/// A kubectl of the real control plane's release aimed at a recorder.
pub struct Client {
    kubectl: PathBuf,
    kubeconfig: PathBuf,
    cache: PathBuf,
    direct: Upstream,
}

impl Client {
    /// Writes a kubeconfig for `recorder` into `dir`, with kubectl's
    /// discovery cache beside it (fresh, so every run asks the same).
    pub fn new(kubectl: &Path, recorder: &Recorder, dir: &Path) -> std::io::Result<Client> {
        let kubeconfig = dir.join("kubeconfig");
        std::fs::write(
            &kubeconfig,
            format!(
                "apiVersion: v1\nkind: Config\nclusters:\n- name: fidelity\n  cluster:\n    server: {}\nusers:\n- name: fidelity\n  user: {{}}\ncontexts:\n- name: fidelity\n  context:\n    cluster: fidelity\n    user: fidelity\n    namespace: default\ncurrent-context: fidelity\n",
                recorder.url()
            ),
        )?;
        let direct = Upstream::http(recorder.url()).map_err(std::io::Error::other)?;
        Ok(Client { kubectl: kubectl.to_path_buf(), kubeconfig, cache: dir.join("cache"), direct })
    }

    /// Runs every step of every file in order.
    pub async fn run(&self, recorder: &Recorder, corpus: &[CorpusFile]) -> Vec<StepOutcome> {
        let mut outcomes = Vec::new();
        for file in corpus {
            for (i, step) in file.steps.iter().enumerate() {
                let label = format!("{}#{i}", file.name);
                let asks_for_discovery = step.request.is_some()
                    || step
                        .kubectl
                        .as_ref()
                        .is_some_and(|a| a.iter().any(|x| x == "--raw" || x.contains("customresourcedefinition") || x.starts_with("crd")));
                recorder.set_step(&label, asks_for_discovery);
                outcomes.push(self.step(&label, step).await);
            }
        }
        outcomes
    }

    async fn step(&self, label: &str, step: &Step) -> StepOutcome {
        let limit = step.cut_after_seconds.map_or(STEP_LIMIT, Duration::from_secs_f64);
        let outcome = |exit, stderr| StepOutcome { step: label.to_string(), command: step.describe(), exit, stderr };
        match (&step.kubectl, &step.request) {
            (Some(args), _) => {
                let (exit, stderr) = self.kubectl(args, step.stdin.as_deref(), limit).await;
                outcome(exit, stderr)
            }
            (None, Some(request)) => match self.raw(request, limit).await {
                Ok(status) => outcome(Some(i32::from(status)), String::new()),
                Err(e) => outcome(None, e),
            },
            (None, None) => outcome(None, "empty step".to_string()),
        }
    }

    async fn kubectl(&self, args: &[String], stdin: Option<&str>, limit: Duration) -> (Option<i32>, String) {
        use tokio::io::AsyncWriteExt;
        let mut command = tokio::process::Command::new(&self.kubectl);
        command
            .arg("--kubeconfig")
            .arg(&self.kubeconfig)
            .arg("--cache-dir")
            .arg(&self.cache)
            .args(args)
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::piped())
            .kill_on_drop(true);
        let mut child = match command.spawn() {
            Ok(c) => c,
            Err(e) => return (None, format!("starting {}: {e}", self.kubectl.display())),
        };
        if let Some(mut input) = child.stdin.take() {
            let _ = input.write_all(stdin.unwrap_or("").as_bytes()).await;
        }
        let mut stderr = child.stderr.take();
        let read_stderr = async {
            let mut text = String::new();
            if let Some(s) = stderr.as_mut() {
                use tokio::io::AsyncReadExt;
                let _ = s.read_to_string(&mut text).await;
            }
            text
        };
        let waited = tokio::time::timeout(limit, async { tokio::join!(child.wait(), read_stderr) }).await;
        match waited {
            Ok((status, text)) => (status.ok().and_then(|s| s.code()), text),
            Err(_) => {
                let _ = child.kill().await;
                (None, format!("stopped after {limit:?}"))
            }
        }
    }

    async fn raw(&self, raw: &RawRequest, limit: Duration) -> Result<u16, String> {
        let mut request =
            hyper::Request::builder().method(raw.method.as_str()).uri(raw.path.as_str()).header("user-agent", "operator-host/fidelity (kube-rs)");
        request = request.header("accept", raw.accept.as_deref().unwrap_or("application/json"));
        let body = match &raw.body {
            Some(value) => {
                request = request.header("content-type", raw.content_type.as_deref().unwrap_or("application/json"));
                serde_json::to_vec(value).map_err(|e| e.to_string())?
            }
            None => Vec::new(),
        };
        let request = request.body(Full::new(Bytes::from(body))).map_err(|e| e.to_string())?;
        let response = self.direct.send(request).await.map_err(|e| e.to_string())?;
        let status = response.status().as_u16();
        // The body is read to its end (a watch: until the server ends it or the cut).
        let _ = tokio::time::timeout(limit, response.into_body().collect()).await;
        Ok(status)
    }
}
