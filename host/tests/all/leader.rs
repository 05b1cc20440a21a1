//! Leader election between two real `host run --leader-elect` processes
//! sharing one server: exactly one reconciles, `kill -9` of the leader hands
//! over after the lease expires, SIGTERM hands over at once (the lease is
//! released). No timed assertion is tight: waits poll with generous limits,
//! and the takeover bounds are far from what a noisy machine needs. The Lease
//! protocol itself is runtime/tests/all/leader.rs.

use crate::common;

use std::io::BufRead;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use apiserver::{ApiServer, ServerHandle};
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::{Api, ApiResource, DynamicObject, PostParams};
use serde_json::json;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

const WAIT: Duration = Duration::from_secs(90);
const LEASE: &str = "operator-host";

struct Cluster {
    server: ApiServer,
    _handle: ServerHandle,
    kubeconfig: PathBuf,
    dir: tempfile::TempDir,
}

async fn cluster() -> Cluster {
    let server = ApiServer::new();
    let handle = server.serve_on(SocketAddr::from(([127, 0, 0, 1], 0))).await.unwrap();
    let dir = tempfile::tempdir().unwrap();
    let kubeconfig = dir.path().join("kubeconfig");
    handle.write_kubeconfig(&kubeconfig).unwrap();
    Cluster { server, _handle: handle, kubeconfig, dir }
}

struct HostProcess {
    child: Child,
    metrics: SocketAddr,
    identity: String,
    log: PathBuf,
}

