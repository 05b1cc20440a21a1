//! A plugin's requeue at the priority it asked for (contract 0.4): a 0.4
//! plugin's low-priority requeue is handed out low when its timer fires, a
//! plain requeue stays normal, and an unchanged 0.3 plugin (written against
//! `wit/v0.3`) still loads and requeues at normal priority.
//!
//! Each pass's priority is the one the queue itself recorded when it handed
//! the key out (`processing_priority`, read while the call is in flight), so
//! the tests wait on calls, never on the clock.

use crate::common;

use std::collections::HashMap;
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Duration;

use apiserver::ApiServer;
use kube::api::{Api, ApiResource, DynamicObject, PostParams};
use operator_plugin_sdk::{Action, GroupVersionKind};
use operator_runtime::clock::SystemClock;
use operator_runtime::controller::cache::{KindCache, ObjectKey};
use operator_runtime::controller::hook::{CallHook, CallInput, CallObserver, Watcher};
use operator_runtime::controller::queue::{Priority, WorkQueue};
use operator_runtime::controller::{self, Controller};
use operator_runtime::metrics::Metrics;
use operator_runtime::sandbox::{CallError, LoadedPlugin, Sandbox};
use serde_json::{Value, json};

const WAIT: Duration = Duration::from_secs(120);

fn tickers_resource() -> ApiResource {
    ApiResource {
        group: "requeue.test.operator-host.dev".into(),
        version: "v1".into(),
        api_version: "requeue.test.operator-host.dev/v1".into(),
        kind: "Ticker".into(),
        plural: "tickers".into(),
    }
}

/// Records, per Ticker, the priority each of its calls was handed out at.
struct Priorities {
    queue: Arc<OnceLock<Arc<WorkQueue<ObjectKey>>>>,
    seen: Arc<Mutex<HashMap<String, Vec<Priority>>>>,
    each: tokio::sync::mpsc::UnboundedSender<()>,
}

impl CallObserver for Priorities {
    fn watch(&self, _: &LoadedPlugin) -> Option<Watcher> {
        let (queue, seen, each) = (self.queue.clone(), self.seen.clone(), self.each.clone());
        Some(Box::new(move |input: &CallInput, _: &Result<Vec<Action>, CallError>| {
            let parent: Value = serde_json::from_str(&input.parent).unwrap();
            let name = parent["metadata"]["name"].as_str().unwrap().to_string();
            // The key is still being processed: the queue finishes it after the call.
            let key = ObjectKey::new(parent["metadata"]["namespace"].as_str().unwrap(), &name);
            let priority = queue.get().expect("set before the workers run").processing_priority(&key).expect("the key is in flight");
            seen.lock().unwrap().entry(name).or_default().push(priority);
            let _ = each.send(());
        }))
    }
}

/// Runs `plugin` over Tickers created after its caches synced (so each one's
/// first pass is a fresh change) until every Ticker has had `calls` calls;
/// returns each one's priorities in call order, and the plugin's contract
/// version.
async fn priorities_of(plugin: &str, tickers: &[(&str, Value)], calls: usize) -> (String, HashMap<String, Vec<Priority>>) {
    let server = ApiServer::new();
    let client = server.kube_client();
    let sandbox = Sandbox::new(common::config(Duration::from_secs(5))).unwrap();
    let plugin = common::load(&sandbox, plugin);
    let contract = plugin.info().contract_version.clone();
    for crd in &plugin.manifest().crds {
        operator_runtime::manager::install_crd(&client, "requeuing", crd, Duration::from_secs(30)).await.unwrap();
    }
    let parent = Arc::new(KindCache::new(tickers_resource(), true));
    let caches = HashMap::from([(GroupVersionKind::new("requeue.test.operator-host.dev", "v1", "Ticker"), parent.clone())]);
    let queue = Arc::new(OnceLock::new());
    let seen = Arc::new(Mutex::new(HashMap::new()));
    let (each_tx, mut each) = tokio::sync::mpsc::unbounded_channel();
    let observer = Priorities { queue: queue.clone(), seen: seen.clone(), each: each_tx };
    let config = controller::Config { concurrency: 1, tap: CallHook::default().observed_by(Arc::new(observer)), ..controller::Config::default() };
    let ctl = Controller::new(plugin, caches, client.clone(), Arc::new(SystemClock), Arc::new(Metrics::new()), config);
    assert!(queue.set(ctl.queue().clone()).is_ok(), "the queue is set once");
    let informer = tokio::spawn(parent.clone().run(client.clone(), vec![], None));
    tokio::time::timeout(WAIT, parent.wait_synced()).await.expect("the cache syncs");
    let workers = tokio::spawn(ctl.clone().run());

    let api: Api<DynamicObject> = Api::namespaced_with(client.clone(), "default", &tickers_resource());
    for (name, spec) in tickers {
        let t = json!({"apiVersion": "requeue.test.operator-host.dev/v1", "kind": "Ticker", "metadata": {"name": name}, "spec": spec});
        api.create(&PostParams::default(), &serde_json::from_value(t).unwrap()).await.unwrap();
    }
    tokio::time::timeout(WAIT, async {
        loop {
            each.recv().await.unwrap();
            let seen = seen.lock().unwrap();
            if tickers.iter().all(|(name, _)| seen.get(*name).is_some_and(|p| p.len() >= calls)) {
                break;
            }
        }
    })
    .await
    .unwrap_or_else(|_| panic!("every Ticker is called {calls} times: {:?}", seen.lock().unwrap()));
    ctl.queue().shut_down();
    let _ = tokio::time::timeout(WAIT, workers).await;
    informer.abort();
    let seen = seen.lock().unwrap().clone();
    (contract, seen)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_contract_0_4_plugins_low_priority_requeue_is_handed_out_low_when_its_timer_fires() {
    let tickers = [("slow", json!({"afterMs": 50, "priority": "low"})), ("prompt", json!({"afterMs": 50, "priority": "normal"}))];
    let (contract, seen) = priorities_of("requeuing", &tickers, 3).await;
    assert_eq!(contract, "0.4.0");
    let (slow, prompt) = (&seen["slow"], &seen["prompt"]);
    assert_eq!(slow[0], Priority::Normal, "a new parent is a fresh change: {slow:?}");
    assert!(slow[1..].iter().all(|p| *p == Priority::Low), "every timer pass of the low requeue is low: {slow:?}");
    assert!(prompt.iter().all(|p| *p == Priority::Normal), "a plain requeue stays normal: {prompt:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unchanged_contract_0_3_plugin_still_loads_and_requeues_at_normal_priority() {
    // `spec.priority` means nothing to a 0.3 plugin: it cannot ask for low.
    let tickers = [("old", json!({"afterMs": 50, "priority": "low"}))];
    let (contract, seen) = priorities_of("requeuing-v0-3", &tickers, 3).await;
    assert_eq!(contract, "0.3.0");
    assert!(seen["old"].iter().all(|p| *p == Priority::Normal), "{:?}", seen["old"]);
}
