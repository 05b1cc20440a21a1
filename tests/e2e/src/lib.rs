//! The harness of the end-to-end scenarios: starts `host run --embedded`
//! with the shipped plugins as its own process (built by `cargo xtask
//! build`), and drives it only through `/usr/bin/kubectl`, reading what
//! kubectl prints (`-o json`, `-o jsonpath`, tables).

use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

pub use operator_test_kit::Kubectl;
pub use serde_json::{Value, json};

/// How long any one expectation may take before the scenario fails.
pub const WAIT: Duration = Duration::from_secs(90);

pub fn workspace_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).ancestors().nth(2).expect("tests/e2e is two levels down").to_path_buf()
}

fn target_dir() -> PathBuf {
    std::env::var_os("CARGO_TARGET_DIR").map(PathBuf::from).unwrap_or_else(|| workspace_root().join("target"))
}

/// A file built by `cargo xtask build`, e.g. `plugins/cronjob.wasm`, `release/host`.
pub fn built(relative: &str) -> PathBuf {
    let path = target_dir().join(relative);
    assert!(path.exists(), "{} is missing: run `cargo xtask build` first", path.display());
    path
}

/// A file of the repository, e.g. `plugins/cronjob/samples/batch_v1_cronjob.yaml`.
pub fn repo_file(relative: &str) -> PathBuf {
    workspace_root().join(relative)
}

/// A running `host run --embedded` and the kubeconfig it wrote.
pub struct Host {
    child: Child,
    dir: tempfile::TempDir,
    pub kubeconfig: PathBuf,
    lines: mpsc::Receiver<String>,
}

impl Drop for Host {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Host {
    /// The host with both shipped plugins, plus `extra` arguments.
    pub fn start(extra: &[&str]) -> Host {
        let cronjob = built("plugins/cronjob.wasm");
        let mydeployment = built("plugins/mydeployment.wasm");
        let mut args: Vec<String> = vec!["--plugin".into(), cronjob.display().to_string(), "--plugin".into(), mydeployment.display().to_string()];
        args.extend(extra.iter().map(|s| s.to_string()));
        let host = Host::start_with(&args);
        host.wait_for_crds(&["cronjobs.batch.tutorial.kubebuilder.io", "mydeployments.apps.example.com"]);
        host
    }

    /// Waits until kubectl sees these CRDs (the host installs a plugin's CRDs as it starts it).
    pub fn wait_for_crds(&self, names: &[&str]) {
        let mut args = vec!["get", "crd"];
        args.extend(names);
        eventually(&format!("CRDs {names:?} to be served"), || self.kubectl(&args).status.success().then_some(()));
    }

