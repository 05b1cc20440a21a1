//! The Python hello plugin pushed with `host push` and run from the
//! registry; the polled tag moves to the Rust build (swapped in); then a
//! layer of the wrong media type, a tampered manifest, a tampered layer and
//! a registry that is down are each refused with a clear message while the
//! running version keeps serving.

use std::time::Duration;

use oci_tests::{Host, Registry, Tools, digest_line, eventually_within, ok, plugin};

#[test]
fn a_pushed_plugin_runs_from_the_registry_moves_with_its_tag_and_bad_versions_are_refused() {
    let Some(tools) = Tools::find() else { return };
    let dir = tempfile::tempdir().unwrap();
    let mut registry = Registry::start(&tools, dir.path());
    let stable = registry.oci("hello:stable");
    let py = ok(&tools.host, &["push", plugin("hello-py").to_str().unwrap(), &stable], &[]);
    let py_digest = digest_line(&py);

    let cache = dir.path().join("oci-cache");
    let mut host =
        Host::start(&tools, dir.path(), "host", &["--plugin", &stable, "--oci-poll-interval", "300ms", "--oci-cache-dir", cache.to_str().unwrap()]);
    assert!(host.log().contains(&format!("from {stable} ({py_digest}, the registry)")), "{}", host.log());
    host.serves(&tools, "Hi");

    // The tag moves to the Rust build: pulled and swapped in, same kinds.
    let rust = digest_line(&ok(&tools.host, &["push", plugin("hello").to_str().unwrap(), &stable], &[]));
    host.wait_log("the swap to the Rust build", &format!("to={rust}"));
    eventually_within("plugin_swaps_total{result=swapped}", Duration::from_secs(60), || {
        (host.metric(&format!("plugin_swaps_total{{plugin=\"{stable}\",result=\"swapped\"}}")) == 1.0).then_some(())
    });
    host.serves(&tools, "Bonjour");
    let rejected = |h: &Host| h.metric(&format!("plugin_swaps_total{{plugin=\"{stable}\",result=\"rejected\"}}"));

    // A layer that is no Wasm component (a container image layer type).
    let tar = dir.path().join("layer.tar");
    std::fs::write(&tar, b"not a plugin").unwrap();
    ok(
        &tools.oras,
        &[
            "push",
            "--plain-http",
            "--disable-path-validation",
            &registry.plain("hello:stable"),
            &format!("{}:application/vnd.oci.image.layer.v1.tar", tar.display()),
        ],
        &[("HOME", dir.path().to_str().unwrap())],
    );
    host.wait_log("the refusal of the tar layer", "layer media type application/vnd.oci.image.layer.v1.tar is not a Wasm component");
    assert_eq!(rejected(&host), 1.0);

    // A manifest whose bytes no longer hash to the digest the tag names.
    let twin = digest_line(&ok(&tools.host, &["push", plugin("hello-py").to_str().unwrap(), &registry.oci("hello:twin")], &[]));
    registry.tamper_manifest(&twin);
    registry.point_tag("hello", "stable", &twin);
    host.wait_log("the refusal of the tampered manifest", &format!("does not hash to {twin}"));
    assert_eq!(rejected(&host), 2.0);

    // A layer whose bytes no longer hash to the layer digest in the manifest.
    let v2 = plugin("versioned-v2");
    let other = digest_line(&ok(&tools.host, &["push", v2.to_str().unwrap(), &registry.oci("hello:other")], &[]));
    registry.tamper_blob(&oci_tests::sha256(&std::fs::read(&v2).unwrap()), 100);
    registry.point_tag("hello", "stable", &other);
    host.wait_log("the refusal of the tampered layer", "refused (a tampered or substituted blob)");
    assert_eq!(rejected(&host), 3.0);

    // The registry goes away: reported once, the running version serves.
    registry.stop();
    host.wait_log("the report of the registry being down", "cannot pull a new version of plugin");
    host.serves(&tools, "Hallo");
    assert!(host.log().contains("keeps serving"), "{}", host.log());
    assert_eq!(host.metric(&format!("plugin_swaps_total{{plugin=\"{stable}\",result=\"swapped\"}}")), 1.0, "nothing else was swapped in");

    // Back up, the tag moved to the Python build again: swapped in.
    registry.restart();
    ok(&tools.host, &["push", plugin("hello-py").to_str().unwrap(), &stable], &[]);
    eventually_within("the swap back to the Python build", Duration::from_secs(90), || {
        (host.metric(&format!("plugin_swaps_total{{plugin=\"{stable}\",result=\"swapped\"}}")) == 2.0).then_some(())
    });
    host.serves(&tools, "Ciao");
}

#[test]
fn a_plugin_that_cannot_be_pulled_at_start_up_is_bad_input() {
    let Some(tools) = Tools::find() else { return };
    let dir = tempfile::tempdir().unwrap();
    let registry = Registry::start(&tools, dir.path());
    let missing = registry.oci("nothing:v1");
    let out = oci_tests::run(&tools.host, &["run", "--embedded", "--metrics-addr", "0", "--plugin", &missing], &[]);
    assert_eq!(out.status.code(), Some(2), "{}", oci_tests::text(&out.stderr));
    assert!(oci_tests::text(&out.stderr).contains(&format!("plugin {missing}")), "{}", oci_tests::text(&out.stderr));
    let out = oci_tests::run(&tools.host, &["run", "--embedded", "--metrics-addr", "0", "--plugin", "oci://127.0.0.1/no-tag"], &[]);
    assert_eq!(out.status.code(), Some(2));
    assert!(oci_tests::text(&out.stderr).contains("neither a tag nor a digest"), "{}", oci_tests::text(&out.stderr));
}

