//! `host run` (the default command: `host --plugin X` is `host run --plugin X`):
//! plugins as controllers against the kubeconfig's cluster, or with
//! `--embedded` (or when no cluster is configured at all) against an
//! in-process API server served on loopback. Ports are bound before anything
//! is announced. SIGINT/SIGTERM drain in-flight reconciles and exit 0.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use super::leader_args::LeaderElectionArgs;
use super::sharded;
use super::webhook_args::{CertSource, WebhookArgs, WebhookPlan};
use super::{Failure, SandboxArgs, parse_duration};
use operator_runtime::clock::{SharedClock, SystemClock};
use operator_runtime::controller::{self, queue::Backoff};
use operator_runtime::events::Recorder;
use operator_runtime::hotswap::configmap::Selection;
use operator_runtime::hotswap::shadow::{ShadowConfig, Shadows};
use operator_runtime::hotswap::trust::{NotAdmitted, Policy};
use operator_runtime::hotswap::{self, Reloader, rollback};
use operator_runtime::manager::{self, Options};
use operator_runtime::metrics::Metrics;
use operator_runtime::plugin_resource;
use operator_runtime::registry::Registry;
use operator_runtime::sandbox::{LoadedPlugin, Sandbox, Tiering};

#[derive(Debug, clap::Args)]
pub struct Args {
    /// A plugin component (.wasm); repeat for several.
    /// A registry plugin is `oci://REGISTRY/REPO:TAG` or `...@sha256:DIGEST`.
    #[arg(long = "plugin", required_unless_present_any = ["plugin_configmaps", "plugin_configmap_selector", "plugin_resources"])]
    plugins: Vec<PathBuf>,
    /// Reload a `--plugin` file when it changes (hot swap).
    #[arg(long, requires = "plugins")]
    watch: bool,
    /// How often `--watch` looks at the files.
    #[arg(long, default_value = "1s", value_parser = parse_duration, requires = "watch")]
    watch_interval: Duration,
    /// Load plugins from a ConfigMap, NAMESPACE/NAME, one per binaryData key,
    /// and hot-swap them when it changes; repeat for several.
    #[arg(long = "plugin-configmap", value_name = "NAMESPACE/NAME")]
    plugin_configmaps: Vec<Selection>,
    /// Load plugins from every ConfigMap matching this label selector in
    /// `--plugin-configmap-namespace`, e.g. `operator-host.dev/plugin=true`.
    #[arg(long, requires = "plugin_configmap_namespace")]
    plugin_configmap_selector: Option<String>,
    /// Namespace for `--plugin-configmap-selector`.
    #[arg(long)]
    plugin_configmap_namespace: Option<String>,
    /// Run the plugins that `Plugin` objects (plugins.operator-host.dev)
    /// declare, and write their status: installs the Plugin CRD at start.
    /// The plugins given by --plugin and ConfigMap keys are published as
    /// Plugin objects too (label operator-host.dev/published-by=host:
    /// output only, never read back, deleted when no longer given).
    /// Off by default: whoever may create a Plugin then runs code with this
    /// host's permissions, so the door is opened on purpose.
    #[arg(long)]
    plugin_resources: bool,
    /// Run only plugins signed with this Ed25519 public key (PEM, as
    /// `openssl pkey -pubout` writes); repeatable. The signature sits beside
    /// the plugin: FILE.sig, or key `<key>.sig` in its ConfigMap (`host sign`
    /// writes one). Refused bytes never replace the running version.
    #[arg(long = "plugin-trust-key", value_name = "FILE")]
    plugin_trust_keys: Vec<PathBuf>,
    /// Run only these builds: `sha256:<hex>` of the component (as `host sign`
    /// and `host inspect` print it); repeatable.
    #[arg(long = "plugin-digest", value_name = "sha256:HEX")]
    plugin_digests: Vec<String>,
    /// How long a swapped-in plugin version is watched for automatic
    /// rollback; `0s` turns rollback off.
    #[arg(long, default_value = "5m", value_parser = parse_duration)]
    rollback_window: Duration,
    /// Roll a new version back when more than this fraction (0..1) of its
    /// reconciles fail (traps, plugin errors, refused actions) in the window,
    /// while the previous version's did not.
    #[arg(long, default_value_t = 0.5, value_parser = parse_fraction)]
    rollback_threshold: f64,
    /// Reconciles of a new version needed before it can be rolled back.
    #[arg(long, default_value_t = 10, value_parser = clap::value_parser!(u64).range(1..))]
    rollback_min_calls: u64,
    /// Run against an embedded API server instead of the kubeconfig's cluster.
    #[arg(long)]
    embedded: bool,
    /// Port of the embedded API server on 127.0.0.1 (0 = a free port).
    #[arg(long, default_value_t = 0, requires = "embedded")]
    embedded_port: u16,
    /// Where to write the embedded server's kubeconfig (default: a file under the temp dir).
    #[arg(long, requires = "embedded")]
    kubeconfig_out: Option<PathBuf>,
    /// Watch only this namespace; repeat for several (default: all).
    #[arg(long = "namespace", short = 'n')]
    namespaces: Vec<String>,
    /// Label selector for parent objects, e.g. `team=a`.
    #[arg(long, short = 'l')]
    selector: Option<String>,
    /// Reconcile every parent at least this often.
    #[arg(long, default_value = "10m", value_parser = parse_duration)]
    resync: Duration,
    /// Parents reconciled at once, per plugin.
    #[arg(long, default_value_t = 4, value_parser = clap::value_parser!(u16).range(1..=1024))]
    concurrency: u16,
    /// The most related objects (contract 0.2) one reconcile is given; a
    /// parent to which more attach fails with TooManyRelated (never a
    /// truncated list).
    #[arg(long, default_value_t = controller::DEFAULT_MAX_RELATED as u32, value_parser = clap::value_parser!(u32).range(1..))]
    max_related: u32,
    /// Cap of the per-object error backoff (starts at 5ms, doubles).
    #[arg(long, default_value = "6h", value_parser = parse_duration)]
    max_backoff: Duration,
    /// Address for /metrics, /healthz and /readyz; `0` disables.
    #[arg(long, default_value = "127.0.0.1:8080")]
    metrics_addr: String,
    /// How long shutdown waits for in-flight reconciles.
    #[arg(long, default_value = "30s", value_parser = parse_duration)]
    shutdown_grace: Duration,
    /// Run cluster and host time this many times as fast as the wall clock
    /// (demos: `60` turns a minute into a second). Needs `--embedded`.
    #[arg(long, default_value_t = 1.0, requires = "embedded", conflicts_with = "leader_elect", value_parser = parse_clock_speed)]
    clock_speed: f64,
    #[command(flatten)]
    webhook: WebhookArgs,
    #[command(flatten)]
    leader_election: LeaderElectionArgs,
    #[command(flatten)]
    record: RecordArgs,
    #[command(flatten)]
    shadow: ShadowArgs,
    #[command(flatten)]
    oci: super::oci_args::OciArgs,
    #[cfg(feature = "embedded")]
    #[command(flatten)]
    embedded_args: Box<super::embedded_args::EmbeddedArgs>,
}

