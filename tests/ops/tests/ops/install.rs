//! `helm install` and `helm upgrade` of the chart on the real control plane.
//!
//! The control plane's nodes are kwok's: Pods are scheduled and marked
//! Running and Ready, but no container runs, so the Pods' readiness proves
//! only that the Deployment rolled out. That the host itself becomes Ready
//! is shown by running the built host as the release's Pod would run it:
//! the container arguments read back from the Deployment the release made,
//! and credentials of the release's ServiceAccount (a token from `kubectl
//! create token`), so the release's RBAC is the only authority it has. It
//! must answer /readyz, take the Lease, reconcile a CronJob, and after the
//! upgrade (webhooks on) create its certificate Secret and write its webhook
//! configurations, with no request refused.

use std::path::Path;
use std::time::Duration;

use ops::{Helm, chart_dir, helm_binary};
use real_cluster::{ControlPlane, HostProcess, Kubectl, Value, built, eventually, eventually_within, free_port, repo_file};

const RELEASE: &str = "operator-host";
const NAMESPACE: &str = "operator-host-system";

/// The container's arguments as the Deployment holds them.
fn container_args(admin: &Kubectl) -> Vec<String> {
    let deployment = admin.json(&["get", "deployment", RELEASE, "-n", NAMESPACE]);
    deployment["spec"]["template"]["spec"]["containers"][0]["args"].as_array().unwrap().iter().map(|a| a.as_str().unwrap().to_string()).collect()
}

/// The Pod's arguments for a host outside the Pod: `run` and the metrics
/// address are [`HostProcess`]'s (a free loopback port), the webhook listens
/// on loopback too; everything else as rendered.
fn outside_the_pod(args: &[String]) -> Vec<String> {
    assert_eq!(args.first().map(String::as_str), Some("run"), "{args:?}");
    let mut out = Vec::new();
    let mut rest = args[1..].iter();
    while let Some(a) = rest.next() {
        match a.as_str() {
            "--metrics-addr" => {
                rest.next();
            }
            "--webhook-addr" => {
                rest.next();
                out.extend(["--webhook-addr".to_string(), format!("127.0.0.1:{}", free_port())]);
            }
            _ => out.push(a.clone()),
        }
    }
    out
}

/// Runs the host with `args` as the release's ServiceAccount; returns it ready.
fn host_as_release(cluster: &ControlPlane, kubeconfig: &Path, name: &str, args: &[String]) -> HostProcess {
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let mut host = HostProcess::start(name, kubeconfig, &cluster.dir().join("logs"), &args);
    host.wait_ready();
    host
}

fn refusals(host: &HostProcess) -> Vec<String> {
    host.log().lines().filter(|l| l.contains("forbidden") || l.contains("Forbidden")).map(str::to_string).collect()
}

