//! Crash soak: `host run` is SIGKILLed at random (seeded) points and
//! restarted while CronJobs run and MyDeployments roll, and the cluster
//! (`host cluster --data-dir`, its own process) is SIGKILLed and restarted from
//! its data directory on the same port; then everything must converge with no
//! run lost, no Job doubled and maxSurge never exceeded.
//!
//! Wall time, not virtual: the host and the cluster are separate processes
//! with separate clocks, and a kill is only meaningful against a process doing
//! real work at real speed. Cron's granularity is a minute, so the runs come
//! from many CronJobs (`* * * * *`) over a few minutes, while the MyDeployments
//! roll back to back.
//!
//! What is counted and how:
//! - Jobs: the CronJobs keep up to 1000 Jobs of history, so nothing deletes a
//!   Job during the run and the final list is every Job ever created; each is
//!   filed under its scheduled-time annotation (`common::soak::Ledger`).
//! - Pods: this test watches Pods through the whole run (its own connection,
//!   resumed by resourceVersion across host kills and cluster restarts) and
//!   checks the maxSurge bound after every change. A resume the server refuses
//!   with 410 (events lost with a cluster restart) means a relist, counted as
//!   `pod_relists`: a change between the last event seen and the relist could
//!   escape the check; every other change is checked.
//!
//! The default test is quick (about two minutes); the long one is ignored by
//! default: `cargo test --release -p host --test all crash_soak:: -- --ignored`.
//! `SOAK_SEED=N` changes the kill points.

use crate::common;

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use chrono::{DateTime, Utc};
use common::soak::{Change, Ledger, Rng, cronjob, image_patch, mydeployment, rolled_out};
use futures::StreamExt;
use kube::api::{Api, ApiResource, DynamicObject, GroupVersionKind, ListParams, Patch, PatchParams, PostParams};
use kube::runtime::{WatchStreamExt, watcher};

struct Workload {
    name: &'static str,
    /// How long the host is killed and restarted.
    span: Duration,
    cronjobs: usize,
    mydeployments: usize,
    /// Host kills happen this far apart (uniform, milliseconds).
    kill_every: (u64, u64),
    /// Cluster restarts, spread evenly over the span.
    cluster_restarts: usize,
}

fn host_bin() -> Command {
    let mut c = Command::new(env!("CARGO_BIN_EXE_host"));
    c.env("HOST_LOG", "warn").env_remove("OPERATOR_HOST_FAULTS").env_remove("KUBECONFIG");
    c
}

/// `host cluster` on `port` (0 = a free one) over `data`; returns it and its port.
fn start_cluster(dir: &Path, port: u16) -> (Child, u16) {
    let log = std::fs::OpenOptions::new().create(true).append(true).open(dir.join("cluster.log")).unwrap();
    let mut child = host_bin()
        .args(["cluster", "--port", &port.to_string(), "--kubeconfig-out"])
        .arg(dir.join("kubeconfig"))
        .arg("--data-dir")
        .arg(dir.join("data"))
        .args(["--sim-job-duration", "5s"])
        .stdout(Stdio::piped())
        .stderr(log)
        .spawn()
        .expect("spawn host cluster");
    let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
    let mut bound = None;
    for line in lines.by_ref() {
        let line = line.unwrap();
        if let Some(url) = line.strip_prefix("embedded API server at http://127.0.0.1:") {
            bound = url.trim().parse().ok();
        }
        if line.starts_with("export KUBECONFIG=") {
            break;
        }
    }
    // Keep draining stdout so the cluster never blocks on a full pipe.
    std::thread::spawn(move || for _ in lines {});
    (child, bound.expect("host cluster prints its address"))
}

fn start_host(dir: &Path) -> Child {
    let log = std::fs::OpenOptions::new().create(true).append(true).open(dir.join("host.log")).unwrap();
    host_bin()
        .env("KUBECONFIG", dir.join("kubeconfig"))
        .args(["run", "--metrics-addr", "0", "--plugin-cache-dir"])
        .arg(dir.join("cache"))
        .arg("--plugin")
        .arg(common::wasm("cronjob"))
        .arg("--plugin")
        .arg(common::wasm("mydeployment"))
        .stdout(Stdio::null())
        .stderr(log)
        .spawn()
        .expect("spawn host run")
}

