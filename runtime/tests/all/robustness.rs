//! Bad input through the built `.wasm`, as the host calls it: broken
//! versions of every fixture of both shipped plugins (the SDK's robustness
//! harness) must come back as answers or clean plugin errors, never a trap,
//! a panic, a deadline or the memory limit. The native run of the same
//! harness (plugins/*/tests/robustness.rs) covers many more cases cheaply;
//! this one proves the Wasm boundary (decode, encode, the sandbox) holds.

use crate::common;

use std::time::Duration;

use operator_plugin_sdk::testing::robustness::{self, Subject};
use operator_runtime::sandbox::{CallError, LoadedPlugin, Sandbox};

struct InSandbox(LoadedPlugin);

fn answer<T>(r: Result<T, CallError>) -> Result<Option<T>, String> {
    match r {
        Ok(v) => Ok(Some(v)),
        Err(CallError::Plugin { .. }) => Ok(None),
        Err(e) => Err(format!("{} ({})", e, e.kind())),
    }
}

impl Subject for InSandbox {
    fn default(&self, object: &str) -> Result<Option<String>, String> {
        Ok(answer(self.0.default_blocking(object))?.map(|v| v.to_string()))
    }
    fn validate(&self, object: &str, old: Option<&str>) -> Result<(), String> {
        answer(self.0.validate_blocking(object, old)).map(drop)
    }
    fn reconcile(&self, parent: &str, children: &[String], now_ms: i64) -> Result<(), String> {
        answer(self.0.reconcile_blocking(parent, children, now_ms)).map(drop)
    }
}

#[test]
fn broken_objects_never_trap_either_shipped_plugin() {
    let sandbox = Sandbox::new(common::config(Duration::from_secs(5))).unwrap();
    let cases = std::env::var("ROBUSTNESS_CASES").ok().and_then(|n| n.parse().ok()).unwrap_or(64);
    for name in ["cronjob", "mydeployment"] {
        let plugin = InSandbox(common::load(&sandbox, name));
        let fixtures = common::workspace_root().join("plugins").join(name).join("tests/fixtures");
        if let Err(e) = robustness::run(&plugin, &fixtures, cases) {
            panic!("{name}.wasm: {e}");
        }
    }
}
