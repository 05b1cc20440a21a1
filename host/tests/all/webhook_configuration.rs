//! `host run --webhook-configure`: the host writes its own
//! Mutating/ValidatingWebhookConfiguration. The embedded API server stores
//! these objects but does not call webhooks (its admission is in-process),
//! so these tests check what is written: rules, paths, `caBundle`, and that
//! it is written again when the plugin set or the certificate changes; the
//! webhooks are then called over HTTPS with only that `caBundle` trusted.
//! The real API server calling them is tests/real-cluster's `admission`.

use crate::common;
use crate::common::admission::{post, review};

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Duration;

use apiserver::{ApiServer, ServerHandle};
use base64::Engine;
use k8s_openapi::ByteString;
use k8s_openapi::api::admissionregistration::v1::{MutatingWebhookConfiguration, ValidatingWebhookConfiguration};
use k8s_openapi::api::core::v1::{ConfigMap, Secret};
use kube::api::{Api, Patch, PatchParams};
use operator_runtime::webhook::{self, ServingCert};
use serde_json::{Value, json};

const WAIT: Duration = Duration::from_secs(120);
const CRONJOBS: &str = "cronjobs.batch.tutorial.kubebuilder.io";
const MYDEPLOYMENTS: &str = "mydeployments.apps.example.com";

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

/// A `host run` process; its stdout lines arrive on `lines`, stderr goes to `log`.
struct Host {
    running: common::process::Running,
    log: PathBuf,
}

impl Host {
    fn log(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }

    /// The address the webhooks are served on, from the line the host prints.
    fn webhook_addr(&self) -> SocketAddr {
        let line = self.running.line_with("admission webhooks at https://");
        line.rsplit("https://").next().unwrap().trim().parse().unwrap()
    }
}

fn start_host(cluster: &Cluster, name: &str, args: &[&str]) -> Host {
    let log = cluster.dir.path().join(format!("{name}.log"));
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_host"));
    cmd.args(["run", "--metrics-addr", "0", "--webhook-addr", "127.0.0.1:0", "--webhook-configure", "--webhook-url-base", "https://127.0.0.1:9443"])
        .args(args)
        .arg("--plugin-cache-dir")
        .arg(common::plugin_cache_dir("webhook-configuration"))
        .env("KUBECONFIG", &cluster.kubeconfig)
        .env("HOST_LOG", "info")
        .stdin(Stdio::null())
        .stderr(std::fs::File::create(&log).unwrap());
    Host { running: common::process::Running::start_logging_to_file(cmd), log }
}

