//! Plugins in Go, built with the standard Go toolchain (`GOOS=wasip1
//! GOARCH=wasm go build -buildmode=c-shared`) and `host componentize`, run
//! by the host as every other plugin: `host new --lang go` gives a module
//! that tests, builds, inspects and reconciles with no edit, and the Go
//! hello answers the Rust hello's fixtures through the host (so the Go
//! SDK's canonical ABI lowers what wasmtime lifts).
//!
//! Each test builds its own components in a temporary directory. Without
//! Go on PATH a test prints that it is skipped and records the skip where
//! `cargo xtask test` counts the real control plane's (a skip is never a
//! silent pass).

use crate::common;

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use common::workspace_root;
use serde_json::Value;

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

fn host(cache: &Path) -> Command {
    let mut c = Command::new(env!("CARGO_BIN_EXE_host"));
    c.env("HOST_LOG", "warn").arg("--plugin-cache-dir").arg(cache);
    c
}

fn succeeded(what: &str, o: Output) -> Output {
    assert!(o.status.success(), "{what} failed: {}\n{}", text(&o.stdout), text(&o.stderr));
    o
}

/// True when `go` runs; otherwise prints and records the skip.
fn go_is_installed() -> bool {
    if Command::new("go").arg("version").output().is_ok_and(|o| o.status.success()) {
        return true;
    }
    let test = std::thread::current().name().unwrap_or("unnamed").replace("::", "-");
    eprintln!("SKIPPED {test}: Go (1.26 or newer) is not on PATH");
    let target = std::env::var_os("CARGO_TARGET_DIR").map(PathBuf::from).unwrap_or_else(|| workspace_root().join("target"));
    let dir = target.join("real-cluster/skipped");
    let _ = std::fs::create_dir_all(&dir);
    let _ = std::fs::write(dir.join(test), "Go is not on PATH");
    false
}

/// The module in `dir` built as README.md says: `go build` to a core module, then `host componentize`.
fn build_go_plugin(dir: &Path, name: &str, cache: &Path) -> PathBuf {
    let core = dir.join(format!("{name}.core.wasm"));
    let component = dir.join(format!("{name}.wasm"));
    let mut go = Command::new("go");
    go.current_dir(dir).env("GOOS", "wasip1").env("GOARCH", "wasm").args(["build", "-buildmode=c-shared", "-o"]).arg(&core).arg(".");
    succeeded("go build", go.output().unwrap());
    succeeded("host componentize", host(cache).arg("componentize").arg(&core).arg("-o").arg(&component).output().unwrap());
    component
}

/// plugins/examples/<name> built into `out` as xtask builds it.
fn build_example(out: &Path, name: &str, cache: &Path) -> PathBuf {
    let source = workspace_root().join("plugins/examples").join(name);
    let core = out.join(format!("{name}.core.wasm"));
    let mut go = Command::new("go");
    go.current_dir(&source).env("GOOS", "wasip1").env("GOARCH", "wasm").args(["build", "-trimpath", "-buildmode=c-shared", "-o"]).arg(&core).arg(".");
    succeeded("go build", go.output().unwrap());
    let component = out.join(format!("{name}.wasm"));
    succeeded("host componentize", host(cache).arg("componentize").arg(&core).arg("-o").arg(&component).output().unwrap());
    component
}

/// `s` up to the end of the first of `prefixes` it contains: where a
/// message quotes its JSON decoder, whose words differ between Rust's serde
/// and Go's encoding/json (plugintest.DecoderWordsAfter on the Go side).
fn up_to_decoder_words(v: &Value, prefixes: &[&str]) -> Value {
    match v {
        Value::String(s) => match prefixes.iter().find_map(|p| s.find(p).map(|i| i + p.len())) {
            Some(end) => Value::String(format!("{}…", &s[..end])),
            None => v.clone(),
        },
        Value::Array(a) => Value::Array(a.iter().map(|e| up_to_decoder_words(e, prefixes)).collect()),
        Value::Object(o) => Value::Object(o.iter().map(|(k, e)| (k.clone(), up_to_decoder_words(e, prefixes))).collect()),
        _ => v.clone(),
    }
}

