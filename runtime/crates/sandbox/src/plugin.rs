//! A loaded plugin: its compiled component, its `InstancePre`, its manifest,
//! and the calls into it, each in a fresh Store.

use std::sync::atomic::Ordering;
use std::sync::{Arc, OnceLock, RwLock};

use operator_plugin_sdk::{Action, Attachment, FieldError, Manifest, RelatedKind};
use wasmtime::component::{Component, Instance};
use wasmtime::{Store, Trap};

use super::admitted::Admitted;
use super::bindings;
use super::cache::{self, CacheOutcome, Lookup};
use super::contract::{self, Minor};
use super::error::{CallError, LoadError};
use super::exports::Exports;
use super::pre::Pre;
use super::size_class::SizeClasses;
use super::wasi::CallState;
use super::{Baseline, Shared, Tiering};

/// What `host inspect` shows about a plugin besides its manifest.
#[derive(Clone, Debug, serde::Serialize)]
#[serde(rename_all = "camelCase")]
pub struct PluginInfo {
    /// SHA-256 of the component bytes.
    pub digest: String,
    pub size_bytes: usize,
    /// The `operator:plugin` version the component was built against.
    pub contract_version: String,
    pub imports: Vec<String>,
    pub exports: Vec<String>,
    /// Whether this load compiled the component or used the cache.
    #[serde(skip)]
    pub cache: CacheOutcome,
}

/// A plugin ready to be called. Cheap to clone; calls may run concurrently.
#[derive(Clone)]
pub struct LoadedPlugin {
    inner: Arc<Inner>,
}

struct Inner {
    shared: Arc<Shared>,
    name: Arc<str>,
    manifest: Manifest,
    info: PluginInfo,
    code: Code,
    /// Call states kept between calls ([`CallState::begin`] readies one).
    states: std::sync::Mutex<Vec<CallState>>,
    /// Parents this build found valid at admission of their create.
    admitted: Admitted,
}

/// What runs a call: a Wasm component, or, for benchmarks against the
/// sandbox, the same plugin logic linked into the host
/// ([`crate::Sandbox::load_native`]; no isolation, no limits).
#[allow(
    clippy::large_enum_variant,
    reason = "one Code per loaded plugin, matched on every call: boxing the Wasm build would add an indirection to every call for a variant only benchmarks load"
)]
enum Code {
    Wasm(Tiered),
    Native(super::native::NativeCalls),
}

/// The build calls instantiate: Cranelift's, or, after a load that had to
/// compile with tiering on, Winch's until Cranelift's is ready
/// ([`Tiering`]).
struct Tiered {
    optimized: OnceLock<SizeClasses>,
    /// Served while `optimized` is unset; dropped once it is set (calls in
    /// flight keep their `Arc`).
    baseline: RwLock<Option<Arc<SizeClasses>>>,
}

/// Which compiler built the code a plugin's calls run now.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Tier {
    /// Winch, wasmtime's baseline compiler (quick to compile, slower code).
    Baseline,
    /// Cranelift, the optimizing compiler.
    Optimized,
}

impl Tiered {
    fn optimized(build: SizeClasses) -> Self {
        Self { optimized: OnceLock::from(build), baseline: RwLock::new(None) }
    }

    fn baseline(build: SizeClasses) -> Self {
        Self { optimized: OnceLock::new(), baseline: RwLock::new(Some(Arc::new(build))) }
    }

    /// Runs `f` on the best build there is now.
    fn with<R>(&self, f: impl FnOnce(&SizeClasses) -> R) -> R {
        if let Some(pre) = self.optimized.get() {
            return f(pre);
        }
        let baseline = self.baseline.read().unwrap().clone();
        match &baseline {
            Some(pre) => f(pre),
            // `optimized` is set before the baseline is dropped.
            None => f(self.optimized.get().expect("the optimized build replaced the baseline")),
        }
    }

    fn tier_up(&self, build: SizeClasses) {
        if self.optimized.set(build).is_ok() {
            self.baseline.write().unwrap().take();
        }
    }

    fn tier(&self) -> Tier {
        if self.optimized.get().is_some() { Tier::Optimized } else { Tier::Baseline }
    }
}

