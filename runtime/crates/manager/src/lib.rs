//! The manager (controller-runtime's word): runs plugins as controllers
//! against one cluster, and changes that set while it runs (hot swap).
//!
//! Starting a plugin: refuse a parent kind another plugin owns; install its
//! CRDs by server-side apply and wait until they are `Established`
//! (`install`); discover its kinds; share one [`KindCache`] per kind among
//! all plugins; run one [`Controller`] per plugin.
//!
//! [`Running::apply`] swaps a plugin for a new version: with the same parent
//! and child kinds the controller keeps its queue and caches and only the
//! plugin changes (in-flight reconciles finish on the old version); with
//! other kinds the old controller drains and a new one starts on the new
//! kinds' caches. A cache nobody uses any more is stopped.
//!
//! With leader election ([`Options::leadership`]) caches run on every
//! replica (a warm standby) and a controller's workers start only once this
//! replica leads.

pub mod leader;
pub mod shard;

use operator_api::api_error;
use operator_api::error_chain;
use operator_clock as clock;
use operator_controller as controller;
use operator_controller::actions;
use operator_metrics as metrics;
use operator_sandbox as sandbox;
use operator_sandbox::registry;

mod install;

use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use operator_plugin_sdk::{GroupVersionKind, Manifest};

use crate::clock::SharedClock;
use crate::controller::Controller;
use crate::controller::cache::KindCache;
use crate::metrics::Metrics;
use crate::registry::Registry;
use crate::sandbox::LoadedPlugin;
pub use install::{install_crd, served_form};

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
    #[error(
        "{kind} is watched with the label selector as a parent; plugin {plugin} also needs it as a child kind, which the selector would hide. Restart the host to watch it unfiltered"
    )]
    SelectorConflict { kind: String, plugin: String },
    #[error("the manager is shutting down")]
    ShuttingDown,
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
            Error::DuplicateParent { .. } | Error::InvalidCrd { .. } | Error::SelectorConflict { .. } => 2,
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
    /// With leader election: workers start only once this turns true.
    /// `None` = always lead.
    pub leadership: Option<tokio::sync::watch::Receiver<bool>>,
}

impl Default for Options {
    fn default() -> Self {
        Self {
            namespaces: Vec::new(),
            selector: None,
            resync: Duration::from_secs(600),
            crd_timeout: Duration::from_secs(60),
            controller: controller::Config::default(),
            leadership: None,
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

/// A started manager. Cheap to clone: every clone controls the same set.
#[derive(Clone)]
pub struct Running {
    inner: Arc<Inner>,
}

struct Inner {
    client: kube::Client,
    options: Options,
    clock: SharedClock,
    metrics: Arc<Metrics>,
    registry: Registry,
    /// Serializes changes of the plugin set (apply/remove), which await.
    changing: tokio::sync::Mutex<()>,
    state: Mutex<State>,
}

#[derive(Default)]
struct State {
    /// By plugin id (where the plugin came from: a file, a ConfigMap key).
    slots: BTreeMap<String, Slot>,
    caches: HashMap<GroupVersionKind, CacheSlot>,
    background: Vec<tokio::task::JoinHandle<()>>,
    stopped: bool,
}

struct Slot {
    controller: Arc<Controller>,
    worker: tokio::task::JoinHandle<()>,
    /// Ends a worker still waiting for leadership (it never ran a reconcile).
    stop_waiting: tokio::sync::watch::Sender<bool>,
}

impl Slot {
    /// Stops handing out work; the worker then ends after its in-flight reconciles.
    fn stop(&self) {
        self.stop_waiting.send_replace(true);
        self.controller.stop();
    }
}

/// Runs the controller's workers once `leadership` (if any) turns true;
/// returns without running them if stopped first.
async fn run_when_leading(c: Arc<Controller>, leadership: Option<tokio::sync::watch::Receiver<bool>>, mut stop: tokio::sync::watch::Receiver<bool>) {
    if let Some(mut leading) = leadership {
        tokio::select! {
            r = leading.wait_for(|l| *l) => if r.is_err() { return },
            _ = stop.wait_for(|s| *s) => return,
        }
        tracing::info!(controller = %c.name(), "leading: starting workers");
    }
    c.run().await;
}

struct CacheSlot {
    cache: Arc<KindCache>,
    /// Which label selector its watches use.
    filter: Filter,
    task: Option<tokio::task::JoinHandle<()>>,
}

/// What a kind is cached for, and so which objects its cache holds.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Role {
    /// A parent kind: the `--selector` and, sharded, this shard's label.
    Parent,
    /// A child kind: sharded, this shard's label; else everything.
    Child,
    /// A related kind: everything.
    Related,
}

/// The selector a cache's watches were started with.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Filter {
    Everything,
    /// `--selector`, and sharded, the shard label.
    Parents,
    /// Sharded: the shard label.
    Shard,
}

impl Filter {
    fn selected(self) -> bool {
        self != Filter::Everything
    }
}

impl std::fmt::Debug for Running {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Running").field("plugins", &self.inner.state.lock().unwrap().slots.len()).finish()
    }
}

