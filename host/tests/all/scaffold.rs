//! `host new` as a plugin author outside this repository uses it: in an
//! empty directory outside the workspace, with no patch and no packaging
//! step, the scaffolded crate builds, tests, inspects and reconciles with no
//! edits. The SDK comes with the host (vendored into the new crate); its own
//! dependencies come from crates.io, as a user's would.

use crate::common;

use std::path::Path;
use std::process::{Command, Output};
use std::time::Instant;

use common::workspace_root;

fn host(dir: &Path, args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_host")).current_dir(dir).args(args).env("HOST_LOG", "warn").arg("--no-plugin-cache").output().expect("run host")
}

fn text(o: &Output) -> String {
    format!("{}{}", String::from_utf8_lossy(&o.stdout), String::from_utf8_lossy(&o.stderr))
}

/// Cargo as a user runs it: without the variables this test run inherits
/// from its own cargo, and with a build cache kept between runs under this
/// workspace's target/ (only the cache: the crate itself is outside), so a
/// machine that ran the tests once rebuilds only the new crate and its SDK.
fn cargo(dir: &Path, args: &[&str]) -> Output {
    cargo_with(dir, args, &[])
}

/// [`cargo`] with these variables set.
fn cargo_with(dir: &Path, args: &[&str], vars: &[(&str, &str)]) -> Output {
    let mut c = Command::new(std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into()));
    for (key, _) in std::env::vars_os() {
        if key.to_str().is_some_and(|k| k.starts_with("CARGO_") || k == "RUSTFLAGS") {
            c.env_remove(key);
        }
    }
    c.envs(vars.iter().copied());
    let started = Instant::now();
    let o = c.current_dir(dir).args(args).env("CARGO_TARGET_DIR", workspace_root().join("target/scaffold-test")).output().expect("run cargo");
    eprintln!("cargo {}: {:.1} s", args.join(" "), started.elapsed().as_secs_f64());
    o
}

