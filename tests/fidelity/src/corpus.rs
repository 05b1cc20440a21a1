//! The corpus: data files (`tests/fidelity/corpus/*.yaml`), each a list of
//! steps run in order against one server. A step is a kubectl invocation
//! (the real kubectl of the control plane's release) or a raw request shaped
//! as the host's kube-rs client sends it (method, path and query, content
//! type, body).

use std::path::{Path, PathBuf};

use serde::Deserialize;
use serde_json::Value;

#[derive(Debug, thiserror::Error)]
pub enum CorpusError {
    #[error("reading {path}: {source}")]
    Read {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("{path}: {message}")]
    Parse { path: PathBuf, message: String },
}

/// One corpus file.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CorpusFile {
    /// What the file covers.
    pub description: String,
    pub steps: Vec<Step>,
    /// The file's name without `.yaml` (set when loaded).
    #[serde(skip)]
    pub name: String,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Step {
    /// kubectl's arguments (the kubeconfig and cache directory are added).
    #[serde(default)]
    pub kubectl: Option<Vec<String>>,
    /// kubectl's standard input (`-f -`).
    #[serde(default)]
    pub stdin: Option<String>,
    /// A raw request, as the host's kube-rs client makes it.
    #[serde(default)]
    pub request: Option<RawRequest>,
    /// Ends the client after this long (a watch that would run on); the
    /// stream is recorded up to then.
    #[serde(default)]
    pub cut_after_seconds: Option<f64>,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawRequest {
    pub method: String,
    /// Path and query.
    pub path: String,
    #[serde(default)]
    pub content_type: Option<String>,
    #[serde(default)]
    pub accept: Option<String>,
    /// Sent as JSON (what kube-rs sends for every patch kind, server-side apply included).
    #[serde(default)]
    pub body: Option<Value>,
}

impl Step {
    /// What the step does, for logs.
    pub fn describe(&self) -> String {
        match (&self.kubectl, &self.request) {
            (Some(args), _) => format!("kubectl {}", args.join(" ")),
            (None, Some(r)) => format!("{} {}", r.method, r.path),
            (None, None) => "(empty step)".to_string(),
        }
    }
}

/// The corpus directory in the repository.
pub fn default_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("corpus")
}

/// Every `*.yaml` in `dir`, by file name.
pub fn load(dir: &Path) -> Result<Vec<CorpusFile>, CorpusError> {
    let read = |path: &Path, source| CorpusError::Read { path: path.to_path_buf(), source };
    let mut paths: Vec<PathBuf> = std::fs::read_dir(dir)
        .map_err(|e| read(dir, e))?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|x| x == "yaml"))
        .collect();
    paths.sort();
    paths
        .iter()
        .map(|path| {
            let text = std::fs::read_to_string(path).map_err(|e| read(path, e))?;
            let mut file: CorpusFile =
                serde_saphyr::from_str(&text).map_err(|e| CorpusError::Parse { path: path.clone(), message: e.to_string() })?;
            file.name = path.file_stem().map(|s| s.to_string_lossy().into_owned()).unwrap_or_default();
            for (i, step) in file.steps.iter().enumerate() {
                if step.kubectl.is_some() == step.request.is_some() {
                    return Err(CorpusError::Parse { path: path.clone(), message: format!("step {i}: give exactly one of `kubectl` and `request`") });
                }
            }
            Ok(file)
        })
        .collect()
}
