//! The sandbox: where plugin code runs.
//!
//! 1. One [`Sandbox`] per process holds the wasmtime `Engine` (pooling
//!    allocator, epoch interruption) and a ticker thread that advances the
//!    epoch, so every call has a wall-clock deadline.
//! 2. [`Sandbox::load`] compiles a plugin once (or loads the precompiled
//!    artifact from the [cache]; or, with [`Tiering::BaselineFirst`],
//!    serves a quick Winch build until Cranelift's is ready), checks the contract version, links
//!    it against the only imports a plugin gets (a capped `log`, and WASI
//!    with nothing in it: no files, no env, no sockets, a clock that reads
//!    the call's `now`, seeded randomness) and reads its manifest.
//! 3. Each call gets a fresh `Store` from the plugin's `InstancePre`, with a
//!    memory cap and the deadline; a failure becomes a [`CallError`] that
//!    names the plugin and the cause.
//!
//! Everything a plugin may do is decided here, in one place; defaults deny.

pub mod registry;

use operator_api::error_chain;

mod admitted;
mod bindings;
pub mod cache;
pub mod contract;
mod error;
mod exports;
pub mod heap;
mod limits;
mod native;
mod plugin;
mod pre;
mod size_class;
mod stdio;
mod wasi;

use std::sync::Arc;
use std::time::Duration;

use wasmtime::{Config, Enabled, Engine, InstanceAllocationStrategy, PoolingAllocationConfig, Strategy};

pub use bindings::InvalidOutput;
pub use cache::{CacheOutcome, Lookup, PrecompiledCache};
pub use error::{CallError, LoadError};
pub use plugin::{LoadedPlugin, PluginInfo, Tier};

/// Limits and resources of the sandbox. Every default is chosen to deny or
/// bound; see each field.
#[derive(Clone, Debug)]
pub struct SandboxConfig {
    /// Wall-clock time one call may take. Default 1 s: a reconcile is a pure
    /// function over in-memory JSON and takes micro- to milliseconds.
    pub deadline: Duration,
    /// Bytes each linear memory of a plugin instance may grow to.
    /// Default 128 MiB, far above what a reconcile of thousands of children
    /// needs, far below what would hurt the host.
    pub memory_limit: usize,
    /// Calls that may run at once (each holds one blocking thread).
    /// Default: 2 × available cores, at least 2.
    pub max_concurrent_calls: usize,
    /// Bytes of stdout + stderr kept per call; the rest is dropped and
    /// counted. Default 64 KiB.
    pub output_cap: usize,
    /// Bytes a plugin may send through the `log` import per call; the rest
    /// is dropped and counted. Default 64 KiB.
    pub log_cap: usize,
    /// Where precompiled artifacts live. Default: none (compile each load).
    pub cache: PrecompiledCache,
    /// Granularity of the deadline. Default 5 ms.
    pub epoch_tick: Duration,
    /// Write `/tmp/perf-<pid>.map` naming each compiled guest function, so
    /// `perf report` attributes time inside plugins. Default off.
    pub perf_map: bool,
    /// How a plugin that must be compiled (no cached artifact) is served.
    /// Default [`Tiering::Off`].
    pub tiering: Tiering,
    /// Where a tier-up's Cranelift compile runs: in another process that
    /// writes the artifact into [`Self::cache`]'s directory, which the
    /// sandbox then maps ([`ChildCompiler`]). Default: none (in this
    /// process).
    pub child_compiler: Option<ChildCompiler>,
}

/// Compiles a plugin's bytes with Cranelift in another process, into the
/// cache directory, with this sandbox's engine configuration (`host` runs
/// itself: `host --plugin-cache-dir DIR --no-plugin-baseline inspect FILE`).
///
/// Why: Cranelift's working memory for one plugin is tens of MiB. Compiled
/// in the host, it is freed when the compile ends but the heap stays
/// fragmented around the caches the initial lists filled meanwhile, and
/// the compiler's own code stays resident: measured with the CronJob plugin,
/// a host replica that compiled at start idled at 64-67 MiB against 29-31
/// MiB for one that loaded the same plugin precompiled. In a child process
/// all of it ends with the process.
#[derive(Clone)]
pub struct ChildCompiler(Arc<CompileInto>);

/// What a [`ChildCompiler`] runs: the plugin's bytes in, the artifact in
/// the cache directory out, or why not.
type CompileInto = dyn Fn(&[u8]) -> Result<(), String> + Send + Sync;

