//! Plugin admission as `admission.k8s.io/v1` webhooks: the review handler
//! with the CronJob plugin, and HTTPS serving with a certificate from a
//! directory or generated, checked by a rustls client that trusts only that
//! certificate (as the API server trusts only the caBundle).

use crate::common;
use crate::common::admission::{post, review};

use std::net::SocketAddr;
use std::path::Path;
use std::time::Duration;

use base64::Engine;
use operator_runtime::webhook;
use serde_json::{Value, json};

fn cronjob(schedule: &str) -> Value {
    json!({"apiVersion": "batch.tutorial.kubebuilder.io/v1", "kind": "CronJob", "metadata": {"name": "c", "namespace": "default"},
        "spec": {"schedule": schedule, "jobTemplate": {"spec": {"template": {"spec": {
            "containers": [{"name": "x", "image": "busybox"}], "restartPolicy": "OnFailure"}}}}}})
}

/// The answer as JSON, as the API server reads it.
fn answer(plugins: &[operator_runtime::sandbox::LoadedPlugin], path: &str, body: &[u8]) -> Value {
    serde_json::from_slice(&webhook::to_wire(&webhook::review(plugins, path, body))).unwrap()
}

#[test]
fn webhook_paths_follow_kubebuilder() {
    let sandbox = operator_runtime::sandbox::Sandbox::new(common::config(Duration::from_secs(5))).unwrap();
    let p = common::load(&sandbox, "cronjob");
    assert_eq!(webhook::path_for("validate", &p), "/validate-batch-tutorial-kubebuilder-io-v1-cronjob");
    assert_eq!(webhook::path_for("mutate", &p), "/mutate-batch-tutorial-kubebuilder-io-v1-cronjob");
}

#[test]
fn an_invalid_object_is_denied_with_the_plugins_field_errors() {
    let sandbox = operator_runtime::sandbox::Sandbox::new(common::config(Duration::from_secs(5))).unwrap();
    let plugins = vec![common::load(&sandbox, "cronjob")];
    let r = answer(&plugins, "/validate-batch-tutorial-kubebuilder-io-v1-cronjob", &review("CREATE", cronjob("nope")));
    assert_eq!(r["response"]["uid"], "req-1");
    assert_eq!(r["response"]["allowed"], false);
    assert_eq!(r["response"]["status"]["code"], 422);
    assert!(r["response"]["status"]["message"].as_str().unwrap().contains("spec.schedule: Invalid value: \"nope\""), "{r}");
    let ok = answer(&plugins, "/validate-batch-tutorial-kubebuilder-io-v1-cronjob", &review("CREATE", cronjob("*/5 * * * *")));
    assert_eq!(ok["response"]["allowed"], true, "{ok}");
    let delete = answer(&plugins, "/validate-batch-tutorial-kubebuilder-io-v1-cronjob", &review("DELETE", Value::Null));
    assert_eq!(delete["response"]["allowed"], true);
}

/// A CronJob as the API server hands it to validating admission: uid and
/// generation are set before admission runs.
fn stored(schedule: &str, uid: &str) -> Value {
    let mut o = cronjob(schedule);
    o["metadata"]["uid"] = uid.into();
    o["metadata"]["generation"] = 1.into();
    o
}

