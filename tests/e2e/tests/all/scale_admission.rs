//! `kubectl scale` does not go around a plugin's `validate` (issue 49): on
//! the embedded cluster the host's admission also judges `/scale` writes, as
//! the parent after scaling. The hostile test plugin's `odd-replicas` mode
//! refuses an even `spec.replicas`, a rule its CRD's schema does not state.
//! The same scenario on the real control plane: tests/real-cluster
//! (`scale_admission.rs`).

use e2e::{Host, built};

const HOSTILE: &str = "apiVersion: test.operator.dev/v1
kind: Hostile
metadata: {name: odd, namespace: default}
spec: {mode: odd-replicas, replicas: 1}
";

#[test]
fn kubectl_scale_to_a_count_the_plugin_refuses_is_refused_with_its_message() {
    let plugin = built("wasm32-wasip2/release/hostile.wasm");
    let host = Host::start_with(&["--plugin".into(), plugin.display().to_string()]);
    host.wait_for_crds(&["hostiles.test.operator.dev"]);
    host.apply(HOSTILE);

    let out = host.kubectl(&["scale", "hostile", "odd", "--replicas=4"]);
    let message = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "an even count was stored through /scale");
    // Worded, and the hook named, as on the real server (tests/real-cluster asserts the same).
    assert!(message.contains("admission webhook \"hostiles.test.operator.dev\" denied the request"), "{message}");
    assert!(message.contains("denied the request: Hostile.test.operator.dev \"odd\" is invalid"), "{message}");
    assert!(message.contains("spec.replicas: Invalid value: 4: must be odd"), "the plugin's field error: {message}");
    assert_eq!(host.ok(&["get", "hostile", "odd", "-o", "jsonpath={.spec.replicas}"]), "1", "nothing stored");

    host.ok(&["scale", "hostile", "odd", "--replicas=3"]);
    assert_eq!(host.ok(&["get", "hostile", "odd", "-o", "jsonpath={.spec.replicas}"]), "3", "an odd count is admitted");
}
