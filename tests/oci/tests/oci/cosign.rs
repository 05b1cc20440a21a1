//! Signatures made by the real cosign CLI (key pairs from `cosign
//! generate-key-pair`, signing offline: no transparency log, a plain-HTTP
//! loopback registry) verified by the host: cosign 3's default (a Sigstore
//! bundle attached as a referrer) and its older `.sig` tag form; a
//! signature by another key is refused, at start-up (exit 2) and when a
//! polled tag moves to such a version (the old version keeps serving).

use std::path::{Path, PathBuf};
use std::time::Duration;

use oci_tests::{Host, Registry, Tools, digest_line, eventually_within, ok, plugin, run, text};

/// A key pair in `dir/<name>.key` and `.pub` (empty password, as COSIGN_PASSWORD says).
fn key_pair(tools: &Tools, dir: &Path, name: &str) -> (PathBuf, PathBuf) {
    let out = std::process::Command::new(&tools.cosign)
        .current_dir(dir)
        .args(["generate-key-pair", "--output-key-prefix", name])
        .env("COSIGN_PASSWORD", "")
        .env("HOME", dir)
        .output()
        .unwrap();
    assert!(out.status.success(), "cosign generate-key-pair: {}", text(&out.stderr));
    (dir.join(format!("{name}.key")), dir.join(format!("{name}.pub")))
}

/// `cosign sign` of `reference` (REGISTRY/REPO@DIGEST) with `key`, offline.
fn sign(tools: &Tools, dir: &Path, key: &Path, reference: &str, extra: &[&str]) {
    // cosign 3 signs with a signing config; one with no services is offline
    // (no transparency log, no timestamp authority).
    let config = dir.join("signing-config.json");
    if !config.exists() {
        ok(&tools.cosign, &["signing-config", "create", "--out", config.to_str().unwrap()], &[("HOME", dir.to_str().unwrap())]);
    }
    let mut args = vec!["sign", "--key", key.to_str().unwrap(), "--allow-http-registry", "--allow-insecure-registry", "-y"];
    args.extend_from_slice(extra);
    if !extra.contains(&"--use-signing-config=false") {
        args.extend(["--signing-config", config.to_str().unwrap()]);
    }
    args.push(reference);
    ok(&tools.cosign, &args, &[("COSIGN_PASSWORD", ""), ("HOME", dir.to_str().unwrap())]);
}

#[test]
fn cosign_signatures_admit_their_key_only() {
    let Some(tools) = Tools::find() else { return };
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let registry = Registry::start(&tools, d);
    let (key, public) = key_pair(&tools, d, "trusted");
    let (other_key, other_public) = key_pair(&tools, d, "other");
    let hello = plugin("hello");
    let home = [("HOME", d.to_str().unwrap())];
    let pull = |reference: &str, public: &Path| {
        run(&tools.host, &["pull", reference, "--cosign-key", public.to_str().unwrap(), "--oci-cache-dir", d.join("cache").to_str().unwrap()], &home)
    };

    // cosign 3's default form: a bundle referrer.
    let v1 = digest_line(&ok(&tools.host, &["push", hello.to_str().unwrap(), &registry.oci("signed:v1")], &home));
    let unsigned = pull(&registry.oci("signed:v1"), &public);
    assert_eq!(unsigned.status.code(), Some(2));
    assert!(text(&unsigned.stderr).contains(&format!("no cosign signature of {v1}")), "{}", text(&unsigned.stderr));
    sign(&tools, d, &key, &registry.plain(&format!("signed@{v1}")), &[]);
    let verified = pull(&registry.oci("signed:v1"), &public);
    assert!(verified.status.success() && text(&verified.stdout).contains("cosign signature verified"), "{}", text(&verified.stderr));
    let refused = pull(&registry.oci("signed:v1"), &other_public);
    assert_eq!(refused.status.code(), Some(2));
    assert!(text(&refused.stderr).contains("verifies with the 1 trusted --cosign-key key(s)"), "{}", text(&refused.stderr));

    // The `.sig` tag form (cosign 2's default; cosign 3 without the bundle format).
    let v2 = digest_line(&ok(&tools.host, &["push", plugin("hello-py").to_str().unwrap(), &registry.oci("signed:v2")], &home));
    sign(
        &tools,
        d,
        &key,
        &registry.plain(&format!("signed@{v2}")),
        &["--new-bundle-format=false", "--use-signing-config=false", "--tlog-upload=false"],
    );
    let verified = pull(&registry.oci("signed:v2"), &public);
    assert!(verified.status.success(), "{}", text(&verified.stderr));

    // At start-up, a plugin signed by another key is bad input: exit 2.
    let other_signed = digest_line(&ok(&tools.host, &["push", plugin("versioned-v2").to_str().unwrap(), &registry.oci("signed:by-other")], &home));
    sign(&tools, d, &other_key, &registry.plain(&format!("signed@{other_signed}")), &[]);
    let start = run(
        &tools.host,
        &["run", "--embedded", "--metrics-addr", "0", "--plugin", &registry.oci("signed:by-other"), "--cosign-key", public.to_str().unwrap()],
        &home,
    );
    assert_eq!(start.status.code(), Some(2), "{}", text(&start.stderr));
    assert!(text(&start.stderr).contains("refused: untrusted"), "{}", text(&start.stderr));

    // Running v1, the polled tag moves to a version signed by another key:
    // refused, counted, and v1 keeps serving.
    let stable = registry.oci("signed:stable");
    ok(&tools.oras, &["tag", "--plain-http", &registry.plain(&format!("signed@{v1}")), "stable"], &home);
    let mut host = Host::start(
        &tools,
        d,
        "host",
        &[
            "--plugin",
            &stable,
            "--oci-poll-interval",
            "300ms",
            "--cosign-key",
            public.to_str().unwrap(),
            "--oci-cache-dir",
            d.join("cache").to_str().unwrap(),
        ],
    );
    ok(&tools.oras, &["tag", "--plain-http", &registry.plain(&format!("signed@{other_signed}")), "stable"], &home);
    host.wait_log("the refusal of the version signed by another key", "refused: untrusted");
    eventually_within("plugin_trust_refusals_total", Duration::from_secs(30), || {
        (host.metric(&format!("plugin_trust_refusals_total{{plugin=\"{stable}\",reason=\"bad_signature\"}}")) == 1.0).then_some(())
    });
    assert!(host.log().contains("still running hello"), "{}", host.log());
}

