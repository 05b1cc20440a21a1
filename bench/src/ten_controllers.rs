//! Benchmark 4b: ten controllers as one `host run` with ten plugins versus
//! ten `host run`s with one plugin each — the choice between this host and
//! one operator process per controller.
//!
//! All eleven processes run side by side against the same API server, which
//! holds the same seeded objects; each process watches what its plugins
//! declare (its own caches), so the ten hosts each cache the kinds their
//! plugin uses and the one host caches each kind once. No parents exist, so
//! no plugin reconciles and the two sides stay independent: the figure is
//! idle RSS once every cache is synced.

use std::path::PathBuf;
use std::time::Duration;

use futures::{StreamExt, TryStreamExt};
use k8s_openapi::api::core::v1::ConfigMap;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{Api, PostParams};
use serde_json::json;

use crate::Paths;
use crate::process::{Cluster, HostProcess};

#[derive(Clone, Debug, serde::Serialize)]
pub struct Report {
    /// Objects seeded before the hosts start (Pods + Jobs + ConfigMaps).
    pub objects: usize,
    /// RSS of the one host with all ten plugins, MiB.
    pub one_host: f64,
    /// (plugin, RSS MiB) of each of the ten single-plugin hosts.
    pub ten_hosts: Vec<(String, f64)>,
}

impl Report {
    pub fn ten_hosts_total(&self) -> f64 {
        self.ten_hosts.iter().map(|(_, mib)| mib).sum()
    }

    /// The one host as a share of the ten hosts' sum (0.2 = −80%).
    pub fn share(&self) -> f64 {
        self.one_host / self.ten_hosts_total()
    }
}

/// Ten controllers of distinct parent kinds, all built by `cargo xtask build`:
/// the two shipped ones, the examples and the test plugins that speak a
/// contract this host runs (`sprocket` and `gizmo` are the `versioned` logic
/// as controllers of their own kinds).
fn controllers(paths: &Paths) -> Vec<(&'static str, PathBuf)> {
    let built = |crate_name: &str| paths.target.join("wasm32-wasip2/release").join(format!("{crate_name}.wasm"));
    vec![
        ("cronjob", paths.plugin("cronjob")),
        ("mydeployment", paths.plugin("mydeployment")),
        ("hello", built("hello")),
        ("memcached", built("memcached")),
        ("versioned", built("versioned")),
        ("sprocket", paths.plugin("sprocket")),
        ("finalizing", built("finalizing")),
        ("related", built("related")),
        ("hostile", built("hostile")),
        ("gizmo", paths.plugin("gizmo")),
    ]
}

/// The parent kind of the test plugin that carries no CRD (the tests
/// install it): (kind, plural).
const CRDLESS: [(&str, &str); 1] = [("Hostile", "hostiles")];

async fn install_crds(cluster: &Cluster) -> anyhow::Result<()> {
    let crds: Api<CustomResourceDefinition> = Api::all(cluster.server.kube_client());
    for (kind, plural) in CRDLESS {
        let crd = json!({
            "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
            "metadata": {"name": format!("{plural}.test.operator.dev")},
            "spec": {"group": "test.operator.dev", "scope": "Namespaced",
                "names": {"kind": kind, "plural": plural, "singular": kind.to_lowercase(), "listKind": format!("{kind}List")},
                "versions": [{"name": "v1", "served": true, "storage": true, "subresources": {"status": {}},
                    "schema": {"openAPIV3Schema": {"type": "object", "x-kubernetes-preserve-unknown-fields": true}}}]},
        });
        crds.create(&PostParams::default(), &serde_json::from_value(crd)?).await?;
    }
    Ok(())
}

/// `per_kind` ConfigMaps next to `2 × per_kind` Pods and Jobs.
async fn seed(cluster: &Cluster, per_kind: usize) -> anyhow::Result<()> {
    crate::memory::seed(cluster, 2 * per_kind).await?;
    let maps: Api<ConfigMap> = Api::namespaced(cluster.server.kube_client(), "default");
    futures::stream::iter(0..per_kind)
        .map(|i| {
            let maps = maps.clone();
            async move {
                let cm = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": format!("seed-{i:06}"), "labels": {"app": "seed"}},
                    "data": {"greeting": "hello", "index": i.to_string()}});
                maps.create(&PostParams::default(), &serde_json::from_value(cm)?).await.map(|_| ())?;
                anyhow::Ok(())
            }
        })
        .buffer_unordered(8)
        .try_for_each(|_| async { Ok(()) })
        .await
}

/// Seeds `per_kind` objects of each of Pod, Job and ConfigMap, starts the
/// one host and the ten hosts together, and reads each one's idle RSS.
pub async fn run(paths: &Paths, cache: &std::path::Path, per_kind: usize) -> anyhow::Result<Report> {
    let plugins = controllers(paths);
    for (name, path) in &plugins {
        anyhow::ensure!(path.exists(), "plugin {name} is missing at {}: run `cargo xtask build`", path.display());
    }
    let cluster = Cluster::start().await?;
    install_crds(&cluster).await?;
    seed(&cluster, per_kind).await?;
    let spawn =
        |label: &str, args: Vec<String>| HostProcess::spawn(&paths.host, &cluster, &args, &paths.work.join(format!("ten-controllers-{label}.log")));
    let start = |label: &str, plugins: &[&PathBuf]| spawn(label, crate::memory::host_args(cache, plugins));
    // A first start compiles every plugin into the cache and is stopped:
    // all eleven measured processes load precompiled code, as on any restart
    // (a compiling process keeps Cranelift's heap, hundreds of MiB).
    let all: Vec<&PathBuf> = plugins.iter().map(|(_, p)| p).collect();
    spawn("compile", crate::memory::warm_up_args(cache, &all))?.wait_ready(Duration::from_secs(300)).await?;
    let mut one = start("one", &all)?;
    let mut ten = Vec::new();
    for (name, path) in &plugins {
        ten.push((*name, start(name, &[path])?));
    }
    one.wait_ready(Duration::from_secs(300)).await?;
    for (name, host) in &mut ten {
        host.wait_ready(Duration::from_secs(300)).await.map_err(|e| anyhow::anyhow!("host with {name} alone: {e}"))?;
    }
    // Let start-up work and the allocators settle, then read everyone a few times.
    tokio::time::sleep(Duration::from_secs(3)).await;
    let mut readings: Vec<Vec<f64>> = vec![Vec::new(); 1 + ten.len()];
    for _ in 0..5 {
        readings[0].push(one.rss_kib()? as f64 / 1024.0);
        for (i, (_, host)) in ten.iter().enumerate() {
            readings[i + 1].push(host.rss_kib()? as f64 / 1024.0);
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    let median = |r: &[f64]| crate::stats::Summary::of(r).median;
    let report = Report {
        objects: 3 * per_kind,
        one_host: median(&readings[0]),
        ten_hosts: ten.iter().enumerate().map(|(i, (name, _))| (name.to_string(), median(&readings[i + 1]))).collect(),
    };
    drop((one, ten));
    cluster.stop().await;
    eprintln!(
        "bench: memory: ten controllers, {} objects: one host {:.1} MiB, ten hosts {:.1} MiB ({:.0}%)",
        report.objects,
        report.one_host,
        report.ten_hosts_total(),
        100.0 * report.share()
    );
    Ok(report)
}