fn kill_9(child: &mut Child) {
    child.kill().expect("SIGKILL");
    child.wait().unwrap();
}

async fn client(kubeconfig: &Path) -> kube::Client {
    let kc = kube::config::Kubeconfig::read_from(kubeconfig).unwrap();
    let config = kube::Config::from_custom_kubeconfig(kc, &Default::default()).await.unwrap();
    kube::Client::try_from(config).unwrap()
}

fn api(client: &kube::Client, group: &str, version: &str, kind: &str, plural: &str) -> Api<DynamicObject> {
    let ar = ApiResource::from_gvk_with_plural(&GroupVersionKind::gvk(group, version, kind), plural);
    Api::namespaced_with(client.clone(), "default", &ar)
}

/// Retries `f` until it succeeds (the cluster may be restarting).
async fn retry<T, F, Fut>(mut f: F) -> T
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Result<T, kube::Error>>,
{
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        match f().await {
            Ok(v) => return v,
            Err(e) => {
                assert!(Instant::now() < deadline, "no answer from the cluster for 60 s: {e}");
                tokio::time::sleep(Duration::from_millis(200)).await;
            }
        }
    }
}

/// Feeds every Pod change to the ledger until `stop`; returns how many relists it took.
async fn watch_pods(client: kube::Client, ledger: Arc<Mutex<Ledger>>, stop: Arc<AtomicBool>) -> usize {
    let pods: Api<DynamicObject> = Api::all_with(client, &ApiResource::from_gvk_with_plural(&GroupVersionKind::gvk("", "v1", "Pod"), "pods"));
    let mut events = std::pin::pin!(watcher(pods, watcher::Config::default()).default_backoff());
    let mut inits: usize = 0;
    let mut listed = Vec::new();
    while !stop.load(Ordering::SeqCst) {
        let Ok(Some(event)) = tokio::time::timeout(Duration::from_millis(500), events.next()).await else { continue };
        let Ok(event) = event else { continue };
        let mut l = ledger.lock().unwrap();
        match event {
            watcher::Event::Init => {
                inits += 1;
                listed.clear();
            }
            watcher::Event::InitApply(pod) => listed.push(serde_json::to_value(pod).unwrap()),
            watcher::Event::InitDone => l.replace_pods(&listed),
            watcher::Event::Apply(pod) => l.observe_pod(Change::Modified, &serde_json::to_value(pod).unwrap()),
            watcher::Event::Delete(pod) => l.observe_pod(Change::Deleted, &serde_json::to_value(pod).unwrap()),
        }
    }
    inits.saturating_sub(1)
}

/// Rolls a MyDeployment to `app:v1`, `app:v2`, ... until `stop`, each rollout
/// waited for (at most 3 minutes); returns the rollouts completed and the last image number.
async fn roll(client: kube::Client, name: String, stop: Arc<AtomicBool>) -> (usize, usize) {
    let mds = api(&client, "apps.example.com", "v1", "MyDeployment", "mydeployments");
    for n in 1.. {
        if stop.load(Ordering::SeqCst) {
            // Rollouts 1..n-1 each completed before the next began.
            return (n - 1, n - 1);
        }
        let (patch, params) = (image_patch(n), PatchParams::default());
        let patch = Patch::Merge(&patch);
        retry(|| mds.patch(&name, &params, &patch)).await;
        let deadline = Instant::now() + Duration::from_secs(180);
        loop {
            let md = serde_json::to_value(retry(|| mds.get(&name)).await).unwrap();
            if rolled_out(&md, n) {
                break;
            }
            assert!(Instant::now() < deadline, "rollout {n} of {name} did not complete in 3 minutes: {}", md["status"]);
            tokio::time::sleep(Duration::from_millis(250)).await;
        }
    }
    unreachable!()
}

fn soak(w: Workload) {
    let seed = common::soak::seed(7);
    let dir = tempfile::tempdir().unwrap();
    let dir = dir.path().to_path_buf();
    let wall = Instant::now();
    let runtime = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().unwrap();
    runtime.block_on(run(w, seed, dir, wall));
}