/// What [`Running::apply`] did.
#[derive(Debug)]
pub enum Applied {
    /// A plugin id not running before.
    Started,
    /// Same kinds: the controller now calls the new version.
    Swapped { old: LoadedPlugin },
    /// Other kinds: the old controller was stopped and a new one started.
    Restarted { old: LoadedPlugin },
}

/// Whether a new version can be swapped in place: the same parent and child
/// kinds, and the same related kinds attached the same way (the related
/// index and caches were built for them).
fn same_kinds(a: &Manifest, b: &Manifest) -> bool {
    let set = |m: &Manifest| m.children.iter().cloned().collect::<HashSet<_>>();
    a.parent == b.parent && set(a) == set(b) && a.related == b.related
}

/// The kinds a plugin only reads.
fn related_kinds(m: &Manifest) -> impl Iterator<Item = GroupVersionKind> + '_ {
    m.related.iter().map(|r| r.kind.clone())
}

/// Assembles a manager, then starts it (kube-runtime's
/// `Controller::new(..).owns(..).run(..)` shape):
///
/// ```no_run
/// # async fn example(client: kube::Client, plugins: Vec<operator_sandbox::LoadedPlugin>) -> Result<(), operator_manager::Error> {
/// use operator_manager::{Builder, Options};
/// let running = Builder::new(client).plugins(plugins).options(Options::default()).start().await?;
/// running.wait_synced().await;
/// # Ok(()) }
/// ```
///
/// Everything but the client has a default, documented on its setter.
#[must_use = "a Builder starts nothing until `.start()` is awaited"]
pub struct Builder {
    client: kube::Client,
    plugins: Vec<(String, LoadedPlugin)>,
    options: Options,
    clock: SharedClock,
    metrics: Arc<Metrics>,
    registry: Registry,
}

impl Builder {
    /// A manager of no plugins against the cluster `client` talks to.
    pub fn new(client: kube::Client) -> Self {
        Self {
            client,
            plugins: Vec::new(),
            options: Options::default(),
            clock: Arc::new(crate::clock::SystemClock),
            metrics: Arc::new(Metrics::new()),
            registry: Registry::default(),
        }
    }

    /// Adds `plugins`, each identified by its name. Default: none (plugins
    /// can be added to the running manager with [`Running::apply`]).
    pub fn plugins(mut self, plugins: impl IntoIterator<Item = LoadedPlugin>) -> Self {
        self.plugins.extend(plugins.into_iter().map(|p| (p.name().to_string(), p)));
        self
    }

    /// Adds `plugins`, each identified by where it came from (a file path, a
    /// ConfigMap key): the id [`Running::apply`] and [`Running::remove`] take.
    pub fn plugins_by_source(mut self, plugins: impl IntoIterator<Item = (String, LoadedPlugin)>) -> Self {
        self.plugins.extend(plugins);
        self
    }

    /// Namespaces, selector, resync, CRD wait, controller settings and
    /// leadership. Default: [`Options::default`] (every namespace, no
    /// selector, a resync every 10 min, always leading).
    pub fn options(mut self, options: Options) -> Self {
        self.options = options;
        self
    }

    /// The one source of "now" for plugins, queues and Events. Default: the
    /// wall clock ([`SystemClock`](crate::clock::SystemClock)).
    pub fn clock(mut self, clock: SharedClock) -> Self {
        self.clock = clock;
        self
    }

