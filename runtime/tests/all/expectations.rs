//! Regression test for duplicate children from a lagging cache: MyDeployment
//! creates Pods by generateName and relies on the host to hold its next
//! reconcile until the cache shows the Pods of the previous one. Here the Pod
//! cache is fed through a relay that delays every watch event, so a host
//! without expectations creates extra Pods.

use crate::common;

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use apiserver::ApiServer;
use futures::StreamExt;
use k8s_openapi::api::apps::v1::ControllerRevision;
use k8s_openapi::api::core::v1::{ConfigMap, Pod};
use kube::api::{Api, ApiResource, DynamicObject, ListParams, PostParams};
use kube::runtime::watcher::{self, Event};
use operator_plugin_sdk::GroupVersionKind;
use operator_runtime::clock::SystemClock;
use operator_runtime::controller::cache::KindCache;
use operator_runtime::controller::{self, Controller};
use operator_runtime::metrics::Metrics;
use operator_runtime::sandbox::Sandbox;
use serde_json::json;

const WAIT: Duration = Duration::from_secs(90);
const LAG: Duration = Duration::from_millis(300);

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lagging_pod_cache_does_not_make_the_controller_create_duplicate_pods() {
    let server = ApiServer::new();
    let client = server.kube_client();
    let sandbox = Sandbox::new(common::config(Duration::from_secs(5))).unwrap();
    let plugin = common::load(&sandbox, "mydeployment");
    for crd in &plugin.manifest().crds {
        operator_runtime::manager::install_crd(&client, "mydeployment", crd, Duration::from_secs(30)).await.unwrap();
    }
    let md_ar = ApiResource {
        group: "apps.example.com".into(),
        version: "v1".into(),
        api_version: "apps.example.com/v1".into(),
        kind: "MyDeployment".into(),
        plural: "mydeployments".into(),
    };
    let parent = Arc::new(KindCache::new(md_ar.clone(), true));
    let pods = Arc::new(KindCache::new(ApiResource::erase::<Pod>(&()), true));
    let revisions = Arc::new(KindCache::new(ApiResource::erase::<ControllerRevision>(&()), true));
    // MyDeployment reads the ConfigMaps its template names (related objects, for its config hash).
    let config_maps = Arc::new(KindCache::new(ApiResource::erase::<ConfigMap>(&()), true));
    let mut caches = HashMap::new();
    caches.insert(GroupVersionKind::new("apps.example.com", "v1", "MyDeployment"), parent.clone());
    caches.insert(GroupVersionKind::new("", "v1", "Pod"), pods.clone());
    caches.insert(GroupVersionKind::new("apps", "v1", "ControllerRevision"), revisions.clone());
    caches.insert(GroupVersionKind::new("", "v1", "ConfigMap"), config_maps.clone());
    let ctl = Controller::new(plugin, caches, client.clone(), Arc::new(SystemClock), Arc::new(Metrics::new()), controller::Config::default());

    let t1 = tokio::spawn(parent.clone().run(client.clone(), vec![], None));
    let t2 = tokio::spawn(revisions.clone().run(client.clone(), vec![], None));
    let t4 = tokio::spawn(config_maps.clone().run(client.clone(), vec![], None));
    // The lagging relay: every Pod event reaches the cache LAG late.
    let relay_cache = pods.clone();
    let relay_client = client.clone();
    let (listed_tx, listed_rx) = tokio::sync::oneshot::channel();
    let t3 = tokio::spawn(async move {
        let mut listed = Some(listed_tx);
        let api: Api<DynamicObject> = Api::all_with(relay_client, &ApiResource::erase::<Pod>(&()));
        let mut stream = watcher::watcher(api, watcher::Config::default()).boxed();
        let mut buffer = Vec::new();
        while let Some(Ok(ev)) = stream.next().await {
            match ev {
                Event::Init => buffer.clear(),
                Event::InitApply(o) => buffer.push(o),
                Event::InitDone => {
                    relay_cache.replace(None, std::mem::take(&mut buffer));
                    relay_cache.mark_synced();
                    if let Some(tx) = listed.take() {
                        let _ = tx.send(());
                    }
                }
                Event::Apply(o) => {
                    tokio::time::sleep(LAG).await;
                    relay_cache.apply(o);
                }
                Event::Delete(o) => {
                    tokio::time::sleep(LAG).await;
                    relay_cache.delete(o);
                }
            }
        }
    });
    tokio::time::timeout(WAIT, async {
        parent.wait_synced().await;
        revisions.wait_synced().await;
        config_maps.wait_synced().await;
        listed_rx.await.unwrap();
    })
    .await
    .expect("caches sync");
    let workers = tokio::spawn(ctl.clone().run());

    let mds: Api<DynamicObject> = Api::namespaced_with(client.clone(), "default", &md_ar);
    let md = json!({"apiVersion": "apps.example.com/v1", "kind": "MyDeployment", "metadata": {"name": "lag"},
        "spec": {"replicas": 3, "selector": {"matchLabels": {"app": "lag"}},
                 "template": {"metadata": {"labels": {"app": "lag"}}, "spec": {"containers": [{"name": "c", "image": "nginx"}]}}}});
    mds.create(&PostParams::default(), &serde_json::from_value(md).unwrap()).await.unwrap();

    let pod_api: Api<Pod> = Api::namespaced(client.clone(), "default");
    let deadline = tokio::time::Instant::now() + WAIT;
    loop {
        let n = pod_api.list(&ListParams::default()).await.unwrap().items.len();
        assert!(n <= 3, "{n} pods: the controller reconciled on a cache that had not seen its own creates");
        if n == 3 && pods.len() == 3 {
            break;
        }
        assert!(tokio::time::Instant::now() < deadline, "timed out waiting for 3 pods ({n})");
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
    // Several more lag periods: still 3 (resyncs, revision and status events come and go).
    for _ in 0..8 {
        ctl.resync();
        tokio::time::sleep(LAG / 2).await;
        let n = pod_api.list(&ListParams::default()).await.unwrap().items.len();
        assert_eq!(n, 3, "no duplicates once settled");
    }
    ctl.queue().shut_down();
    let _ = tokio::time::timeout(WAIT, workers).await;
    for t in [t1, t2, t3, t4] {
        t.abort();
    }
}
