//! Runs every case under `tests/fixtures/` through the plugin exactly as the
//! Wasm export does (`operator_plugin_sdk::plugin::reconcile` over JSON text)
//! and compares with `expected.json`, the JSON `host reconcile --output json`
//! prints. The host runs the same cases through `mydeployment.wasm`.
//!
//! `UPDATE_FIXTURES=1 cargo test -p mydeployment --test fixtures` rewrites
//! the expected files; review every rewritten file: fixtures are assertions.

use std::fs;
use std::path::{Path, PathBuf};

use mydeployment::MyDeploymentPlugin;
use operator_plugin_sdk::serde_json::{self, Value, json};
use operator_plugin_sdk::{Time, plugin};
use serde::Deserialize;

fn yaml_to_json(doc: serde_yaml::Value) -> Value {
    serde_json::to_value(doc).expect("YAML that maps to JSON")
}

fn read(path: &Path) -> String {
    fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// The plugin's answer for one case directory, in the host's JSON form.
fn run_case(dir: &Path) -> Value {
    let parent: serde_yaml::Value =
        serde_yaml::from_str(&read(&dir.join("parent.yaml"))).expect("parent.yaml");
    let parent = yaml_to_json(parent).to_string();
    let children_path = dir.join("children.yaml");
    let children: Vec<String> = if children_path.exists() {
        serde_yaml::Deserializer::from_str(&read(&children_path))
            .map(|doc| {
                yaml_to_json(serde_yaml::Value::deserialize(doc).expect("children.yaml document"))
            })
            .filter(|v| !v.is_null())
            .map(|v| v.to_string())
            .collect()
    } else {
        Vec::new()
    };
    let now = Time::parse_rfc3339(read(&dir.join("now.txt")).trim()).expect("now.txt is RFC 3339");
    match plugin::reconcile::<MyDeploymentPlugin>(&parent, &children, now.unix_millis()) {
        Ok(actions) => serde_json::to_value(&actions).expect("actions serialise"),
        Err(e) => {
            json!({"error": {"reason": e.reason, "message": e.message, "retryable": e.retryable}})
        }
    }
}

fn case_dirs() -> Vec<PathBuf> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures");
    let mut dirs: Vec<PathBuf> = fs::read_dir(&root)
        .expect("tests/fixtures")
        .map(|e| e.expect("directory entry").path())
        .filter(|p| p.is_dir())
        .collect();
    dirs.sort();
    dirs
}

/// Lines of `want` and `got` side by side where they differ.
fn diff(want: &str, got: &str) -> String {
    let (w, g): (Vec<&str>, Vec<&str>) = (want.lines().collect(), got.lines().collect());
    let mut out = String::new();
    for i in 0..w.len().max(g.len()) {
        let (a, b) = (
            w.get(i).copied().unwrap_or(""),
            g.get(i).copied().unwrap_or(""),
        );
        if a != b {
            out.push_str(&format!("  line {}:\n    - {a}\n    + {b}\n", i + 1));
        }
    }
    out
}

#[test]
fn every_fixture_gives_its_expected_actions() {
    let update = std::env::var_os("UPDATE_FIXTURES").is_some_and(|v| v == "1");
    let dirs = case_dirs();
    assert!(
        dirs.len() >= 10,
        "expected the fixture cases, found {}",
        dirs.len()
    );
    let mut failures = Vec::new();
    for dir in &dirs {
        let got = serde_json::to_string_pretty(&run_case(dir)).unwrap() + "\n";
        let expected_path = dir.join("expected.json");
        if update {
            fs::write(&expected_path, &got).unwrap();
            continue;
        }
        let want_text = read(&expected_path);
        let want: Value = serde_json::from_str(&want_text).expect("expected.json");
        let got_value: Value = serde_json::from_str(&got).unwrap();
        if want != got_value {
            let name = dir.file_name().unwrap().to_string_lossy().into_owned();
            failures.push(format!(
                "{name}:\n{}",
                diff(
                    &serde_json::to_string_pretty(&want).unwrap(),
                    got.trim_end()
                )
            ));
        }
    }
    assert!(
        failures.is_empty(),
        "{} of {} fixtures differ:\n{}",
        failures.len(),
        dirs.len(),
        failures.join("\n")
    );
}

#[test]
fn fixtures_are_deterministic() {
    for dir in case_dirs() {
        assert_eq!(run_case(&dir), run_case(&dir), "{}", dir.display());
    }
}

/// Every child in a fixture is controlled by its parent, as the host
/// guarantees, so the cases are inputs the host can really produce.
#[test]
fn fixture_children_are_controlled_by_their_parent() {
    for dir in case_dirs() {
        let parent: serde_yaml::Value =
            serde_yaml::from_str(&read(&dir.join("parent.yaml"))).unwrap();
        let uid = yaml_to_json(parent)["metadata"]["uid"]
            .as_str()
            .unwrap()
            .to_string();
        let path = dir.join("children.yaml");
        if !path.exists() {
            continue;
        }
        for doc in serde_yaml::Deserializer::from_str(&read(&path)) {
            let child = yaml_to_json(serde_yaml::Value::deserialize(doc).unwrap());
            let owners = child["metadata"]["ownerReferences"]
                .as_array()
                .cloned()
                .unwrap_or_default();
            assert!(
                owners
                    .iter()
                    .any(|o| o["uid"] == uid.as_str() && o["controller"] == true),
                "{}: {}",
                dir.display(),
                child["metadata"]["name"]
            );
        }
    }
}
