//! The embedded cluster as `host run --embedded` runs it: the project's own
//! API server in-process, served over HTTP on loopback with a kubeconfig for
//! kubectl, its simulated cluster parts beside it, and each plugin's
//! `default` and `validate` registered as in-process admission for its
//! parent kind (what a webhook does on a real cluster).

use std::net::SocketAddr;
use std::path::{Path, PathBuf};

use apiserver::{ApiServer, Cause, Config, Denial, FaultSpec, PersistError, ServerHandle};
use futures::FutureExt;
use serde_json::Value;
use simulated_cluster::{ClusterConfig, ClusterHandle};

use operator_runtime::registry::Registry;
use operator_runtime::sandbox::LoadedPlugin;

/// A running embedded cluster.
pub struct Embedded {
    pub server: ApiServer,
    pub handle: ServerHandle,
    pub kubeconfig: PathBuf,
    /// The simulated cluster parts (garbage collector, scheduler + kubelet,
    /// Job runner), so Pods become Ready, Jobs finish and owners' dependents
    /// are collected as on a real cluster. Stopped when dropped.
    pub cluster: ClusterHandle,
    _own_kubeconfig: Option<OwnKubeconfig>,
}

impl std::fmt::Debug for Embedded {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Embedded").field("url", &self.handle.url()).field("kubeconfig", &self.kubeconfig).finish()
    }
}

/// A kubeconfig at the temp-dir default names a server that is gone once
/// the cluster stops, and each process writes its own: removed (with its
/// directory, when nothing else is in it) when the cluster is dropped. One
/// written to `--kubeconfig-out` is the user's, and stays.
struct OwnKubeconfig(PathBuf);

impl Drop for OwnKubeconfig {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.0);
        if let Some(dir) = self.0.parent() {
            let _ = std::fs::remove_dir(dir);
        }
    }
}

/// How the embedded cluster is set up (`host run --embedded` flags).
#[derive(Debug, Clone, Default)]
pub struct Options {
    /// Persist the store here (`--data-dir`); `None`: in memory only.
    pub data_dir: Option<PathBuf>,
    /// Faults the API server injects from the start (`--fault`, `OPERATOR_HOST_FAULTS`).
    pub faults: Vec<FaultSpec>,
    /// Seed of share-based faults (`--fault-seed`).
    pub fault_seed: u64,
    /// The simulated cluster parts (`--sim-*`).
    pub cluster: ClusterConfig,
    /// envtest's API server (`--api-server-only`): the server alone, as envtest runs
    /// kube-apiserver without a controller manager. No simulated controller runs (`cluster`
    /// is ignored) and the server does none of kube-controller-manager's work
    /// ([`apiserver::Config::controllers`] false): no `default` ServiceAccount or
    /// `kube-root-ca.crt` in new namespaces, no ClusterRole aggregation, namespaces stay
    /// `Terminating` when deleted.
    pub api_server_only: bool,
}