pub(super) fn load(shared: &Arc<Shared>, label: &str, bytes: &[u8]) -> Result<LoadedPlugin, LoadError> {
    if !wasmparser_is_component(bytes) {
        return Err(LoadError::NotAComponent {
            plugin: label.into(),
            detail: if bytes.starts_with(b"\0asm") {
                "it is a core Wasm module; build it as a component (`cargo build --target wasm32-wasip2` or `cargo component build`)".into()
            } else {
                "the bytes do not start with the Wasm magic number".into()
            },
        });
    }
    let digest = cache::digest(bytes);
    let (component, outcome, baseline) = compile(shared, label, bytes, &digest)?;
    let (engine, linker) = match baseline {
        Some(b) => (&b.engine, &b.linker),
        None => (&shared.engine, &shared.linker),
    };

    let ty = component.component_type();
    let exports: Vec<String> = ty.exports(engine).map(|(n, _)| n.to_string()).collect();
    let imports: Vec<String> = ty.imports(engine).map(|(n, _)| n.to_string()).collect();
    let found = match contract::exported_version(exports.iter().map(String::as_str)) {
        Ok(Some(v)) => v,
        Ok(None) => {
            return Err(LoadError::MissingExport { plugin: label.into(), exports: exports.join(", ") });
        }
        Err(detail) => {
            return Err(LoadError::Manifest { plugin: label.into(), detail });
        }
    };
    let Some(minor) = contract::minor_of(found) else {
        return Err(LoadError::ContractMismatch { plugin: label.into(), found: found.to_string(), supported: contract::supported_ranges() });
    };
    // Also refuse a `log` import of another version than the export's: the
    // linker would report it as a missing import, which reads worse.
    for (name, _) in ty.imports(engine) {
        if let Some(v) = name.strip_prefix("operator:plugin/log@").and_then(contract::Version::parse)
            && contract::minor_of(v) != Some(minor)
        {
            return Err(LoadError::ContractMismatch { plugin: label.into(), found: v.to_string(), supported: found.compatible_range() });
        }
    }

    let pre = Pre::new(linker, &component, minor, label)?;
    let build = SizeClasses::new(pre, linker.clone(), minor, label);
    let code = if baseline.is_some() { Tiered::baseline(build) } else { Tiered::optimized(build) };
    let info = PluginInfo { digest, size_bytes: bytes.len(), contract_version: found.to_string(), imports, exports, cache: outcome };

    let mut loading = Inner {
        shared: shared.clone(),
        name: label.into(),
        manifest: placeholder_manifest(),
        info,
        code: Code::Wasm(code),
        states: Default::default(),
        admitted: Admitted::default(),
    };
    let manifest = loading
        .call("manifest", 0, 0, |store, instance, exports| exports.manifest(store, instance))
        .map_err(|e| LoadError::ManifestCall { plugin: label.into(), source: Box::new(e) })?
        .map_err(|e| LoadError::Manifest { plugin: label.into(), detail: e.0 })?;
    validate_manifest(&manifest).map_err(|detail| LoadError::Manifest { plugin: label.into(), detail })?;
    loading.name = manifest.name.as_str().into();
    loading.manifest = manifest;
    let plugin = LoadedPlugin { inner: Arc::new(loading) };
    if baseline.is_some() && shared.config.tiering == Tiering::BaselineFirst {
        tier_up(&plugin, bytes.to_vec(), minor);
    }
    Ok(plugin)
}

/// The compiled component, what the cache did, and Winch's engine if Winch
/// compiled it. With tiering, a plugin that is not cached is compiled by
/// Winch; should Winch refuse it, Cranelift compiles it as without tiering.
fn compile<'s>(shared: &'s Shared, label: &str, bytes: &[u8], digest: &str) -> Result<(Component, CacheOutcome, Option<&'s Baseline>), LoadError> {
    if shared.config.tiering != Tiering::Off {
        let outcome = match shared.config.cache.lookup(&shared.engine, digest) {
            Lookup::Hit(component) => return Ok((component, CacheOutcome::Hit, None)),
            Lookup::Miss(outcome) => outcome,
        };
        // The Winch engine is made on the first miss only.
        if let Some(baseline) = shared.baseline() {
            match Component::from_binary(&baseline.engine, bytes) {
                Ok(component) => return Ok((component, outcome, Some(baseline))),
                Err(e) => {
                    tracing::warn!(plugin = label, error = %format!("{e:#}"), "Winch cannot compile this plugin; compiling it with Cranelift before use")
                }
            }
        }
    }
    let compiled = shared.config.cache.load_or_compile(&shared.engine, digest, || {
        shared.compiles.fetch_add(1, Ordering::Relaxed);
        Component::from_binary(&shared.engine, bytes)
    });
    let (component, outcome) = compiled.map_err(|e| LoadError::Compile { plugin: label.into(), detail: format!("{e:#}") })?;
    Ok((component, outcome, None))
}

