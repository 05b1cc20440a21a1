//! Fault soak: both shipped plugins run CronJobs and roll MyDeployments under
//! virtual time while the embedded API server injects 500s, 503s, 409s,
//! latency, dropped and closed watches and 410 on resume, all at once.
//!
//! Everything runs in this process on a current-thread tokio runtime with a
//! paused clock, as `host simulate` does: the host talks to the server through
//! the faulty in-process client (the faults are in the server's HTTP layer), an
//! hour of `* * * * *` CronJobs passes in about a minute of wall time, and the
//! run is the same for the same seed up to the order of plugin calls on the
//! blocking pool. The figures are counted from the server's side: the store's
//! persistence hook sees every commit in order, under the store's lock, which no
//! fault can touch (`common::soak::Ledger`).
//!
//! The default test is the quick variant; the long one (the figures:
//! at least 1,000 runs and 100 rollouts) is ignored by default:
//! `cargo test --release -p operator-runtime --test all fault_soak:: -- --ignored`. `SOAK_SEED=N`
//! changes the seed of the faults.

use crate::common;

use std::sync::{Arc, Mutex};
use std::time::Duration;

use apiserver::resources::GroupResource;
use apiserver::store::{Backend, BackendError, Event, EventType, ObjectKey};
use apiserver::{ApiServer, Config, FaultSpec};
use chrono::{DateTime, Utc};
use common::soak::{Change, Ledger, complete, cronjob, image_patch, mydeployment, rolled_out};
use kube::api::{Api, ApiResource, DynamicObject, GroupVersionKind, Patch, PatchParams, PostParams};
use operator_runtime::clock::TokioClock;
use operator_runtime::manager;
use operator_runtime::sandbox::Sandbox;
use serde_json::Value;

/// Every fault the server knows, at once. Shares are per matching request.
const FAULTS: &[&str] = &[
    "500:share=0.05",
    "503:share=0.02",
    "409:share=0.1",
    "latency:200ms,share=0.1",
    "latency:50ms,resource=pods",
    "drop-watch:every=30s",
    "expire-watch:share=0.5",
    "close-watch:share=0.05",
];

const START: &str = "2026-01-01T00:00:00Z";

struct Workload {
    name: &'static str,
    cronjobs: usize,
    /// Virtual minutes the faults last; the CronJobs run in this window.
    minutes: i64,
    mydeployments: usize,
    rollouts_each: usize,
}

/// The store's persistence hook as the ledger's feed: every committed event, in order.
struct Observer(Arc<Mutex<Ledger>>);

impl Backend for Observer {
    fn record(&self, event: &Event) -> Result<(), BackendError> {
        let change = match event.kind {
            EventType::Added => Change::Added,
            EventType::Modified => Change::Modified,
            EventType::Deleted => Change::Deleted,
        };
        self.0.lock().unwrap().observe(change, &event.object);
        Ok(())
    }
}

fn api(client: &kube::Client, group: &str, kind: &str, plural: &str) -> Api<DynamicObject> {
    let ar = ApiResource::from_gvk_with_plural(&GroupVersionKind::gvk(group, "v1", kind), plural);
    Api::namespaced_with(client.clone(), "default", &ar)
}

/// Creates through the faulty API, retrying until it is there.
async fn create(api: &Api<DynamicObject>, obj: &Value) -> Value {
    let obj: DynamicObject = serde_json::from_value(obj.clone()).unwrap();
    let name = obj.metadata.name.clone().unwrap();
    loop {
        match api.create(&PostParams::default(), &obj).await {
            Ok(o) => return serde_json::to_value(o).unwrap(),
            Err(kube::Error::Api(s)) if s.code == 409 && s.reason == "AlreadyExists" => {
                return serde_json::to_value(api.get(&name).await.unwrap_or_else(|_| obj.clone())).unwrap();
            }
            Err(_) => tokio::time::sleep(Duration::from_millis(100)).await,
        }
    }
}

/// The object as the store holds it (no fault in the way).
fn stored(server: &ApiServer, group: &str, resource: &str, name: &str) -> Value {
    let key = ObjectKey { gr: GroupResource { group: group.into(), resource: resource.into() }, namespace: "default".into(), name: name.into() };
    server.core().store.get(&key).unwrap_or_else(|| panic!("{resource}/{name} is gone"))
}