    /// `host run --embedded` with exactly `args` (plugins included).
    pub fn start_with(args: &[String]) -> Host {
        let dir = tempfile::tempdir().unwrap();
        let kubeconfig = dir.path().join("kubeconfig");
        let mut child = Command::new(built("release/host"))
            .env("HOST_LOG", "warn")
            .arg("--plugin-cache-dir")
            .arg(dir.path().join("cache"))
            .args(["run", "--embedded", "--metrics-addr", "0", "--kubeconfig-out"])
            .arg(&kubeconfig)
            .args(args)
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .expect("start host");
        let out = child.stdout.take().unwrap();
        let (tx, lines) = mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(out).lines().map_while(Result::ok) {
                if tx.send(line).is_err() {
                    break;
                }
            }
        });
        let host = Host { child, dir, kubeconfig, lines };
        host.stdout_line_with("export KUBECONFIG=");
        host
    }

    /// Waits for a line of the host's stdout containing `needle`.
    pub fn stdout_line_with(&self, needle: &str) -> String {
        let deadline = Instant::now() + WAIT;
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            let line = self.lines.recv_timeout(left).unwrap_or_else(|_| panic!("the host printed no line with {needle:?}"));
            if line.contains(needle) {
                return line;
            }
        }
    }

    /// A scratch directory that lives as long as the host.
    pub fn scratch(&self) -> &Path {
        self.dir.path()
    }

    /// kubectl against the embedded cluster.
    pub fn kubectl_client(&self) -> Kubectl {
        Kubectl::new(kubectl(), &self.kubeconfig)
    }

    /// Runs kubectl against the embedded cluster, whatever the outcome.
    pub fn kubectl(&self, args: &[&str]) -> Output {
        self.kubectl_client().run(args)
    }

    /// Runs kubectl with `stdin` on its standard input, whatever the outcome.
    pub fn kubectl_stdin(&self, args: &[&str], stdin: Option<&str>) -> Output {
        self.kubectl_client().run_stdin(args, stdin.map(str::as_bytes))
    }

    /// kubectl that must succeed; its stdout.
    pub fn ok(&self, args: &[&str]) -> String {
        self.kubectl_client().ok(args)
    }

    /// `kubectl apply -f -` of `yaml`, which must succeed.
    pub fn apply(&self, yaml: &str) -> String {
        self.kubectl_client().apply(yaml)
    }

    /// `kubectl get ... -o json`, parsed.
    pub fn json(&self, args: &[&str]) -> Value {
        self.kubectl_client().json(args)
    }

    /// The `items` of `kubectl get ... -o json`.
    pub fn items(&self, args: &[&str]) -> Vec<Value> {
        self.kubectl_client().items(args)
    }
}

/// `/usr/bin/kubectl` (the real client), or `kubectl` on PATH.
pub fn kubectl() -> PathBuf {
    operator_test_kit::kubectl::system()
}

/// Polls `f` until it returns `Some`, for up to [`WAIT`].
pub fn eventually<T>(what: &str, f: impl FnMut() -> Option<T>) -> T {
    operator_test_kit::wait::blocking(what, WAIT, f)
}

/// A repository file's text.
pub fn read(relative: &str) -> String {
    std::fs::read_to_string(repo_file(relative)).unwrap_or_else(|e| panic!("{relative}: {e}"))
}

/// Records that `test` could not run here and why: said loudly on stderr, and kept as the
/// empty file `target/real-cluster/skipped/<test>`, which `cargo xtask test` counts, so a skip
/// is never taken for a pass.
pub fn record_skip(test: &str, why: &str) {
    // Straight to the stream: libtest captures `eprintln!` of a passing test.
    let _ = writeln!(std::io::stderr(), "\n*** SKIPPED {test}: {why} ***\n");
    let dir = target_dir().join("real-cluster").join("skipped");
    std::fs::create_dir_all(&dir).unwrap_or_else(|e| panic!("create {}: {e}", dir.display()));
    std::fs::write(dir.join(test), "").unwrap_or_else(|e| panic!("record the skip of {test} in {}: {e}", dir.display()));
}

/// `go` on PATH, if it runs.
pub fn go() -> Option<PathBuf> {
    let go = PathBuf::from("go");
    Command::new(&go).arg("version").output().ok().filter(|o| o.status.success()).map(|_| go)
}

/// `go test` in `tests/book` against the cluster `kubeconfig` names (any cluster where the
/// cronjob plugin runs); fails with Go's output when it fails.
pub fn book_test_passes_against(go: &Path, kubeconfig: &Path) {
    let out = std::process::Command::new(go)
        .current_dir(repo_file("tests/book"))
        .args(["test", "-count=1", "-timeout=5m", "-v", "./..."])
        .env("KUBECONFIG", kubeconfig)
        .env_remove("USE_EXISTING_CLUSTER")
        .env_remove("BOOK_TEST_NAMESPACE")
        .stdin(std::process::Stdio::null())
        .output()
        .expect("run go test");
    let text = String::from_utf8_lossy(&out.stdout).into_owned() + &String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "go test in tests/book failed ({}):\n{text}", out.status);
    assert!(text.contains("--- PASS: TestCronJobControllerKeepsStatusConditionsAndHistoryLimits"), "the Go test did not run:\n{text}");
}