/// The condition `type_` of Plugin `name`, once `ok` holds for it.
fn condition(host: &Host, tools: &Tools, name: &str, type_: &str, ok: impl Fn(&serde_json::Value) -> bool) -> serde_json::Value {
    let kubectl = host.kubectl(tools);
    eventually_within(&format!("Plugin {name}'s {type_} condition"), Duration::from_secs(120), || {
        let out = kubectl.run(&["get", "plugin", name, "-o", "json"]);
        let o: serde_json::Value = serde_json::from_slice(&out.stdout).ok()?;
        let c = o["status"]["conditions"].as_array()?.iter().find(|c| c["type"] == type_)?.clone();
        ok(&c).then_some(c)
    })
}

/// A host-wide `--cosign-key` judges a Plugin object's `oci` source as it
/// judges `--plugin oci://`: a version signed with it runs, one signed by
/// another key is refused (Ready=False, Untrusted).
#[test]
fn a_plugin_objects_oci_source_is_admitted_by_the_hosts_cosign_key_only() {
    let Some(tools) = Tools::find() else { return };
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let registry = Registry::start(&tools, d);
    let (key, public) = key_pair(&tools, d, "trusted");
    let (other_key, _) = key_pair(&tools, d, "other");
    let home = [("HOME", d.to_str().unwrap())];
    let signed = digest_line(&ok(&tools.host, &["push", plugin("hello").to_str().unwrap(), &registry.oci("hello:v1")], &home));
    sign(&tools, d, &key, &registry.plain(&format!("hello@{signed}")), &[]);
    let by_other = digest_line(&ok(&tools.host, &["push", plugin("versioned-v2").to_str().unwrap(), &registry.oci("versioned:v1")], &home));
    sign(&tools, d, &other_key, &registry.plain(&format!("versioned@{by_other}")), &[]);

    let cache = d.join("cache");
    let args = ["--plugin-resources", "--cosign-key", public.to_str().unwrap(), "--oci-cache-dir", cache.to_str().unwrap()];
    let mut host = Host::start(&tools, d, "host", &args);
    let kubectl = host.kubectl(&tools);
    for (name, reference) in [("hello", registry.plain("hello:v1")), ("versioned", registry.plain("versioned:v1"))] {
        let object = format!(
            "apiVersion: plugins.operator-host.dev/v1alpha1\nkind: Plugin\nmetadata:\n  name: {name}\nspec:\n  source:\n    oci: {{reference: \"{reference}\"}}\n"
        );
        eventually_within("the Plugin CRD served", Duration::from_secs(60), || {
            kubectl.run_stdin(&["apply", "-f", "-"], Some(object.as_bytes())).status.success().then_some(())
        });
    }
    let ready = condition(&host, &tools, "hello", "Ready", |c| c["status"] == "True");
    assert_eq!(ready["reason"], "Serving", "{ready}");
    let refused = condition(&host, &tools, "versioned", "Ready", |c| c["status"] == "False");
    assert_eq!(refused["reason"], "Untrusted", "{refused}");
    assert!(refused["message"].as_str().unwrap().contains("verifies with the 1 trusted --cosign-key key(s)"), "{refused}");
    assert!(host.process.exited().is_none(), "the host exited:\n{}", host.process.log_tail(40));
}