#[test]
fn helm_install_and_upgrade_on_the_real_control_plane_and_the_host_runs_as_the_release_set_it_up() {
    let Some(program) = helm_binary() else { return };
    let Some(cluster) = ControlPlane::builder().start() else { return };
    let admin = cluster.admin();
    let helm = Helm::new(program, &cluster.dir().join("helm")).with_kubeconfig(&cluster.kubeconfig);
    let chart = chart_dir().display().to_string();

    // The plugins' ConfigMap is made beside the release, as the chart's README says.
    admin.ok(&["create", "namespace", NAMESPACE]);
    let files: Vec<String> =
        ["cronjob", "mydeployment"].iter().map(|p| format!("--from-file={}", built(&format!("plugins/{p}.wasm.gz")).display())).collect();
    let mut create = vec!["create", "configmap", "operator-host-plugins", "-n", NAMESPACE];
    create.extend(files.iter().map(String::as_str));
    admin.ok(&create);

    let installed = helm.ok(&["install", RELEASE, &chart, "--namespace", NAMESPACE, "--set", "image.tag=test"]);
    assert!(installed.contains("STATUS: deployed"), "{installed}");
    for object in [
        "crd/cronjobs.batch.tutorial.kubebuilder.io",
        "crd/mydeployments.apps.example.com",
        "clusterrole/operator-host-manager-role",
        "clusterrolebinding/operator-host-manager-rolebinding",
    ] {
        admin.ok(&["get", object]);
    }
    for object in ["serviceaccount/operator-host", "role/operator-host-leader-election-role", "service/operator-host-metrics"] {
        admin.ok(&["get", object, "-n", NAMESPACE]);
    }
    // The Deployment rolls out on kwok's nodes (Pods marked Ready, no container runs).
    eventually("the Deployment's 2 replicas to be available", || {
        let d = admin.json(&["get", "deployment", RELEASE, "-n", NAMESPACE]);
        (d["status"]["availableReplicas"] == 2).then_some(())
    });

    let token = admin.ok(&["create", "token", RELEASE, "-n", NAMESPACE, "--duration=1h"]);
    let kubeconfig = cluster.dir().join("release.kubeconfig");
    cluster.kubeconfig_with_token(&kubeconfig, RELEASE, token.trim());
    let installed_args = container_args(&admin);
    let mut host = host_as_release(&cluster, &kubeconfig, "installed", &outside_the_pod(&installed_args));
    eventually("the host to hold the release's Lease", || {
        let lease = admin.json(&["get", "lease", RELEASE, "-n", NAMESPACE]);
        lease["spec"]["holderIdentity"].is_string().then_some(())
    });
    admin.apply(&std::fs::read_to_string(repo_file("plugins/cronjob/samples/batch_v1_cronjob.yaml")).unwrap());
    // The sample runs every minute: its first Job comes within one.
    eventually_within("a Job of the CronJob", Duration::from_secs(80), || {
        let jobs = admin.items(&["get", "jobs", "-n", "default"]);
        jobs.into_iter().find(|j| j["metadata"]["ownerReferences"][0]["name"] == "cronjob-sample")
    });
    assert!(host.metric("controller_runtime_reconcile_total{controller=\"cronjob\",") >= 1.0, "{}", host.metrics());
    assert_eq!(host.metric("controller_runtime_reconcile_errors_total{controller=\"cronjob\"}"), 0.0, "{}", host.metrics());
    assert_eq!(refusals(&host), Vec::<String>::new(), "the release's RBAC refused the host");
    host.kill();

    // Upgrade: one replica, webhooks on (Ignore: the API server cannot reach
    // a Service whose Pods run no container, and must not refuse CronJobs for it).
    let upgraded = helm.ok(&[
        "upgrade",
        RELEASE,
        &chart,
        "--namespace",
        NAMESPACE,
        "--set",
        "image.tag=test",
        "--set",
        "replicas=1",
        "--set",
        "webhook.enabled=true",
        "--set",
        "webhook.failurePolicy=Ignore",
    ]);
    assert!(upgraded.contains("REVISION: 2") && upgraded.contains("STATUS: deployed"), "{upgraded}");
    let history: Value = serde_json::from_str(&helm.ok(&["history", RELEASE, "--namespace", NAMESPACE, "-o", "json"])).unwrap();
    assert_eq!(history.as_array().unwrap().len(), 2, "{history:#}");
    eventually("the Deployment to run 1 replica", || {
        let d = admin.json(&["get", "deployment", RELEASE, "-n", NAMESPACE]);
        (d["spec"]["replicas"] == 1 && d["status"]["replicas"] == 1).then_some(())
    });
    admin.ok(&["get", "service/operator-host-webhook", "role/operator-host-webhook-cert-role", "-n", NAMESPACE]);
    let upgraded_args = container_args(&admin);
    assert!(upgraded_args.contains(&"--webhook-configure".to_string()), "{upgraded_args:?}");

    let host = host_as_release(&cluster, &kubeconfig, "upgraded", &outside_the_pod(&upgraded_args));
    let secret = eventually("the webhook certificate Secret the host creates", || {
        let out = admin.run(&["get", "secret", "operator-host-webhook-cert", "-n", NAMESPACE, "-o", "json"]);
        out.status.success().then(|| serde_json::from_slice::<Value>(&out.stdout).unwrap())
    });
    assert!(secret["data"]["tls.crt"].is_string(), "{secret:#}");
    for kind in ["mutatingwebhookconfiguration", "validatingwebhookconfiguration"] {
        let config = eventually(&format!("the host's {kind}"), || {
            let out = admin.run(&["get", kind, RELEASE, "-o", "json"]);
            out.status.success().then(|| serde_json::from_slice::<Value>(&out.stdout).unwrap())
        });
        let service = &config["webhooks"][0]["clientConfig"]["service"];
        assert_eq!((service["namespace"].as_str(), service["name"].as_str()), (Some(NAMESPACE), Some("operator-host-webhook")), "{config:#}");
        assert_eq!(config["webhooks"][0]["failurePolicy"], "Ignore", "{config:#}");
    }
    assert_eq!(refusals(&host), Vec::<String>::new(), "the upgraded release's RBAC refused the host");

    helm.ok(&["uninstall", RELEASE, "--namespace", NAMESPACE]);
    eventually("the Deployment to be gone", || (!admin.run(&["get", "deployment", RELEASE, "-n", NAMESPACE]).status.success()).then_some(()));
}
