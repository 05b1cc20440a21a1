//! Shared helpers of the runtime's and the host's integration tests (a
//! dev-dependency of both): where the built plugins are, a sandbox with test
//! limits, waiting for a condition, the Hostile test CRD, Events, per-process
//! plugin caches; [`process`] for tests that run the `host` binary and
//! [`soak`] for the soak suites' ledger; [`admission`] to call a webhook as
//! kube-apiserver does.

pub mod admission;
pub mod process;
pub mod soak;
pub mod trust_keys;

use std::path::PathBuf;
use std::time::Duration;

use operator_runtime::sandbox::{LoadedPlugin, PrecompiledCache, Sandbox, SandboxConfig};

/// The workspace's root directory (this crate is `tests/support` in it).
pub fn workspace_root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).ancestors().nth(2).expect("tests/support/ is two levels below the workspace root").to_path_buf()
}

fn target_dir() -> PathBuf {
    std::env::var_os("CARGO_TARGET_DIR").map(PathBuf::from).unwrap_or_else(|| workspace_root().join("target"))
}

/// A plugin built by `cargo xtask build` for wasm32-wasip2 (`target` =
/// "wasm32-wasip2") or by `cargo component build` (`target` = "wasm32-wasip1").
pub fn wasm_for(target: &str, crate_name: &str) -> PathBuf {
    let path = target_dir().join(target).join("release").join(format!("{}.wasm", crate_name.replace('-', "_")));
    assert!(path.exists(), "{} is missing: build the plugins first with `cargo xtask build`", path.display());
    path
}

pub fn wasm(crate_name: &str) -> PathBuf {
    wasm_for("wasm32-wasip2", crate_name)
}

pub fn config(deadline: Duration) -> SandboxConfig {
    SandboxConfig { deadline, memory_limit: 64 << 20, cache: PrecompiledCache::disabled(), ..SandboxConfig::default() }
}

pub fn load(sandbox: &Sandbox, crate_name: &str) -> LoadedPlugin {
    sandbox.load_file(&wasm(crate_name)).unwrap_or_else(|e| panic!("load {crate_name}: {}", operator_runtime::error_chain(&e)))
}

/// The hello plugin in each language, by label: Rust, JavaScript, Python.
pub fn hello_in_each_language() -> [(&'static str, PathBuf); 3] {
    [("rust", wasm("hello")), ("javascript", built_plugin("hello-js")), ("python", built_plugin("hello-py"))]
}

/// A plugin built by `cargo xtask build` into `target/plugins/` (the shipped
/// plugins and test variants such as `versioned-v2`).
pub fn built_plugin(name: &str) -> PathBuf {
    let path = target_dir().join("plugins").join(format!("{name}.wasm"));
    assert!(path.exists(), "{} is missing: build the plugins first with `cargo xtask build`", path.display());
    path
}

pub use operator_test_kit::{Kubectl, eventually, kubectl};

/// The parent kind of the test plugin `hostile`: `test.operator.dev/v1 Hostile`.
pub fn hostile_resource() -> kube::api::ApiResource {
    kube::api::ApiResource {
        group: "test.operator.dev".into(),
        version: "v1".into(),
        api_version: "test.operator.dev/v1".into(),
        kind: "Hostile".into(),
        plural: "hostiles".into(),
    }
}

/// Installs the Hostile CRD (any fields, the status and scale subresources) and waits until it is served.
pub async fn install_hostile_crd(client: kube::Client) {
    // The same CRD as the hostile plugin's manifest (the host installs that one too).
    let crd = serde_json::json!({
        "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
        "metadata": {"name": "hostiles.test.operator.dev"},
        "spec": {"group": "test.operator.dev", "scope": "Namespaced",
            "names": {"plural": "hostiles", "singular": "hostile", "kind": "Hostile", "listKind": "HostileList"},
            "versions": [{"name": "v1", "served": true, "storage": true,
                "subresources": {"status": {}, "scale": {"specReplicasPath": ".spec.replicas", "statusReplicasPath": ".status.replicas"}},
                "schema": {"openAPIV3Schema": {"type": "object", "x-kubernetes-preserve-unknown-fields": true}}}]}
    });
    operator_runtime::manager::install_crd(&client, "test", &crd, Duration::from_secs(30)).await.unwrap();
}

/// The Lease `name` in `default`, if there is one.
pub async fn lease(client: &kube::Client, name: &str) -> Option<k8s_openapi::api::coordination::v1::Lease> {
    kube::Api::<k8s_openapi::api::coordination::v1::Lease>::namespaced(client.clone(), "default").get_opt(name).await.unwrap()
}

/// Who holds the Lease `name` in `default` (empty when nobody or no Lease).
pub async fn lease_holder(client: &kube::Client, name: &str) -> String {
    lease(client, name).await.and_then(|l| l.spec?.holder_identity).unwrap_or_default()
}

/// How often the Lease `name` in `default` changed hands (-1 without a Lease).
pub async fn lease_transitions(client: &kube::Client, name: &str) -> i32 {
    lease(client, name).await.and_then(|l| l.spec?.lease_transitions).unwrap_or(-1)
}

/// The first `events.k8s.io` Event in `default` about the object with `uid`
/// that `matches` accepts (None until there is one, or if listing fails).
pub async fn event_about(
    client: &kube::Client,
    uid: &str,
    matches: impl Fn(&k8s_openapi::api::events::v1::Event) -> bool,
) -> Option<k8s_openapi::api::events::v1::Event> {
    let events: kube::Api<k8s_openapi::api::events::v1::Event> = kube::Api::namespaced(client.clone(), "default");
    events
        .list(&Default::default())
        .await
        .ok()?
        .items
        .into_iter()
        .find(|e| e.regarding.as_ref().and_then(|r| r.uid.as_deref()) == Some(uid) && matches(e))
}

/// The plugin cache shared by one topic's tests in this process (`topic`:
/// "cli", "run", ...), so a plugin is compiled about once per run. A cache
/// holds compiled code (up to ~140 MB for the language tests): each is
/// removed when the test process exits, and one a killed process left
/// behind by the next test process that asks for a cache.
pub fn plugin_cache_dir(topic: &str) -> PathBuf {
    static CLEANUP: std::sync::Once = std::sync::Once::new();
    CLEANUP.call_once(|| {
        remove_caches(|pid| !std::path::Path::new(&format!("/proc/{pid}")).exists());
        // SAFETY: `remove_own_caches` is an `extern "C"` function that
        // neither unwinds nor returns early from `exit`.
        unsafe { atexit(remove_own_caches) };
    });
    std::env::temp_dir().join(format!("host-{topic}-tests-{}", std::process::id()))
}

unsafe extern "C" {
    fn atexit(callback: extern "C" fn()) -> std::ffi::c_int;
}

extern "C" fn remove_own_caches() {
    let own = std::process::id();
    remove_caches(|pid| pid == own);
}

/// Removes the `host-<topic>-tests-<pid>` directories in the temp dir whose
/// pid `remove` picks.
fn remove_caches(remove: impl Fn(u32) -> bool) {
    let Ok(entries) = std::fs::read_dir(std::env::temp_dir()) else { return };
    for entry in entries.flatten() {
        let name = entry.file_name();
        let Some(pid) =
            name.to_str().and_then(|n| n.strip_prefix("host-")).and_then(|n| n.rsplit_once("-tests-")).and_then(|(_, pid)| pid.parse().ok())
        else {
            continue;
        };
        if remove(pid) {
            let _ = std::fs::remove_dir_all(entry.path());
        }
    }
}
