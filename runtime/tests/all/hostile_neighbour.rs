//! A hostile plugin in the same host as a good one. The hostile plugin
//! loops forever, grows its memory without bound, panics, floods stdout and
//! its log, answers garbage, answers 200,000 actions, fails on purpose, and
//! probes for files, environment, sockets, clocks and randomness, one parent
//! per behaviour, all at once. Every one is contained: the host keeps
//! running, each failing parent is flagged (Reconciled=False with the cause,
//! a Warning Event) and backed off, each probe finds nothing, and the good
//! plugin (MyDeployment) keeps reconciling.
//!
//! The good plugin's latency (MyDeployment created → its Pod exists) is
//! measured before and while the hostile parents run, and printed as a
//! `FIGURES hostile-neighbour` line for docs/reliability.md. The test asserts
//! behaviour, not speed: the only time bound is a generous one that only a
//! starved controller (a hostile plugin holding every call slot, or a host
//! stalled by a flood) would miss.

use crate::common;

use std::time::{Duration, Instant};

use apiserver::ApiServer;
use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::api::events::v1::Event;
use kube::api::{Api, ApiResource, DynamicObject, ListParams, PostParams};
use operator_runtime::manager::{self, Running};
use operator_runtime::sandbox::Sandbox;
use serde_json::{Value, json};

const WAIT: Duration = Duration::from_secs(120);
/// The call deadline in this test: a looping call costs this much CPU per try.
/// Long enough that building 200,000 actions on a loaded machine ends in the
/// host refusing them, not in the deadline.
const DEADLINE: Duration = Duration::from_secs(2);

/// Hostile behaviours that must fail the reconcile, with the reason the
/// host's condition and Warning Event must carry.
const FAILING: &[(&str, &str)] = &[
    ("loop", "PluginDeadlineExceeded"),
    ("memory", "PluginMemoryLimit"),
    ("panic", "PluginPanicked"),
    ("garbage", "PluginInvalidOutput"),
    ("not-object", "PluginInvalidOutput"),
    ("many-actions", "ActionRefused"),
    ("error", "Refused"),
];

/// Behaviours that succeed because the sandbox gives them nothing to abuse;
/// the plugin reports what it found in a `Probe` Event.
const PROBES: &[(&str, &str)] = &[
    ("output", "wrote 100 MiB"),
    ("log-flood", "logged 100 MiB"),
    ("file", "denied"),
    ("env", "denied: no environment"),
    ("socket", "denied"),
    ("clock", "clock="),
    ("random", "hash="),
];

fn md_resource() -> ApiResource {
    ApiResource {
        group: "apps.example.com".into(),
        version: "v1".into(),
        api_version: "apps.example.com/v1".into(),
        kind: "MyDeployment".into(),
        plural: "mydeployments".into(),
    }
}

struct Env {
    _server: ApiServer,
    client: kube::Client,
    running: Running,
}

impl Env {
    async fn start() -> Env {
        let server = ApiServer::new();
        let sandbox = Sandbox::new(common::config(DEADLINE)).unwrap();
        let hostile = common::load(&sandbox, "hostile");
        let good = sandbox.load_file(&common::built_plugin("mydeployment")).unwrap();
        let client = server.kube_client();
        common::install_hostile_crd(client.clone()).await;
        let running = manager::Builder::new(client.clone())
            .plugins(vec![hostile, good])
            .start()
            .await
            .unwrap_or_else(|e| panic!("manager: {}", operator_runtime::error_chain(&e)));
        tokio::time::timeout(WAIT, running.wait_synced()).await.expect("caches sync");
        Env { _server: server, client, running }
    }

    fn metric(&self, series: &str) -> f64 {
        let text = self.running.metrics().render();
        text.lines().find_map(|l| l.strip_prefix(series)?.trim().parse().ok()).unwrap_or(0.0)
    }

    async fn hostile(&self, mode: &str) -> String {
        let h = json!({"apiVersion": "test.operator.dev/v1", "kind": "Hostile", "metadata": {"name": mode}, "spec": {"mode": mode}});
        let api: Api<DynamicObject> = Api::namespaced_with(self.client.clone(), "default", &common::hostile_resource());
        api.create(&PostParams::default(), &serde_json::from_value(h).unwrap()).await.unwrap().metadata.uid.unwrap()
    }

