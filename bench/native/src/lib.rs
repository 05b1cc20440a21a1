//! BENCHMARK FIXTURE, not part of the product: the native side of "Wasm vs
//! native", built by `cargo xtask bench` with exactly the codegen settings
//! of the Wasm plugins (fat LTO, one codegen unit, the same LLVM flags), so
//! the ratio measures the sandbox and not a difference in build settings.
//!
//! A C ABI over opaque handles: the bench prepares an input once (the texts
//! copied into this library's own `String`s), then times only
//! [`bench_native_reconcile`], as it times the Wasm call; outcomes are read
//! as JSON outside the timed part and freed by this library.

use operator_plugin_sdk::{Action, ReconcileError};

/// Which shipped plugin's logic to run (the bench's `Kind`).
const CRONJOB: u32 = 0;
const MYDEPLOYMENT: u32 = 1;

/// Borrowed UTF-8 text.
#[repr(C)]
pub struct Text {
    pub ptr: *const u8,
    pub len: usize,
}

impl Text {
    /// Invalid UTF-8 is replaced, as `String::from_utf8_lossy` does.
    ///
    /// # Safety
    /// `ptr..ptr+len` must be readable for the call's duration.
    unsafe fn to_owned_string(&self) -> String {
        let bytes = unsafe { std::slice::from_raw_parts(self.ptr, self.len) };
        String::from_utf8_lossy(bytes).into_owned()
    }
}

pub struct Input {
    kind: u32,
    parent: String,
    children: Vec<String>,
    now_ms: i64,
}

pub struct Outcome {
    result: Result<Vec<Action>, ReconcileError>,
    json: Option<String>,
}

/// Copies one call's input; null for an unknown `kind`.
///
/// # Safety
/// `parent` and the `n` texts at `children` must be valid for the call.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn bench_native_input(kind: u32, parent: Text, children: *const Text, n: usize, now_ms: i64) -> *mut Input {
    if kind != CRONJOB && kind != MYDEPLOYMENT {
        return std::ptr::null_mut();
    }
    let texts = if n == 0 { &[][..] } else { unsafe { std::slice::from_raw_parts(children, n) } };
    let children = texts.iter().map(|t| unsafe { t.to_owned_string() }).collect();
    Box::into_raw(Box::new(Input { kind, parent: unsafe { parent.to_owned_string() }, children, now_ms }))
}

/// One reconcile, the same text-in path the Wasm export runs.
///
/// # Safety
/// `input` must come from [`bench_native_input`] and not be freed yet.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn bench_native_reconcile(input: *const Input) -> *mut Outcome {
    let input = unsafe { &*input };
    let result = match input.kind {
        CRONJOB => operator_plugin_sdk::plugin::reconcile::<cronjob::CronJobPlugin>(&input.parent, &input.children, input.now_ms),
        _ => operator_plugin_sdk::plugin::reconcile::<mydeployment::MyDeploymentPlugin>(&input.parent, &input.children, input.now_ms),
    };
    Box::into_raw(Box::new(Outcome { result, json: None }))
}

/// The outcome as JSON, as a hook would answer it: the actions (`*ok` set)
/// or the error (`*ok` cleared). The text lives until the outcome is freed.
///
/// # Safety
/// `outcome` must come from [`bench_native_reconcile`] and not be freed yet;
/// `ok` must be writable.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn bench_native_outcome_json(outcome: *mut Outcome, ok: *mut bool) -> Text {
    let outcome = unsafe { &mut *outcome };
    unsafe { *ok = outcome.result.is_ok() };
    let json = outcome.json.get_or_insert_with(|| match &outcome.result {
        Ok(actions) => serde_json::to_string(actions).expect("actions serialize"),
        Err(e) => serde_json::to_string(e).expect("an error serializes"),
    });
    Text { ptr: json.as_ptr(), len: json.len() }
}

/// # Safety
/// `outcome` must come from [`bench_native_reconcile`], freed once.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn bench_native_free_outcome(outcome: *mut Outcome) {
    drop(unsafe { Box::from_raw(outcome) });
}

/// # Safety
/// `input` must come from [`bench_native_input`], freed once.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn bench_native_free_input(input: *mut Input) {
    drop(unsafe { Box::from_raw(input) });
}

#[cfg(test)]
mod tests {
    use super::*;

    const CRONJOB_PARENT: &str = r#"{"apiVersion":"batch.tutorial.kubebuilder.io/v1","kind":"CronJob","metadata":{"creationTimestamp":"2026-01-15T10:00:30Z","generation":1,"name":"every-minute","namespace":"default","resourceVersion":"4102","uid":"3f6c1e2a-8d4b-4c1e-9a57-0b2d9e6f4a11"},"spec":{"concurrencyPolicy":"Allow","jobTemplate":{"spec":{"template":{"spec":{"containers":[{"name":"hello","image":"busybox"}],"restartPolicy":"OnFailure"}}}},"schedule":"*/1 * * * *"}}"#;
    const NOW_MS: i64 = 1_768_471_291_000; // 2026-01-15T10:01:31Z: one run is due.

    fn call(kind: u32, parent: &str) -> (bool, String) {
        unsafe {
            let input = bench_native_input(kind, Text { ptr: parent.as_ptr(), len: parent.len() }, std::ptr::null(), 0, NOW_MS);
            assert!(!input.is_null());
            let outcome = bench_native_reconcile(input);
            let mut ok = false;
            let t = bench_native_outcome_json(outcome, &mut ok);
            let json = std::str::from_utf8(std::slice::from_raw_parts(t.ptr, t.len)).unwrap().to_owned();
            bench_native_free_outcome(outcome);
            bench_native_free_input(input);
            (ok, json)
        }
    }

    #[test]
    fn the_c_abi_answers_what_the_sdk_call_answers() {
        let direct = operator_plugin_sdk::plugin::reconcile::<cronjob::CronJobPlugin>(CRONJOB_PARENT, &[], NOW_MS).expect("the CronJob reconciles");
        assert!(!direct.is_empty(), "a due CronJob makes a Job");
        assert_eq!(call(CRONJOB, CRONJOB_PARENT), (true, serde_json::to_string(&direct).unwrap()));
    }

    #[test]
    fn a_failed_reconcile_comes_back_as_its_error() {
        let direct = operator_plugin_sdk::plugin::reconcile::<mydeployment::MyDeploymentPlugin>("not JSON", &[], NOW_MS)
            .expect_err("text that is not JSON fails");
        assert_eq!(call(MYDEPLOYMENT, "not JSON"), (false, serde_json::to_string(&direct).unwrap()));
    }

    #[test]
    fn an_unknown_kind_is_refused() {
        let input = unsafe { bench_native_input(7, Text { ptr: "".as_ptr(), len: 0 }, std::ptr::null(), 0, 0) };
        assert!(input.is_null());
    }
}
