//! Benchmark 4: the host's resident memory (VmRSS of the `host run`
//! process; the API server runs in the benchmark process), idle once
//! ready, with both shipped plugins and N cached objects, and the increment
//! per extra loaded plugin.

use std::time::Duration;

use futures::{StreamExt, TryStreamExt};
use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::core::v1::Pod;
use kube::api::{Api, PostParams};
use serde_json::json;

use crate::process::{Cluster, HostProcess};
use crate::{Paths, Profile};

#[derive(Clone, Debug, serde::Serialize)]
pub struct Report {
    /// (cached objects, MiB) with cronjob + mydeployment loaded.
    pub idle: Vec<(usize, f64)>,
    /// (plugins loaded, MiB) on an empty cluster: hello, + cronjob, + mydeployment.
    pub per_plugin: Vec<(String, f64)>,
    /// Sizes left out because seeding them would not fit [`SEED_BUDGET`].
    pub skipped: Vec<usize>,
    /// Ten controllers as one host vs ten hosts (not with `--objects`).
    pub ten: Option<crate::ten_controllers::Report>,
}

/// The longest the seeding of one size may be expected to take.
const SEED_BUDGET: Duration = Duration::from_secs(150);

/// Half Pods, half Jobs (kinds the two plugins watch), owned by no parent,
/// shaped like the fixtures', created in-process.
pub(crate) async fn seed(cluster: &Cluster, objects: usize) -> anyhow::Result<()> {
    let client = cluster.server.kube_client();
    let pods: Api<Pod> = Api::namespaced(client.clone(), "default");
    let jobs: Api<Job> = Api::namespaced(client, "default");
    futures::stream::iter(0..objects)
        .map(|i| {
            let (pods, jobs) = (pods.clone(), jobs.clone());
            async move {
                let name = format!("seed-{i:06}");
                let labels = json!({"app": "seed", "tier": format!("t{}", i % 10)});
                let containers = json!([{"name": "main", "image": "nginx:1.7.9", "ports": [{"containerPort": 80}]}]);
                if i % 2 == 0 {
                    let pod =
                        json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "labels": labels}, "spec": {"containers": containers}});
                    pods.create(&PostParams::default(), &serde_json::from_value(pod)?).await.map(|_| ())?;
                } else {
                    let job = json!({"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": name, "labels": labels},
                        "spec": {"template": {"spec": {"containers": containers, "restartPolicy": "Never"}}}});
                    jobs.create(&PostParams::default(), &serde_json::from_value(job)?).await.map(|_| ())?;
                }
                anyhow::Ok(())
            }
        })
        .buffer_unordered(8)
        .try_for_each(|_| async { Ok(()) })
        .await
}

/// `host run` arguments loading `plugins` from the warm precompiled `cache`.
pub(crate) fn host_args<P: AsRef<std::path::Path>>(cache: &std::path::Path, plugins: &[P]) -> Vec<String> {
    let mut args = vec!["--plugin-cache-dir".to_string(), cache.display().to_string()];
    for p in plugins {
        args.push("--plugin".into());
        args.push(p.as_ref().display().to_string());
    }
    args
}

/// [`host_args`] for the start that fills the precompiled cache: Cranelift
/// compiles before the host is ready (`--no-plugin-baseline`), so the cache
/// holds every plugin once it is; with Winch first, Cranelift's build is
/// written in the background and a warm-up stopped at ready may leave the
/// cache empty, and every measured host would compile again.
pub(crate) fn warm_up_args<P: AsRef<std::path::Path>>(cache: &std::path::Path, plugins: &[P]) -> Vec<String> {
    let mut args = host_args(cache, plugins);
    args.push("--no-plugin-baseline".into());
    args
}

