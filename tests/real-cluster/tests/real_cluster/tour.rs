//! The README's tour on a real control plane: `host --plugin cronjob.wasm
//! --plugin mydeployment.wasm` with `KUBECONFIG` at kube-apiserver. Jobs are
//! run by kube-controller-manager's Job controller with kwok's Pods, and
//! deletions cascade through kube-controller-manager's garbage collector.

use std::time::Duration;

use real_cluster::{ControlPlane, Kubectl, Value, eventually, eventually_within, repo_file};

use crate::common::{CRONJOB_CRD, MYDEPLOYMENT_CRD, has_condition, host_with_both_plugins, jobs_of, name_of, wait_for_crds};

#[test]
fn the_cronjob_tour_makes_real_jobs_that_complete_and_prunes_history() {
    let Some(cluster) = ControlPlane::builder().start() else { return };
    let _host = host_with_both_plugins(&cluster, "host", &[]);
    let kubectl = cluster.admin();
    wait_for_crds(&kubectl, &[CRONJOB_CRD, MYDEPLOYMENT_CRD]);
    let crd = kubectl.json(&["get", "crd", CRONJOB_CRD, "--show-managed-fields"]);
    assert!(has_condition(&crd, "Established", "True"), "{crd}");
    let fields = crd["metadata"]["managedFields"].as_array().cloned().unwrap_or_default();
    assert!(
        fields.iter().any(|f| f["manager"] == "operator-host" && f["operation"] == "Apply"),
        "installed by the host's server-side apply: {fields:?}"
    );

    // The sample runs every minute; a history of one successful Job.
    let sample = std::fs::read_to_string(repo_file("plugins/cronjob/samples/batch_v1_cronjob.yaml")).unwrap();
    kubectl.apply(&sample.replace("  concurrencyPolicy: Allow", "  successfulJobsHistoryLimit: 1\n  concurrencyPolicy: Allow"));
    let cronjob = kubectl.json(&["get", "cronjobs.batch.tutorial.kubebuilder.io", "cronjob-sample"]);

    // The first Job, at the next minute; kube-controller-manager's Job
    // controller runs it with a kwok Pod and marks it Complete.
    let first = eventually_within("the first Job", Duration::from_secs(80), || jobs_of(&kubectl, "default", "cronjob-sample").into_iter().next());
    let owner = &first["metadata"]["ownerReferences"][0];
    assert_eq!((owner["controller"].as_bool(), owner["uid"].as_str()), (Some(true), cronjob["metadata"]["uid"].as_str()));
    let first_name = name_of(&first);
    eventually("the first Job to complete", || has_condition(&kubectl.json(&["get", "job", &first_name]), "Complete", "True").then_some(()));
    let status = eventually("lastScheduleTime in the CronJob's status", || {
        let c = kubectl.json(&["get", "cronjobs.batch.tutorial.kubebuilder.io", "cronjob-sample"]);
        c["status"]["lastScheduleTime"].is_string().then_some(c)
    });
    assert!(has_condition(&status, "Valid", "True"), "{status}");

    // The second run a minute later; once it completes the first is pruned.
    let second = eventually_within("the second Job", Duration::from_secs(80), || {
        jobs_of(&kubectl, "default", "cronjob-sample").into_iter().map(|j| name_of(&j)).find(|n| *n != first_name)
    });
    eventually("the second Job to complete", || has_condition(&kubectl.json(&["get", "job", &second]), "Complete", "True").then_some(()));
    eventually("history pruned to one successful Job", || {
        let names: Vec<String> = jobs_of(&kubectl, "default", "cronjob-sample").iter().map(name_of).collect();
        (names == [second.clone()]).then_some(())
    });
    // The pruned Job's Pods go with it (background propagation, the real GC).
    eventually("the pruned Job's Pods to be collected", || {
        kubectl.items(&["get", "pods", "-l", &format!("job-name={first_name}")]).is_empty().then_some(())
    });

    // Deleting the CronJob takes its Jobs with it (the real GC).
    kubectl.ok(&["delete", "cronjobs.batch.tutorial.kubebuilder.io", "cronjob-sample"]);
    eventually("the CronJob's Jobs to be collected", || jobs_of(&kubectl, "default", "cronjob-sample").is_empty().then_some(()));
}