/// Both configurations as JSON, once each has exactly `webhooks` (by name, in order).
async fn configurations_with(client: &kube::Client, webhooks: &[&str], host: &Host) -> (Value, Value) {
    let want: Vec<String> = webhooks.iter().map(|w| w.to_string()).collect();
    let names = |o: &Value| -> Vec<String> {
        o["webhooks"].as_array().into_iter().flatten().filter_map(|w| w["name"].as_str().map(str::to_string)).collect()
    };
    let deadline = tokio::time::Instant::now() + WAIT;
    loop {
        let m = Api::<MutatingWebhookConfiguration>::all(client.clone()).get_opt("operator-host").await.unwrap();
        let v = Api::<ValidatingWebhookConfiguration>::all(client.clone()).get_opt("operator-host").await.unwrap();
        if let (Some(m), Some(v)) = (m, v) {
            let (m, v) = (serde_json::to_value(m).unwrap(), serde_json::to_value(v).unwrap());
            if names(&m) == want && names(&v) == want {
                return (m, v);
            }
        }
        assert!(tokio::time::Instant::now() < deadline, "the configurations never held exactly {want:?}; host log:\n{}", host.log());
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

fn ca_bundle_of(webhook: &Value) -> String {
    let b64 = webhook["clientConfig"]["caBundle"].as_str().expect("a caBundle");
    String::from_utf8(base64::engine::general_purpose::STANDARD.decode(b64).unwrap()).unwrap()
}

fn cronjob(schedule: &str) -> Value {
    json!({"apiVersion": "batch.tutorial.kubebuilder.io/v1", "kind": "CronJob", "metadata": {"name": "c", "namespace": "default"},
        "spec": {"schedule": schedule, "jobTemplate": {"spec": {"template": {"spec": {
            "containers": [{"name": "x", "image": "busybox"}], "restartPolicy": "OnFailure"}}}}}})
}

/// The validating webhook at `addr` refuses a bad CronJob, trusting only `ca_pem`.
async fn refuses_a_bad_schedule(addr: SocketAddr, ca_pem: &str) {
    let answer =
        post(addr, "127.0.0.1", ca_pem, "/validate-batch-tutorial-kubebuilder-io-v1-cronjob", review("CREATE", cronjob("nope"))).await.unwrap();
    assert_eq!(answer["response"]["allowed"], false, "{answer}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_host_writes_both_configurations_with_its_generated_ca_and_each_plugins_rules_and_paths() {
    let cluster = cluster().await;
    let certs = cluster.dir.path().join("certs");
    let cronjob_wasm = common::built_plugin("cronjob");
    let mydeployment_wasm = common::built_plugin("mydeployment");
    let host = start_host(
        &cluster,
        "host",
        &[
            "--webhook-cert-dir",
            certs.to_str().unwrap(),
            "--webhook-failure-policy",
            "Ignore",
            "--webhook-timeout",
            "5s",
            "--plugin",
            cronjob_wasm.to_str().unwrap(),
            "--plugin",
            mydeployment_wasm.to_str().unwrap(),
        ],
    );
    let addr = host.webhook_addr();
    let client = cluster.server.kube_client();
    let (m, v) = configurations_with(&client, &[CRONJOBS, MYDEPLOYMENTS], &host).await;
    let generated = std::fs::read_to_string(certs.join(webhook::GENERATED_CA)).unwrap();
    for (object, kind) in [(&m, "mutate"), (&v, "validate")] {
        let managers: Vec<&str> = object["metadata"]["managedFields"].as_array().unwrap().iter().filter_map(|f| f["manager"].as_str()).collect();
        assert_eq!(managers, ["operator-host"], "written by server-side apply as operator-host only");
        assert_eq!(object["metadata"]["managedFields"][0]["operation"], "Apply");
        let cron = &object["webhooks"][0];
        assert_eq!(cron["clientConfig"]["url"], format!("https://127.0.0.1:9443/{kind}-batch-tutorial-kubebuilder-io-v1-cronjob"));
        assert_eq!(ca_bundle_of(cron), generated, "the caBundle is the generated certificate");
        // Validation also judges `/scale` writes; defaulting is for whole objects.
        let (cronjobs, mydeployments) = match kind {
            "validate" => (json!(["cronjobs", "cronjobs/scale"]), json!(["mydeployments", "mydeployments/scale"])),
            _ => (json!(["cronjobs"]), json!(["mydeployments"])),
        };
        assert_eq!(
            cron["rules"],
            json!([{"apiGroups": ["batch.tutorial.kubebuilder.io"], "apiVersions": ["v1"], "resources": cronjobs, "operations": ["CREATE", "UPDATE"], "scope": "*"}])
        );
        assert_eq!(cron["failurePolicy"], "Ignore");
        assert_eq!(cron["timeoutSeconds"], 5);
        assert_eq!(cron["sideEffects"], "None");
        assert_eq!(cron["matchPolicy"], "Equivalent");
        assert_eq!(cron["admissionReviewVersions"], json!(["v1"]));
        let mine = &object["webhooks"][1];
        assert_eq!(mine["clientConfig"]["url"], format!("https://127.0.0.1:9443/{kind}-apps-example-com-v1-mydeployment"));
        assert_eq!(mine["rules"][0]["resources"], mydeployments);
    }
    refuses_a_bad_schedule(addr, &ca_bundle_of(&v["webhooks"][0])).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_plugin_kind_added_or_removed_by_hot_swap_is_added_to_or_removed_from_the_configurations() {
    let cluster = cluster().await;
    let client = cluster.server.kube_client();
    let publish = |keys: &[&str]| {
        let data: BTreeMap<String, ByteString> =
            // Gzipped, as deploy/ ships them: both plugins raw exceed a ConfigMap's 1 MiB.
            keys.iter().map(|k| (format!("{k}.wasm.gz"), ByteString(std::fs::read(common::built_plugin(k).with_extension("wasm.gz")).unwrap()))).collect();
        let cm = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "plugins", "namespace": "default"}, "binaryData": data});
        let api: Api<ConfigMap> = Api::namespaced(client.clone(), "default");
        async move { api.patch("plugins", &PatchParams::apply("test").force(), &Patch::Apply(&cm)).await.unwrap() }
    };
    publish(&["cronjob"]).await;
    let certs = cluster.dir.path().join("certs");
    let host = start_host(&cluster, "host", &["--webhook-cert-dir", certs.to_str().unwrap(), "--plugin-configmap", "default/plugins"]);
    configurations_with(&client, &[CRONJOBS], &host).await;
    publish(&["cronjob", "mydeployment"]).await;
    configurations_with(&client, &[CRONJOBS, MYDEPLOYMENTS], &host).await;
    publish(&["mydeployment"]).await;
    let (m, _) = configurations_with(&client, &[MYDEPLOYMENTS], &host).await;
    assert_eq!(ca_bundle_of(&m["webhooks"][0]), std::fs::read_to_string(certs.join(webhook::GENERATED_CA)).unwrap());
}

fn write_pair(dir: &Path, cert: &ServingCert) {
    std::fs::create_dir_all(dir).unwrap();
    std::fs::write(dir.join("tls.crt"), &cert.cert_pem).unwrap();
    std::fs::write(dir.join("tls.key"), cert.key_pem()).unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_pair_in_the_cert_dir_is_the_ca_bundle_and_a_rotated_one_is_served_and_applied() {
    let cluster = cluster().await;
    let client = cluster.server.kube_client();
    let certs = cluster.dir.path().join("certs");
    let first = ServingCert::generate(&[]).unwrap();
    write_pair(&certs, &first);
    let cronjob_wasm = common::built_plugin("cronjob");
    let host = start_host(&cluster, "host", &["--webhook-cert-dir", certs.to_str().unwrap(), "--plugin", cronjob_wasm.to_str().unwrap()]);
    let addr = host.webhook_addr();
    let (_, v) = configurations_with(&client, &[CRONJOBS], &host).await;
    assert_eq!(ca_bundle_of(&v["webhooks"][0]), first.cert_pem, "a self-signed tls.crt is its own CA");
    assert!(!certs.join(webhook::GENERATED_CA).exists(), "nothing generated when a pair is given");
    refuses_a_bad_schedule(addr, &first.cert_pem).await;

    // As cert-manager rotates a mounted Secret: a new pair, and its CA beside it.
    let second = ServingCert::generate(&[]).unwrap();
    std::fs::write(certs.join("ca.crt"), &second.cert_pem).unwrap();
    write_pair(&certs, &second);
    let deadline = tokio::time::Instant::now() + WAIT;
    loop {
        let (_, v) = configurations_with(&client, &[CRONJOBS], &host).await;
        if ca_bundle_of(&v["webhooks"][0]) == second.cert_pem {
            break;
        }
        assert!(tokio::time::Instant::now() < deadline, "the rotated CA was never applied; log:\n{}", host.log());
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
    refuses_a_bad_schedule(addr, &second.cert_pem).await;
    let old = post(addr, "127.0.0.1", &first.cert_pem, "/validate-batch-tutorial-kubebuilder-io-v1-cronjob", review("CREATE", cronjob("nope"))).await;
    assert!(old.unwrap_err().starts_with("TLS:"), "the old certificate is no longer served");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn racing_replicas_share_the_one_pair_that_was_created_first() {
    let server = ApiServer::new();
    let client = server.kube_client();
    let hosts = vec!["op.sys.svc".to_string()];
    let (a, b) = tokio::join!(
        webhook::cert_secret::create_or_get(&client, "default", "op-webhook-cert", &hosts),
        webhook::cert_secret::create_or_get(&client, "default", "op-webhook-cert", &hosts)
    );
    let (a, b) = (a.unwrap(), b.unwrap());
    assert!(a.created ^ b.created, "exactly one replica creates the Secret");
    assert_eq!(a.cert.cert_pem, b.cert.cert_pem);
    assert_eq!(a.cert.key_pem(), b.cert.key_pem());
    assert_eq!(a.ca_pem, a.cert.cert_pem, "a self-signed certificate is its own CA");
    let later = webhook::cert_secret::create_or_get(&client, "default", "op-webhook-cert", &hosts).await.unwrap();
    assert!(!later.created);
    assert_eq!(later.cert.cert_pem, a.cert.cert_pem, "a later replica reads the same pair");
    let secret = Api::<Secret>::namespaced(client, "default").get("op-webhook-cert").await.unwrap();
    assert_eq!(secret.type_.as_deref(), Some("kubernetes.io/tls"));
    let keys: Vec<&String> = secret.data.as_ref().unwrap().keys().collect();
    assert_eq!(keys, ["ca.crt", "tls.crt", "tls.key"]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn leader_elected_replicas_serve_the_shared_secrets_pair_and_the_leader_writes_its_ca() {
    let cluster = cluster().await;
    let client = cluster.server.kube_client();
    let cronjob_wasm = common::built_plugin("cronjob");
    let args = ["--leader-elect", "--webhook-cert-secret", "default/operator-host-webhook-cert", "--plugin", cronjob_wasm.to_str().unwrap()];
    let a = start_host(&cluster, "a", &args);
    let b = start_host(&cluster, "b", &args);
    let (_, v) = configurations_with(&client, &[CRONJOBS], &a).await;
    let ca = ca_bundle_of(&v["webhooks"][0]);
    let secret = Api::<Secret>::namespaced(client, "default").get("operator-host-webhook-cert").await.unwrap();
    assert_eq!(String::from_utf8(secret.data.unwrap()["ca.crt"].0.clone()).unwrap(), ca);
    for replica in [&a, &b] {
        refuses_a_bad_schedule(replica.webhook_addr(), &ca).await;
    }
    let logs = a.log() + &b.log();
    assert_eq!(logs.matches("webhook certificate created from the shared Secret").count(), 1, "{logs}");
    assert_eq!(logs.matches("webhook certificate read from the shared Secret").count(), 1, "{logs}");
}

fn host_exit(args: &[&str]) -> (i32, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_host")).arg("run").args(args).env("KUBECONFIG", "/nonexistent").output().unwrap();
    (out.status.code().unwrap_or(-1), String::from_utf8_lossy(&out.stderr).into_owned())
}

#[test]
fn bad_webhook_configuration_flags_exit_2_with_the_rule_broken() {
    let plugin = common::built_plugin("cronjob");
    let plugin = plugin.to_str().unwrap();
    let serve = ["--plugin", plugin, "--webhook-addr", "127.0.0.1:0"];
    let cases: &[(&[&str], &str)] = &[
        (&["--plugin", plugin, "--webhook-configure", "--webhook-url-base", "https://h"], "--webhook-addr"),
        (&[&serve[..], &["--webhook-configure"]].concat(), "--webhook-configure needs where the API server calls the host"),
        (&[&serve[..], &["--webhook-configure", "--webhook-url-base", "http://127.0.0.1:9443"]].concat(), "HTTPS only"),
        (&[&serve[..], &["--webhook-configure", "--webhook-url-base", "https://h", "--webhook-service", "sys/op"]].concat(), "cannot be used with"),
        (&[&serve[..], &["--webhook-configure", "--webhook-service", "op"]].concat(), "expected NAMESPACE/NAME[:PORT]"),
        (&[&serve[..], &["--webhook-configure", "--webhook-service", "sys/op", "--webhook-timeout", "31s"]].concat(), "from 1s to 30s"),
        (&[&serve[..], &["--webhook-configure", "--webhook-service", "sys/op", "--webhook-failure-policy", "Maybe"]].concat(), "Maybe"),
        (&[&serve[..], &["--webhook-url-base", "https://h"]].concat(), "--webhook-configure"),
        (&[&serve[..], &["--webhook-cert-secret", "nameonly"]].concat(), "expected NAMESPACE/NAME"),
        (
            &[&serve[..], &["--leader-elect", "--webhook-configure", "--webhook-service", "sys/op", "--webhook-cert-dir", "/nonexistent"]].concat(),
            "share one with --webhook-cert-secret",
        ),
    ];
    for (args, needle) in cases {
        let (code, stderr) = host_exit(args);
        assert_eq!(code, 2, "{args:?}: {stderr}");
        assert!(stderr.contains(needle), "{args:?}: {needle:?} not in {stderr}");
    }
}
