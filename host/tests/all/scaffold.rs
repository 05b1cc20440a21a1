//! `host new` as a plugin author outside this repository uses it: the
//! scaffolded crate builds, tests, inspects and reconciles with no edits,
//! depending on the SDK as a published crate (here its `cargo package`
//! output, patched in through the temp directory's `.cargo/config.toml`,
//! with no path back into this repository).

use crate::common;

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use common::workspace_root;

fn host(dir: &Path, args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_host")).current_dir(dir).args(args).env("HOST_LOG", "warn").arg("--no-plugin-cache").output().expect("run host")
}

fn text(o: &Output) -> String {
    format!("{}{}", String::from_utf8_lossy(&o.stdout), String::from_utf8_lossy(&o.stderr))
}

/// Cargo as a user runs it: without the variables this test run inherits
/// from its own cargo, and with a build cache kept between runs (the crate
/// itself and its dependencies stay outside the workspace).
fn cargo(dir: &Path, args: &[&str]) -> Output {
    let mut c = Command::new(std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into()));
    for (key, _) in std::env::vars_os() {
        if key.to_str().is_some_and(|k| k.starts_with("CARGO_") || k == "RUSTFLAGS") {
            c.env_remove(key);
        }
    }
    c.current_dir(dir).args(args).env("CARGO_TARGET_DIR", workspace_root().join("target/scaffold-test")).output().expect("run cargo")
}

/// Packages the SDK as `cargo publish` would upload it, unpacks it under
/// `dir`, and points crates.io's `operator-plugin-sdk` at the copy.
fn vendor_sdk(dir: &Path) -> PathBuf {
    let pkg = dir.join("pkg");
    let o =
        cargo(&workspace_root(), &["package", "-p", "operator-plugin-sdk", "--no-verify", "--allow-dirty", "--target-dir", pkg.to_str().unwrap()]);
    assert!(o.status.success(), "cargo package: {}", text(&o));
    let krate = std::fs::read_dir(pkg.join("package"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .find(|p| p.extension().is_some_and(|e| e == "crate"))
        .expect("a .crate");
    let vendor = dir.join("vendor");
    std::fs::create_dir_all(&vendor).unwrap();
    let o = Command::new("tar").arg("xzf").arg(&krate).arg("-C").arg(&vendor).output().unwrap();
    assert!(o.status.success(), "tar: {}", text(&o));
    let sdk = std::fs::read_dir(&vendor).unwrap().next().unwrap().unwrap().path();
    assert!(sdk.join("wit/plugin.wit").exists(), "the packaged SDK carries its WIT");
    std::fs::create_dir_all(dir.join(".cargo")).unwrap();
    std::fs::write(dir.join(".cargo/config.toml"), format!("[patch.crates-io]\noperator-plugin-sdk = {{ path = {:?} }}\n", sdk.to_str().unwrap()))
        .unwrap();
    sdk
}

#[test]
fn a_scaffolded_plugin_builds_tests_inspects_and_reconciles_with_no_edits() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    assert!(!dir.starts_with(workspace_root()), "the crate must be outside the workspace");
    vendor_sdk(dir);

    let o = host(dir, &["new", "demo"]);
    assert!(o.status.success(), "host new: {}", text(&o));
    let demo = dir.join("demo");
    let manifest = std::fs::read_to_string(demo.join("Cargo.toml")).unwrap();
    assert!(!manifest.contains("path ="), "the scaffold depends on the SDK by version:\n{manifest}");

    let o = cargo(&demo, &["component", "build", "--release"]);
    assert!(o.status.success(), "cargo component build: {}", text(&o));
    let o = cargo(&demo, &["test"]);
    assert!(o.status.success(), "cargo test: {}", text(&o));
    assert!(text(&o).contains("every_fixture_gives_its_expected_actions ... ok"), "{}", text(&o));
    assert!(text(&o).contains("crd_json_is_the_generated_crd ... ok"), "the scaffold's crd.json is what its types generate:\n{}", text(&o));

    let wasm = workspace_root().join("target/scaffold-test/wasm32-wasip1/release/demo.wasm");
    eprintln!("demo.wasm: {} bytes", std::fs::metadata(&wasm).unwrap().len());
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
    assert_eq!(actions[0]["create"]["data"]["message"], "Hello from the sample");
    assert_eq!(actions[2], serde_json::json!({"setStatus": {"upToDate": false}}));
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
