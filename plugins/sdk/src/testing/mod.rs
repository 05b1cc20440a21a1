//! The fixture harness for plugin tests (feature `testing`).
//!
//! A fixture is a directory `<case>/` with `parent.yaml`, an optional
//! multi-document `children.yaml`, an optional multi-document `related.yaml`
//! (related objects, contract 0.2), `now.txt` (RFC 3339) and `expected.json`:
//! exactly what `host reconcile --output json` prints for those inputs. The
//! harness runs each case through [`plugin::reconcile`](crate::plugin::reconcile),
//! the same text-in/text-out path the Wasm export runs, and the host's tests
//! run the same cases through the built `.wasm`, so native and Wasm are held
//! to one set of answers.
//!
//! `UPDATE_FIXTURES=1` rewrites `expected.json`; review every rewritten file:
//! fixtures are assertions.

pub mod crd;
pub mod diff;
pub mod robustness;

pub use crd::{assert_crd_file_matches, assert_crd_file_matches_types, assert_crds_mean_the_same, normalised_crd};
pub use diff::json_diff;
pub use robustness::check_robustness;

use std::fs;
use std::path::{Path, PathBuf};

use serde_json::{Value, json};

use crate::{Plugin, Time};

/// One case's inputs.
pub struct Fixture {
    /// The case's directory.
    pub dir: PathBuf,
    /// The parent as JSON text.
    pub parent: String,
    /// The children as JSON texts.
    pub children: Vec<String>,
    /// The related objects as JSON texts (`related.yaml`, `host reconcile --related`).
    pub related: Vec<String>,
    /// `now.txt`: the time of the call.
    pub now: Time,
}

fn read(path: &Path) -> String {
    fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

fn yaml_documents(text: &str, path: &Path) -> Vec<Value> {
    serde_saphyr::from_multiple::<Value>(text).unwrap_or_else(|e| panic!("{}: {e}", path.display())).into_iter().filter(|v| !v.is_null()).collect()
}

impl Fixture {
    /// Reads the case in `dir`; panics with the file's path on a missing or malformed file.
    pub fn load(dir: &Path) -> Self {
        let parent_path = dir.join("parent.yaml");
        let parent = yaml_documents(&read(&parent_path), &parent_path);
        assert_eq!(parent.len(), 1, "{}: exactly one parent", parent_path.display());
        let optional = |file: &str| {
            let path = dir.join(file);
            if path.exists() { yaml_documents(&read(&path), &path).iter().map(Value::to_string).collect() } else { Vec::new() }
        };
        let (children, related) = (optional("children.yaml"), optional("related.yaml"));
        let now = Time::parse_rfc3339(read(&dir.join("now.txt")).trim()).unwrap_or_else(|e| panic!("{}/now.txt: {e}", dir.display()));
        Fixture { dir: dir.to_owned(), parent: parent[0].to_string(), children, related, now }
    }

    /// The case's name: its directory's name.
    pub fn name(&self) -> String {
        self.dir.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default()
    }

    /// The plugin's answer in the host's JSON form: the actions, or `{"error": ...}`.
    pub fn run<P: Plugin>(&self) -> Value {
        match crate::plugin::reconcile_related::<P>(&self.parent, &self.children, &self.related, self.now.unix_millis()) {
            Ok(actions) => serde_json::to_value(&actions).expect("actions serialize"),
            Err(e) => json!({"error": e}),
        }
    }
}

/// Every case directory under `root`, sorted by name.
pub fn fixtures_in(root: impl AsRef<Path>) -> Vec<Fixture> {
    let root = root.as_ref();
    let mut dirs: Vec<PathBuf> = fs::read_dir(root)
        .unwrap_or_else(|e| panic!("{}: {e}", root.display()))
        .map(|e| e.expect("directory entry").path())
        .filter(|p| p.is_dir())
        .collect();
    dirs.sort();
    dirs.iter().map(|d| Fixture::load(d)).collect()
}

/// Asserts every fixture under `root` (at least `min_cases`) gives its
/// `expected.json`, gives it twice (determinism), and only feeds children
/// controlled by the parent (inputs the host can really produce).
pub fn check_fixtures<P: Plugin>(root: impl AsRef<Path>, min_cases: usize) {
    let update = std::env::var_os("UPDATE_FIXTURES").is_some_and(|v| v == "1");
    let fixtures = fixtures_in(root);
    assert!(fixtures.len() >= min_cases, "expected at least {min_cases} fixture cases, found {}", fixtures.len());
    let mut failures = Vec::new();
    for f in &fixtures {
        assert_children_controlled(f);
        let got = f.run::<P>();
        assert_eq!(got, f.run::<P>(), "{}: not deterministic", f.name());
        let expected_path = f.dir.join("expected.json");
        let pretty = serde_json::to_string_pretty(&got).expect("serializable") + "\n";
        if update {
            fs::write(&expected_path, pretty).unwrap_or_else(|e| panic!("{}: {e}", expected_path.display()));
            continue;
        }
        let want: Value = serde_json::from_str(&read(&expected_path)).unwrap_or_else(|e| panic!("{}: {e}", expected_path.display()));
        if want != got {
            failures.push(format!("{} (- expected only, + actual only, ~ expected -> actual):\n{}", f.name(), json_diff(&want, &got)));
        }
    }
    assert!(failures.is_empty(), "{} of {} fixtures differ:\n{}", failures.len(), fixtures.len(), failures.join("\n"));
}

fn assert_children_controlled(f: &Fixture) {
    let parent: Value = serde_json::from_str(&f.parent).expect("parent is JSON");
    let uid = parent["metadata"]["uid"].as_str().unwrap_or_else(|| panic!("{}: parent has no metadata.uid", f.name()));
    for child in &f.children {
        let child: Value = serde_json::from_str(child).expect("child is JSON");
        let controlled =
            child["metadata"]["ownerReferences"].as_array().is_some_and(|owners| owners.iter().any(|o| o["uid"] == uid && o["controller"] == true));
        assert!(controlled, "{}: child {} is not controlled by the parent", f.name(), child["metadata"]["name"]);
    }
}
