//! etcd + kube-apiserver + kube-controller-manager (+ kube-scheduler + kwok)
//! on loopback, as envtest runs them, with kube-controller-manager and kwok
//! added so the cluster behaves as a small real one: garbage collection,
//! Job, ReplicaSet and StatefulSet controllers, default ServiceAccounts, and
//! Pods that are scheduled, go Running and (for Jobs) complete; with
//! kube-controller-manager, a default StorageClass and a provisioner
//! ([`crate::storage`]) so claims get volumes.
//!
//! Every port is a free one; everything lives in one temporary directory
//! (data, certificates, kubeconfig, each process's log). When the owner is
//! dropped every process is stopped; when that happens during a panic, the
//! tail of each log is printed and the directory is kept.

use std::path::{Path, PathBuf};
use std::process::Output;
use std::time::{Duration, Instant};

use crate::binaries::Binaries;
use crate::pki::Pki;
use crate::process::{Process, Spec};
use crate::{eventually_within, free_port, http};
use operator_test_kit::Kubectl;

/// The static token of the cluster's administrator (group `system:masters`).
const ADMIN_TOKEN: &str = "real-cluster-admin-token";

/// The kwok-managed Node every Pod is scheduled to.
pub const NODE: &str = "kwok-node-0";

/// What to start besides etcd, kube-apiserver and kube-controller-manager.
#[derive(Clone, Debug)]
#[must_use]
pub struct Builder {
    pods_run: bool,
    apiserver_flags: Vec<String>,
    keep_on_failure: bool,
    disabled_controllers: Vec<String>,
    controller_manager: bool,
}

impl Default for Builder {
    fn default() -> Self {
        Builder { pods_run: true, apiserver_flags: Vec::new(), keep_on_failure: true, disabled_controllers: Vec::new(), controller_manager: true }
    }
}

impl Builder {
    /// Whether kube-scheduler and kwok run (default: yes), so Pods are bound
    /// to a fake Node and go Running, and Job Pods complete.
    pub fn pods_run(mut self, yes: bool) -> Self {
        self.pods_run = yes;
        self
    }

    /// An extra kube-apiserver flag, e.g. `--etcd-compaction-interval=30s`.
    pub fn apiserver_flag(mut self, flag: &str) -> Self {
        self.apiserver_flags.push(flag.to_string());
        self
    }

    /// Runs kube-controller-manager without one of its controllers (its
    /// `--controllers` name, e.g. `job-controller`), for a test that plays
    /// that controller itself.
    pub fn without_controller(mut self, name: &str) -> Self {
        self.disabled_controllers.push(name.to_string());
        self
    }

    /// Whether kube-controller-manager runs (default: yes). Without it no
    /// controller acts (no garbage collection, no default ServiceAccount, so
    /// no Pods): for a benchmark that runs one controller of its own choice
    /// ([`ControlPlane::controller_manager_spec`] starts one).
    pub fn controller_manager(mut self, yes: bool) -> Self {
        self.controller_manager = yes;
        self
    }

    /// Whether a test that fails keeps the directory and prints the logs'
    /// tails (default: yes; a test that panics on purpose says no).
    pub fn keep_on_failure(mut self, yes: bool) -> Self {
        self.keep_on_failure = yes;
        self
    }

    /// Starts the control plane, or `None` when its binaries are not built
    /// (Go absent): the skip is printed and recorded for `cargo xtask test`.
    pub fn start(self) -> Option<ControlPlane> {
        let binaries = Binaries::find()?;
        Some(ControlPlane::start(binaries, self))
    }
}

/// A running control plane.
pub struct ControlPlane {
    dir: Option<tempfile::TempDir>,
    pub binaries: Binaries,
    pub pki: Pki,
    /// The administrator's kubeconfig (`system:masters`).
    pub kubeconfig: PathBuf,
    /// `https://127.0.0.1:PORT`.
    pub server: String,
    etcd_client: String,
    keep_on_failure: bool,
    /// In start order; stopped in reverse.
    processes: Vec<Process>,
    /// Volumes for claims of the default StorageClass (with kube-controller-manager's binder).
    provisioner: Option<crate::storage::Provisioner>,
}

/// The index of each process in `ControlPlane::processes`.
const ETCD: usize = 0;
const APISERVER: usize = 1;

impl ControlPlane {
    pub fn builder() -> Builder {
        Builder::default()
    }