/// `--record DIR`: the on-disk log of reconcile calls `host replay` reads.
#[derive(Debug, clap::Args)]
pub struct RecordArgs {
    /// Record every reconcile call (inputs, plugin name and digest, answer)
    /// to this directory, for `host replay`. Secret values are redacted.
    #[arg(long, value_name = "DIR")]
    record: Option<PathBuf>,
    /// Bound of the record directory in MiB; the oldest quarter is dropped when full.
    #[arg(long, default_value_t = 64, requires = "record", value_parser = clap::value_parser!(u64).range(1..))]
    record_max_mib: u64,
    /// Record Secret `data`/`stringData` values as they are (default: redacted).
    #[arg(long, requires = "record")]
    record_secrets: bool,
}

impl RecordArgs {
    /// Opens the record directory (a clear error if it is not writable).
    pub fn open(&self) -> Result<Option<Arc<operator_runtime::record::Recorder>>, Failure> {
        let Some(dir) = &self.record else { return Ok(None) };
        let config = operator_runtime::record::Config {
            max_bytes: self.record_max_mib << 20,
            keep_secrets: self.record_secrets,
            ..operator_runtime::record::Config::new(dir)
        };
        let recorder = operator_runtime::record::Recorder::open(config)
            .map_err(|e| Failure::bad_input(format!("--record: {}", operator_runtime::error_chain(&e))))?;
        let secrets = if self.record_secrets { "Secret values kept (--record-secrets)" } else { "Secret values redacted" };
        // On stderr: `host simulate` prints its timeline on stdout.
        eprintln!("recording reconcile calls to {} ({secrets})", dir.display());
        Ok(Some(Arc::new(recorder)))
    }
}

/// Shadow runs of staged candidates (`<key>.candidate`, `FILE.candidate`).
#[derive(Debug, clap::Args)]
struct ShadowArgs {
    /// Promote a staged candidate after this many agreeing reconciles with
    /// no difference and no error; 0 = only by hand (the promote annotation).
    #[arg(long, default_value_t = 100)]
    shadow_promote_after: u64,
    /// Candidate calls at once, per candidate.
    #[arg(long, default_value_t = 2, value_parser = clap::value_parser!(u16).range(1..=64))]
    shadow_concurrency: u16,
}

