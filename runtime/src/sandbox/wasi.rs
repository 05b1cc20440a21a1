//! What a plugin instance can reach: the per-call state behind a Store, the
//! linker, and the two capabilities a plugin gets — the contract's `log` and
//! a WASI context with nothing in it.

use std::sync::Arc;
use std::time::Duration;

use rand::SeedableRng;
use wasmtime::Engine;
use wasmtime::component::{HasSelf, Linker, ResourceTable};
use wasmtime_wasi::clocks::{HostMonotonicClock, HostWallClock};
use wasmtime_wasi::{WasiCtx, WasiCtxBuilder, WasiCtxView, WasiView};

use super::bindings::{v0_1, v0_2};
use super::limits::CallLimiter;
use super::stdio::CappedOutput;

/// Everything one call's Store holds.
pub(crate) struct CallState {
    wasi: WasiCtx,
    table: ResourceTable,
    pub(crate) limiter: CallLimiter,
    pub(crate) stdout: CappedOutput,
    pub(crate) stderr: CappedOutput,
    log: LogBudget,
}

struct LogBudget {
    plugin: Arc<str>,
    remaining: usize,
    dropped: u64,
}

impl CallState {
    /// A state whose clock reads `now_ms` and whose randomness is seeded by it.
    pub(crate) fn new(plugin: Arc<str>, now_ms: i64, memory_limit: usize, output_cap: usize, log_cap: usize) -> Self {
        let stdout = CappedOutput::new(output_cap);
        let stderr = CappedOutput::new(output_cap);
        let mut b = WasiCtxBuilder::new();
        // Deny by default, explicitly: no args, env, preopened dirs or stdin
        // (the builder starts empty), and no network of any kind.
        b.allow_tcp(false).allow_udp(false).allow_ip_name_lookup(false);
        b.socket_addr_check(|_, _| Box::pin(async { false }));
        b.stdout(stdout.clone()).stderr(stderr.clone());
        b.wall_clock(FrozenWallClock(now_ms));
        b.monotonic_clock(FrozenMonotonicClock);
        let seed = now_ms as u64;
        b.secure_random(rand::rngs::StdRng::seed_from_u64(seed));
        b.insecure_random(rand::rngs::StdRng::seed_from_u64(seed.rotate_left(17)));
        b.insecure_random_seed(u128::from(seed));
        Self {
            wasi: b.build(),
            table: ResourceTable::new(),
            limiter: CallLimiter::new(memory_limit, 100_000),
            stdout,
            stderr,
            log: LogBudget { plugin, remaining: log_cap, dropped: 0 },
        }
    }

    /// Bytes of `log` output dropped by the cap in this call.
    pub(crate) fn log_dropped(&self) -> u64 {
        self.log.dropped
    }
}

impl WasiView for CallState {
    fn ctx(&mut self) -> WasiCtxView<'_> {
        WasiCtxView { ctx: &mut self.wasi, table: &mut self.table }
    }
}

impl CallState {
    /// The contract's `log`, whichever minor the plugin speaks.
    fn log_line(&mut self, level: tracing::Level, message: String) {
        let budget = &mut self.log;
        if message.len() > budget.remaining {
            budget.dropped += message.len() as u64;
            budget.remaining = 0;
            return;
        }
        budget.remaining -= message.len();
        let plugin = &*budget.plugin;
        match level {
            tracing::Level::TRACE => tracing::trace!(plugin, "{message}"),
            tracing::Level::DEBUG => tracing::debug!(plugin, "{message}"),
            tracing::Level::INFO => tracing::info!(plugin, "{message}"),
            tracing::Level::WARN => tracing::warn!(plugin, "{message}"),
            tracing::Level::ERROR => tracing::error!(plugin, "{message}"),
        }
    }
}

/// `log` of each contract minor (the same enum under another path).
macro_rules! log_host {
    ($minor:ident) => {
        impl $minor::wit_log::Host for CallState {
            fn log(&mut self, level: $minor::wit_log::Level, message: String) {
                use $minor::wit_log::Level as L;
                let level = match level {
                    L::Trace => tracing::Level::TRACE,
                    L::Debug => tracing::Level::DEBUG,
                    L::Info => tracing::Level::INFO,
                    L::Warn => tracing::Level::WARN,
                    L::Error => tracing::Level::ERROR,
                };
                self.log_line(level, message);
            }
        }
    };
}
log_host!(v0_1);
log_host!(v0_2);

/// Wall clock reads return the call's `now`, so a plugin that reads the
/// clock anyway stays deterministic.
struct FrozenWallClock(i64);

impl HostWallClock for FrozenWallClock {
    fn resolution(&self) -> Duration {
        Duration::from_millis(1)
    }

    fn now(&self) -> Duration {
        Duration::from_millis(u64::try_from(self.0).unwrap_or(0))
    }
}

/// The monotonic clock does not move within a call.
struct FrozenMonotonicClock;

impl HostMonotonicClock for FrozenMonotonicClock {
    fn resolution(&self) -> u64 {
        1
    }

    fn now(&self) -> u64 {
        0
    }
}

/// The linker every plugin is instantiated with: WASI (empty context) and
/// the contract's `log`.
pub(crate) fn linker(engine: &Engine) -> wasmtime::Result<Linker<CallState>> {
    let mut linker = Linker::new(engine);
    wasmtime_wasi::p2::add_to_linker_sync(&mut linker)?;
    // Each minor imports its own `log@0.x.0`, so both are linked.
    v0_1::Plugin::add_to_linker::<_, HasSelf<_>>(&mut linker, |s| s)?;
    v0_2::Plugin::add_to_linker::<_, HasSelf<_>>(&mut linker, |s| s)?;
    Ok(linker)
}
