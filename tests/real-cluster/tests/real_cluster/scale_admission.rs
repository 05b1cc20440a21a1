//! `kubectl scale` does not go around a plugin's `validate` (issue 49): the
//! host's validating webhook configuration names `<plural>/scale` too, and
//! the webhook answers the `autoscaling/v1` Scale the real API server sends
//! as a review of the parent after scaling. The hostile test plugin's
//! `odd-replicas` mode refuses an even `spec.replicas`, a rule its CRD's
//! schema does not state. The same scenario on the embedded cluster:
//! tests/e2e (`scale_admission.rs`).

use real_cluster::{ControlPlane, HostProcess, Kubectl, built, eventually, free_port};

use crate::common::wait_for_crds;

const CRD: &str = "hostiles.test.operator.dev";
const WEBHOOK: &str = "hostiles.test.operator.dev";

fn hostile(name: &str, replicas: i64) -> String {
    format!(
        "apiVersion: test.operator.dev/v1\nkind: Hostile\nmetadata: {{name: {name}, namespace: default}}\nspec: {{mode: odd-replicas, replicas: {replicas}}}\n"
    )
}

fn replicas(admin: &Kubectl, name: &str) -> String {
    admin.ok(&["get", "hostile", name, "-o", "jsonpath={.spec.replicas}"])
}

#[test]
fn kubectl_scale_to_a_count_the_plugin_refuses_is_refused_with_its_message() {
    let Some(cluster) = ControlPlane::builder().pods_run(false).start() else { return };
    let admin = cluster.admin();
    let plugin = built("wasm32-wasip2/release/hostile.wasm").display().to_string();
    let port = free_port();
    let (addr, url) = (format!("127.0.0.1:{port}"), format!("https://127.0.0.1:{port}"));
    let certs = cluster.dir().join("host-certs").display().to_string();
    let args = ["--plugin", &plugin, "--webhook-addr", &addr, "--webhook-cert-dir", &certs, "--webhook-configure", "--webhook-url-base", &url];
    let mut host = HostProcess::start("host", &cluster.kubeconfig, &cluster.dir().join("logs"), &args);
    host.wait_ready();
    wait_for_crds(&admin, &[CRD]);

    let configuration = eventually("the host's validating webhook configuration", || {
        let out = admin.run(&["get", "validatingwebhookconfiguration", "operator-host", "-o", "json"]);
        out.status.success().then(|| serde_json::from_slice::<real_cluster::Value>(&out.stdout).unwrap())
    });
    assert_eq!(configuration["webhooks"][0]["name"], WEBHOOK);
    assert_eq!(configuration["webhooks"][0]["rules"][0]["resources"], real_cluster::json!(["hostiles", "hostiles/scale"]), "{configuration}");
    // The API server reads new configurations through an informer: wait
    // until it calls the webhook (a dry-run create of an even count refused).
    eventually("the API server calling the validating webhook", || {
        let out = admin.run_stdin(&["create", "--dry-run=server", "-f", "-"], Some(hostile("probe", 2).as_bytes()));
        (!out.status.success()).then_some(())
    });

    admin.apply(&hostile("odd", 1));
    let out = admin.run(&["scale", "hostile", "odd", "--replicas=4"]);
    let message = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "an even count was stored through /scale");
    assert!(message.contains(&format!("admission webhook \"{WEBHOOK}\" denied the request")), "{message}\n{}", host.log_tail(30));
    assert!(message.contains("Hostile.test.operator.dev \"odd\" is invalid"), "{message}");
    assert!(message.contains("spec.replicas: Invalid value: 4: must be odd"), "the plugin's field error: {message}");
    assert_eq!(replicas(&admin, "odd"), "1", "nothing stored");

    admin.ok(&["scale", "hostile", "odd", "--replicas=3"]);
    assert_eq!(replicas(&admin, "odd"), "3", "an odd count is admitted");
}
