//! Workload 3: M parents of 10 replicas rolled to a new image, on a fresh
//! control plane with Pods that run (kube-scheduler binds them, kwok's fake
//! node makes them Running and Ready): the host with `mydeployment.wasm`
//! against upstream's Deployment and ReplicaSet controllers in
//! kube-controller-manager. The plane's own kube-controller-manager runs
//! every controller but those two (the default ServiceAccount, garbage
//! collection), for both contestants.
//!
//! The parents are created and rolled out once; from the moment the bench
//! replaces every parent's image (one `kubectl replace` of the list) until
//! every Pod of the parents runs the new image and is Ready and no old Pod
//! is left, the window counts kube-apiserver's requests by verb and the
//! contestant's CPU. MyDeployment owns its Pods directly; a Deployment owns
//! ReplicaSets that own the Pods: each side does what its design needs.
//! The bench's own requests (its polls of the Pods, the replace) are
//! subtracted from the counts.

use std::path::Path;
use std::time::{Duration, Instant};

use real_cluster::ControlPlane;
use real_cluster::process::Process;
use serde_json::{Value, json};

use super::contestant::{Programs, Running};
use super::observe::{self, Requests};

pub const REPLICAS: usize = 10;
const OLD_IMAGE: &str = "nginx:1.7.9";
const NEW_IMAGE: &str = "nginx:1.9.1";
const LABEL: &str = "rollout-bench";
const POLL: Duration = Duration::from_secs(1);
const GIVE_UP: Duration = Duration::from_secs(900);

#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize)]
pub enum Side {
    /// `host run --plugin mydeployment.wasm` at its defaults (4 workers).
    Host,
    /// kube-controller-manager `--controllers=deployment-controller,replicaset-controller`
    /// at its defaults (5 workers each, client QPS 20, burst 30).
    Kcm,
    /// The same at the host's limits: its 4 workers for each controller and
    /// no effective client limit (the host has none).
    KcmTuned,
}

impl Side {
    pub fn label(self) -> &'static str {
        match self {
            Side::Host => "host + mydeployment.wasm",
            Side::Kcm => "kube-controller-manager (Deployment + ReplicaSet controllers, defaults)",
            Side::KcmTuned => "kube-controller-manager (Deployment + ReplicaSet controllers, equal limits)",
        }
    }

    pub fn short(self) -> &'static str {
        match self {
            Side::Host => "host MyDeployment",
            Side::Kcm => "KCM Deployment",
            Side::KcmTuned => "KCM equal limits",
        }
    }

    fn resource(self) -> &'static str {
        match self {
            Side::Host => "mydeployments.apps.example.com",
            Side::Kcm | Side::KcmTuned => "deployments.apps",
        }
    }
}

/// What one rollout run measured.
#[derive(Clone, Debug, serde::Serialize)]
pub struct Rollout {
    pub side: Side,
    pub parents: usize,
    pub round: usize,
    /// The first rollout (create → all Ready), seconds.
    pub create_s: f64,
    /// Replace → every Pod new and Ready, no old Pod left, seconds.
    pub roll_s: f64,
    pub requests: std::collections::BTreeMap<String, f64>,
    pub requests_total: f64,
    pub requests_detail: String,
    pub cpu: f64,
    pub server_cpu: f64,
    pub peak_rss_mib: f64,
    pub load: f64,
}

fn parent(side: Side, i: usize, image: &str) -> Value {
    let (api_version, kind) = match side {
        Side::Host => ("apps.example.com/v1", "MyDeployment"),
        Side::Kcm | Side::KcmTuned => ("apps/v1", "Deployment"),
    };
    let app = format!("app-{i:04}");
    json!({
        "apiVersion": api_version, "kind": kind,
        "metadata": {"name": app, "namespace": "default", "labels": {LABEL: "yes"}},
        "spec": {"replicas": REPLICAS, "selector": {"matchLabels": {"app": app}},
            "template": {"metadata": {"labels": {"app": app, LABEL: "yes"}},
                "spec": {"containers": [{"name": "nginx", "image": image}]}}}
    })
}

