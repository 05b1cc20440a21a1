//! Trust at start-up: `host run --plugin FILE` refuses an unsigned, wrongly
//! signed, tampered or unpinned plugin file (exit 2, one error line), and
//! `host sign` prints the digest to pin. The hot-swap paths are
//! runtime/tests/all/trust.rs.

use crate::common;

use std::process::{Command, Stdio};

use common::trust_keys::{key, private_pem, public_pem};
use ed25519_dalek::SigningKey;

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
    assert_eq!(digest, format!("sha256:{}", operator_runtime::sandbox::cache::digest(&original)));
    let wrong = format!("sha256:{}", "0".repeat(64));
    one_line(refused_at_start(&["--plugin", plugin_arg, "--plugin-digest", &wrong]), "is not one of the --plugin-digest pins");
    starts(&["--plugin", plugin_arg, "--plugin-digest", &digest, "--plugin-trust-key", public_arg]);
}