/// `--plugin oci://R/hello:stable --plugin oci://R/hello:stable.candidate`:
/// a build pushed under the candidate tag is staged beside the running one
/// and shadowed; the host prints the `oras tag` that promotes it, and once
/// the tag is moved so, the candidate goes live (PluginPromoted) and serves.
#[test]
fn a_candidate_tag_is_shadowed_then_promoted_by_moving_the_tag() {
    let Some(tools) = Tools::find() else { return };
    let dir = tempfile::tempdir().unwrap();
    let registry = Registry::start(&tools, dir.path());
    let (stable, candidate) = (registry.oci("hello:stable"), registry.oci("hello:stable.candidate"));
    ok(&tools.host, &["push", plugin("hello-py").to_str().unwrap(), &stable], &[]);

    let cache = dir.path().join("oci-cache");
    let args = ["--plugin", &stable, "--plugin", &candidate, "--oci-poll-interval", "300ms", "--oci-cache-dir", cache.to_str().unwrap()];
    let mut host = Host::start(&tools, dir.path(), "host", &args);
    host.serves(&tools, "Hi");

    // The Rust build pushed as the candidate: staged, not swapped in.
    let rust = digest_line(&ok(&tools.host, &["push", plugin("hello").to_str().unwrap(), &candidate], &[]));
    let promote = format!("oras tag {} stable", registry.plain("hello:stable.candidate"));
    host.wait_log("the candidate staged", "staged beside hello-py");
    assert!(host.log().contains(&promote), "the staging message names the promotion: {}", host.log());
    host.serves(&tools, "Bonjour");
    eventually_within("the candidate shadowing the reconcile", Duration::from_secs(60), || {
        (host.metric("plugin_shadow_reconciles_total") >= 1.0).then_some(())
    });
    assert_eq!(host.metric(&format!("plugin_swaps_total{{plugin=\"{stable}\",result=\"swapped\"}}")), 0.0, "staged, not swapped");

    // Promoted as the host said: the running tag moved to the candidate's digest.
    let home = [("HOME", dir.path().to_str().unwrap())];
    ok(&tools.oras, &["tag", "--plain-http", &registry.plain("hello:stable.candidate"), "stable"], &home);
    host.wait_log("the swap to the candidate", &format!("to={rust}"));
    host.wait_log("the promotion", &format!("promoted to {stable}"));
    host.serves(&tools, "Ciao");
    assert!(host.process.exited().is_none(), "the host exited:\n{}", host.process.log_tail(40));
}

/// `host inspect`, `host validate` and `host reconcile` take the `oci://`
/// references `host run` takes: the pulled plugin is the pushed file (same
/// manifest and digest), it answers admission and reconcile offline, and a
/// reference that cannot be pulled is bad input naming it.
#[test]
fn inspect_validate_and_reconcile_take_a_registry_reference_as_run_does() {
    let Some(tools) = Tools::find() else { return };
    let dir = tempfile::tempdir().unwrap();
    let registry = Registry::start(&tools, dir.path());
    let stable = registry.oci("hello:stable");
    let file = plugin("hello");
    ok(&tools.host, &["push", file.to_str().unwrap(), &stable], &[]);
    let cache = dir.path().join("oci-cache");
    let cache = cache.to_str().unwrap();
    let json = |args: &[&str]| -> serde_json::Value { serde_json::from_str(&ok(&tools.host, args, &[])).unwrap() };

    let pulled = json(&["inspect", &stable, "--oci-cache-dir", cache, "-o", "json"]);
    let local = json(&["inspect", file.to_str().unwrap(), "-o", "json"]);
    assert_eq!(pulled["manifest"], local["manifest"]);
    assert_eq!(pulled["info"]["digest"], local["info"]["digest"], "the same component");

    let parent = dir.path().join("hello.yaml");
    std::fs::write(
        &parent,
        "apiVersion: example.operator.dev/v1alpha1\nkind: Hello\nmetadata:\n  name: world\n  namespace: default\nspec:\n  greeting: Hi\n",
    )
    .unwrap();
    let parent = parent.to_str().unwrap();
    let valid = ok(&tools.host, &["validate", "--plugin", &stable, "--oci-cache-dir", cache, parent], &[]);
    assert!(valid.contains("is valid"), "{valid}");
    let now = "2026-01-01T00:00:00Z";
    let actions = json(&["reconcile", "--plugin", &stable, "--oci-cache-dir", cache, "--parent", parent, "--now", now]);
    assert!(actions.to_string().contains("ConfigMap"), "{actions}");
    assert_eq!(actions, json(&["reconcile", "--plugin", file.to_str().unwrap(), "--parent", parent, "--now", now]), "the same answer as the file's");

    let missing = registry.oci("nothing:v1");
    let out = oci_tests::run(&tools.host, &["inspect", &missing, "--oci-cache-dir", cache], &[]);
    assert_eq!(out.status.code(), Some(2), "{}", oci_tests::text(&out.stderr));
    assert!(oci_tests::text(&out.stderr).contains(&format!("plugin {missing}")), "{}", oci_tests::text(&out.stderr));
}
