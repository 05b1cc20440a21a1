//! Trust (`--plugin-trust-key`, `--plugin-digest`): unsigned, wrongly
//! signed, tampered and correctly signed plugins, and digest pins, through
//! the hot-swap loading paths: a ConfigMap and a watched `--plugin FILE`
//! (refused versions leave the running one serving). `host run --plugin FILE`
//! at start-up and `host sign` are host/tests/all/trust.rs.

use crate::common;
use crate::hotswap::{Env, WAIT, bytes, id};

use std::path::Path;

use common::trust_keys::{key, public_pem, sign};
use operator_runtime::hotswap::rollback;
use operator_runtime::hotswap::trust::Policy;

fn refusals(env: &Env, reason: &str) -> u64 {
    env.counter(&format!("plugin_trust_refusals_total{{plugin=\"{}\",reason=\"{reason}\"}}", id("plugin.wasm")))
}

async fn refused(env: &Env, reason: &str, count: u64) {
    common::eventually(&format!("refusal #{count} ({reason})"), WAIT, || async { (refusals(env, reason) == count).then_some(()) }).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_configmap_plugin_runs_only_when_signed_by_a_trusted_key_and_refused_versions_leave_the_running_one() {
    let dir = tempfile::tempdir().unwrap();
    let (trusted, other) = (key(1), key(2));
    let policy = Policy::load(&[public_pem(dir.path(), "trusted.pem", &trusted)], &[]).unwrap();
    let env = Env::start_with(policy, rollback::Config::default(), vec![]).await;
    let (v1, v2) = (bytes("versioned"), bytes("versioned-v2"));

    // Unsigned: refused, nothing runs.
    env.publish(&[("plugin.wasm", v1.clone())]).await;
    refused(&env, "unsigned", 1).await;
    assert_eq!(env.version("plugin.wasm"), None);

    // Signed by the trusted key: runs.
    env.publish(&[("plugin.wasm", v1.clone()), ("plugin.wasm.sig", sign(&trusted, &v1))]).await;
    env.running("plugin.wasm", "1.0.0").await;

    // v2 signed by another key, then v2 tampered after a trusted signature: refused, v1 serves.
    env.publish(&[("plugin.wasm", v2.clone()), ("plugin.wasm.sig", sign(&other, &v2))]).await;
    refused(&env, "bad_signature", 1).await;
    let mut tampered = v2.clone();
    let last = tampered.len() - 1;
    tampered[last] ^= 0x01;
    env.publish(&[("plugin.wasm", tampered), ("plugin.wasm.sig", sign(&trusted, &v2))]).await;
    refused(&env, "bad_signature", 2).await;
    assert_eq!(env.version("plugin.wasm").as_deref(), Some("1.0.0"));
    // Each refusal's Event is written after its counter (an API call of its own): wait for both.
    common::eventually("the PluginUntrusted Events of both refusals", WAIT, || async {
        let notes: Vec<String> = env.events("PluginUntrusted").await.into_iter().filter_map(|e| e.note).collect();
        let unsigned = notes.iter().any(|n| n.contains("no key plugin.wasm.sig in configmap default/plugins"));
        let unverified = notes.iter().any(|n| n.contains("does not verify") && n.contains("still running versioned 1.0.0"));
        (unsigned && unverified).then_some(())
    })
    .await;

    // Correctly signed v2: swapped in.
    env.publish(&[("plugin.wasm", v2.clone()), ("plugin.wasm.sig", sign(&trusted, &v2))]).await;
    env.running("plugin.wasm", "2.0.0").await;
    assert_eq!(refusals(&env, "unsigned") + refusals(&env, "bad_signature"), 3);
    env.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_digest_pin_admits_only_the_pinned_build_from_a_configmap() {
    let v1 = bytes("versioned");
    let pin = format!("sha256:{}", operator_runtime::sandbox::cache::digest(&v1));
    let env = Env::start_with(Policy::load(&[], &[pin]).unwrap(), rollback::Config::default(), vec![]).await;
    env.publish(&[("plugin.wasm", v1)]).await;
    env.running("plugin.wasm", "1.0.0").await;
    env.publish(&[("plugin.wasm", bytes("versioned-v2"))]).await;
    refused(&env, "digest_not_pinned", 1).await;
    assert_eq!(env.version("plugin.wasm").as_deref(), Some("1.0.0"));
    env.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_watched_plugin_file_is_swapped_only_once_its_sig_file_verifies() {
    let dir = tempfile::tempdir().unwrap();
    let trusted = key(1);
    let policy = Policy::load(&[public_pem(dir.path(), "trusted.pem", &trusted)], &[]).unwrap();
    let file = dir.path().join("plugin.wasm");
    let sig = dir.path().join("plugin.wasm.sig");
    let env = Env::start_with(policy, rollback::Config::default(), vec![file.clone()]).await;
    let file_id = file.display().to_string();
    let version = || env.manager.plugin(&file_id).map(|p| p.manifest().version.clone());
    let file_refusals = |reason: &str| env.counter(&format!("plugin_trust_refusals_total{{plugin=\"{file_id}\",reason=\"{reason}\"}}"));

    // Renamed over, as a careful deploy does: the watcher never reads half a file.
    let put = |path: &Path, bytes: &[u8]| {
        let tmp = path.with_extension("tmp");
        std::fs::write(&tmp, bytes).unwrap();
        std::fs::rename(&tmp, path).unwrap();
    };
    let (v1, v2) = (bytes("versioned"), bytes("versioned-v2"));
    put(&sig, &sign(&trusted, &v1));
    put(&file, &v1);
    common::eventually("v1 from the file", WAIT, || async { (version().as_deref() == Some("1.0.0")).then_some(()) }).await;

    // v2 beside v1's signature: refused, v1 serves.
    put(&file, &v2);
    common::eventually("the refusal of v2", WAIT, || async { (file_refusals("bad_signature") >= 1).then_some(()) }).await;
    assert_eq!(version().as_deref(), Some("1.0.0"));
    // Its own signature arrives: the file is read again and swapped in.
    put(&sig, &sign(&trusted, &v2));
    common::eventually("v2 once signed", WAIT, || async { (version().as_deref() == Some("2.0.0")).then_some(()) }).await;
    env.stop().await;
}