    fn start(binaries: Binaries, builder: Builder) -> ControlPlane {
        let started = Instant::now();
        let dir = tempfile::Builder::new().prefix("real-cluster-").tempdir().expect("create a temporary directory");
        let root = dir.path().to_path_buf();
        std::fs::create_dir_all(root.join("logs")).expect("create the logs directory");
        let pki = Pki::generate(&root);
        let (etcd_port, peer_port, api_port) = (free_port(), free_port(), free_port());
        let etcd_client = format!("http://127.0.0.1:{etcd_port}");
        let server = format!("https://127.0.0.1:{api_port}");
        let kubeconfig = root.join("kubeconfig");
        write_kubeconfig(&kubeconfig, &server, &pki.ca_pem, "admin", ADMIN_TOKEN);
        let tokens = root.join("tokens.csv");
        std::fs::write(&tokens, format!("{ADMIN_TOKEN},admin,admin-uid,\"system:masters\"\n")).expect("write the token file");
        let mut plane = ControlPlane {
            dir: Some(dir),
            binaries,
            pki,
            kubeconfig,
            server,
            etcd_client,
            keep_on_failure: builder.keep_on_failure,
            processes: Vec::new(),
            provisioner: None,
        };

        let peer = format!("http://127.0.0.1:{peer_port}");
        let etcd = Spec::new("etcd", plane.binaries.path("etcd")).args([
            "--name=default".to_string(),
            format!("--data-dir={}", root.join("etcd").display()),
            format!("--listen-client-urls={}", plane.etcd_client),
            format!("--advertise-client-urls={}", plane.etcd_client),
            format!("--listen-peer-urls={peer}"),
            format!("--initial-advertise-peer-urls={peer}"),
            format!("--initial-cluster=default={peer}"),
            // As envtest: a test cluster's data need not survive a power cut.
            "--unsafe-no-fsync=true".to_string(),
        ]);
        plane.spawn(etcd);
        plane.wait_for_etcd();

        let pki = plane.pki.clone();
        let apiserver = Spec::new("kube-apiserver", plane.binaries.path("kube-apiserver"))
            .args([
                format!("--etcd-servers={}", plane.etcd_client),
                "--bind-address=127.0.0.1".to_string(),
                "--advertise-address=127.0.0.1".to_string(),
                format!("--secure-port={api_port}"),
                format!("--cert-dir={}", root.join("pki").display()),
                format!("--tls-cert-file={}", pki.serving_cert.display()),
                format!("--tls-private-key-file={}", pki.serving_key.display()),
                format!("--token-auth-file={}", tokens.display()),
                "--authorization-mode=RBAC".to_string(),
                "--service-account-issuer=https://kubernetes.default.svc.cluster.local".to_string(),
                format!("--service-account-key-file={}", pki.service_account_public_key.display()),
                format!("--service-account-signing-key-file={}", pki.service_account_key.display()),
                "--service-cluster-ip-range=10.0.0.0/24".to_string(),
                "--allow-privileged=true".to_string(),
                "--profiling=false".to_string(),
            ])
            .args(builder.apiserver_flags.clone());
        plane.spawn(apiserver);
        plane.wait_ready();

        let kubeconfig = plane.kubeconfig.display().to_string();
        if builder.controller_manager {
            let controllers =
                std::iter::once("*".to_string()).chain(builder.disabled_controllers.iter().map(|c| format!("-{c}"))).collect::<Vec<_>>();
            let spec = plane.controller_manager_spec(&controllers.iter().map(String::as_str).collect::<Vec<_>>());
            plane.spawn(spec);
        }
        if builder.pods_run {
            let scheduler = Spec::new("kube-scheduler", plane.binaries.path("kube-scheduler")).args([
                format!("--kubeconfig={kubeconfig}"),
                "--leader-elect=false".to_string(),
                "--bind-address=127.0.0.1".to_string(),
                "--secure-port=0".to_string(),
            ]);
            plane.spawn(scheduler);
            plane.admin().apply(&node_yaml());
            let kwok = Spec::new("kwok", plane.binaries.path("kwok")).args([
                format!("--kubeconfig={kubeconfig}"),
                format!("--config={}", plane.binaries.kwok_stages().display()),
                "--manage-all-nodes=true".to_string(),
                "--server-address=127.0.0.1:0".to_string(),
            ]);
            plane.spawn(kwok);
        }
        if builder.controller_manager {
            // The binder runs in kube-controller-manager; volumes come from our provisioner.
            plane.admin().apply(&crate::storage::default_class_yaml());
            plane.provisioner = Some(crate::storage::Provisioner::start(plane.admin()));
        }
        // Pods are refused until the namespace's ServiceAccount exists
        // (kube-controller-manager's serviceaccount controller makes it).
        let admin = plane.admin();
        if builder.controller_manager {
            eventually_within("the default ServiceAccount", Duration::from_secs(60), || {
                admin.run(&["get", "serviceaccount", "default", "-n", "default"]).status.success().then_some(())
            });
        }
        if builder.pods_run {
            eventually_within("the kwok Node to be Ready", Duration::from_secs(60), || {
                let out = admin.run(&["get", "node", NODE, "-o", "jsonpath={.status.conditions[?(@.type==\"Ready\")].status}"]);
                (String::from_utf8_lossy(&out.stdout) == "True").then_some(())
            });
        }
        eprintln!("real-cluster: {} ready in {:.1?} ({})", plane.server, started.elapsed(), plane.dir().display());
        plane
    }