/// Compiles `plugin` with Cranelift on a background thread (filling the
/// precompiled cache), then switches its calls to that build. If the plugin
/// is dropped meanwhile, the build is discarded; if it fails, the Winch
/// build keeps serving.
fn tier_up(plugin: &LoadedPlugin, bytes: Vec<u8>, minor: Minor) {
    let plugin_ref = Arc::downgrade(&plugin.inner);
    let shared = plugin.inner.shared.clone();
    let (name, digest) = (plugin.name().to_string(), plugin.info().digest.clone());
    let compile = move || {
        let started = std::time::Instant::now();
        let built = optimized(&shared, &name, &bytes, &digest).and_then(|component| {
            let pre = Pre::new(&shared.linker, &component, minor, &name).map_err(|e| crate::error_chain(&e))?;
            Ok(SizeClasses::new(pre, shared.linker.clone(), minor, &name))
        });
        match (built, plugin_ref.upgrade()) {
            (Ok(build), Some(inner)) => {
                if let Code::Wasm(code) = &inner.code {
                    code.tier_up(build);
                }
                tracing::info!(plugin = name, compile_ms = started.elapsed().as_millis() as u64, "Cranelift build took over from the Winch build");
            }
            (Ok(_), None) => {}
            (Err(e), _) => tracing::warn!(plugin = name, error = e, "Cranelift cannot compile this plugin; its Winch build keeps serving"),
        }
        // Cranelift's working memory for one plugin is tens of MiB, freed
        // when the compile ends but kept resident by malloc for reuse; a
        // tier-up usually ends after start-up's own trim (the manager's, once
        // the caches are synced). Measured with 1,000 CronJobs cached and
        // cronjob compiled at start: 90 MiB resident at idle without this,
        // 75.5 MiB with it (a host that loads it precompiled: 41 MiB).
        crate::heap::release_free_pages();
    };
    match background_compiles() {
        Some(pool) => pool.spawn(compile),
        None => tracing::warn!(plugin = plugin.name(), "no threads for the Cranelift compile; the Winch build keeps serving"),
    }
}

/// Cranelift's build of `bytes`, cached: compiled by the configured
/// [`ChildCompiler`](crate::ChildCompiler) and mapped from the cache when
/// there is one, else compiled here.
fn optimized(shared: &Shared, name: &str, bytes: &[u8], digest: &str) -> Result<Component, String> {
    if let Some(child) = shared.config.child_compiler.as_ref().filter(|_| shared.config.cache.dir().is_some()) {
        match child.compile(bytes).map(|()| shared.config.cache.lookup(&shared.engine, digest)) {
            Ok(Lookup::Hit(component)) => return Ok(component),
            Ok(Lookup::Miss(_)) => tracing::warn!(plugin = name, "the compiling process left no usable artifact; compiling in this process"),
            Err(e) => tracing::warn!(plugin = name, error = e, "the compiling process failed; compiling in this process"),
        }
    }
    shared.compiles.fetch_add(1, Ordering::Relaxed);
    let component = Component::from_binary(&shared.engine, bytes).map_err(|e| format!("{e:#}"))?;
    shared.config.cache.store(&shared.engine, digest, &component);
    Ok(component)
}