/// A fresh control plane whose Pods run, with every kube-controller-manager
/// controller but the Deployment and ReplicaSet ones, and the MyDeployment CRD.
fn fresh_plane() -> anyhow::Result<ControlPlane> {
    let plane = ControlPlane::builder()
        .pods_run(true)
        .without_controller("deployment-controller")
        .without_controller("replicaset-controller")
        .keep_on_failure(false)
        .start()
        .ok_or_else(|| anyhow::anyhow!("the real control plane is not built (Go absent?): run `cargo xtask real-cluster build` first"))?;
    let crds = real_cluster::repo_file("deploy/crd/crds.yaml");
    plane.admin().ok(&["apply", "--server-side", "--field-manager=operator-host", "-f", &crds.display().to_string()]);
    plane.admin().ok(&["wait", "--for=condition=Established", "crd/mydeployments.apps.example.com", "--timeout=60s"]);
    Ok(plane)
}

fn start(side: Side, plane: &ControlPlane, programs: &Programs, mydeployment: &Path, log_dir: &Path) -> Running {
    match side {
        Side::Host => {
            let port = real_cluster::free_port();
            let spec = real_cluster::process::Spec::new("host", &programs.host)
                .args(["--plugin-cache-dir".to_string(), log_dir.join("plugin-cache").display().to_string()])
                .args(["--plugin-precompiled-dir".to_string(), programs.precompiled.display().to_string()])
                .args(["run".to_string(), "--plugin".to_string(), mydeployment.display().to_string()])
                .args(["--metrics-addr".to_string(), format!("127.0.0.1:{port}")])
                .env("KUBECONFIG", plane.kubeconfig.display().to_string())
                .env("HOST_LOG", "warn");
            Running::new(Process::start(spec, log_dir.join("host.log")), Some(format!("http://127.0.0.1:{port}/readyz")))
        }
        Side::Kcm | Side::KcmTuned => {
            let mut spec = plane.controller_manager_spec(&["deployment-controller", "replicaset-controller"]);
            if side == Side::KcmTuned {
                let workers = super::contestant::HOST_WORKERS;
                let qps = super::contestant::UNLIMITED_QPS;
                spec = spec.args([
                    format!("--concurrent-deployment-syncs={workers}"),
                    format!("--concurrent-replicaset-syncs={workers}"),
                    format!("--kube-api-qps={qps}"),
                    format!("--kube-api-burst={qps}"),
                ]);
            }
            Running::new(Process::start(spec, log_dir.join("kcm-contestant.log")), None)
        }
    }
}

/// Whether every Pod of the parents runs `image`, is Ready and is not
/// being deleted, and there are `want` of them.
fn rolled(plane: &ControlPlane, image: &str, want: usize) -> anyhow::Result<(bool, String)> {
    let out = plane.kubectl(&[
        "get",
        "pods",
        "-n",
        "default",
        "-l",
        &format!("{LABEL}=yes"),
        "--no-headers",
        "-o",
        "custom-columns=IMAGE:.spec.containers[0].image,READY:.status.conditions[?(@.type==\"Ready\")].status,DELETING:.metadata.deletionTimestamp",
    ]);
    anyhow::ensure!(out.status.success(), "kubectl get pods: {}", String::from_utf8_lossy(&out.stderr));
    let (mut done, mut other) = (0, 0);
    for line in String::from_utf8_lossy(&out.stdout).lines() {
        match line.split_whitespace().collect::<Vec<_>>().as_slice() {
            [i, "True", "<none>"] if *i == image => done += 1,
            _ => other += 1,
        }
    }
    Ok((done == want && other == 0, format!("{done} of {want} Pods on {image} and Ready, {other} others")))
}

/// Polls until [`rolled`]; returns how many polls (LISTs of Pods) it made.
fn wait_rolled(plane: &ControlPlane, image: &str, want: usize) -> anyhow::Result<usize> {
    let started = Instant::now();
    let mut polls = 0;
    loop {
        polls += 1;
        let (done, state) = rolled(plane, image, want)?;
        if done {
            return Ok(polls);
        }
        anyhow::ensure!(started.elapsed() < GIVE_UP, "not rolled after {GIVE_UP:?}: {state}");
        std::thread::sleep(POLL);
    }
}