    /// Where controllers count reconciles, queue depth and readiness.
    /// Default: a registry of its own, which nothing serves (pass the one
    /// `/metrics` serves to see them).
    pub fn metrics(mut self, metrics: Arc<Metrics>) -> Self {
        self.metrics = metrics;
        self
    }

    /// The plugin per parent kind, kept up to date with every change, which
    /// admission (webhook or in-process) reads. Default: a registry of its
    /// own, which no admission reads.
    pub fn registry(mut self, registry: Registry) -> Self {
        self.registry = registry;
        self
    }

    /// Starts the manager: refuses two plugins with one parent kind, installs
    /// every CRD, starts the watches and one controller per plugin; returns
    /// once the watches run (not necessarily synced: see
    /// [`Running::wait_synced`]).
    pub async fn start(self) -> Result<Running, Error> {
        let Builder { client, plugins, options, clock, metrics, registry } = self;
        let list: Vec<LoadedPlugin> = plugins.iter().map(|(_, p)| p.clone()).collect();
        check_parents(&list)?;
        let parents: HashSet<GroupVersionKind> = list.iter().map(|p| p.manifest().parent.clone()).collect();
        let children: HashSet<GroupVersionKind> = list.iter().flat_map(|p| p.manifest().children.clone()).collect();
        let running = Running {
            inner: Arc::new(Inner {
                client,
                options,
                clock,
                metrics: metrics.clone(),
                registry,
                changing: tokio::sync::Mutex::new(()),
                state: Mutex::new(State::default()),
            }),
        };
        let _changing = running.inner.changing.lock().await;
        for p in &list {
            running.prepare(p).await?;
        }
        // Caches first (unstarted), so every controller's handlers see the initial lists.
        for gvk in parents.iter().chain(&children) {
            // A kind that is both is cached as a child: as a parent it then
            // ignores `--selector`, which would hide it as a child.
            let role = if children.contains(gvk) { Role::Child } else { Role::Parent };
            running.ensure_cache(gvk, role).await?;
        }
        // Related kinds are never filtered by the parents' selector.
        for gvk in list.iter().flat_map(|p| related_kinds(p.manifest()).collect::<Vec<_>>()) {
            running.ensure_cache(&gvk, Role::Related).await?;
        }
        for (id, p) in plugins {
            running.start_controller(id, p);
        }
        running.start_caches();
        let synced: Vec<Arc<KindCache>> = running.inner.state.lock().unwrap().caches.values().map(|c| c.cache.clone()).collect();
        let resync = {
            let weak = Arc::downgrade(&running.inner);
            let every = running.inner.options.resync;
            tokio::spawn(async move {
                let mut tick = tokio::time::interval_at(tokio::time::Instant::now() + every, every);
                loop {
                    tick.tick().await;
                    let Some(inner) = weak.upgrade() else { return };
                    for c in (Running { inner }).controllers() {
                        c.resync();
                    }
                }
            })
        };
        let ready = tokio::spawn(async move {
            for c in &synced {
                c.wait_synced().await;
            }
            // Start-up's garbage (compilation, the initial lists) stays free but
            // resident otherwise.
            operator_sandbox::heap::release_free_pages();
            metrics.set_ready(true);
            tracing::info!("caches synced; ready");
        });
        running.inner.state.lock().unwrap().background.extend([resync, ready]);
        drop(_changing);
        Ok(running)
    }
}

impl Running {
    /// Installs `plugin`'s CRDs (idempotent: server-side apply).
    async fn prepare(&self, plugin: &LoadedPlugin) -> Result<(), Error> {
        for crd in &plugin.manifest().crds {
            install_crd(&self.inner.client, plugin.name(), crd, self.inner.options.crd_timeout).await?;
        }
        Ok(())
    }

