//! Benchmark 5: hot-swap latency (ConfigMap update → first reconcile on the
//! new version) and cold start (process start → first reconcile, with and
//! without the precompiled cache), each against `host run` as a process.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use k8s_openapi::ByteString;
use k8s_openapi::api::core::v1::{ConfigMap, Pod};
use kube::api::{Api, ApiResource, DynamicObject, ListParams, Patch, PatchParams, PostParams};
use serde_json::json;

use crate::process::{Cluster, HostProcess};
use crate::stats::Summary;
use crate::{Paths, Plugins, Profile};

const POLL: Duration = Duration::from_millis(2);
/// Pause between swaps. `host run` serves a newly compiled version from
/// Winch at once and compiles it with Cranelift in the background (a few
/// hundred ms); swaps closer than that would time each swap against the
/// previous one's background compile, which a user publishing versions
/// does not see.
const BETWEEN_SWAPS: Duration = Duration::from_millis(1500);
const GIVE_UP: Duration = Duration::from_secs(120);

#[derive(Clone, Debug, serde::Serialize)]
pub struct Report {
    /// Milliseconds from the ConfigMap write to the status the new version wrote.
    pub hot_swap: Summary,
    /// Milliseconds from process start to the first Pod a reconcile created.
    pub cold_cached: Summary,
    pub cold_uncached: Summary,
}

fn widgets(client: &kube::Client) -> Api<DynamicObject> {
    let ar = ApiResource {
        group: "swap.test.operator-host.dev".into(),
        version: "v1".into(),
        api_version: "swap.test.operator-host.dev/v1".into(),
        kind: "Widget".into(),
        plural: "widgets".into(),
    };
    Api::namespaced_with(client.clone(), "default", &ar)
}

async fn publish(client: &kube::Client, wasm: &[u8]) -> anyhow::Result<()> {
    let api: Api<ConfigMap> = Api::namespaced(client.clone(), "default");
    let data: BTreeMap<String, ByteString> = [("plugin.wasm".to_string(), ByteString(wasm.to_vec()))].into();
    let cm = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "plugins"}, "binaryData": data});
    api.patch("plugins", &PatchParams::apply("bench").force(), &Patch::Apply(&cm)).await?;
    Ok(())
}

async fn until(what: &str, mut done: impl AsyncFnMut() -> anyhow::Result<bool>) -> anyhow::Result<Instant> {
    let deadline = Instant::now() + GIVE_UP;
    loop {
        if done().await? {
            return Ok(Instant::now());
        }
        anyhow::ensure!(Instant::now() < deadline, "gave up waiting for {what}");
        tokio::time::sleep(POLL).await;
    }
}

async fn widget_version(api: &Api<DynamicObject>) -> Option<String> {
    let w = api.get_opt("w").await.ok()??;
    w.data["status"]["version"].as_str().map(str::to_string)
}

/// Swaps the `versioned` test plugin back and forth through a ConfigMap and
/// times each swap until the Widget's status is written by the new version.
async fn hot_swap(profile: &Profile, paths: &Paths) -> anyhow::Result<Summary> {
    let (v1, v2) = (std::fs::read(paths.versioned(1))?, std::fs::read(paths.versioned(2))?);
    let cluster = Cluster::start().await?;
    let client = cluster.http_client().await?;
    publish(&client, &v1).await?;
    // No precompiled cache: every swap compiles the version it brings, as a
    // newly published version does.
    let args = ["--plugin-configmap".to_string(), "default/plugins".to_string(), "--no-plugin-cache".to_string()];
    let mut host = HostProcess::spawn(&paths.host, &cluster, &args, &paths.work.join("hotswap-host.log"))?;
    host.wait_ready(GIVE_UP).await?;
    let api = widgets(&client);
    until("the Widget CRD", async || Ok(api.list(&ListParams::default()).await.is_ok())).await?;
    api.create(
        &PostParams::default(),
        &serde_json::from_value(json!({"apiVersion": "swap.test.operator-host.dev/v1", "kind": "Widget", "metadata": {"name": "w"}, "spec": {}}))?,
    )
    .await?;
    until("version 1 to reconcile", async || Ok(widget_version(&api).await.as_deref() == Some("1"))).await?;
    let mut samples = Vec::new();
    for i in 0..profile.swaps() {
        tokio::time::sleep(BETWEEN_SWAPS).await;
        let (bytes, want) = if i % 2 == 0 { (&v2, "2") } else { (&v1, "1") };
        let start = Instant::now();
        publish(&client, bytes).await?;
        let at = until("the swapped version to reconcile", async || Ok(widget_version(&api).await.as_deref() == Some(want))).await?;
        samples.push(at - start);
        eprintln!("bench: hot swap to v{want}: {:.0} ms", (at - start).as_secs_f64() * 1e3);
    }
    drop(host);
    cluster.stop().await;
    Ok(Summary::millis(&samples))
}

