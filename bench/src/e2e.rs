//! Benchmark 3: end to end on the embedded API server over HTTP (loopback),
//! the host's manager in-process, once with the Wasm plugin and once with
//! the same plugin linked natively into the host (`Sandbox::load_native`),
//! everything else (caches, queue, controller, executor) identical.
//!
//! - CronJobs: `count` CronJobs (`*/1`) exist before the host starts; the
//!   host clock is a ManualClock set 1 s past the first minute boundary
//!   after the last creation, so every CronJob has exactly one run due.
//!   Measured: host start → all `count` Jobs exist.
//! - MyDeployments: `count` MyDeployments × 3 replicas exist before the host
//!   starts; the simulated cluster (scheduler + kubelet, Pods Ready at once)
//!   runs beside the server. Measured: host start → all Pods Ready.

use std::sync::Arc;
use std::time::{Duration, Instant};

use apiserver::ApiServer;
use futures::{StreamExt, TryStreamExt};
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{Api, ApiResource, DynamicObject, Patch, PatchParams, PostParams};
use operator_runtime::clock::{ManualClock, SharedClock, SystemClock};
use operator_runtime::manager;
use operator_runtime::registry::Registry;
use operator_runtime::sandbox::LoadedPlugin;
use serde_json::{Value, json};
use simulated_cluster::ClusterConfig;

use crate::stats::Summary;
use crate::workload::Kind;
use crate::{Plugins, Profile};

/// How the plugin runs.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize)]
pub enum Variant {
    Wasm,
    Native,
}

#[derive(Clone, Debug, serde::Serialize)]
pub struct Row {
    pub kind: Kind,
    pub count: usize,
    /// Milliseconds from host start to done.
    pub wasm: Summary,
    pub native: Summary,
    /// Milliseconds from host start to caches synced (part of the above).
    pub wasm_synced: Summary,
    pub native_synced: Summary,
    /// Milliseconds from host start until every child exists (part of the total).
    pub wasm_created: Summary,
    pub native_created: Summary,
}

impl Row {
    pub fn ratio(&self) -> f64 {
        self.wasm.median / self.native.median
    }
}

const POLL: Duration = Duration::from_millis(20);
const GIVE_UP: Duration = Duration::from_secs(300);
const MANAGER: &str = "operator-host";

fn plugin_for(plugins: &Plugins, kind: Kind, variant: Variant) -> anyhow::Result<LoadedPlugin> {
    Ok(match (variant, kind) {
        (Variant::Wasm, _) => plugins.get(kind).clone(),
        (Variant::Native, Kind::CronJob) => plugins.sandbox.load_native::<cronjob::CronJobPlugin>()?,
        (Variant::Native, Kind::MyDeployment) => plugins.sandbox.load_native::<mydeployment::MyDeploymentPlugin>()?,
    })
}

/// A kube client that talks HTTP to the server on loopback, as `host run` does.
async fn http_client(handle: &apiserver::ServerHandle, dir: &std::path::Path) -> anyhow::Result<kube::Client> {
    let path = dir.join("kubeconfig");
    handle.write_kubeconfig(&path)?;
    let kubeconfig = kube::config::Kubeconfig::read_from(&path)?;
    let config = kube::Config::from_custom_kubeconfig(kubeconfig, &Default::default()).await?;
    Ok(kube::Client::try_from(config)?)
}

pub async fn install_crds(client: &kube::Client, plugin: &LoadedPlugin) -> anyhow::Result<()> {
    let api: Api<CustomResourceDefinition> = Api::all(client.clone());
    for crd in &plugin.manifest().crds {
        let name = crd["metadata"]["name"].as_str().unwrap_or_default().to_string();
        api.patch(&name, &PatchParams::apply(MANAGER).force(), &Patch::Apply(crd)).await?;
        let deadline = Instant::now() + Duration::from_secs(60);
        loop {
            let crd = api.get(&name).await?;
            if crd.status.and_then(|s| s.conditions).unwrap_or_default().iter().any(|c| c.type_ == "Established" && c.status == "True") {
                break;
            }
            anyhow::ensure!(Instant::now() < deadline, "CRD {name} not established");
            tokio::time::sleep(POLL).await;
        }
    }
    Ok(())
}