/// Why `--embedded` is refused by a host built without the `embedded` feature.
#[cfg(not(feature = "embedded"))]
const NO_EMBEDDED: &str = "--embedded and --clock-speed need the embedded cluster, which this host was built without (cargo feature `embedded`)";

fn parse_fraction(text: &str) -> Result<f64, String> {
    match text.parse::<f64>() {
        Ok(f) if (0.0..1.0).contains(&f) => Ok(f),
        _ => Err(format!("{text:?} is not a fraction from 0 up to (not including) 1, e.g. 0.5")),
    }
}

fn parse_clock_speed(text: &str) -> Result<f64, String> {
    match text.parse::<f64>() {
        Ok(speed) if speed.is_finite() && speed > 0.0 => Ok(speed),
        _ => Err(format!("{text:?} is not a positive number (e.g. 1, 60, 0.5)")),
    }
}

pub fn run(sandbox: &SandboxArgs, args: &Args) -> Result<(), Failure> {
    // The embedded API server (`--embedded`) allocates from many threads at
    // once; it keeps malloc's default.
    if !args.embedded {
        operator_runtime::heap::limit_arenas();
    }
    #[cfg(not(feature = "embedded"))]
    if args.embedded || args.clock_speed != 1.0 {
        return Err(Failure::bad_input(NO_EMBEDDED));
    }
    #[cfg(feature = "embedded")]
    if !args.embedded && !args.embedded_args.faults.is_empty() {
        return Err(Failure::bad_input("--fault (or OPERATOR_HOST_FAULTS) needs --embedded: faults are injected by the embedded API server"));
    }
    let metrics_addr: Option<SocketAddr> = match args.metrics_addr.as_str() {
        "0" | "" => None,
        a => Some(a.parse().map_err(|e| Failure::bad_input(format!("--metrics-addr {a}: {e}")))?),
    };
    let election = args.leader_election.config().map_err(|e| Failure::bad_input(e.to_string()))?;
    let sharding = args.leader_election.sharding(election.as_ref()).map_err(|e| Failure::bad_input(e.to_string()))?;
    let webhook = args.webhook.plan(election.is_some())?;
    let recorder = args.record.open()?;
    // A long-running host: a plugin that must be compiled (a new version
    // swapped in, an uncached start) runs from Winch until Cranelift is done.
    let sandbox = sandbox.sandbox_tiered(Tiering::BaselineFirst).map_err(|e| Failure::bad_input(format!("{e:#}")))?;
    let trust = Policy::load(&args.plugin_trust_keys, &args.plugin_digests)
        .and_then(|p| p.with_cosign_keys(&args.oci.registry.cosign_keys))
        .map_err(|e| Failure::bad_input(operator_runtime::error_chain(&e)))?;
    let (files, registry_plugins) = super::oci_args::split(&args.plugins)?;
    // Stamped before the files are read: a change made from here on is reloaded.
    let file_watch = (args.watch && !files.is_empty()).then(|| {
        // Each file and the candidate that may be staged beside it.
        hotswap::files::FileWatch::new(files.iter().flat_map(|p| [p.clone(), hotswap::shadow::candidate_path(p)]).collect())
    });
    let mut plugins: Vec<(String, LoadedPlugin)> = Vec::new();
    for path in &files {
        let admitted = trust.admit_file(path).map_err(|e| match e {
            NotAdmitted::Untrusted(_) => Failure::bad_input(format!("plugin {} refused: {e}", path.display())),
            NotAdmitted::Unreadable(why) => Failure::bad_input(why),
        })?;
        let p = sandbox.load(&path.display().to_string(), &admitted.component).map_err(|e| Failure::bad_input(operator_runtime::error_chain(&e)))?;
        tracing::info!(plugin = p.name(), parent = %p.manifest().parent.kind, "loaded");
        plugins.push((hotswap::Origin::File(path.clone()).id(), p));
    }
    let started = args.oci.start(&registry_plugins, &sandbox, &trust, args.plugin_resources)?;
    plugins.extend(started.plugins);
    let list: Vec<LoadedPlugin> = plugins.iter().map(|(_, p)| p.clone()).collect();
    manager::check_parents(&list).map_err(|e| Failure { code: e.exit_code(), message: e.to_string() })?;
    let runtime = if args.clock_speed == 1.0 { tokio::runtime::Builder::new_multi_thread().enable_all().build() } else { paused_runtime() };
    let runtime = runtime.map_err(|e| Failure::plugin(format!("tokio: {e}")))?;
    let prepared = Prepared {
        sandbox,
        trust,
        plugins,
        file_watch,
        oci_poll: started.poll,
        oci_puller: started.puller,
        metrics_addr,
        webhook,
        election,
        sharding,
        recorder: recorder.clone(),
    };
    let result = runtime.block_on(run_async(args, prepared));
    if let Some(r) = recorder {
        r.flush();
    }
    result
}

