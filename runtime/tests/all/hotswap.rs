//! Hot swap through a ConfigMap, as `host run --plugin-configmap` wires it:
//! the ConfigMap watch feeds the reloader, which compiles off the hot path
//! and swaps the plugin in the running manager; a swapped-in version that
//! fails is rolled back. (Trust over the same path: `trust.rs`.)

use crate::common;

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use apiserver::ApiServer;
use k8s_openapi::ByteString;
use k8s_openapi::api::core::v1::ConfigMap;
use k8s_openapi::api::events::v1::Event;
use kube::Api;
use kube::api::{ApiResource, DynamicObject, ListParams, Patch, PatchParams, PostParams};
use serde_json::json;

use operator_runtime::clock::SystemClock;
use operator_runtime::events::Recorder;
use operator_runtime::hotswap::configmap::{self, Selection};
use operator_runtime::hotswap::trust::Policy;
use operator_runtime::hotswap::{Origin, Reloader, files, rollback};
use operator_runtime::manager::{self, Options, Running};
use operator_runtime::metrics::Metrics;
use operator_runtime::sandbox::Sandbox;

pub const WAIT: Duration = Duration::from_secs(60);
const NS: &str = "default";
const SOURCE: &str = "plugins";

/// The test plugin's default build ("1.0.0"), its `v2` variant ("2.0.0")
/// or its `broken` one ("3.0.0", panics on every reconcile).
pub fn bytes(name: &str) -> Vec<u8> {
    let path = if name == "versioned" { common::wasm(name) } else { common::built_plugin(name) };
    std::fs::read(path).unwrap()
}

pub fn id(key: &str) -> String {
    Origin::ConfigMap { namespace: NS.into(), name: SOURCE.into(), uid: String::new(), key: key.into() }.id()
}

pub fn widgets_resource() -> ApiResource {
    ApiResource {
        group: "swap.test.operator-host.dev".into(),
        version: "v1".into(),
        api_version: "swap.test.operator-host.dev/v1".into(),
        kind: "Widget".into(),
        plural: "widgets".into(),
    }
}

pub struct Env {
    pub client: kube::Client,
    pub manager: Running,
    tasks: Vec<tokio::task::JoinHandle<()>>,
    _server: ApiServer,
}

impl Env {
    /// A manager with no plugins, fed by a watch of ConfigMap default/plugins.
    async fn start() -> Env {
        Self::start_with(Policy::default(), rollback::Config::default(), vec![]).await
    }

    /// [`Env::start`] with a trust policy, a rollback config, and plugin
    /// files watched as `--plugin FILE --watch` does.
    pub async fn start_with(trust: Policy, rollback: rollback::Config, files: Vec<std::path::PathBuf>) -> Env {
        let server = ApiServer::new();
        let client = server.kube_client();
        let metrics = Arc::new(Metrics::new());
        let clock: operator_runtime::clock::SharedClock = Arc::new(SystemClock);
        let options = Options { resync: Duration::from_secs(3600), ..Options::default() };
        // Stamped now, as `host run` does before it reads the files.
        let file_watch = (!files.is_empty()).then(|| files::FileWatch::new(files));
        let manager = manager::Builder::new(client.clone()).options(options).clock(clock.clone()).metrics(metrics.clone()).start().await.unwrap();
        // What `host status` reads, as `host run` sets it.
        metrics.set_status_source(Box::new(operator_runtime::status::Source { registry: manager.registry().clone(), shadows: None }));
        let sandbox = Sandbox::new(common::config(Duration::from_secs(5))).unwrap();
        let (tx, rx) = tokio::sync::mpsc::channel(16);
        let selection = Selection::Named { namespace: NS.into(), name: SOURCE.into() };
        let reloader = Reloader {
            sandbox,
            manager: manager.clone(),
            metrics,
            recorder: Recorder::new(client.clone(), "hotswap", clock),
            on_applied: None,
            trust,
            rollback: rollback::Watchdog::new(rollback),
            shadows: None,
        };
        let mut tasks = vec![tokio::spawn(configmap::watch(client.clone(), selection, tx.clone())), tokio::spawn(reloader.run(rx))];
        if let Some(watch) = file_watch {
            tasks.push(tokio::spawn(watch.run(Duration::from_millis(50), tx)));
        }
        Env { client, manager, tasks, _server: server }
    }

