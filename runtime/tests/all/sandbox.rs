//! The sandbox contains misbehaving plugins and keeps well-behaved ones
//! working, caches compiled plugins, refuses foreign contracts and gives
//! deterministic answers.

use crate::common;

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use common::{config, load, wasm, wasm_for};
use operator_plugin_sdk::{Action, json};
use operator_runtime::sandbox::{
    CacheOutcome, CallError, ChildCompiler, LoadError, LoadedPlugin, PrecompiledCache, Sandbox, SandboxConfig, Tier, Tiering,
};

const DEADLINE: Duration = Duration::from_millis(300);
const NOW: i64 = 1_767_225_600_000; // 2026-01-01T00:00:00Z

fn hostile_parent(mode: &str) -> String {
    json!({
        "apiVersion": "test.operator.dev/v1", "kind": "Hostile",
        "metadata": {"name": mode, "namespace": "default", "uid": "u-1"},
        "spec": {"mode": mode}
    })
    .to_string()
}

fn hello_parent() -> String {
    json!({
        "apiVersion": "example.operator.dev/v1alpha1", "kind": "Hello",
        "metadata": {"name": "world", "namespace": "default", "uid": "u-2"},
        "spec": {"greeting": "Hi"}
    })
    .to_string()
}

fn assert_hello_still_answers(hello: &LoadedPlugin) {
    let actions = hello.reconcile_blocking(&hello_parent(), &[], NOW).expect("the good plugin answers");
    assert!(matches!(&actions[0], Action::Create(cm) if cm["data"]["greeting"] == "Hi"), "{actions:?}");
}

fn probe_report(actions: &[Action]) -> String {
    match actions {
        [Action::Event { message, .. }] => message.clone(),
        other => panic!("expected one probe event, got {other:?}"),
    }
}

#[test]
fn each_hostile_plugin_is_contained_and_the_good_plugin_keeps_answering() {
    assert_hostile_plugins_contained(&Sandbox::new(config(DEADLINE)).unwrap(), Tier::Optimized);
}

/// `host run` serves a plugin it has to compile from Winch until Cranelift
/// is done: the deadline, the memory cap, the empty WASI and a fresh memory
/// per call hold for Winch's code too.
#[test]
fn hostile_plugins_are_contained_in_winch_code_too() {
    let sandbox = Sandbox::new(SandboxConfig { tiering: Tiering::BaselineOnly, ..config(DEADLINE) }).unwrap();
    assert_hostile_plugins_contained(&sandbox, Tier::Baseline);
    let hostile = load(&sandbox, "hostile");
    // Without children and with 1 MiB of them (another size class, so a
    // copy of the Winch build), each after the other.
    for (call, bytes) in [0, 1 << 20, 0, 1 << 20, 0].into_iter().enumerate() {
        let children = if bytes == 0 { vec![] } else { vec![format!("{{\"pad\":\"{}\"}}", "x".repeat(bytes))] };
        let actions = hostile.reconcile_blocking(&hostile_parent("remember"), &children, NOW).unwrap();
        assert_eq!(probe_report(&actions), "image=7 zeroed=0", "call {call}, {bytes} bytes of children");
    }
    assert_eq!(hostile.tier(), Tier::Baseline, "BaselineOnly never tiers up");
}

/// With tiering, a plugin that is not cached answers from Winch at once;
/// Cranelift's build then takes over, fills the cache, and answers the same.
#[test]
fn a_tiered_plugin_switches_to_cranelift_and_caches_it() {
    let dir = tempfile::tempdir().unwrap();
    let tiered = || SandboxConfig { tiering: Tiering::BaselineFirst, cache: PrecompiledCache::at(dir.path()).unwrap(), ..config(DEADLINE) };
    let sandbox = Sandbox::new(tiered()).unwrap();
    let hello = load(&sandbox, "hello");
    assert_eq!(hello.info().cache, CacheOutcome::Compiled);
    let first = hello.reconcile_blocking(&hello_parent(), &[], NOW).unwrap();
    let deadline = Instant::now() + Duration::from_secs(120);
    while hello.tier() != Tier::Optimized {
        assert!(Instant::now() < deadline, "Cranelift's build never took over");
        std::thread::sleep(Duration::from_millis(10));
    }
    assert_eq!(hello.reconcile_blocking(&hello_parent(), &[], NOW).unwrap(), first, "both builds answer alike");
    assert_eq!(sandbox.compilations(), 1, "one Cranelift compile");
    let again = Sandbox::new(tiered()).unwrap();
    let cached = load(&again, "hello");
    assert_eq!(
        (cached.info().cache, cached.tier(), again.compilations()),
        (CacheOutcome::Hit, Tier::Optimized, 0),
        "the background compile was cached"
    );
}

