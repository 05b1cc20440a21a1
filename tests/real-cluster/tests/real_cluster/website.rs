//! The Website example (contract 0.3: desired state applied server-side) on
//! a real control plane: kube-apiserver's server-side apply, its defaulting
//! of Service and Pod-template fields, kube-controller-manager's Deployment
//! and ReplicaSet controllers and kwok's Pods. Reconciles that bring
//! nothing new must write nothing although the API server filled in fields
//! the plugin never sets (no update loop), `kubectl scale website` must
//! reach the Deployment, and deletion cascades through the real GC.

use real_cluster::{HostProcess, Kubectl, Value, built, eventually};

use crate::common::{has_condition, wait_for_crds};

const NAME: &str = "website-sample";
const MANAGER: &str = "operator-host/website";

fn get(kubectl: &Kubectl, kind: &str, name: &str) -> Option<Value> {
    let o = kubectl.run(&["get", kind, name, "-o", "json", "--show-managed-fields"]);
    o.status.success().then(|| serde_json::from_slice::<Value>(&o.stdout).unwrap())
}

fn resource_version(o: &Value) -> String {
    o["metadata"]["resourceVersion"].as_str().unwrap_or_default().to_string()
}

/// The managedFields entry of the plugin's applies.
fn applied_entry(o: &Value) -> Value {
    o["metadata"]["managedFields"]
        .as_array()
        .and_then(|fs| fs.iter().find(|f| f["manager"] == MANAGER && f["operation"] == "Apply"))
        .cloned()
        .unwrap_or_else(|| panic!("no Apply entry of {MANAGER}: {o}"))
}

fn ready_replicas(kubectl: &Kubectl, n: i64) -> Value {
    eventually(&format!("the Website to report {n} ready replicas"), || {
        let w = kubectl.json(&["get", "website", NAME]);
        (w["status"]["readyReplicas"] == n && has_condition(&w, "Ready", "True")).then_some(w)
    })
}

#[test]
fn a_website_applies_its_children_once_scales_and_never_rewrites_defaulted_fields() {
    let Some(cluster) = real_cluster::ControlPlane::builder().start() else { return };
    let plugin = built("wasm32-wasip2/release/website.wasm").display().to_string();
    let mut host = HostProcess::start("host", &cluster.kubeconfig, &cluster.dir().join("logs"), &["--plugin", &plugin]);
    host.wait_ready();
    let kubectl = cluster.admin();
    wait_for_crds(&kubectl, &["websites.web.example.com"]);

    let sample = std::fs::read_to_string(real_cluster::repo_file("plugins/examples/website/samples/web_v1alpha1_website.yaml")).unwrap();
    kubectl.apply(&sample);
    let config_map = eventually("the ConfigMap", || get(&kubectl, "configmap", &format!("{NAME}-content")));
    let service = eventually("the Service", || get(&kubectl, "service", NAME));
    let deployment = eventually("the Deployment", || get(&kubectl, "deployment", NAME));
    for child in [&config_map, &service, &deployment] {
        assert_eq!(child["metadata"]["ownerReferences"][0]["kind"], "Website", "{child}");
        assert_eq!(child["metadata"]["labels"]["operator-host.dev/applied-by"], "website", "{child}");
        applied_entry(child);
    }
    // kube-apiserver filled in what the plugin leaves out.
    assert_eq!(service["spec"]["ports"][0]["protocol"], "TCP", "{service}");
    assert_eq!(service["spec"]["sessionAffinity"], "None", "{service}");
    assert_eq!(deployment["spec"]["template"]["spec"]["volumes"][0]["configMap"]["defaultMode"], 420, "{deployment}");
    assert!(applied_entry(&service)["fieldsV1"]["f:spec"]["f:sessionAffinity"].is_null(), "the plugin does not own what it did not apply");

    // The Deployment's status moves several times on the way to two ready
    // replicas, and each move reconciles the Website again.
    let website = ready_replicas(&kubectl, 2);
    assert_eq!(website["status"]["selector"], "app.kubernetes.io/instance=website-sample,app.kubernetes.io/name=website");

    // The scale subresource: the Deployment follows.
    kubectl.ok(&["scale", "website", NAME, "--replicas=3"]);
    eventually("the Deployment to be scaled to 3", || (kubectl.json(&["get", "deployment", NAME])["spec"]["replicas"] == 3).then_some(()));
    ready_replicas(&kubectl, 3);

    // Every one of those reconciles applied all three children again; only
    // the scale changed one. The ConfigMap and the Service were never
    // written again, and the Deployment's spec changed exactly once.
    let after_cm = get(&kubectl, "configmap", &format!("{NAME}-content")).unwrap();
    let after_svc = get(&kubectl, "service", NAME).unwrap();
    let after_deploy = get(&kubectl, "deployment", NAME).unwrap();
    assert_eq!(resource_version(&after_cm), resource_version(&config_map), "the ConfigMap was rewritten: {after_cm}");
    assert_eq!(resource_version(&after_svc), resource_version(&service), "the Service was rewritten: {after_svc}");
    assert_eq!(after_deploy["metadata"]["generation"], 2, "created, then scaled once: {after_deploy}");

    kubectl.ok(&["delete", "website", NAME, "--timeout=60s"]);
    eventually("the children to be garbage-collected", || {
        let left = [("configmap", format!("{NAME}-content")), ("service", NAME.into()), ("deployment", NAME.into())]
            .iter()
            .any(|(kind, name)| kubectl.run(&["get", kind, name]).status.success());
        (!left).then_some(())
    });
}
