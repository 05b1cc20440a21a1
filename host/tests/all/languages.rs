//! Plugins written in JavaScript (componentize-js) and Python
//! (componentize-py) through the command line as Rust ones: the three hello
//! plugins give the same answers on the same fixtures through `host
//! reconcile`, `host inspect` reads the same contract from each, and they run
//! on the embedded cluster through kubectl with hot swap. The components are
//! built by `cargo xtask build` (xtask/src/languages.rs).

use crate::common;

use std::io::{Read, Write};
use std::path::PathBuf;
use std::process::{Command, Output};
use std::time::Duration;

use common::process::{Running, poll};
use common::{built_plugin, hello_in_each_language as hellos, workspace_root};
use serde_json::{Value, json};

/// Shared by the tests of this file (the cache is safe for concurrent use):
/// each of these large components is then compiled about once per run.
fn cache_dir() -> PathBuf {
    common::plugin_cache_dir("language")
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
/// them apart (the Rust SDK speaks 0.4; the JavaScript and Python hellos are
/// built against `wit/v0.1`, which the host still runs).
#[test]
fn inspect_shows_the_same_contract_parent_and_crd_for_each_language() {
    let mut crds = Vec::new();
    for (language, plugin) in hellos() {
        let o = run(&["inspect", plugin.to_str().unwrap(), "--output", "json"]);
        assert!(o.status.success(), "{language}: {}", text(&o.stderr));
        let doc: Value = serde_json::from_slice(&o.stdout).unwrap();
        let contract = if language == "rust" { "0.4.0" } else { "0.1.0" };
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
    let kubectl = common::Kubectl::new(common::kubectl::system(), &kubeconfig);

    let apply = |greeting: &str| {
        let hello = format!(
            "apiVersion: example.operator.dev/v1alpha1\nkind: Hello\nmetadata:\n  name: world\n  namespace: default\nspec:\n  greeting: {greeting}\n"
        );
        poll("kubectl apply of a Hello (once its CRD is served)", || {
            kubectl.run_stdin(&["apply", "-f", "-"], Some(hello.as_bytes())).status.success().then_some(())
        });
    };
    let greeting = || text(&kubectl.run(&["get", "configmap", "world-greeting", "-o", "jsonpath={.data.greeting}"]).stdout);
    apply("Hi");
    poll("the JavaScript plugin's ConfigMap", || (greeting() == "Hi").then_some(()));
    poll("the Hello's status", || {
        let o = kubectl.run(&["get", "hello", "world", "-o", "jsonpath={.status.upToDate}"]);
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
