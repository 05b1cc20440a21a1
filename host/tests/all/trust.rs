//! Trust (`--plugin-trust-key`, `--plugin-digest`, `host sign`): unsigned,
//! wrongly signed, tampered and correctly signed plugins, and digest pins,
//! through every loading path: a ConfigMap hot swap and a `--plugin FILE
//! --watch` swap (refused versions leave the running one serving), and
//! `host run --plugin FILE` at start-up (exit 2, one error line).

use crate::common;
use crate::hotswap::{Env, WAIT, bytes, id};

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use ed25519_dalek::Signer;
use ed25519_dalek::SigningKey;
use ed25519_dalek::pkcs8::spki::der::pem::LineEnding;
use ed25519_dalek::pkcs8::{EncodePrivateKey, EncodePublicKey};

use host::hotswap::rollback;
use host::hotswap::trust::Policy;

fn key(seed: u8) -> SigningKey {
    SigningKey::from_bytes(&[seed; 32])
}

/// Writes `key`'s public half as `openssl pkey -pubout` does; returns the path.
fn public_pem(dir: &Path, name: &str, key: &SigningKey) -> PathBuf {
    let path = dir.join(name);
    std::fs::write(&path, key.verifying_key().to_public_key_pem(LineEnding::LF).unwrap()).unwrap();
    path
}

/// Writes `key` as `openssl genpkey -algorithm ed25519` does; returns the path.
fn private_pem(dir: &Path, name: &str, key: &SigningKey) -> PathBuf {
    let path = dir.join(name);
    std::fs::write(&path, key.to_pkcs8_pem(LineEnding::LF).unwrap().as_bytes()).unwrap();
    path
}

fn sign(key: &SigningKey, bytes: &[u8]) -> Vec<u8> {
    key.sign(bytes).to_bytes().to_vec()
}

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
    let notes: Vec<String> = env.events("PluginUntrusted").await.into_iter().filter_map(|e| e.note).collect();
    assert!(notes.iter().any(|n| n.contains("no key plugin.wasm.sig in configmap default/plugins")), "{notes:#?}");
    assert!(notes.iter().any(|n| n.contains("does not verify") && n.contains("still running versioned 1.0.0")), "{notes:#?}");

    // Correctly signed v2: swapped in.
    env.publish(&[("plugin.wasm", v2.clone()), ("plugin.wasm.sig", sign(&trusted, &v2))]).await;
    env.running("plugin.wasm", "2.0.0").await;
    assert_eq!(refusals(&env, "unsigned") + refusals(&env, "bad_signature"), 3);
    env.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_digest_pin_admits_only_the_pinned_build_from_a_configmap() {
    let v1 = bytes("versioned");
    let pin = format!("sha256:{}", host::sandbox::cache::digest(&v1));
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

fn host() -> Command {
    let mut c = Command::new(env!("CARGO_BIN_EXE_host"));
    c.env("HOST_LOG", "warn").arg("--plugin-cache-dir").arg(common::plugin_cache_dir("trust"));
    c
}

/// `host run` with `args` that must fail at start-up: its exit code and stderr.
fn refused_at_start(args: &[&str]) -> (Option<i32>, String) {
    let out = host().arg("run").args(args).args(["--embedded", "--metrics-addr", "0"]).stdin(Stdio::null()).output().unwrap();
    (out.status.code(), String::from_utf8_lossy(&out.stderr).into_owned())
}

/// `host run` with `args` starts (announces its kubeconfig), then is stopped.
fn starts(args: &[&str]) {
    use std::io::BufRead;
    let mut child = host().arg("run").args(args).args(["--embedded", "--metrics-addr", "0"]).stdout(Stdio::piped()).spawn().unwrap();
    let lines = std::io::BufReader::new(child.stdout.take().unwrap()).lines();
    let announced = lines.map_while(Result::ok).any(|l| l.starts_with("export KUBECONFIG="));
    let _ = child.kill();
    let _ = child.wait();
    assert!(announced, "host run {args:?} did not start");
}

#[test]
fn run_refuses_an_unsigned_wrongly_signed_tampered_or_unpinned_plugin_file_with_exit_2_and_one_line() {
    let dir = tempfile::tempdir().unwrap();
    let (trusted, other) = (key(1), key(2));
    let public = public_pem(dir.path(), "trusted.pub.pem", &trusted);
    let plugin = dir.path().join("versioned.wasm");
    std::fs::copy(common::wasm("versioned"), &plugin).unwrap();
    let (plugin_arg, public_arg) = (plugin.to_str().unwrap(), public.to_str().unwrap());
    let trusting = ["--plugin", plugin_arg, "--plugin-trust-key", public_arg];
    let sign_with = |key: &SigningKey, name: &str| {
        let out = host().args(["sign", "--key"]).arg(private_pem(dir.path(), name, key)).arg(&plugin).output().unwrap();
        assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
        String::from_utf8_lossy(&out.stdout).into_owned()
    };
    let one_line = |(code, stderr): (Option<i32>, String), needle: &str| {
        assert_eq!(code, Some(2), "{stderr}");
        assert_eq!(stderr.lines().count(), 1, "one error line: {stderr}");
        assert!(stderr.starts_with(&format!("error: plugin {plugin_arg} refused: untrusted: ")) && stderr.contains(needle), "{stderr}");
    };

    one_line(refused_at_start(&trusting), &format!("no {plugin_arg}.sig beside it"));
    sign_with(&other, "other.pem");
    one_line(refused_at_start(&trusting), "does not verify with any of the 1 trusted key(s)");
    let printed = sign_with(&trusted, "trusted.pem");
    let original = std::fs::read(&plugin).unwrap();
    let mut tampered = original.clone();
    tampered.push(0);
    std::fs::write(&plugin, &tampered).unwrap();
    one_line(refused_at_start(&trusting), "does not verify");
    std::fs::write(&plugin, &original).unwrap();
    starts(&trusting);

    // `host sign` printed the component digest to pin; another digest is refused.
    let digest = printed.lines().find_map(|l| l.strip_prefix("digest ")).and_then(|l| l.split_whitespace().next()).expect(&printed).to_string();
    assert_eq!(digest, format!("sha256:{}", host::sandbox::cache::digest(&original)));
    let wrong = format!("sha256:{}", "0".repeat(64));
    one_line(refused_at_start(&["--plugin", plugin_arg, "--plugin-digest", &wrong]), "is not one of the --plugin-digest pins");
    starts(&["--plugin", plugin_arg, "--plugin-digest", &digest, "--plugin-trust-key", public_arg]);
}