#[test]
fn a_tier_up_compiled_by_the_child_compiler_is_mapped_from_the_cache_and_compiles_nothing_here() {
    let dir = tempfile::tempdir().unwrap();
    let cache = || PrecompiledCache::at(dir.path()).unwrap();
    let runs = Arc::new(AtomicUsize::new(0));
    // The "other process": a sandbox of its own with the same engine
    // configuration, compiling into the same directory (as `host inspect`).
    let child = {
        let (runs, cache) = (runs.clone(), cache());
        ChildCompiler::new(move |bytes| {
            runs.fetch_add(1, Ordering::SeqCst);
            let other = Sandbox::new(SandboxConfig { cache: cache.clone(), ..config(DEADLINE) }).map_err(|e| e.to_string())?;
            other.load("child", bytes).map(|_| ()).map_err(|e| e.to_string())
        })
    };
    let tiered = SandboxConfig { tiering: Tiering::BaselineFirst, cache: cache(), child_compiler: Some(child), ..config(DEADLINE) };
    let sandbox = Sandbox::new(tiered).unwrap();
    let hello = load(&sandbox, "hello");
    let deadline = Instant::now() + Duration::from_secs(120);
    while hello.tier() != Tier::Optimized {
        assert!(Instant::now() < deadline, "Cranelift's build never took over");
        std::thread::sleep(Duration::from_millis(10));
    }
    assert_eq!((runs.load(Ordering::SeqCst), sandbox.compilations()), (1, 0), "compiled once, by the child, and not here");
    assert_hello_still_answers(&hello);

    // A child that fails leaves the compile to this process.
    let dir = tempfile::tempdir().unwrap();
    let failing = ChildCompiler::new(|_| Err("no such program".into()));
    let tiered = SandboxConfig {
        tiering: Tiering::BaselineFirst,
        cache: PrecompiledCache::at(dir.path()).unwrap(),
        child_compiler: Some(failing),
        ..config(DEADLINE)
    };
    let sandbox = Sandbox::new(tiered).unwrap();
    let hello = load(&sandbox, "hello");
    let deadline = Instant::now() + Duration::from_secs(120);
    while hello.tier() != Tier::Optimized {
        assert!(Instant::now() < deadline, "Cranelift's build never took over after the child failed");
        std::thread::sleep(Duration::from_millis(10));
    }
    assert_eq!(sandbox.compilations(), 1, "compiled here instead");
}

