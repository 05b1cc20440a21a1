//! deploy/: the checked-in generated manifests are what `host generate`
//! produces from the shipped plugins now, the samples are the plugins' own,
//! and the real kubectl applies the whole kustomize tree (with the built,
//! gzipped plugins placed where deploy/plugins/ expects them) to the embedded
//! server, which enforces a real server's 1 MiB ConfigMap limit.

use crate::common;

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use apiserver::ApiServer;
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::{ConfigMap, Namespace, Service, ServiceAccount};
use k8s_openapi::api::rbac::v1::{ClusterRole, ClusterRoleBinding, Role, RoleBinding};
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{Api, ApiResource, DynamicObject};

const SHIPPED: &[&str] = &["cronjob", "mydeployment"];
const NAMESPACE: &str = "operator-host-system";

fn deploy_dir() -> PathBuf {
    common::workspace_root().join("deploy")
}

/// `$CARGO_TARGET_DIR/plugins/<name>.wasm`, as `cargo xtask build` leaves them.
fn shipped_wasm(name: &str) -> PathBuf {
    let target = std::env::var_os("CARGO_TARGET_DIR").map(PathBuf::from).unwrap_or_else(|| common::workspace_root().join("target"));
    let path = target.join("plugins").join(format!("{name}.wasm"));
    assert!(path.exists(), "{} is missing: build the plugins first with `cargo xtask build`", path.display());
    path
}

/// `$CARGO_TARGET_DIR/plugins/<name>.wasm.gz`, the gzipped copy `cargo xtask build` leaves beside it.
fn shipped_gz(name: &str) -> PathBuf {
    let path = shipped_wasm(name).with_extension("wasm.gz");
    assert!(path.exists(), "{} is missing: build the plugins again with `cargo xtask build`", path.display());
    path
}

fn generate(what: &str) -> String {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_host"));
    cmd.args(["generate", what, "--no-plugin-cache"]);
    for p in SHIPPED {
        cmd.arg("--plugin").arg(shipped_wasm(p));
    }
    let out = cmd.output().unwrap();
    assert!(out.status.success(), "host generate {what}: {}", String::from_utf8_lossy(&out.stderr));
    String::from_utf8(out.stdout).unwrap()
}

fn assert_fresh(what: &str, checked_in: &str) {
    let path = deploy_dir().join(checked_in);
    let current = std::fs::read_to_string(&path).unwrap_or_default();
    let plugins: Vec<String> = SHIPPED.iter().map(|p| format!("--plugin target/plugins/{p}.wasm")).collect();
    assert!(
        current == generate(what),
        "deploy/{checked_in} is stale; regenerate it with:\n  cargo xtask build && target/release/host generate {what} {} > deploy/{checked_in}",
        plugins.join(" ")
    );
}

#[test]
fn the_checked_in_crds_are_what_host_generate_crds_prints() {
    assert_fresh("crds", "crd/crds.yaml");
}

#[test]
fn the_checked_in_rbac_is_what_host_generate_rbac_prints() {
    assert_fresh("rbac", "rbac/role.yaml");
}

