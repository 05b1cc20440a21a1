//! The manager (controller-runtime's word): starts plugins as controllers
//! against one cluster. Steps:
//! 1. refuse two plugins that claim the same parent kind;
//! 2. install each plugin's CRDs by server-side apply (field manager
//!    `operator-host`) and wait until they are `Established`;
//! 3. discover every parent and child kind (plural, scope);
//! 4. one shared [`KindCache`] per kind, one [`Controller`] per plugin;
//! 5. start the watches, wait until every cache has synced (readiness), run
//!    the workers and the periodic resync;
//! 6. [`Running::shutdown`] stops the queues and lets in-flight reconciles finish.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{Api, Patch, PatchParams};
use kube::discovery::Scope;
use operator_plugin_sdk::GroupVersionKind;
use serde_json::Value;

use crate::actions::FIELD_MANAGER;
use crate::clock::SharedClock;
use crate::controller::cache::KindCache;
use crate::controller::{self, Controller};
use crate::metrics::Metrics;
use crate::sandbox::LoadedPlugin;

/// What can stop the manager from starting.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("plugins {first} and {second} both reconcile {kind}; only one plugin may own a parent kind")]
    DuplicateParent { kind: String, first: String, second: String },
    #[error("plugin {plugin} declares an invalid CRD: {detail}")]
    InvalidCrd { plugin: String, detail: String },
    #[error("cannot install CRD {name}")]
    InstallCrd {
        name: String,
        #[source]
        source: kube::Error,
    },
    #[error("CRD {name} did not become Established within {timeout:?}")]
    CrdNotEstablished { name: String, timeout: Duration },
    #[error("cannot discover {kind}")]
    Discovery {
        kind: String,
        #[source]
        source: kube::Error,
    },
}

impl Error {
    /// Exit code per the CLI's conventions: 2 for a bad set of inputs.
    pub fn exit_code(&self) -> u8 {
        match self {
            Error::DuplicateParent { .. } | Error::InvalidCrd { .. } => 2,
            _ => 1,
        }
    }
}

/// Manager options (CLI flags).
#[derive(Clone, Debug)]
pub struct Options {
    /// Watch only these namespaces (all when empty).
    pub namespaces: Vec<String>,
    /// Label selector for parents.
    pub selector: Option<String>,
    /// Every parent is reconciled at least this often (default 10 min).
    pub resync: Duration,
    /// How long to wait for a CRD to become Established (default 60 s).
    pub crd_timeout: Duration,
    pub controller: controller::Config,
}

impl Default for Options {
    fn default() -> Self {
        Self {
            namespaces: Vec::new(),
            selector: None,
            resync: Duration::from_secs(600),
            crd_timeout: Duration::from_secs(60),
            controller: controller::Config::default(),
        }
    }
}

/// Refuses two plugins with the same parent kind (group + kind).
pub fn check_parents(plugins: &[LoadedPlugin]) -> Result<(), Error> {
    let mut seen: HashMap<(String, String), String> = HashMap::new();
    for p in plugins {
        let m = p.manifest();
        let key = (m.parent.group.clone(), m.parent.kind.clone());
        if let Some(first) = seen.get(&key) {
            return Err(Error::DuplicateParent {
                kind: format!("{}/{}", m.parent.api_version(), m.parent.kind),
                first: first.clone(),
                second: m.name.clone(),
            });
        }
        seen.insert(key, m.name.clone());
    }
    Ok(())
}