    pub async fn publish(&self, data: &[(&str, Vec<u8>)]) {
        let api: Api<ConfigMap> = Api::namespaced(self.client.clone(), NS);
        let mut cm = ConfigMap::default();
        cm.metadata.name = Some(SOURCE.into());
        cm.binary_data = Some(data.iter().map(|(k, v)| (k.to_string(), ByteString(v.clone()))).collect::<BTreeMap<_, _>>());
        let params = PatchParams::apply("hotswap-test").force();
        api.patch(
            SOURCE,
            &params,
            &Patch::Apply(&json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": SOURCE}, "binaryData": cm.binary_data})),
        )
        .await
        .unwrap();
    }

    /// Waits until the plugin under `key` reports `version`.
    pub async fn running(&self, key: &str, version: &str) {
        common::eventually(&format!("{key} at version {version}"), WAIT, || async {
            self.manager.plugin(&id(key)).filter(|p| p.manifest().version == version).map(|_| ())
        })
        .await;
    }

    fn swaps(&self, result: &str) -> u64 {
        self.counter(&format!("plugin_swaps_total{{plugin=\"{}\",result=\"{result}\"}}", id("plugin.wasm")))
    }

    /// The value of the counter line starting with `series` (0 if absent).
    pub fn counter(&self, series: &str) -> u64 {
        let text = self.manager.metrics().render();
        text.lines().find_map(|l| l.strip_prefix(series)?.strip_prefix(' ')).map_or(0, |n| n.trim().parse().unwrap())
    }

    /// The version running under `key` now, if any.
    pub fn version(&self, key: &str) -> Option<String> {
        self.manager.plugin(&id(key)).map(|p| p.manifest().version.clone())
    }

    /// The Events on the plugins ConfigMap with `reason`, oldest first.
    pub async fn events(&self, reason: &str) -> Vec<Event> {
        let events: Api<Event> = Api::namespaced(self.client.clone(), NS);
        let all = events.list(&ListParams::default()).await.unwrap().items;
        all.into_iter()
            .filter(|e| e.reason.as_deref() == Some(reason) && e.regarding.as_ref().and_then(|r| r.name.as_deref()) == Some(SOURCE))
            .collect()
    }

    pub async fn stop(self) {
        for t in &self.tasks {
            t.abort();
        }
        self.manager.shutdown(Duration::from_secs(30)).await;
    }
}

/// ConfigMaps stamped by widgets, by widget name: (count, versions).
async fn children(client: &kube::Client) -> BTreeMap<String, Vec<String>> {
    let api: Api<ConfigMap> = Api::namespaced(client.clone(), NS);
    let mut by_widget: BTreeMap<String, Vec<String>> = BTreeMap::new();
    for cm in api.list(&ListParams::default().labels("widget")).await.unwrap() {
        let widget = cm.metadata.labels.unwrap_or_default()["widget"].clone();
        let version = cm.data.unwrap_or_default().get("version").cloned().unwrap_or_default();
        by_widget.entry(widget).or_default().push(version);
    }
    by_widget
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn swapping_ten_times_under_load_loses_and_duplicates_nothing_and_refuses_a_broken_module() {
    let env = Env::start().await;
    let (v1, v2) = (bytes("versioned"), bytes("versioned-v2"));
    env.publish(&[("plugin.wasm", v1.clone())]).await;
    env.running("plugin.wasm", "1.0.0").await;

    // 200 parents, created in batches between swaps so reconciles are in
    // flight while versions change.
    let widgets: Api<DynamicObject> = Api::namespaced_with(env.client.clone(), NS, &widgets_resource());
    for swap in 0..10 {
        for i in 0..20 {
            let name = format!("w{:03}", swap * 20 + i);
            let obj = serde_json::from_value(
                json!({"apiVersion": "swap.test.operator-host.dev/v1", "kind": "Widget", "metadata": {"name": name}, "spec": {}}),
            )
            .unwrap();
            widgets.create(&PostParams::default(), &obj).await.unwrap();
        }
        let (next, version) = if swap % 2 == 0 { (&v2, "2.0.0") } else { (&v1, "1.0.0") };
        env.publish(&[("plugin.wasm", next.clone())]).await;
        env.running("plugin.wasm", version).await;
    }
    // The swap is counted just after the new version is installed, so the
    // last count can trail `running` by a moment.
    common::eventually("ten swaps counted", WAIT, || async { (env.swaps("swapped") >= 10).then_some(()) }).await;
    assert_eq!(env.swaps("swapped"), 10, "each new version swapped in place (same kinds)");

    // A broken module is refused; v1 keeps running and says so on the ConfigMap.
    env.publish(&[("plugin.wasm", b"\0asm this is not a component".to_vec())]).await;
    common::eventually("the refusal", WAIT, || async { (env.swaps("rejected") == 1).then_some(()) }).await;
    assert_eq!(env.manager.plugin(&id("plugin.wasm")).unwrap().manifest().version, "1.0.0");
    let events: Api<Event> = Api::namespaced(env.client.clone(), NS);
    let refused = events
        .list(&ListParams::default())
        .await
        .unwrap()
        .items
        .into_iter()
        .find(|e| e.reason.as_deref() == Some("PluginRejected"))
        .expect("a PluginRejected event");
    assert_eq!(refused.type_.as_deref(), Some("Warning"));
    assert_eq!(refused.regarding.as_ref().and_then(|r| r.name.as_deref()), Some(SOURCE));
    assert!(refused.note.as_deref().unwrap_or_default().contains("still running versioned 1.0.0"), "{:?}", refused.note);

    // So is a plugin built against another major version of the contract,
    // with both versions named.
    env.publish(&[("plugin.wasm", std::fs::read(common::wasm("contract-v1")).unwrap())]).await;
    common::eventually("the second refusal", WAIT, || async { (env.swaps("rejected") == 2).then_some(()) }).await;
    assert_eq!(env.manager.plugin(&id("plugin.wasm")).unwrap().manifest().version, "1.0.0");
    let notes: Vec<String> = events
        .list(&ListParams::default())
        .await
        .unwrap()
        .items
        .into_iter()
        .filter(|e| e.reason.as_deref() == Some("PluginRejected"))
        .filter_map(|e| e.note)
        .collect();
    assert!(
        notes.iter().any(|n| n.contains("operator:plugin@1.0.0") && n.contains("operator:plugin@0.1") && n.contains("still running versioned 1.0.0")),
        "{notes:#?}"
    );

    // The last swap's behaviour shows on every parent: one child each, at "2".
    env.publish(&[("plugin.wasm", v2.clone())]).await;
    env.running("plugin.wasm", "2.0.0").await;
    let settled = common::eventually("every widget's child at version 2", WAIT, || async {
        let c = children(&env.client).await;
        (c.len() == 200 && c.values().all(|v| v.iter().all(|x| x == "2"))).then_some(c)
    })
    .await;
    let duplicated: Vec<_> = settled.iter().filter(|(_, v)| v.len() != 1).collect();
    assert!(duplicated.is_empty(), "widgets with other than one child: {duplicated:?}");
    let statuses = widgets.list(&ListParams::default()).await.unwrap();
    assert_eq!(statuses.items.len(), 200);
    common::eventually("every status to say version 2", WAIT, || async {
        let all = widgets.list(&ListParams::default()).await.unwrap();
        all.items.iter().all(|w| w.data["status"]["version"] == "2").then_some(())
    })
    .await;
    env.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_version_with_other_kinds_restarts_the_watches_and_a_removed_key_stops_the_plugin() {
    let env = Env::start().await;
    env.publish(&[("plugin.wasm", bytes("versioned"))]).await;
    env.running("plugin.wasm", "1.0.0").await;

    // Same id, other parent kind: the Widget controller stops, a Hello one starts.
    // Gzipped, as a real ConfigMap needs it: the typed hello is close to 1 MiB.
    let hello = gzip(&std::fs::read(common::wasm("hello")).unwrap());
    env.publish(&[("plugin.wasm", hello.clone())]).await;
    common::eventually("hello to replace versioned", WAIT, || async {
        env.manager.plugin(&id("plugin.wasm")).filter(|p| p.name() == "hello").map(|_| ())
    })
    .await;
    // Counted just after the new plugin is installed (see the ten-swap test).
    common::eventually("the restart counted", WAIT, || async { (env.swaps("restarted") >= 1).then_some(()) }).await;
    assert_eq!(env.swaps("restarted"), 1);
    let hellos: Api<DynamicObject> = Api::namespaced_with(
        env.client.clone(),
        NS,
        &ApiResource {
            group: "example.operator.dev".into(),
            version: "v1alpha1".into(),
            api_version: "example.operator.dev/v1alpha1".into(),
            kind: "Hello".into(),
            plural: "hellos".into(),
        },
    );
    let obj = serde_json::from_value(
        json!({"apiVersion": "example.operator.dev/v1alpha1", "kind": "Hello", "metadata": {"name": "h"}, "spec": {"greeting": "hi"}}),
    )
    .unwrap();
    hellos.create(&PostParams::default(), &obj).await.unwrap();
    let cms: Api<ConfigMap> = Api::namespaced(env.client.clone(), NS);
    common::eventually("the Hello's ConfigMap", WAIT, || async { cms.get_opt("h-greeting").await.unwrap() }).await;

    // A second key is a second plugin; removing a key stops just that one.
    env.publish(&[("plugin.wasm", hello), ("widgets.wasm", bytes("versioned"))]).await;
    env.running("widgets.wasm", "1.0.0").await;
    env.publish(&[("widgets.wasm", bytes("versioned"))]).await;
    common::eventually("plugin.wasm to stop", WAIT, || async { env.manager.plugin(&id("plugin.wasm")).is_none().then_some(()) }).await;
    assert!(env.manager.plugin(&id("widgets.wasm")).is_some());
    assert_eq!(env.manager.controllers().len(), 1);
    env.stop().await;
}

/// Widgets `w0..w{n}` created, and reconciled by the plugin (status version `1`).
async fn widgets_reconciled_by_v1(client: &kube::Client, n: usize) -> Api<DynamicObject> {
    let widgets: Api<DynamicObject> = Api::namespaced_with(client.clone(), NS, &widgets_resource());
    for i in 0..n {
        let obj = serde_json::from_value(
            json!({"apiVersion": "swap.test.operator-host.dev/v1", "kind": "Widget", "metadata": {"name": format!("w{i}")}, "spec": {}}),
        )
        .unwrap();
        widgets.create(&PostParams::default(), &obj).await.unwrap();
    }
    common::eventually("every widget reconciled by v1", WAIT, || async {
        let all = widgets.list(&ListParams::default()).await.unwrap();
        (all.items.len() == n && all.items.iter().all(|w| w.data["status"]["version"] == "1")).then_some(())
    })
    .await;
    widgets
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_swapped_in_version_that_fails_every_reconcile_is_rolled_back_within_the_window_and_not_reloaded_until_its_bytes_change() {
    let window = Duration::from_secs(30);
    let env = Env::start_with(Policy::default(), rollback::Config { window, threshold: 0.5, min_calls: 10 }, vec![]).await;
    env.publish(&[("plugin.wasm", bytes("versioned"))]).await;
    env.running("plugin.wasm", "1.0.0").await;
    let widgets = widgets_reconciled_by_v1(&env.client, 5).await;

    // 3.0.0 has the same kinds (a swap in place) and panics on every reconcile.
    let swapped = tokio::time::Instant::now();
    env.publish(&[("plugin.wasm", bytes("versioned-broken"))]).await;
    common::eventually("the rollback", window, || async { (env.swaps("rolled_back") == 1).then_some(()) }).await;
    let took = swapped.elapsed();
    assert!(took < window, "rolled back after {took:?}, not within the {window:?} window");
    assert_eq!(env.swaps("swapped"), 1, "one swap in (3.0.0); the way back is counted as rolled_back");
    assert_eq!(env.version("plugin.wasm").as_deref(), Some("1.0.0"));
    let cause = format!("plugin_rollbacks_total{{plugin=\"{}\",cause=\"panic\"}}", id("plugin.wasm"));
    assert_eq!(env.counter(&cause), 1, "{}", env.manager.metrics().render());
    // The Event is written after the counters (an API call of its own): wait for it.
    let events = common::eventually("the PluginRolledBack Event", WAIT, || async {
        let events = env.events("PluginRolledBack").await;
        (!events.is_empty()).then_some(events)
    })
    .await;
    assert_eq!(events.len(), 1);
    assert_eq!(events[0].type_.as_deref(), Some("Warning"));
    let note = events[0].note.clone().unwrap_or_default();
    assert!(note.contains("plugin versioned 3.0.0") && note.contains("rolled back to versioned 1.0.0") && note.contains("(panic: "), "{note}");
    assert!(note.contains("the previous version's 0 of "), "the previous version's record is named: {note}");
    println!("rolled back {took:?} after the swap: {note}");
    // `host status` says so, with the digests both ways.
    let status = snapshot(&env.manager);
    let plugin = status.plugins.iter().find(|p| p.id == id("plugin.wasm")).expect("the plugin in host status");
    assert_eq!((plugin.state, plugin.version.as_str()), (operator_runtime::status::State::RolledBack, "1.0.0"), "{plugin:#?}");
    let rollback = plugin.last_rollback.as_ref().expect("the rollback in host status");
    assert_eq!((rollback.to.as_str(), rollback.cause.as_str()), (plugin.digest.as_str(), "panic"));
    assert_ne!(rollback.from, rollback.to);
    assert!(plugin.total.errors >= 10, "the broken version's failures are counted: {plugin:#?}");

    // The ConfigMap changes (a new key) but still holds 3.0.0: not loaded again.
    env.publish(&[("plugin.wasm", bytes("versioned-broken")), ("unrelated.sig", b"x".to_vec())]).await;
    tokio::time::sleep(Duration::from_secs(2)).await;
    assert_eq!((env.swaps("swapped"), env.swaps("rolled_back")), (1, 1));
    assert_eq!(env.version("plugin.wasm").as_deref(), Some("1.0.0"));
    // v1 kept serving: every widget still has its one child at version 1.
    let c = children(&env.client).await;
    assert!(c.len() == 5 && c.values().all(|v| v == &["1"]), "{c:?}");

    // Other bytes end the block: 2.0.0 is swapped in and serves.
    env.publish(&[("plugin.wasm", bytes("versioned-v2"))]).await;
    env.running("plugin.wasm", "2.0.0").await;
    common::eventually("every status to say version 2", WAIT, || async {
        let all = widgets.list(&ListParams::default()).await.unwrap();
        all.items.iter().all(|w| w.data["status"]["version"] == "2").then_some(())
    })
    .await;
    assert_eq!(env.swaps("rolled_back"), 1);
    let status = snapshot(&env.manager);
    let plugin = status.plugins.iter().find(|p| p.id == id("plugin.wasm")).unwrap();
    assert_eq!(plugin.state, operator_runtime::status::State::Serving, "a newer version serves: the rollback is history: {plugin:#?}");
    assert!(plugin.last_rollback.is_none(), "{plugin:#?}");
    env.stop().await;
}

/// What `host status` would print, as its typed document.
fn snapshot(manager: &operator_runtime::manager::Running) -> operator_runtime::status::Snapshot {
    let json = manager.metrics().status().expect("the status source is set");
    serde_json::from_value(json).expect("the status document parses")
}

fn gzip(bytes: &[u8]) -> Vec<u8> {
    use std::io::Write;
    let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::best());
    gz.write_all(bytes).unwrap();
    gz.finish().unwrap()
}
