//! `host run` as a user runs it: the embedded cluster with a kubeconfig for
//! kubectl, probes and metrics, refusal of conflicting plugins, and a clean
//! exit on SIGTERM; `host --plugin X` (run is the default command) on the
//! embedded cluster when nothing is configured, or on the kubeconfig's cluster.

use crate::common;

use std::io::{Read, Write};
use std::process::Command;
use std::time::Duration;

use common::process::{Running, poll};
use common::wasm;

fn cache_dir() -> std::path::PathBuf {
    common::plugin_cache_dir("run")
}

fn host() -> Command {
    let mut c = Command::new(env!("CARGO_BIN_EXE_host"));
    c.env("HOST_LOG", "warn").arg("--plugin-cache-dir").arg(cache_dir());
    c
}

fn http_get(addr: &str, path: &str) -> Option<(u16, String)> {
    let mut s = std::net::TcpStream::connect(addr).ok()?;
    s.set_read_timeout(Some(Duration::from_secs(10))).ok()?;
    write!(s, "GET {path} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n\r\n").ok()?;
    let mut text = String::new();
    s.read_to_string(&mut text).ok()?;
    let code = text.split_whitespace().nth(1)?.parse().ok()?;
    let body = text.split_once("\r\n\r\n").map(|(_, b)| b.to_string()).unwrap_or_default();
    Some((code, body))
}

fn spawn(args: &[&str]) -> Running {
    let mut c = host();
    c.args(args);
    Running::start(c)
}

/// kubectl against the cluster `kubeconfig` names.
fn kubectl(kubeconfig: &std::path::Path) -> common::Kubectl {
    common::Kubectl::new(common::kubectl::system(), kubeconfig)
}

fn kubectl_available() -> bool {
    Command::new(common::kubectl::system()).arg("version").arg("--client").output().is_ok_and(|o| o.status.success())
}

#[test]
fn run_embedded_serves_kubectl_probes_and_metrics_and_exits_0_on_sigterm() {
    let dir = tempfile::tempdir().unwrap();
    let kubeconfig = dir.path().join("kubeconfig");
    let hello = wasm("hello");
    let r = spawn(&[
        "run",
        "--embedded",
        "--plugin",
        hello.to_str().unwrap(),
        "--kubeconfig-out",
        kubeconfig.to_str().unwrap(),
        "--metrics-addr",
        "127.0.0.1:0",
    ]);
    // Ports are bound (and announced) before the cluster is.
    let metrics_line = r.line_with("metrics at http://");
    let export = r.line_with("export KUBECONFIG=");
    assert_eq!(export, format!("export KUBECONFIG={}", kubeconfig.display()));
    let addr = metrics_line.trim_start_matches("metrics at http://").trim_end_matches("/metrics").to_string();
    assert_eq!(http_get(&addr, "/healthz").map(|r| r.0), Some(200));
    poll("/readyz to turn 200", || (http_get(&addr, "/readyz")?.0 == 200).then_some(()));

    if kubectl_available() {
        let kubectl = kubectl(&kubeconfig);
        kubectl
            .apply("apiVersion: example.operator.dev/v1alpha1\nkind: Hello\nmetadata:\n  name: world\n  namespace: default\nspec:\n  greeting: Hi\n");
        poll("kubectl to show the ConfigMap the plugin created", || {
            let o = kubectl.run(&["get", "configmap", "world-greeting", "-o", "jsonpath={.data.greeting}"]);
            (String::from_utf8_lossy(&o.stdout) == "Hi").then_some(())
        });
        let (_, body) = poll("a successful reconcile in the metrics", || {
            let r = http_get(&addr, "/metrics")?;
            r.1.contains("controller_runtime_reconcile_total{controller=\"hello\",result=\"success\"}").then_some(r)
        });
        assert!(body.contains("workqueue_adds_total{name=\"hello\"}"), "{body}");
    }

    let mut r = r;
    let pid = r.child.id().to_string();
    assert!(Command::new("kill").args(["-TERM", &pid]).status().unwrap().success());
    let status = poll("the host to exit", || r.child.try_wait().unwrap());
    assert_eq!(status.code(), Some(0), "SIGTERM drains and exits 0");
}

#[test]
fn run_refuses_two_plugins_for_one_parent_kind_with_exit_code_2() {
    let hello = wasm("hello");
    let o = host()
        .args(["run", "--embedded", "--metrics-addr", "0", "--plugin", hello.to_str().unwrap(), "--plugin", hello.to_str().unwrap()])
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(2));
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(err.contains("both reconcile example.operator.dev/v1alpha1/Hello"), "{err}");
}