    /// Creates a one-replica MyDeployment and returns how long until its Pod exists.
    async fn good_latency(&self, name: &str) -> Duration {
        let md = json!({"apiVersion": "apps.example.com/v1", "kind": "MyDeployment", "metadata": {"name": name},
            "spec": {"replicas": 1, "selector": {"matchLabels": {"app": name}},
                "template": {"metadata": {"labels": {"app": name}}, "spec": {"containers": [{"name": "c", "image": "nginx:1.27"}]}}}});
        let api: Api<DynamicObject> = Api::namespaced_with(self.client.clone(), "default", &md_resource());
        let pods: Api<Pod> = Api::namespaced(self.client.clone(), "default");
        let started = Instant::now();
        api.create(&PostParams::default(), &serde_json::from_value(md).unwrap()).await.unwrap();
        let selector = ListParams::default().labels(&format!("app={name}"));
        loop {
            if !pods.list(&selector).await.unwrap().items.is_empty() {
                return started.elapsed();
            }
            assert!(started.elapsed() < WAIT, "MyDeployment {name} got no Pod in {WAIT:?}: the good plugin was starved");
            tokio::time::sleep(Duration::from_millis(2)).await;
        }
    }
}

fn median_ms(mut v: Vec<Duration>) -> f64 {
    v.sort();
    v[v.len() / 2].as_secs_f64() * 1000.0
}

fn condition(obj: &DynamicObject, type_: &str) -> Option<Value> {
    obj.data.pointer("/status/conditions")?.as_array()?.iter().find(|c| c["type"] == type_).cloned()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_hostile_behaviour_is_contained_and_the_good_plugin_keeps_reconciling() {
    let env = Env::start().await;
    const ROUNDS: usize = 15;

    // The good plugin alone.
    let mut quiet = Vec::new();
    for i in 0..ROUNDS {
        quiet.push(env.good_latency(&format!("quiet-{i}")).await);
    }

    // Every hostile behaviour at once, then the good plugin again while they run.
    let mut uids = Vec::new();
    for (mode, _) in FAILING.iter().chain(PROBES) {
        uids.push((mode, env.hostile(mode).await));
    }
    let noisy_from = Instant::now();
    let mut noisy = Vec::new();
    for i in 0..ROUNDS {
        noisy.push(env.good_latency(&format!("noisy-{i}")).await);
    }
    let noisy_window = noisy_from.elapsed();

    let hostiles: Api<DynamicObject> = Api::namespaced_with(env.client.clone(), "default", &common::hostile_resource());
    let events: Api<Event> = Api::namespaced(env.client.clone(), "default");
    let event_of = |uid: String, type_: &'static str| {
        let client = env.client.clone();
        async move { common::event_about(&client, &uid, |e| e.type_.as_deref() == Some(type_)).await }
    };
    let mut contained = 0;
    for ((mode, reason), (_, uid)) in FAILING.iter().zip(&uids) {
        let cond = common::eventually(&format!("{mode}: Reconciled=False"), WAIT, || async {
            let c = condition(&hostiles.get(mode).await.ok()?, "Reconciled")?;
            (c["status"] == "False").then_some(c)
        })
        .await;
        assert_eq!(cond["reason"], *reason, "{mode}: {cond}");
        let warning = common::eventually(&format!("{mode}: a Warning Event"), WAIT, || event_of(uid.clone(), "Warning")).await;
        assert_eq!(warning.reason.as_deref(), Some(*reason), "{mode}: {warning:?}");
        contained += 1;
    }
    for ((mode, expected), (_, uid)) in PROBES.iter().zip(&uids[FAILING.len()..]) {
        let probe = common::eventually(&format!("{mode}: its Probe Event"), WAIT, || event_of(uid.clone(), "Normal")).await;
        let note = probe.note.unwrap_or_default();
        assert!(note.starts_with(expected) && !note.contains("ESCAPED"), "{mode}: {note}");
        contained += 1;
    }
    let flood_events = events.list(&ListParams::default()).await.unwrap().items.iter().filter(|e| e.reason.as_deref() == Some("Probe")).count();
    assert!(flood_events <= PROBES.len() * 4, "the 200,000-action flood wrote no Events ({flood_events} Probe Events)");

    // Backed off, not retried hot: exponential backoff from 5 ms allows about
    // log2(window / 5 ms) + 1 tries per failing parent; a hot loop would be
    // thousands. The bound is loose (×2 + 4) for slow machines.
    let window = noisy_window.as_secs_f64() + 1.0;
    let tries_per_parent = (window / 0.005).log2().ceil() + 1.0;
    let errors = env.metric("controller_runtime_reconcile_errors_total{controller=\"hostile\"}");
    let bound = FAILING.len() as f64 * (tries_per_parent * 2.0 + 4.0);
    assert!(errors <= bound, "{errors} failed hostile reconciles in {window:.1} s (bound {bound:.0})");

    // The good plugin converged on every parent.
    let mds: Api<DynamicObject> = Api::namespaced_with(env.client.clone(), "default", &md_resource());
    for md in mds.list(&ListParams::default()).await.unwrap().items {
        let name = md.metadata.name.clone().unwrap();
        common::eventually(&format!("{name}: Reconciled=True"), WAIT, || async {
            let c = condition(&mds.get(&name).await.ok()?, "Reconciled")?;
            (c["status"] == "True").then_some(())
        })
        .await;
    }
    let (q, n) = (median_ms(quiet), median_ms(noisy.clone()));
    let worst = noisy.iter().max().unwrap().as_secs_f64() * 1000.0;
    println!(
        "FIGURES hostile-neighbour: contained={contained}/{} good_p50_quiet_ms={q:.1} good_p50_hostile_ms={n:.1} good_max_hostile_ms={worst:.1} \
         deadline_ms={} hostile_failed_reconciles={errors} window_s={window:.1}",
        FAILING.len() + PROBES.len(),
        DEADLINE.as_millis()
    );
    env.running.shutdown(Duration::from_secs(30)).await;
}

