//! Runs every case under `tests/fixtures/` through the plugin exactly as the
//! Wasm export does and compares with `expected.json` (what `host reconcile
//! --output json` prints). The host's tests (host/tests/all/languages.rs) run the
//! same cases through hello.wasm and its JavaScript and Python twins.
//! `UPDATE_FIXTURES=1 cargo test -p hello --test fixtures` rewrites the
//! expected files; review every one: fixtures are assertions.

use hello::HelloController;

#[test]
fn every_fixture_gives_its_expected_actions_deterministically() {
    operator_plugin_sdk::testing::check_fixtures::<HelloController>(concat!(env!("CARGO_MANIFEST_DIR"), "/tests/fixtures"), 5);
}