const SAMPLES: &str = "plugins/mydeployment/samples";

fn sample(name: &str) -> String {
    std::fs::read_to_string(repo_file(&format!("{SAMPLES}/{name}"))).unwrap_or_else(|e| panic!("{name}: {e}"))
}

fn pods(kubectl: &Kubectl) -> Vec<Value> {
    kubectl.items(&["get", "pods", "-l", "app=my-nginx-app"]).into_iter().filter(|p| p["metadata"]["deletionTimestamp"].is_null()).collect()
}

/// Waits until exactly `n` Pods run `image`, all Ready (kwok), none else.
fn settle(kubectl: &Kubectl, n: usize, image: &str) -> Vec<Value> {
    eventually(&format!("{n} Ready Pods of {image}"), || {
        let ps = pods(kubectl);
        let ok = ps.len() == n && ps.iter().all(|p| p["spec"]["containers"][0]["image"] == image && has_condition(p, "Ready", "True"));
        ok.then_some(ps)
    })
}

fn replace(kubectl: &Kubectl, file: &str) {
    let out = kubectl.run_stdin(&["replace", "-f", "-"], Some(sample(file).as_bytes()));
    assert!(out.status.success(), "kubectl replace -f {file}: {}", String::from_utf8_lossy(&out.stderr));
}

#[test]
fn the_mydeployment_tour_rolls_scales_rolls_back_and_cascades_through_the_real_gc() {
    let Some(cluster) = ControlPlane::builder().start() else { return };
    let _host = host_with_both_plugins(&cluster, "host", &[]);
    let kubectl = cluster.admin();
    wait_for_crds(&kubectl, &[MYDEPLOYMENT_CRD]);

    kubectl.apply(&sample("my-deployment-instance.yaml"));
    let first = settle(&kubectl, 3, "nginx:1.7.9");
    for p in &first {
        assert_eq!(p["spec"]["nodeName"], real_cluster::control_plane::NODE, "bound by kube-scheduler");
        let owner = &p["metadata"]["ownerReferences"][0];
        assert_eq!((owner["kind"].as_str(), owner["controller"].as_bool()), (Some("MyDeployment"), Some(true)));
    }
    replace(&kubectl, "my-deployment-instance-update-image-1.9.1.yaml");
    settle(&kubectl, 3, "nginx:1.9.1");
    kubectl.ok(&["scale", "md/my-nginx-app", "--replicas=5"]);
    settle(&kubectl, 5, "nginx:1.9.1");
    replace(&kubectl, "my-deployment-instance-update-image-and-scaleup-1.14.yaml");
    settle(&kubectl, 5, "nginx:1.14");
    eventually("status: 5 available", || (kubectl.json(&["get", "md", "my-nginx-app"])["status"]["availableReplicas"] == 5).then_some(()));

    // Rollback to revision 2 (nginx:1.9.1), as the sample asks.
    replace(&kubectl, "my-deployment-instance-rollback.yaml");
    settle(&kubectl, 5, "nginx:1.9.1");
    eventually("the RolledBack condition", || has_condition(&kubectl.json(&["get", "md", "my-nginx-app"]), "RolledBack", "True").then_some(()));
    let described = kubectl.ok(&["describe", "md", "my-nginx-app"]);
    assert!(described.contains("Events:") && described.contains("operator-host"), "{described}");

    // Delete: the real garbage collector removes the Pods and revisions.
    kubectl.ok(&["delete", "md", "my-nginx-app"]);
    eventually("the Pods to be collected", || kubectl.items(&["get", "pods", "-l", "app=my-nginx-app"]).is_empty().then_some(()));
    eventually("the revisions to be collected", || kubectl.items(&["get", "controllerrevisions", "-l", "app=my-nginx-app"]).is_empty().then_some(()));
}