/// Creates the parents with `kubectl create` of one list.
fn create(plane: &ControlPlane, dir: &Path, side: Side, count: usize) -> anyhow::Result<()> {
    let items: Vec<Value> = (0..count).map(|i| parent(side, i, OLD_IMAGE)).collect();
    let file = dir.join("parents.json");
    std::fs::write(&file, json!({"apiVersion": "v1", "kind": "List", "items": items}).to_string())?;
    let out = plane.kubectl(&["create", "-o", "name", "-f", &file.display().to_string()]);
    anyhow::ensure!(out.status.success(), "kubectl create parents: {}", String::from_utf8_lossy(&out.stderr));
    Ok(())
}

/// The parents as they are, with the new image and no resourceVersion
/// (the replace is unconditional: a status write in between must not
/// make it fail).
fn rolled_parents(plane: &ControlPlane, dir: &Path, side: Side) -> anyhow::Result<std::path::PathBuf> {
    let mut items = plane.admin().items(&["get", side.resource(), "-n", "default", "-l", &format!("{LABEL}=yes")]);
    for item in &mut items {
        item["spec"]["template"]["spec"]["containers"][0]["image"] = json!(NEW_IMAGE);
        if let Some(meta) = item["metadata"].as_object_mut() {
            meta.remove("resourceVersion");
            meta.remove("managedFields");
        }
    }
    let file = dir.join("rolled.json");
    std::fs::write(&file, json!({"apiVersion": "v1", "kind": "List", "items": items}).to_string())?;
    Ok(file)
}

/// Rolls every parent to the new image: one `kubectl replace` of the list
/// (a PUT each).
fn roll(plane: &ControlPlane, file: &Path) -> anyhow::Result<()> {
    let out = plane.kubectl(&["replace", "-o", "name", "-f", &file.display().to_string()]);
    anyhow::ensure!(out.status.success(), "kubectl replace: {}", String::from_utf8_lossy(&out.stderr));
    Ok(())
}

/// One run of `side` with `count` parents.
pub fn run_once(side: Side, programs: &Programs, mydeployment: &Path, count: usize, round: usize) -> anyhow::Result<Rollout> {
    let plane = fresh_plane()?;
    let dir = plane.dir().to_path_buf();
    let mut running = start(side, &plane, programs, mydeployment, &dir.join("logs"));
    running.wait_ready(Duration::from_secs(300))?;
    let pid = running.pid()?;
    let server_pids = plane.pids();
    let want = count * REPLICAS;
    let t = Instant::now();
    create(&plane, &dir, side, count)?;
    wait_rolled(&plane, OLD_IMAGE, want)?;
    let create_s = t.elapsed().as_secs_f64();
    // Let the first rollout's trailing status writes pass.
    std::thread::sleep(Duration::from_secs(3));

    let rolled = rolled_parents(&plane, &dir, side)?;
    let (before, _) = Requests::scrape(&plane)?;
    let cpu_before = observe::cpu(pid)?;
    let server_cpu = || server_pids.iter().map(|p| observe::cpu(*p)).sum::<anyhow::Result<Duration>>();
    let server_before = server_cpu()?;
    let load = observe::load1();
    let t = Instant::now();
    roll(&plane, &rolled)?;
    let polls = wait_rolled(&plane, NEW_IMAGE, want)?;
    let roll_s = t.elapsed().as_secs_f64();
    let cpu = (observe::cpu(pid)? - cpu_before).as_secs_f64();
    let server_cpu = (server_cpu()? - server_before).as_secs_f64();
    let (after, _) = Requests::scrape(&plane)?;
    let mut requests = after.since(&before);
    // The bench's own: its polls and the replace (a PUT per parent).
    let plural = side.resource().split('.').next().unwrap_or_default();
    requests.subtract(("LIST", "pods", ""), polls as f64);
    requests.subtract(("PUT", plural, ""), count as f64);
    let peak_rss_mib = observe::status_kib(pid, "VmHWM")? as f64 / 1024.0;
    running.stop();
    Ok(Rollout {
        side,
        parents: count,
        round,
        create_s,
        roll_s,
        requests: requests.by_verb(),
        requests_total: requests.total(),
        requests_detail: requests.detail(),
        cpu,
        server_cpu,
        peak_rss_mib,
        load,
    })
}