pub fn parent(kind: Kind, i: usize) -> Value {
    let name = format!("{}-{i:05}", kind.plugin());
    match kind {
        Kind::CronJob => json!({
            "apiVersion": "batch.tutorial.kubebuilder.io/v1", "kind": "CronJob",
            "metadata": {"name": name, "namespace": "default"},
            "spec": {"schedule": "*/1 * * * *", "startingDeadlineSeconds": 60, "concurrencyPolicy": "Allow",
                "jobTemplate": {"spec": {"template": {"spec": {
                    "containers": [{"name": "hello", "image": "busybox", "args": ["/bin/sh", "-c", "date"]}],
                    "restartPolicy": "OnFailure"}}}}}
        }),
        Kind::MyDeployment => json!({
            "apiVersion": "apps.example.com/v1", "kind": "MyDeployment",
            "metadata": {"name": name, "namespace": "default"},
            "spec": {"replicas": 3, "selector": {"matchLabels": {"app": name}},
                "template": {"metadata": {"labels": {"app": name}},
                    "spec": {"containers": [{"name": "nginx", "image": "nginx:1.7.9", "ports": [{"containerPort": 80}]}]}}}
        }),
    }
}

pub fn parent_api(client: &kube::Client, kind: Kind) -> Api<DynamicObject> {
    let ar = match kind {
        Kind::CronJob => ApiResource {
            group: "batch.tutorial.kubebuilder.io".into(),
            version: "v1".into(),
            api_version: "batch.tutorial.kubebuilder.io/v1".into(),
            kind: "CronJob".into(),
            plural: "cronjobs".into(),
        },
        Kind::MyDeployment => ApiResource {
            group: "apps.example.com".into(),
            version: "v1".into(),
            api_version: "apps.example.com/v1".into(),
            kind: "MyDeployment".into(),
            plural: "mydeployments".into(),
        },
    };
    Api::namespaced_with(client.clone(), "default", &ar)
}

async fn create_parents(client: &kube::Client, kind: Kind, count: usize) -> anyhow::Result<()> {
    let api = parent_api(client, kind);
    futures::stream::iter(0..count)
        .map(|i| {
            let api = api.clone();
            async move {
                api.create(&PostParams::default(), &serde_json::from_value::<DynamicObject>(parent(kind, i))?).await.map_err(anyhow::Error::from)
            }
        })
        .buffer_unordered(16)
        .try_for_each(|_| async { Ok(()) })
        .await
}

/// How many children exist, and how many of them meet the goal (Jobs:
/// exist; Pods: Ready), read from the server's store in-process: a list
/// through the API every poll (1,000s of objects copied, converted and
/// serialized 50 times a second) took a share of the two cores from the
/// host under test. Jobs are counted from the store's change log since the
/// last poll: a scan of 10,000 keys every 20 ms was ~4% of the CPU in a
/// profile of 10,000 CronJobs.
struct Progress {
    kind: Kind,
    gr: apiserver::resources::GroupResource,
    /// Jobs in `default` as of store resourceVersion `rv`.
    jobs: usize,
    rv: u64,
}

impl Progress {
    fn new(kind: Kind) -> Self {
        let (group, resource) = match kind {
            Kind::CronJob => ("batch", "jobs"),
            Kind::MyDeployment => ("", "pods"),
        };
        let gr = apiserver::resources::GroupResource { group: group.into(), resource: resource.into() };
        Self { kind, gr, jobs: 0, rv: 0 }
    }

    fn read(&mut self, core: &apiserver::rest::Core) -> (usize, usize) {
        match self.kind {
            Kind::CronJob => {
                match core.store.events_since(&self.gr, self.rv) {
                    Ok((events, rv)) => {
                        for e in events.iter().filter(|e| e.key.namespace == "default") {
                            match e.kind {
                                apiserver::store::EventType::Added => self.jobs += 1,
                                apiserver::store::EventType::Deleted => self.jobs = self.jobs.saturating_sub(1),
                                apiserver::store::EventType::Modified => {}
                            }
                        }
                        self.rv = rv;
                    }
                    // Older than the change log keeps: count them all once.
                    Err(_) => {
                        let (objects, rv) = core.store.list_shared(&self.gr, Some("default"));
                        (self.jobs, self.rv) = (objects.len(), rv);
                    }
                }
                (self.jobs, self.jobs)
            }
            Kind::MyDeployment => {
                let objects = core.store.list_shared(&self.gr, Some("default")).0;
                let live: Vec<&Value> = objects.iter().map(|o| &**o).filter(|p| p.pointer("/metadata/deletionTimestamp").is_none()).collect();
                let ready = live
                    .iter()
                    .filter(|p| {
                        p.pointer("/status/conditions")
                            .and_then(Value::as_array)
                            .is_some_and(|cs| cs.iter().any(|c| c["type"] == "Ready" && c["status"] == "True"))
                    })
                    .count();
                (live.len(), ready)
            }
        }
    }
}

