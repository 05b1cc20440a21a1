//! Safe plugin upgrades, in-process: shadow runs of a candidate staged in
//! the plugins ConfigMap beside the running version (promoted after N
//! agreeing reconciles, never when it differs or traps). Recording real
//! reconciles and replaying them against a candidate through the command line
//! (`host simulate --record`, `host replay`) is host/tests/all/upgrades.rs.

use crate::common;
use crate::hotswap::{id, widgets_resource};

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use apiserver::ApiServer;
use k8s_openapi::ByteString;
use k8s_openapi::api::core::v1::ConfigMap;
use k8s_openapi::api::events::v1::Event;
use kube::Api;
use kube::api::{DynamicObject, ListParams, Patch, PatchParams, PostParams};
use serde_json::json;

use operator_runtime::clock::SystemClock;
use operator_runtime::controller;
use operator_runtime::events::Recorder;
use operator_runtime::hotswap::Reloader;
use operator_runtime::hotswap::configmap::{self, Selection};
use operator_runtime::hotswap::shadow::{PROMOTE_ANNOTATION, ShadowConfig, Shadows};
use operator_runtime::manager::{self, Options, Running};
use operator_runtime::metrics::Metrics;
use operator_runtime::record::Tap;
use operator_runtime::sandbox::Sandbox;

const WAIT: Duration = Duration::from_secs(90);
const NS: &str = "default";
const SOURCE: &str = "plugins";
const KEY: &str = "widgets.wasm";
const CANDIDATE: &str = "widgets.wasm.candidate";

fn v1() -> Vec<u8> {
    std::fs::read(common::wasm("versioned")).unwrap()
}

fn v2() -> Vec<u8> {
    std::fs::read(common::built_plugin("versioned-v2")).unwrap()
}

/// A build that panics in every reconcile.
fn trapping() -> Vec<u8> {
    std::fs::read(common::built_plugin("versioned-broken")).unwrap()
}

/// `bytes` with a custom section appended: another digest, the same code
/// (as a rebuild that changed nothing that matters).
pub(crate) fn rebuilt(mut bytes: Vec<u8>) -> Vec<u8> {
    let name = b"rebuilt";
    let payload = b"same behaviour, other bytes";
    let body_len = 1 + name.len() + payload.len();
    assert!(body_len < 128 && name.len() < 128, "one-byte LEB128 lengths");
    bytes.extend_from_slice(&[0, body_len as u8, name.len() as u8]);
    bytes.extend_from_slice(name);
    bytes.extend_from_slice(payload);
    bytes
}

/// A manager with no plugins, fed by a watch of ConfigMap default/plugins,
/// with shadow runs as `host run` wires them.
struct Env {
    client: kube::Client,
    manager: Running,
    shadows: Shadows,
    tasks: Vec<tokio::task::JoinHandle<()>>,
    _server: ApiServer,
}

impl Env {
    async fn start(promote_after: u64) -> Env {
        let server = ApiServer::new();
        let client = server.kube_client();
        let metrics = Arc::new(Metrics::new());
        let clock: operator_runtime::clock::SharedClock = Arc::new(SystemClock);
        let shadows = Shadows::new(ShadowConfig { promote_after, ..ShadowConfig::default() }, metrics.clone(), client.clone(), clock.clone());
        let options = Options {
            resync: Duration::from_secs(3600),
            controller: controller::Config { tap: Tap::default().observed_by(shadows.observer()), ..controller::Config::default() },
            ..Options::default()
        };
        let manager = manager::Builder::new(client.clone()).options(options).clock(clock.clone()).metrics(metrics.clone()).start().await.unwrap();
        let sandbox = Sandbox::new(common::config(Duration::from_secs(5))).unwrap();
        let (tx, rx) = tokio::sync::mpsc::channel(16);
        let selection = Selection::Named { namespace: NS.into(), name: SOURCE.into() };
        let reloader = Reloader {
            sandbox,
            manager: manager.clone(),
            metrics,
            recorder: Recorder::new(client.clone(), "hotswap", clock),
            on_applied: None,
            trust: Default::default(),
            rollback: operator_runtime::hotswap::rollback::Watchdog::new(Default::default()),
            shadows: Some(shadows.clone()),
        };
        let tasks = vec![tokio::spawn(configmap::watch(client.clone(), selection, tx)), tokio::spawn(reloader.run(rx))];
        Env { client, manager, shadows, tasks, _server: server }
    }