/// A plugin whose `validate` spins until the call deadline does not stall
/// the embedded API server: on a runtime with a single thread, other
/// requests keep being answered while the admission call runs, because the
/// hook runs the plugin on the blocking pool and the request awaits it.
/// (Run on the runtime thread, as with `block_in_place`'s fallback on a
/// current-thread runtime, every request would wait out the deadline.)
#[tokio::test(flavor = "current_thread")]
async fn a_looping_validate_does_not_stall_other_requests() {
    // Long against what a list costs even on a loaded machine (a stalled
    // server makes one list wait all of it; a list waiting half of it is
    // a stall, not load).
    const DEADLINE: Duration = Duration::from_secs(6);
    let server = ApiServer::new();
    let sandbox = Sandbox::new(common::config(DEADLINE)).unwrap();
    let hostile = common::load(&sandbox, "hostile");
    let registry = operator_runtime::registry::Registry::default();
    registry.insert("hostile", hostile.clone());
    embedded_cluster::register_admission(&server, &registry, &hostile);
    let client = server.kube_client();
    common::install_hostile_crd(client.clone()).await;

    let hostiles: Api<DynamicObject> = Api::namespaced_with(client.clone(), "default", &common::hostile_resource());
    let looping = json!({"apiVersion": "test.operator.dev/v1", "kind": "Hostile", "metadata": {"name": "slow"}, "spec": {"mode": "validate-loop"}});
    let started = Instant::now();
    let create = tokio::spawn(async move { hostiles.create(&PostParams::default(), &serde_json::from_value(looping).unwrap()).await });

    let pods: Api<Pod> = Api::namespaced(client.clone(), "default");
    let (mut answered, mut slowest) = (0, Duration::ZERO);
    while !create.is_finished() {
        let asked = Instant::now();
        pods.list(&ListParams::default()).await.expect("list while the admission call runs");
        slowest = slowest.max(asked.elapsed());
        answered += 1;
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let took = started.elapsed();
    let refused = create.await.unwrap().expect_err("the deadline refuses the create");
    let message = refused.to_string();
    assert!(message.contains("validation failed") && message.contains("deadline"), "{message}");
    assert!(took >= DEADLINE, "the admission call ran until the deadline ({took:?})");
    // The call held the request for the whole deadline; the lists were answered meanwhile.
    assert!(answered >= 10, "only {answered} lists answered in {took:?}");
    assert!(slowest < DEADLINE / 2, "a list waited {slowest:?} while the admission call ran");
    println!("FIGURES looping-validate: create refused after {took:?}; {answered} lists answered meanwhile, slowest {slowest:?}");
}