/// The chart's generated files, and its copy of the rule file, are what the
/// generator writes now: the chart and deploy/ cannot drift apart.
#[test]
fn the_charts_generated_files_are_what_host_generate_chart_writes() {
    let chart = deploy_dir().join("chart/operator-host");
    let fresh = tempfile::tempdir().unwrap();
    std::fs::copy(chart.join("Chart.yaml"), fresh.path().join("Chart.yaml")).unwrap();
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_host"));
    cmd.args(["generate", "chart", "--no-plugin-cache", "--out"]).arg(fresh.path());
    for p in SHIPPED {
        cmd.arg("--plugin").arg(shipped_wasm(p));
    }
    let out = cmd.output().unwrap();
    assert!(out.status.success(), "host generate chart: {}", String::from_utf8_lossy(&out.stderr));
    let plugins: Vec<String> = SHIPPED.iter().map(|p| format!("--plugin target/plugins/{p}.wasm")).collect();
    for file in ["crds/crds.yaml", "templates/rbac.yaml"] {
        let (checked_in, generated) =
            (std::fs::read_to_string(chart.join(file)).unwrap_or_default(), std::fs::read_to_string(fresh.path().join(file)).unwrap());
        assert!(
            checked_in == generated,
            "deploy/chart/operator-host/{file} is stale; regenerate the chart's files with:\n  cargo xtask build && target/release/host generate chart {} --out deploy/chart/operator-host",
            plugins.join(" ")
        );
    }
    // Both come from the same plugins, so they hold the same CRDs.
    assert_eq!(
        std::fs::read_to_string(chart.join("crds/crds.yaml")).unwrap().split_once('\n').unwrap().1,
        std::fs::read_to_string(deploy_dir().join("crd/crds.yaml")).unwrap().split_once('\n').unwrap().1,
        "the chart's CRDs differ from deploy/crd/crds.yaml below the header"
    );
    let rules = std::fs::read_to_string(deploy_dir().join("prometheus/rules.yaml")).unwrap();
    assert!(
        std::fs::read_to_string(chart.join("files/prometheus-rules.yaml")).unwrap() == rules,
        "deploy/chart/operator-host/files/prometheus-rules.yaml differs from deploy/prometheus/rules.yaml: copy it again"
    );
}

#[test]
fn host_generate_chart_refuses_a_directory_that_is_not_a_chart() {
    let dir = tempfile::tempdir().unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_host"))
        .args(["generate", "chart", "--no-plugin-cache", "--plugin"])
        .arg(shipped_wasm("cronjob"))
        .arg("--out")
        .arg(dir.path())
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("no Chart.yaml there"), "{}", String::from_utf8_lossy(&out.stderr));
}

#[test]
fn the_samples_are_copies_of_the_plugins_own() {
    for (copy, original) in [("batch_v1_cronjob.yaml", "plugins/cronjob/samples"), ("my-deployment-instance.yaml", "plugins/mydeployment/samples")] {
        let a = std::fs::read_to_string(deploy_dir().join("samples").join(copy)).unwrap();
        let b = std::fs::read_to_string(common::workspace_root().join(original).join(copy)).unwrap();
        assert!(a == b, "deploy/samples/{copy} differs from {original}/{copy}: copy it again");
    }
}