/// Virtual time needs tokio's paused clock, which only a current-thread runtime has.
#[cfg(feature = "embedded")]
fn paused_runtime() -> std::io::Result<tokio::runtime::Runtime> {
    tokio::runtime::Builder::new_current_thread().enable_all().start_paused(true).build()
}

#[cfg(not(feature = "embedded"))]
fn paused_runtime() -> std::io::Result<tokio::runtime::Runtime> {
    unreachable!("run() refuses --clock-speed: {NO_EMBEDDED}")
}

/// The clock of the whole process: the system clock, or at `--clock-speed N`
/// virtual time that runs N× as fast from now (see [`operator_runtime::clock`]).
fn clock(args: &Args) -> (SharedClock, Option<tokio::task::JoinHandle<()>>) {
    if args.clock_speed == 1.0 {
        return (Arc::new(SystemClock), None);
    }
    #[cfg(not(feature = "embedded"))]
    unreachable!("run() refuses --clock-speed: {NO_EMBEDDED}");
    #[cfg(feature = "embedded")]
    {
        let clock = operator_runtime::clock::TokioClock::starting_at(chrono::Utc::now());
        let pacer = operator_runtime::clock::drive_paused_clock(args.clock_speed);
        println!("clock speed {}x: cluster and host time run {} times as fast as the wall clock", args.clock_speed, args.clock_speed);
        (Arc::new(clock), Some(pacer))
    }
}

/// What `run` prepares before the async runtime starts: every input checked
/// and every plugin file loaded, so a bad one fails before anything binds.
struct Prepared {
    sandbox: Sandbox,
    trust: Policy,
    /// The `--plugin` files, by source id.
    plugins: Vec<(String, LoadedPlugin)>,
    /// `--watch`: stamped before the files were read.
    file_watch: Option<hotswap::files::FileWatch>,
    /// `--oci-poll-interval`: the registry plugins' tags to poll.
    oci_poll: Option<super::oci_args::Poll>,
    /// The registry client, for `--plugin oci://` and `Plugin` objects.
    oci_puller: Option<Arc<operator_runtime::hotswap::oci::Puller>>,
    metrics_addr: Option<SocketAddr>,
    /// `--webhook-*`: where and how admission is served and configured.
    webhook: Option<WebhookPlan>,
    election: Option<operator_runtime::leader::Config>,
    /// `--sharded`: this process's shard.
    sharding: Option<operator_runtime::shard::Sharding>,
    recorder: Option<Arc<operator_runtime::record::Recorder>>,
}