/// Why the embedded cluster did not start.
#[derive(Debug, thiserror::Error)]
pub enum StartError {
    /// The data directory cannot be used (damaged file, in use, not writable).
    #[error(transparent)]
    DataDir(#[from] PersistError),
    /// Binding the port or writing the kubeconfig failed.
    #[error("{what}: {source}")]
    Io {
        what: String,
        #[source]
        source: std::io::Error,
    },
}

/// Starts the server on `127.0.0.1:port` (0 = a free port) and writes the
/// kubeconfig to `kubeconfig`.
pub async fn start(port: u16, kubeconfig: &Path, options: &Options) -> Result<Embedded, StartError> {
    start_with_clock(port, kubeconfig, options, std::sync::Arc::new(apiserver::SystemClock)).await
}

/// [`start`] with the server stamping times from `clock` (the host's, for `--clock-speed`).
pub async fn start_with_clock(port: u16, kubeconfig: &Path, options: &Options, clock: apiserver::clock::SharedClock) -> Result<Embedded, StartError> {
    let config = Config { clock, controllers: !options.api_server_only, ..Config::default() };
    let server = match &options.data_dir {
        Some(dir) => ApiServer::with_data_dir(config, dir)?,
        None => ApiServer::with_config(config),
    };
    server.faults().set_seed(options.fault_seed);
    for fault in &options.faults {
        server.faults().inject_spec(fault);
    }
    let addr = SocketAddr::from(([127, 0, 0, 1], port));
    let handle = server.serve_on(addr).await.map_err(|source| StartError::Io { what: format!("serving on {addr}"), source })?;
    handle.write_kubeconfig(kubeconfig).map_err(|source| StartError::Io { what: format!("writing {}", kubeconfig.display()), source })?;
    let cluster_config = if options.api_server_only { ClusterConfig::api_server_only() } else { options.cluster.clone() };
    let cluster = simulated_cluster::start(&server, cluster_config);
    let own = (kubeconfig == default_kubeconfig_path()).then(|| OwnKubeconfig(kubeconfig.to_path_buf()));
    Ok(Embedded { server, handle, kubeconfig: kubeconfig.to_path_buf(), cluster, _own_kubeconfig: own })
}

/// Where the kubeconfig goes when `--kubeconfig-out` is not given.
pub fn default_kubeconfig_path() -> PathBuf {
    std::env::temp_dir().join(format!("operator-host-{}", std::process::id())).join("kubeconfig")
}

/// A field error as a `StatusCause`: the API server prefixes the field
/// itself, so the message is the rest of `field.Error`'s wording.
fn cause(fe: &operator_plugin_sdk::FieldError) -> Cause {
    let text = fe.to_string();
    let message = text.strip_prefix(&format!("{}: ", fe.field)).unwrap_or(&text).to_string();
    Cause::new(fe.kind.cause_type(), message, fe.field.clone())
}

/// The name a real server gives the plugin's webhook (the host's webhook
/// configuration names it `<plural>.<group>`): the parent's plural from the
/// server's resources, else from the plugin's own CRD, else the lowercased kind.
fn hook_name(server: &ApiServer, plugin: &LoadedPlugin) -> String {
    let parent = &plugin.manifest().parent;
    let plural = server.core().registry.find_kind(&parent.group, &parent.kind).map(|r| r.plural).or_else(|| {
        plugin.manifest().crds.iter().find_map(|crd| {
            let names = &crd["spec"]["names"];
            (crd["spec"]["group"] == parent.group.as_str() && names["kind"] == parent.kind.as_str())
                .then(|| names["plural"].as_str().map(str::to_string))
                .flatten()
        })
    });
    let plural = plural.unwrap_or_else(|| parent.kind.to_lowercase());
    operator_runtime::webhook::configuration::webhook_name(
        &parent.group,
        &plural,
        operator_runtime::webhook::configuration::DEFAULT_CONFIGURATION_NAME,
    )
}

/// Registers `default` (mutating) and `validate` (validating) for `plugin`'s
/// parent kind. The hooks look the plugin up in `registry` on every call, so
/// a hot swap changes admission at once and a removed plugin admits all.
/// Hooks are named after the kind; registering again replaces them. A
/// failing plugin call refuses the request (failurePolicy: Fail). The call
/// runs on the blocking pool (as the controller's reconcile calls do) and the
/// request awaits it, so a slow plugin holds no thread that serves requests.
pub fn register_admission(server: &ApiServer, registry: &Registry, plugin: &LoadedPlugin) {
    let parent = plugin.manifest().parent.clone();
    let name = hook_name(server, plugin);
    server.admission().unregister(&name);
    let (r, group, kind) = (registry.clone(), parent.group.clone(), parent.kind.clone());
    server.admission().register_mutating_async(&name, &parent.group, &parent.kind, move |obj: Value, _old: Option<Value>| {
        let plugin = r.for_parent(&group, &kind);
        async move {
            let Some(p) = plugin else {
                return Ok(obj);
            };
            p.default(obj.to_string()).await.map_err(|e| Denial::new(format!("defaulting failed: {e}")))
        }
        .boxed()
    });
    let (r, group, kind) = (registry.clone(), parent.group.clone(), parent.kind.clone());
    // Also `/scale` writes (the parent after scaling): as the host's webhook rules name `<plural>/scale`.
    server.admission().register_validating_async_on(&name, &parent.group, &parent.kind, &["scale"], move |obj: Value, old: Option<Value>| {
        let plugin = r.for_parent(&group, &kind);
        async move {
            let Some(p) = plugin else {
                return Vec::new();
            };
            match p.validate(obj.to_string(), old.as_ref().map(Value::to_string)).await {
                Ok(errors) => {
                    if errors.is_empty() && old.is_none() {
                        let meta = &obj["metadata"];
                        p.found_valid_on_create(meta["uid"].as_str().unwrap_or_default(), meta["generation"].as_i64());
                    }
                    errors.iter().map(cause).collect()
                }
                Err(e) => vec![Cause::new("InternalError", format!("validation failed: {e}"), "")],
            }
        }
        .boxed()
    });
}