#[test]
fn a_scaffolded_plugin_builds_tests_inspects_and_reconciles_with_no_edits() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    assert!(!dir.starts_with(workspace_root()), "the crate must be outside the workspace");

    let o = host(dir, &["new", "demo"]);
    assert!(o.status.success(), "host new: {}", text(&o));
    assert!(text(&o).contains("cargo doc --open -p operator-plugin-sdk"), "host new says how to read the SDK's docs offline: {}", text(&o));
    let demo = dir.join("demo");
    let manifest = std::fs::read_to_string(demo.join("Cargo.toml")).unwrap();
    assert!(manifest.contains(r#"operator-plugin-sdk = { path = "vendor/operator-plugin-sdk", version = "#), "{manifest}");
    let config = std::fs::read_to_string(demo.join(".cargo/config.toml")).unwrap();
    assert!(!manifest.contains("[patch") && !config.contains("[patch"), "no patch:\n{manifest}\n{config}");
    let sdk = std::fs::read_to_string(demo.join("vendor/operator-plugin-sdk/Cargo.toml")).unwrap();
    assert!(!sdk.lines().any(|l| !l.starts_with('#') && l.contains("workspace")), "the vendored SDK stands alone:\n{sdk}");
    assert!(demo.join("vendor/operator-plugin-sdk/wit/plugin.wit").exists(), "the vendored SDK carries its WIT");

    let o = cargo(&demo, &["test"]);
    assert!(o.status.success(), "cargo test: {}", text(&o));
    assert!(text(&o).contains("every_fixture_gives_its_expected_actions ... ok"), "{}", text(&o));
    assert!(text(&o).contains("crd_json_is_the_generated_crd ... ok"), "the scaffold's crd.json is what its types generate:\n{}", text(&o));
    let o = cargo(&demo, &["component", "build", "--release"]);
    assert!(o.status.success(), "cargo component build: {}", text(&o));

    let wasm = workspace_root().join("target/scaffold-test/wasm32-wasip1/release/demo.wasm");
    // Under 1 MiB the component fits a ConfigMap as it is (the API server
    // refuses bigger ones): what the scaffold's size-optimized release
    // profile is for.
    let size = std::fs::metadata(&wasm).unwrap().len();
    eprintln!("demo.wasm: {size} bytes");
    assert!(size <= 1 << 20, "the scaffold's component is {size} bytes, more than a ConfigMap holds");
    let o = host(&demo, &["inspect", wasm.to_str().unwrap()]);
    assert!(o.status.success(), "host inspect: {}", text(&o));
    for want in
        ["Plugin:     demo 0.1.0", "Parent:     demo.example.com/v1alpha1, Kind=Demo", "v1, Kind=ConfigMap", "CRDs:       demos.demo.example.com"]
    {
        assert!(text(&o).contains(want), "missing {want:?} in\n{}", text(&o));
    }
    let o = host(&demo, &["reconcile", "--plugin", wasm.to_str().unwrap(), "--parent", "samples/demo.yaml", "--now", "2026-01-01T00:00:00Z"]);
    assert!(o.status.success(), "host reconcile: {}", text(&o));
    let actions: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(actions[0]["create"]["metadata"]["name"], "example-demo", "{actions:#}");
    assert_eq!(actions[0]["create"]["data"], serde_json::json!({"message": "Hello from the sample", "replicas": "2"}));
    assert_eq!(actions[2], serde_json::json!({"setStatus": {"upToDate": false, "replicas": 0}}));

    // The schema's range is checked offline as the API server checks it.
    let too_many = demo.join("samples/too-many.yaml");
    std::fs::write(&too_many, std::fs::read_to_string(demo.join("samples/demo.yaml")).unwrap().replace("replicas: 2", "replicas: 20")).unwrap();
    let o = host(&demo, &["validate", "--plugin", wasm.to_str().unwrap(), too_many.to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(2), "{}", text(&o));
    assert!(
        text(&o).contains(r#"Demo.demo.example.com "example" is invalid: spec.replicas: Invalid value: 20: spec.replicas in body should be less than or equal to 10"#),
        "{}",
        text(&o)
    );

    // An edit of the types leaves crd.json stale: the build refuses it and
    // says how to regenerate it; after `UPDATE_CRD=1 cargo test` it builds.
    let types = demo.join("src/types.rs");
    let edited = std::fs::read_to_string(&types).unwrap().replace("/// What the ConfigMap holds;", "/// The text the ConfigMap holds;");
    std::fs::write(&types, edited).unwrap();
    let o = cargo(&demo, &["build"]);
    assert!(!o.status.success(), "a stale crd.json must fail the build: {}", text(&o));
    assert!(text(&o).contains("crd.json is stale") && text(&o).contains("UPDATE_CRD=1 cargo test"), "{}", text(&o));
    let o = cargo_with(&demo, &["test", "--lib", "crd_json"], &[("UPDATE_CRD", "1")]);
    assert!(o.status.success(), "UPDATE_CRD=1 cargo test: {}", text(&o));
    assert!(std::fs::read_to_string(demo.join("crd.json")).unwrap().contains("The text the ConfigMap holds"), "regenerated");
    let o = cargo(&demo, &["build"]);
    assert!(o.status.success(), "builds again with the regenerated crd.json: {}", text(&o));
}

/// `--sdk crates-io` is the form for when the SDK is published: a version
/// requirement and nothing vendored.
#[test]
fn host_new_can_depend_on_the_sdk_from_crates_io_instead() {
    let tmp = tempfile::tempdir().unwrap();
    let o = host(tmp.path(), &["new", "demo", "--sdk", "crates-io"]);
    assert!(o.status.success(), "host new: {}", text(&o));
    let manifest = std::fs::read_to_string(tmp.path().join("demo/Cargo.toml")).unwrap();
    let version = operator_plugin_sdk::VERSION;
    assert!(manifest.contains(&format!(r#"operator-plugin-sdk = {{ version = "{version}" }}"#)), "{manifest}");
    assert!(manifest.contains(&format!(r#"operator-plugin-sdk = {{ version = "{version}", features = ["testing"] }}"#)), "{manifest}");
    assert!(!tmp.path().join("demo/vendor").exists());
}

#[test]
fn host_new_refuses_a_non_empty_directory_and_invalid_names_with_exit_2() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    std::fs::create_dir(dir.join("taken")).unwrap();
    std::fs::write(dir.join("taken/keep.txt"), "mine").unwrap();
    let cases: [(&[&str], &str); 5] = [
        (&["new", "taken"], "taken already exists and is not empty"),
        (&["new", "My_Operator"], "invalid plugin name \"My_Operator\""),
        (&["new", "test"], "Rust keyword or a standard crate's name"),
        (&["new", "demo", "--group", "nodots"], "invalid --group \"nodots\""),
        (&["new", "demo", "--kind", "lower"], "invalid --kind \"lower\""),
    ];
    for (args, want) in cases {
        let o = host(dir, args);
        assert_eq!(o.status.code(), Some(2), "{args:?}: {}", text(&o));
        assert!(text(&o).contains(want), "{args:?}: wanted {want:?} in {}", text(&o));
    }
    assert_eq!(std::fs::read_to_string(dir.join("taken/keep.txt")).unwrap(), "mine", "nothing of the user's is touched");
    assert!(!dir.join("demo").exists(), "a refused name creates nothing");
}
