//! Runs every case under `tests/fixtures/` through the plugin exactly as the
//! Wasm export does and compares with `expected.json` (what `host reconcile
//! --output json` prints). `UPDATE_FIXTURES=1 cargo test -p website --test
//! fixtures` rewrites the expected files; review every one.

use website::WebsiteController;

#[test]
fn every_fixture_gives_its_expected_actions_deterministically() {
    operator_plugin_sdk::testing::check_fixtures::<WebsiteController>(concat!(env!("CARGO_MANIFEST_DIR"), "/tests/fixtures"), 2);
}