/// The host's life: endpoints, cluster, manager, hot swap, then drain on a
/// signal (or exit on a lost election).
async fn run_async(args: &Args, prepared: Prepared) -> Result<(), Failure> {
    let Prepared { sandbox, trust, plugins, file_watch, oci_poll, oci_puller, metrics_addr, webhook, election, sharding, recorder } = prepared;
    let identity = election.as_ref().map(|e| e.identity.clone()).unwrap_or_default();
    let registry = registry_of(&plugins);
    let (clock, pacer) = clock(args);
    let metrics = Arc::new(Metrics::new());
    let (stop_tx, stop_rx) = tokio::sync::watch::channel(false);
    // Every port is bound before anything is announced: a script that waits
    // for `export KUBECONFIG=` must never see it from a host about to fail.
    let parents = operator_runtime::webhook::scale::Parents::default();
    let webhooks = serve_endpoints(args, metrics_addr, webhook.as_ref(), &metrics, (&registry, &parents), &stop_rx).await?;
    let cluster = Cluster::connect(args, &clock, &registry, &plugins).await?;
    let client = cluster.client.clone();
    // `/scale` reviews read the parent they scale through it.
    let _ = parents.set(client.clone());
    // A certificate kept in a Secret needs the API: that server starts once a client exists.
    let webhook_ca = match webhooks {
        Webhooks::Off => None,
        Webhooks::Serving(ca) => Some(ca),
        Webhooks::WaitingForSecret(listener) => {
            let Some(WebhookPlan { cert: CertSource::Secret(namespace, name), hosts, .. }) = &webhook else {
                unreachable!("a listener waits for a Secret only when the plan names one")
            };
            let pair = tokio::select! {
                pair = shared_webhook_cert(&client, namespace, name, hosts) => pair,
                _ = shutdown_signal() => return Ok(()),
            };
            let certificate = operator_runtime::webhook::Certificate::Pair { cert: pair.cert, ca_pem: pair.ca_pem };
            Some(serve_webhooks(listener, certificate, (&registry, &parents), &metrics, &stop_rx)?)
        }
    };
    let shadows = Shadows::new(shadow_config(args), metrics.clone(), client.clone(), clock.clone());
    let mut options = manager_options(args, tap(&shadows, recorder));
    let mut election = start_election(&client, election, &metrics, &mut options)?;
    // Sharded, every replica reconciles its share; the election picks the sharder.
    let mut member = match &sharding {
        Some(s) => {
            options.leadership = None;
            options.controller.sharding = Some(s.clone());
            Some(sharded::Member::join(&client, s).await?)
        }
        None => None,
    };
    let manager = manager::Builder::new(client.clone())
        .plugins_by_source(plugins)
        .options(options)
        .clock(clock.clone())
        .metrics(metrics.clone())
        .registry(registry.clone());
    let running = tokio::select! {
        r = manager.start() => r.map_err(|e| Failure { code: e.exit_code(), message: operator_runtime::error_chain(&e) })?,
        _ = shutdown_signal() => return Ok(()),
    };
    metrics.set_status_source(Box::new(operator_runtime::status::Source { registry: registry.clone(), shadows: Some(shadows.clone()) }));
    let resources = plugin_resources(args, &client, &running, &shadows, election.as_ref(), &clock, (oci_puller, trust.wants_cosign())).await?;
    let reloader = Reloader {
        sandbox,
        manager: running.clone(),
        metrics,
        recorder: Recorder::new(client.clone(), "hotswap", clock),
        on_applied: cluster.on_applied(&registry),
        shadows: Some(shadows),
        trust,
        rollback: rollback::Watchdog::new(rollback::Config {
            window: args.rollback_window,
            threshold: args.rollback_threshold,
            min_calls: args.rollback_min_calls,
        }),
    };
    let mut sources = watch_plugin_sources(args, &client, (file_watch, oci_poll), reloader, resources);
    if let (Some(config), Some(ca_pem)) = (webhook.and_then(|w| w.configure), webhook_ca) {
        let leading = election.as_ref().map(|e| e.leading());
        sources.push(tokio::spawn(operator_runtime::webhook::configuration::run(client.clone(), config, registry.clone(), ca_pem, leading)));
    }
    if let (Some(member), Some(s), Some(e)) = (member.as_mut(), &sharding, &election) {
        member.start_sharder(sharded::sharder(&client, s, &identity, &running, &args.namespaces, running.metrics()), e.leading());
    }
    wait_for_shutdown(election.as_mut(), member.as_mut()).await;
    tracing::info!("shutting down: draining in-flight reconciles");
    for s in sources {
        s.abort();
    }
    // Sharded, the sharder stops and the leader Lease goes before the drain:
    // the drain needs neither, and another replica's sharder then starts at
    // once, ready to move this shard's parents when its Lease is released.
    if let Some(m) = member.as_mut() {
        m.stop_sharder().await;
        if let Some(e) = election.take() {
            e.release().await;
        }
    }
    // The grace is wall time; under --clock-speed tokio's delays are virtual.
    running.shutdown(args.shutdown_grace.mul_f64(args.clock_speed)).await;
    if let Some(m) = member {
        m.leave().await;
    }
    if let Some(e) = election {
        e.release().await;
    }
    if let Some(p) = pacer {
        p.abort();
    }
    let _ = stop_tx.send(true);
    cluster.stop().await;
    Ok(())
}

/// The registry admission reads the running plugins from on every request,
/// holding the start-up plugins.
fn registry_of(plugins: &[(String, LoadedPlugin)]) -> Registry {
    let registry = Registry::default();
    for (id, p) in plugins {
        registry.insert(id, p.clone());
    }
    registry
}

/// The admission webhooks' server, as [`serve_endpoints`] leaves it.
enum Webhooks {
    Off,
    /// Serving; the CA bundle it serves, for the webhook configurations.
    Serving(tokio::sync::watch::Receiver<Arc<str>>),
    /// Bound, to serve once the certificate is read from its Secret.
    WaitingForSecret(tokio::net::TcpListener),
}

