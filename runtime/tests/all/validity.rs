//! Validity re-checked on reconcile: a CronJob stored with a bad
//! schedule while no admission ran (the embedded server here has none
//! registered, as a cluster before the webhook existed) is flagged once, not
//! reconciled and not retried (a terminal error, as controller-runtime's
//! `reconcile.TerminalError`), and is reconciled normally once fixed.

use crate::common;

use std::time::Duration;

use apiserver::ApiServer;
use k8s_openapi::api::batch::v1::Job;
use kube::api::{Api, ApiResource, DynamicObject, GroupVersionKind, ListParams, Patch, PatchParams, PostParams};
use operator_runtime::manager;
use operator_runtime::sandbox::Sandbox;
use serde_json::{Value, json};

const WAIT: Duration = Duration::from_secs(90);

fn reconciled(obj: &DynamicObject) -> Option<Value> {
    obj.data.pointer("/status/conditions")?.as_array()?.iter().find(|c| c["type"] == "Reconciled").cloned()
}

fn cronjobs(client: &kube::Client) -> Api<DynamicObject> {
    let gvk = GroupVersionKind::gvk("batch.tutorial.kubebuilder.io", "v1", "CronJob");
    Api::namespaced_with(client.clone(), "default", &ApiResource::from_gvk_with_plural(&gvk, "cronjobs"))
}

