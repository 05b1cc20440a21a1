//! `host inspect` and `host reconcile` as a user runs them: output formats,
//! exit codes and messages for bad input.

use crate::common;

use std::path::Path;
use std::process::{Command, Output};

use common::{wasm, workspace_root};

fn host(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_host")).args(args).env("HOST_LOG", "warn").arg("--plugin-cache-dir").arg(cache_dir()).output().expect("run host")
}

/// Shared by all CLI tests (the cache is safe for concurrent use), so each
/// plugin is compiled once per run rather than once per invocation.
fn cache_dir() -> std::path::PathBuf {
    common::plugin_cache_dir("cli")
}

fn stdout(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

fn write(dir: &Path, name: &str, text: &str) -> String {
    let p = dir.join(name);
    std::fs::write(&p, text).unwrap();
    p.to_str().unwrap().to_string()
}

const HELLO: &str =
    "apiVersion: example.operator.dev/v1alpha1\nkind: Hello\nmetadata:\n  name: world\n  namespace: default\n  uid: u-1\nspec:\n  greeting: Hi\n";

#[test]
fn inspect_shows_manifest_contract_and_interfaces() {
    let o = host(&["inspect", wasm("cronjob").to_str().unwrap()]);
    assert!(o.status.success(), "{}", stderr(&o));
    let text = stdout(&o);
    for want in [
        "Plugin:     cronjob",
        "Contract:   operator:plugin@0.4.0",
        "accepts 0.1.x, 0.2.x, 0.3.x, 0.4.x",
        "Parent:     batch.tutorial.kubebuilder.io/v1, Kind=CronJob",
        "batch/v1, Kind=Job",
        "Related:    <none>",
        "operator:plugin/controller@0.4.0",
        "operator:plugin/desired@0.4.0",
        "operator:plugin/prioritized@0.4.0",
        "wasi:cli/stdout",
    ] {
        assert!(text.contains(want), "missing {want:?} in\n{text}");
    }
    let o = host(&["inspect", wasm("cronjob").to_str().unwrap(), "--output", "json"]);
    let doc: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(doc["manifest"]["name"], "cronjob");
    assert_eq!(doc["info"]["contractVersion"], "0.4.0");
    assert!(doc["info"]["sizeBytes"].as_u64().unwrap() > 0);
    assert_eq!(doc["manifest"]["crds"][0]["kind"], "CustomResourceDefinition");
}

#[test]
fn inspect_shows_related_kinds_and_reconcile_takes_related_objects_of_those_kinds_only() {
    let related = wasm("related");
    let o = host(&["inspect", related.to_str().unwrap()]);
    let text = stdout(&o);
    assert!(text.contains("Related:    v1, Kind=ConfigMap named at spec.configMapRef.name; v1, Kind=Pod by the selector at spec.selector"), "{text}");
    let dir = tempfile::tempdir().unwrap();
    let parent = write(
        dir.path(),
        "parent.yaml",
        "apiVersion: related.test.operator-host.dev/v1\nkind: Watcher\nmetadata: {name: w, namespace: default, uid: u1}\nspec: {configMapRef: {name: cm}}\n",
    );
    let objects = write(
        dir.path(),
        "related.yaml",
        "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: cm, namespace: default}\ndata: {v: '7'}\n---\napiVersion: v1\nkind: Pod\nmetadata: {name: p, namespace: default}\n",
    );
    let o = host(&["reconcile", "--plugin", related.to_str().unwrap(), "--parent", &parent, "--related", &objects]);
    assert!(o.status.success(), "{}", stderr(&o));
    let actions: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(actions[0]["setStatus"]["related"], serde_json::json!(["ConfigMap/cm=7", "Pod/p"]));
    let stranger = write(dir.path(), "secret.yaml", "apiVersion: v1\nkind: Secret\nmetadata: {name: s, namespace: default}\n");
    let o = host(&["reconcile", "--plugin", related.to_str().unwrap(), "--parent", &parent, "--related", &stranger]);
    assert_eq!(o.status.code(), Some(2));
    assert!(stderr(&o).contains("not of a related kind of plugin related") && stderr(&o).contains("v1 Secret s"), "{}", stderr(&o));
}

#[test]
fn reconcile_prints_one_key_actions_as_json_and_yaml() {
    let dir = tempfile::tempdir().unwrap();
    let parent = write(dir.path(), "parent.yaml", HELLO);
    let hello = wasm("hello");
    let o = host(&["reconcile", "--plugin", hello.to_str().unwrap(), "--parent", &parent, "--now", "2026-01-01T00:00:00Z"]);
    assert!(o.status.success(), "{}", stderr(&o));
    let actions: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    let keys: Vec<String> = actions.as_array().unwrap().iter().map(|a| a.as_object().unwrap().keys().next().unwrap().clone()).collect();
    assert_eq!(keys, ["create", "event", "setStatus"]);
    assert_eq!(actions[0]["create"]["data"]["greeting"], "Hi");

    let o = host(&["reconcile", "--plugin", hello.to_str().unwrap(), "--parent", &parent, "--output", "yaml"]);
    assert!(stdout(&o).starts_with("- create:"), "{}", stdout(&o));
}

#[test]
fn children_may_be_multi_document_yaml_a_json_array_a_list_empty_or_missing() {
    let dir = tempfile::tempdir().unwrap();
    let parent = write(dir.path(), "parent.yaml", HELLO);
    let owner = r#"[{"apiVersion":"example.operator.dev/v1alpha1","kind":"Hello","name":"world","uid":"u-1","controller":true}]"#;
    let cm = format!(
        r#"{{"apiVersion":"v1","kind":"ConfigMap","metadata":{{"name":"world-greeting","namespace":"default","ownerReferences":{owner}}},"data":{{"greeting":"Hi"}}}}"#
    );
    let other =
        format!(r#"{{"apiVersion":"v1","kind":"ConfigMap","metadata":{{"name":"unrelated","namespace":"default","ownerReferences":{owner}}}}}"#);
    let forms = [
        write(dir.path(), "multi.yaml", &format!("{other}\n---\n{cm}\n")),
        write(dir.path(), "array.json", &format!("[{other},{cm}]")),
        write(dir.path(), "list.json", &format!(r#"{{"apiVersion":"v1","kind":"List","items":[{other},{cm}]}}"#)),
    ];
    let hello = wasm("hello");
    for children in &forms {
        let o = host(&["reconcile", "--plugin", hello.to_str().unwrap(), "--parent", &parent, "--children", children]);
        assert!(o.status.success(), "{children}: {}", stderr(&o));
        let actions: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
        assert_eq!(actions, serde_json::json!([{"setStatus": {"upToDate": true}}]), "{children}");
    }
    let empty = write(dir.path(), "empty.yaml", "");
    for children in [empty.as_str(), "/nonexistent/children.yaml"] {
        let o = host(&["reconcile", "--plugin", hello.to_str().unwrap(), "--parent", &parent, "--children", children]);
        assert!(o.status.success(), "{children}: {}", stderr(&o));
        let actions: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
        assert!(actions[0].get("create").is_some(), "{children}: no children means create");
    }
}

#[test]
fn bad_input_exits_2_naming_the_file_and_the_problem() {
    let dir = tempfile::tempdir().unwrap();
    let hello = wasm("hello");
    let hello = hello.to_str().unwrap();
    let bad_yaml = write(dir.path(), "bad.yaml", "kind: [unclosed");
    let no_kind = write(dir.path(), "nokind.yaml", "metadata: {name: x}\n");
    let two = write(dir.path(), "two.yaml", &format!("{HELLO}---\n{HELLO}"));
    let parent = write(dir.path(), "parent.yaml", HELLO);
    let bad_children = write(dir.path(), "children.yaml", "- 1\n");
    let cases: Vec<(Vec<&str>, &str)> = vec![
        (vec!["--parent", &bad_yaml], "bad.yaml: error: line 1 column 7: unclosed bracket"),
        (vec!["--parent", &no_kind], "nokind.yaml: document 1: object has no `apiVersion`"),
        (vec!["--parent", &two], "two.yaml: expected one object, found 2"),
        (vec!["--parent", "/nonexistent/parent.yaml"], "cannot read /nonexistent/parent.yaml"),
        (vec!["--parent", &parent, "--children", &bad_children], "children.yaml: document 1: expected an object, found a number"),
        (vec!["--parent", &parent, "--now", "yesterday"], "expected RFC 3339"),
    ];
    for (args, want) in cases {
        let mut all = vec!["reconcile", "--plugin", hello];
        all.extend(&args);
        let o = host(&all);
        assert_eq!(o.status.code(), Some(2), "{args:?}: {}", stderr(&o));
        assert!(stderr(&o).contains(want), "{args:?}: wanted {want:?} in {}", stderr(&o));
    }
    let o = host(&["inspect", "/nonexistent/plugin.wasm"]);
    assert_eq!(o.status.code(), Some(1));
    assert!(stderr(&o).contains("cannot read plugin file /nonexistent/plugin.wasm"), "{}", stderr(&o));
}

#[test]
fn a_plugin_error_prints_the_error_object_and_exits_3() {
    let dir = tempfile::tempdir().unwrap();
    let parent = write(dir.path(), "p.yaml", "apiVersion: test.operator.dev/v1\nkind: Hostile\nmetadata: {name: e}\nspec: {mode: error}\n");
    let o = host(&["reconcile", "--plugin", wasm("hostile").to_str().unwrap(), "--parent", &parent]);
    assert_eq!(o.status.code(), Some(3), "{}", stderr(&o));
    let doc: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(doc, serde_json::json!({"error": {"reason": "Refused", "message": "asked to fail", "retryable": false}}));
}

#[test]
fn a_trap_exits_1_with_a_message_naming_the_plugin() {
    let dir = tempfile::tempdir().unwrap();
    let parent = write(dir.path(), "p.yaml", "apiVersion: test.operator.dev/v1\nkind: Hostile\nmetadata: {name: e}\nspec: {mode: loop}\n");
    let o = host(&["reconcile", "--plugin", wasm("hostile").to_str().unwrap(), "--parent", &parent, "--plugin-deadline", "100ms"]);
    assert_eq!(o.status.code(), Some(1));
    assert!(stderr(&o).contains("plugin hostile exceeded its deadline of 100ms in reconcile"), "{}", stderr(&o));
}

/// Every fixture of the shipped plugins gives, through `host reconcile` on
/// the Wasm build, exactly the actions the native build gives (the plugins'
/// own fixture tests check the native side against the same files).
#[test]
fn shipped_plugins_give_the_native_actions_in_wasm_for_every_fixture() {
    let mut checked = 0;
    for plugin in ["cronjob", "mydeployment"] {
        let fixtures = workspace_root().join("plugins").join(plugin).join("tests/fixtures");
        let Ok(entries) = std::fs::read_dir(&fixtures) else { continue };
        let mut cases: Vec<_> = entries.map(|e| e.unwrap().path()).filter(|p| p.is_dir()).collect();
        cases.sort();
        for case in cases {
            let now = std::fs::read_to_string(case.join("now.txt")).unwrap();
            let mut args = vec![
                "reconcile".to_string(),
                "--plugin".into(),
                wasm(plugin).to_str().unwrap().into(),
                "--parent".into(),
                case.join("parent.yaml").to_str().unwrap().into(),
                "--now".into(),
                now.trim().into(),
                // Fixtures pin what reconcile does with any parent, invalid ones included.
                "--no-admission".into(),
            ];
            if case.join("children.yaml").exists() {
                args.extend(["--children".into(), case.join("children.yaml").to_str().unwrap().into()]);
            }
            let o = host(&args.iter().map(String::as_str).collect::<Vec<_>>());
            assert!(matches!(o.status.code(), Some(0 | 3)), "{}: {}", case.display(), stderr(&o));
            let got: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
            let want: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(case.join("expected.json")).unwrap()).unwrap();
            assert_eq!(got, want, "{}", case.display());
            checked += 1;
        }
    }
    assert!(checked >= 10, "only {checked} fixtures found");
}

#[test]
fn reconcile_admits_the_parent_first_and_refuses_children_the_parent_does_not_control() {
    let dir = tempfile::tempdir().unwrap();
    let hello = wasm("hello");
    let hello = hello.to_str().unwrap();
    let long = write(dir.path(), "long.yaml", &HELLO.replace("greeting: Hi", &format!("greeting: {}", "x".repeat(65))));
    let parent = write(dir.path(), "parent.yaml", HELLO);
    let other_kind = write(dir.path(), "pod.yaml", "apiVersion: v1\nkind: Pod\nmetadata: {name: p}\n");
    let stranger = write(dir.path(), "children.yaml", "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: stranger, namespace: default}\n");
    let cases: Vec<(Vec<&str>, &str)> = vec![
        (vec!["reconcile", "--plugin", hello, "--parent", &long], r#"Hello.example.operator.dev "world" is invalid: spec.greeting: Too long"#),
        (
            vec!["reconcile", "--plugin", hello, "--parent", &other_kind],
            "is not of the plugin's parent kind example.operator.dev/v1alpha1, Kind=Hello",
        ),
        (vec!["reconcile", "--plugin", hello, "--parent", &parent, "--children", &stranger], r#"not controlled by Hello "world""#),
        (vec!["validate", "--plugin", hello, &long], r#"Hello.example.operator.dev "world" is invalid: spec.greeting: Too long"#),
    ];
    for (args, want) in cases {
        let o = host(&args);
        assert_eq!(o.status.code(), Some(2), "{args:?}: {}", stderr(&o));
        assert!(stderr(&o).contains(want), "{args:?}: wanted {want:?} in {}", stderr(&o));
        assert!(o.stdout.is_empty(), "{args:?}: no plan is printed for refused input");
    }
    let o = host(&["reconcile", "--plugin", hello, "--parent", &parent, "--children", &stranger]);
    assert!(stderr(&o).contains("ConfigMap stranger"), "the stranger is named: {}", stderr(&o));
    let o = host(&["validate", "--plugin", hello, &parent]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert_eq!(stdout(&o).trim(), r#"Hello "world" is valid"#);
    let no_greeting = write(dir.path(), "bare.yaml", &HELLO.replace("spec:\n  greeting: Hi\n", "spec: {}\n"));
    let o = host(&["validate", "--plugin", hello, &no_greeting]);
    assert_eq!(stdout(&o).trim(), r#"Hello "world" is valid (after defaulting)"#, "{}", stderr(&o));
}