    /// kube-controller-manager against this control plane with `--controllers`
    /// set to `controllers` (e.g. `["*", "-job-controller"]` or
    /// `["cronjob-controller"]`); add flags to the spec before starting it.
    pub fn controller_manager_spec(&self, controllers: &[&str]) -> Spec {
        Spec::new("kube-controller-manager", self.binaries.path("kube-controller-manager")).args([
            format!("--kubeconfig={}", self.kubeconfig.display()),
            "--leader-elect=false".to_string(),
            format!("--controllers={}", controllers.join(",")),
            format!("--service-account-private-key-file={}", self.pki.service_account_key.display()),
            format!("--root-ca-file={}", self.pki.ca_cert.display()),
            "--bind-address=127.0.0.1".to_string(),
            "--secure-port=0".to_string(),
        ])
    }

    fn spawn(&mut self, spec: Spec) {
        let log = self.dir().join("logs").join(format!("{}.log", spec.name));
        self.processes.push(Process::start(spec, log));
    }

    /// The directory holding data, certificates, kubeconfig and logs.
    pub fn dir(&self) -> &Path {
        self.dir.as_ref().expect("the directory lives as long as the control plane").path()
    }

    /// kubectl (the same release as the server) as the administrator.
    pub fn admin(&self) -> Kubectl {
        Kubectl::new(self.binaries.path("kubectl"), self.kubeconfig.clone())
    }

    /// A kubeconfig at `path` that authenticates with `token` (e.g. from
    /// `kubectl create token`).
    pub fn kubeconfig_with_token(&self, path: &Path, user: &str, token: &str) {
        write_kubeconfig(path, &self.server, &self.pki.ca_pem, user, token);
    }

    /// kubectl against a kubeconfig of its own (e.g. a ServiceAccount's).
    pub fn kubectl_as(&self, kubeconfig: &Path) -> Kubectl {
        Kubectl::new(self.binaries.path("kubectl"), kubeconfig.to_path_buf())
    }

    /// `kubectl` as the administrator, for one-off calls.
    pub fn kubectl(&self, args: &[&str]) -> Output {
        self.admin().run(args)
    }

    fn wait_for_etcd(&self) {
        let url = format!("{}/health", self.etcd_client);
        eventually_within("etcd's /health", Duration::from_secs(30), || {
            http::get(&url).ok().filter(|b| b.contains("\"health\":\"true\"")).map(|_| ())
        });
    }

    /// Waits until kube-apiserver's `/readyz` answers `ok`.
    pub fn wait_ready(&self) {
        let admin = self.admin();
        eventually_within("kube-apiserver's /readyz", Duration::from_secs(60), || {
            let out = admin.run(&["get", "--raw", "/readyz"]);
            (out.status.success() && String::from_utf8_lossy(&out.stdout).trim() == "ok").then_some(())
        });
    }

    /// Stops kube-apiserver (SIGTERM, as a rollout would), waits `down`, and
    /// starts it again; returns once it is ready.
    pub fn restart_apiserver(&mut self, down: Duration) {
        self.processes[APISERVER].stop(Duration::from_secs(10));
        std::thread::sleep(down);
        self.processes[APISERVER].restart();
        self.wait_ready();
    }