async fn run(w: Workload, seed: u64, dir: PathBuf, wall: Instant) {
    let mut rng = Rng::new(seed);
    let (lp, pp) = (ListParams::default(), PostParams::default());
    let (mut cluster, port) = start_cluster(&dir, 0);
    let mut host = start_host(&dir);
    let client = client(&dir.join("kubeconfig")).await;
    // The CRDs come from the host; wait for them before creating anything.
    let cronjobs = api(&client, "batch.tutorial.kubebuilder.io", "v1", "CronJob", "cronjobs");
    let mds = api(&client, "apps.example.com", "v1", "MyDeployment", "mydeployments");
    retry(|| cronjobs.list(&lp)).await;
    retry(|| mds.list(&lp)).await;

    let ledger = Arc::new(Mutex::new(Ledger::default()));
    let stop = Arc::new(AtomicBool::new(false));
    let stop_watch = Arc::new(AtomicBool::new(false));
    let watcher = tokio::spawn(watch_pods(client.clone(), ledger.clone(), stop_watch.clone()));
    let mut created = Vec::new();
    for i in 0..w.cronjobs {
        let name = format!("cj-{i}");
        let obj: DynamicObject = serde_json::from_value(cronjob(&name, "5s", Some(1000))).unwrap();
        let answer = retry(|| cronjobs.create(&pp, &obj)).await;
        let at = serde_json::to_value(answer).unwrap()["metadata"]["creationTimestamp"].as_str().map(DateTime::parse_from_rfc3339);
        created.push((name, at.unwrap().unwrap().with_timezone(&Utc)));
    }
    let mut rollers = Vec::new();
    for i in 0..w.mydeployments {
        let (md, bound) = mydeployment(i);
        let name = md["metadata"]["name"].as_str().unwrap().to_string();
        ledger.lock().unwrap().bound("default", &name, bound);
        let obj: DynamicObject = serde_json::from_value(md).unwrap();
        retry(|| mds.create(&pp, &obj)).await;
        rollers.push(tokio::spawn(roll(client.clone(), name, stop.clone())));
    }

    // The kills.
    let began = Instant::now();
    let restart_at: Vec<Duration> = (1..=w.cluster_restarts).map(|k| w.span.mul_f64(k as f64 / (w.cluster_restarts + 1) as f64)).collect();
    let (mut host_kills, mut cluster_restarts) = (0, 0);
    let mut points = Vec::new();
    while began.elapsed() < w.span {
        let wait = rng.millis(w.kill_every.0, w.kill_every.1);
        tokio::time::sleep(wait).await;
        if restart_at.get(cluster_restarts).is_some_and(|t| began.elapsed() >= *t) {
            kill_9(&mut cluster);
            cluster_restarts += 1;
            points.push(format!("cluster@{:.1}s", began.elapsed().as_secs_f64()));
            cluster = start_cluster(&dir, port).0;
            continue;
        }
        kill_9(&mut host);
        host_kills += 1;
        points.push(format!("{:.1}s", began.elapsed().as_secs_f64()));
        host = start_host(&dir);
    }
    let window_end: DateTime<Utc> = Utc::now();
    println!("kill points (seed {seed}): {}", points.join(" "));

    // No more kills: the rollouts in flight finish, the runs due are made.
    stop.store(true, Ordering::SeqCst);
    let mut rollouts = 0;
    let mut last_image = Vec::new();
    for r in rollers {
        let (done, last) = r.await.expect("a roller panicked");
        rollouts += done;
        last_image.push(last);
    }
    // The last rollouts' old Pods finish terminating (the watch still runs).
    let deadline = Instant::now() + Duration::from_secs(60);
    while Instant::now() < deadline {
        let settled = {
            let l = ledger.lock().unwrap();
            (0..w.mydeployments).all(|i| {
                let (active, all) = l.pods_of("default", &format!("md-{i}"));
                let bound = mydeployment(i).1;
                active == bound.replicas && all == bound.replicas
            })
        };
        if settled {
            break;
        }
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
    stop_watch.store(true, Ordering::SeqCst);
    let relists = watcher.await.unwrap();
    // The runs due by the end of the kills: a host restarted just before it
    // may still be making the last minute's Jobs.
    let jobs = api(&client, "batch", "v1", "Job", "jobs");
    let deadline = Instant::now() + Duration::from_secs(60);
    let (runs, lost) = loop {
        let listed = retry(|| jobs.list(&lp)).await;
        let (runs, lost) = {
            let mut l = ledger.lock().unwrap();
            for job in &listed.items {
                let mut job = serde_json::to_value(job).unwrap();
                job["kind"] = "Job".into();
                l.observe_job(Change::Added, &job);
            }
            let (mut runs, mut lost) = (0, Vec::new());
            for (name, at) in &created {
                let (n, missing) = l.every_minute("default", name, *at, window_end);
                runs += n;
                lost.extend(missing.into_iter().map(|t| format!("{name} at {t}")));
            }
            (runs, lost)
        };
        if lost.is_empty() || Instant::now() > deadline {
            break (runs, lost);
        }
        tokio::time::sleep(Duration::from_secs(1)).await;
    };
    let mut unsettled = Vec::new();
    for (i, last) in last_image.iter().enumerate() {
        let (_, bound) = mydeployment(i);
        let name = format!("md-{i}");
        let md = serde_json::to_value(retry(|| mds.get(&name)).await).unwrap();
        let (active, all) = ledger.lock().unwrap().pods_of("default", &name);
        if !rolled_out(&md, *last) || active != bound.replicas {
            unsettled.push(format!("{name}: {active} active / {all} Pods, status {}", md["status"]));
        }
    }
    // The watch has stopped: the ledger is final.
    let l = ledger.lock().unwrap();
    let (duplicates, extra) = l.duplicates();
    println!(
        "FIGURES crash-soak {}: seed={seed} host_kills={host_kills} cluster_restarts={cluster_restarts} cronjobs={} runs={runs} jobs_created={} lost={} \
         duplicates={extra} misnamed={} mydeployments={} rollouts={rollouts} pod_changes={} pod_relists={relists} max_pods_over_surge={} wall={:.0}s",
        w.name,
        w.cronjobs,
        l.jobs_created(),
        lost.len(),
        l.misnamed_jobs.len(),
        w.mydeployments,
        l.pod_changes,
        l.worst_over_surge.max(0),
        wall.elapsed().as_secs_f64(),
    );
    if l.worst_over_surge > 0 {
        println!("worst moment: {}", l.worst);
    }
    kill_9(&mut host);
    kill_9(&mut cluster);
    let tail = |f: &str| std::fs::read_to_string(dir.join(f)).unwrap_or_default().lines().rev().take(20).collect::<Vec<_>>().join("\n");
    assert!(lost.is_empty(), "lost runs: {lost:?}\nhost log tail:\n{}", tail("host.log"));
    assert!(duplicates.is_empty(), "duplicate Jobs: {duplicates:?}");
    assert!(l.misnamed_jobs.is_empty(), "Jobs not named for their scheduled time: {:?}", l.misnamed_jobs);
    assert!(l.worst_over_surge <= 0, "maxSurge exceeded: {}", l.worst);
    assert!(unsettled.is_empty(), "not converged: {unsettled:?}");
    assert_eq!(cluster_restarts, w.cluster_restarts, "every cluster restart happened");
    assert!(runs >= w.cronjobs, "the window held {runs} runs");
    assert!(rollouts >= w.mydeployments, "{rollouts} rollouts");
}

#[test]
fn a_host_killed_at_random_and_a_restarted_cluster_lose_and_double_nothing() {
    soak(Workload { name: "quick", span: Duration::from_secs(100), cronjobs: 10, mydeployments: 4, kill_every: (2_000, 9_000), cluster_restarts: 1 });
}

#[test]
#[ignore = "long soak (a few minutes, 20+ kills): cargo test --release -p host --test all crash_soak:: -- --ignored"]
fn many_host_kills_and_cluster_restarts_over_minutes_lose_and_double_nothing() {
    soak(Workload { name: "long", span: Duration::from_secs(420), cronjobs: 20, mydeployments: 6, kill_every: (3_000, 15_000), cluster_restarts: 3 });
}