/// Times of one run, from host start.
pub struct Times {
    pub synced: Duration,
    /// Every child exists (for Pods: before they are Ready).
    pub created: Duration,
    pub done: Duration,
    /// CPU time of the whole process (host, API server and this poll) from
    /// host start to done: on a machine shared with other work the wall
    /// time moves with their load, the CPU the work took much less.
    pub cpu: Duration,
}

/// CPU time (user + system) this process has used so far, from
/// `/proc/self/stat` (zero where there is none).
fn process_cpu() -> Duration {
    let ticks = std::fs::read_to_string("/proc/self/stat").ok().and_then(|s| {
        // Fields after the command name, which is in parentheses and may hold spaces.
        let rest = &s[s.rfind(')')? + 2..];
        let fields: Vec<&str> = rest.split(' ').collect();
        Some(fields.get(11)?.parse::<u64>().ok()? + fields.get(12)?.parse::<u64>().ok()?)
    });
    // The kernel reports in USER_HZ, 100 on every Linux this runs on.
    Duration::from_millis(ticks.unwrap_or(0) * 10)
}

/// Profiles the timed window only: with `BENCH_PERF_CTL=<fifo>`, writes
/// `enable` / `disable` to a `perf record --control fifo:<fifo> -D -1`
/// control pipe at the start and end of each counted run, so set-up
/// (creating the parents, compiling the plugin), teardown and the warm-up
/// stay out of the profile; `BENCH_PERF_ONLY=wasm|native` profiles that
/// variant's runs only.
fn profiled(variant: Variant, counted: bool) -> bool {
    let only = std::env::var("BENCH_PERF_ONLY").ok();
    counted && only.is_none_or(|only| only.eq_ignore_ascii_case(&format!("{variant:?}")))
}

fn perf_control(command: &str) {
    if let Some(fifo) = std::env::var_os("BENCH_PERF_CTL")
        && let Err(e) =
            std::fs::OpenOptions::new().write(true).open(&fifo).and_then(|mut f| std::io::Write::write_all(&mut f, format!("{command}\n").as_bytes()))
    {
        eprintln!("bench: BENCH_PERF_CTL {}: {e}", std::path::Path::new(&fifo).display());
    }
}