/// Binds `/metrics` (unless off) and the admission webhooks (if asked) and
/// prints where they are; both stop when `stop` turns true. Every port is
/// bound here, before anything touches a cluster.
async fn serve_endpoints(
    args: &Args,
    metrics_addr: Option<SocketAddr>,
    webhook: Option<&WebhookPlan>,
    metrics: &Arc<Metrics>,
    plugins: (&Registry, &operator_runtime::webhook::scale::Parents),
    stop: &tokio::sync::watch::Receiver<bool>,
) -> Result<Webhooks, Failure> {
    if let Some(addr) = metrics_addr {
        let mut rx = stop.clone();
        let (bound, _task) = operator_runtime::metrics::serve(addr, metrics.clone(), async move {
            let _ = rx.wait_for(|s| *s).await;
        })
        .await
        .map_err(|e| Failure::bad_input(format!("--metrics-addr {addr}: {e}")))?;
        println!("metrics at http://{bound}/metrics");
    }
    let Some(plan) = webhook else { return Ok(Webhooks::Off) };
    let listener = tokio::net::TcpListener::bind(plan.addr).await.map_err(|e| Failure::bad_input(format!("--webhook-addr {}: {e}", plan.addr)))?;
    match &plan.cert {
        CertSource::Dir => {
            let certificate = operator_runtime::webhook::Certificate::Dir {
                dir: args.webhook.webhook_cert_dir.clone(),
                hosts: plan.hosts.clone(),
                poll: operator_runtime::webhook::CERT_POLL_INTERVAL,
            };
            Ok(Webhooks::Serving(serve_webhooks(listener, certificate, plugins, metrics, stop)?))
        }
        CertSource::Secret(..) => Ok(Webhooks::WaitingForSecret(listener)),
    }
}

/// Serves the webhooks on `listener` until the host stops; the CA bundle
/// served, for the webhook configurations.
fn serve_webhooks(
    listener: tokio::net::TcpListener,
    certificate: operator_runtime::webhook::Certificate,
    (registry, parents): (&Registry, &operator_runtime::webhook::scale::Parents),
    metrics: &Arc<Metrics>,
    stop: &tokio::sync::watch::Receiver<bool>,
) -> Result<tokio::sync::watch::Receiver<Arc<str>>, Failure> {
    let addr = listener.local_addr().map_err(|e| Failure::bad_input(format!("--webhook-addr: {e}")))?;
    let mut stop = stop.clone();
    let serving = operator_runtime::webhook::serve_on(listener, certificate, registry.clone(), metrics.clone(), parents.clone(), async move {
        let _ = stop.wait_for(|s| *s).await;
    })
    .map_err(|e| Failure::bad_input(format!("--webhook-addr {addr}: {}", operator_runtime::error_chain(&e))))?;
    println!("admission webhooks at https://{}", serving.addr);
    Ok(serving.ca_pem)
}

/// The pair in the `--webhook-cert-secret` Secret, created if missing;
/// API errors are logged and retried (the host cannot serve without it).
async fn shared_webhook_cert(
    client: &kube::Client,
    namespace: &str,
    name: &str,
    hosts: &[String],
) -> operator_runtime::webhook::cert_secret::SharedPair {
    let mut delay = Duration::from_secs(1);
    loop {
        match operator_runtime::webhook::cert_secret::create_or_get(client, namespace, name, hosts).await {
            Ok(pair) => {
                let how = if pair.created { "created" } else { "read" };
                tracing::info!(secret = %format!("{namespace}/{name}"), "webhook certificate {how} from the shared Secret");
                return pair;
            }
            Err(e) => {
                tracing::warn!(secret = %format!("{namespace}/{name}"), error = %operator_runtime::error_chain(&e), retry_in = ?delay, "cannot get the shared webhook certificate; retrying");
                tokio::time::sleep(delay).await;
                delay = (delay * 2).min(Duration::from_secs(60));
            }
        }
    }
}

/// The cluster the host talks to: the kubeconfig's, or the embedded one it
/// started (with `--embedded`, or when no cluster is configured).
struct Cluster {
    client: kube::Client,
    #[cfg(feature = "embedded")]
    embedded: Option<embedded_cluster::Embedded>,
}

impl Cluster {
    async fn connect(args: &Args, clock: &SharedClock, registry: &Registry, plugins: &[(String, LoadedPlugin)]) -> Result<Cluster, Failure> {
        let config = if args.embedded { None } else { super::kubeconfig::config().await? };
        if let Some(config) = config {
            let client = operator_runtime::api_client::client(config)
                .map_err(|e| Failure::bad_input(format!("cannot build a client from the kubeconfig: {}", operator_runtime::error_chain(&e))))?;
            #[cfg(feature = "embedded")]
            return Ok(Cluster { client, embedded: None });
            #[cfg(not(feature = "embedded"))]
            return Ok(Cluster { client });
        }
        #[cfg(not(feature = "embedded"))]
        {
            let _ = (clock, registry, plugins);
            Err(Failure::bad_input(format!(
                "{}, and this host was built without the embedded cluster (cargo feature `embedded`): set KUBECONFIG",
                super::kubeconfig::NONE_CONFIGURED
            )))
        }
        #[cfg(feature = "embedded")]
        {
            if !args.embedded {
                println!("{}: starting the embedded cluster (as --embedded)", super::kubeconfig::NONE_CONFIGURED);
            }
            let e = start_embedded(args, clock, registry, plugins).await?;
            Ok(Cluster { client: e.server.kube_client(), embedded: Some(e) })
        }
    }

