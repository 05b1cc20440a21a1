//! Benchmark 1: one reconcile in the sandbox (fresh Store + instantiate +
//! call + decode, `LoadedPlugin::reconcile_blocking`) against the same
//! plugin logic compiled natively (`operator_plugin_sdk::plugin::reconcile`,
//! exactly the text path the Wasm export runs, from the `bench-native`
//! library built with the Wasm plugins' codegen settings), per number of
//! children.

use std::time::{Duration, Instant};

use operator_runtime::sandbox::LoadedPlugin;

use crate::Profile;
use crate::stats::Summary;
use crate::workload::{self, Input, Kind};

pub const SIZES: [usize; 4] = [0, 10, 100, 1000];

/// One plugin at one size.
#[derive(Clone, Debug, serde::Serialize)]
pub struct Row {
    pub kind: Kind,
    pub children: usize,
    /// Microseconds per reconcile.
    pub wasm: Summary,
    /// `bench-native`: built with the Wasm plugins' codegen settings.
    pub native: Summary,
    /// The same logic linked into this binary, built as an ordinary release
    /// (no LTO, LLVM's default inlining): what a natively built operator gets.
    pub native_default: Summary,
}

impl Row {
    /// Wasm against native with the same build settings: the sandbox's cost.
    pub fn ratio(&self) -> f64 {
        self.wasm.median / self.native.median
    }

    /// Wasm against an ordinary native release build.
    pub fn ratio_default(&self) -> f64 {
        self.wasm.median / self.native_default.median
    }
}

/// The plugin's text-in/text-out reconcile linked into this binary.
type LinkedReconcile = fn(&str, &[String], i64) -> Result<Vec<operator_plugin_sdk::Action>, operator_plugin_sdk::ReconcileError>;

fn linked_reconcile(kind: Kind) -> LinkedReconcile {
    match kind {
        Kind::CronJob => operator_plugin_sdk::plugin::reconcile::<cronjob::CronJobPlugin>,
        Kind::MyDeployment => operator_plugin_sdk::plugin::reconcile::<mydeployment::MyDeploymentPlugin>,
    }
}

/// How many measured pairs a size gets: enough for the time budget, within
/// bounds, estimated from one timed warm-up call.
fn iterations(profile: &Profile, one_pair: Duration) -> usize {
    let budget = profile.per_measurement();
    let n = (budget.as_secs_f64() / one_pair.as_secs_f64().max(1e-7)) as usize;
    n.clamp(profile.min_iterations(), 20_000)
}

/// Measures the three variants (Wasm, native with the same build settings,
/// the ordinary native build) interleaved call by call, so load that comes
/// and goes on the machine hits them alike.
pub fn measure(profile: &Profile, kind: Kind, plugins: &crate::Plugins, n: usize) -> anyhow::Result<Row> {
    let plugin = plugins.get(kind);
    let Input { parent, children, now_ms } = workload::input(kind, n);
    let native_lib = plugins.native()?;
    let native = native_lib.input(kind, &parent, &children, now_ms);
    // Same answer both ways, or the comparison means nothing.
    let from_wasm = plugin.reconcile_blocking(&parent, &children, now_ms)?;
    let from_native = native.reconcile().actions().map_err(|e| anyhow::anyhow!("{}: {e:#}", kind.plugin()))?;
    anyhow::ensure!(from_wasm == from_native, "{} with {n} children: Wasm and native disagree", kind.plugin());
    let linked = linked_reconcile(kind);
    let from_linked = linked(&parent, &children, now_ms).map_err(|e| anyhow::anyhow!("{}: {e:?}", kind.plugin()))?;
    anyhow::ensure!(from_wasm == from_linked, "{} with {n} children: Wasm and the linked native build disagree", kind.plugin());

    let start = Instant::now();
    for _ in 0..3 {
        let _ = plugin.reconcile_blocking(&parent, &children, now_ms)?;
        let _ = native.reconcile();
        let _ = linked(&parent, &children, now_ms);
    }
    let iters = iterations(profile, start.elapsed() / 3);
    let (mut wasm, mut nat, mut nat_default) = (Vec::with_capacity(iters), Vec::with_capacity(iters), Vec::with_capacity(iters));
    for _ in 0..iters {
        let t = Instant::now();
        let a = plugin.reconcile_blocking(&parent, &children, now_ms)?;
        wasm.push(t.elapsed());
        std::hint::black_box(a);
        let t = Instant::now();
        let a = native.reconcile();
        nat.push(t.elapsed());
        std::hint::black_box(a);
        let t = Instant::now();
        let a = linked(&parent, &children, now_ms);
        nat_default.push(t.elapsed());
        std::hint::black_box(a).ok();
    }
    Ok(Row { kind, children: n, wasm: Summary::micros(&wasm), native: Summary::micros(&nat), native_default: Summary::micros(&nat_default) })
}