impl Drop for HostProcess {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl HostProcess {
    fn log(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }
}

/// `host run --leader-elect` with the hello plugin against the cluster's
/// kubeconfig; returns once it serves metrics and has logged its identity.
async fn spawn_host(cluster: &Cluster, name: &str, lease_flags: &[&str]) -> HostProcess {
    let log = cluster.dir.path().join(format!("{name}.log"));
    let mut child = Command::new(env!("CARGO_BIN_EXE_host"))
        .args(["run", "--leader-elect", "--metrics-addr", "127.0.0.1:0", "--plugin"])
        .arg(common::wasm("hello"))
        .args(lease_flags)
        .arg("--plugin-cache-dir")
        .arg(cluster.dir.path().join(format!("cache-{name}")))
        .env("KUBECONFIG", &cluster.kubeconfig)
        .env("HOST_LOG", "info")
        .stdout(Stdio::piped())
        .stderr(std::fs::File::create(&log).unwrap())
        .spawn()
        .expect("start host");
    let (tx, rx) = std::sync::mpsc::channel();
    let stdout = child.stdout.take().unwrap();
    std::thread::spawn(move || {
        // Keep draining stdout so the child never blocks on a full pipe.
        for line in std::io::BufReader::new(stdout).lines().map_while(Result::ok) {
            if let Some(addr) = line.strip_prefix("metrics at http://").and_then(|a| a.strip_suffix("/metrics")) {
                let _ = tx.send(addr.parse::<SocketAddr>().unwrap());
            }
        }
    });
    let metrics = tokio::task::spawn_blocking(move || rx.recv_timeout(WAIT))
        .await
        .unwrap()
        .unwrap_or_else(|_| panic!("{name}: no metrics address; log:\n{}", std::fs::read_to_string(&log).unwrap_or_default()));
    let started = Instant::now();
    let identity = loop {
        let text = std::fs::read_to_string(&log).unwrap_or_default();
        if let Some(id) = text.split_whitespace().find_map(|w| w.strip_prefix("identity=")) {
            break id.to_string();
        }
        assert!(started.elapsed() < WAIT, "{name} never logged its identity:\n{text}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    HostProcess { child, metrics, identity, log }
}

async fn scrape(addr: SocketAddr) -> String {
    let Ok(mut stream) = tokio::net::TcpStream::connect(addr).await else {
        return String::new();
    };
    let request = format!("GET /metrics HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n\r\n");
    if stream.write_all(request.as_bytes()).await.is_err() {
        return String::new();
    }
    let mut text = String::new();
    let _ = stream.read_to_string(&mut text).await;
    text
}

/// Sum of the samples whose line starts with `prefix`.
async fn metric(p: &HostProcess, prefix: &str) -> f64 {
    scrape(p.metrics).await.lines().filter(|l| l.starts_with(prefix)).filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok()).sum()
}

async fn leads(p: &HostProcess) -> bool {
    metric(p, &format!("leader_election_master_status{{name=\"{LEASE}\"}}")).await == 1.0
}

async fn reconciles(p: &HostProcess) -> f64 {
    metric(p, "controller_runtime_reconcile_total{").await
}

/// Waits until `p` counts a finished reconcile. The counter moves when a
/// reconcile ends, after its writes: the ConfigMap a test waits for can be
/// seen a moment before the reconcile that wrote it is counted.
async fn has_reconciled(p: &HostProcess, what: &str) {
    common::eventually(what, WAIT, || async { (reconciles(p).await > 0.0).then_some(()) }).await;
}

fn hellos(client: &kube::Client) -> Api<DynamicObject> {
    let ar = ApiResource {
        group: "example.operator.dev".into(),
        version: "v1alpha1".into(),
        api_version: "example.operator.dev/v1alpha1".into(),
        kind: "Hello".into(),
        plural: "hellos".into(),
    };
    Api::namespaced_with(client.clone(), "default", &ar)
}

/// Creates a Hello (once its CRD is served) and waits for its ConfigMap.
async fn hello_is_reconciled(client: &kube::Client, name: &str) {
    let obj: DynamicObject = serde_json::from_value(json!({
        "apiVersion": "example.operator.dev/v1alpha1", "kind": "Hello",
        "metadata": {"name": name, "namespace": "default"}, "spec": {"greeting": "Hi"}
    }))
    .unwrap();
    common::eventually("the Hello is created", WAIT, || async { hellos(client).create(&PostParams::default(), &obj).await.ok() }).await;
    let cms = Api::<ConfigMap>::namespaced(client.clone(), "default");
    common::eventually(&format!("{name}-greeting exists"), WAIT, || async { cms.get_opt(&format!("{name}-greeting")).await.ok().flatten() }).await;
}

/// Waits until exactly one of the two leads and the Lease names it; returns (leader, standby).
async fn elect(client: &kube::Client, a: HostProcess, b: HostProcess) -> (HostProcess, HostProcess) {
    let which = common::eventually("one host leads and holds the lease", WAIT, || async {
        let h = common::lease_holder(client, LEASE).await;
        let (la, lb) = (leads(&a).await, leads(&b).await);
        match (la, lb) {
            (true, false) if h == a.identity => Some(true),
            (false, true) if h == b.identity => Some(false),
            (true, true) => panic!("both hosts lead"),
            _ => None,
        }
    })
    .await;
    if which { (a, b) } else { (b, a) }
}

async fn only_the_leader_reconciles(client: &kube::Client, leader: &HostProcess, standby: &HostProcess, name: &str) {
    hello_is_reconciled(client, name).await;
    has_reconciled(leader, &format!("the leader counts the reconcile of {name}")).await;
    assert_eq!(reconciles(standby).await, 0.0, "the standby reconciles nothing; its log:\n{}", standby.log());
    assert!(!leads(standby).await);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn after_kill_9_of_the_leader_the_standby_takes_over_once_the_lease_expires() {
    let c = cluster().await;
    let client = c.server.kube_client();
    let flags = ["--leader-election-lease-duration", "10s", "--leader-election-renew-deadline", "8s", "--leader-election-retry-period", "1s"];
    let a = spawn_host(&c, "a", &flags).await;
    let b = spawn_host(&c, "b", &flags).await;
    let (mut leader, standby) = elect(&client, a, b).await;
    only_the_leader_reconciles(&client, &leader, &standby, "one").await;

    leader.child.kill().unwrap(); // SIGKILL: no release
    let killed = Instant::now();
    leader.child.wait().unwrap();
    common::eventually("the standby holds the lease", WAIT, || async {
        (common::lease_holder(&client, LEASE).await == standby.identity && leads(&standby).await).then_some(())
    })
    .await;
    let took = killed.elapsed();
    eprintln!("kill -9: the standby took over after {took:?}");
    // lease duration (10 s) + one jittered retry (<= 2.2 s), with room for a slow machine.
    assert!(took < Duration::from_secs(60), "takeover took {took:?}");
    // The standby last saw a renewal at most ~2.2 s before the kill: it must
    // have waited out most of the 10 s lease, not taken it early.
    assert!(took > Duration::from_secs(5), "taken over after {took:?}, before the lease could expire");
    assert_eq!(common::lease_transitions(&client, LEASE).await, 1);
    assert!(!leader.log().contains("released the leader lease"));

    hello_is_reconciled(&client, "two").await;
    has_reconciled(&standby, "the new leader counts a reconcile").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn on_sigterm_the_leader_releases_the_lease_and_the_standby_takes_over_before_it_would_expire() {
    let c = cluster().await;
    let client = c.server.kube_client();
    // A long lease: a takeover well within it proves the lease was released.
    let flags = ["--leader-election-lease-duration", "120s", "--leader-election-renew-deadline", "60s", "--leader-election-retry-period", "1s"];
    let a = spawn_host(&c, "a", &flags).await;
    let b = spawn_host(&c, "b", &flags).await;
    let (mut leader, standby) = elect(&client, a, b).await;
    only_the_leader_reconciles(&client, &leader, &standby, "one").await;

    let status = Command::new("kill").args(["-TERM", &leader.child.id().to_string()]).status().unwrap();
    assert!(status.success());
    let signalled = Instant::now();
    let exit = common::eventually("the leader exits", WAIT, || {
        let exited = leader.child.try_wait().unwrap();
        async move { exited }
    })
    .await;
    assert!(exit.success(), "graceful shutdown exits 0, got {exit}; log:\n{}", leader.log());
    assert!(leader.log().contains("released the leader lease"), "log:\n{}", leader.log());
    common::eventually("the standby holds the lease", WAIT, || async {
        (common::lease_holder(&client, LEASE).await == standby.identity && leads(&standby).await).then_some(())
    })
    .await;
    let took = signalled.elapsed();
    eprintln!("SIGTERM: the standby took over after {took:?}");
    assert!(took < Duration::from_secs(60), "takeover took {took:?}, as long as waiting out the lease");
    assert_eq!(common::lease_transitions(&client, LEASE).await, 1);

    hello_is_reconciled(&client, "two").await;
    has_reconciled(&standby, "the new leader counts a reconcile").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_leader_whose_lease_is_taken_stops_at_once_by_exiting_1_without_taking_it_back() {
    let c = cluster().await;
    let client = c.server.kube_client();
    let flags = ["--leader-election-lease-duration", "4s", "--leader-election-renew-deadline", "3s", "--leader-election-retry-period", "500ms"];
    let mut leader = spawn_host(&c, "a", &flags).await;
    common::eventually("the host leads", WAIT, || async {
        (common::lease_holder(&client, LEASE).await == leader.identity && leads(&leader).await).then_some(())
    })
    .await;
    // Another candidate overwrites the record (as one that judged it expired
    // would); the leader's renewals are refused from now on.
    let api = Api::<Lease>::namespaced(client.clone(), "default");
    common::eventually("the lease is usurped", WAIT, || async {
        let mut l = api.get(LEASE).await.ok()?;
        l.spec.as_mut()?.holder_identity = Some("usurper".into());
        api.replace(LEASE, &PostParams::default(), &l).await.ok()
    })
    .await;
    let exit = common::eventually("the old leader exits", WAIT, || {
        let exited = leader.child.try_wait().unwrap();
        async move { exited }
    })
    .await;
    assert_eq!(exit.code(), Some(1), "log:\n{}", leader.log());
    assert!(leader.log().contains("leader election lost; exiting"), "log:\n{}", leader.log());
    assert_eq!(common::lease_holder(&client, LEASE).await, "usurper", "the old leader did not write the lease again");
}

#[test]
fn inconsistent_durations_are_refused_with_the_rule_broken() {
    let out = Command::new(env!("CARGO_BIN_EXE_host"))
        .args(["run", "--leader-elect", "--leader-election-lease-duration", "5s", "--leader-election-renew-deadline", "10s", "--plugin"])
        .arg(common::wasm("hello"))
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("lease duration (5s) must be greater than the renew deadline (10s)"), "{err}");
}