    /// On the embedded cluster, a swapped-in plugin's admission is
    /// registered in-process (a real cluster calls the webhooks instead).
    fn on_applied(&self, registry: &Registry) -> Option<hotswap::OnApplied> {
        #[cfg(feature = "embedded")]
        return self.embedded.as_ref().map(|e| {
            let (server, registry) = (e.server.clone(), registry.clone());
            Arc::new(move |p: &LoadedPlugin| embedded_cluster::register_admission(&server, &registry, p)) as hotswap::OnApplied
        });
        #[cfg(not(feature = "embedded"))]
        {
            let _ = registry;
            None
        }
    }

    /// Stops serving the embedded cluster, if the host started one.
    async fn stop(self) {
        #[cfg(feature = "embedded")]
        if let Some(e) = self.embedded {
            e.handle.shutdown().await;
        }
    }
}

fn shadow_config(args: &Args) -> ShadowConfig {
    ShadowConfig {
        promote_after: args.shadow.shadow_promote_after,
        concurrency: usize::from(args.shadow.shadow_concurrency),
        ..ShadowConfig::default()
    }
}

/// Every reconcile is offered to the shadow candidates and, with
/// `--record`, written to the record directory.
fn tap(shadows: &Shadows, recorder: Option<Arc<operator_runtime::record::Recorder>>) -> operator_runtime::record::Tap {
    let tap = operator_runtime::record::Tap::default().observed_by(shadows.observer());
    match recorder {
        Some(r) => tap.observed_by(operator_runtime::record::tap::observer(r)),
        None => tap,
    }
}

/// The manager's options from the flags.
fn manager_options(args: &Args, tap: operator_runtime::record::Tap) -> Options {
    Options {
        namespaces: args.namespaces.clone(),
        selector: args.selector.clone(),
        resync: args.resync,
        controller: controller::Config {
            concurrency: usize::from(args.concurrency),
            max_related: args.max_related as usize,
            backoff: Backoff { max: args.max_backoff, ..Backoff::default() },
            tap,
            ..controller::Config::default()
        },
        ..Options::default()
    }
}

/// With `--leader-elect`, starts campaigning; the manager's workers wait
/// until this replica leads.
fn start_election(
    client: &kube::Client,
    config: Option<operator_runtime::leader::Config>,
    metrics: &Arc<Metrics>,
    options: &mut Options,
) -> Result<Option<operator_runtime::leader::Election>, Failure> {
    let Some(config) = config else { return Ok(None) };
    let e = operator_runtime::leader::Election::start(client.clone(), config, metrics.clone()).map_err(|e| Failure::bad_input(e.to_string()))?;
    options.leadership = Some(e.leading());
    Ok(Some(e))
}

/// Watches the plugin sources (`--plugin-configmap`, the selector,
/// `--watch`, `--oci-poll-interval`) and hands what they publish to `reloader`; no tasks without
/// a source.
fn watch_plugin_sources(
    args: &Args,
    client: &kube::Client,
    (file_watch, oci_poll): (Option<hotswap::files::FileWatch>, Option<super::oci_args::Poll>),
    reloader: Reloader,
    resources: Option<plugin_resource::Config>,
) -> Vec<tokio::task::JoinHandle<()>> {
    let mut selections = args.plugin_configmaps.clone();
    if let (Some(selector), Some(namespace)) = (&args.plugin_configmap_selector, &args.plugin_configmap_namespace) {
        selections.push(Selection::Labelled { namespace: namespace.clone(), selector: selector.clone() });
    }
    let mut sources = Vec::new();
    if file_watch.is_none() && oci_poll.is_none() && selections.is_empty() && resources.is_none() {
        return sources;
    }
    let (tx, rx) = tokio::sync::mpsc::channel(16);
    for selection in selections {
        println!("plugins from {selection}");
        sources.push(tokio::spawn(hotswap::configmap::watch(client.clone(), selection, tx.clone())));
    }
    if let Some(watch) = file_watch {
        sources.push(tokio::spawn(watch.run(args.watch_interval, tx.clone())));
    }
    if let Some(config) = resources {
        println!("plugins from Plugin objects ({})", plugin_resource::crd::NAME);
        sources.push(tokio::spawn(plugin_resource::run(config, tx.clone())));
    }
    if let Some(poll) = oci_poll {
        sources.push(tokio::spawn(poll.run(reloader.metrics.clone(), tx.clone())));
    }
    sources.push(tokio::spawn(reloader.run(rx)));
    sources
}