#[test]
fn run_without_a_reachable_cluster_exits_1_with_the_cause() {
    let dir = tempfile::tempdir().unwrap();
    let kubeconfig = dir.path().join("config");
    std::fs::write(
        &kubeconfig,
        "apiVersion: v1\nkind: Config\nclusters:\n- name: c\n  cluster:\n    server: http://127.0.0.1:1\nusers:\n- name: u\n  user: {}\ncontexts:\n- name: c\n  context: {cluster: c, user: u}\ncurrent-context: c\n",
    )
    .unwrap();
    let hello = wasm("hello");
    let o = host().env("KUBECONFIG", &kubeconfig).args(["run", "--metrics-addr", "0", "--plugin", hello.to_str().unwrap()]).output().unwrap();
    assert_eq!(o.status.code(), Some(1));
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(err.contains("cannot install CRD hellos.example.operator.dev"), "{err}");
}

#[test]
fn run_watch_swaps_a_changed_plugin_file_without_a_restart() {
    let dir = tempfile::tempdir().unwrap();
    let kubeconfig = dir.path().join("kubeconfig");
    let plugin = dir.path().join("plugin.wasm");
    std::fs::copy(wasm("versioned"), &plugin).unwrap();
    let mut r = spawn(&[
        "run",
        "--embedded",
        "--plugin",
        plugin.to_str().unwrap(),
        "--watch",
        "--watch-interval",
        "100ms",
        "--kubeconfig-out",
        kubeconfig.to_str().unwrap(),
        "--metrics-addr",
        "0",
    ]);
    r.line_with("export KUBECONFIG=");
    let kubectl = kubectl(&kubeconfig);
    let widget = "apiVersion: swap.test.operator-host.dev/v1\nkind: Widget\nmetadata:\n  name: w\n  namespace: default\nspec: {}\n";
    poll("kubectl apply of a Widget (once its CRD is served)", || {
        kubectl.run_stdin(&["apply", "-f", "-"], Some(widget.as_bytes())).status.success().then_some(())
    });
    let version = || {
        let o = kubectl.run(&["get", "configmap", "-l", "widget=w", "-o", "jsonpath={.items[*].data.version}"]);
        String::from_utf8_lossy(&o.stdout).to_string()
    };
    poll("the child at version 1", || (version() == "1").then_some(()));

    // Replace the file the way a build does (write elsewhere, rename over it).
    let staged = dir.path().join("plugin.wasm.new");
    std::fs::copy(common::built_plugin("versioned-v2"), &staged).unwrap();
    std::fs::rename(&staged, &plugin).unwrap();
    poll("the child at version 2", || (version() == "2").then_some(()));
    assert!(r.child.try_wait().unwrap().is_none(), "the same host process swapped the plugin");
}

/// A CronJob sample applied with kubectl turns `Reconciled` (the host's
/// condition) on the cluster `kubeconfig` names.
fn cronjob_sample_is_reconciled(kubeconfig: &std::path::Path) {
    let sample = std::fs::read_to_string(common::workspace_root().join("plugins/cronjob/samples/batch_v1_cronjob.yaml")).unwrap();
    let kubectl = kubectl(kubeconfig);
    poll("kubectl apply of the CronJob sample (once its CRD is served)", || {
        kubectl.run_stdin(&["apply", "-f", "-"], Some(sample.as_bytes())).status.success().then_some(())
    });
    poll("the CronJob controller to reconcile the sample", || {
        let o = kubectl.run(&[
            "get",
            "cronjobs.batch.tutorial.kubebuilder.io",
            "cronjob-sample",
            "-o",
            "jsonpath={.status.conditions[?(@.type==\"Reconciled\")].status}",
        ]);
        (String::from_utf8_lossy(&o.stdout) == "True").then_some(())
    });
}

/// `host` with no kubeconfig anywhere and not in a Pod: HOME without
/// `.kube/config`, no KUBECONFIG, no KUBERNETES_SERVICE_HOST.
fn host_without_a_cluster(home: &std::path::Path) -> Command {
    let mut c = host();
    c.env("HOME", home).env_remove("KUBECONFIG").env_remove("KUBERNETES_SERVICE_HOST").env_remove("KUBERNETES_SERVICE_PORT");
    c
}