pub fn run(profile: &Profile, plugins: &crate::Plugins) -> anyhow::Result<Vec<Row>> {
    let mut rows = Vec::new();
    for kind in Kind::ALL {
        for n in SIZES {
            let row = measure(profile, kind, plugins, n)?;
            eprintln!(
                "bench: reconcile {} {n:>4} {}: wasm {:.1} µs, native {:.1} µs (ordinary release {:.1} µs), ratio {:.2} ({:.2})",
                kind.plugin(),
                kind.child(),
                row.wasm.median,
                row.native.median,
                row.native_default.median,
                row.ratio(),
                row.ratio_default()
            );
            rows.push(row);
        }
    }
    Ok(rows)
}

/// `bench loop`: `calls` reconciles of one input, nothing measured, for a
/// profiler to attribute the cost of a call.
pub fn call_loop(kind: Kind, plugins: &crate::Plugins, n: usize, calls: usize, native: bool) -> anyhow::Result<()> {
    let (plugin, Input { parent, children, now_ms }) = (plugins.get(kind), workload::input(kind, n));
    let native_lib = if native { Some(plugins.native()?) } else { None };
    let native_input = native_lib.as_ref().map(|lib| lib.input(kind, &parent, &children, now_ms));
    let start = Instant::now();
    for _ in 0..calls {
        if let Some(input) = &native_input {
            std::hint::black_box(input.reconcile());
        } else {
            std::hint::black_box(plugin.reconcile_blocking(&parent, &children, now_ms)?);
        }
    }
    eprintln!("bench: {calls} calls, {:.1} µs per call", start.elapsed().as_secs_f64() * 1e6 / calls as f64);
    Ok(())
}

/// `bench compare`: two builds of one plugin (e.g. before and after a guest
/// change) interleaved call by call at each size, so a change is measured
/// under the same load; prints medians and after/before.
pub fn compare(profile: &Profile, kind: Kind, before: &LoadedPlugin, after: &LoadedPlugin) -> anyhow::Result<()> {
    for n in SIZES {
        let Input { parent, children, now_ms } = workload::input(kind, n);
        anyhow::ensure!(
            before.reconcile_blocking(&parent, &children, now_ms)? == after.reconcile_blocking(&parent, &children, now_ms)?,
            "{} with {n} children: the two builds disagree",
            kind.plugin()
        );
        let start = Instant::now();
        for _ in 0..3 {
            before.reconcile_blocking(&parent, &children, now_ms)?;
            after.reconcile_blocking(&parent, &children, now_ms)?;
        }
        let iters = iterations(profile, start.elapsed() / 3);
        let (mut a, mut b) = (Vec::with_capacity(iters), Vec::with_capacity(iters));
        for _ in 0..iters {
            let t = Instant::now();
            std::hint::black_box(before.reconcile_blocking(&parent, &children, now_ms)?);
            a.push(t.elapsed());
            let t = Instant::now();
            std::hint::black_box(after.reconcile_blocking(&parent, &children, now_ms)?);
            b.push(t.elapsed());
        }
        let (a, b) = (Summary::micros(&a), Summary::micros(&b));
        eprintln!(
            "bench: compare {} {n:>4} {}: before {:.1} µs, after {:.1} µs, after/before {:.2}",
            kind.plugin(),
            kind.child(),
            a.median,
            b.median,
            b.median / a.median
        );
    }
    Ok(())
}