/// With `--plugin-resources`: the Plugin CRD installed, and what watching
/// Plugin objects needs (only the leader writes their status).
async fn plugin_resources(
    args: &Args,
    client: &kube::Client,
    running: &manager::Running,
    shadows: &Shadows,
    election: Option<&operator_runtime::leader::Election>,
    clock: &SharedClock,
    (oci_puller, host_cosign): (Option<Arc<operator_runtime::hotswap::oci::Puller>>, bool),
) -> Result<Option<plugin_resource::Config>, Failure> {
    if !args.plugin_resources {
        return Ok(None);
    }
    plugin_resource::install(client).await.map_err(|e| Failure { code: e.exit_code(), message: operator_runtime::error_chain(&e) })?;
    // Every plugin given by flag (and by ConfigMap key) is published as a Plugin object too.
    let (files, refs) = super::oci_args::split(&args.plugins)?;
    let mut published = plugin_resource::mirror::Flags::default();
    for f in files {
        published.file(hotswap::Origin::File(f.clone()).id(), &f.display().to_string());
    }
    for r in refs {
        published.oci(hotswap::Origin::Oci(r.clone()).id(), &r.to_string());
    }
    Ok(Some(plugin_resource::Config {
        client: client.clone(),
        metrics: running.metrics().clone(),
        status: operator_runtime::status::Source { registry: running.registry().clone(), shadows: Some(shadows.clone()) },
        recorder: Recorder::new(client.clone(), "plugin-resource", clock.clone()),
        oci: oci_puller.map(|p| Arc::new(plugin_resource::registry::Registry::new(p, host_cosign)) as Arc<dyn plugin_resource::OciSource>),
        leading: election.map(|e| e.leading()),
        promote_after: args.shadow.shadow_promote_after,
        file_interval: args.watch_interval,
        status_interval: Duration::from_secs(2),
        published,
    }))
}

/// Returns on SIGINT/SIGTERM. A replica that loses its election exits 1 at
/// once instead (as controller-runtime: exiting is the surest way that no
/// in-flight reconcile writes after another replica took over).
///
/// Sharded, a lost election only stops the sharder (another replica's
/// takes over) and a lost shard Lease exits 1: the restart joins as a new
/// shard, so nothing this process still has in flight can act on a key the
/// sharder moved.
async fn wait_for_shutdown(election: Option<&mut operator_runtime::leader::Election>, member: Option<&mut sharded::Member>) {
    let sharded = member.is_some();
    let election_lost = async {
        match election {
            Some(e) => e.lost().await,
            None => std::future::pending().await,
        }
    };
    let shard_lost = async {
        match member {
            Some(m) => m.lost().await,
            None => std::future::pending().await,
        }
    };
    tokio::select! {
        () = shutdown_signal() => {}
        lost = election_lost, if !sharded => {
            tracing::error!(error = %lost, "leader election lost; exiting");
            std::process::exit(1);
        }
        lost = shard_lost => {
            tracing::error!(error = %lost, "shard lost; exiting (a restart joins as a new shard)");
            std::process::exit(1);
        }
    }
}

/// The embedded cluster, serving, with each plugin's admission registered;
/// prints where it is and the `export KUBECONFIG=` line scripts wait for.
#[cfg(feature = "embedded")]
async fn start_embedded(
    args: &Args,
    clock: &SharedClock,
    registry: &Registry,
    plugins: &[(String, LoadedPlugin)],
) -> Result<embedded_cluster::Embedded, Failure> {
    let path = args.kubeconfig_out.clone().unwrap_or_else(embedded_cluster::default_kubeconfig_path);
    let e = embedded_cluster::start_with_clock(args.embedded_port, &path, &args.embedded_args.options(), clock.clone())
        .await
        .map_err(|e| Failure::bad_input(format!("embedded API server: {e}")))?;
    for (_, p) in plugins {
        embedded_cluster::register_admission(&e.server, registry, p);
    }
    println!("embedded API server at {}", e.handle.url());
    println!("kubeconfig written to {}", path.display());
    println!("export KUBECONFIG={}", path.display());
    Ok(e)
}

pub(super) async fn shutdown_signal() {
    #[cfg(unix)]
    {
        let mut term = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()).expect("SIGTERM handler");
        tokio::select! {
            _ = tokio::signal::ctrl_c() => {}
            _ = term.recv() => {}
        }
    }
    #[cfg(not(unix))]
    let _ = tokio::signal::ctrl_c().await;
}
