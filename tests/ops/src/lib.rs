//! Helpers for the operations kit's tests: the Helm binary `cargo xtask`
//! builds from the Go module proxy (`tests/ops/go/helm`, into
//! `target/ops/bin/helm`), run against a control plane's kubeconfig, and
//! the normalization that lets `helm template` and `kubectl kustomize` be
//! compared object by object.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use serde_json::Value;

/// `target/ops/bin/helm`, or `None` (skip recorded, as the real control
/// plane's tests do) when it was not built because Go is absent.
pub fn helm_binary() -> Option<PathBuf> {
    let path = real_cluster::binaries::target_dir().join("ops/bin/helm");
    if path.exists() {
        return Some(path);
    }
    let why = format!("helm is not built ({} is missing; `cargo xtask test` builds it where Go is installed)", path.display());
    if std::env::var_os("REAL_CLUSTER_REQUIRED").is_some() {
        panic!("{why}, although cargo xtask built the Go tools");
    }
    real_cluster::binaries::record_skip(&why);
    None
}

/// The chart in the repository.
pub fn chart_dir() -> PathBuf {
    real_cluster::repo_file("deploy/chart/operator-host")
}

/// Helm with its state (cache, config, data) in `home`, nothing from the user's.
pub struct Helm {
    program: PathBuf,
    home: PathBuf,
    kubeconfig: Option<PathBuf>,
}

impl Helm {
    pub fn new(program: PathBuf, home: &Path) -> Helm {
        Helm { program, home: home.to_path_buf(), kubeconfig: None }
    }

    /// Talks to the cluster of `kubeconfig`.
    pub fn with_kubeconfig(mut self, kubeconfig: &Path) -> Helm {
        self.kubeconfig = Some(kubeconfig.to_path_buf());
        self
    }

    pub fn run(&self, args: &[&str]) -> Output {
        let mut c = Command::new(&self.program);
        for (var, dir) in [("HELM_CACHE_HOME", "cache"), ("HELM_CONFIG_HOME", "config"), ("HELM_DATA_HOME", "data")] {
            c.env(var, self.home.join(dir));
        }
        if let Some(k) = &self.kubeconfig {
            c.env("KUBECONFIG", k);
        }
        c.args(args).output().unwrap_or_else(|e| panic!("cannot run {}: {e}", self.program.display()))
    }

    /// Runs and returns stdout; panics with stderr on failure.
    pub fn ok(&self, args: &[&str]) -> String {
        let out = self.run(args);
        assert!(
            out.status.success(),
            "helm {} failed:\n{}{}",
            args.join(" "),
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8(out.stdout).expect("helm prints UTF-8")
    }
}

/// The objects of a multi-document YAML stream, by `Kind/namespace/name`.
pub fn objects(yaml: &str) -> BTreeMap<String, Value> {
    let mut all = BTreeMap::new();
    for doc in yaml.split("\n---").map(|d| d.trim_start_matches("---")) {
        let value: Value = match serde_saphyr::from_str(doc) {
            Ok(v) => v,
            Err(e) => panic!("a document does not parse ({e}):\n{doc}"),
        };
        if value.is_null() {
            continue;
        }
        let key = format!(
            "{}/{}/{}",
            value["kind"].as_str().unwrap_or_default(),
            value["metadata"]["namespace"].as_str().unwrap_or_default(),
            value["metadata"]["name"].as_str().unwrap_or_default()
        );
        all.insert(key, value);
    }
    all
}

/// An object without what each tool adds of its own: labels and
/// annotations on the object (a chart marks its release, kustomize its
/// `part-of`) and the selector labels of a workload and its Service (the
/// chart adds `app.kubernetes.io/instance` so two releases do not overlap).
pub fn normalized(mut object: Value) -> Value {
    if let Some(md) = object.get_mut("metadata").and_then(Value::as_object_mut) {
        md.remove("labels");
        md.remove("annotations");
    }
    for path in ["/spec/selector/matchLabels", "/spec/template/metadata/labels", "/spec/selector"] {
        if let Some(labels) = object.pointer_mut(path).and_then(Value::as_object_mut) {
            labels.remove("app.kubernetes.io/instance");
        }
    }
    object
}
