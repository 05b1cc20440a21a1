//! `host run --embedded` flags for the embedded cluster, as a user runs them: `--data-dir`
//! (objects survive `kill -9` and a restart), `--fault` and `OPERATOR_HOST_FAULTS` (injected,
//! visible and counted at `/debug/faults`), `--sim-nodes`; bad specs and damaged data files
//! are refused with exit code 2 and a clear message.

use crate::common;

use std::path::Path;
use std::process::{Command, Stdio};

use common::process::Running;
use common::wasm;

fn host(cache: &Path) -> Command {
    let mut c = Command::new(env!("CARGO_BIN_EXE_host"));
    c.env("HOST_LOG", "warn").env_remove("OPERATOR_HOST_FAULTS").arg("--plugin-cache-dir").arg(cache);
    c
}

/// Starts the host and waits for its kubeconfig line (the cluster is up).
fn start(cmd: Command) -> Running {
    let running = Running::start(cmd);
    running.line_with("export KUBECONFIG=");
    running
}

fn run_args<'a>(kubeconfig: &'a Path, data: &'a Path) -> Vec<String> {
    let hello = wasm("hello");
    [
        "run",
        "--embedded",
        "--metrics-addr",
        "0",
        "--plugin",
        hello.to_str().unwrap(),
        "--kubeconfig-out",
        kubeconfig.to_str().unwrap(),
        "--data-dir",
        data.to_str().unwrap(),
    ]
    .iter()
    .map(|s| s.to_string())
    .collect()
}

#[test]
fn data_dir_faults_and_nodes_flags_work_across_a_kill_9_restart() {
    let dir = tempfile::tempdir().unwrap();
    let (kubeconfig, data, cache) = (dir.path().join("kubeconfig"), dir.path().join("data"), dir.path().join("cache"));
    let kubectl = common::Kubectl::new(common::kubectl::system(), &kubeconfig);

    let mut cmd = host(&cache);
    cmd.args(run_args(&kubeconfig, &data)).args(["--fault", "500:resource=secrets,verb=list", "--sim-nodes", "3", "--fault-seed", "7"]);
    cmd.env("OPERATOR_HOST_FAULTS", "ignored-when-flags-are-given");
    let running = start(cmd);
    assert_eq!(kubectl.ok(&["get", "nodes", "-o", "name"]).lines().count(), 3, "--sim-nodes 3");
    let secrets = kubectl.run(&["get", "secrets"]);
    let refusal = String::from_utf8_lossy(&secrets.stderr);
    assert!(!secrets.status.success() && refusal.contains("injected fault"), "the injected 500: {refusal}");
    let faults: serde_json::Value = serde_json::from_str(&kubectl.ok(&["get", "--raw", "/debug/faults"])).unwrap();
    assert_eq!(faults["seed"], 7);
    assert_eq!(faults["rules"][0]["spec"], "500:resource=secrets,verb=list");
    assert!(faults["rules"][0]["injected"].as_u64().unwrap() >= 1, "{faults}");
    kubectl.ok(&["create", "configmap", "survivor", "--from-literal=k=v"]);
    running.kill_9();

    // Restart on the same directory, faults from the environment this time.
    let mut cmd = host(&cache);
    cmd.args(run_args(&kubeconfig, &data)).env("OPERATOR_HOST_FAULTS", "latency:1ms,resource=configmaps;409:share=0.5,verb=update,resource=secrets");
    let running = start(cmd);
    assert_eq!(kubectl.ok(&["get", "configmap", "survivor", "-o", "jsonpath={.data.k}"]), "v", "the acknowledged write survived kill -9");
    assert_eq!(kubectl.ok(&["get", "nodes", "-o", "name"]).lines().count(), 3, "the nodes were persisted too");
    let faults: serde_json::Value = serde_json::from_str(&kubectl.ok(&["get", "--raw", "/debug/faults"])).unwrap();
    assert_eq!(faults["rules"].as_array().unwrap().len(), 2, "{faults}");
    // The first run's 500 rule is not persisted (`ok` fails the test with kubectl's output otherwise).
    kubectl.ok(&["get", "secrets"]);
    drop(running);
}

fn refused(cmd: &mut Command) -> String {
    let out = cmd.stdout(Stdio::null()).stderr(Stdio::piped()).output().unwrap();
    assert_eq!(out.status.code(), Some(2), "{}", String::from_utf8_lossy(&out.stderr));
    String::from_utf8_lossy(&out.stderr).into_owned()
}

#[test]
fn bad_fault_specs_and_damaged_data_files_are_refused_with_exit_code_2() {
    let dir = tempfile::tempdir().unwrap();
    let (kubeconfig, data, cache) = (dir.path().join("kubeconfig"), dir.path().join("data"), dir.path().join("cache"));
    let err = refused(host(&cache).args(run_args(&kubeconfig, &data)).args(["--fault", "418:share=0.1"]));
    assert!(err.contains("unknown kind `418`"), "{err}");
    let err = refused(host(&cache).args(run_args(&kubeconfig, &data)).env("OPERATOR_HOST_FAULTS", "500:share=0.1;drop-watch"));
    assert!(err.contains("drop-watch needs `every=DURATION`"), "{err}");
    let err = refused(host(&cache).args(["run", "--plugin", wasm("hello").to_str().unwrap(), "--fault", "500"]));
    assert!(err.contains("needs --embedded"), "{err}");

    std::fs::create_dir_all(&data).unwrap();
    std::fs::write(data.join("store.redb"), b"this is not a redb file").unwrap();
    let err = refused(host(&cache).args(run_args(&kubeconfig, &data)));
    assert!(err.contains("cannot open data file") && err.contains("store.redb"), "{err}");
}