/// Installs `crd` by server-side apply and waits for `Established`.
pub async fn install_crd(client: &kube::Client, plugin: &str, crd: &Value, timeout: Duration) -> Result<(), Error> {
    let mut crd = crd.clone();
    let name = crd
        .pointer("/metadata/name")
        .and_then(Value::as_str)
        .ok_or_else(|| Error::InvalidCrd { plugin: plugin.into(), detail: "a CRD without metadata.name".into() })?
        .to_string();
    crd["apiVersion"] = "apiextensions.k8s.io/v1".into();
    crd["kind"] = "CustomResourceDefinition".into();
    let api: Api<CustomResourceDefinition> = Api::all(client.clone());
    api.patch(&name, &PatchParams::apply(FIELD_MANAGER).force(), &Patch::Apply(&crd))
        .await
        .map_err(|source| Error::InstallCrd { name: name.clone(), source })?;
    let deadline = tokio::time::Instant::now() + timeout;
    loop {
        if let Ok(crd) = api.get(&name).await {
            let established = crd
                .status
                .and_then(|s| s.conditions)
                .unwrap_or_default()
                .iter()
                .any(|c| c.type_ == "Established" && c.status == "True");
            if established {
                tracing::info!(crd = %name, "CRD established");
                return Ok(());
            }
        }
        if tokio::time::Instant::now() >= deadline {
            return Err(Error::CrdNotEstablished { name, timeout });
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

async fn discover(client: &kube::Client, gvk: &GroupVersionKind) -> Result<(kube::api::ApiResource, bool), Error> {
    let kgvk = kube::api::GroupVersionKind::gvk(&gvk.group, &gvk.version, &gvk.kind);
    let mut attempt = 0;
    loop {
        match kube::discovery::pinned_kind(client, &kgvk).await {
            Ok((ar, caps)) => return Ok((ar, caps.scope == Scope::Namespaced)),
            // Discovery of a just-established CRD can lag a moment on a real cluster.
            Err(_) if attempt < 20 => {
                attempt += 1;
                tokio::time::sleep(Duration::from_millis(250)).await;
            }
            Err(source) => return Err(Error::Discovery { kind: format!("{}/{}", gvk.api_version(), gvk.kind), source }),
        }
    }
}

/// A started manager.
pub struct Running {
    controllers: Vec<Arc<Controller>>,
    caches: HashMap<GroupVersionKind, Arc<KindCache>>,
    workers: Vec<tokio::task::JoinHandle<()>>,
    background: Vec<tokio::task::JoinHandle<()>>,
    metrics: Arc<Metrics>,
}

impl std::fmt::Debug for Running {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Running").field("controllers", &self.controllers.len()).finish()
    }
}

/// Starts the manager; returns once every CRD is installed and the watches
/// run (not necessarily synced: see [`Running::wait_synced`]).
pub async fn start(
    client: kube::Client,
    plugins: Vec<LoadedPlugin>,
    options: Options,
    clock: SharedClock,
    metrics: Arc<Metrics>,
) -> Result<Running, Error> {
    check_parents(&plugins)?;
    for p in &plugins {
        for crd in &p.manifest().crds {
            install_crd(&client, p.name(), crd, options.crd_timeout).await?;
        }
    }
    let mut parents = std::collections::HashSet::new();
    let mut kinds: Vec<GroupVersionKind> = Vec::new();
    for p in &plugins {
        let m = p.manifest();
        parents.insert(m.parent.clone());
        for gvk in std::iter::once(&m.parent).chain(&m.children) {
            if !kinds.contains(gvk) {
                kinds.push(gvk.clone());
            }
        }
    }
    let mut caches = HashMap::new();
    for gvk in &kinds {
        let (ar, namespaced) = discover(&client, gvk).await?;
        caches.insert(gvk.clone(), Arc::new(KindCache::new(ar, namespaced)));
    }
    let controllers: Vec<Arc<Controller>> = plugins
        .into_iter()
        .map(|p| Controller::new(p, caches.clone(), client.clone(), clock.clone(), metrics.clone(), options.controller.clone()))
        .collect();
    let mut background = Vec::new();
    for (gvk, cache) in &caches {
        // The selector narrows parents only: children must be seen whatever their labels.
        let only_parent = parents.contains(gvk) && !controllers.iter().any(|c| c_declares_child(c, gvk));
        let selector = if only_parent { options.selector.clone() } else { None };
        background.push(tokio::spawn(cache.clone().run(client.clone(), options.namespaces.clone(), selector)));
    }
    {
        let caches: Vec<_> = caches.values().cloned().collect();
        let metrics = metrics.clone();
        background.push(tokio::spawn(async move {
            for c in &caches {
                c.wait_synced().await;
            }
            metrics.set_ready(true);
            tracing::info!("caches synced; ready");
        }));
    }
    let workers = controllers.iter().map(|c| tokio::spawn(c.clone().run())).collect();
    {
        let controllers = controllers.clone();
        let resync = options.resync;
        background.push(tokio::spawn(async move {
            let mut tick = tokio::time::interval_at(tokio::time::Instant::now() + resync, resync);
            loop {
                tick.tick().await;
                for c in &controllers {
                    c.resync();
                }
            }
        }));
    }
    Ok(Running { controllers, caches, workers, background, metrics })
}

fn c_declares_child(c: &Controller, gvk: &GroupVersionKind) -> bool {
    c.manifest().children.contains(gvk)
}

impl Running {
    /// Resolves once every cache has listed its kind.
    pub async fn wait_synced(&self) {
        for c in self.caches.values() {
            c.wait_synced().await;
        }
    }

    pub fn controllers(&self) -> &[Arc<Controller>] {
        &self.controllers
    }

    pub fn metrics(&self) -> &Arc<Metrics> {
        &self.metrics
    }

    /// Stops handing out work, waits for in-flight reconciles (up to
    /// `grace`), then stops the watches.
    pub async fn shutdown(self, grace: Duration) {
        self.metrics.set_ready(false);
        for c in &self.controllers {
            c.queue().shut_down();
        }
        let drain = futures::future::join_all(self.workers);
        if tokio::time::timeout(grace, drain).await.is_err() {
            tracing::warn!(?grace, "in-flight reconciles did not finish in time");
        }
        for t in self.background {
            t.abort();
        }
    }
}