    /// Creates (unstarted) the cache of `gvk` unless one exists.
    async fn ensure_cache(&self, gvk: &GroupVersionKind, role: Role) -> Result<Arc<KindCache>, Error> {
        if let Some(c) = self.inner.state.lock().unwrap().caches.get(gvk) {
            return Ok(c.cache.clone());
        }
        let (ar, namespaced) = install::discover(&self.inner.client, gvk).await?;
        let cache = Arc::new(KindCache::new(ar, namespaced));
        let sharded = self.inner.options.controller.sharding.is_some();
        let filter = match role {
            Role::Parent if sharded || self.inner.options.selector.is_some() => Filter::Parents,
            Role::Child if sharded => Filter::Shard,
            _ => Filter::Everything,
        };
        let mut state = self.inner.state.lock().unwrap();
        let slot = state.caches.entry(gvk.clone()).or_insert_with(|| {
            let labels = metrics::CacheLabels { group: gvk.group.clone(), version: gvk.version.clone(), kind: gvk.kind.clone() };
            let probe: Arc<dyn metrics::CacheProbe> = cache.clone();
            self.inner.metrics.add_cache(labels, Arc::downgrade(&probe));
            CacheSlot { cache, filter, task: None }
        });
        Ok(slot.cache.clone())
    }

    /// Starts the watch of every cache not yet started.
    fn start_caches(&self) {
        let mut state = self.inner.state.lock().unwrap();
        for slot in state.caches.values_mut().filter(|s| s.task.is_none()) {
            let user = self.inner.options.selector.as_deref();
            let selector = match (slot.filter, &self.inner.options.controller.sharding) {
                (Filter::Everything, _) => None,
                (Filter::Parents, Some(sharding)) => Some(sharding.parent_selector(user)),
                (Filter::Parents, None) => user.map(str::to_owned),
                (Filter::Shard, Some(sharding)) => Some(sharding.child_selector()),
                (Filter::Shard, None) => unreachable!("a shard filter is made only when sharded"),
            };
            let run = slot.cache.clone().run(self.inner.client.clone(), self.inner.options.namespaces.clone(), selector);
            slot.task = Some(tokio::spawn(run));
        }
    }

    fn start_controller(&self, id: String, plugin: LoadedPlugin) -> Arc<Controller> {
        let caches: HashMap<GroupVersionKind, Arc<KindCache>> =
            self.inner.state.lock().unwrap().caches.iter().map(|(g, s)| (g.clone(), s.cache.clone())).collect();
        self.inner.registry.insert(&id, plugin.clone());
        let controller = Controller::new(
            plugin,
            caches,
            self.inner.client.clone(),
            self.inner.clock.clone(),
            self.inner.metrics.clone(),
            self.inner.options.controller.clone(),
        );
        let (stop_waiting, stop) = tokio::sync::watch::channel(false);
        let worker = tokio::spawn(run_when_leading(controller.clone(), self.inner.options.leadership.clone(), stop));
        self.inner.state.lock().unwrap().slots.insert(id, Slot { controller: controller.clone(), worker, stop_waiting });
        controller
    }

    /// Runs `plugin` under `id`: starts it, or swaps the running version
    /// for it. On any error the running version (if any) is left as it was.
    pub async fn apply(&self, id: &str, plugin: LoadedPlugin) -> Result<Applied, Error> {
        let _changing = self.inner.changing.lock().await;
        if self.inner.state.lock().unwrap().stopped {
            return Err(Error::ShuttingDown);
        }
        let current = self.inner.state.lock().unwrap().slots.get(id).map(|s| s.controller.clone());
        {
            let others: Vec<LoadedPlugin> = self
                .inner
                .state
                .lock()
                .unwrap()
                .slots
                .iter()
                .filter(|(k, _)| k.as_str() != id)
                .map(|(_, s)| s.controller.plugin())
                .chain(std::iter::once(plugin.clone()))
                .collect();
            check_parents(&others)?;
        }
        self.prepare(&plugin).await?;
        if let Some(c) = &current
            && same_kinds(c.plugin().manifest(), plugin.manifest())
        {
            self.inner.registry.insert(id, plugin.clone());
            let old = c.swap(plugin);
            return Ok(Applied::Swapped { old });
        }
        let m = plugin.manifest().clone();
        let children_elsewhere: HashSet<GroupVersionKind> = self.controllers().iter().flat_map(|c| c.plugin().manifest().children.clone()).collect();
        for gvk in std::iter::once(&m.parent).chain(&m.children) {
            let as_child = m.children.contains(gvk);
            if as_child && self.inner.state.lock().unwrap().caches.get(gvk).is_some_and(|c| c.filter == Filter::Parents) {
                return Err(Error::SelectorConflict { kind: format!("{}/{}", gvk.api_version(), gvk.kind), plugin: m.name.clone() });
            }
            let role = if as_child || children_elsewhere.contains(gvk) { Role::Child } else { Role::Parent };
            self.ensure_cache(gvk, role).await?;
        }
        for gvk in related_kinds(&m) {
            if self.inner.state.lock().unwrap().caches.get(&gvk).is_some_and(|c| c.filter.selected()) {
                return Err(Error::SelectorConflict { kind: format!("{}/{}", gvk.api_version(), gvk.kind), plugin: m.name.clone() });
            }
            self.ensure_cache(&gvk, Role::Related).await?;
        }
        let old = match current {
            Some(_) => self.stop_controller(id).await,
            None => None,
        };
        let controller = self.start_controller(id.to_string(), plugin);
        self.start_caches();
        // Caches that were already listed do not replay their objects to new handlers.
        controller.resync();
        self.drop_unused_caches();
        Ok(match old {
            Some(old) => Applied::Restarted { old },
            None => Applied::Started,
        })
    }