    /// Stops etcd (SIGKILL: a crash), waits `down`, starts it again on the
    /// same data and waits until kube-apiserver is ready again.
    pub fn restart_etcd(&mut self, down: Duration) {
        let stopped = Instant::now();
        self.processes[ETCD].kill();
        // kube-apiserver notices: its readiness check of etcd fails.
        let admin = self.admin();
        eventually_within("kube-apiserver to report etcd down", down, || (!admin.run(&["get", "--raw", "/readyz"]).status.success()).then_some(()));
        std::thread::sleep(down.saturating_sub(stopped.elapsed()));
        self.processes[ETCD].restart();
        self.wait_for_etcd();
        self.wait_ready();
    }

    /// etcd's client URL (`http://127.0.0.1:PORT`, its JSON gateway under `/v3/`).
    pub fn etcd_url(&self) -> &str {
        &self.etcd_client
    }

    /// etcd's current revision.
    pub fn etcd_revision(&self) -> i64 {
        // The gRPC gateway answers `range` with the store's header; key "\0".
        let body = http::post_json(&format!("{}/v3/kv/range", self.etcd_client), r#"{"key":"AA=="}"#).expect("etcd range");
        let value: serde_json::Value = serde_json::from_str(&body).expect("etcd answers JSON");
        value["header"]["revision"].as_str().and_then(|s| s.parse().ok()).expect("etcd's header has a revision")
    }

    /// Compacts etcd's history up to its current revision (physically), as
    /// kube-apiserver's own compactor does every five minutes: every watch
    /// that resumes from an older resourceVersion then gets 410 Gone.
    pub fn compact_etcd(&self) -> i64 {
        let revision = self.etcd_revision();
        let request = format!(r#"{{"revision":"{revision}","physical":true}}"#);
        http::post_json(&format!("{}/v3/kv/compaction", self.etcd_client), &request).expect("etcd compaction");
        revision
    }

    /// The OS process ids of the running components.
    pub fn pids(&self) -> Vec<u32> {
        self.processes.iter().filter_map(Process::pid).collect()
    }

    /// Each process's log tail, for a failure report.
    pub fn log_tails(&self, lines: usize) -> String {
        self.processes.iter().map(|p| format!("----- {} ({}) -----\n{}\n", p.name(), p.log().display(), p.log_tail(lines))).collect()
    }
}

impl Drop for ControlPlane {
    fn drop(&mut self) {
        let failed = std::thread::panicking() && self.keep_on_failure;
        if failed {
            eprintln!("real-cluster: the test failed; the last lines of each control-plane log:\n{}", self.log_tails(40));
        }
        self.provisioner.take();
        while let Some(mut process) = self.processes.pop() {
            process.stop(Duration::from_secs(3));
        }
        if failed && let Some(dir) = self.dir.take() {
            eprintln!("real-cluster: kept {} (logs/, data, kubeconfig)", dir.keep().display());
        }
    }
}

fn node_yaml() -> String {
    format!(
        r#"apiVersion: v1
kind: Node
metadata:
  name: {NODE}
  annotations:
    node.alpha.kubernetes.io/ttl: "0"
    kwok.x-k8s.io/node: fake
  labels:
    kubernetes.io/arch: amd64
    kubernetes.io/hostname: {NODE}
    kubernetes.io/os: linux
    kubernetes.io/role: agent
    type: kwok
status:
  allocatable: {{cpu: "32", memory: 256Gi, pods: "1000"}}
  capacity: {{cpu: "32", memory: 256Gi, pods: "1000"}}
"#
    )
}

/// A kubeconfig with one cluster, one token user and one current context.
fn write_kubeconfig(path: &Path, server: &str, ca_pem: &str, user: &str, token: &str) {
    use base64::Engine as _;
    let ca = base64::engine::general_purpose::STANDARD.encode(ca_pem);
    let text = format!(
        r#"apiVersion: v1
kind: Config
clusters:
- name: real-cluster
  cluster:
    server: {server}
    certificate-authority-data: {ca}
users:
- name: {user}
  user:
    token: {token}
contexts:
- name: {user}@real-cluster
  context:
    cluster: real-cluster
    user: {user}
    namespace: default
current-context: {user}@real-cluster
"#
    );
    std::fs::write(path, text).unwrap_or_else(|e| panic!("write {}: {e}", path.display()));
}
