//! The Website example (contract 0.3, desired state applied server-side) on
//! the embedded cluster, through kubectl only: a ConfigMap, a Deployment and
//! a Service applied with the plugin's field manager; reconciles that bring
//! nothing new write nothing, although the API server defaulted fields the
//! plugin never sets; `kubectl scale website` works; deletion cascades.

use e2e::{Host, Value, built, eventually, read};

const NAME: &str = "website-sample";
const MANAGER: &str = "operator-host/website";

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

fn get(host: &Host, kind: &str, name: &str) -> Option<Value> {
    let o = host.kubectl(&["get", kind, name, "-o", "json", "--show-managed-fields"]);
    o.status.success().then(|| serde_json::from_slice::<Value>(&o.stdout).unwrap())
}

fn ready_replicas(host: &Host, n: i64) -> Value {
    eventually(&format!("the Website to report {n} ready replicas"), || {
        let w = host.json(&["get", "website", NAME]);
        let ready = w["status"]["conditions"].as_array()?.iter().any(|c| c["type"] == "Ready" && c["status"] == "True");
        (w["status"]["readyReplicas"] == n && ready).then_some(w)
    })
}

#[test]
fn a_website_applies_its_children_once_scales_and_never_rewrites_defaulted_fields() {
    let plugin = built("wasm32-wasip2/release/website.wasm");
    let host = Host::start_with(&["--plugin".into(), plugin.display().to_string()]);
    host.wait_for_crds(&["websites.web.example.com"]);

    host.apply(&read("plugins/examples/website/samples/web_v1alpha1_website.yaml"));
    let config_map = eventually("the ConfigMap", || get(&host, "configmap", &format!("{NAME}-content")));
    let service = eventually("the Service", || get(&host, "service", NAME));
    let deployment = eventually("the Deployment", || get(&host, "deployment", NAME));
    for child in [&config_map, &service, &deployment] {
        assert_eq!(child["metadata"]["ownerReferences"][0]["kind"], "Website", "{child}");
        assert_eq!(child["metadata"]["labels"]["operator-host.dev/applied-by"], "website", "{child}");
        applied_entry(child);
    }
    // The API server filled in what the plugin leaves out.
    assert_eq!(service["spec"]["ports"][0]["protocol"], "TCP", "{service}");
    assert_eq!(service["spec"]["sessionAffinity"], "None", "{service}");
    assert_eq!(deployment["spec"]["template"]["spec"]["volumes"][0]["configMap"]["defaultMode"], 420, "{deployment}");
    assert!(applied_entry(&service)["fieldsV1"]["f:spec"]["f:sessionAffinity"].is_null(), "the plugin does not own what it did not apply");

    // The Deployment's status moves several times on the way to two ready
    // replicas, and each move reconciles the Website again.
    let website = ready_replicas(&host, 2);
    assert_eq!(website["status"]["selector"], "app.kubernetes.io/instance=website-sample,app.kubernetes.io/name=website");

    // The scale subresource: the Deployment follows.
    host.ok(&["scale", "website", NAME, "--replicas=3"]);
    eventually("the Deployment to be scaled to 3", || (host.json(&["get", "deployment", NAME])["spec"]["replicas"] == 3).then_some(()));
    ready_replicas(&host, 3);
    let scale: Value =
        serde_json::from_str(&host.ok(&["get", "--raw", &format!("/apis/web.example.com/v1alpha1/namespaces/default/websites/{NAME}/scale")]))
            .unwrap();
    assert_eq!((scale["spec"]["replicas"].as_i64(), scale["status"]["replicas"].as_i64()), (Some(3), Some(3)), "{scale}");

    // Every one of those reconciles applied all three children again; only
    // the scale changed one. The ConfigMap and the Service were never
    // written again, and the Deployment's spec changed exactly once.
    let after_cm = get(&host, "configmap", &format!("{NAME}-content")).unwrap();
    let after_svc = get(&host, "service", NAME).unwrap();
    let after_deploy = get(&host, "deployment", NAME).unwrap();
    assert_eq!(resource_version(&after_cm), resource_version(&config_map), "the ConfigMap was rewritten: {after_cm}");
    assert_eq!(resource_version(&after_svc), resource_version(&service), "the Service was rewritten: {after_svc}");
    assert_eq!(after_deploy["metadata"]["generation"], 2, "created, then scaled once: {after_deploy}");

    // Delete: the children go with the Website (garbage collector).
    host.ok(&["delete", "website", NAME, "--timeout=60s"]);
    eventually("the children to be garbage-collected", || {
        let left = [("configmap", format!("{NAME}-content")), ("service", NAME.into()), ("deployment", NAME.into())]
            .iter()
            .any(|(kind, name)| host.kubectl(&["get", kind, name]).status.success());
        (!left).then_some(())
    });
}
