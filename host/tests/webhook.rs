//! Plugin admission as `admission.k8s.io/v1` webhooks: the review handler
//! with the CronJob plugin, and HTTPS serving with a throwaway certificate.

mod common;

use std::process::Command;
use std::time::Duration;

use base64::Engine;
use host::webhook;
use serde_json::{Value, json};

fn cronjob(schedule: &str) -> Value {
    json!({"apiVersion": "batch.tutorial.kubebuilder.io/v1", "kind": "CronJob", "metadata": {"name": "c", "namespace": "default"},
        "spec": {"schedule": schedule, "jobTemplate": {"spec": {"template": {"spec": {
            "containers": [{"name": "x", "image": "busybox"}], "restartPolicy": "OnFailure"}}}}}})
}

fn review(operation: &str, object: Value) -> Vec<u8> {
    serde_json::to_vec(&json!({"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview",
        "request": {"uid": "req-1", "operation": operation, "object": object,
            "kind": {"group": "batch.tutorial.kubebuilder.io", "version": "v1", "kind": "CronJob"}}}))
    .unwrap()
}

#[test]
fn webhook_paths_follow_kubebuilder() {
    let sandbox = host::sandbox::Sandbox::new(common::config(Duration::from_secs(5))).unwrap();
    let p = common::load(&sandbox, "cronjob");
    assert_eq!(webhook::path_for("validate", &p), "/validate-batch-tutorial-kubebuilder-io-v1-cronjob");
    assert_eq!(webhook::path_for("mutate", &p), "/mutate-batch-tutorial-kubebuilder-io-v1-cronjob");
}

#[test]
fn an_invalid_object_is_denied_with_the_plugins_field_errors() {
    let sandbox = host::sandbox::Sandbox::new(common::config(Duration::from_secs(5))).unwrap();
    let plugins = vec![common::load(&sandbox, "cronjob")];
    let r = webhook::review(&plugins, "/validate-batch-tutorial-kubebuilder-io-v1-cronjob", &review("CREATE", cronjob("nope")));
    assert_eq!(r["response"]["uid"], "req-1");
    assert_eq!(r["response"]["allowed"], false);
    assert_eq!(r["response"]["status"]["code"], 422);
    assert!(r["response"]["status"]["message"].as_str().unwrap().contains("spec.schedule: Invalid value: \"nope\""), "{r}");
    let ok = webhook::review(&plugins, "/validate-batch-tutorial-kubebuilder-io-v1-cronjob", &review("CREATE", cronjob("*/5 * * * *")));
    assert_eq!(ok["response"]["allowed"], true, "{ok}");
    let delete = webhook::review(&plugins, "/validate-batch-tutorial-kubebuilder-io-v1-cronjob", &review("DELETE", Value::Null));
    assert_eq!(delete["response"]["allowed"], true);
}

#[test]
fn defaulting_answers_with_a_json_patch() {
    let sandbox = host::sandbox::Sandbox::new(common::config(Duration::from_secs(5))).unwrap();
    let plugins = vec![common::load(&sandbox, "cronjob")];
    let object = cronjob("*/5 * * * *");
    let r = webhook::review(&plugins, "/mutate-batch-tutorial-kubebuilder-io-v1-cronjob", &review("CREATE", object.clone()));
    assert_eq!(r["response"]["allowed"], true);
    assert_eq!(r["response"]["patchType"], "JSONPatch");
    let patch = base64::engine::general_purpose::STANDARD.decode(r["response"]["patch"].as_str().unwrap()).unwrap();
    let patch: json_patch::Patch = serde_json::from_slice(&patch).unwrap();
    let mut patched = object;
    json_patch::patch(&mut patched, &patch).unwrap();
    assert_eq!(patched["spec"]["concurrencyPolicy"], "Allow");
    assert_eq!(patched["spec"]["successfulJobsHistoryLimit"], 3);
}

#[test]
fn an_unknown_path_is_refused() {
    let sandbox = host::sandbox::Sandbox::new(common::config(Duration::from_secs(5))).unwrap();
    let plugins = vec![common::load(&sandbox, "cronjob")];
    let r = webhook::review(&plugins, "/validate-nothing", &review("CREATE", cronjob("* * * * *")));
    assert_eq!(r["response"]["allowed"], false);
    assert_eq!(r["response"]["status"]["code"], 404);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn webhooks_are_served_over_https_from_a_cert_directory() {
    let dir = tempfile::tempdir().unwrap();
    let made = Command::new("openssl")
        .args(["req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1", "-subj", "/CN=localhost", "-addext", "subjectAltName=IP:127.0.0.1"])
        .arg("-keyout")
        .arg(dir.path().join("tls.key"))
        .arg("-out")
        .arg(dir.path().join("tls.crt"))
        .output();
    if !made.as_ref().is_ok_and(|o| o.status.success()) || Command::new("curl").arg("--version").output().is_err() {
        eprintln!("skipping: openssl or curl is not installed");
        return;
    }
    let sandbox = host::sandbox::Sandbox::new(common::config(Duration::from_secs(5))).unwrap();
    let registry = host::registry::Registry::default();
    registry.insert("cronjob", common::load(&sandbox, "cronjob"));
    let (addr, task) = webhook::serve("127.0.0.1:0".parse().unwrap(), dir.path(), registry, std::future::pending()).await.unwrap();
    let body = dir.path().join("review.json");
    std::fs::write(&body, review("CREATE", cronjob("nope"))).unwrap();
    let url = format!("https://{addr}/validate-batch-tutorial-kubebuilder-io-v1-cronjob");
    let ca = dir.path().join("tls.crt");
    let out = tokio::task::spawn_blocking(move || {
        Command::new("curl")
            .args(["-s", "--max-time", "30", "--cacert"])
            .arg(ca)
            .args(["-H", "Content-Type: application/json", "--data-binary"])
            .arg(format!("@{}", body.display()))
            .arg(url)
            .output()
            .unwrap()
    })
    .await
    .unwrap();
    let answer: Value = serde_json::from_slice(&out.stdout).unwrap_or_else(|e| panic!("{e}: {}", String::from_utf8_lossy(&out.stderr)));
    assert_eq!(answer["response"]["allowed"], false, "{answer}");
    assert_eq!(answer["kind"], "AdmissionReview");
    task.abort();
}