/// Threads for background compiles at the lowest CPU priority (nice 19):
/// wasmtime compiles in parallel on the rayon pool it is called from, so a
/// tier-up uses what the foreground (the next plugin's Winch compile,
/// reconciles, watches) leaves of the cores instead of competing with it.
fn background_compiles() -> Option<&'static rayon::ThreadPool> {
    static POOL: OnceLock<Option<rayon::ThreadPool>> = OnceLock::new();
    POOL.get_or_init(|| {
        let pool = rayon::ThreadPoolBuilder::new().thread_name(|i| format!("wasm-tier-up-{i}")).start_handler(|_| lowest_priority()).build();
        pool.inspect_err(|e| tracing::warn!(error = %e, "cannot start the background compile threads")).ok()
    })
    .as_ref()
}

fn lowest_priority() {
    // On Linux, nice values are per thread: PRIO_PROCESS with a thread id
    // lowers this thread only.
    #[cfg(target_os = "linux")]
    // SAFETY: setpriority only reads its integer arguments.
    unsafe {
        libc::setpriority(libc::PRIO_PROCESS, libc::gettid() as libc::id_t, 19);
    }
}

fn wasmparser_is_component(bytes: &[u8]) -> bool {
    // Component binaries use layer 1 in the version field (bytes 6..8).
    bytes.len() >= 8 && bytes.starts_with(b"\0asm") && bytes[6..8] == [1, 0]
}

fn placeholder_manifest() -> Manifest {
    Manifest {
        name: String::new(),
        version: String::new(),
        parent: operator_plugin_sdk::GroupVersionKind::new("", "", ""),
        children: vec![],
        related: vec![],
        crds: vec![],
        finalizer: None,
    }
}

/// Checks what the host relies on: a DNS-1123 label as name, a parent kind,
/// CRDs that are CRDs.
fn validate_manifest(m: &Manifest) -> Result<(), String> {
    if !operator_selector::dns1123::is_label(&m.name) {
        return Err(format!("name {:?} must be a DNS-1123 label (lowercase letters, digits, '-')", m.name));
    }
    if m.parent.kind.is_empty() || m.parent.version.is_empty() {
        return Err("parent must name a version and a kind".into());
    }
    for c in &m.children {
        if c.kind.is_empty() || c.version.is_empty() {
            return Err(format!("child kind {c} must name a version and a kind"));
        }
    }
    for (i, r) in m.related.iter().enumerate() {
        check_related_kind(i, r)?;
    }
    for (i, crd) in m.crds.iter().enumerate() {
        if crd["kind"] != "CustomResourceDefinition" || crd["apiVersion"] != "apiextensions.k8s.io/v1" {
            return Err(format!("crds[{i}] is not an apiextensions.k8s.io/v1 CustomResourceDefinition"));
        }
    }
    if let Some(f) = &m.finalizer
        && !f.contains('/')
    {
        return Err(format!("finalizer {f:?} must be domain-qualified, e.g. example.com/cleanup"));
    }
    Ok(())
}

/// Checks a related kind as a manifest declares it.
fn check_related_kind(i: usize, kind: &RelatedKind) -> Result<(), String> {
    if kind.kind.kind.is_empty() || kind.kind.version.is_empty() {
        return Err(format!("related[{i}] kind {} must name a version and a kind", kind.kind));
    }
    let path_ok = |p: &String| !p.is_empty() && p.split('.').all(|s| !s.is_empty());
    match &kind.attach {
        Attachment::SelectorFrom(path) if !path_ok(path) => Err(format!("related[{i}] selector-from {path:?} is not a dotted field path")),
        Attachment::NamesFrom(paths) if paths.is_empty() => Err(format!("related[{i}] names-from names no field")),
        Attachment::NamesFrom(paths) => match paths.iter().find(|p| !path_ok(p)) {
            Some(p) => Err(format!("related[{i}] names-from {p:?} is not a dotted field path")),
            None => Ok(()),
        },
        Attachment::FixedSelector(s) => operator_selector::LabelSelector::parse(s).map(drop).map_err(|e| format!("related[{i}] fixed-selector: {e}")),
        Attachment::SelectorFrom(_) => Ok(()),
    }
}