#[test]
fn only_an_allowed_create_is_remembered_for_the_controller() {
    let sandbox = operator_runtime::sandbox::Sandbox::new(common::config(Duration::from_secs(5))).unwrap();
    let plugins = vec![common::load(&sandbox, "cronjob")];
    let path = "/validate-batch-tutorial-kubebuilder-io-v1-cronjob";
    let [created, denied, updated, dry_run] = [
        "0b6c6a52-0000-4000-8000-000000000001",
        "0b6c6a52-0000-4000-8000-000000000002",
        "0b6c6a52-0000-4000-8000-000000000003",
        "0b6c6a52-0000-4000-8000-000000000004",
    ];
    assert_eq!(answer(&plugins, path, &review("CREATE", stored("*/5 * * * *", created)))["response"]["allowed"], true);
    assert_eq!(answer(&plugins, path, &review("CREATE", stored("nope", denied)))["response"]["allowed"], false);
    let mut update: Value = serde_json::from_slice(&review("UPDATE", stored("*/5 * * * *", updated))).unwrap();
    update["request"]["oldObject"] = stored("*/10 * * * *", updated);
    assert_eq!(answer(&plugins, path, &serde_json::to_vec(&update).unwrap())["response"]["allowed"], true);
    let mut dry: Value = serde_json::from_slice(&review("CREATE", stored("*/5 * * * *", dry_run))).unwrap();
    dry["request"]["dryRun"] = true.into();
    assert_eq!(answer(&plugins, path, &serde_json::to_vec(&dry).unwrap())["response"]["allowed"], true);

    let p = &plugins[0];
    assert!(!p.take_found_valid_on_create(created, Some(2)), "only the generation admission saw");
    assert!(p.take_found_valid_on_create(created, Some(1)), "an allowed create is remembered");
    assert!(!p.take_found_valid_on_create(denied, Some(1)), "a denied create is not");
    assert!(!p.take_found_valid_on_create(updated, Some(1)), "an update is validated against its old object: not remembered");
    assert!(!p.take_found_valid_on_create(dry_run, Some(1)), "a dry run is never stored: not remembered");
    let reloaded = common::load(&sandbox, "cronjob");
    assert_eq!(answer(&plugins, path, &review("CREATE", stored("*/5 * * * *", created)))["response"]["allowed"], true);
    assert!(!reloaded.take_found_valid_on_create(created, Some(1)), "another load (a hot swap) starts with none");
}

#[test]
fn defaulting_answers_with_a_json_patch() {
    let sandbox = operator_runtime::sandbox::Sandbox::new(common::config(Duration::from_secs(5))).unwrap();
    let plugins = vec![common::load(&sandbox, "cronjob")];
    let object = cronjob("*/5 * * * *");
    let r = answer(&plugins, "/mutate-batch-tutorial-kubebuilder-io-v1-cronjob", &review("CREATE", object.clone()));
    assert_eq!(r["response"]["allowed"], true);
    assert_eq!(r["response"]["patchType"], "JSONPatch");
    // `[]byte` on the wire: base64 text, as the API server decodes it.
    let patch = base64::engine::general_purpose::STANDARD.decode(r["response"]["patch"].as_str().expect("base64 text")).unwrap();
    let patch: json_patch::Patch = serde_json::from_slice(&patch).unwrap();
    let mut patched = object;
    json_patch::patch(&mut patched, &patch).unwrap();
    assert_eq!(patched["spec"]["concurrencyPolicy"], "Allow");
    assert_eq!(patched["spec"]["successfulJobsHistoryLimit"], 3);
}

