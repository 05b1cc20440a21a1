//! What a plugin instance can reach: the per-call state behind a Store, the
//! linker, and the two capabilities a plugin gets — the contract's `log` and
//! a WASI context with nothing in it.

use std::sync::atomic::{AtomicI64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use rand::SeedableRng;
use wasmtime::Engine;
use wasmtime::StoreContextMut;
use wasmtime::component::{HasSelf, Linker, ResourceTable};
use wasmtime_wasi::clocks::{HostMonotonicClock, HostWallClock};
use wasmtime_wasi::{WasiCtx, WasiCtxBuilder, WasiCtxView, WasiView};

use super::bindings::{v0_1, v0_2, v0_3, v0_4};
use super::limits::CallLimiter;
use super::stdio::CappedOutput;

/// Everything one call's Store holds. A plugin keeps its states between
/// calls: the WASI context in it is configuration only (no env,
/// files or sockets) and costly to build (the builder seeds RNGs from the
/// thread's generator twice), so [`CallState::begin`] gives a kept one the
/// next call's clock, seeds, budgets and an empty resource table instead.
pub(crate) struct CallState {
    wasi: WasiCtx,
    table: ResourceTable,
    pub(crate) limiter: CallLimiter,
    pub(crate) stdout: CappedOutput,
    pub(crate) stderr: CappedOutput,
    log: LogBudget,
    /// What the context's clock and RNGs read, set per call.
    now_ms: Arc<AtomicI64>,
    secure_random: CallRng,
    insecure_random: CallRng,
    /// What `wasi:random/insecure-seed` answers (served by [`linker`], as
    /// the context's own seed is fixed when it is built).
    insecure_seed: u128,
}

struct LogBudget {
    plugin: Arc<str>,
    remaining: usize,
    dropped: u64,
}

impl CallState {
    /// A state for calls of `plugin`; [`Self::begin`] readies it for one.
    pub(crate) fn new(plugin: Arc<str>, output_cap: usize) -> Self {
        let stdout = CappedOutput::new(output_cap);
        let stderr = CappedOutput::new(output_cap);
        let now_ms = Arc::new(AtomicI64::new(0));
        let secure_random = CallRng::default();
        let insecure_random = CallRng::default();
        let mut b = WasiCtxBuilder::new();
        // Deny by default, explicitly: no env, preopened dirs or stdin (the
        // builder starts empty), and no network of any kind. The one argument
        // is a program name, the same for every plugin: Go's libraries read
        // os.Args[0] while they initialize (klog's init indexes it).
        b.arg("plugin");
        b.allow_tcp(false).allow_udp(false).allow_ip_name_lookup(false);
        b.socket_addr_check(|_, _| Box::pin(async { false }));
        b.stdout(stdout.clone()).stderr(stderr.clone());
        b.wall_clock(FrozenWallClock(now_ms.clone()));
        b.monotonic_clock(FrozenMonotonicClock);
        b.secure_random(secure_random.clone());
        b.insecure_random(insecure_random.clone());
        Self {
            wasi: b.build(),
            table: ResourceTable::new(),
            limiter: CallLimiter::new(0, 0),
            stdout,
            stderr,
            log: LogBudget { plugin, remaining: 0, dropped: 0 },
            now_ms,
            secure_random,
            insecure_random,
            insecure_seed: 0,
        }
    }

    /// Readies the state for a call at `now_ms`: the clock reads it and the
    /// randomness is seeded by it (so a call is a function of its inputs),
    /// the budgets are full, and nothing of an earlier call is left: its
    /// resources are dropped with the old table, its output was taken.
    pub(crate) fn begin(&mut self, plugin: &Arc<str>, now_ms: i64, memory_limit: usize, log_cap: usize) {
        self.now_ms.store(now_ms, Ordering::Relaxed);
        let seed = now_ms as u64;
        self.secure_random.reseed(seed);
        self.insecure_random.reseed(seed.rotate_left(17));
        self.insecure_seed = u128::from(seed);
        self.table = ResourceTable::new();
        self.limiter = CallLimiter::new(memory_limit, 100_000);
        // The name a load's first call had is its file's until the manifest names it.
        self.log.plugin = plugin.clone();
        self.log.remaining = log_cap;
        self.log.dropped = 0;
        self.stdout.take();
        self.stderr.take();
    }

    /// Bytes of `log` output dropped by the cap in this call.
    pub(crate) fn log_dropped(&self) -> u64 {
        self.log.dropped
    }
}

/// A seeded RNG the WASI context holds and [`CallState::begin`] reseeds.
#[derive(Clone)]
struct CallRng(Arc<Mutex<rand::rngs::StdRng>>);

impl Default for CallRng {
    fn default() -> Self {
        Self(Arc::new(Mutex::new(rand::rngs::StdRng::seed_from_u64(0))))
    }
}

impl CallRng {
    fn reseed(&self, seed: u64) {
        *self.0.lock().unwrap_or_else(|e| e.into_inner()) = rand::rngs::StdRng::seed_from_u64(seed);
    }
}

impl rand::TryRng for CallRng {
    type Error = std::convert::Infallible;

    fn try_next_u32(&mut self) -> Result<u32, Self::Error> {
        self.0.lock().unwrap_or_else(|e| e.into_inner()).try_next_u32()
    }

    fn try_next_u64(&mut self) -> Result<u64, Self::Error> {
        self.0.lock().unwrap_or_else(|e| e.into_inner()).try_next_u64()
    }

    fn try_fill_bytes(&mut self, dst: &mut [u8]) -> Result<(), Self::Error> {
        self.0.lock().unwrap_or_else(|e| e.into_inner()).try_fill_bytes(dst)
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
log_host!(v0_3);
log_host!(v0_4);

/// Wall clock reads return the call's `now`, so a plugin that reads the
/// clock anyway stays deterministic.
struct FrozenWallClock(Arc<AtomicI64>);

impl HostWallClock for FrozenWallClock {
    fn resolution(&self) -> Duration {
        Duration::from_millis(1)
    }

    fn now(&self) -> Duration {
        Duration::from_millis(u64::try_from(self.0.load(Ordering::Relaxed)).unwrap_or(0))
    }
}

/// The monotonic clock does not move within a call. It reads 1, not 0: the
/// Go runtime refuses to start on a monotonic clock that reads zero
/// ("nanotime returning zero").
struct FrozenMonotonicClock;

impl HostMonotonicClock for FrozenMonotonicClock {
    fn resolution(&self) -> u64 {
        1
    }

    fn now(&self) -> u64 {
        1
    }
}

/// The linker every plugin is instantiated with: WASI (empty context) and
/// the contract's `log`.
pub(crate) fn linker(engine: &Engine) -> wasmtime::Result<Linker<CallState>> {
    let mut linker = Linker::new(engine);
    wasmtime_wasi::p2::add_to_linker_sync(&mut linker)?;
    // The context's insecure seed is fixed when it is built; a kept
    // context serves many calls, so the seed of the current call is
    // answered from the state instead (the version wasmtime-wasi links;
    // a plugin's 0.2.x import resolves to it).
    linker.allow_shadowing(true);
    linker.instance("wasi:random/insecure-seed@0.2.12")?.func_wrap("insecure-seed", |store: StoreContextMut<'_, CallState>, (): ()| {
        let seed = store.data().insecure_seed;
        Ok(((seed as u64, (seed >> 64) as u64),))
    })?;
    linker.allow_shadowing(false);
    // Each minor imports its own `log@0.x.0`, so every one is linked.
    v0_1::Plugin::add_to_linker::<_, HasSelf<_>>(&mut linker, |s| s)?;
    v0_2::Plugin::add_to_linker::<_, HasSelf<_>>(&mut linker, |s| s)?;
    v0_3::Plugin::add_to_linker::<_, HasSelf<_>>(&mut linker, |s| s)?;
    v0_4::Plugin::add_to_linker::<_, HasSelf<_>>(&mut linker, |s| s)?;
    Ok(linker)
}

#[cfg(test)]
mod tests {
    use rand::TryRng;

    use super::*;

    fn draw(rng: &CallRng) -> [u8; 32] {
        let mut bytes = [0; 32];
        rng.clone().try_fill_bytes(&mut bytes).unwrap();
        bytes
    }

    #[test]
    fn a_kept_state_begins_a_call_as_a_new_state_would() {
        let plugin: Arc<str> = "p".into();
        let mut fresh = CallState::new(plugin.clone(), 16);
        fresh.begin(&plugin, 1_700_000_000_000, 1 << 20, 8);
        let expected = (draw(&fresh.secure_random), draw(&fresh.insecure_random), fresh.insecure_seed);

        // A state that served a call at another time, logged, wrote output
        // and held a resource.
        let mut kept = CallState::new(plugin.clone(), 16);
        kept.begin(&plugin, 42, 1 << 20, 8);
        draw(&kept.secure_random);
        kept.log_line(tracing::Level::INFO, "over the cap".into());
        kept.stdout.append(b"left over");
        kept.table.push(7u32).unwrap();

        kept.begin(&plugin, 1_700_000_000_000, 1 << 20, 8);
        assert_eq!((draw(&kept.secure_random), draw(&kept.insecure_random), kept.insecure_seed), expected);
        assert_eq!(kept.now_ms.load(Ordering::Relaxed), 1_700_000_000_000);
        assert!(kept.table.is_empty(), "the previous call's resources are gone");
        assert_eq!((kept.log.remaining, kept.log_dropped()), (8, 0));
        assert_eq!(kept.stdout.take(), (String::new(), 0));
    }
}
