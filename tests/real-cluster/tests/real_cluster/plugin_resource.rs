//! The `Plugin` resource on a real API server, read with the real kubectl:
//! `host run --plugin-resources` installs the CRD, runs the plugin a Plugin
//! object's ConfigMap source names, and `kubectl get plugins` shows which
//! version runs (version, short digest, contract, tier, state) and Ready.

use real_cluster::{ControlPlane, HostProcess, built, eventually};
use sha2::{Digest, Sha256};

use crate::common::{CRONJOB_CRD, wait_for_crds};

const PLUGIN: &str = "apiVersion: plugins.operator-host.dev/v1alpha1
kind: Plugin
metadata:
  name: cronjob
spec:
  source:
    configMap: {namespace: default, name: plugins, key: cronjob.wasm}
";

#[test]
fn kubectl_get_plugins_shows_the_digest_and_ready_of_a_configmap_sourced_plugin() {
    let Some(cluster) = ControlPlane::builder().pods_run(false).start() else { return };
    let kubectl = cluster.admin();
    let gz = built("plugins/cronjob.wasm.gz");
    let digest = hex::encode(Sha256::digest(std::fs::read(built("plugins/cronjob.wasm")).unwrap()));
    kubectl.ok(&["create", "configmap", "plugins", &format!("--from-file=cronjob.wasm={}", gz.display())]);
    let mut host = HostProcess::start("host", &cluster.kubeconfig, &cluster.dir().join("logs"), &["--plugin-resources"]);
    host.wait_ready();
    wait_for_crds(&kubectl, &["plugins.plugins.operator-host.dev"]);
    kubectl.apply(PLUGIN);
    wait_for_crds(&kubectl, &[CRONJOB_CRD]);

    let table = eventually("`kubectl get plugins` to show cronjob Ready", || {
        let out = kubectl.ok(&["get", "plugins"]);
        out.lines().any(|l| l.starts_with("cronjob ") && l.split_whitespace().nth(6) == Some("True")).then_some(out)
    });
    let lines: Vec<&str> = table.lines().collect();
    let header: Vec<&str> = lines[0].split_whitespace().collect();
    assert_eq!(header, ["NAME", "VERSION", "DIGEST", "CONTRACT", "TIER", "STATE", "READY", "AGE"], "{table}");
    let row: Vec<&str> = lines.iter().find(|l| l.starts_with("cronjob ")).unwrap().split_whitespace().collect();
    assert_eq!(row[2], format!("sha256:{}", &digest[..12]), "{table}");
    assert!(["baseline", "optimized"].contains(&row[4]), "{table}");
    assert_eq!(row[5], "Serving", "{table}");
    let full = kubectl.ok(&["get", "plugin", "cronjob", "-o", "jsonpath={.status.digest} {.status.id}"]);
    assert_eq!(full, format!("sha256:{digest} plugin/cronjob"));

    // The plugin reconciles: the reconcile count of the cronjob controller moves.
    kubectl.apply("apiVersion: batch.tutorial.kubebuilder.io/v1\nkind: CronJob\nmetadata: {name: c, namespace: default}\nspec:\n  schedule: \"*/1 * * * *\"\n  jobTemplate:\n    spec:\n      template:\n        spec:\n          restartPolicy: OnFailure\n          containers: [{name: c, image: busybox}]\n");
    eventually("a reconcile of the CronJob", || (host.metric("controller_runtime_reconcile_total{controller=\"cronjob\"") >= 1.0).then_some(()));
}