impl ChildCompiler {
    /// `compile(bytes)` must leave the artifact in the cache directory or
    /// say why not; on an error the sandbox compiles in this process.
    pub fn new(compile: impl Fn(&[u8]) -> Result<(), String> + Send + Sync + 'static) -> Self {
        Self(Arc::new(compile))
    }

    pub(crate) fn compile(&self, bytes: &[u8]) -> Result<(), String> {
        (self.0)(bytes)
    }
}

impl std::fmt::Debug for ChildCompiler {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("ChildCompiler")
    }
}

/// Whether a plugin that must be compiled is first served from Winch,
/// wasmtime's baseline compiler: it compiles several times faster than
/// Cranelift, into slower code. The sandbox's limits are the same for both:
/// the epoch deadline, the memory cap and a fresh instance per call belong
/// to the engine and the Store, not to the compiler.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Tiering {
    /// Compile with Cranelift before the plugin is used: the fastest code
    /// from the first call on (what benchmarks of calls need).
    #[default]
    Off,
    /// Serve the Winch build at once; Cranelift compiles on a background
    /// thread (and fills the precompiled cache) and takes over calls when it
    /// is done. A hot swap or an uncached start waits for Winch only.
    BaselineFirst,
    /// Winch only, never replaced (tests of the limits on Winch code).
    BaselineOnly,
}

impl Default for SandboxConfig {
    fn default() -> Self {
        let cores = std::thread::available_parallelism().map(|n| n.get()).unwrap_or(2);
        Self {
            deadline: Duration::from_secs(1),
            memory_limit: 128 << 20,
            max_concurrent_calls: (2 * cores).max(2),
            output_cap: 64 << 10,
            log_cap: 64 << 10,
            cache: PrecompiledCache::disabled(),
            epoch_tick: Duration::from_millis(5),
            perf_map: false,
            tiering: Tiering::Off,
            child_compiler: None,
        }
    }
}

/// The shared part of the sandbox that loaded plugins keep alive.
pub(crate) struct Shared {
    pub(crate) engine: Engine,
    pub(crate) config: SandboxConfig,
    pub(crate) linker: wasmtime::component::Linker<wasi::CallState>,
    pub(crate) calls: tokio::sync::Semaphore,
    compiles: std::sync::atomic::AtomicU64,
    /// The Winch engine, made on first use when tiering is on; `None`
    /// inside if it could not be made (plugins are then compiled by
    /// Cranelift, as without tiering).
    baseline: std::sync::OnceLock<Option<Baseline>>,
}

/// Winch's engine (an engine has one compiler) and its linker.
pub(crate) struct Baseline {
    pub(crate) engine: Engine,
    pub(crate) linker: wasmtime::component::Linker<wasi::CallState>,
}

impl Shared {
    pub(crate) fn deadline_ticks(&self) -> u64 {
        let tick = self.config.epoch_tick.as_nanos().max(1);
        // +1: the current tick may be about to end.
        u64::try_from(self.config.deadline.as_nanos().div_ceil(tick)).unwrap_or(u64::MAX).saturating_add(1)
    }

    /// The Winch engine, if tiering is on.
    pub(crate) fn baseline(&self) -> Option<&Baseline> {
        if self.config.tiering == Tiering::Off {
            return None;
        }
        self.baseline
            .get_or_init(|| {
                let made = Engine::new(&engine_config(&self.config, Strategy::Winch))
                    .and_then(|engine| Ok(Baseline { linker: wasi::linker(&engine)?, engine }));
                made.inspect_err(|e| tracing::warn!(error = %format!("{e:#}"), "no Winch engine; plugins are compiled by Cranelift before use")).ok()
            })
            .as_ref()
    }
}

/// The engine and its limits; cheap to clone.
#[derive(Clone)]
pub struct Sandbox {
    shared: Arc<Shared>,
}

impl Sandbox {
    pub fn new(config: SandboxConfig) -> anyhow::Result<Self> {
        let engine = Engine::new(&engine_config(&config, Strategy::Cranelift))?;
        let linker = wasi::linker(&engine)?;
        let shared = Arc::new(Shared {
            calls: tokio::sync::Semaphore::new(config.max_concurrent_calls.max(1)),
            engine,
            config,
            linker,
            compiles: Default::default(),
            baseline: Default::default(),
        });
        spawn_epoch_ticker(Arc::downgrade(&shared));
        Ok(Self { shared })
    }

    pub fn config(&self) -> &SandboxConfig {
        &self.shared.config
    }

    /// How many plugins this sandbox has compiled from source (cache misses).
    pub fn compilations(&self) -> u64 {
        self.shared.compiles.load(std::sync::atomic::Ordering::Relaxed)
    }