/// Starts the host with `plugins`, waits until ready and idle, and returns
/// the median of a few RSS readings in MiB.
async fn idle_rss(paths: &Paths, cluster: &Cluster, args: &[String]) -> anyhow::Result<f64> {
    let log = paths.work.join("memory-host.log");
    let mut host = HostProcess::spawn(&paths.host, cluster, args, &log)?;
    // Listing 100,000 objects took over 300 s on the shared 2-core machine at load 10.
    host.wait_ready(Duration::from_secs(600)).await?;
    // Let the initial reconciles and allocator settle.
    tokio::time::sleep(Duration::from_secs(2)).await;
    let mut readings = Vec::new();
    for _ in 0..5 {
        readings.push(host.rss_kib()? as f64 / 1024.0);
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    // `BENCH_MEMORY_HOLD=<seconds>` keeps the idle host alive after the
    // readings, for a look with a profiler (gdb, /proc/<pid>/smaps).
    if let Some(secs) = std::env::var("BENCH_MEMORY_HOLD").ok().and_then(|s| s.parse().ok()) {
        eprintln!("bench: memory: holding host pid {} for {secs} s", host.pid());
        tokio::time::sleep(Duration::from_secs(secs)).await;
    }
    Ok(crate::stats::Summary::of(&readings).median)
}

/// Only the ten-controllers row.
pub async fn ten_controllers_only(profile: &Profile, paths: &Paths) -> anyhow::Result<Report> {
    let cache = tempfile::tempdir()?;
    let ten = crate::ten_controllers::run(paths, cache.path(), profile.ten_controllers_objects_per_kind()).await?;
    Ok(Report { idle: vec![], per_plugin: vec![], skipped: vec![], ten: Some(ten) })
}

/// With `only` (numbers of cached objects) just those sizes, without the per-plugin steps.
pub async fn run(profile: &Profile, paths: &Paths, only: &[usize]) -> anyhow::Result<Report> {
    let cache = tempfile::tempdir()?;
    let shipped = [paths.plugin("cronjob"), paths.plugin("mydeployment")];
    // Compile once into the cache, so every measured start loads precompiled code.
    {
        let cluster = Cluster::start().await?;
        let mut with_hello = shipped.to_vec();
        with_hello.push(paths.hello());
        idle_rss(paths, &cluster, &warm_up_args(cache.path(), &with_hello)).await?;
        cluster.stop().await;
    }
    let mut idle = Vec::new();
    let mut skipped = Vec::new();
    // Objects seeded per second so far, to skip a size whose seeding alone
    // would take longer than the budget on a slow day.
    let mut rate: Option<f64> = None;
    let sizes = if only.is_empty() { profile.memory_objects() } else { only.to_vec() };
    for objects in sizes {
        if let Some(r) = rate
            && objects as f64 / r > SEED_BUDGET.as_secs_f64()
        {
            eprintln!("bench: memory: skipping {objects} objects: seeding at {r:.0}/s would take over {SEED_BUDGET:?}");
            skipped.push(objects);
            continue;
        }
        let cluster = Cluster::start().await?;
        let t = std::time::Instant::now();
        seed(&cluster, objects).await?;
        if objects > 0 {
            rate = Some(objects as f64 / t.elapsed().as_secs_f64());
            eprintln!("bench: memory: seeded {objects} objects in {:.1} s", t.elapsed().as_secs_f64());
        }
        let mib = idle_rss(paths, &cluster, &host_args(cache.path(), &shipped)).await?;
        eprintln!("bench: memory idle with {objects} cached objects: {mib:.1} MiB");
        idle.push((objects, mib));
        cluster.stop().await;
    }
    let mut per_plugin = Vec::new();
    if !only.is_empty() {
        return Ok(Report { idle, per_plugin, skipped, ten: None });
    }
    let steps = [
        ("hello", vec![paths.hello()]),
        ("hello+cronjob", vec![paths.hello(), shipped[0].clone()]),
        ("hello+cronjob+mydeployment", vec![paths.hello(), shipped[0].clone(), shipped[1].clone()]),
    ];
    for (label, plugins) in steps {
        let cluster = Cluster::start().await?;
        let mib = idle_rss(paths, &cluster, &host_args(cache.path(), &plugins)).await?;
        eprintln!("bench: memory idle, empty cluster, plugins {label}: {mib:.1} MiB");
        per_plugin.push((label.to_string(), mib));
        cluster.stop().await;
    }
    let ten = crate::ten_controllers::run(paths, cache.path(), profile.ten_controllers_objects_per_kind()).await?;
    Ok(Report { idle, per_plugin, skipped, ten: Some(ten) })
}
