//! kube-rs against the embedded server, in-process and over HTTP.

use crate::common;

use apiserver::ApiServer;
use futures::{StreamExt, TryStreamExt};
use k8s_openapi::api::core::v1::{ConfigMap, Pod};
use kube::api::{Api, DeleteParams, DynamicObject, ListParams, Patch, PatchParams, PostParams, WatchEvent, WatchParams};
use kube::core::{ApiResource, GroupVersionKind};
use kube::runtime::{WatchStreamExt, reflector, watcher};
use serde_json::json;
use std::time::Duration;

fn pod(name: &str) -> Pod {
    serde_json::from_value(json!({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": name, "labels": {"app": "web"}},
        "spec": {"containers": [{"name": "app", "image": "nginx:1"}]}
    }))
    .unwrap()
}

async fn crud_round_trip(client: kube::Client) {
    let pods: Api<Pod> = Api::namespaced(client, "default");
    let created = pods.create(&PostParams::default(), &pod("p1")).await.unwrap();
    assert!(created.metadata.uid.is_some());
    assert!(created.metadata.creation_timestamp.is_some());
    let got = pods.get("p1").await.unwrap();
    assert_eq!(got.metadata.resource_version, created.metadata.resource_version);
    let list = pods.list(&ListParams::default().labels("app=web")).await.unwrap();
    assert_eq!(list.items.len(), 1);
    assert!(list.metadata.resource_version.is_some());
    let mut changed = got.clone();
    changed.metadata.labels.as_mut().unwrap().insert("tier".into(), "front".into());
    let replaced = pods.replace("p1", &PostParams::default(), &changed).await.unwrap();
    assert_ne!(replaced.metadata.resource_version, got.metadata.resource_version);
    // The stale copy conflicts.
    let err = pods.replace("p1", &PostParams::default(), &changed).await.unwrap_err();
    match err {
        kube::Error::Api(s) => assert_eq!(s.code, 409),
        other => panic!("unexpected {other:?}"),
    }
    let patched = pods.patch("p1", &PatchParams::default(), &Patch::Merge(json!({"metadata": {"annotations": {"a": "b"}}}))).await.unwrap();
    assert_eq!(patched.metadata.annotations.unwrap()["a"], "b");
    let applied = pods.patch("p2", &PatchParams::apply("test").force(), &Patch::Apply(pod("p2"))).await.unwrap();
    assert_eq!(applied.metadata.name.as_deref(), Some("p2"));
    pods.delete("p1", &DeleteParams::default()).await.unwrap();
    match pods.get("p1").await.unwrap_err() {
        kube::Error::Api(s) => {
            assert_eq!(s.code, 404);
            assert_eq!(s.message, "pods \"p1\" not found");
        }
        other => panic!("unexpected {other:?}"),
    }
}

#[tokio::test]
async fn pod_crud_round_trip_in_process() {
    let server = ApiServer::new();
    crud_round_trip(server.kube_client()).await;
}

#[tokio::test]
async fn pod_crud_round_trip_over_http() {
    let server = ApiServer::new();
    let handle = server.serve().await.unwrap();
    crud_round_trip(handle.kube_client().unwrap()).await;
    handle.shutdown().await;
}

