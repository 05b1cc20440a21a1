//! The native comparator, loaded from `bench-native`'s shared library. That
//! library is the plugins' logic built by `cargo xtask bench` with the Wasm
//! plugins' own codegen settings (fat LTO, one codegen unit, the same LLVM
//! flags); the bench binary itself links wasmtime and kube and is built as
//! an ordinary release, so logic linked into it would be compared with
//! different settings than the Wasm side gets.

use std::path::{Path, PathBuf};

use libloading::Library;

use crate::workload::Kind;

#[repr(C)]
struct Text {
    ptr: *const u8,
    len: usize,
}

impl Text {
    fn of(s: &str) -> Self {
        Text { ptr: s.as_ptr(), len: s.len() }
    }
}

/// Opaque handles of the library.
enum Input {}
enum Outcome {}

type InputFn = unsafe extern "C" fn(u32, Text, *const Text, usize, i64) -> *mut Input;
type ReconcileFn = unsafe extern "C" fn(*const Input) -> *mut Outcome;
type JsonFn = unsafe extern "C" fn(*mut Outcome, *mut bool) -> Text;
type FreeOutcomeFn = unsafe extern "C" fn(*mut Outcome);
type FreeInputFn = unsafe extern "C" fn(*mut Input);

/// Where `cargo xtask bench` puts the library.
pub fn library_path(target_dir: &Path) -> PathBuf {
    target_dir.join("bench-native").join(format!("{}bench_native{}", std::env::consts::DLL_PREFIX, std::env::consts::DLL_SUFFIX))
}

pub struct NativeLib {
    input: InputFn,
    reconcile: ReconcileFn,
    json: JsonFn,
    free_outcome: FreeOutcomeFn,
    free_input: FreeInputFn,
    // Last: the functions above point into it.
    _lib: Library,
}

impl NativeLib {
    pub fn load(target_dir: &Path) -> anyhow::Result<Self> {
        let path = library_path(target_dir);
        anyhow::ensure!(path.exists(), "{} is missing: run `cargo xtask bench` (it builds the native comparator first)", path.display());
        // SAFETY: the library is bench-native, built from this workspace; its
        // initializers are Rust's own and it exports the functions below with
        // exactly these signatures.
        unsafe {
            let lib = Library::new(&path).map_err(|e| anyhow::anyhow!("load {}: {e}", path.display()))?;
            let input = *lib.get::<InputFn>(b"bench_native_input\0")?;
            let reconcile = *lib.get::<ReconcileFn>(b"bench_native_reconcile\0")?;
            let json = *lib.get::<JsonFn>(b"bench_native_outcome_json\0")?;
            let free_outcome = *lib.get::<FreeOutcomeFn>(b"bench_native_free_outcome\0")?;
            let free_input = *lib.get::<FreeInputFn>(b"bench_native_free_input\0")?;
            Ok(NativeLib { input, reconcile, json, free_outcome, free_input, _lib: lib })
        }
    }

    /// One call's input, copied into the library (outside any timing).
    pub fn input<'l>(&'l self, kind: Kind, parent: &str, children: &[impl AsRef<str>], now_ms: i64) -> NativeInput<'l> {
        let texts: Vec<Text> = children.iter().map(|c| Text::of(c.as_ref())).collect();
        let code = match kind {
            Kind::CronJob => 0,
            Kind::MyDeployment => 1,
        };
        // SAFETY: the texts borrow strings that outlive the call, which copies them.
        let ptr = unsafe { (self.input)(code, Text::of(parent), texts.as_ptr(), texts.len(), now_ms) };
        assert!(!ptr.is_null(), "bench-native refused kind {code}");
        NativeInput { lib: self, ptr }
    }
}

pub struct NativeInput<'l> {
    lib: &'l NativeLib,
    ptr: *mut Input,
}

impl NativeInput<'_> {
    /// The timed part: one reconcile of the prepared input.
    pub fn reconcile(&self) -> NativeOutcome<'_> {
        // SAFETY: `ptr` is a live input of this library.
        NativeOutcome { lib: self.lib, ptr: unsafe { (self.lib.reconcile)(self.ptr) } }
    }
}

impl Drop for NativeInput<'_> {
    fn drop(&mut self) {
        // SAFETY: made by this library, freed once.
        unsafe { (self.lib.free_input)(self.ptr) }
    }
}

pub struct NativeOutcome<'l> {
    lib: &'l NativeLib,
    ptr: *mut Outcome,
}

impl NativeOutcome<'_> {
    /// The actions as JSON (`Ok`) or the error as JSON (`Err`).
    pub fn json(&self) -> Result<&str, &str> {
        let mut ok = false;
        // SAFETY: `ptr` is live; the text lives as long as the outcome and is UTF-8 (serde_json wrote it).
        let text = unsafe {
            let t = (self.lib.json)(self.ptr, &mut ok);
            std::str::from_utf8_unchecked(std::slice::from_raw_parts(t.ptr, t.len))
        };
        if ok { Ok(text) } else { Err(text) }
    }

    /// The actions, parsed back into the SDK's types (for comparing answers).
    pub fn actions(&self) -> anyhow::Result<Vec<operator_plugin_sdk::Action>> {
        match self.json() {
            Ok(json) => Ok(serde_json::from_str(json)?),
            Err(e) => anyhow::bail!("native reconcile failed: {e}"),
        }
    }
}

impl Drop for NativeOutcome<'_> {
    fn drop(&mut self) {
        // SAFETY: made by this library, freed once.
        unsafe { (self.lib.free_outcome)(self.ptr) }
    }
}