    /// Stops the plugin running under `id` (its in-flight reconciles finish).
    pub async fn remove(&self, id: &str) -> Option<LoadedPlugin> {
        let _changing = self.inner.changing.lock().await;
        let old = self.stop_controller(id).await;
        self.drop_unused_caches();
        old
    }

    async fn stop_controller(&self, id: &str) -> Option<LoadedPlugin> {
        let slot = self.inner.state.lock().unwrap().slots.remove(id)?;
        self.inner.registry.remove(id);
        slot.stop();
        let _ = slot.worker.await;
        Some(slot.controller.plugin())
    }

    fn drop_unused_caches(&self) {
        let mut state = self.inner.state.lock().unwrap();
        let used: HashSet<GroupVersionKind> = state
            .slots
            .values()
            .flat_map(|s| {
                let m = s.controller.plugin().manifest().clone();
                let related: Vec<GroupVersionKind> = related_kinds(&m).collect();
                std::iter::once(m.parent).chain(m.children).chain(related)
            })
            .collect();
        state.caches.retain(|gvk, slot| {
            let keep = used.contains(gvk);
            if !keep && let Some(t) = &slot.task {
                t.abort();
            }
            keep
        });
    }

    /// Resolves once every cache has listed its kind.
    pub async fn wait_synced(&self) {
        let caches: Vec<Arc<KindCache>> = self.inner.state.lock().unwrap().caches.values().map(|c| c.cache.clone()).collect();
        for c in caches {
            c.wait_synced().await;
        }
    }

    /// The controllers running now.
    pub fn controllers(&self) -> Vec<Arc<Controller>> {
        self.inner.state.lock().unwrap().slots.values().map(|s| s.controller.clone()).collect()
    }

    /// The plugin running under `id` now.
    pub fn plugin(&self, id: &str) -> Option<LoadedPlugin> {
        self.inner.state.lock().unwrap().slots.get(id).map(|s| s.controller.plugin())
    }

    pub fn metrics(&self) -> &Arc<Metrics> {
        &self.inner.metrics
    }

    /// The plugins by id, as admission sees them.
    pub fn registry(&self) -> &Registry {
        &self.inner.registry
    }

    /// Stops handing out work, waits for in-flight reconciles (up to
    /// `grace`), then stops the watches.
    pub async fn shutdown(&self, grace: Duration) {
        let _changing = self.inner.changing.lock().await;
        self.inner.metrics.set_ready(false);
        let (workers, caches, background) = {
            let mut state = self.inner.state.lock().unwrap();
            state.stopped = true;
            let slots = std::mem::take(&mut state.slots);
            let workers: Vec<_> = slots
                .into_values()
                .map(|s| {
                    s.stop();
                    s.worker
                })
                .collect();
            (workers, std::mem::take(&mut state.caches), std::mem::take(&mut state.background))
        };
        if tokio::time::timeout(grace, futures::future::join_all(workers)).await.is_err() {
            tracing::warn!(?grace, "in-flight reconciles did not finish in time");
        }
        for t in caches.into_values().filter_map(|c| c.task).chain(background) {
            t.abort();
        }
    }
}
