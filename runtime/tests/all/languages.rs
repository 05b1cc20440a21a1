//! Plugins written in JavaScript (componentize-js) and Python
//! (componentize-py) run in the sandbox exactly as Rust ones: validate and
//! default agree, they load from the precompiled cache despite their size,
//! and they get the same sandbox as a Rust plugin. The components are built
//! by `cargo xtask build` (xtask/src/languages.rs); the command-line side
//! (`host reconcile`, `host inspect`, `host run`) is host/tests/all/languages.rs.

use crate::common;

use std::path::PathBuf;
use std::time::{Duration, Instant};

use common::{built_plugin, config, hello_in_each_language as hellos};
use operator_plugin_sdk::{Action, json};
use operator_runtime::sandbox::{CacheOutcome, CallError, LoadedPlugin, PrecompiledCache, Sandbox, SandboxConfig};
use serde_json::Value;

const NOW: i64 = 1_767_225_600_000; // 2026-01-01T00:00:00Z

/// Shared by the tests of this file (the cache is safe for concurrent use):
/// each of these large components is then compiled about once per run.
fn cache_dir() -> PathBuf {
    common::plugin_cache_dir("language")
}

/// The sandbox of the tests, with the shared cache.
fn cached_config(deadline: Duration) -> SandboxConfig {
    SandboxConfig { cache: PrecompiledCache::at(cache_dir()).unwrap(), ..config(deadline) }
}

/// validate and default (which `host reconcile` does not call) give the same
/// answers from each language.
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
                (serde_json::to_string(&shown_values(serde_json::to_value(&errors).unwrap())).unwrap(), defaulted)
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

/// The same sandbox as tests/plugins/hostile gets in runtime/tests/all/sandbox.rs:
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

/// The per-call figures of docs/benchmarks.md (JavaScript and Python plugins):
/// a fresh instance + reconcile of the same Hello by each language, median and
/// p90 of 200 calls after 20 warm-up calls. A measurement, not a check:
/// `cargo test --release -p operator-runtime --test all languages::per_call -- --ignored --nocapture`.
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

/// Field errors with each value as the host shows it: the Rust SDK sends a
/// value as JSON text (a string quoted, a number bare, as upstream prints
/// it), the JavaScript and Python SDKs as plain text, and the host reads a
/// value that parses as a JSON string as that string.
fn shown_values(mut errors: Value) -> Value {
    for e in errors.as_array_mut().into_iter().flatten() {
        if let Some(text) = e["value"].as_str()
            && let Ok(unquoted) = serde_json::from_str::<String>(text)
        {
            e["value"] = Value::String(unquoted);
        }
    }
    errors
}
