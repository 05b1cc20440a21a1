//! Related objects (contract 0.2) end to end against the embedded API
//! server, with the `related` test plugin: a Watcher reads the ConfigMap its
//! spec names and the Pods its selector picks, and counts its reconciles in
//! its status. A related object's change requeues exactly the parents that
//! refer to it; a changed reference moves the mapping; a write to a related
//! object is refused; the per-call cap refuses a call with too many; and a
//! 0.1 plugin (hello-js, built against `wit/v0.1`) runs beside it unchanged.

use crate::common;

use std::time::Duration;

use apiserver::ApiServer;
use k8s_openapi::api::core::v1::{ConfigMap, Pod};
use kube::api::{Api, ApiResource, DynamicObject, Patch, PatchParams, PostParams};
use operator_runtime::manager::{self, Options, Running};
use operator_runtime::sandbox::Sandbox;
use serde_json::{Value, json};

const WAIT: Duration = Duration::from_secs(90);
/// How long a parent that was wrongly requeued would take to show it: the
/// queue runs at once, so well over one reconcile.
const QUIET: Duration = Duration::from_millis(1500);

fn watchers(client: &kube::Client) -> Api<DynamicObject> {
    let ar = ApiResource {
        group: "related.test.operator-host.dev".into(),
        version: "v1".into(),
        api_version: "related.test.operator-host.dev/v1".into(),
        kind: "Watcher".into(),
        plural: "watchers".into(),
    };
    Api::namespaced_with(client.clone(), "default", &ar)
}

async fn start(plugins: &[&str], max_related: Option<usize>) -> (ApiServer, kube::Client, Running) {
    let server = ApiServer::new();
    let sandbox = Sandbox::new(common::config(Duration::from_secs(5))).unwrap();
    let loaded: Vec<_> = plugins
        .iter()
        .map(|p| match *p {
            "hello-js" => sandbox.load_file(&common::built_plugin("hello-js")).expect("load hello-js"),
            other => common::load(&sandbox, other),
        })
        .collect();
    let client = server.kube_client();
    let mut options = Options::default();
    if let Some(cap) = max_related {
        options.controller.max_related = cap;
    }
    let running = manager::Builder::new(client.clone())
        .plugins(loaded)
        .options(options)
        .start()
        .await
        .unwrap_or_else(|e| panic!("manager: {}", operator_runtime::error_chain(&e)));
    tokio::time::timeout(WAIT, running.wait_synced()).await.expect("caches sync");
    (server, client, running)
}

async fn config_map(client: &kube::Client, name: &str, v: &str) {
    let cms: Api<ConfigMap> = Api::namespaced(client.clone(), "default");
    let cm = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name}, "data": {"v": v}});
    cms.create(&PostParams::default(), &serde_json::from_value(cm).unwrap()).await.unwrap();
}

async fn set_v(client: &kube::Client, name: &str, v: &str) {
    let cms: Api<ConfigMap> = Api::namespaced(client.clone(), "default");
    cms.patch(name, &PatchParams::default(), &Patch::Merge(json!({"data": {"v": v}}))).await.unwrap();
}

async fn pod(client: &kube::Client, name: &str, app: &str) {
    let pods: Api<Pod> = Api::namespaced(client.clone(), "default");
    let pod = json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "labels": {"app": app}},
        "spec": {"containers": [{"name": "c", "image": "busybox"}]}});
    pods.create(&PostParams::default(), &serde_json::from_value(pod).unwrap()).await.unwrap();
}

async fn watcher(client: &kube::Client, name: &str, spec: Value) {
    let w = json!({"apiVersion": "related.test.operator-host.dev/v1", "kind": "Watcher", "metadata": {"name": name}, "spec": spec});
    watchers(client).create(&PostParams::default(), &serde_json::from_value(w).unwrap()).await.unwrap();
}