fn assert_hostile_plugins_contained(sandbox: &Sandbox, tier: Tier) {
    let hostile = load(sandbox, "hostile");
    let hello = load(sandbox, "hello");
    assert_eq!((hostile.tier(), hello.tier()), (tier, tier));

    type Check = fn(Result<Vec<Action>, CallError>);
    let cases: &[(&str, Check)] = &[
        ("loop", |r| assert!(matches!(r, Err(CallError::DeadlineExceeded { ref plugin, op: "reconcile", .. }) if plugin == "hostile"), "{r:?}")),
        ("memory", |r| assert!(matches!(r, Err(CallError::MemoryLimit { limit, .. }) if limit == 64 << 20), "{r:?}")),
        ("panic", |r| match r {
            Err(CallError::Panic { message, .. }) => assert!(message.contains("hostile plugin panicked on purpose"), "{message}"),
            other => panic!("expected a panic, got {other:?}"),
        }),
        ("output", |r| assert_eq!(probe_report(&r.unwrap()), "wrote 100 MiB")),
        ("log-flood", |r| assert_eq!(probe_report(&r.unwrap()), "logged 100 MiB")),
        ("garbage", |r| match r {
            Err(CallError::InvalidOutput { detail, .. }) => assert!(detail.contains("action 0 (create) is not valid JSON"), "{detail}"),
            other => panic!("expected invalid output, got {other:?}"),
        }),
        ("not-object", |r| {
            assert!(matches!(r, Err(CallError::InvalidOutput { ref detail, .. }) if detail.contains("must be a JSON object")), "{r:?}")
        }),
        ("file", |r| assert!(probe_report(&r.unwrap()).starts_with("denied"))),
        ("env", |r| assert_eq!(probe_report(&r.unwrap()), "denied: no environment")),
        ("socket", |r| assert!(probe_report(&r.unwrap()).starts_with("denied"))),
        ("clock", |r| assert_eq!(probe_report(&r.unwrap()), format!("clock={NOW} now={NOW}"))),
        ("error", |r| match r {
            Err(CallError::Plugin { error, .. }) => assert_eq!((error.reason.as_str(), error.retryable), ("Refused", false)),
            other => panic!("expected the plugin's own error, got {other:?}"),
        }),
    ];
    for (mode, check) in cases {
        let started = Instant::now();
        let result = hostile.reconcile_blocking(&hostile_parent(mode), &[], NOW);
        let took = started.elapsed();
        check(result);
        // Only a guard against an unbounded call: the deadline (and the
        // check above) is what contains it. Timing is a benchmark's job; on
        // a loaded 2-core machine the epoch ticker can lag well past 2×.
        assert!(took < DEADLINE + Duration::from_secs(20), "mode {mode} took {took:?} against a {DEADLINE:?} deadline");
        assert_hello_still_answers(&hello);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_runaway_call_does_not_hold_up_concurrent_good_calls() {
    let sandbox = Sandbox::new(config(DEADLINE)).unwrap();
    let hostile = load(&sandbox, "hostile");
    let hello = load(&sandbox, "hello");
    let runaway = tokio::spawn({
        let hostile = hostile.clone();
        async move { hostile.reconcile(hostile_parent("loop").into(), Default::default(), NOW).await }
    });
    for _ in 0..20 {
        hello.reconcile(hello_parent().into(), Default::default(), NOW).await.expect("good plugin answers while another call spins");
    }
    assert!(matches!(runaway.await.unwrap(), Err(CallError::DeadlineExceeded { .. })));
}

#[test]
fn the_same_inputs_give_byte_identical_actions_every_time() {
    let sandbox = Sandbox::new(config(Duration::from_secs(5))).unwrap();
    let hostile = load(&sandbox, "hostile");
    let cronjob = load(&sandbox, "cronjob");
    let fixture = common::workspace_root().join("plugins/cronjob/tests/fixtures");
    let case = std::fs::read_dir(&fixture).unwrap().next().unwrap().unwrap().path();
    let parent = yaml_to_json(&std::fs::read_to_string(case.join("parent.yaml")).unwrap());
    let first_random = serde_json::to_string(&hostile.reconcile_blocking(&hostile_parent("random"), &[], NOW).unwrap()).unwrap();
    let first_cron = serde_json::to_string(&cronjob.reconcile_blocking(&parent, &[], NOW).unwrap()).unwrap();
    for _ in 0..100 {
        let random = serde_json::to_string(&hostile.reconcile_blocking(&hostile_parent("random"), &[], NOW).unwrap()).unwrap();
        let cron = serde_json::to_string(&cronjob.reconcile_blocking(&parent, &[], NOW).unwrap()).unwrap();
        assert_eq!(random, first_random, "seeded randomness must repeat");
        assert_eq!(cron, first_cron);
    }
}

fn yaml_to_json(text: &str) -> String {
    serde_saphyr::from_str::<serde_json::Value>(text).unwrap().to_string()
}

#[test]
fn a_call_never_sees_what_the_previous_call_left_in_memory() {
    let sandbox = Sandbox::new(config(Duration::from_secs(5))).unwrap();
    let hostile = load(&sandbox, "hostile");
    for call in 0..5 {
        let actions = hostile.reconcile_blocking(&hostile_parent("remember"), &[], NOW).unwrap();
        assert_eq!(probe_report(&actions), "image=7 zeroed=0", "call {call}");
    }
}

/// `wasi:random/insecure-seed`, which Rust's `RandomState` seeds its keys
/// from, answers from the call's `now`, so a call is a function of its
/// inputs even though call states are kept between calls. The host shadows
/// wasmtime-wasi's import of it by its exact version: if a wasmtime upgrade
/// linked another 0.2.x, a kept state's fixed seed would answer instead,
/// and calls at different times would hash alike.
#[test]
fn the_insecure_seed_follows_each_calls_clock_though_call_states_are_kept() {
    let sandbox = Sandbox::new(config(Duration::from_secs(5))).unwrap();
    let hostile = load(&sandbox, "hostile");
    let hash = |now: i64| probe_report(&hostile.reconcile_blocking(&hostile_parent("random"), &[], now).unwrap());
    let first = hash(NOW);
    assert!(first.starts_with("hash="), "{first}");
    assert_ne!(hash(NOW + 60_000), first, "a call a minute later hashes with another seed");
    assert_eq!(hash(NOW), first, "a call at the same time hashes with the same seed");
}

/// Calls are run in pool slots by the bytes they pass (a copy of the
/// component per size class), so the reset that makes a slot look fresh
/// must hold in every class, and after calls of other sizes.
#[test]
fn a_call_never_sees_what_a_call_of_another_size_left_in_memory() {
    // Compiled here, then loaded from the precompiled cache (a mapped
    // file), as `host run` loads plugins: the size classes' copies are made
    // from either.
    let dir = tempfile::tempdir().unwrap();
    let cached = || SandboxConfig { cache: PrecompiledCache::at(dir.path()).unwrap(), ..config(Duration::from_secs(5)) };
    for (load_no, sandbox) in [Sandbox::new(cached()).unwrap(), Sandbox::new(cached()).unwrap()].into_iter().enumerate() {
        let hostile = load(&sandbox, "hostile");
        let padding = |bytes: usize| vec![format!("{{\"pad\":\"{}\"}}", "x".repeat(bytes))];
        // Small (no children), medium (100 KiB) and large (1 MiB) calls,
        // each size after each other size.
        for (call, bytes) in [0, 100 << 10, 1 << 20, 0, 1 << 20, 100 << 10, 0].into_iter().enumerate() {
            let actions = hostile.reconcile_blocking(&hostile_parent("remember"), &padding(bytes), NOW).unwrap();
            assert_eq!(probe_report(&actions), "image=7 zeroed=0", "load {load_no}, call {call}, {bytes} bytes of children");
        }
        assert_eq!(hostile.info().cache, [CacheOutcome::Compiled, CacheOutcome::Hit][load_no]);
    }
}

/// Past its first chunk (2 MiB of the initial memory) the SDK's bump arena
/// takes pages with `memory.grow`, so an SDK plugin
/// whose input outgrows the cap fails as "memory limit", and the next call
/// (a fresh instance) answers as usual.
#[test]
fn an_sdk_plugin_over_the_memory_cap_fails_cleanly_and_the_next_call_answers() {
    let sandbox = Sandbox::new(SandboxConfig { memory_limit: 8 << 20, ..config(Duration::from_secs(5)) }).unwrap();
    let hello = load(&sandbox, "hello");
    let big: Vec<String> = (0..40).map(|i| format!("{{\"pad{i}\":\"{}\"}}", "x".repeat(256 << 10))).collect();
    let r = hello.reconcile_blocking(&hello_parent(), &big, NOW);
    assert!(matches!(r, Err(CallError::MemoryLimit { limit, .. }) if limit == 8 << 20), "{r:?}");
    assert_hello_still_answers(&hello);
}

#[test]
fn a_second_load_uses_the_cache_and_a_corrupt_artifact_is_rebuilt() {
    let dir = tempfile::tempdir().unwrap();
    let cached = || SandboxConfig { cache: PrecompiledCache::at(dir.path()).unwrap(), ..config(DEADLINE) };

    let first = Sandbox::new(cached()).unwrap();
    let plugin = load(&first, "hello");
    assert_eq!((first.compilations(), plugin.info().cache), (1, CacheOutcome::Compiled));

    let second = Sandbox::new(cached()).unwrap();
    let plugin = load(&second, "hello");
    assert_eq!((second.compilations(), plugin.info().cache), (0, CacheOutcome::Hit), "second load must not recompile");
    assert_hello_still_answers(&plugin);

    let artifact = std::fs::read_dir(dir.path()).unwrap().map(|e| e.unwrap().path()).find(|p| p.extension().is_some_and(|e| e == "cwasm")).unwrap();
    let mut bytes = std::fs::read(&artifact).unwrap();
    let middle = bytes.len() / 2;
    bytes[middle] ^= 0xff;
    std::fs::write(&artifact, &bytes).unwrap();

    let third = Sandbox::new(cached()).unwrap();
    let plugin = load(&third, "hello");
    assert_eq!((third.compilations(), plugin.info().cache), (1, CacheOutcome::Rebuilt));
    assert_hello_still_answers(&plugin);

    let fourth = Sandbox::new(cached()).unwrap();
    assert_eq!(load(&fourth, "hello").info().cache, CacheOutcome::Hit, "the rebuilt artifact is cached again");
}

#[test]
fn a_plugin_shipped_precompiled_loads_without_a_compile_and_its_directory_is_never_written() {
    let (shipped, cache) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    // What an image build does: a host of the same build compiles the
    // plugin into the directory the image then ships read-only.
    let ahead = Sandbox::new(SandboxConfig { cache: PrecompiledCache::at(shipped.path()).unwrap(), ..config(DEADLINE) }).unwrap();
    load(&ahead, "hello");
    let files = |dir: &std::path::Path| std::fs::read_dir(dir).unwrap().map(|e| e.unwrap().path()).collect::<Vec<_>>();
    let artifacts = files(shipped.path());
    assert_eq!(artifacts.len(), 1, "{artifacts:?}");

    let config = || SandboxConfig {
        cache: PrecompiledCache::at(cache.path()).unwrap().with_shipped(shipped.path()),
        tiering: Tiering::BaselineFirst,
        ..config(DEADLINE)
    };
    let pod = Sandbox::new(config()).unwrap();
    let plugin = load(&pod, "hello");
    assert_eq!((pod.compilations(), plugin.info().cache, plugin.tier()), (0, CacheOutcome::Hit, Tier::Optimized));
    assert_hello_still_answers(&plugin);
    assert!(files(cache.path()).is_empty(), "nothing compiled, so nothing cached: {:?}", files(cache.path()));

    // A damaged shipped artifact is passed over: the plugin is compiled,
    // cached in the writable directory, and the shipped file is left as it is.
    let mut bytes = std::fs::read(&artifacts[0]).unwrap();
    let middle = bytes.len() / 2;
    bytes[middle] ^= 0xff;
    std::fs::write(&artifacts[0], &bytes).unwrap();
    let pod = Sandbox::new(SandboxConfig { tiering: Tiering::Off, ..config() }).unwrap();
    let plugin = load(&pod, "hello");
    assert_eq!((pod.compilations(), plugin.info().cache), (1, CacheOutcome::Compiled));
    assert_hello_still_answers(&plugin);
    assert_eq!(std::fs::read(&artifacts[0]).unwrap(), bytes, "the shipped directory is read-only to the host");
    assert_eq!(files(cache.path()).len(), 1, "the compile went to the writable cache");
}

#[test]
fn a_plugin_of_another_contract_major_is_refused_naming_both_versions() {
    let sandbox = Sandbox::new(config(DEADLINE)).unwrap();
    let err = sandbox.load_file(&wasm("contract-v1")).expect_err("must be refused");
    assert!(matches!(err, LoadError::ContractMismatch { .. }), "{err:?}");
    let message = err.to_string();
    assert!(message.contains("operator:plugin@1.0.0") && message.contains("operator:plugin@0.1.x"), "{message}");
}

#[test]
fn bytes_that_are_not_a_component_are_refused_clearly() {
    let sandbox = Sandbox::new(config(DEADLINE)).unwrap();
    let core_module = b"\0asm\x01\0\0\0";
    let err = sandbox.load("core.wasm", core_module).err().unwrap();
    assert!(err.to_string().contains("core Wasm module; build it as a component"), "{err}");
    let err = sandbox.load("junk.wasm", b"definitely not wasm").err().unwrap();
    assert!(matches!(err, LoadError::NotAComponent { .. }), "{err}");
    let mut truncated = std::fs::read(wasm("hello")).unwrap();
    truncated.truncate(truncated.len() / 2);
    let err = sandbox.load("truncated.wasm", &truncated).err().unwrap();
    assert!(matches!(err, LoadError::Compile { .. }), "{err}");
}

#[test]
fn plugins_built_by_cargo_component_and_by_plain_wasip2_both_run_the_same() {
    let sandbox = Sandbox::new(config(DEADLINE)).unwrap();
    let p2 = sandbox.load_file(&wasm("hello")).unwrap();
    let p1 = sandbox.load_file(&wasm_for("wasm32-wasip1", "hello")).unwrap();
    assert_ne!(p1.info().digest, p2.info().digest, "two different builds");
    assert_eq!(p1.manifest(), p2.manifest());
    let a = p1.reconcile_blocking(&hello_parent(), &[], NOW).unwrap();
    let b = p2.reconcile_blocking(&hello_parent(), &[], NOW).unwrap();
    assert_eq!(a, b);
    let defaulted = p1
        .default_blocking(&json!({"apiVersion": "example.operator.dev/v1alpha1", "kind": "Hello", "metadata": {"name": "h"}, "spec": {}}).to_string())
        .unwrap();
    assert_eq!(defaulted["spec"]["greeting"], "Hello");
    let errors = p1
        .validate_blocking(
            &json!({"apiVersion": "example.operator.dev/v1alpha1", "kind": "Hello", "metadata": {"name": "h"}, "spec": {"greeting": "x".repeat(65)}})
                .to_string(),
            None,
        )
        .unwrap();
    assert_eq!(errors[0].field, "spec.greeting");
}
