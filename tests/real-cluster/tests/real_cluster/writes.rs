//! Write paths on the real kube-apiserver, the scenarios the embedded server's
//! `apiserver/tests/all/writes.rs` runs with the same kubectl invocations: a
//! Secret's `stringData` lands in `data`, and `--validate=warn|strict` warn
//! about and refuse an unknown field in upstream's words.

use real_cluster::ControlPlane;

const POD_WITH_UNKNOWN_FIELD: &str = "apiVersion: v1
kind: Pod
metadata: {name: typo}
spec:
  foo: 1
  containers: [{name: app, image: nginx}]
";

#[test]
fn a_merge_patch_of_string_data_lands_in_data_and_unknown_fields_are_warned_about_or_refused() {
    let Some(cluster) = ControlPlane::builder().pods_run(false).controller_manager(false).start() else { return };
    let kubectl = cluster.admin();
    // No kube-controller-manager here, so no `default` ServiceAccount: the ServiceAccount
    // admission plugin would refuse the Pods below for its absence.
    kubectl.ok(&["create", "serviceaccount", "default"]);
    kubectl.ok(&["create", "secret", "generic", "s", "--from-literal=a=1"]);
    kubectl.ok(&["patch", "secret", "s", "--type=merge", "-p", r#"{"stringData":{"k":"v"}}"#]);
    assert_eq!(kubectl.ok(&["get", "secret", "s", "-o", "jsonpath={.data.k}"]), "dg==");
    assert_eq!(kubectl.json(&["get", "secret", "s"]).get("stringData"), None);

    let strict = kubectl.run_stdin(&["create", "--validate=strict", "-f", "-"], Some(POD_WITH_UNKNOWN_FIELD.as_bytes()));
    let stderr = String::from_utf8_lossy(&strict.stderr);
    assert!(!strict.status.success());
    assert!(stderr.contains(r#"Pod in version "v1" cannot be handled as a Pod: strict decoding error: unknown field "spec.foo""#), "{stderr}");
    let warn = kubectl.run_stdin(&["create", "--validate=warn", "-f", "-"], Some(POD_WITH_UNKNOWN_FIELD.as_bytes()));
    let stderr = String::from_utf8_lossy(&warn.stderr);
    assert!(warn.status.success(), "{stderr}");
    assert!(stderr.contains(r#"Warning: unknown field "spec.foo""#), "{stderr}");
}