/// One run: fresh server, `count` parents, host start → goal; `counted`
/// is false for the warm-up.
pub async fn run_once(plugins: &Plugins, kind: Kind, variant: Variant, count: usize, counted: bool) -> anyhow::Result<Times> {
    let dir = tempfile::tempdir()?;
    let server = ApiServer::new();
    let handle = server.serve_on(([127, 0, 0, 1], 0).into()).await?;
    let client = http_client(&handle, dir.path()).await?;
    let plugin = plugin_for(plugins, kind, variant)?;
    let registry = Registry::default();
    registry.insert(plugin.name(), plugin.clone());
    embedded_cluster::register_admission(&server, &registry, &plugin);
    install_crds(&client, &plugin).await?;
    create_parents(&client, kind, count).await?;

    let (clock, cluster): (SharedClock, _) = match kind {
        Kind::CronJob => {
            let now = chrono::Utc::now();
            let next_minute = chrono::DateTime::from_timestamp((now.timestamp() / 60 + 1) * 60, 0).expect("time");
            (Arc::new(ManualClock::new(next_minute + chrono::Duration::seconds(1))), None)
        }
        Kind::MyDeployment => {
            let nodes = (count * 3).div_ceil(100).max(1);
            let config = ClusterConfig { nodes, ready_after: Duration::ZERO, jobs: false, ..ClusterConfig::default() };
            (Arc::new(SystemClock), Some(simulated_cluster::start(&server, config)))
        }
    };
    let goal = match kind {
        Kind::CronJob => count,
        Kind::MyDeployment => count * 3,
    };
    // Progress is read in-process, off the host's HTTP connection.
    let observer = server.core().clone();
    let mut progress = Progress::new(kind);

    let start = Instant::now();
    let cpu_at_start = process_cpu();
    let profiled = profiled(variant, counted);
    if profiled {
        perf_control("enable");
    }
    let running = manager::Builder::new(client)
        .plugins([plugin])
        .clock(clock)
        .registry(registry)
        .start()
        .await
        .map_err(|e| anyhow::anyhow!("manager: {}", operator_runtime::error_chain(&e)))?;
    running.wait_synced().await;
    let synced = start.elapsed();
    let mut last_report = Instant::now();
    let mut created_at = None;
    loop {
        let (created, done) = progress.read(&observer);
        if created >= goal && created_at.is_none() {
            created_at = Some(start.elapsed());
        }
        if std::env::var_os("BENCH_VERBOSE").is_some() && last_report.elapsed() > Duration::from_secs(1) {
            eprintln!("bench: e2e {kind:?} {variant:?}: {done} of {goal} after {:.1} s", start.elapsed().as_secs_f64());
            last_report = Instant::now();
        }
        if done >= goal {
            break;
        }
        anyhow::ensure!(start.elapsed() < GIVE_UP, "{kind:?} {variant:?}: only {done} of {goal} after {GIVE_UP:?}");
        tokio::time::sleep(POLL).await;
    }
    let total = start.elapsed();
    let cpu = process_cpu().saturating_sub(cpu_at_start);
    if profiled {
        perf_control("disable");
    }
    let created = created_at.unwrap_or(total);
    running.shutdown(Duration::from_secs(10)).await;
    if let Some(c) = cluster {
        c.stop().await;
    }
    handle.shutdown().await;
    Ok(Times { synced, created, done: total, cpu })
}

/// `kinds` in turn, `count` parents each (default: the profile's size).
pub async fn run(profile: &Profile, plugins: &Plugins, kinds: &[Kind], count: Option<usize>) -> anyhow::Result<Vec<Row>> {
    let mut rows = Vec::new();
    for &kind in kinds {
        let count = count.unwrap_or(profile.e2e_count(kind));
        let mut samples: [Vec<Times>; 2] = Default::default();
        // The first run in a fresh process grows the allocator's heap to the
        // run's peak, and pays for it in page faults that later runs do not
        // (perf of 10,000 CronJobs: faults and `sysmalloc` 10% of the first
        // run's CPU, 4% of the next one's, whichever variant ran first). So
        // one run that is not counted comes first.
        let warm_up = run_once(plugins, kind, Variant::Native, count, false).await?;
        eprintln!("bench: e2e {} ×{count} warm-up (not counted): done {:.0} ms, CPU {:.0} ms", kind.plugin(), ms(warm_up.done), ms(warm_up.cpu));
        // Alternate the variants so drifting load hits both alike, and which
        // goes first, so that neither always follows the other.
        for round in 0..profile.e2e_rounds() {
            let order = if round % 2 == 0 { [Variant::Wasm, Variant::Native] } else { [Variant::Native, Variant::Wasm] };
            for variant in order {
                let slot = match variant {
                    Variant::Wasm => 0,
                    Variant::Native => 1,
                };
                let t = run_once(plugins, kind, variant, count, true).await?;
                eprintln!(
                    "bench: e2e {} ×{count} {variant:?} round {round}: synced {:.0} ms, children created {:.0} ms, done {:.0} ms, CPU {:.0} ms",
                    kind.plugin(),
                    ms(t.synced),
                    ms(t.created),
                    ms(t.done),
                    ms(t.cpu)
                );
                samples[slot].push(t);
            }
        }
        let of = |slot: usize, f: fn(&Times) -> Duration| Summary::millis(&samples[slot].iter().map(f).collect::<Vec<_>>());
        rows.push(Row {
            kind,
            count,
            wasm: of(0, |t| t.done),
            native: of(1, |t| t.done),
            wasm_synced: of(0, |t| t.synced),
            native_synced: of(1, |t| t.synced),
            wasm_created: of(0, |t| t.created),
            native_created: of(1, |t| t.created),
        });
    }
    Ok(rows)
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1e3
}