#[test]
fn host_plugin_without_any_kubeconfig_says_so_once_and_runs_the_cronjob_controller_on_the_embedded_cluster() {
    let home = tempfile::tempdir().unwrap();
    let cronjob = common::built_plugin("cronjob");
    let mut cmd = host_without_a_cluster(home.path());
    cmd.args(["--plugin", cronjob.to_str().unwrap(), "--metrics-addr", "0"]);
    let r = Running::start(cmd);
    let notice = r.line_with("no kubeconfig");
    assert_eq!(
        notice,
        "no kubeconfig (KUBECONFIG is unset or names no existing file, and ~/.kube/config does not exist) and not running in a Pod: starting the embedded cluster (as --embedded)"
    );
    let export = r.line_with("export KUBECONFIG=");
    let kubeconfig = std::path::PathBuf::from(export.trim_start_matches("export KUBECONFIG="));
    cronjob_sample_is_reconciled(&kubeconfig);
    // That kubeconfig is the process's own, in the temp dir: gone with it.
    let mut r = r;
    assert!(Command::new("kill").args(["-TERM", &r.child.id().to_string()]).status().unwrap().success());
    assert!(r.child.wait().unwrap().success());
    assert!(!kubeconfig.exists(), "{} outlived the cluster it names", kubeconfig.display());
}

#[test]
fn host_plugin_with_kubeconfig_runs_against_that_cluster() {
    let dir = tempfile::tempdir().unwrap();
    let kubeconfig = dir.path().join("kubeconfig");
    // The cluster in another process, as any cluster a kubeconfig names.
    let mut cluster = host();
    cluster.args(["cluster", "--kubeconfig-out", kubeconfig.to_str().unwrap()]);
    let c = Running::start(cluster);
    c.line_with("export KUBECONFIG=");
    let cronjob = common::built_plugin("cronjob");
    let mut cmd = host_without_a_cluster(dir.path());
    cmd.env("KUBECONFIG", &kubeconfig).args(["--plugin", cronjob.to_str().unwrap(), "--metrics-addr", "127.0.0.1:0"]);
    let r = Running::start(cmd);
    r.line_with("metrics at http://");
    cronjob_sample_is_reconciled(&kubeconfig);
    let mut r = r;
    let _ = r.child.kill();
    let _ = r.child.wait();
    let printed: Vec<String> = r.lines.try_iter().collect();
    assert!(printed.iter().all(|l| !l.contains("embedded") && !l.contains("KUBECONFIG")), "started no cluster of its own: {printed:?}");
}

#[test]
fn a_taken_metrics_port_fails_before_the_kubeconfig_is_announced() {
    let taken = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = taken.local_addr().unwrap().to_string();
    let o = host().args(["run", "--embedded", "--plugin", wasm("hello").to_str().unwrap(), "--metrics-addr", &addr]).output().unwrap();
    assert_eq!(o.status.code(), Some(2));
    let stdout = String::from_utf8_lossy(&o.stdout);
    assert!(!stdout.contains("export KUBECONFIG="), "announced a cluster it then abandoned: {stdout}");
    assert!(String::from_utf8_lossy(&o.stderr).contains(&format!("--metrics-addr {addr}")), "{}", String::from_utf8_lossy(&o.stderr));
}

#[test]
fn kubectl_create_configmap_from_the_gzipped_cronjob_artifact_hot_swaps_it_into_a_running_host() {
    let dir = tempfile::tempdir().unwrap();
    let kubeconfig = dir.path().join("kubeconfig");
    let r = spawn(&["--embedded", "--plugin-configmap", "default/plugins", "--kubeconfig-out", kubeconfig.to_str().unwrap(), "--metrics-addr", "0"]);
    r.line_with("export KUBECONFIG=");
    let plain = common::built_plugin("cronjob");
    let gz = plain.with_extension("wasm.gz");
    assert!(gz.exists(), "{} is missing: build the plugins again with `cargo xtask build`", gz.display());
    // The embedded server refuses what a real one refuses: the plain build is over 1 MiB.
    let kubectl = kubectl(&kubeconfig);
    if std::fs::metadata(&plain).unwrap().len() > 1024 * 1024 {
        let o = kubectl.run(&["create", "configmap", "plain", &format!("--from-file={}", plain.display())]);
        assert!(!o.status.success(), "the plain cronjob.wasm fit a ConfigMap");
        assert!(String::from_utf8_lossy(&o.stderr).contains("Too long: must have at most 1048576 bytes"), "{}", String::from_utf8_lossy(&o.stderr));
    }
    let o = kubectl.run(&["create", "configmap", "plugins", &format!("--from-file={}", gz.display())]);
    assert!(o.status.success(), "kubectl create configmap plugins: {}", String::from_utf8_lossy(&o.stderr));
    cronjob_sample_is_reconciled(&kubeconfig);
    // The host records PluginLoaded after it starts the controller, so the sample can be
    // reconciled first: wait for the Event.
    poll("the PluginLoaded Event", || {
        let events = kubectl.run(&["get", "events", "-o", "jsonpath={.items[*].reason}"]);
        String::from_utf8_lossy(&events.stdout).contains("PluginLoaded").then_some(())
    });
}
