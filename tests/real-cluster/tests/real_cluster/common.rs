//! Helpers the scenarios share.

use real_cluster::{ControlPlane, HostProcess, Kubectl, Value, built, eventually};

pub const CRONJOB_CRD: &str = "cronjobs.batch.tutorial.kubebuilder.io";
pub const MYDEPLOYMENT_CRD: &str = "mydeployments.apps.example.com";

/// The host with both shipped plugins, as the administrator, ready.
pub fn host_with_both_plugins(cluster: &ControlPlane, name: &str, extra: &[&str]) -> HostProcess {
    let cronjob = built("plugins/cronjob.wasm").display().to_string();
    let mydeployment = built("plugins/mydeployment.wasm").display().to_string();
    let mut args = vec!["--plugin", &cronjob, "--plugin", &mydeployment];
    args.extend(extra);
    let mut host = HostProcess::start(name, &cluster.kubeconfig, &cluster.dir().join("logs"), &args);
    host.wait_ready();
    host
}

/// Jobs of the CronJob `name` (owned by it), not being deleted.
pub fn jobs_of(kubectl: &Kubectl, namespace: &str, name: &str) -> Vec<Value> {
    kubectl
        .items(&["get", "jobs", "-n", namespace])
        .into_iter()
        .filter(|j| j["metadata"]["ownerReferences"].as_array().is_some_and(|o| o.iter().any(|r| r["kind"] == "CronJob" && r["name"] == name)))
        .filter(|j| j["metadata"]["deletionTimestamp"].is_null())
        .collect()
}

pub fn name_of(object: &Value) -> String {
    object["metadata"]["name"].as_str().unwrap_or_default().to_string()
}

pub fn has_condition(object: &Value, kind: &str, status: &str) -> bool {
    object["status"]["conditions"].as_array().is_some_and(|cs| cs.iter().any(|c| c["type"] == kind && c["status"] == status))
}

/// Waits until kubectl serves the CRDs.
pub fn wait_for_crds(kubectl: &Kubectl, names: &[&str]) {
    let mut args = vec!["get", "crd"];
    args.extend(names);
    eventually(&format!("CRDs {names:?}"), || kubectl.run(&args).status.success().then_some(()));
}
