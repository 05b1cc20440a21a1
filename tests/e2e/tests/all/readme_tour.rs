//! The README's two-minute tour, run as written: `host run --embedded` with
//! both shipped plugins as a separate process, driven only through the real
//! kubectl, with the sample paths the README uses.

use e2e::{Host, eventually, repo_file};

fn sample(path: &str) -> String {
    repo_file(path).display().to_string()
}

fn ready_pods(host: &Host, n: usize) -> Option<Vec<e2e::Value>> {
    let items = host.items(&["get", "pods", "-l", "app=my-nginx-app"]);
    let ready = items
        .iter()
        .filter(|p| p["status"]["conditions"].as_array().is_some_and(|c| c.iter().any(|c| c["type"] == "Ready" && c["status"] == "True")))
        .count();
    (items.len() == n && ready == n).then_some(items)
}

#[test]
fn the_mydeployment_part_of_the_tour_creates_scales_and_describes() {
    let host = Host::start(&[]);
    host.ok(&["get", "crds"]);
    host.ok(&["apply", "-f", &sample("plugins/mydeployment/samples/my-deployment-instance.yaml")]);
    let pods = eventually("3 Pods are Ready", || ready_pods(&host, 3));
    for p in &pods {
        let owner = &p["metadata"]["ownerReferences"][0];
        assert_eq!((owner["kind"].as_str(), owner["controller"].as_bool()), (Some("MyDeployment"), Some(true)));
    }
    host.ok(&["get", "md,pods"]);
    host.ok(&["scale", "md/my-nginx-app", "--replicas=5"]);
    eventually("5 Pods are Ready", || ready_pods(&host, 5));
    eventually("kubectl get md shows 5 available", || {
        let table = host.ok(&["get", "md", "my-nginx-app"]);
        let row = table.lines().nth(1)?.split_whitespace().map(String::from).collect::<Vec<_>>();
        (row.get(1..6).is_some_and(|r| r.iter().all(|c| c == "5"))).then_some(())
    });
    let described = host.ok(&["describe", "md", "my-nginx-app"]);
    assert!(described.contains("ScalingPods") && described.contains("operator-host/mydeployment"), "{described}");
}

#[test]
fn the_cronjob_part_of_the_tour_runs_a_job_and_refuses_a_bad_schedule() {
    let host = Host::start(&[]);
    host.ok(&["apply", "-f", &sample("plugins/cronjob/samples/batch_v1_cronjob.yaml")]);
    host.ok(&["get", "cronjobs.batch.tutorial.kubebuilder.io,jobs"]);
    // `*/1 * * * *` on the real clock: the first run is at the next minute boundary.
    eventually("a Job completes and the CronJob records its schedule time", || {
        let complete = host.items(&["get", "jobs"]).iter().any(|j| j["status"]["succeeded"] == 1);
        let cj = host.json(&["get", "cronjob.batch.tutorial.kubebuilder.io", "cronjob-sample"]);
        (complete && cj["status"]["lastScheduleTime"].is_string()).then_some(())
    });
    let bad = "apiVersion: batch.tutorial.kubebuilder.io/v1\nkind: CronJob\nmetadata: {name: bad}\nspec:\n  schedule: \"not a schedule\"\n  jobTemplate: {spec: {template: {spec: {restartPolicy: Never, containers: [{name: c, image: busybox}]}}}}\n";
    let o = host.kubectl_stdin(&["apply", "-f", "-"], Some(bad));
    let out = String::from_utf8_lossy(&o.stderr);
    assert!(!o.status.success(), "a bad schedule must be refused: {out}");
    assert!(out.contains("spec.schedule: Invalid value: \"not a schedule\""), "{out}");
}
