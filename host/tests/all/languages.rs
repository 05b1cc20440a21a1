//! Plugins written in JavaScript (componentize-js) and Python
//! (componentize-py) run exactly as Rust ones: the three hello plugins give
//! the same answers on the same fixtures through `host reconcile`, load from
//! the precompiled cache despite their size, run on the embedded cluster
//! through kubectl with hot swap, and get the same sandbox as a Rust plugin.
//! The components are built by `cargo xtask build` (xtask/src/languages.rs).

use crate::common;

use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

use common::process::{Running, poll};
use common::{built_plugin, config, wasm, workspace_root};
use host::sandbox::{CacheOutcome, CallError, LoadedPlugin, PrecompiledCache, Sandbox, SandboxConfig};
use operator_plugin_sdk::{Action, json};
use serde_json::Value;

const NOW: i64 = 1_767_225_600_000; // 2026-01-01T00:00:00Z

/// The hello plugin in each language, by label.
fn hellos() -> [(&'static str, PathBuf); 3] {
    [("rust", wasm("hello")), ("javascript", built_plugin("hello-js")), ("python", built_plugin("hello-py"))]
}

/// Shared by the tests of this file (the cache is safe for concurrent use):
/// each of these large components is then compiled about once per run.
fn cache_dir() -> PathBuf {
    common::plugin_cache_dir("language")
}

/// The sandbox of the tests, with the shared cache.
fn cached_config(deadline: Duration) -> SandboxConfig {
    SandboxConfig { cache: PrecompiledCache::at(cache_dir()).unwrap(), ..config(deadline) }
}

fn host() -> Command {
    let mut c = Command::new(env!("CARGO_BIN_EXE_host"));
    c.env("HOST_LOG", "warn").arg("--plugin-cache-dir").arg(cache_dir());
    c
}

fn host_with(args: &[&str]) -> Command {
    let mut c = host();
    c.args(args);
    c
}

fn run(args: &[&str]) -> Output {
    host().args(args).output().expect("run host")
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

/// Every fixture of the Rust hello (whose own test checks the native build
/// against the same files) gives the same JSON actions through `host
/// reconcile` from each of the three plugins.
#[test]
fn rust_javascript_and_python_hellos_give_identical_actions_for_every_fixture() {
    let fixtures = workspace_root().join("plugins/examples/hello/tests/fixtures");
    let mut cases: Vec<PathBuf> = std::fs::read_dir(&fixtures).unwrap().map(|e| e.unwrap().path()).filter(|p| p.is_dir()).collect();
    cases.sort();
    assert!(cases.len() >= 5, "only {} fixtures in {}", cases.len(), fixtures.display());
    let mut checked = 0;
    for case in &cases {
        let want: Value = serde_json::from_str(&std::fs::read_to_string(case.join("expected.json")).unwrap()).unwrap();
        let now = std::fs::read_to_string(case.join("now.txt")).unwrap();
        for (language, plugin) in hellos() {
            let parent = case.join("parent.yaml");
            let mut args = vec!["reconcile", "--plugin", plugin.to_str().unwrap(), "--parent", parent.to_str().unwrap(), "--now", now.trim()];
            let children = case.join("children.yaml");
            if children.exists() {
                args.extend(["--children", children.to_str().unwrap()]);
            }
            let o = run(&args);
            assert!(o.status.success(), "{language}, {}: {}", case.display(), text(&o.stderr));
            let got: Value = serde_json::from_slice(&o.stdout).unwrap();
            assert_eq!(got, want, "{language} differs on {}", case.display());
            checked += 1;
        }
    }
    assert_eq!(checked, cases.len() * 3);
}

/// `host inspect` reads the same parent and CRD from each; only the
/// plugin's name, the WASI its runtime imports and the contract minor tell
/// them apart (the Rust SDK speaks 0.2; the JavaScript and Python hellos are
/// built against `wit/v0.1`, which the host still runs).
#[test]
fn inspect_shows_the_same_contract_parent_and_crd_for_each_language() {
    let mut crds = Vec::new();
    for (language, plugin) in hellos() {
        let o = run(&["inspect", plugin.to_str().unwrap(), "--output", "json"]);
        assert!(o.status.success(), "{language}: {}", text(&o.stderr));
        let doc: Value = serde_json::from_slice(&o.stdout).unwrap();
        let contract = if language == "rust" { "0.2.0" } else { "0.1.0" };
        assert_eq!(doc["info"]["contractVersion"], contract, "{language}");
        assert_eq!(doc["manifest"]["parent"], json!({"group": "example.operator.dev", "version": "v1alpha1", "kind": "Hello"}), "{language}");
        let export = format!("operator:plugin/controller@{contract}");
        assert!(doc["info"]["exports"].as_array().unwrap().iter().any(|e| *e == export.as_str()), "{language}: {doc}");
        let imports = doc["info"]["imports"].as_array().unwrap();
        assert!(!imports.iter().any(|i| i.as_str().unwrap().starts_with("wasi:http")), "{language} imports wasi:http: {imports:?}");
        // The Rust CRD is generated from its types (descriptions, nullable
        // optionals, a typed condition); what must agree is what the API
        // server serves: the resource's names, scope, versions, subresources
        // and fields.
        let crd = &doc["manifest"]["crds"][0];
        let version = &crd["spec"]["versions"][0];
        let fields = |part: &str| {
            version["schema"]["openAPIV3Schema"]["properties"][part]["properties"].as_object().map(|p| p.keys().cloned().collect::<Vec<_>>())
        };
        crds.push(json!({
            "name": crd["metadata"]["name"], "group": crd["spec"]["group"], "names": crd["spec"]["names"], "scope": crd["spec"]["scope"],
            "version": version["name"], "subresources": version["subresources"], "spec": fields("spec"), "status": fields("status"),
        }));
    }
    assert!(crds.windows(2).all(|w| w[0] == w[1]), "the CRDs differ: {crds:?}");
}

/// validate and default, which `host reconcile` does not reach, agree too.
/// The greeting limit is in bytes: 33 `é` are 66 bytes but 33 characters.
#[test]
fn validate_and_default_agree_across_languages() {
    let sandbox = Sandbox::new(cached_config(Duration::from_secs(10))).unwrap();
    let hello = |greeting: Value| {
        json!({"apiVersion": "example.operator.dev/v1alpha1", "kind": "Hello", "metadata": {"name": "w"}, "spec": greeting}).to_string()
    };
    let inputs =
        [hello(json!({"greeting": "é".repeat(33)})), hello(json!({"greeting": "é".repeat(32)})), hello(json!({})), hello(json!({"greeting": "Hi"}))];
    let mut answers = Vec::new();
    for (language, path) in hellos() {
        let plugin = sandbox.load_file(&path).unwrap_or_else(|e| panic!("load {language}: {e}"));
        let answer: Vec<(String, Value)> = inputs
            .iter()
            .map(|input| {
                let errors = plugin.validate_blocking(input, None).unwrap_or_else(|e| panic!("{language} validate: {e}"));
                let defaulted = plugin.default_blocking(input).unwrap_or_else(|e| panic!("{language} default: {e}"));
                (serde_json::to_string(&errors).unwrap(), defaulted)
            })
            .collect();
        answers.push((language, answer));
    }
    let (_, rust) = &answers[0];
    assert!(rust[0].0.contains("spec.greeting") && rust[1].0 == "[]", "{rust:?}");
    assert_eq!(rust[2].1["spec"]["greeting"], "Hello");
    for (language, answer) in &answers[1..] {
        assert_eq!(answer, rust, "{language} differs from rust");
    }
}

/// A component of 12–18 MB compiles once; the next sandbox loads the
/// precompiled artifact.
#[test]
fn large_components_are_compiled_once_and_then_loaded_from_the_cache() {
    let dir = tempfile::tempdir().unwrap();
    for name in ["hello-js", "hello-py"] {
        let cached = || SandboxConfig { cache: PrecompiledCache::at(dir.path()).unwrap(), ..config(Duration::from_secs(10)) };
        let first = Sandbox::new(cached()).unwrap();
        let plugin = first.load_file(&built_plugin(name)).unwrap();
        assert_eq!((first.compilations(), plugin.info().cache), (1, CacheOutcome::Compiled), "{name}");
        let second = Sandbox::new(cached()).unwrap();
        let plugin = second.load_file(&built_plugin(name)).unwrap();
        assert_eq!((second.compilations(), plugin.info().cache), (0, CacheOutcome::Hit), "{name}: second load must not recompile");
        let actions = plugin.reconcile_blocking(&json!({"apiVersion": "example.operator.dev/v1alpha1", "kind": "Hello", "metadata": {"name": "w", "namespace": "default", "uid": "u"}, "spec": {"greeting": "Hi"}}).to_string(), &[], NOW).unwrap();
        assert!(matches!(&actions[0], Action::Create(cm) if cm["data"]["greeting"] == "Hi"), "{name}: {actions:?}");
    }
}

fn probe(plugin: &LoadedPlugin, mode: &str) -> Result<Vec<Action>, CallError> {
    let parent = json!({"apiVersion": "test.operator.dev/v1", "kind": "Hostile", "metadata": {"name": mode, "namespace": "default", "uid": "u"}, "spec": {"mode": mode}});
    plugin.reconcile_blocking(&parent.to_string(), &[], NOW)
}

fn report(result: Result<Vec<Action>, CallError>) -> String {
    match result {
        Ok(actions) => match actions.as_slice() {
            [Action::Event { message, .. }] => message.clone(),
            other => panic!("expected one probe Event, got {other:?}"),
        },
        Err(e) => panic!("expected a probe report, got {e}"),
    }
}

/// The same sandbox as tests/plugins/hostile gets in host/tests/sandbox.rs:
/// no environment, no files, no sockets, the host's clock, the deadline and
/// the memory cap; the contract's error arrives as the plugin's own error.
#[test]
fn python_and_javascript_plugins_get_the_sandbox_a_rust_plugin_gets() {
    let deadline = Duration::from_millis(500);
    let sandbox = Sandbox::new(cached_config(deadline)).unwrap();
    let load = |name: &str| sandbox.load_file(&built_plugin(name)).unwrap_or_else(|e| panic!("load {name}: {e}"));
    let (python, javascript) = (load("probe-py"), load("probe-js"));

    assert_eq!(report(probe(&python, "env")), "denied: no environment");
    assert!(report(probe(&python, "file")).starts_with("denied"), "{}", report(probe(&python, "file")));
    assert!(report(probe(&python, "socket")).starts_with("denied"), "{}", report(probe(&python, "socket")));
    assert_eq!(report(probe(&python, "clock")), format!("clock={NOW} now={NOW}"));
    assert_eq!(report(probe(&javascript, "env")), "denied: no environment");
    // Built without wasi:http, componentize-js's `fetch` traps: the call fails, nothing is sent.
    let r = probe(&javascript, "fetch");
    assert!(matches!(r, Err(CallError::Trap { .. })), "{r:?}");
    assert_eq!(report(probe(&javascript, "clock")), format!("clock={NOW} now={NOW}"));

    for (name, plugin) in [("probe-py", &python), ("probe-js", &javascript)] {
        let started = Instant::now();
        let r = probe(plugin, "loop");
        assert!(matches!(r, Err(CallError::DeadlineExceeded { ref plugin, op: "reconcile", .. }) if plugin == name), "{name}: {r:?}");
        assert!(started.elapsed() < deadline + Duration::from_secs(20), "{name}: the loop ran {:?}", started.elapsed());
        let r = probe(plugin, "memory");
        assert!(matches!(r, Err(CallError::MemoryLimit { limit, .. }) if limit == 64 << 20), "{name}: {r:?}");
        match probe(plugin, "error") {
            Err(CallError::Plugin { error, .. }) => {
                assert_eq!((error.reason.as_str(), error.message.as_str(), error.retryable), ("Refused", "asked to fail", false))
            }
            other => panic!("{name}: expected the plugin's own error, got {other:?}"),
        }
        // A runaway call leaves nothing behind: the next call is fresh.
        assert_eq!(report(probe(plugin, "clock")), format!("clock={NOW} now={NOW}"), "{name}");
    }
}

fn kubectl(kubeconfig: &Path, args: &[&str], stdin: Option<&str>) -> Output {
    let mut c = Command::new("kubectl")
        .arg("--kubeconfig")
        .arg(kubeconfig)
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("kubectl is on PATH");
    if let Some(text) = stdin {
        c.stdin.take().unwrap().write_all(text.as_bytes()).unwrap();
    }
    c.wait_with_output().unwrap()
}

fn metrics(addr: &str) -> Option<String> {
    let mut s = std::net::TcpStream::connect(addr).ok()?;
    s.set_read_timeout(Some(Duration::from_secs(10))).ok()?;
    write!(s, "GET /metrics HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n\r\n").ok()?;
    let mut body = String::new();
    s.read_to_string(&mut body).ok()?;
    Some(body)
}

/// `host run --embedded` with the JavaScript hello from a watched file: a
/// Hello applied with kubectl gets its ConfigMap; the file is replaced by the
/// Python hello, which takes over in the same process (hot swap) and
/// reconciles a changed greeting.
#[test]
fn javascript_then_python_hello_run_on_the_embedded_cluster_through_kubectl() {
    let dir = tempfile::tempdir().unwrap();
    let kubeconfig = dir.path().join("kubeconfig");
    let plugin = dir.path().join("hello.wasm");
    std::fs::copy(built_plugin("hello-js"), &plugin).unwrap();
    let r = Running::start(host_with(&[
        "run",
        "--embedded",
        "--plugin",
        plugin.to_str().unwrap(),
        "--watch",
        "--watch-interval",
        "200ms",
        "--kubeconfig-out",
        kubeconfig.to_str().unwrap(),
        "--metrics-addr",
        "127.0.0.1:0",
    ]));
    // Ports are bound (and announced) before the kubeconfig line.
    let line = r.line_with("metrics at http://");
    r.line_with("export KUBECONFIG=");
    let addr = line.trim_start_matches("metrics at http://").trim_end_matches("/metrics").to_string();

    let apply = |greeting: &str| {
        let hello = format!(
            "apiVersion: example.operator.dev/v1alpha1\nkind: Hello\nmetadata:\n  name: world\n  namespace: default\nspec:\n  greeting: {greeting}\n"
        );
        poll("kubectl apply of a Hello (once its CRD is served)", || {
            kubectl(&kubeconfig, &["apply", "-f", "-"], Some(&hello)).status.success().then_some(())
        });
    };
    let greeting = || text(&kubectl(&kubeconfig, &["get", "configmap", "world-greeting", "-o", "jsonpath={.data.greeting}"], None).stdout);
    apply("Hi");
    poll("the JavaScript plugin's ConfigMap", || (greeting() == "Hi").then_some(()));
    poll("the Hello's status", || {
        let o = kubectl(&kubeconfig, &["get", "hello", "world", "-o", "jsonpath={.status.upToDate}"], None);
        (text(&o.stdout) == "true").then_some(())
    });
    poll("a reconcile by hello-js in the metrics", || {
        metrics(&addr)?.contains("controller_runtime_reconcile_total{controller=\"hello-js\",result=\"success\"}").then_some(())
    });

    let staged = dir.path().join("hello.wasm.new");
    std::fs::copy(built_plugin("hello-py"), &staged).unwrap();
    std::fs::rename(&staged, &plugin).unwrap();
    let swapped = |m: String| m.lines().any(|l| l.starts_with("plugin_swaps_total{") && l.contains("result=\"swapped\""));
    poll("the swap to hello-py in the metrics", || swapped(metrics(&addr)?).then_some(()));
    apply("Bonjour");
    // The swap above came first, so this patch is the Python plugin's (a swap
    // of the same kinds keeps the controller, and its metric labels).
    poll("the Python plugin's patch", || (greeting() == "Bonjour").then_some(()));
}

/// The per-call figures of docs/benchmarks.md (JavaScript and Python plugins):
/// a fresh instance + reconcile of the same Hello by each language, median and
/// p90 of 200 calls after 20 warm-up calls. A measurement, not a check:
/// `cargo test --release -p host --test languages -- --ignored --nocapture per_call`.
#[test]
#[ignore]
fn per_call_time_of_each_language() {
    let sandbox = Sandbox::new(cached_config(Duration::from_secs(10))).unwrap();
    let parent = json!({"apiVersion": "example.operator.dev/v1alpha1", "kind": "Hello", "metadata": {"name": "w", "namespace": "default", "uid": "u"}, "spec": {"greeting": "Hi"}}).to_string();
    for (language, path) in hellos() {
        let plugin = sandbox.load_file(&path).unwrap();
        for _ in 0..20 {
            plugin.reconcile_blocking(&parent, &[], NOW).unwrap();
        }
        let mut times: Vec<Duration> = (0..200)
            .map(|_| {
                let started = Instant::now();
                plugin.reconcile_blocking(&parent, &[], NOW).unwrap();
                started.elapsed()
            })
            .collect();
        times.sort();
        println!("{language}: median {:?}, p90 {:?}", times[times.len() / 2], times[times.len() * 9 / 10]);
    }
}