    fn configmaps(&self) -> Api<ConfigMap> {
        Api::namespaced(self.client.clone(), NS)
    }

    async fn publish(&self, data: &[(&str, Vec<u8>)]) {
        let binary: BTreeMap<String, ByteString> = data.iter().map(|(k, v)| (k.to_string(), ByteString(v.clone()))).collect();
        let body = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": SOURCE}, "binaryData": binary});
        self.configmaps().patch(SOURCE, &PatchParams::apply("upgrades-test").force(), &Patch::Apply(&body)).await.unwrap();
    }

    /// Waits for `key` to run bytes with `digest`.
    async fn running(&self, digest: &str) {
        common::eventually(&format!("{KEY} at {digest}"), WAIT, || async {
            self.manager.plugin(&id(KEY)).filter(|p| p.info().digest == digest).map(|_| ())
        })
        .await;
    }

    async fn staged(&self) {
        common::eventually("the candidate to be staged", WAIT, || async { self.shadows.tally(&id(KEY)).map(|_| ()) }).await;
    }

    fn shadow_count(&self, result: &str) -> u64 {
        let text = self.manager.metrics().render();
        let wanted = format!("plugin_shadow_reconciles_total{{plugin=\"{}\",result=\"{result}\"}} ", id(KEY));
        text.lines().find_map(|l| l.strip_prefix(&wanted)).map_or(0, |n| n.trim().parse().unwrap())
    }

    async fn create_widgets(&self, from: usize, count: usize) {
        let widgets: Api<DynamicObject> = Api::namespaced_with(self.client.clone(), NS, &widgets_resource());
        for i in from..from + count {
            let obj = serde_json::from_value(
                json!({"apiVersion": "swap.test.operator-host.dev/v1", "kind": "Widget", "metadata": {"name": format!("w{i:03}")}, "spec": {}}),
            )
            .unwrap();
            widgets.create(&PostParams::default(), &obj).await.unwrap();
        }
    }

    /// Events on the plugins ConfigMap with `reason`.
    async fn events(&self, reason: &str) -> Vec<Event> {
        let events: Api<Event> = Api::namespaced(self.client.clone(), NS);
        let all = events.list(&ListParams::default()).await.unwrap().items;
        all.into_iter()
            .filter(|e| e.reason.as_deref() == Some(reason) && e.regarding.as_ref().and_then(|r| r.name.as_deref()) == Some(SOURCE))
            .collect()
    }

    async fn stop(self) {
        for t in &self.tasks {
            t.abort();
        }
        self.manager.shutdown(Duration::from_secs(30)).await;
    }
}

fn digest(bytes: &[u8]) -> String {
    operator_runtime::sandbox::cache::digest(bytes)
}

/// ConfigMaps stamped by widgets, by widget name: their versions.
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

