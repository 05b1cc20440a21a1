//! Injected faults, as reliability tests will use them.

use apiserver::{ApiServer, Fault, FaultAction};
use futures::StreamExt;
use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::{Api, ListParams, PostParams};
use kube::runtime::{WatchStreamExt, reflector, watcher};
use serde_json::json;
use std::time::Duration;

fn cm(n: &str) -> ConfigMap {
    serde_json::from_value(json!({"metadata": {"name": n}})).unwrap()
}

#[tokio::test]
async fn an_injected_error_fails_the_next_matching_request_only() {
    let server = ApiServer::new();
    let cms: Api<ConfigMap> = Api::namespaced(server.kube_client(), "default");
    server.faults().inject(Fault::once("create", "", "configmaps", FaultAction::internal_error()));
    match cms.create(&PostParams::default(), &cm("a")).await.unwrap_err() {
        kube::Error::Api(s) => {
            assert_eq!(s.code, 500);
            assert_eq!(s.reason, "InternalError");
        }
        other => panic!("unexpected {other:?}"),
    }
    cms.create(&PostParams::default(), &cm("a")).await.unwrap();
    server.faults().inject(Fault::once("get", "", "configmaps", FaultAction::Error { code: 409, reason: "Conflict".into(), message: "x".into() }));
    assert!(cms.get("a").await.is_err());
    assert!(cms.get("a").await.is_ok());
}

#[tokio::test(start_paused = true)]
async fn injected_latency_runs_on_tokio_time() {
    let server = ApiServer::new();
    let cms: Api<ConfigMap> = Api::namespaced(server.kube_client(), "default");
    server.faults().inject(Fault::once("list", "", "configmaps", FaultAction::Latency(Duration::from_secs(30))));
    let start = tokio::time::Instant::now();
    cms.list(&ListParams::default()).await.unwrap();
    assert!(start.elapsed() >= Duration::from_secs(30));
}

#[tokio::test]
async fn broken_watches_are_recovered_by_the_watcher() {
    let server = ApiServer::new();
    let cms: Api<ConfigMap> = Api::namespaced(server.kube_client(), "default");
    server.faults().inject(Fault { verb: Some("watch".into()), group: None, resource: None, times: Some(2), action: FaultAction::CloseWatch });
    server.faults().inject(Fault::once("watch", "", "configmaps", FaultAction::ExpireWatch));
    let (reader, writer) = reflector::store::<ConfigMap>();
    let stream = reflector::reflector(writer, watcher(cms.clone(), watcher::Config::default()).default_backoff()).applied_objects();
    let task = tokio::spawn(async move {
        let mut stream = std::pin::pin!(stream);
        while stream.next().await.is_some() {}
    });
    reader.wait_until_ready().await.unwrap();
    cms.create(&PostParams::default(), &cm("after-faults")).await.unwrap();
    tokio::time::timeout(Duration::from_secs(30), async {
        while reader.get(&reflector::ObjectRef::new("after-faults").within("default")).is_none() {
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    })
    .await
    .expect("watcher recovers from closed and expired watches");
    task.abort();
}
