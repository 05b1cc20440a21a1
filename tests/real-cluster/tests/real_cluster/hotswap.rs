//! Hot swap through the plugins ConfigMap on a real API server: gzipped
//! keys (what fits a real ConfigMap's 1 MiB), a new build swapped in, a
//! candidate staged and promoted by annotation, and a bad version rolled
//! back by the host on its own.

use std::path::PathBuf;
use std::time::Duration;

use real_cluster::{ControlPlane, HostProcess, Kubectl, built, eventually, eventually_within};

use crate::common::{CRONJOB_CRD, wait_for_crds};

const WIDGETS_CRD: &str = "widgets.swap.test.operator-host.dev";

/// `kubectl create configmap plugins --from-file=KEY=PATH... --dry-run=client -o yaml`.
fn configmap_yaml(kubectl: &Kubectl, files: &[(&str, PathBuf)]) -> String {
    let mut args = vec!["create".to_string(), "configmap".into(), "plugins".into(), "--dry-run=client".into(), "-o".into(), "yaml".into()];
    args.extend(files.iter().map(|(key, path)| format!("--from-file={key}={}", path.display())));
    kubectl.ok(&args.iter().map(String::as_str).collect::<Vec<_>>())
}

/// `kubectl replace` (or create) of the plugins ConfigMap with these keys.
fn publish(kubectl: &Kubectl, verb: &str, files: &[(&str, PathBuf)]) {
    let yaml = configmap_yaml(kubectl, files);
    let out = kubectl.run_stdin(&[verb, "-f", "-"], Some(yaml.as_bytes()));
    assert!(out.status.success(), "kubectl {verb} the plugins ConfigMap: {}", String::from_utf8_lossy(&out.stderr));
}

fn widget(kubectl: &Kubectl, name: &str) {
    kubectl
        .apply(&format!("apiVersion: swap.test.operator-host.dev/v1\nkind: Widget\nmetadata:\n  name: {name}\n  namespace: default\nspec: {{}}\n"));
}

/// The version the Widget's child ConfigMap was written by.
fn child_version(kubectl: &Kubectl, widget: &str) -> String {
    kubectl.ok(&["get", "configmap", "-l", &format!("widget={widget}"), "-o", "jsonpath={.items[*].data.version}"])
}

/// The first Event on the plugins ConfigMap with `reason`.
fn event(kubectl: &Kubectl, reason: &str) -> real_cluster::Value {
    eventually(&format!("a {reason} Event on the plugins ConfigMap"), || {
        kubectl.items(&["get", "events"]).into_iter().find(|e| e["involvedObject"]["name"] == "plugins" && e["reason"] == reason)
    })
}

/// A gzipped copy of a plugin file, as `gzip -9k` makes it.
fn gzipped(dir: &std::path::Path, from: &std::path::Path, name: &str) -> PathBuf {
    use std::io::Write;
    let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::best());
    gz.write_all(&std::fs::read(from).unwrap()).unwrap();
    let to = dir.join(name);
    std::fs::write(&to, gz.finish().unwrap()).unwrap();
    to
}

#[test]
fn plugins_in_a_configmap_are_swapped_staged_promoted_and_rolled_back_on_a_real_server() {
    let Some(cluster) = ControlPlane::builder().pods_run(false).start() else { return };
    let kubectl = cluster.admin();
    let scratch = cluster.dir().to_path_buf();
    let v1 = gzipped(&scratch, &built("wasm32-wasip2/release/versioned.wasm"), "v1.wasm.gz");
    let v2 = gzipped(&scratch, &built("plugins/versioned-v2.wasm"), "v2.wasm.gz");
    let broken = gzipped(&scratch, &built("plugins/versioned-broken.wasm"), "broken.wasm.gz");
    let cronjob = built("plugins/cronjob.wasm.gz");
    publish(&kubectl, "create", &[("cronjob.wasm", cronjob.clone()), ("widgets.wasm", v1.clone())]);
    let mut host = HostProcess::start(
        "host",
        &cluster.kubeconfig,
        &cluster.dir().join("logs"),
        &["--plugin-configmap", "default/plugins", "--rollback-window", "60s", "--rollback-min-calls", "3"],
    );
    host.wait_ready();
    wait_for_crds(&kubectl, &[CRONJOB_CRD, WIDGETS_CRD]);
    widget(&kubectl, "w");
    eventually("w's child from version 1", || (child_version(&kubectl, "w") == "1").then_some(()));

    // 1. A new build under the same key: swapped in, no restart.
    publish(&kubectl, "replace", &[("cronjob.wasm", cronjob.clone()), ("widgets.wasm", v2.clone())]);
    eventually("w's child rewritten by version 2", || (child_version(&kubectl, "w") == "2").then_some(()));
    let swapped = event(&kubectl, "PluginSwapped");
    let note = swapped["message"].as_str().unwrap_or_default();
    assert!(note.contains("versioned 1.0.0") && note.contains("versioned 2.0.0"), "{note}");

    // 2. Version 1 staged as a candidate beside 2, then promoted by annotation.
    publish(&kubectl, "replace", &[("cronjob.wasm", cronjob.clone()), ("widgets.wasm", v2.clone()), ("widgets.wasm.candidate", v1.clone())]);
    let staged = event(&kubectl, "PluginStaged");
    let note = staged["message"].as_str().unwrap_or_default().to_string();
    assert!(note.contains("candidate versioned 1.0.0") && note.contains("beside versioned 2.0.0"), "{note}");
    widget(&kubectl, "w2");
    let differs = event(&kubectl, "ShadowDiffers");
    assert_eq!(differs["type"], "Warning");
    eventually("w2's child from the serving version 2 (the candidate writes nothing)", || (child_version(&kubectl, "w2") == "2").then_some(()));
    let promote = note.split_whitespace().find(|w| w.starts_with("operator-host.dev/promote=")).expect("the promote command").trim_end_matches('`');
    kubectl.ok(&["annotate", "configmap", "plugins", "--overwrite", promote]);
    event(&kubectl, "PluginPromoted");
    eventually("every child rewritten by the promoted version 1", || {
        (child_version(&kubectl, "w") == "1" && child_version(&kubectl, "w2") == "1").then_some(())
    });

    // 3. A version that fails every reconcile is rolled back by the host.
    publish(&kubectl, "replace", &[("cronjob.wasm", cronjob), ("widgets.wasm", broken)]);
    for i in 0..4 {
        widget(&kubectl, &format!("b{i}"));
    }
    let rolled = eventually_within("a PluginRolledBack Event", Duration::from_secs(90), || {
        kubectl.items(&["get", "events"]).into_iter().find(|e| e["reason"] == "PluginRolledBack")
    });
    assert_eq!(rolled["type"], "Warning");
    let note = rolled["message"].as_str().unwrap_or_default();
    assert!(note.contains("versioned 3.0.0") && note.contains("rolled back to versioned 1.0.0"), "{note}");
    eventually("the new Widgets served by version 1 after the rollback", || (child_version(&kubectl, "b3") == "1").then_some(()));
    assert!(host.metric("plugin_rollbacks_total") >= 1.0, "{}", host.metrics());
}