/// Wraps a natively linked plugin so the controller and executor use it
/// exactly as a Wasm one. Its manifest is checked as a Wasm plugin's is.
pub(super) fn native(shared: &Arc<Shared>, calls: super::native::NativeCalls, manifest: Manifest) -> Result<LoadedPlugin, LoadError> {
    validate_manifest(&manifest).map_err(|detail| LoadError::Manifest { plugin: manifest.name.clone(), detail })?;
    let info = PluginInfo {
        digest: format!("native:{}@{}", manifest.name, manifest.version),
        size_bytes: 0,
        contract_version: contract::host_version().to_string(),
        imports: vec![],
        exports: vec![],
        // Nothing was read from the precompiled cache: the code is in the host binary.
        cache: CacheOutcome::Compiled,
    };
    let inner = Inner {
        shared: shared.clone(),
        name: manifest.name.as_str().into(),
        manifest,
        info,
        code: Code::Native(calls),
        states: Default::default(),
        admitted: Admitted::default(),
    };
    Ok(LoadedPlugin { inner: Arc::new(inner) })
}

impl std::fmt::Debug for LoadedPlugin {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LoadedPlugin")
            .field("name", &self.name())
            .field("version", &self.manifest().version)
            .field("digest", &self.info().digest)
            .finish()
    }
}

impl LoadedPlugin {
    pub fn name(&self) -> &str {
        &self.inner.name
    }

    pub fn manifest(&self) -> &Manifest {
        &self.inner.manifest
    }

    pub fn info(&self) -> &PluginInfo {
        &self.inner.info
    }

    /// Which compiler built the code calls run now (native plugins:
    /// [`Tier::Optimized`]).
    pub fn tier(&self) -> Tier {
        match &self.inner.code {
            Code::Wasm(code) => code.tier(),
            Code::Native(_) => Tier::Optimized,
        }
    }

    /// Runs `reconcile` on the calling thread. Use [`Self::reconcile`] from
    /// async code. A 0.1 component is not given `related` (it cannot declare
    /// related kinds, so there are none).
    pub fn reconcile_blocking(&self, parent: &str, children: &[String], now_ms: i64) -> Result<Vec<Action>, CallError> {
        self.reconcile_related_blocking(parent, children, &[], now_ms)
    }

    /// [`Self::reconcile_blocking`] with related objects (contract 0.2).
    pub fn reconcile_related_blocking(&self, parent: &str, children: &[String], related: &[String], now_ms: i64) -> Result<Vec<Action>, CallError> {
        if let Code::Native(native) = &self.inner.code {
            return (native.reconcile)(parent, children, related, now_ms).map_err(|error| CallError::Plugin { plugin: self.name().into(), error });
        }
        let result =
            self.inner.call("reconcile", now_ms, parent.len() + text_bytes(children) + text_bytes(related), |store, instance, exports| {
                exports.reconcile(store, instance, parent, children, related, now_ms)
            })?;
        match result {
            Ok(Ok(actions)) => Ok(actions),
            Ok(Err(error)) => Err(CallError::Plugin { plugin: self.name().into(), error }),
            Err(invalid) => Err(self.invalid("reconcile", invalid)),
        }
    }

    /// Remembers that this build's `validate(object, None)`, run by this
    /// host's admission on a create, found no errors in the object `uid` at
    /// `generation`, so the controller need not ask again before the
    /// parent's first reconcile (`admitted`).
    pub fn found_valid_on_create(&self, uid: &str, generation: Option<i64>) {
        self.inner.admitted.remember(uid, generation);
    }

    /// Whether this build found the object `uid` at `generation` valid on
    /// create ([`Self::found_valid_on_create`]); a record is taken once.
    pub fn take_found_valid_on_create(&self, uid: &str, generation: Option<i64>) -> bool {
        self.inner.admitted.take(uid, generation)
    }

    /// Runs `validate` on the calling thread.
    pub fn validate_blocking(&self, object: &str, old: Option<&str>) -> Result<Vec<FieldError>, CallError> {
        if let Code::Native(native) = &self.inner.code {
            return Ok((native.validate)(object, old));
        }
        self.inner
            .call("validate", 0, object.len() + old.map_or(0, str::len), |store, instance, exports| exports.validate(store, instance, object, old))
    }