/// The issue's proof: the Go CronJob (plugins/examples/cronjob-go, the
/// kubebuilder book's logic over robfig/cron) answers every fixture of the
/// Rust CronJob through `host reconcile`, as cli.rs runs them for
/// cronjob.wasm. Only the decoder's own words in two messages may differ.
#[test]
fn the_go_cronjob_answers_every_fixture_of_the_rust_cronjob_through_the_host() {
    if !go_is_installed() {
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    let cache = tmp.path().join("cache");
    let plugin = build_example(tmp.path(), "cronjob-go", &cache);
    let decoder_prefixes = ["cannot read CronJob malformed: ", "a child is not a valid batch/v1 Job: "];
    let fixtures = workspace_root().join("plugins/cronjob/tests/fixtures");
    let mut cases: Vec<PathBuf> = std::fs::read_dir(&fixtures).unwrap().map(|e| e.unwrap().path()).filter(|p| p.is_dir()).collect();
    cases.sort();
    assert_eq!(cases.len(), 21, "plugins/cronjob's fixtures in {}", fixtures.display());
    let mut differing_only_in_decoder_words = 0;
    for case in &cases {
        let want: Value = serde_json::from_str(&std::fs::read_to_string(case.join("expected.json")).unwrap()).unwrap();
        let now = std::fs::read_to_string(case.join("now.txt")).unwrap();
        let mut c = host(&cache);
        c.args(["reconcile", "--plugin"]).arg(&plugin).arg("--parent").arg(case.join("parent.yaml"));
        // Fixtures pin what reconcile does with any parent, invalid ones included.
        c.args(["--now", now.trim(), "--no-admission", "-o", "json"]);
        if case.join("children.yaml").exists() {
            c.arg("--children").arg(case.join("children.yaml"));
        }
        let o = c.output().unwrap();
        assert!(matches!(o.status.code(), Some(0 | 3)), "{}: {}", case.display(), text(&o.stderr));
        let got: Value = serde_json::from_slice(&o.stdout).unwrap();
        if got != want {
            differing_only_in_decoder_words += 1;
        }
        assert_eq!(
            up_to_decoder_words(&got, &decoder_prefixes),
            up_to_decoder_words(&want, &decoder_prefixes),
            "cronjob-go differs on {}",
            case.display()
        );
    }
    assert!(differing_only_in_decoder_words <= 2, "{differing_only_in_decoder_words} fixtures differ in the decoder's words");
}

/// The issue's walk-through, literally: `host new hello-go --lang go && cd
/// hello-go && go test ./... && <the documented build> && host inspect
/// hello-go.wasm && host reconcile --plugin hello-go.wasm --parent samples/...`.
#[test]
fn a_new_go_plugin_tests_builds_inspects_and_reconciles_with_no_edit() {
    if !go_is_installed() {
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    let cache = tmp.path().join("cache");
    let o = succeeded("host new", host(&cache).current_dir(tmp.path()).args(["new", "hello-go", "--lang", "go"]).output().unwrap());
    let dir = tmp.path().join("hello-go");
    let readme = std::fs::read_to_string(dir.join("README.md")).unwrap();
    let documented =
        "GOOS=wasip1 GOARCH=wasm go build -buildmode=c-shared -o hello-go.core.wasm . && host componentize hello-go.core.wasm -o hello-go.wasm";
    assert!(readme.contains(documented) && text(&o.stdout).contains(documented), "the build this test runs is the documented one");

    let tested = succeeded("go test", Command::new("go").current_dir(&dir).args(["test", "./..."]).output().unwrap());
    assert!(text(&tested.stdout).contains("ok  \thello-go"), "{}", text(&tested.stdout));
    let plugin = build_go_plugin(&dir, "hello-go", &cache);

    let o = succeeded("host inspect", host(&cache).current_dir(&dir).args(["inspect", "hello-go.wasm", "--output", "json"]).output().unwrap());
    let doc: Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(doc["manifest"]["name"], "hello-go");
    assert_eq!(doc["manifest"]["parent"]["kind"], "HelloGo");
    assert_eq!(doc["info"]["contractVersion"], "0.3.0");
    assert_eq!(doc["manifest"]["crds"][0]["spec"]["names"]["kind"], "HelloGo");

    let o = succeeded(
        "host reconcile",
        host(&cache)
            .current_dir(&dir)
            .args(["reconcile", "--plugin"])
            .arg(&plugin)
            .args(["--parent", "samples/hellogo.yaml", "-o", "json"])
            .output()
            .unwrap(),
    );
    let actions: Value = serde_json::from_slice(&o.stdout).unwrap();
    let created = &actions[0]["create"];
    assert_eq!(created["metadata"]["name"], "example-hellogo", "{actions}");
    assert_eq!(created["data"]["message"], "Hello from the sample");
    assert_eq!(created["data"]["replicas"], "2");
    assert_eq!(actions[1]["event"]["reason"], "Created");
}

/// The Go hello (plugins/examples/hello-go, whose `go test` checks the same
/// files natively) gives the Rust hello's answers through `host reconcile`.
#[test]
fn the_go_hello_answers_every_fixture_of_the_rust_hello_through_the_host() {
    if !go_is_installed() {
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    let cache = tmp.path().join("cache");
    let plugin = build_example(tmp.path(), "hello-go", &cache);
    let fixtures = workspace_root().join("plugins/examples/hello/tests/fixtures");
    let mut cases: Vec<PathBuf> = std::fs::read_dir(&fixtures).unwrap().map(|e| e.unwrap().path()).filter(|p| p.is_dir()).collect();
    cases.sort();
    assert!(cases.len() >= 5, "only {} fixtures in {}", cases.len(), fixtures.display());
    for case in &cases {
        let want: Value = serde_json::from_str(&std::fs::read_to_string(case.join("expected.json")).unwrap()).unwrap();
        let now = std::fs::read_to_string(case.join("now.txt")).unwrap();
        let mut c = host(&cache);
        c.args(["reconcile", "--plugin"]).arg(&plugin).arg("--parent").arg(case.join("parent.yaml")).args(["--now", now.trim(), "-o", "json"]);
        if case.join("children.yaml").exists() {
            c.arg("--children").arg(case.join("children.yaml"));
        }
        let got: Value = serde_json::from_slice(&succeeded(&case.display().to_string(), c.output().unwrap()).stdout).unwrap();
        assert_eq!(got, want, "hello-go differs on {}", case.display());
    }

    // validate and default cross the boundary too: a greeting over 64 bytes
    // is refused as the Rust hello refuses it.
    let long = tmp.path().join("long.yaml");
    let greeting = "x".repeat(65);
    std::fs::write(
        &long,
        format!(
            "apiVersion: example.operator.dev/v1alpha1\nkind: Hello\nmetadata:\n  name: l\n  namespace: default\nspec:\n  greeting: {greeting}\n"
        ),
    )
    .unwrap();
    let o = host(&cache).args(["validate", "--plugin"]).arg(&plugin).arg(&long).output().unwrap();
    assert!(!o.status.success(), "{}", text(&o.stdout));
    let said = format!("{}{}", text(&o.stdout), text(&o.stderr));
    assert!(said.contains("spec.greeting: Too long"), "{said}");
}

/// A Go plugin gets the guarantees every plugin gets: a reconcile that never
/// returns is stopped at the deadline, one that allocates without bound at
/// the memory cap, each as its own error, and the Go runtime cannot reach a
/// file (the sandbox's WASI has no preopened directory).
#[test]
fn a_hostile_go_plugin_is_stopped_by_the_deadline_and_the_memory_cap_and_sees_no_files() {
    if !go_is_installed() {
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    let cache = tmp.path().join("cache");
    let dir = tmp.path().join("hostile-go");
    std::fs::create_dir_all(&dir).unwrap();
    let sdk = workspace_root().join("plugins/sdk-go");
    let go_mod = std::fs::read_to_string(workspace_root().join("plugins/examples/hello-go/go.mod")).unwrap();
    let go_mod =
        go_mod.replace("module example.operator.dev/hello-go", "module hostile-go").replace("=> ../../sdk-go", &format!("=> {}", sdk.display()));
    std::fs::write(dir.join("go.mod"), go_mod).unwrap();
    std::fs::copy(workspace_root().join("plugins/examples/hello-go/go.sum"), dir.join("go.sum")).unwrap();
    std::fs::write(dir.join("main.go"), HOSTILE_GO).unwrap();
    let plugin = build_go_plugin(&dir, "hostile-go", &cache);

    let reconcile = |mode: &str| {
        let parent = tmp.path().join(format!("{mode}.yaml"));
        std::fs::write(
            &parent,
            format!("apiVersion: example.operator.dev/v1alpha1\nkind: Hello\nmetadata:\n  name: h\n  namespace: default\nspec:\n  mode: {mode}\n"),
        )
        .unwrap();
        let mut c = host(&cache);
        c.args(["--plugin-deadline", "2s", "--plugin-memory-mib", "64", "reconcile", "--plugin"])
            .arg(&plugin)
            .arg("--parent")
            .arg(&parent)
            .args(["-o", "json"]);
        let o = c.output().unwrap();
        (o.status.success(), format!("{}{}", text(&o.stdout), text(&o.stderr)))
    };
    let (ok, said) = reconcile("files");
    assert!(ok, "{said}");
    assert!(said.contains("no file"), "the Go runtime read a file: {said}");
    let (ok, said) = reconcile("spin");
    assert!(!ok && said.contains("deadline"), "{said}");
    let (ok, said) = reconcile("hog");
    assert!(!ok && said.to_lowercase().contains("memory"), "{said}");
}

const HOSTILE_GO: &str = r#"package main

import (
	"os"

	"operator-host.dev/sdk-go/plugin"
)

type hostile struct {
	Spec struct {
		Mode string `json:"mode"`
	} `json:"spec"`
}

var sink [][]byte

func init() {
	plugin.Register(&plugin.Controller[hostile]{
		Name: "hostile-go", Version: "0.1.0",
		For: plugin.GroupVersionKind{Group: "example.operator.dev", Version: "v1alpha1", Kind: "Hello"},
		Reconcile: func(r *plugin.Request[hostile]) (plugin.Result, error) {
			switch r.Parent.Spec.Mode {
			case "spin":
				for n := 0; ; n++ {
					if n < 0 {
						break
					}
				}
			case "hog":
				for {
					sink = append(sink, make([]byte, 1<<20))
				}
			case "files":
				if _, err := os.ReadFile("/etc/passwd"); err != nil {
					r.Event(plugin.Warning, "NoFiles", "no file: %v", err)
				} else {
					r.Event(plugin.Warning, "ReadAFile", "read /etc/passwd")
				}
			}
			return plugin.Result{}, nil
		},
	})
}

func main() {}
"#;

/// One reconcile of the Go CronJob against the Rust one, each a fresh
/// instance as the controller calls it (for Go: the runtime's start and
/// every package's init, then the call), at 0, 10 and 100 finished child
/// Jobs in steady state (the bench's CronJob workload: nothing due). Both
/// must answer the same. Prints medians; docs/benchmarks.md quotes them.
/// `cargo xtask build`, then
/// `cargo test --release -p host --test all golang::per_call -- --ignored --nocapture`.
#[test]
#[ignore]
fn per_call_time_of_the_go_and_the_rust_cronjob() {
    use operator_runtime::sandbox::{PrecompiledCache, Sandbox, SandboxConfig};
    use std::time::{Duration, Instant};
    if !go_is_installed() {
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    let go = build_example(tmp.path(), "cronjob-go", &tmp.path().join("cache"));
    let rust = workspace_root().join("target/plugins/cronjob.wasm");
    assert!(rust.exists(), "{} is missing: run `cargo xtask build` first", rust.display());
    let cache = workspace_root().join("target/golang-bench-cache");
    let config = SandboxConfig { deadline: Duration::from_secs(10), cache: PrecompiledCache::at(&cache).unwrap(), ..SandboxConfig::default() };
    let sandbox = Sandbox::new(config).unwrap();
    let (go, rust) = (sandbox.load_file(&go).unwrap(), sandbox.load_file(&rust).unwrap());
    let fixture = workspace_root().join("plugins/cronjob/tests/fixtures/history-limits-delete-the-oldest-finished-jobs");
    let mut parent: Value = serde_saphyr::from_str(&std::fs::read_to_string(fixture.join("parent.yaml")).unwrap()).unwrap();
    let children: Vec<Value> = serde_saphyr::from_multiple(&std::fs::read_to_string(fixture.join("children.yaml")).unwrap()).unwrap();
    let template = children.into_iter().find(|c| c["kind"] == "Job").unwrap();
    let now = chrono::DateTime::parse_from_rfc3339(std::fs::read_to_string(fixture.join("now.txt")).unwrap().trim()).unwrap().timestamp_millis();
    let last = chrono::DateTime::parse_from_rfc3339("2026-01-15T10:07:00Z").unwrap();
    for n in [0usize, 10, 100] {
        parent["spec"]["successfulJobsHistoryLimit"] = serde_json::json!(n.max(1));
        let jobs: Vec<String> = (0..n)
            .map(|i| {
                let at = last - chrono::Duration::minutes(i64::try_from(i).unwrap());
                let stamp = |s: i64| (at + chrono::Duration::seconds(s)).to_rfc3339_opts(chrono::SecondsFormat::Secs, true);
                let minutes = at.timestamp() / 60;
                let mut job = template.clone();
                job["metadata"]["name"] = serde_json::json!(format!("cronjob-sample-{minutes}"));
                job["metadata"]["uid"] = serde_json::json!(format!("9c1d{minutes:08}-0000-4000-8000-{i:012}"));
                job["metadata"]["annotations"]["batch.kubernetes.io/cronjob-scheduled-timestamp"] = serde_json::json!(stamp(0));
                job["metadata"]["annotations"]["batch.tutorial.kubebuilder.io/scheduled-at"] = serde_json::json!(stamp(0));
                job["status"]["startTime"] = serde_json::json!(stamp(1));
                job["status"]["completionTime"] = serde_json::json!(stamp(20));
                job.to_string()
            })
            .collect();
        let parent = parent.to_string();
        let call = |p: &operator_runtime::sandbox::LoadedPlugin| {
            let started = Instant::now();
            let actions = p.reconcile_blocking(&parent, &jobs, now).unwrap();
            (started.elapsed(), actions)
        };
        assert_eq!(call(&go).1, call(&rust).1, "{n} children: the two builds disagree");
        let (mut g, mut r) = (Vec::new(), Vec::new());
        for _ in 0..30 {
            g.push(call(&go).0);
            r.push(call(&rust).0);
        }
        g.sort();
        r.sort();
        let (g, r) = (g[g.len() / 2], r[r.len() / 2]);
        println!(
            "cronjob {n:>3} Jobs: go {:.2} ms, rust {:.3} ms, go/rust {:.0}x",
            g.as_secs_f64() * 1e3,
            r.as_secs_f64() * 1e3,
            g.as_secs_f64() / r.as_secs_f64()
        );
    }
}
