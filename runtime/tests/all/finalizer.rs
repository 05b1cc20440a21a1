//! Finalizers end to end with the `finalizing` test plugin against the
//! embedded API server: the host adds the manifest's finalizer, a parent
//! being deleted is still reconciled (its cleanup is visible), the plugin's
//! `Finalized` lets the host remove the finalizer so the object goes, and a
//! plugin without a finalizer puts none on its parents.

use crate::common;

use std::time::Duration;

use apiserver::ApiServer;
use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::{Api, ApiResource, DeleteParams, DynamicObject, Patch, PatchParams, PostParams};
use operator_runtime::manager::{self, Running};
use operator_runtime::sandbox::Sandbox;
use serde_json::json;

const WAIT: Duration = Duration::from_secs(90);
const FINALIZER: &str = "finalizing.test.operator-host.dev/cleanup";

fn api(client: &kube::Client, api_version: &str, kind: &str, plural: &str) -> Api<DynamicObject> {
    let (group, version) = api_version.split_once('/').unwrap();
    let ar = ApiResource { group: group.into(), version: version.into(), api_version: api_version.into(), kind: kind.into(), plural: plural.into() };
    Api::namespaced_with(client.clone(), "default", &ar)
}

async fn start() -> (ApiServer, kube::Client, Running) {
    let server = ApiServer::new();
    let sandbox = Sandbox::new(common::config(Duration::from_secs(5))).unwrap();
    let plugins = vec![common::load(&sandbox, "finalizing"), common::load(&sandbox, "hello")];
    let client = server.kube_client();
    let running = manager::Builder::new(client.clone())
        .plugins(plugins)
        .start()
        .await
        .unwrap_or_else(|e| panic!("manager: {}", operator_runtime::error_chain(&e)));
    tokio::time::timeout(WAIT, running.wait_synced()).await.expect("caches sync");
    (server, client, running)
}

fn finalizers(obj: &DynamicObject) -> Vec<String> {
    obj.metadata.finalizers.clone().unwrap_or_default()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_held_deletion_waits_for_the_plugins_cleanup_and_a_release_lets_the_object_go() {
    let (_server, client, running) = start().await;
    let tidies = api(&client, "finalizing.test.operator-host.dev/v1", "Tidy", "tidies");
    let cms: Api<ConfigMap> = Api::namespaced(client.clone(), "default");
    let tidy = json!({"apiVersion": "finalizing.test.operator-host.dev/v1", "kind": "Tidy",
        "metadata": {"name": "t1", "annotations": {"finalizing.test/hold": "true"}}, "spec": {"content": "x"}});
    let uid = tidies.create(&PostParams::default(), &serde_json::from_value(tidy).unwrap()).await.unwrap().metadata.uid.unwrap();

    common::eventually("the host to add the plugin's finalizer", WAIT, || async {
        finalizers(&tidies.get("t1").await.ok()?).contains(&FINALIZER.to_string()).then_some(())
    })
    .await;
    common::eventually("the Tidy's ConfigMap", WAIT, || async { cms.get("t1-data").await.ok() }).await;

    tidies.delete("t1", &DeleteParams::default()).await.unwrap();
    let held = tidies.get("t1").await.expect("a finalizer holds the object");
    assert!(held.metadata.deletion_timestamp.is_some());

    // The plugin is still called: it deletes its child, says so, and reports the hold.
    common::eventually("the child to be cleaned up", WAIT, || async { cms.get("t1-data").await.is_err().then_some(()) }).await;
    let started = common::eventually("the CleanupStarted Event", WAIT, || async {
        common::event_about(&client, &uid, |e| e.reason.as_deref() == Some("CleanupStarted")).await
    })
    .await;
    assert_eq!(started.note.as_deref(), Some("deleting ConfigMap t1-data"));
    let held = common::eventually("status.phase CleanupHeld", WAIT, || async {
        let t = tidies.get("t1").await.ok()?;
        (t.data.pointer("/status/phase")? == "CleanupHeld").then_some(t)
    })
    .await;
    assert!(held.metadata.deletion_timestamp.is_some());
    assert_eq!(finalizers(&held), vec![FINALIZER.to_string()], "held: the finalizer stays");

    // Releasing the hold completes the cleanup: the host drops its finalizer and the object goes.
    let release = json!({"metadata": {"annotations": {"finalizing.test/hold": null}}});
    tidies.patch("t1", &PatchParams::default(), &Patch::Merge(&release)).await.unwrap();
    common::eventually("the Tidy to disappear", WAIT, || async { tidies.get("t1").await.is_err().then_some(()) }).await;
    running.shutdown(Duration::from_secs(30)).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_parent_of_a_plugin_without_a_finalizer_gets_none_and_goes_at_once() {
    let (_server, client, running) = start().await;
    let hellos = api(&client, "example.operator.dev/v1alpha1", "Hello", "hellos");
    let hello = json!({"apiVersion": "example.operator.dev/v1alpha1", "kind": "Hello", "metadata": {"name": "h1"}, "spec": {"greeting": "Hi"}});
    hellos.create(&PostParams::default(), &serde_json::from_value(hello).unwrap()).await.unwrap();
    let cms: Api<ConfigMap> = Api::namespaced(client.clone(), "default");
    common::eventually("the Hello's ConfigMap", WAIT, || async { cms.get("h1-greeting").await.ok() }).await;
    let h = common::eventually("Reconciled=True", WAIT, || async {
        let h = hellos.get("h1").await.ok()?;
        let done = h.data.pointer("/status/conditions")?.as_array()?.iter().any(|c| c["type"] == "Reconciled" && c["status"] == "True");
        done.then_some(h)
    })
    .await;
    assert_eq!(finalizers(&h), Vec::<String>::new(), "no finalizer was added: {:?}", h.metadata);

    hellos.delete("h1", &DeleteParams::default()).await.unwrap();
    assert!(hellos.get("h1").await.is_err(), "nothing holds it");
    running.shutdown(Duration::from_secs(30)).await;
}