/// The plugin's sample CronJob (`plugins/cronjob/samples/`).
fn sample_cronjob() -> Value {
    let path = common::workspace_root().join("plugins/cronjob/samples/batch_v1_cronjob.yaml");
    serde_saphyr::from_str(&std::fs::read_to_string(path).unwrap()).unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_invalid_stored_cronjob_is_flagged_not_reconciled_until_it_is_fixed() {
    let server = ApiServer::new();
    let sandbox = Sandbox::new(common::config(Duration::from_secs(5))).unwrap();
    let client = server.kube_client();
    // No embedded_cluster::register_admission: nothing checks the object on write.
    let running = manager::Builder::new(client.clone())
        .plugins(vec![common::load(&sandbox, "cronjob")])
        .start()
        .await
        .unwrap_or_else(|e| panic!("manager: {}", operator_runtime::error_chain(&e)));
    tokio::time::timeout(WAIT, running.wait_synced()).await.expect("caches sync");

    let cjs = cronjobs(&client);
    let mut cj = sample_cronjob();
    cj["spec"]["schedule"] = "every day at noon".into();
    cj["spec"].as_object_mut().unwrap().remove("startingDeadlineSeconds");
    let uid = cjs.create(&PostParams::default(), &serde_json::from_value(cj).unwrap()).await.expect("stored: no admission").metadata.uid.unwrap();

    let cond = common::eventually("Reconciled=False with reason Invalid", WAIT, || async {
        let c = reconciled(&cjs.get("cronjob-sample").await.ok()?)?;
        (c["status"] == "False").then_some(c)
    })
    .await;
    assert_eq!(cond["reason"], "Invalid", "{cond}");
    let message = cond["message"].as_str().unwrap();
    assert!(
        message
            .starts_with("CronJob.batch.tutorial.kubebuilder.io \"cronjob-sample\" is invalid: spec.schedule: Invalid value: \"every day at noon\""),
        "worded as the API server's 422: {message}"
    );
    let warning = common::eventually("a Warning Event Invalid", WAIT, || async {
        common::event_about(&client, &uid, |e| e.type_.as_deref() == Some("Warning")).await
    })
    .await;
    assert_eq!(warning.reason.as_deref(), Some("Invalid"));
    assert_eq!(warning.note.as_deref(), Some(message));

    let jobs: Api<Job> = Api::namespaced(client.clone(), "default");
    let owned = || async {
        jobs.list(&ListParams::default())
            .await
            .unwrap()
            .items
            .into_iter()
            .filter(|j| j.metadata.owner_references.as_ref().is_some_and(|rs| rs.iter().any(|r| r.uid == uid)))
            .count()
    };
    // Terminal, not backed off: the same parent gives the same errors, so
    // it is not retried (a retry with backoff from 5 ms would make about 10
    // in these 3 s, each with a Warning) until it changes.
    tokio::time::sleep(Duration::from_secs(3)).await;
    assert_eq!(owned().await, 0, "the plugin's reconcile was not called: no Jobs");
    let text = running.metrics().render();
    let errors: f64 =
        text.lines().find_map(|l| l.strip_prefix("controller_runtime_reconcile_errors_total{controller=\"cronjob\"}")?.trim().parse().ok()).unwrap();
    assert_eq!(errors, 1.0, "one failed reconcile, not retried");
    let warning = common::event_about(&client, &uid, |e| e.type_.as_deref() == Some("Warning")).await.expect("the Warning");
    assert!(warning.series.is_none() && warning.deprecated_count.unwrap_or(1) == 1, "one Warning, not repeated: {warning:?}");
    assert!(text.contains("plugin_call_errors_total{plugin=\"cronjob\",kind=\"invalid\"}"), "{text}");

    // The fix is a spec change: it is reconciled at once, backoff or not.
    cjs.patch("cronjob-sample", &PatchParams::default(), &Patch::Merge(json!({"spec": {"schedule": "@every 2s"}}))).await.unwrap();
    common::eventually("a Job once the schedule is fixed", WAIT, || async { (owned().await >= 1).then_some(()) }).await;
    common::eventually("Reconciled=True", WAIT, || async { (reconciled(&cjs.get("cronjob-sample").await.ok()?)?["status"] == "True").then_some(()) })
        .await;
    running.shutdown(Duration::from_secs(30)).await;
}

/// A CronJob that this host's admission validated on create, with the very
/// build the controller runs, is not validated again before its first
/// reconcile: the controller takes admission's answer (one plugin call
/// fewer per new parent). One created before the manager starts shows that
/// admission remembered it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cronjob_admitted_by_the_same_build_is_not_validated_again() {
    let server = ApiServer::new();
    let sandbox = Sandbox::new(common::config(Duration::from_secs(5))).unwrap();
    let client = server.kube_client();
    let plugin = common::load(&sandbox, "cronjob");
    let registry = operator_runtime::registry::Registry::default();
    registry.insert("cronjob", plugin.clone());
    embedded_cluster::register_admission(&server, &registry, &plugin);
    let running = manager::Builder::new(client.clone())
        .plugins(vec![plugin.clone()])
        .start()
        .await
        .unwrap_or_else(|e| panic!("manager: {}", operator_runtime::error_chain(&e)));
    tokio::time::timeout(WAIT, running.wait_synced()).await.expect("caches sync");

    let cjs = cronjobs(&client);
    let sample = sample_cronjob();
    let created = cjs.create(&PostParams::default(), &serde_json::from_value(sample).unwrap()).await.expect("admitted");
    let uid = created.metadata.uid.clone().unwrap();
    assert_eq!(created.metadata.generation, Some(1));

    common::eventually("Reconciled=True", WAIT, || async { (reconciled(&cjs.get("cronjob-sample").await.ok()?)?["status"] == "True").then_some(()) })
        .await;
    assert!(
        !plugin.take_found_valid_on_create(&uid, Some(1)),
        "the controller took admission's answer (a record left here means it called validate instead)"
    );

    // The record exists until the controller takes it: the manager is
    // stopped, so nothing takes this one.
    running.shutdown(Duration::from_secs(30)).await;
    let mut second: Value = serde_json::to_value(&created).unwrap();
    second["metadata"] = json!({"name": "second", "namespace": "default"});
    let second = cjs.create(&PostParams::default(), &serde_json::from_value(second).unwrap()).await.expect("admitted");
    assert!(plugin.take_found_valid_on_create(second.metadata.uid.as_deref().unwrap(), Some(1)), "admission remembered the create");
}
