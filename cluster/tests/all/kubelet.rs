//! The kubelet's Pods seen through the real kubectl (/usr/bin/kubectl) over HTTP: logs of the
//! simulated containers, ephemeral containers, and eviction against a PodDisruptionBudget the
//! disruption controller keeps.

use crate::common::kubectl::Cluster;
use crate::simulated;
use serde_json::json;
use simulated_cluster::ClusterConfig;

const RUNNING_POD: &str = "apiVersion: v1
kind: Pod
metadata:
  name: web
  labels: {app: web}
spec:
  containers:
  - {name: app, image: nginx:1}
";

/// Wait until kubectl's jsonpath output is `want`.
async fn until(c: &Cluster, args: &[&str], want: &str) {
    let what = format!("kubectl {args:?} prints {want:?}");
    operator_test_kit::until(&what, std::time::Duration::from_secs(60), || async { c.kubectl(args).await.stdout.trim() == want }).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pod_log_ephemeral_containers_and_eviction_behave_as_upstream() {
    let c = simulated(ClusterConfig { ready_after: std::time::Duration::ZERO, ..Default::default() }).await;
    c.apply("pod.yaml", RUNNING_POD).await;
    until(&c, &["get", "pod", "web", "-o", "jsonpath={.status.phase}"], "Running").await;
    // The simulated container prints nothing.
    assert_eq!(c.ok(&["logs", "web"]).await, "");
    let e = c.fails(&["logs", "web", "-c", "nope"]).await;
    assert!(e.contains("container nope is not valid for pod web"), "{e}");
    let e = c.fails(&["logs", "web", "--previous"]).await;
    assert!(e.contains(r#"previous terminated container "app" in pod "web" not found"#), "{e}");
    let two =
        "apiVersion: v1\nkind: Pod\nmetadata: {name: two}\nspec:\n  containers:\n  - {name: a, image: busybox}\n  - {name: b, image: busybox}\n";
    c.apply("two.yaml", two).await;
    let e = c.fails(&["get", "--raw", "/api/v1/namespaces/default/pods/two/log"]).await;
    assert!(e.contains("a container name must be specified for pod two, choose one of: [a b]"), "{e}");
    // A crash-looping container has a terminated last state: its logs (and --previous) are served.
    let crashing = RUNNING_POD.replace("name: web\n", "name: crash\n  annotations: {sim.operator-host.dev/restarts: \"2\"}\n");
    c.apply("crash.yaml", &crashing).await;
    until(&c, &["get", "pod", "crash", "-o", "jsonpath={.status.containerStatuses[0].state.waiting.reason}"], "CrashLoopBackOff").await;
    c.ok(&["logs", "crash"]).await;

    // kubectl debug adds an ephemeral container through pods/ephemeralcontainers.
    c.ok(&["debug", "web", "--image=busybox:1.36", "--container=debugger"]).await;
    assert_eq!(c.ok(&["get", "pod", "web", "-o", "jsonpath={.spec.ephemeralContainers[0].image}"]).await, "busybox:1.36");
    // A main-resource write cannot take it away.
    c.ok(&["patch", "pod", "web", "--type=json", "-p", r#"[{"op":"remove","path":"/spec/ephemeralContainers"}]"#]).await;
    assert_eq!(c.ok(&["get", "pod", "web", "-o", "jsonpath={.spec.ephemeralContainers[0].name}"]).await, "debugger");

    // Eviction honours the PodDisruptionBudget.
    c.apply(
        "pdb.yaml",
        "apiVersion: policy/v1\nkind: PodDisruptionBudget\nmetadata: {name: web}\nspec:\n  minAvailable: 1\n  selector: {matchLabels: {app: web}}\n",
    )
    .await;
    let eviction = c.file(
        "eviction.json",
        &json!({"apiVersion": "policy/v1", "kind": "Eviction", "metadata": {"name": "web", "namespace": "default"}}).to_string(),
    );
    let evict = ["create", "--raw", "/api/v1/namespaces/default/pods/web/eviction", "-f", eviction.to_str().unwrap()];
    until(&c, &["get", "pdb", "web", "-o", "jsonpath={.status.currentHealthy}/{.status.disruptionsAllowed}"], "1/0").await;
    let e = c.fails(&evict).await;
    assert!(e.contains("Cannot evict pod as it would violate the pod's disruption budget."), "{e}");
    assert_eq!(c.ok(&["get", "pod", "web", "-o", "name"]).await.trim(), "pod/web");
    // With a second healthy pod the budget allows one disruption.
    c.apply("pod2.yaml", &RUNNING_POD.replace("name: web\n", "name: web2\n")).await;
    until(&c, &["get", "pdb", "web", "-o", "jsonpath={.status.currentHealthy}/{.status.disruptionsAllowed}"], "2/1").await;
    c.ok(&evict).await;
    let pdb = c.json(&["get", "pdb", "web"]).await;
    assert!(pdb["status"]["disruptedPods"].get("web").is_some() || pdb["status"]["disruptionsAllowed"] == 0, "{pdb}");
    until(&c, &["get", "pod", "web", "--ignore-not-found", "-o", "name"], "").await;
}
