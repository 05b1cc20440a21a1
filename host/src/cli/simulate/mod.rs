//! `host simulate`: the embedded API server, the simulated cluster (kubelet,
//! Job runner, garbage collector), the host and its plugins, all under
//! virtual time, for a given span; prints a timeline of what happened.
//!
//! Everything runs on one current-thread tokio runtime whose clock is
//! paused. tokio jumps that clock to the next timer whenever every task is
//! idle, and not while a plugin call runs on the blocking pool, so a week of
//! schedules passes in seconds of wall time. The host and the API server read
//! one [`TokioClock`] (start + tokio's elapsed time), the host talks to the
//! server in-process (no sockets), and the run has no other source of
//! time or randomness that reaches the output: the same inputs give the same
//! timeline byte for byte. Plugin deadlines stay wall-clock (the sandbox's
//! epoch ticker), which is what they protect.

mod record;
mod timeline;

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use chrono::{DateTime, Utc};
use kube::api::{Api, DynamicObject, PostParams};
use serde_json::Value;

use super::{Failure, SandboxArgs, input, parse_duration};
use operator_runtime::clock::TokioClock;
use operator_runtime::manager::{self, Options};
use operator_runtime::sandbox::LoadedPlugin;
use record::{Recording, RecordingService, StoreFeed};

/// The default `--start`: a fixed instant, so runs are reproducible.
pub const DEFAULT_START: &str = "2026-01-01T00:00:00Z";

#[derive(Debug, clap::Args)]
pub struct Args {
    /// A plugin component (.wasm); repeat for several.
    #[arg(long = "plugin", required = true)]
    plugins: Vec<PathBuf>,
    /// Objects to create at the start (YAML or JSON, several per file); repeat for several files.
    #[arg(long = "apply", required = true)]
    apply: Vec<PathBuf>,
    /// How much virtual time to simulate, e.g. `7d`, `36h`, `90m`.
    #[arg(long = "for", value_parser = parse_duration)]
    span: Duration,
    /// The virtual time at which the simulation starts (RFC 3339).
    #[arg(long, default_value = DEFAULT_START, value_parser = parse_start)]
    start: DateTime<Utc>,
    /// `text` (one line per entry) or `json` (an array of entries).
    #[arg(long, value_enum, default_value_t = Format::Text)]
    output: Format,
    /// Reconcile every parent at least this often (virtual time).
    #[arg(long, default_value = "10m", value_parser = parse_duration)]
    resync: Duration,
    #[command(flatten)]
    record: super::run::RecordArgs,
}

#[derive(Clone, Copy, Debug, clap::ValueEnum)]
enum Format {
    Text,
    Json,
}

fn parse_start(text: &str) -> Result<DateTime<Utc>, String> {
    DateTime::parse_from_rfc3339(text).map(|t| t.with_timezone(&Utc)).map_err(|e| format!("{e} (expected RFC 3339, e.g. {DEFAULT_START})"))
}

pub fn run(sandbox: &SandboxArgs, args: &Args) -> Result<(), Failure> {
    let sandbox = sandbox.sandbox().map_err(|e| Failure::bad_input(format!("{e:#}")))?;
    let mut plugins = Vec::new();
    for path in &args.plugins {
        plugins.push(sandbox.load_file(path).map_err(|e| Failure::plugin(operator_runtime::error_chain(&e)))?);
    }
    manager::check_parents(&plugins).map_err(|e| Failure { code: e.exit_code(), message: e.to_string() })?;
    let mut objects = Vec::new();
    for path in &args.apply {
        let found = input::read_objects(path).map_err(Failure::bad_input)?;
        for obj in found {
            if obj.pointer("/metadata/name").and_then(Value::as_str).is_none_or(str::is_empty) {
                return Err(Failure::bad_input(format!("{}: every object needs metadata.name (generateName is not reproducible)", path.display())));
            }
            objects.push((path.clone(), obj));
        }
    }
    if objects.is_empty() {
        return Err(Failure::bad_input("--apply: the files hold no objects"));
    }
    let recorder = args.record.open()?;
    let runtime =
        tokio::runtime::Builder::new_current_thread().enable_all().start_paused(true).build().map_err(|e| Failure::plugin(format!("tokio: {e}")))?;
    let wall = std::time::Instant::now();
    let entries = runtime.block_on(simulate(args, plugins, objects, recorder.clone()));
    if let Some(r) = recorder {
        r.flush();
    }
    let entries = entries?;
    tracing::info!(entries = entries.len(), span = %humantime::format_duration(args.span), wall = ?wall.elapsed(), "simulated");
    let text = match args.output {
        Format::Text => timeline::text(&entries),
        Format::Json => timeline::json(&entries),
    };
    use std::io::Write;
    let mut out = std::io::stdout().lock();
    out.write_all(text.as_bytes()).and_then(|()| out.flush()).map_err(|e| Failure::bad_input(format!("writing the timeline: {e}")))
}