    /// Runs `default` on the calling thread; the result is checked to be a
    /// JSON object.
    pub fn default_blocking(&self, object: &str) -> Result<serde_json::Value, CallError> {
        let result = match &self.inner.code {
            Code::Wasm(_) => self.inner.call("default", 0, object.len(), |store, instance, exports| exports.default(store, instance, object))?,
            Code::Native(native) => (native.default)(object),
        };
        match result {
            Ok(text) => match serde_json::from_str::<serde_json::Value>(&text) {
                Ok(v) if v.is_object() => Ok(v),
                Ok(_) => Err(self.invalid("default", bindings::InvalidOutput("the defaulted object must be a JSON object".into()))),
                Err(e) => Err(self.invalid("default", bindings::InvalidOutput(format!("the defaulted object is not valid JSON: {e}")))),
            },
            Err(error) => Err(CallError::Plugin { plugin: self.name().into(), error }),
        }
    }

    /// Runs `reconcile` on the blocking pool, at most
    /// `max_concurrent_calls` at once across the sandbox. The texts are
    /// shared (the controller's cache holds them); they are copied into the
    /// call's arguments on the blocking thread, not on the async executor.
    pub async fn reconcile(&self, parent: Arc<str>, children: Arc<[Arc<str>]>, now_ms: i64) -> Result<Vec<Action>, CallError> {
        self.reconcile_related(parent, children, Arc::from([]), now_ms).await
    }

    /// [`Self::reconcile`] with related objects (contract 0.2).
    pub async fn reconcile_related(
        &self,
        parent: Arc<str>,
        children: Arc<[Arc<str>]>,
        related: Arc<[Arc<str>]>,
        now_ms: i64,
    ) -> Result<Vec<Action>, CallError> {
        let this = self.clone();
        self.off_executor(move || {
            let children: Vec<String> = children.iter().map(|c| c.to_string()).collect();
            let related: Vec<String> = related.iter().map(|c| c.to_string()).collect();
            this.reconcile_related_blocking(&parent, &children, &related, now_ms)
        })
        .await
    }

    /// Runs `validate` on the blocking pool.
    pub async fn validate(&self, object: String, old: Option<String>) -> Result<Vec<FieldError>, CallError> {
        let this = self.clone();
        self.off_executor(move || this.validate_blocking(&object, old.as_deref())).await
    }

    /// Runs `default` on the blocking pool.
    pub async fn default(&self, object: String) -> Result<serde_json::Value, CallError> {
        let this = self.clone();
        self.off_executor(move || this.default_blocking(&object)).await
    }

    /// Runs a call where it cannot stall the executor. On a multi-thread
    /// runtime it runs in place (`block_in_place`): tokio hands this worker's
    /// queue to another thread and the caller waits for nobody, where
    /// `spawn_blocking` costs two cross-thread wake-ups per call (to the
    /// blocking thread and back), which on a small VM were as long as a
    /// 10-child reconcile. A current-thread runtime (virtual time, tests)
    /// cannot give its only worker away, so there the call goes to the
    /// blocking pool (`spawn_blocking`).
    async fn off_executor<R: Send + 'static>(&self, f: impl FnOnce() -> Result<R, CallError> + Send + 'static) -> Result<R, CallError> {
        let _permit = self.inner.shared.calls.acquire().await.map_err(|_| CallError::ShuttingDown)?;
        match tokio::runtime::Handle::current().runtime_flavor() {
            tokio::runtime::RuntimeFlavor::MultiThread => tokio::task::block_in_place(f),
            _ => tokio::task::spawn_blocking(f).await.map_err(|_| CallError::ShuttingDown)?,
        }
    }

    fn invalid(&self, op: &'static str, e: bindings::InvalidOutput) -> CallError {
        CallError::InvalidOutput { plugin: self.name().into(), op, detail: e.0 }
    }
}