/// Rolls MyDeployment `name` `rollouts` times (a new image each time, patched
/// through the faulty API), each rollout waited for to completion; returns
/// how many completed.
async fn roll(server: ApiServer, api: Api<DynamicObject>, name: String, rollouts: usize, gap: Duration) -> usize {
    let mut done = 0;
    for r in 1..=rollouts {
        let patch = image_patch(r);
        while api.patch(&name, &PatchParams::default(), &Patch::Merge(&patch)).await.is_err() {
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        let deadline = tokio::time::Instant::now() + Duration::from_secs(600);
        loop {
            let md = stored(&server, "apps.example.com", "mydeployments", &name);
            if rolled_out(&md, r) {
                break;
            }
            assert!(tokio::time::Instant::now() < deadline, "rollout {r} of {name} did not complete in 10 virtual minutes: {}", md["status"]);
            tokio::time::sleep(Duration::from_secs(1)).await;
        }
        done += 1;
        tokio::time::sleep(gap).await;
    }
    done
}

fn soak(w: Workload) {
    let seed = common::soak::seed(1);
    let wall = std::time::Instant::now();
    let runtime = tokio::runtime::Builder::new_current_thread().enable_all().start_paused(true).build().unwrap();
    runtime.block_on(async move {
        let start = DateTime::parse_from_rfc3339(START).unwrap().with_timezone(&Utc);
        let clock = TokioClock::starting_at(start);
        let ledger = Arc::new(Mutex::new(Ledger::default()));
        let server = ApiServer::with_backend(Config { clock: Arc::new(clock), ..Config::default() }, Box::new(Observer(ledger.clone())));
        let cluster = simulated_cluster::start(&server, simulated_cluster::ClusterConfig::default());
        let sandbox = Sandbox::new(common::config(Duration::from_secs(5))).unwrap();
        let registry = operator_runtime::registry::Registry::default();
        let mut keyed = Vec::new();
        for name in ["cronjob", "mydeployment"] {
            let p = common::load(&sandbox, name);
            registry.insert(name, p.clone());
            embedded_cluster::register_admission(&server, &registry, &p);
            keyed.push((name.to_string(), p));
        }
        let running = manager::Builder::new(server.kube_client())
            .plugins_by_source(keyed)
            .clock(Arc::new(clock))
            .registry(registry)
            .start()
            .await
            .unwrap_or_else(|e| panic!("manager: {}", operator_runtime::error_chain(&e)));
        running.wait_synced().await;

        server.faults().set_seed(seed);
        for spec in FAULTS {
            server.faults().inject_spec(&spec.parse::<FaultSpec>().unwrap());
        }
        let fault_start = tokio::time::Instant::now();
        let user = server.kube_client();
        let cronjobs = api(&user, "batch.tutorial.kubebuilder.io", "CronJob", "cronjobs");
        let mds = api(&user, "apps.example.com", "MyDeployment", "mydeployments");
        let mut created = Vec::new();
        for i in 0..w.cronjobs {
            let name = format!("cj-{i}");
            let answer = create(&cronjobs, &cronjob(&name, if i % 2 == 1 { "75s" } else { "2s" }, None)).await;
            let at = DateTime::parse_from_rfc3339(answer.pointer("/metadata/creationTimestamp").and_then(Value::as_str).unwrap()).unwrap();
            created.push((name, at.with_timezone(&Utc)));
        }
        // Rollouts spread over the window: each MyDeployment pauses between its rollouts.
        let gap = Duration::from_secs((w.minutes as u64 * 60 / w.rollouts_each.max(1) as u64).saturating_sub(60).max(5));
        let mut rollers = Vec::new();
        for i in 0..w.mydeployments {
            let (md, bound) = mydeployment(i);
            let name = md["metadata"]["name"].as_str().unwrap().to_string();
            ledger.lock().unwrap().bound("default", &name, bound);
            create(&mds, &md).await;
            rollers.push(tokio::spawn(roll(server.clone(), mds.clone(), name, w.rollouts_each, gap)));
        }
        let window_end = start + chrono::Duration::from_std(fault_start.elapsed()).unwrap() + chrono::TimeDelta::minutes(w.minutes);
        tokio::time::sleep_until(fault_start + Duration::from_secs(w.minutes as u64 * 60)).await;
        let mut rollouts = 0;
        for r in rollers {
            rollouts += r.await.expect("a roller panicked");
        }
        let faults = server.faults().to_json();
        let injected = server.faults().injected_total();
        server.faults().clear_all();
        // Faults off: two more minutes to settle (a run of the window's last
        // minute still being retried, the last Pods terminating).
        tokio::time::sleep(Duration::from_secs(120)).await;

        // The ledger is read, then released before the host shuts down.
        {
        let l = ledger.lock().unwrap();
        let (mut runs, mut lost) = (0, Vec::new());
        for (name, at) in &created {
            let (n, missing) = l.every_minute("default", name, *at, window_end);
            runs += n;
            lost.extend(missing.into_iter().map(|t| format!("{name} at {t}")));
        }
        let (duplicates, extra) = l.duplicates();
        let mut unsettled = Vec::new();
        for i in 0..w.mydeployments {
            let (md, bound) = mydeployment(i);
            let name = md["metadata"]["name"].as_str().unwrap();
            let stored = stored(&server, "apps.example.com", "mydeployments", name);
            let (active, all) = l.pods_of("default", name);
            if !complete(&stored) || active != bound.replicas || all != bound.replicas {
                unsettled.push(format!("{name}: {active} active / {all} Pods, status {}", stored["status"]));
            }
        }
        let by_kind: Vec<String> = faults["rules"]
            .as_array()
            .unwrap()
            .iter()
            .map(|r| format!("{}={}", r["spec"].as_str().unwrap().replace(' ', ""), r["injected"]))
            .collect();
        println!(
            "FIGURES fault-soak {}: seed={seed} virtual_minutes={} cronjobs={} runs={runs} jobs_created={} lost={} duplicates={extra} misnamed={} \
             mydeployments={} rollouts={rollouts} pod_changes={} max_pods_over_surge={} faults_injected={injected} wall={:.0}s",
            w.name,
            w.minutes,
            w.cronjobs,
            l.jobs_created(),
            lost.len(),
            l.misnamed_jobs.len(),
            w.mydeployments,
            l.pod_changes,
            l.worst_over_surge.max(0),
            wall.elapsed().as_secs_f64(),
        );
        println!("FAULTS fault-soak {}: {}", w.name, by_kind.join(" "));
        assert!(lost.is_empty(), "lost runs: {lost:?}");
        assert!(duplicates.is_empty(), "duplicate Jobs: {duplicates:?}");
        assert!(l.misnamed_jobs.is_empty(), "Jobs not named for their scheduled time: {:?}", l.misnamed_jobs);
        assert!(l.worst_over_surge <= 0, "maxSurge exceeded: {}", l.worst);
        assert!(unsettled.is_empty(), "not converged once the faults stopped: {unsettled:?}");
        assert_eq!(rollouts, w.mydeployments * w.rollouts_each);
        assert!(runs >= w.cronjobs * (w.minutes as usize - 1), "the window held {runs} runs");
        // Every kind of fault fired: the soak is not quietly running fault-free.
        for rule in faults["rules"].as_array().unwrap() {
            assert!(rule["injected"].as_u64().unwrap() > 0, "fault {} never fired: {faults}", rule["spec"]);
        }
        }
        running.shutdown(Duration::from_secs(30)).await;
        cluster.stop().await;
    });
}

#[test]
fn under_every_fault_at_once_no_run_is_lost_or_doubled_and_max_surge_holds() {
    soak(Workload { name: "quick", cronjobs: 10, minutes: 20, mydeployments: 4, rollouts_each: 5 });
}

#[test]
#[ignore = "long soak (the issue's figures, a few minutes): cargo test --release -p operator-runtime --test all fault_soak:: -- --ignored"]
fn over_a_thousand_runs_and_a_hundred_rollouts_under_faults_nothing_is_lost_or_doubled() {
    soak(Workload { name: "long", cronjobs: 20, minutes: 60, mydeployments: 10, rollouts_each: 10 });
}