/// `(status.related, status.reconciles)` of a Watcher.
async fn seen(client: &kube::Client, name: &str) -> Option<(Vec<String>, u64)> {
    let w = watchers(client).get(name).await.ok()?;
    let related = serde_json::from_value(w.data.pointer("/status/related")?.clone()).ok()?;
    Some((related, w.data.pointer("/status/reconciles")?.as_u64()?))
}

/// Waits until the Watcher reports exactly `want`; returns its reconcile count.
async fn sees(client: &kube::Client, name: &str, want: &[&str]) -> u64 {
    common::eventually(&format!("{name} to see {want:?}"), WAIT, || async {
        let (related, n) = seen(client, name).await?;
        (related == want).then_some(n)
    })
    .await
}

/// The `Reconciled` condition's reason and message.
async fn condition(client: &kube::Client, name: &str) -> Option<(String, String)> {
    let w = watchers(client).get(name).await.ok()?;
    let c = w.data.pointer("/status/conditions")?.as_array()?.iter().find(|c| c["type"] == "Reconciled")?.clone();
    Some((c["reason"].as_str()?.to_string(), c["message"].as_str()?.to_string()))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_related_change_requeues_exactly_the_referring_parents_and_a_reference_change_moves_the_mapping() {
    let (_server, client, running) = start(&["related"], None).await;
    config_map(&client, "cm-a", "1").await;
    config_map(&client, "cm-b", "1").await;
    config_map(&client, "cm-c", "1").await;
    watcher(&client, "wa", json!({"configMapRef": {"name": "cm-a"}, "selector": {"matchLabels": {"app": "a"}}})).await;
    watcher(&client, "wb", json!({"configMapRef": {"name": "cm-b"}, "selector": {"matchLabels": {"app": "b"}}})).await;
    sees(&client, "wa", &["ConfigMap/cm-a=1"]).await;
    let b = sees(&client, "wb", &["ConfigMap/cm-b=1"]).await;

    // A referenced ConfigMap changes: its parent sees it, the other is not called.
    set_v(&client, "cm-a", "2").await;
    sees(&client, "wa", &["ConfigMap/cm-a=2"]).await;
    // A Pod the selector picks appears.
    pod(&client, "p1", "a").await;
    let a = sees(&client, "wa", &["ConfigMap/cm-a=2", "Pod/p1"]).await;
    // Objects nobody refers to change.
    set_v(&client, "cm-c", "2").await;
    pod(&client, "p9", "nobody").await;
    tokio::time::sleep(QUIET).await;
    assert_eq!(seen(&client, "wb").await.unwrap().1, b, "wb refers to none of the changed objects and was not reconciled");
    assert_eq!(seen(&client, "wa").await.unwrap().1, a, "unreferenced objects requeue nobody");

    // wb now names cm-a and selects app=a: the mapping follows.
    let moved = json!({"spec": {"configMapRef": {"name": "cm-a"}, "selector": {"matchLabels": {"app": "a"}}}});
    watchers(&client).patch("wb", &PatchParams::default(), &Patch::Merge(&moved)).await.unwrap();
    sees(&client, "wb", &["ConfigMap/cm-a=2", "Pod/p1"]).await;
    set_v(&client, "cm-a", "3").await;
    sees(&client, "wa", &["ConfigMap/cm-a=3", "Pod/p1"]).await;
    let b = sees(&client, "wb", &["ConfigMap/cm-a=3", "Pod/p1"]).await;
    let a = seen(&client, "wa").await.unwrap().1;
    // The old reference no longer maps to wb.
    set_v(&client, "cm-b", "2").await;
    tokio::time::sleep(QUIET).await;
    assert_eq!(seen(&client, "wb").await.unwrap().1, b, "cm-b is no longer wb's");
    assert_eq!(seen(&client, "wa").await.unwrap().1, a);
    running.shutdown(Duration::from_secs(30)).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_write_to_a_related_object_is_refused() {
    let (_server, client, running) = start(&["related"], None).await;
    config_map(&client, "cm-a", "1").await;
    watcher(&client, "w", json!({"configMapRef": {"name": "cm-a"}, "mode": "patch-related"})).await;
    let (reason, message) = common::eventually("the refusal on the Watcher's condition", WAIT, || async {
        condition(&client, "w").await.filter(|(reason, _)| reason == "ActionRefused")
    })
    .await;
    assert!(
        message.contains("(patch) refused") && message.contains("v1/ConfigMap is not among the plugin's declared children"),
        "{reason}: {message}"
    );
    let cms: Api<ConfigMap> = Api::namespaced(client.clone(), "default");
    let cm = cms.get("cm-a").await.unwrap();
    assert!(!cm.metadata.labels.unwrap_or_default().contains_key("touched"), "the related ConfigMap was not written");
    running.shutdown(Duration::from_secs(30)).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn more_related_objects_than_the_cap_are_refused_with_the_count_and_the_cap() {
    let (_server, client, running) = start(&["related"], Some(3)).await;
    for i in 0..3 {
        pod(&client, &format!("p{i}"), "a").await;
    }
    watcher(&client, "w", json!({"selector": {"matchLabels": {"app": "a"}}})).await;
    sees(&client, "w", &["Pod/p0", "Pod/p1", "Pod/p2"]).await;
    // A fourth: over the cap. The plugin is not called with a part of them.
    pod(&client, "p3", "a").await;
    let (_, message) = common::eventually("TooManyRelated on the Watcher's condition", WAIT, || async {
        condition(&client, "w").await.filter(|(reason, _)| reason == "TooManyRelated")
    })
    .await;
    assert!(message.contains("4 related objects") && message.contains("cap per reconcile is 3"), "{message}");
    assert_eq!(seen(&client, "w").await.unwrap().0, ["Pod/p0", "Pod/p1", "Pod/p2"], "no truncated call was made");
    // Back under the cap, the call goes ahead.
    let pods: Api<Pod> = Api::namespaced(client.clone(), "default");
    pods.patch("p0", &PatchParams::default(), &Patch::Merge(json!({"metadata": {"labels": {"app": "gone"}}}))).await.unwrap();
    sees(&client, "w", &["Pod/p1", "Pod/p2", "Pod/p3"]).await;
    running.shutdown(Duration::from_secs(30)).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_contract_0_1_plugin_runs_unchanged_next_to_a_0_2_one() {
    let (_server, client, running) = start(&["hello-js", "related"], None).await;
    let versions: Vec<(String, String)> =
        running.controllers().iter().map(|c| (c.name().to_string(), c.plugin().info().contract_version.clone())).collect();
    assert!(versions.contains(&("hello-js".into(), "0.1.0".into())), "{versions:?}");
    assert!(versions.contains(&("related".into(), "0.2.0".into())), "{versions:?}");
    // The 0.1 plugin keeps writing its child; the 0.2 one reads that child as related.
    let hellos = Api::<DynamicObject>::namespaced_with(
        client.clone(),
        "default",
        &ApiResource {
            group: "example.operator.dev".into(),
            version: "v1alpha1".into(),
            api_version: "example.operator.dev/v1alpha1".into(),
            kind: "Hello".into(),
            plural: "hellos".into(),
        },
    );
    let hello = json!({"apiVersion": "example.operator.dev/v1alpha1", "kind": "Hello", "metadata": {"name": "h1"}, "spec": {"greeting": "Hi"}});
    hellos.create(&PostParams::default(), &serde_json::from_value(hello).unwrap()).await.unwrap();
    watcher(&client, "w", json!({"configMapRef": {"name": "h1-greeting"}})).await;
    sees(&client, "w", &["ConfigMap/h1-greeting"]).await;
    let cms: Api<ConfigMap> = Api::namespaced(client.clone(), "default");
    let cm = cms.get("h1-greeting").await.unwrap();
    assert_eq!(cm.data.unwrap_or_default().get("greeting").map(String::as_str), Some("Hi"));
    running.shutdown(Duration::from_secs(30)).await;
}