#[test]
fn a_review_that_does_not_decode_is_refused_as_invalid() {
    let sandbox = operator_runtime::sandbox::Sandbox::new(common::config(Duration::from_secs(5))).unwrap();
    let plugins = vec![common::load(&sandbox, "cronjob")];
    let r = answer(&plugins, VALIDATE, br#"{"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "request": {"uid": 7}}"#);
    assert_eq!(r["kind"], "AdmissionReview");
    assert_eq!(r["response"]["allowed"], false);
    assert_eq!(r["response"]["status"]["reason"], "InvalidRequest");
    assert!(r["response"]["status"]["message"].as_str().unwrap().starts_with("cannot decode AdmissionReview"), "{r}");
}

#[test]
fn an_unknown_path_is_refused() {
    let sandbox = operator_runtime::sandbox::Sandbox::new(common::config(Duration::from_secs(5))).unwrap();
    let plugins = vec![common::load(&sandbox, "cronjob")];
    let r = answer(&plugins, "/validate-nothing", &review("CREATE", cronjob("* * * * *")));
    assert_eq!(r["response"]["allowed"], false);
    assert_eq!(r["response"]["status"]["code"], 404);
}

const VALIDATE: &str = "/validate-batch-tutorial-kubebuilder-io-v1-cronjob";

async fn serve(dir: &Path, hosts: &[String]) -> Result<(SocketAddr, tokio::task::JoinHandle<()>), webhook::Error> {
    serve_counted(dir, hosts, Default::default()).await
}

async fn serve_counted(
    dir: &Path,
    hosts: &[String],
    metrics: std::sync::Arc<operator_runtime::metrics::Metrics>,
) -> Result<(SocketAddr, tokio::task::JoinHandle<()>), webhook::Error> {
    let sandbox = operator_runtime::sandbox::Sandbox::new(common::config(Duration::from_secs(5))).unwrap();
    let registry = operator_runtime::registry::Registry::default();
    registry.insert("cronjob", common::load(&sandbox, "cronjob"));
    webhook::serve("127.0.0.1:0".parse().unwrap(), dir, hosts, registry, metrics, Default::default(), std::future::pending()).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_a_pair_a_self_signed_one_is_generated_for_localhost_and_the_given_hosts() {
    let dir = tempfile::tempdir().unwrap();
    let service = "operator-host-webhook.operator-system.svc".to_string();
    let metrics = std::sync::Arc::new(operator_runtime::metrics::Metrics::new());
    let (addr, task) = serve_counted(dir.path(), std::slice::from_ref(&service), metrics.clone()).await.unwrap();
    let ca = std::fs::read_to_string(dir.path().join(webhook::GENERATED_CA)).expect("the CA bundle is written for the webhook configuration");
    assert!(ca.starts_with("-----BEGIN CERTIFICATE-----"), "{ca}");
    assert!(!dir.path().join("tls.key").exists() && !dir.path().join("generated/tls.key").exists(), "the key stays in memory");

    for name in ["127.0.0.1", "localhost", service.as_str()] {
        let answer = post(addr, name, &ca, VALIDATE, review("CREATE", cronjob("nope"))).await.unwrap_or_else(|e| panic!("as {name}: {e}"));
        assert_eq!(answer["kind"], "AdmissionReview");
        assert_eq!(answer["response"]["allowed"], false, "{answer}");
        assert_eq!(answer["response"]["status"]["code"], 422, "{answer}");
    }
    let ok = post(addr, "localhost", &ca, VALIDATE, review("CREATE", cronjob("*/5 * * * *"))).await.unwrap();
    assert_eq!(ok["response"]["allowed"], true, "{ok}");
    let counted = metrics.render();
    for line in [
        format!("controller_runtime_webhook_requests_total{{webhook=\"{VALIDATE}\",code=\"422\"}} 3"),
        format!("controller_runtime_webhook_requests_total{{webhook=\"{VALIDATE}\",code=\"200\"}} 1"),
    ] {
        assert!(counted.contains(&line), "{line} missing from\n{counted}");
    }

    let err = post(addr, "elsewhere.example.com", &ca, VALIDATE, review("CREATE", cronjob("nope"))).await.unwrap_err();
    assert!(err.starts_with("TLS:"), "a name the certificate does not carry is refused: {err}");
    let stranger = webhook::ServingCert::generate(&[]).unwrap();
    let err = post(addr, "localhost", &stranger.cert_pem, VALIDATE, review("CREATE", cronjob("nope"))).await.unwrap_err();
    assert!(err.starts_with("TLS:"), "a client trusting another certificate is refused: {err}");
    task.abort();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_pair_in_the_cert_directory_is_served_as_it_is() {
    let dir = tempfile::tempdir().unwrap();
    let pair = webhook::ServingCert::generate(&["webhook.test".to_string()]).unwrap();
    std::fs::write(dir.path().join("tls.crt"), &pair.cert_pem).unwrap();
    std::fs::write(dir.path().join("tls.key"), pair.key_pem()).unwrap();
    let (addr, task) = serve(dir.path(), &[]).await.unwrap();
    assert!(!dir.path().join(webhook::GENERATED_CA).exists(), "nothing is generated");
    let answer = post(addr, "webhook.test", &pair.cert_pem, VALIDATE, review("CREATE", cronjob("nope"))).await.unwrap();
    assert_eq!(answer["response"]["allowed"], false, "{answer}");
    task.abort();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn half_a_pair_is_a_clear_error_not_a_generated_certificate() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("tls.crt"), webhook::ServingCert::generate(&[]).unwrap().cert_pem).unwrap();
    let err = serve(dir.path(), &[]).await.unwrap_err();
    let text = err.to_string();
    assert!(text.contains("tls.crt is there but") && text.contains("tls.key is not"), "{text}");
    assert!(!dir.path().join(webhook::GENERATED_CA).exists());
}