    /// Loads a plugin from its bytes. `label` names it in errors until its
    /// manifest is read (usually the file or ConfigMap key).
    pub fn load(&self, label: &str, bytes: &[u8]) -> Result<LoadedPlugin, LoadError> {
        plugin::load(&self.shared, label, bytes)
    }

    /// Wraps a plugin compiled into the host binary (for benchmarks): the same logic as its Wasm build,
    /// called directly, with no sandbox limits.
    pub fn load_native<P: operator_plugin_sdk::Plugin>(&self) -> Result<LoadedPlugin, LoadError> {
        plugin::native(&self.shared, native::NativeCalls::of::<P>(), P::manifest())
    }

    /// Loads a plugin from a file.
    pub fn load_file(&self, path: &std::path::Path) -> Result<LoadedPlugin, LoadError> {
        let bytes = std::fs::read(path).map_err(|source| LoadError::Read { path: path.to_owned(), source })?;
        self.load(&path.display().to_string(), &bytes)
    }
}

/// Bytes of a pool slot's linear memory kept resident between calls, reset
/// in place. 8 MiB covers the pages a reconcile of 1,000 children dirties
/// (5.4 MiB for cronjob, 4 MiB for mydeployment): with 2 MiB, such a call
/// page-faulted its arena's pages back in every time (~860 faults per
/// call) and ran ~1.25x slower. What lies beyond is released after every call, and
/// only pages a call dirtied are kept, so this bounds the RSS an idle slot
/// keeps after a large call; small calls keep what they dirtied.
const KEEP_RESIDENT: usize = 8 << 20;
/// Without PAGEMAP_SCAN every reset memsets the whole kept size, dirtied or
/// not: there, keep the 2 MiB a reconcile of dozens of children needs.
const KEEP_RESIDENT_WITHOUT_PAGEMAP_SCAN: usize = 2 << 20;
/// The same for a table (a few KiB in practice).
const TABLE_KEEP_RESIDENT: usize = 2 << 20;

fn engine_config(config: &SandboxConfig, compiler: Strategy) -> Config {
    let mut c = Config::new();
    c.strategy(compiler);
    c.wasm_component_model(true);
    c.epoch_interruption(true);
    // Slots for the instances and memories of all concurrent calls, plus
    // loads reading manifests. A component links a few core instances
    // (the plugin, the WASI adapter and shims).
    let slots = u32::try_from(config.max_concurrent_calls).unwrap_or(u32::MAX).saturating_mul(2).saturating_add(8);
    let mut pool = PoolingAllocationConfig::default();
    pool.total_component_instances(slots)
        .total_core_instances(slots.saturating_mul(8))
        .total_memories(slots.saturating_mul(4))
        .total_tables(slots.saturating_mul(8))
        .max_memory_size(config.memory_limit.next_multiple_of(64 << 10));
    // Every call runs in a fresh instance, so wasmtime resets a slot's memory
    // after each call. By default it madvises the whole memory away, and the
    // next call page-faults every page it touches again (a third of a small
    // call's time). Instead, reset the pages the call dirtied with memset
    // and keep them mapped: PAGEMAP_SCAN (Linux 6.7+, `Auto` falls back to
    // the first kept bytes without it) finds exactly those pages.
    // Isolation is unchanged (the next instance sees a zeroed/initial
    // memory); the memory cap is enforced by the limiter at growth, not by
    // residency.
    let keep = if PoolingAllocationConfig::is_pagemap_scan_available() { KEEP_RESIDENT } else { KEEP_RESIDENT_WITHOUT_PAGEMAP_SCAN };
    pool.pagemap_scan(Enabled::Auto).linear_memory_keep_resident(keep).table_keep_resident(TABLE_KEEP_RESIDENT);
    c.allocation_strategy(InstanceAllocationStrategy::Pooling(pool));
    if config.perf_map {
        c.profiler(wasmtime::ProfilingStrategy::PerfMap);
    }
    c
}

/// Advances the engine's epoch every tick until the sandbox is dropped.
fn spawn_epoch_ticker(shared: std::sync::Weak<Shared>) {
    std::thread::Builder::new()
        .name("wasm-epoch".into())
        .spawn(move || {
            while let Some(s) = shared.upgrade() {
                let tick = s.config.epoch_tick;
                s.engine.increment_epoch();
                if let Some(Some(b)) = s.baseline.get() {
                    b.engine.increment_epoch();
                }
                drop(s);
                std::thread::sleep(tick);
            }
        })
        .expect("spawn epoch ticker thread");
}