fn copy_tree(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for entry in std::fs::read_dir(from).unwrap() {
        let entry = entry.unwrap();
        let target = to.join(entry.file_name());
        if entry.file_type().unwrap().is_dir() {
            copy_tree(&entry.path(), &target);
        } else if entry.path().extension().is_none_or(|e| e != "wasm" && e != "gz") {
            std::fs::copy(entry.path(), target).unwrap();
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kubectl_apply_k_of_deploy_creates_every_object_and_the_host_runs_the_samples_from_its_configmap() {
    let dir = tempfile::tempdir().unwrap();
    let tree = dir.path().join("deploy");
    copy_tree(&deploy_dir(), &tree);
    for p in SHIPPED {
        std::fs::copy(shipped_gz(p), tree.join("plugins").join(format!("{p}.wasm.gz"))).unwrap();
    }
    let server = ApiServer::new();
    let handle = server.serve_on(SocketAddr::from(([127, 0, 0, 1], 0))).await.unwrap();
    let kubeconfig = dir.path().join("kubeconfig");
    handle.write_kubeconfig(&kubeconfig).unwrap();
    let client = server.kube_client();
    let kubectl = common::Kubectl::new(common::kubectl::system(), &kubeconfig);

    let tree_arg = tree.to_str().unwrap();
    kubectl.ok_async(&["apply", "--server-side", "-k", tree_arg]).await;
    // Applying again changes nothing and conflicts with nothing.
    kubectl.ok_async(&["apply", "--server-side", "-k", tree_arg]).await;

    Api::<Namespace>::all(client.clone()).get(NAMESPACE).await.expect("the namespace");
    let crds = Api::<CustomResourceDefinition>::all(client.clone());
    for name in ["cronjobs.batch.tutorial.kubebuilder.io", "mydeployments.apps.example.com"] {
        crds.get(name).await.unwrap_or_else(|e| panic!("CRD {name}: {e}"));
    }
    Api::<ServiceAccount>::namespaced(client.clone(), NAMESPACE).get("operator-host").await.expect("the ServiceAccount");
    let role = Api::<ClusterRole>::all(client.clone()).get("operator-host-manager-role").await.expect("the ClusterRole");
    assert!(role.rules.unwrap_or_default().iter().any(|r| r.resources.as_deref() == Some(&["cronjobs/status".to_string()][..])));
    Api::<ClusterRoleBinding>::all(client.clone()).get("operator-host-manager-rolebinding").await.expect("the ClusterRoleBinding");
    Api::<Role>::namespaced(client.clone(), NAMESPACE).get("operator-host-leader-election-role").await.expect("the leader election Role");
    Api::<RoleBinding>::namespaced(client.clone(), NAMESPACE).get("operator-host-leader-election-rolebinding").await.expect("its RoleBinding");
    Api::<Service>::namespaced(client.clone(), NAMESPACE).get("operator-host-metrics").await.expect("the metrics Service");

    let cm = Api::<ConfigMap>::namespaced(client.clone(), NAMESPACE).get("operator-host-plugins").await.expect("the plugins ConfigMap, unsuffixed");
    let binary = cm.binary_data.unwrap_or_default();
    for p in SHIPPED {
        let key = format!("{p}.wasm.gz");
        let bytes = binary.get(&key).unwrap_or_else(|| panic!("binaryData has no {key}"));
        assert!(bytes.0 == std::fs::read(shipped_gz(p)).unwrap(), "binaryData {key} is not the gzipped plugin file");
    }
    // Within the limit the server enforces (and a real one does).
    let total: usize = binary.values().map(|b| b.0.len()).sum();
    assert!(total <= 1024 * 1024, "the plugins ConfigMap holds {total} bytes, over 1 MiB");

    let d = Api::<Deployment>::namespaced(client.clone(), NAMESPACE).get("operator-host").await.expect("the Deployment");
    let pod = d.spec.template.spec.unwrap();
    let c = &pod.containers[0];
    assert_eq!(c.image.as_deref(), Some("operator-host:latest"));
    let args = c.args.clone().unwrap_or_default().join(" ");
    assert!(args.contains("--leader-elect") && args.contains("--plugin-configmap operator-host-system/operator-host-plugins"), "{args}");
    let sc = c.security_context.clone().unwrap();
    assert_eq!(sc.read_only_root_filesystem, Some(true));
    assert_eq!(sc.capabilities.unwrap().drop, Some(vec!["ALL".to_string()]));
    assert_eq!(pod.service_account_name.as_deref(), Some("operator-host"));

    // The samples go in once the CRDs are served (as a user would, right after).
    let samples = tree.join("samples");
    let started = Instant::now();
    loop {
        let out = kubectl.run_async(&["apply", "-k", samples.to_str().unwrap()]).await;
        if out.status.success() {
            break;
        }
        assert!(started.elapsed() < Duration::from_secs(60), "kubectl apply -k deploy/samples failed:\n{}", String::from_utf8_lossy(&out.stderr));
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
    for (api_version, kind, plural, name) in [
        ("batch.tutorial.kubebuilder.io/v1", "CronJob", "cronjobs", "cronjob-sample"),
        ("apps.example.com/v1", "MyDeployment", "mydeployments", "my-nginx-app"),
    ] {
        let (group, version) = api_version.split_once('/').unwrap();
        let ar =
            ApiResource { group: group.into(), version: version.into(), api_version: api_version.into(), kind: kind.into(), plural: plural.into() };
        Api::<DynamicObject>::namespaced_with(client.clone(), "default", &ar).get(name).await.unwrap_or_else(|e| panic!("{kind} {name}: {e}"));
    }

    // The host as the Deployment runs it, with exactly the RBAC of deploy/rbac:
    // it authenticates as the Deployment's ServiceAccount (a bearer token, as a
    // Pod's projected token would), and the server authorizes every request
    // against the applied Roles. It loads the plugins from the applied
    // ConfigMap, leads (Lease in its namespace) and reconciles the samples.
    server.access().add_token("operator-host-token", apiserver::UserInfo::service_account(NAMESPACE, "operator-host"));
    let sa_kubeconfig = dir.path().join("operator-host.kubeconfig");
    let with_token = apiserver::kubeconfig_yaml(&handle.url(), NAMESPACE).replace("user: {}", "user:\n    token: operator-host-token");
    std::fs::write(&sa_kubeconfig, with_token).unwrap();
    let mut host = Command::new(env!("CARGO_BIN_EXE_host"))
        .args(["run", "--leader-elect", "--leader-election-namespace", NAMESPACE, "--metrics-addr", "0"])
        .args(["--plugin-configmap", "operator-host-system/operator-host-plugins", "--plugin-cache-dir"])
        .arg(dir.path().join("cache"))
        .env("KUBECONFIG", &sa_kubeconfig)
        .stdout(std::process::Stdio::null())
        .stderr(std::fs::File::create(dir.path().join("host.log")).unwrap())
        .spawn()
        .unwrap();
    let pods = Api::<k8s_openapi::api::core::v1::Pod>::namespaced(client.clone(), "default");
    let started = Instant::now();
    let reconciled = loop {
        let n = pods.list(&kube::api::ListParams::default().labels("app=my-nginx-app")).await.map(|l| l.items.len()).unwrap_or(0);
        if n == 3 || started.elapsed() > Duration::from_secs(90) {
            break n == 3;
        }
        tokio::time::sleep(Duration::from_millis(250)).await;
    };
    let lease = Api::<k8s_openapi::api::coordination::v1::Lease>::namespaced(client.clone(), NAMESPACE).get_opt("operator-host").await.unwrap();
    // Both parents carry the host's Reconciled condition: their status
    // subresources were written as the ServiceAccount.
    let mut unreconciled = vec![];
    for (group, plural, name) in
        [("batch.tutorial.kubebuilder.io", "cronjobs", "cronjob-sample"), ("apps.example.com", "mydeployments", "my-nginx-app")]
    {
        let started = Instant::now();
        loop {
            let got = kubectl
                .run_async(&["get", &format!("{plural}.{group}"), name, "-o", "jsonpath={.status.conditions[?(@.type==\"Reconciled\")].status}"])
                .await;
            let out = String::from_utf8_lossy(&got.stdout).into_owned() + &String::from_utf8_lossy(&got.stderr);
            if out.trim() == "True" {
                break;
            }
            if started.elapsed() > Duration::from_secs(30) {
                unreconciled.push(format!("{plural}/{name}: {out}"));
                break;
            }
            tokio::time::sleep(Duration::from_millis(250)).await;
        }
    }
    let refused = server.access().refusals();
    let _ = host.kill();
    let _ = host.wait();
    let log = std::fs::read_to_string(dir.path().join("host.log")).unwrap_or_default();
    assert!(reconciled, "the host did not create the sample MyDeployment's 3 Pods from the ConfigMap's plugins; log:\n{log}");
    assert!(lease.and_then(|l| l.spec?.holder_identity).is_some_and(|h| !h.is_empty()), "no leader in {NAMESPACE}; log:\n{log}");
    assert!(unreconciled.is_empty(), "not reconciled as the ServiceAccount: {unreconciled:?}; log:\n{log}");
    assert!(refused.is_empty(), "the host needed more than deploy/rbac grants: {refused:#?}; log:\n{log}");
    // The check above is not vacuous: the same identity is refused what its Roles leave out.
    // (kube-rs sends the token over plain HTTP; kubectl only over TLS, so the
    // check uses the host's client library and the same kubeconfig.)
    let sa_config =
        kube::Config::from_custom_kubeconfig(kube::config::Kubeconfig::read_from(&sa_kubeconfig).unwrap(), &Default::default()).await.unwrap();
    let sa_client = kube::Client::try_from(sa_config).unwrap();
    let denied = Api::<k8s_openapi::api::core::v1::Secret>::namespaced(sa_client, NAMESPACE).list(&Default::default()).await;
    assert!(matches!(&denied, Err(kube::Error::Api(s)) if s.code == 403), "{denied:?}");
    assert_eq!(server.access().refused_total(), 1);
}