impl Inner {
    /// One call in a fresh Store with the limits; traps become [`CallError`]s.
    /// `bytes` is the size of the texts it passes, which picks the pool
    /// slots it runs in ([`SizeClasses`]).
    fn call<R>(
        &self,
        op: &'static str,
        now_ms: i64,
        bytes: usize,
        f: impl FnOnce(&mut Store<CallState>, Instance, &Exports) -> wasmtime::Result<R>,
    ) -> Result<R, CallError> {
        let cfg = &self.shared.config;
        let kept = self.states.lock().unwrap_or_else(|e| e.into_inner()).pop();
        let mut state = kept.unwrap_or_else(|| CallState::new(self.name.clone(), cfg.output_cap));
        state.begin(&self.name, now_ms, cfg.memory_limit, cfg.log_cap);
        let code = match &self.code {
            Code::Wasm(code) => code,
            Code::Native(_) => unreachable!("native plugins are called directly, never through a Store"),
        };
        code.with(|build| {
            let pre = build.for_input(bytes);
            // The Store belongs to the engine that compiled this build.
            let mut store = Store::new(pre.engine(), state);
            store.limiter(|s| &mut s.limiter);
            store.set_epoch_deadline(self.shared.deadline_ticks());
            store.epoch_deadline_trap();
            let result =
                pre.instantiate(&mut store).map_err(|e| (e, true)).and_then(|instance| f(&mut store, instance, &pre.exports).map_err(|e| (e, false)));
            let (stdout, stdout_dropped) = store.data().stdout.take();
            let (stderr, stderr_dropped) = store.data().stderr.take();
            self.forward_output(&stdout, &stderr, stdout_dropped + stderr_dropped + store.data().log_dropped());
            let result = result.map_err(|(e, instantiating)| self.classify(op, e, instantiating, &stderr, store.data()));
            // Dropping the Store frees the instance; the state is kept for
            // the next call, as many as calls may run at once.
            let state = store.into_data();
            let mut states = self.states.lock().unwrap_or_else(|e| e.into_inner());
            if states.len() < cfg.max_concurrent_calls {
                states.push(state);
            }
            result
        })
    }

    fn forward_output(&self, stdout: &str, stderr: &str, dropped: u64) {
        let plugin = &*self.name;
        for line in stdout.lines().filter(|l| !l.is_empty()) {
            tracing::info!(plugin, stream = "stdout", "{line}");
        }
        for line in stderr.lines().filter(|l| !l.is_empty()) {
            tracing::warn!(plugin, stream = "stderr", "{line}");
        }
        if dropped > 0 {
            tracing::warn!(plugin, dropped_bytes = dropped, "plugin output over the per-call cap was dropped");
        }
    }

    fn classify(&self, op: &'static str, e: wasmtime::Error, instantiating: bool, stderr: &str, state: &CallState) -> CallError {
        let plugin = self.name.to_string();
        let cfg = &self.shared.config;
        if state.limiter.memory_cap_hit.is_some() {
            return CallError::MemoryLimit { plugin, op, limit: cfg.memory_limit };
        }
        if e.downcast_ref::<Trap>() == Some(&Trap::Interrupt) {
            return CallError::DeadlineExceeded { plugin, op, deadline: cfg.deadline };
        }
        if let Some(message) = panic_message(stderr) {
            return CallError::Panic { plugin, op, message };
        }
        if instantiating {
            return CallError::Instantiate { plugin, detail: format!("{e:#}") };
        }
        let message = match e.downcast_ref::<Trap>() {
            Some(trap) => trap.to_string(),
            None => format!("{e:#}"),
        };
        CallError::Trap { plugin, op, message }
    }
}

/// The bytes of text in `texts`.
fn text_bytes(texts: &[String]) -> usize {
    texts.iter().map(String::len).sum()
}

/// Extracts a Rust panic message from what the guest wrote to stderr:
/// `thread '<unnamed>' panicked at src/lib.rs:1:2:\nthe message`.
fn panic_message(stderr: &str) -> Option<String> {
    let start = stderr.find("panicked at ")?;
    let rest = &stderr[start + "panicked at ".len()..];
    let (location, message) = rest.split_once('\n').unwrap_or((rest, ""));
    let message: Vec<&str> = message.lines().take_while(|l| !l.starts_with("note: ")).collect();
    let location = location.trim_end_matches(':');
    Some(if message.is_empty() { location.to_string() } else { format!("{} (at {location})", message.join("\n")) })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn panic_messages_are_read_from_rust_guest_stderr() {
        let stderr = "\nthread '<unnamed>' panicked at src/lib.rs:10:5:\nboom: bad input\nnote: run with `RUST_BACKTRACE=1`\n";
        assert_eq!(panic_message(stderr).as_deref(), Some("boom: bad input (at src/lib.rs:10:5)"));
        assert_eq!(panic_message("no panic here"), None);
    }
}
