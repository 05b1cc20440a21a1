//! Safe plugin upgrades through the command line: real reconciles recorded
//! by `host simulate --record` and replayed by `host replay` against the same
//! build, a changed build, a trapping build and another kind. Shadow runs of
//! a candidate are runtime/tests/all/upgrades.rs.

use crate::common;

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use serde_json::{Value, json};

fn host() -> Command {
    let mut c = Command::new(env!("CARGO_BIN_EXE_host"));
    c.env("HOST_LOG", "warn").arg("--no-plugin-cache");
    c
}

fn text(o: &Output) -> (String, String) {
    (String::from_utf8_lossy(&o.stdout).into_owned(), String::from_utf8_lossy(&o.stderr).into_owned())
}

/// Three Widgets simulated for an hour of virtual time with `versioned` v1, recorded.
fn record(scratch: &Path, dir: &Path) -> Output {
    let widgets = scratch.join("widgets.yaml");
    let yaml: String = (0..3)
        .map(|i| {
            format!("apiVersion: swap.test.operator-host.dev/v1\nkind: Widget\nmetadata:\n  name: w{i}\n  namespace: default\nspec: {{}}\n---\n")
        })
        .collect();
    std::fs::write(&widgets, yaml).unwrap();
    host()
        .args(["simulate", "--for", "1h", "--plugin"])
        .arg(common::wasm("versioned"))
        .arg("--apply")
        .arg(&widgets)
        .arg("--record")
        .arg(dir)
        .output()
        .unwrap()
}

fn replay(plugin: &Path, dirs: &[&Path], json: bool) -> Output {
    let mut c = host();
    c.arg("replay").arg("--plugin").arg(plugin).args(dirs);
    if json {
        c.args(["--output", "json"]);
    }
    c.output().unwrap()
}

#[test]
fn recorded_calls_replay_agreeing_on_the_same_build_and_differing_on_v2_and_another_kind_is_bad_input() {
    let scratch = tempfile::tempdir().unwrap();
    let dir = scratch.path().join("record");
    let o = record(scratch.path(), &dir);
    let (_, err) = text(&o);
    assert!(o.status.success(), "{err}");
    assert!(err.contains("Secret values redacted"), "{err}");
    let lines: Vec<Value> = std::fs::read_dir(&dir)
        .unwrap()
        .flat_map(|f| std::fs::read_to_string(f.unwrap().path()).unwrap().lines().map(|l| serde_json::from_str(l).unwrap()).collect::<Vec<_>>())
        .collect();
    // Created (no child yet), then its child seen, then 6 resyncs... at least two per widget.
    assert!(lines.len() >= 6, "{} calls recorded", lines.len());
    let first = &lines[0];
    assert_eq!(first["plugin"], "versioned");
    assert_eq!(first["version"], "1.0.0");
    assert_eq!(first["digest"], operator_runtime::sandbox::cache::digest(&std::fs::read(common::wasm("versioned")).unwrap()));
    assert!(first["parent"].as_str().unwrap().contains("\"kind\":\"Widget\""), "the parent as the plugin saw it: {first}");
    assert!(first["now"].as_i64().unwrap() >= 1_767_225_600_000, "the virtual clock's now (2026-01-01)");
    assert!(first["answer"]["actions"].is_array(), "{first}");
    let n = lines.len();

    // The same build: every call agrees.
    let o = replay(&common::wasm("versioned"), &[&dir], false);
    let (out, err) = text(&o);
    assert_eq!(o.status.code(), Some(0), "{out}{err}");
    assert!(out.ends_with(&format!("{n} calls, {n} agree, 0 differ, 0 errors\n")), "{out}");

    // Version 2 stamps "2": every call differs, and the field is named.
    let o = replay(&common::built_plugin("versioned-v2"), &[&dir], false);
    let (out, err) = text(&o);
    assert_eq!(o.status.code(), Some(1), "{out}{err}");
    assert!(out.ends_with(&format!("{n} calls, 0 agree, {n} differ, 0 errors\n")), "{out}");
    assert!(out.contains(r#"set status .version: "1" → "2""#), "{out}");
    assert!(out.contains(r#"create ConfigMap w0-* .data.version: "1" → "2""#), "{out}");
    assert!(out.contains("patch ConfigMap default/w0-"), "a child at 1 is patched by v2: {out}");
    let o = replay(&common::built_plugin("versioned-v2"), &[&dir], true);
    assert_eq!(o.status.code(), Some(1));
    let doc: Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(doc["summary"], json!({"calls": n, "agree": 0, "differ": n, "errors": 0}));
    assert!(doc["calls"].as_array().unwrap().iter().all(|c| c["result"] == "differ" && !c["differences"].as_array().unwrap().is_empty()));
    assert!(
        doc["calls"][0]["differences"].as_array().unwrap().iter().any(|d| d["path"] == ".version" && d["old"] == "1" && d["new"] == "2"),
        "{doc}"
    );

    // A trapping build: every call is an error.
    let o = replay(&common::built_plugin("versioned-broken"), &[&dir], false);
    let (out, _) = text(&o);
    assert_eq!(o.status.code(), Some(1));
    assert!(out.ends_with(&format!("{n} calls, 0 agree, 0 differ, {n} errors\n")), "{out}");

    // Bad input: a plugin of another parent kind, a record that is not one, a missing directory.
    let o = replay(&common::wasm("hello"), &[&dir], false);
    let (_, err) = text(&o);
    assert_eq!(o.status.code(), Some(2), "{err}");
    assert!(
        err.contains("reconciles example.operator.dev/v1alpha1/Hello")
            && err.contains("versioned 1.0.0, which reconciles swap.test.operator-host.dev/v1/Widget"),
        "{err}"
    );
    let bad = scratch.path().join("bad");
    std::fs::create_dir(&bad).unwrap();
    std::fs::write(bad.join("calls-000001.jsonl"), "{\"this\": \"is not a call\"}\n").unwrap();
    let o = replay(&common::wasm("versioned"), &[&dir, &bad], false);
    let (_, err) = text(&o);
    assert_eq!(o.status.code(), Some(2), "{err}");
    assert!(err.contains("calls-000001.jsonl:1: not a recorded call"), "{err}");
    let o = replay(&common::wasm("versioned"), &[&scratch.path().join("missing")], false);
    assert_eq!(o.status.code(), Some(2));
    assert!(text(&o).1.contains("cannot read the record"), "{}", text(&o).1);
}

#[test]
fn recording_to_a_directory_that_cannot_be_written_is_a_clear_error() {
    let scratch = tempfile::tempdir().unwrap();
    let file: PathBuf = scratch.path().join("a-file");
    std::fs::write(&file, "not a directory").unwrap();
    let o = record(scratch.path(), &file.join("record"));
    let (_, err) = text(&o);
    assert_eq!(o.status.code(), Some(2), "{err}");
    assert!(err.contains("--record: cannot record to") && err.contains("is not writable"), "{err}");
}
