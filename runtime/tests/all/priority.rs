//! The priority queue end to end: after a restart, every parent comes from
//! the initial list and is queued at low priority; a user's edit made while
//! that flood drains is reconciled next, not after it.

use crate::common;

use std::collections::{BTreeSet, HashMap};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use apiserver::ApiServer;
use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::{Api, ApiResource, DynamicObject, Patch, PatchParams, PostParams};
use operator_plugin_sdk::{Action, GroupVersionKind};
use operator_runtime::clock::SystemClock;
use operator_runtime::controller::cache::{KindCache, ObjectKey};
use operator_runtime::controller::hook::{CallHook, CallInput, CallObserver, Watcher};
use operator_runtime::controller::queue::Priority;
use operator_runtime::controller::{self, Controller};
use operator_runtime::metrics::Metrics;
use operator_runtime::sandbox::{CallError, LoadedPlugin, Sandbox};
use serde_json::{Value, json};

use crate::hotswap::widgets_resource;

const WAIT: Duration = Duration::from_secs(120);
const PARENTS: usize = 150;

/// Records each call's parent (name, whether it carries the edit) in call
/// order, and holds the first call until the test lets it go, so the edit
/// lands while the flood is being worked through.
struct Calls {
    seen: Arc<Mutex<Vec<(String, bool)>>>,
    each: tokio::sync::mpsc::UnboundedSender<()>,
    first: Mutex<Option<(tokio::sync::oneshot::Sender<()>, std::sync::mpsc::Receiver<()>)>>,
}

impl CallObserver for Calls {
    fn watch(&self, _: &LoadedPlugin) -> Option<Watcher> {
        if let Some((started, release)) = self.first.lock().unwrap().take() {
            let _ = started.send(());
            // Blocks one runtime thread (the test gives the runtime four) until released.
            release.recv().expect("the test releases the first call");
        }
        let seen = self.seen.clone();
        let each = self.each.clone();
        Some(Box::new(move |input: &CallInput, _: &Result<Vec<Action>, CallError>| {
            let parent: Value = serde_json::from_str(&input.parent).unwrap();
            let name = parent["metadata"]["name"].as_str().unwrap().to_string();
            seen.lock().unwrap().push((name, parent["metadata"]["labels"]["edited"] == "yes"));
            let _ = each.send(());
        }))
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn an_edit_during_the_start_up_flood_is_reconciled_before_the_flood_drains() {
    let server = ApiServer::new();
    let client = server.kube_client();
    let sandbox = Sandbox::new(common::config(Duration::from_secs(5))).unwrap();
    let plugin = common::load(&sandbox, "versioned");
    for crd in &plugin.manifest().crds {
        operator_runtime::manager::install_crd(&client, "versioned", crd, Duration::from_secs(30)).await.unwrap();
    }
    let widgets: Api<DynamicObject> = Api::namespaced_with(client.clone(), "default", &widgets_resource());
    let name = |i: usize| format!("w-{i:03}");
    for i in 0..PARENTS {
        let w = json!({"apiVersion": "swap.test.operator-host.dev/v1", "kind": "Widget", "metadata": {"name": name(i)}, "spec": {}});
        widgets.create(&PostParams::default(), &serde_json::from_value(w).unwrap()).await.unwrap();
    }

    let parent = Arc::new(KindCache::new(widgets_resource(), true));
    let config_maps = Arc::new(KindCache::new(ApiResource::erase::<ConfigMap>(&()), true));
    let mut caches = HashMap::new();
    caches.insert(GroupVersionKind::new("swap.test.operator-host.dev", "v1", "Widget"), parent.clone());
    caches.insert(GroupVersionKind::new("", "v1", "ConfigMap"), config_maps.clone());
    let seen = Arc::new(Mutex::new(Vec::new()));
    let (each_tx, mut each) = tokio::sync::mpsc::unbounded_channel();
    let (started_tx, started) = tokio::sync::oneshot::channel();
    let (release, release_rx) = std::sync::mpsc::channel();
    let calls = Calls { seen: seen.clone(), each: each_tx, first: Mutex::new(Some((started_tx, release_rx))) };
    // One worker: the order of calls is the order the queue hands keys out.
    let config = controller::Config { concurrency: 1, tap: CallHook::default().observed_by(Arc::new(calls)), ..controller::Config::default() };
    let ctl = Controller::new(plugin, caches, client.clone(), Arc::new(SystemClock), Arc::new(Metrics::new()), config);
    let tasks = [tokio::spawn(parent.clone().run(client.clone(), vec![], None)), tokio::spawn(config_maps.clone().run(client.clone(), vec![], None))];
    tokio::time::timeout(WAIT, async {
        parent.wait_synced().await;
        config_maps.wait_synced().await;
    })
    .await
    .expect("caches sync");
    assert_eq!(
        (ctl.queue().depth_at(Priority::Low), ctl.queue().depth_at(Priority::Normal)),
        (PARENTS, 0),
        "every parent of the initial list is queued at low priority"
    );

    let workers = tokio::spawn(ctl.clone().run());
    tokio::time::timeout(WAIT, started).await.expect("the first reconcile starts").unwrap();
    // The last parent of the flood is edited while the first is reconciled.
    let edited = name(PARENTS - 1);
    widgets.patch(&edited, &PatchParams::default(), &Patch::Merge(json!({"metadata": {"labels": {"edited": "yes"}}}))).await.unwrap();
    let mut changes = parent.subscribe_changes();
    let key = ObjectKey::new("default", &edited);
    tokio::time::timeout(WAIT, changes.wait_for(|_| parent.get(&key).is_some_and(|w| w.labels().get("edited") == Some("yes"))))
        .await
        .expect("the cache shows the edit")
        .unwrap();
    // The cache holds an object before its handlers queue it: under load the
    // first call could finish, and queue its own follow-up, before the edit
    // is queued. Only the edit can be ready at normal priority here (the first
    // parent is still being processed).
    tokio::time::timeout(WAIT, async {
        while ctl.queue().depth_at(Priority::Normal) == 0 {
            tokio::task::yield_now().await;
            tokio::time::sleep(Duration::from_millis(2)).await;
        }
    })
    .await
    .expect("the edit is queued at normal priority");
    release.send(()).unwrap();

    // Until every parent has been reconciled once, and the edit too.
    let all: BTreeSet<String> = (0..PARENTS).map(name).collect();
    tokio::time::timeout(WAIT, async {
        loop {
            each.recv().await.unwrap();
            let seen = seen.lock().unwrap();
            let reconciled: BTreeSet<String> = seen.iter().map(|(n, _)| n.clone()).collect();
            if reconciled == all && seen.iter().any(|(_, e)| *e) {
                break;
            }
        }
    })
    .await
    .expect("every parent is reconciled");

    let seen = seen.lock().unwrap().clone();
    let at = seen.iter().position(|(_, e)| *e).unwrap();
    assert_eq!(seen[at].0, edited);
    assert_eq!(at, 1, "the edit is the next call after the one it arrived during: {:?}", &seen[..at + 1]);
    let before: BTreeSet<&str> = seen[..at].iter().map(|(n, _)| n.as_str()).collect();
    let after: BTreeSet<&str> = seen[at + 1..].iter().map(|(n, _)| n.as_str()).filter(|n| !before.contains(n) && *n != edited).collect();
    assert_eq!(after.len(), PARENTS - 2, "the rest of the flood was reconciled after the edit");
    ctl.queue().shut_down();
    let _ = tokio::time::timeout(WAIT, workers).await;
    for t in tasks {
        t.abort();
    }
}