/// One cold start: a MyDeployment exists; the host starts with both shipped
/// plugins; done when the first Pod exists. `fill` keeps the host running
/// until the cache holds both plugins (a host that has to compile serves
/// from Winch and writes Cranelift's build to the cache in the background).
async fn cold_start_once(paths: &Paths, plugins: &Plugins, cache: Option<&std::path::Path>, fill: bool) -> anyhow::Result<Duration> {
    let cluster = Cluster::start().await?;
    let client = cluster.http_client().await?;
    crate::e2e::install_crds(&client, plugins.get(crate::workload::Kind::MyDeployment)).await?;
    let md = crate::e2e::parent_api(&client, crate::workload::Kind::MyDeployment);
    md.create(&PostParams::default(), &serde_json::from_value(crate::e2e::parent(crate::workload::Kind::MyDeployment, 0))?).await?;
    let mut args: Vec<String> = match cache {
        Some(dir) => vec!["--plugin-cache-dir".into(), dir.display().to_string()],
        None => vec!["--no-plugin-cache".into()],
    };
    for p in ["cronjob", "mydeployment"] {
        args.push("--plugin".into());
        args.push(paths.plugin(p).display().to_string());
    }
    let host = HostProcess::spawn(&paths.host, &cluster, &args, &paths.work.join("coldstart-host.log"))?;
    let pods: Api<Pod> = Api::namespaced(cluster.server.kube_client(), "default");
    let at = until("the first Pod", async || Ok(!pods.list_metadata(&ListParams::default()).await?.items.is_empty())).await?;
    let took = at - host.started;
    if let (Some(dir), true) = (cache, fill) {
        let artifacts =
            || std::fs::read_dir(dir).map(|d| d.filter_map(Result::ok).filter(|e| e.path().extension().is_some_and(|x| x == "cwasm")).count());
        until("the plugin cache to be filled", async || Ok(artifacts()? >= 2)).await?;
    }
    drop(host);
    cluster.stop().await;
    Ok(took)
}

async fn cold_start(profile: &Profile, paths: &Paths, plugins: &Plugins) -> anyhow::Result<(Summary, Summary)> {
    let cache = tempfile::tempdir()?;
    cold_start_once(paths, plugins, Some(cache.path()), true).await?;
    let (mut cached, mut uncached) = (Vec::new(), Vec::new());
    for _ in 0..profile.cold_starts() {
        let c = cold_start_once(paths, plugins, Some(cache.path()), false).await?;
        let u = cold_start_once(paths, plugins, None, false).await?;
        eprintln!("bench: cold start: cached {:.0} ms, uncached {:.0} ms", c.as_secs_f64() * 1e3, u.as_secs_f64() * 1e3);
        cached.push(c);
        uncached.push(u);
    }
    Ok((Summary::millis(&cached), Summary::millis(&uncached)))
}

pub async fn run(profile: &Profile, paths: &Paths, plugins: &Plugins) -> anyhow::Result<Report> {
    let hot_swap = hot_swap(profile, paths).await?;
    let (cold_cached, cold_uncached) = cold_start(profile, paths, plugins).await?;
    Ok(Report { hot_swap, cold_cached, cold_uncached })
}