/// Waits until `n` widgets each have exactly one child, all at `version`.
async fn settled(client: &kube::Client, n: usize, version: &str) {
    let c = common::eventually(&format!("{n} widgets with their child at version {version}"), WAIT, || async {
        let c = children(client).await;
        (c.len() == n && c.values().all(|v| v.iter().all(|x| x == version))).then_some(c)
    })
    .await;
    let not_one: Vec<_> = c.iter().filter(|(_, v)| v.len() != 1).collect();
    assert!(not_one.is_empty(), "widgets with other than one child: {not_one:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_candidate_that_agrees_is_promoted_after_n_reconciles() {
    let env = Env::start(10).await;
    let (active, candidate) = (v1(), rebuilt(v1()));
    env.publish(&[(KEY, active.clone())]).await;
    env.running(&digest(&active)).await;
    env.publish(&[(KEY, active.clone()), (CANDIDATE, candidate.clone())]).await;
    env.staged().await;
    // The Event is written after the candidate is staged (an API call of its own): wait for it.
    let staged = common::eventually("the PluginStaged Event", WAIT, || async {
        let events = env.events("PluginStaged").await;
        (!events.is_empty()).then_some(events)
    })
    .await;
    assert_eq!(staged.len(), 1);

    // Each widget is reconciled at least twice (created, then its child seen).
    env.create_widgets(0, 20).await;
    env.running(&digest(&candidate)).await;
    assert!(env.shadow_count("agree") >= 10, "promoted after 10 agreeing reconciles, saw {}", env.shadow_count("agree"));
    assert_eq!((env.shadow_count("differ"), env.shadow_count("error")), (0, 0));
    // The promotion is on record in the ConfigMap (it survives a restart)
    // and evented; the candidate is no longer staged.
    let cm = env.configmaps().get(SOURCE).await.unwrap();
    let promoted = cm.metadata.annotations.unwrap_or_default()[PROMOTE_ANNOTATION].clone();
    assert_eq!(promoted, format!("{KEY}@sha256:{}", digest(&candidate)));
    let note =
        common::eventually("a PluginPromoted event", WAIT, || async { env.events("PluginPromoted").await.pop() }).await.note.unwrap_or_default();
    assert!(note.contains("agree, 0 differ, 0 errors"), "{note}");
    assert!(env.shadows.tally(&id(KEY)).is_none(), "unstaged once promoted");
    settled(&env.client, 20, "1").await;
    env.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_candidate_that_differs_is_reported_never_promoted_and_promoted_by_annotation() {
    let env = Env::start(5).await;
    let active = v1();
    env.publish(&[(KEY, active.clone())]).await;
    env.running(&digest(&active)).await;
    env.create_widgets(0, 10).await;
    settled(&env.client, 10, "1").await;
    env.publish(&[(KEY, active.clone()), (CANDIDATE, v2())]).await;
    env.staged().await;

    // More reconciles than the promotion threshold, every one differing.
    env.create_widgets(10, 10).await;
    let differs = common::eventually("a ShadowDiffers event", WAIT, || async { env.events("ShadowDiffers").await.pop() }).await;
    assert_eq!(differs.type_.as_deref(), Some("Warning"));
    let note = differs.note.unwrap_or_default();
    assert!(note.contains("candidate versioned 2.0.0") && note.contains("Widget default/w"), "{note}");
    assert!(
        note.contains(r#"create ConfigMap w0"#) && note.contains(r#".data.version: "1" → "2""#) || note.contains(r#"set status .version: "1" → "2""#),
        "the differing action and field: {note}"
    );
    settled(&env.client, 20, "1").await;
    common::eventually("the shadow to count 5 differences", WAIT, || async { (env.shadow_count("differ") >= 5).then_some(()) }).await;
    assert_eq!(env.shadow_count("agree"), 0);
    assert!(env.events("ShadowDiffers").await.len() <= 3, "Events are rate-limited");
    assert_eq!(env.manager.plugin(&id(KEY)).unwrap().manifest().version, "1.0.0", "never promoted automatically");
    assert!(!env.configmaps().get(SOURCE).await.unwrap().metadata.annotations.unwrap_or_default().contains_key(PROMOTE_ANNOTATION));

    // An operator promotes it anyway, at once, by annotation.
    let patch = json!({"metadata": {"annotations": {PROMOTE_ANNOTATION: KEY}}});
    env.configmaps().patch(SOURCE, &PatchParams::default(), &Patch::Merge(&patch)).await.unwrap();
    env.running(&digest(&v2())).await;
    settled(&env.client, 20, "2").await;
    env.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_trapping_candidate_is_never_promoted_and_the_active_version_serves_throughout() {
    let env = Env::start(5).await;
    let active = v1();
    env.publish(&[(KEY, active.clone())]).await;
    env.running(&digest(&active)).await;
    env.publish(&[(KEY, active.clone()), (CANDIDATE, trapping())]).await;
    env.staged().await;

    // 100 parents in batches while the candidate traps on every call.
    for batch in 0..5 {
        env.create_widgets(batch * 20, 20).await;
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    settled(&env.client, 100, "1").await;
    let failed = common::eventually("a ShadowFailed event", WAIT, || async { env.events("ShadowFailed").await.pop() }).await;
    let note = failed.note.unwrap_or_default();
    assert!(note.contains("versioned 3.0.0") && note.contains("broken on purpose"), "{note}");
    assert!(env.shadow_count("error") >= 5, "errors: {}", env.shadow_count("error"));
    assert_eq!(env.shadow_count("agree"), 0);
    assert_eq!(env.manager.plugin(&id(KEY)).unwrap().info().digest, digest(&active), "never promoted");
    let widgets: Api<DynamicObject> = Api::namespaced_with(env.client.clone(), NS, &widgets_resource());
    common::eventually("every status written by version 1", WAIT, || async {
        let all = widgets.list(&ListParams::default()).await.unwrap();
        all.items.iter().all(|w| w.data["status"]["version"] == "1" && w.data["status"]["children"] == 1).then_some(())
    })
    .await;
    env.stop().await;
}
