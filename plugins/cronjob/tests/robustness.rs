//! Bad input never panics the plugin (a trap in Wasm): broken versions of
//! every fixture through default, validate and reconcile. `ROBUSTNESS_CASES`
//! raises the case count for a soak.

use cronjob::CronJobPlugin;

#[test]
fn broken_objects_get_errors_not_panics() {
    operator_plugin_sdk::testing::check_robustness::<CronJobPlugin>(concat!(env!("CARGO_MANIFEST_DIR"), "/tests/fixtures"));
}
