//! `--api-server-only`: `host cluster` and `host run --embedded` serve the API server alone, as
//! envtest runs kube-apiserver, with none of the simulated cluster parts.

use std::process::{Command, Stdio};
use std::time::Duration;

use e2e::{Host, built, eventually, json};

const JOB: &str = r#"
apiVersion: batch/v1
kind: Job
metadata:
  name: nobody-runs-me
spec:
  template:
    spec:
      restartPolicy: Never
      containers:
      - name: main
        image: busybox
"#;

/// What a simulated cluster or kube-controller-manager would have done within a second does not
/// happen: no Node, a Job never started, a dependent of a deleted owner left in place, no
/// `default` ServiceAccount or `kube-root-ca.crt` in any namespace (envtest's kube-apiserver
/// runs with ServiceAccount admission disabled and no controller manager), and a deleted
/// namespace stays Terminating (no namespace controller empties it).
fn nothing_but_the_api_server_acts(kubectl: impl Fn(&[&str], Option<&str>) -> (bool, String)) {
    let items = |args: &[&str]| {
        let mut all = args.to_vec();
        all.extend(["-o", "json"]);
        let (ok, out) = kubectl(&all, None);
        assert!(ok, "{out}");
        serde_json::from_str::<e2e::Value>(&out).unwrap()["items"].clone()
    };
    assert_eq!(items(&["get", "nodes"]), json!([]), "no Nodes");
    let (ok, out) = kubectl(&["create", "namespace", "envtest"], None);
    assert!(ok, "{out}");
    let (ok, out) = kubectl(&["create", "configmap", "mine", "-n", "envtest"], None);
    assert!(ok, "{out}");
    let (ok, out) = kubectl(&["apply", "-f", "-"], Some(JOB));
    assert!(ok, "{out}");
    let (ok, owner) = kubectl(&["create", "configmap", "owner", "-o", "json"], None);
    assert!(ok, "{owner}");
    let owner: e2e::Value = serde_json::from_str(&owner).unwrap();
    let dependent = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "dependent", "ownerReferences": [
        {"apiVersion": "v1", "kind": "ConfigMap", "name": "owner", "uid": owner["metadata"]["uid"]}]}});
    let (ok, out) = kubectl(&["apply", "-f", "-"], Some(&dependent.to_string()));
    assert!(ok, "{out}");
    let (ok, out) = kubectl(&["delete", "configmap", "owner"], None);
    assert!(ok, "{out}");
    std::thread::sleep(Duration::from_millis(1500));
    let (ok, job) = kubectl(&["get", "job", "nobody-runs-me", "-o", "json"], None);
    assert!(ok, "{job}");
    assert_eq!(serde_json::from_str::<e2e::Value>(&job).unwrap().get("status").and_then(|s| s.get("startTime")), None, "no Job runner: {job}");
    let (ok, out) = kubectl(&["get", "configmap", "dependent"], None);
    assert!(ok, "no garbage collector, the dependent stays: {out}");
    assert_eq!(items(&["get", "serviceaccounts", "--all-namespaces"]), json!([]), "no ServiceAccount anywhere");
    let names: Vec<e2e::Value> =
        items(&["get", "configmaps", "-n", "envtest"]).as_array().unwrap().iter().map(|c| c["metadata"]["name"].clone()).collect();
    assert_eq!(names, [json!("mine")], "only what the test wrote");
    let (ok, out) = kubectl(&["delete", "namespace", "envtest", "--wait=false"], None);
    assert!(ok, "{out}");
    let (ok, phase) = kubectl(&["get", "namespace", "envtest", "-o", "jsonpath={.status.phase}"], None);
    assert!(ok && phase == "Terminating", "no namespace controller: the namespace stays Terminating: {phase}");
    assert!(kubectl(&["get", "configmap", "mine", "-n", "envtest"], None).0, "and keeps its contents");
}

#[test]
fn host_run_embedded_api_server_only_runs_no_simulated_part() {
    let host = Host::start(&["--api-server-only"]);
    nothing_but_the_api_server_acts(|args, stdin| {
        let o = host.kubectl_stdin(args, stdin);
        (o.status.success(), String::from_utf8_lossy(&o.stdout).into_owned() + &String::from_utf8_lossy(&o.stderr))
    });
}

#[test]
fn host_cluster_api_server_only_runs_no_simulated_part_and_the_default_has_a_node() {
    let dir = tempfile::tempdir().unwrap();
    for (extra, nodes) in [(None, 1), (Some("--api-server-only"), 0)] {
        let kubeconfig = dir.path().join(format!("kubeconfig-{nodes}"));
        let mut cluster = Command::new(built("release/host"))
            .env("HOST_LOG", "warn")
            .args(["cluster", "--kubeconfig-out"])
            .arg(&kubeconfig)
            .args(extra)
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .expect("start host cluster");
        let kubectl = |args: &[&str], stdin: Option<&str>| {
            let o = e2e::Kubectl::new(e2e::kubectl(), &kubeconfig).run_stdin(args, stdin.map(str::as_bytes));
            (o.status.success(), String::from_utf8_lossy(&o.stdout).into_owned() + &String::from_utf8_lossy(&o.stderr))
        };
        eventually("host cluster serves", || kubectl(&["get", "--raw", "/readyz"], None).0.then_some(()));
        if nodes == 0 {
            nothing_but_the_api_server_acts(kubectl);
        } else {
            let (ok, out) = kubectl(&["get", "nodes", "-o", "name"], None);
            assert!(ok && out.trim() == "node/node-1", "{out}");
        }
        let _ = cluster.kill();
        let _ = cluster.wait();
    }
}