async fn simulate(
    args: &Args,
    plugins: Vec<LoadedPlugin>,
    objects: Vec<(PathBuf, Value)>,
    recorder: Option<Arc<operator_runtime::record::Recorder>>,
) -> Result<Vec<timeline::Entry>, Failure> {
    let clock = TokioClock::starting_at(args.start);
    let server = apiserver::ApiServer::with_config(apiserver::Config { clock: Arc::new(clock), ..apiserver::Config::default() });
    let registry = operator_runtime::registry::Registry::default();
    for p in &plugins {
        registry.insert(p.name(), p.clone());
        embedded_cluster::register_admission(&server, &registry, p);
    }
    // The simulated cluster's controllers wake on every relevant commit; their
    // resync only catches wake-ups lost to a busy machine, which an in-process
    // run has none of. Every 10 virtual minutes instead of 30 s saves most of
    // the garbage collector's full scans over a long run.
    // A fixed pass spacing: one scaled by wall-clock pass time would make the
    // timeline depend on the machine.
    let cluster_config = simulated_cluster::ClusterConfig {
        resync_interval: Duration::from_secs(600),
        pass_cost_factor: 0,
        ..simulated_cluster::ClusterConfig::default()
    };
    let cluster = simulated_cluster::start(&server, cluster_config);

    let mut tracked = std::collections::HashSet::new();
    for p in &plugins {
        let m = p.manifest();
        // Related kinds too: their changes are what wakes a 0.2 plugin.
        for gvk in std::iter::once(&m.parent).chain(&m.children).chain(m.related.iter().map(|r| &r.kind)) {
            tracked.insert((gvk.group.clone(), gvk.kind.clone()));
        }
    }
    let recording = Recording::new(clock, tracked);
    let (stop_feed, feed_stopped) = tokio::sync::oneshot::channel();
    let feed = tokio::spawn(StoreFeed::new(server.core().clone(), recording.clone()).run(feed_stopped));
    let client = kube::Client::new(RecordingService::new(&server, recording.clone()), "default");
    let mut options = Options { resync: args.resync, ..Options::default() };
    if let Some(r) = recorder {
        options.controller.tap = operator_runtime::record::Tap::default().observed_by(operator_runtime::record::tap::observer(r));
    }
    let running = manager::Builder::new(client)
        .plugins(plugins)
        .options(options)
        .clock(Arc::new(clock))
        .registry(registry)
        .start()
        .await
        .map_err(|e| Failure { code: e.exit_code(), message: operator_runtime::error_chain(&e) })?;
    running.wait_synced().await;

    recording.start();
    let end = tokio::time::Instant::now() + args.span;
    let user = server.kube_client();
    for (path, obj) in &objects {
        let created = create(&user, obj).await.map_err(|e| {
            let name = obj.pointer("/metadata/name").and_then(Value::as_str).unwrap_or_default();
            let kind = obj.get("kind").and_then(Value::as_str).unwrap_or_default();
            Failure::bad_input(format!("{}: cannot create {kind} {name}: {}", path.display(), operator_runtime::error_chain(&e)))
        })?;
        recording.applied(obj, &created);
    }
    // Run one millisecond past the end: everything due at the end instant has
    // happened once tokio moves the clock on (it only does when every task is
    // idle); entries after the end are dropped.
    tokio::time::sleep_until(end + Duration::from_millis(1)).await;

    let _ = stop_feed.send(());
    let _ = feed.await;
    recording.stop();
    running.shutdown(Duration::from_secs(30)).await;
    cluster.stop().await;
    Ok(recording.take().entries_until(args.start + args.span))
}

/// Creates one applied object (namespace `default` unless it names one).
async fn create(client: &kube::Client, obj: &Value) -> Result<Value, kube::Error> {
    let api_version = obj.get("apiVersion").and_then(Value::as_str).unwrap_or_default();
    let kind = obj.get("kind").and_then(Value::as_str).unwrap_or_default();
    let (group, version) = api_version.rsplit_once('/').unwrap_or(("", api_version));
    let (resource, caps) = kube::discovery::pinned_kind(client, &kube::api::GroupVersionKind::gvk(group, version, kind)).await?;
    let api: Api<DynamicObject> = if caps.scope == kube::discovery::Scope::Namespaced {
        let ns = obj.pointer("/metadata/namespace").and_then(Value::as_str).unwrap_or("default");
        Api::namespaced_with(client.clone(), ns, &resource)
    } else {
        Api::all_with(client.clone(), &resource)
    };
    let object: DynamicObject = serde_json::from_value(obj.clone()).map_err(kube::Error::SerdeError)?;
    let created = api.create(&PostParams::default(), &object).await?;
    serde_json::to_value(created).map_err(kube::Error::SerdeError)
}
