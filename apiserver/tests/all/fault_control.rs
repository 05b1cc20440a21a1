//! Faults from the text syntax and `/debug/faults`, observed by kube-rs clients that must still
//! end in the right state: a reflector across dropped and expired watches, writers retrying
//! injected conflicts and errors. Each test asserts that the faults really fired (counters).

use crate::common;

use apiserver::{ApiServer, FaultSpec, Faults};
use futures::StreamExt;
use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::{Api, DeleteParams, ListParams, PostParams};
use kube::runtime::{WatchStreamExt, reflector, watcher};
use operator_test_kit::until;
use serde_json::{Value, json};
use std::time::Duration;

fn cm(name: &str, value: &str) -> ConfigMap {
    // Labelled: the namespace's kube-root-ca.crt is not one of ours.
    serde_json::from_value(json!({"metadata": {"name": name, "labels": {"test": "fault"}}, "data": {"v": value}})).unwrap()
}

fn inject(faults: &Faults, spec: &str) -> apiserver::FaultId {
    faults.inject_spec(&spec.parse::<FaultSpec>().unwrap())
}

/// Retry a request while it fails with an injected 409 or 500 (what a controller's requeue
/// does); other errors fail the test.
async fn retrying<T, F, Fut>(what: &str, mut f: F) -> T
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = kube::Result<T>>,
{
    for _ in 0..200 {
        match f().await {
            Ok(v) => return v,
            Err(kube::Error::Api(s)) if s.code == 409 || s.code == 500 => continue,
            Err(e) => panic!("{what}: {e}"),
        }
    }
    panic!("{what}: still failing after 200 tries");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_reflector_sees_every_change_despite_dropped_and_expired_watches() {
    let server = ApiServer::new();
    server.faults().set_seed(1);
    let drops = inject(server.faults(), "drop-watch:every=150ms,resource=configmaps");
    let expiries = inject(server.faults(), "expire-watch:share=0.5,resource=configmaps");
    let cms: Api<ConfigMap> = Api::namespaced(server.kube_client(), "default");
    let (reader, writer) = reflector::store::<ConfigMap>();
    let stream = reflector::reflector(writer, watcher(cms.clone(), watcher::Config::default().labels("test=fault")).default_backoff());
    let task = tokio::spawn(async move {
        let mut stream = std::pin::pin!(stream);
        while stream.next().await.is_some() {}
    });
    reader.wait_until_ready().await.unwrap();
    for i in 0..40 {
        cms.create(&PostParams::default(), &cm(&format!("cm-{i}"), "v1")).await.unwrap();
        if i % 4 == 3 {
            cms.delete(&format!("cm-{}", i - 1), &DeleteParams::default()).await.unwrap();
            cms.replace(&format!("cm-{i}"), &PostParams::default(), &{
                let mut c = cms.get(&format!("cm-{i}")).await.unwrap();
                c.data = Some([("v".to_string(), "v2".to_string())].into());
                c
            })
            .await
            .unwrap();
        }
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
    // Keep the watch busy until both faults have fired a few times.
    until("several drops and expiries", Duration::from_secs(60), || {
        std::future::ready(server.faults().injected(drops) >= 3 && server.faults().injected(expiries) >= 1)
    })
    .await;
    let want: Vec<(String, String)> = cms
        .list(&ListParams::default().labels("test=fault"))
        .await
        .unwrap()
        .items
        .into_iter()
        .map(|c| (c.metadata.name.unwrap(), c.data.unwrap()["v"].clone()))
        .collect();
    assert_eq!(want.len(), 30, "40 created, 10 deleted");
    until("the reflector's store to equal the server's state", Duration::from_secs(60), || {
        let mut have: Vec<(String, String)> =
            reader.state().iter().map(|c| (c.metadata.name.clone().unwrap(), c.data.clone().unwrap()["v"].clone())).collect();
        have.sort();
        let mut want = want.clone();
        want.sort();
        std::future::ready(have == want)
    })
    .await;
    task.abort();
    let report = server.faults().to_json();
    assert!(report["injected"].as_u64().unwrap() >= 4, "{report}");
}

/// One writer, sequential requests: the same seed gives the same failures.
async fn converge_under_conflicts_and_errors(seed: u64) -> (u64, u64) {
    let server = ApiServer::new();
    server.faults().set_seed(seed);
    let conflicts = inject(server.faults(), "409:share=0.3,verb=update");
    let errors = inject(server.faults(), "500:share=0.2,resource=configmaps");
    let cms: Api<ConfigMap> = Api::namespaced(server.kube_client(), "default");
    for i in 0..20 {
        let name = format!("cm-{i}");
        let obj = cm(&name, "v1");
        let pp = PostParams::default();
        retrying("create", || cms.create(&pp, &obj)).await;
    }
    for i in 0..20 {
        let name = format!("cm-{i}");
        // Read-modify-write: a conflict means re-read, as controllers do.
        retrying("update", || async {
            let mut c = cms.get(&name).await?;
            c.data = Some([("v".to_string(), "v2".to_string())].into());
            cms.replace(&name, &PostParams::default(), &c).await
        })
        .await;
    }
    let (c, e) = (server.faults().injected(conflicts), server.faults().injected(errors));
    server.faults().clear_all();
    let items = cms.list(&ListParams::default().labels("test=fault")).await.unwrap().items;
    assert_eq!(items.len(), 20);
    assert!(items.iter().all(|c| c.data.as_ref().unwrap()["v"] == "v2"), "every update landed");
    (c, e)
}

#[tokio::test]
async fn writers_retrying_injected_conflicts_and_errors_converge_reproducibly() {
    let (conflicts, errors) = converge_under_conflicts_and_errors(42).await;
    assert!(conflicts > 0 && errors > 0, "faults fired: {conflicts} conflicts, {errors} errors");
    assert_eq!(converge_under_conflicts_and_errors(42).await, (conflicts, errors), "same seed, same faults");
}

#[tokio::test(start_paused = true)]
async fn latency_applies_only_to_its_verb_and_resource() {
    let server = ApiServer::new();
    let slow = inject(server.faults(), "latency:2s,verb=list,resource=configmaps");
    let cms: Api<ConfigMap> = Api::namespaced(server.kube_client(), "default");
    let start = tokio::time::Instant::now();
    cms.create(&PostParams::default(), &cm("a", "1")).await.unwrap();
    cms.get("a").await.unwrap();
    assert!(start.elapsed() < Duration::from_secs(1), "get and create are not delayed");
    let start = tokio::time::Instant::now();
    cms.list(&ListParams::default()).await.unwrap();
    assert!(start.elapsed() >= Duration::from_secs(2));
    assert_eq!(server.faults().injected(slow), 1);
}

#[tokio::test]
async fn the_debug_endpoint_adds_lists_counts_and_clears_rules() {
    let server = ApiServer::new();
    let (code, body) = common::call(
        &server,
        "POST",
        "/debug/faults",
        "text/plain",
        Some(Value::String("latency:1ms,resource=secrets;500:count=1,resource=configmaps".into())),
    )
    .await;
    assert_eq!(code, 201, "{body}");
    assert_eq!(body["rules"].as_array().unwrap().len(), 2);
    let (code, body) = common::post(&server, "/debug/faults", json!({"seed": 9, "spec": "409:verb=update,resource=pods"})).await;
    assert_eq!(code, 201, "{body}");
    assert_eq!(body["seed"], 9);
    let (code, body) = common::call(&server, "POST", "/debug/faults", "text/plain", Some(Value::String("418:share=0.1".into()))).await;
    assert_eq!(code, 400);
    assert!(body["message"].as_str().unwrap().contains("unknown kind `418`"), "{body}");

    assert_eq!(common::get(&server, "/api/v1/namespaces/default/configmaps").await.0, 500);
    assert_eq!(common::get(&server, "/api/v1/namespaces/default/configmaps").await.0, 200, "count=1 is spent");
    assert_eq!(common::get(&server, "/api/v1/namespaces/default/secrets").await.0, 200);
    let (_, body) = common::get(&server, "/debug/faults").await;
    let rules = body["rules"].as_array().unwrap();
    let by_kind = |k: &str| rules.iter().find(|r| r["kind"] == k).unwrap().clone();
    assert_eq!(by_kind("latency")["injected"], 1, "{body}");
    assert_eq!(by_kind("500")["injected"], 1);
    assert_eq!(by_kind("500")["active"], false);
    assert_eq!(by_kind("409")["injected"], 0);
    assert_eq!(body["injected"], 2);

    let id = by_kind("409")["id"].as_u64().unwrap();
    let (code, body) = common::delete(&server, &format!("/debug/faults/{id}"), None).await;
    assert_eq!((code, body["rules"].as_array().unwrap().len()), (200, 2));
    assert_eq!(common::delete(&server, "/debug/faults/999", None).await.0, 404);
    let (code, body) = common::delete(&server, "/debug/faults", None).await;
    assert_eq!((code, body["rules"].as_array().unwrap().len()), (200, 0));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kubectl_raw_reads_adds_and_clears_faults() {
    let server = ApiServer::new();
    let handle = server.serve().await.unwrap();
    let dir = tempfile::tempdir().unwrap();
    let kubeconfig = dir.path().join("kubeconfig");
    handle.write_kubeconfig(&kubeconfig).unwrap();
    let spec = dir.path().join("faults.txt");
    std::fs::write(&spec, "500:share=0.05\n").unwrap();
    let kubectl = |args: &[&str]| {
        let out = std::process::Command::new("kubectl")
            .arg("--kubeconfig")
            .arg(&kubeconfig)
            .arg("--cache-dir")
            .arg(dir.path().join("cache"))
            .args(args)
            .env("HOME", dir.path())
            .output()
            .expect("kubectl runs");
        assert!(out.status.success(), "kubectl {args:?}: {}", String::from_utf8_lossy(&out.stderr));
        serde_json::from_slice::<Value>(&out.stdout).unwrap_or(Value::Null)
    };
    let added = tokio::task::block_in_place(|| kubectl(&["create", "--raw", "/debug/faults", "-f", spec.to_str().unwrap()]));
    assert_eq!(added["rules"][0]["spec"], "500:share=0.05", "{added}");
    let listed = tokio::task::block_in_place(|| kubectl(&["get", "--raw", "/debug/faults"]));
    assert_eq!(listed["rules"].as_array().unwrap().len(), 1);
    tokio::task::block_in_place(|| kubectl(&["delete", "--raw", "/debug/faults"]));
    assert!(server.faults().to_json()["rules"].as_array().unwrap().is_empty());
    handle.shutdown().await;
}