async fn reflector_sees_changes(client: kube::Client, config: watcher::Config) {
    let cms: Api<ConfigMap> = Api::namespaced(client.clone(), "default");
    let seed: ConfigMap = serde_json::from_value(json!({"metadata": {"name": "seed"}, "data": {"k": "v"}})).unwrap();
    cms.create(&PostParams::default(), &seed).await.unwrap();
    let (reader, writer) = reflector::store::<ConfigMap>();
    let stream = reflector::reflector(writer, watcher(cms.clone(), config)).applied_objects();
    let task = tokio::spawn(async move {
        let mut stream = std::pin::pin!(stream);
        while stream.try_next().await.unwrap().is_some() {}
    });
    reader.wait_until_ready().await.unwrap();
    assert!(reader.get(&reflector::ObjectRef::new("seed").within("default")).is_some());
    let added: ConfigMap = serde_json::from_value(json!({"metadata": {"name": "added"}, "data": {"n": "1"}})).unwrap();
    cms.create(&PostParams::default(), &added).await.unwrap();
    cms.patch("added", &PatchParams::default(), &Patch::Merge(json!({"data": {"n": "2"}}))).await.unwrap();
    cms.delete("seed", &DeleteParams::default()).await.unwrap();
    let key = reflector::ObjectRef::new("added").within("default");
    let seed_key = reflector::ObjectRef::new("seed").within("default");
    tokio::time::timeout(Duration::from_secs(20), async {
        loop {
            let ok = reader.get(&key).is_some_and(|c| c.data.as_ref().unwrap()["n"] == "2") && reader.get(&seed_key).is_none();
            if ok {
                break;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    })
    .await
    .expect("reflector converges");
    task.abort();
}

#[tokio::test]
async fn watcher_reflector_sees_add_modify_delete_in_process() {
    let server = ApiServer::new();
    reflector_sees_changes(server.kube_client(), watcher::Config::default()).await;
}

#[tokio::test]
async fn watcher_reflector_sees_add_modify_delete_over_http() {
    let server = ApiServer::new();
    let handle = server.serve().await.unwrap();
    reflector_sees_changes(handle.kube_client().unwrap(), watcher::Config::default()).await;
}

#[tokio::test]
async fn streaming_list_watcher_sees_add_modify_delete() {
    let server = ApiServer::new();
    reflector_sees_changes(server.kube_client(), watcher::Config::default().streaming_lists()).await;
    let server = ApiServer::new();
    let handle = server.serve().await.unwrap();
    reflector_sees_changes(handle.kube_client().unwrap(), watcher::Config::default().streaming_lists().labels("none!=x")).await;
}

#[tokio::test]
async fn resumed_watch_misses_no_event_in_process() {
    let server = ApiServer::new();
    resumed_watch_misses_no_event(server.kube_client()).await;
}

#[tokio::test]
async fn resumed_watch_misses_no_event_over_http() {
    let server = ApiServer::new();
    let handle = server.serve().await.unwrap();
    resumed_watch_misses_no_event(handle.kube_client().unwrap()).await;
}

async fn resumed_watch_misses_no_event(client: kube::Client) {
    let cms: Api<ConfigMap> = Api::namespaced(client, "default");
    let list = cms.list(&ListParams::default()).await.unwrap();
    let rv = list.metadata.resource_version.unwrap();
    let mut stream = cms.watch(&WatchParams::default(), &rv).await.unwrap().boxed();
    let mk = |n: &str| -> ConfigMap { serde_json::from_value(json!({"metadata": {"name": n}})).unwrap() };
    cms.create(&PostParams::default(), &mk("a")).await.unwrap();
    let last_rv = match stream.try_next().await.unwrap().unwrap() {
        WatchEvent::Added(o) => o.metadata.resource_version.unwrap(),
        other => panic!("unexpected {other:?}"),
    };
    drop(stream);
    // Changes while nobody watches.
    cms.create(&PostParams::default(), &mk("b")).await.unwrap();
    cms.delete("a", &DeleteParams::default()).await.unwrap();
    let mut stream = cms.watch(&WatchParams::default(), &last_rv).await.unwrap().boxed();
    let mut seen = vec![];
    for _ in 0..2 {
        match stream.try_next().await.unwrap().unwrap() {
            WatchEvent::Added(o) => seen.push(format!("ADDED {}", o.metadata.name.unwrap())),
            WatchEvent::Deleted(o) => seen.push(format!("DELETED {}", o.metadata.name.unwrap())),
            other => panic!("unexpected {other:?}"),
        }
    }
    assert_eq!(seen, ["ADDED b", "DELETED a"]);
}

#[tokio::test]
async fn too_old_resource_version_is_gone_and_the_watcher_relists_in_process() {
    let server = ApiServer::with_config(apiserver::Config { event_window: 3, ..Default::default() });
    too_old_resource_version_is_gone_and_the_watcher_relists(server.kube_client()).await;
}

#[tokio::test]
async fn too_old_resource_version_is_gone_and_the_watcher_relists_over_http() {
    let server = ApiServer::with_config(apiserver::Config { event_window: 3, ..Default::default() });
    let handle = server.serve().await.unwrap();
    too_old_resource_version_is_gone_and_the_watcher_relists(handle.kube_client().unwrap()).await;
}

async fn too_old_resource_version_is_gone_and_the_watcher_relists(client: kube::Client) {
    let cms: Api<ConfigMap> = Api::namespaced(client, "default");
    let mk = |n: &str| -> ConfigMap { serde_json::from_value(json!({"metadata": {"name": n}})).unwrap() };
    for n in ["a", "b", "c", "d", "e"] {
        cms.create(&PostParams::default(), &mk(n)).await.unwrap();
    }
    let mut stream = cms.watch(&WatchParams::default(), "1").await.unwrap().boxed();
    match stream.try_next().await.unwrap().unwrap() {
        WatchEvent::Error(e) => {
            assert_eq!(e.code, 410);
            assert_eq!(e.reason, "Expired");
            assert!(e.message.starts_with("too old resource version: 1"), "{}", e.message);
        }
        other => panic!("unexpected {other:?}"),
    }
    // kube-runtime's watcher recovers on its own by relisting.
    let (reader, writer) = reflector::store::<ConfigMap>();
    let stream = reflector::reflector(writer, watcher(cms.clone(), watcher::Config::default())).applied_objects();
    let task = tokio::spawn(async move {
        let mut stream = std::pin::pin!(stream);
        while stream.next().await.is_some() {}
    });
    reader.wait_until_ready().await.unwrap();
    assert_eq!(reader.state().len(), 6, "5 created and the namespace's kube-root-ca.crt");
    task.abort();
}

#[tokio::test]
async fn dynamic_objects_of_a_crd_round_trip() {
    let server = ApiServer::new();
    let client = server.kube_client();
    let crds: Api<DynamicObject> = Api::all_with(
        client.clone(),
        &ApiResource::from_gvk_with_plural(
            &GroupVersionKind::gvk("apiextensions.k8s.io", "v1", "CustomResourceDefinition"),
            "customresourcedefinitions",
        ),
    );
    let crd: DynamicObject = serde_json::from_value(common::crontab_crd()).unwrap();
    let created = crds.create(&PostParams::default(), &crd).await.unwrap();
    let conds = created.data["status"]["conditions"].as_array().unwrap();
    assert!(conds.iter().any(|c| c["type"] == "Established" && c["status"] == "True"));
    let ar = ApiResource::from_gvk_with_plural(&GroupVersionKind::gvk("stable.example.com", "v1", "CronTab"), "crontabs");
    let cts: Api<DynamicObject> = Api::namespaced_with(client, "default", &ar);
    let ct: DynamicObject = serde_json::from_value(
        json!({"apiVersion": "stable.example.com/v1", "kind": "CronTab", "metadata": {"name": "c1"}, "spec": {"cronSpec": "* * * * */5", "junk": 1}}),
    )
    .unwrap();
    let c = cts.create(&PostParams::default(), &ct).await.unwrap();
    assert_eq!(c.data["spec"]["replicas"], 1, "default applied");
    assert!(c.data["spec"].get("junk").is_none(), "unknown field pruned");
    assert_eq!(c.metadata.generation, Some(1));
    let bad: DynamicObject = serde_json::from_value(
        json!({"apiVersion": "stable.example.com/v1", "kind": "CronTab", "metadata": {"name": "c2"}, "spec": {"cronSpec": "x", "replicas": -1}}),
    )
    .unwrap();
    match cts.create(&PostParams::default(), &bad).await.unwrap_err() {
        kube::Error::Api(s) => {
            assert_eq!(s.code, 422);
            assert!(
                s.message.contains("spec.replicas: Invalid value: -1: spec.replicas in body should be greater than or equal to 0"),
                "{}",
                s.message
            );
        }
        other => panic!("unexpected {other:?}"),
    }
    crds.delete("crontabs.stable.example.com", &DeleteParams::default()).await.unwrap();
    assert!(cts.get("c1").await.is_err());
}

#[tokio::test]
async fn events_recorded_through_events_k8s_io_are_core_events_too() {
    use k8s_openapi::api::core::v1::Event as CoreEvent;
    use kube::Resource;
    use kube::runtime::events::{Event, EventType, Recorder, Reporter};
    let server = ApiServer::new();
    let client = server.kube_client();
    let pods: Api<Pod> = Api::namespaced(client.clone(), "default");
    let p = pods.create(&PostParams::default(), &pod("ev")).await.unwrap();
    let recorder = Recorder::new(client.clone(), Reporter { controller: "test-controller".into(), instance: None });
    let ev =
        Event { type_: EventType::Normal, reason: "Reconciled".into(), note: Some("all good".into()), action: "Reconcile".into(), secondary: None };
    recorder.publish(&ev, &p.object_ref(&())).await.unwrap();
    recorder.publish(&ev, &p.object_ref(&())).await.unwrap();
    let core: Api<CoreEvent> = Api::namespaced(client, "default");
    let list = core.list(&ListParams::default().fields("involvedObject.name=ev")).await.unwrap();
    assert_eq!(list.items.len(), 1, "repeats patch the same event");
    let e = &list.items[0];
    assert_eq!(e.reason.as_deref(), Some("Reconciled"));
    assert_eq!(e.message.as_deref(), Some("all good"));
    assert_eq!(e.reporting_component.as_deref(), Some("test-controller"));
    assert_eq!(e.involved_object.name.as_deref(), Some("ev"));
    assert_eq!(e.series.as_ref().and_then(|s| s.count), Some(2));
}

#[tokio::test(start_paused = true)]
async fn watcher_keeps_up_through_hours_of_virtual_time() {
    // The shape `host simulate` relies on: in-process client, tokio's paused clock.
    let server = ApiServer::new();
    let cms: Api<ConfigMap> = Api::namespaced(server.kube_client(), "default");
    let (reader, writer) = reflector::store::<ConfigMap>();
    let stream = reflector::reflector(writer, watcher(cms.clone(), watcher::Config::default())).applied_objects();
    let task = tokio::spawn(async move {
        let mut stream = std::pin::pin!(stream);
        while stream.next().await.is_some() {}
    });
    reader.wait_until_ready().await.unwrap();
    for hour in 0..6 {
        let name = format!("h{hour}");
        let cm: ConfigMap = serde_json::from_value(json!({"metadata": {"name": name}})).unwrap();
        cms.create(&PostParams::default(), &cm).await.unwrap();
        tokio::time::sleep(Duration::from_secs(3600)).await;
        assert!(reader.get(&reflector::ObjectRef::new(&name).within("default")).is_some(), "hour {hour}");
    }
    assert_eq!(reader.state().len(), 7, "6 created and the namespace's kube-root-ca.crt");
    task.abort();
}

#[tokio::test]
async fn delete_collection_removes_matching_objects() {
    let server = ApiServer::new();
    let cms: Api<ConfigMap> = Api::namespaced(server.kube_client(), "default");
    for (n, app) in [("a", "x"), ("b", "x"), ("c", "y")] {
        let cm: ConfigMap = serde_json::from_value(json!({"metadata": {"name": n, "labels": {"app": app}}})).unwrap();
        cms.create(&PostParams::default(), &cm).await.unwrap();
    }
    let deleted = cms.delete_collection(&DeleteParams::default(), &ListParams::default().labels("app=x")).await.unwrap();
    let names: Vec<String> = deleted.left().unwrap().items.into_iter().map(|c| c.metadata.name.unwrap()).collect();
    assert_eq!(names, ["a", "b"]);
    let left: Vec<String> = cms.list(&ListParams::default()).await.unwrap().items.into_iter().map(|c| c.metadata.name.unwrap()).collect();
    assert_eq!(left, ["c", "kube-root-ca.crt"]);
}

#[tokio::test]
async fn metadata_watcher_sees_partial_object_metadata() {
    use kube::core::PartialObjectMeta;
    let server = ApiServer::new();
    let cms: Api<ConfigMap> = Api::namespaced(server.kube_client(), "default");
    let cm: ConfigMap = serde_json::from_value(json!({"metadata": {"name": "m", "labels": {"a": "b"}}, "data": {"big": "x"}})).unwrap();
    cms.create(&PostParams::default(), &cm).await.unwrap();
    let meta = cms.get_metadata("m").await.unwrap();
    assert_eq!(meta.metadata.labels.unwrap()["a"], "b");
    let list = cms.list_metadata(&ListParams::default().labels("a=b")).await.unwrap();
    assert_eq!(list.items.len(), 1);
    let metas: Api<PartialObjectMeta<ConfigMap>> = Api::namespaced(server.kube_client(), "default");
    let mut stream = watcher(metas, watcher::Config::default().labels("a=b")).applied_objects().boxed();
    let first = stream.try_next().await.unwrap().unwrap();
    assert_eq!(first.metadata.name.as_deref(), Some("m"));
}

#[tokio::test]
async fn shutdown_completes_with_an_open_watch() {
    let server = ApiServer::new();
    let handle = server.serve().await.unwrap();
    let cms: Api<ConfigMap> = Api::namespaced(handle.kube_client().unwrap(), "default");
    let mut stream = cms.watch(&WatchParams::default().timeout(290), "0").await.unwrap().boxed();
    let watching = tokio::spawn(async move { while stream.next().await.is_some() {} });
    handle.shutdown().await;
    watching.await.unwrap();
}

#[tokio::test]
async fn thousands_of_objects_list_in_pages_and_watch_from_the_list() {
    let server = ApiServer::new();
    let cms: Api<ConfigMap> = Api::namespaced(server.kube_client(), "default");
    for i in 0..2000 {
        let cm: ConfigMap =
            serde_json::from_value(json!({"metadata": {"name": format!("cm-{i:04}"), "labels": {"even": (i % 2 == 0).to_string()}}})).unwrap();
        cms.create(&PostParams::default(), &cm).await.unwrap();
    }
    let (reader, writer) = reflector::store::<ConfigMap>();
    let stream = reflector::reflector(writer, watcher(cms.clone(), watcher::Config::default().labels("even=true").page_size(300))).applied_objects();
    let task = tokio::spawn(async move {
        let mut stream = std::pin::pin!(stream);
        while stream.next().await.is_some() {}
    });
    reader.wait_until_ready().await.unwrap();
    assert_eq!(reader.state().len(), 1000);
    task.abort();
}
