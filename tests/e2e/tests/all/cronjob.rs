//! The kubebuilder tutorial's CronJob through kubectl only: Jobs
//! on schedule that complete (simulated), status shown by `kubectl get -o
//! yaml`, history pruned to the limits, suspend, Forbid and Replace, refusal
//! of a bad schedule and of a too-long name by `kubectl apply`, and Jobs
//! deleted with their CronJob. The host runs the cluster's clock 60× faster
//! (`--clock-speed 60`), so the tutorial's `*/1 * * * *` runs every wall
//! second. (Short `@every` schedules would not do: as upstream, a Job is
//! named after its scheduled minute, so one CronJob starts at most one Job
//! a minute.)

use e2e::{Host, Value, eventually, read};

/// The tutorial's sample with another name, schedule and extra spec lines.
fn cronjob(name: &str, schedule: &str, extra_spec: &str) -> String {
    let sample = read("plugins/cronjob/samples/batch_v1_cronjob.yaml");
    let mut out = sample.replace("name: cronjob-sample", &format!("name: {name}")).replace("\"*/1 * * * *\"", &format!("\"{schedule}\""));
    if !extra_spec.is_empty() {
        out = out.replace("  jobTemplate:\n", &format!("{extra_spec}  jobTemplate:\n"));
    }
    out
}

/// The same, with each Job running `duration` (the simulated Job runner's annotation).
fn cronjob_lasting(name: &str, schedule: &str, extra_spec: &str, duration: &str) -> String {
    cronjob(name, schedule, extra_spec).replace(
        "  jobTemplate:\n    spec:\n",
        &format!("  jobTemplate:\n    metadata:\n      annotations:\n        sim.operator-host.dev/duration: {duration}\n    spec:\n"),
    )
}

fn jobs_of(host: &Host, cronjob: &str) -> Vec<Value> {
    host.items(&["get", "jobs"])
        .into_iter()
        .filter(|j| j["metadata"]["ownerReferences"].as_array().is_some_and(|rs| rs.iter().any(|r| r["kind"] == "CronJob" && r["name"] == cronjob)))
        .collect()
}

fn finished(job: &Value, condition: &str) -> bool {
    job["status"]["conditions"].as_array().is_some_and(|cs| cs.iter().any(|c| c["type"] == condition && c["status"] == "True"))
}

fn active(job: &Value) -> bool {
    !finished(job, "Complete") && !finished(job, "Failed") && job["metadata"]["deletionTimestamp"].is_null()
}

/// Names of the Jobs the CronJob reported creating (its SuccessfulCreate Events).
fn created(host: &Host, cronjob: &str) -> Vec<String> {
    let mut names: Vec<String> = host
        .items(&["get", "events"])
        .iter()
        .filter(|e| e["involvedObject"]["name"] == cronjob && e["reason"] == "SuccessfulCreate")
        .filter_map(|e| e["message"].as_str()?.strip_prefix("Created job ").map(String::from))
        .collect();
    names.sort();
    names.dedup();
    names
}

fn event_seen(host: &Host, cronjob: &str, reason: &str) -> bool {
    host.items(&["get", "events"]).iter().any(|e| e["involvedObject"]["name"] == cronjob && e["reason"] == reason)
}

#[test]
fn cronjobs_through_kubectl() {
    let host = Host::start(&["--clock-speed", "60"]);

    // The tutorial's sample as it is: Jobs every (cluster) minute that complete,
    // status shown by `kubectl get -o yaml`, history pruned to the default 3.
    host.apply(&read("plugins/cronjob/samples/batch_v1_cronjob.yaml"));
    let table = host.ok(&["get", "cronjob.batch.tutorial.kubebuilder.io", "cronjob-sample"]);
    assert!(table.lines().next().unwrap().split_whitespace().eq(["NAME", "SCHEDULE", "SUSPEND", "ACTIVE", "LAST", "SCHEDULE", "AGE"]), "{table}");
    assert!(table.contains("*/1 * * * *"), "{table}");
    let status = eventually("status.lastScheduleTime and an active Job", || {
        let cj = host.json(&["get", "cronjob.batch.tutorial.kubebuilder.io", "cronjob-sample"]);
        (cj["status"]["lastScheduleTime"].is_string() && cj["status"]["active"].as_array().is_some_and(|a| !a.is_empty())).then_some(cj)
    });
    assert_eq!(status["status"]["active"][0]["kind"], "Job");
    let yaml = host.ok(&["get", "cronjob.batch.tutorial.kubebuilder.io", "cronjob-sample", "-o", "yaml"]);
    assert!(yaml.contains("lastScheduleTime:"), "{yaml}");
    eventually("six Jobs created", || (created(&host, "cronjob-sample").len() >= 6).then_some(()));
    let jobs = jobs_of(&host, "cronjob-sample");
    assert!(jobs.iter().any(|j| finished(j, "Complete")), "Jobs complete: {jobs:?}");
    eventually("completed Jobs pruned to successfulJobsHistoryLimit (3)", || {
        (jobs_of(&host, "cronjob-sample").iter().filter(|j| finished(j, "Complete")).count() <= 3).then_some(())
    });

    // Suspend stops new Jobs; resuming starts them again.
    host.ok(&["patch", "cronjob.batch.tutorial.kubebuilder.io", "cronjob-sample", "--type=merge", "-p", r#"{"spec":{"suspend":true}}"#]);
    eventually("the suspension to be reconciled", || {
        let cj = host.json(&["get", "cronjob.batch.tutorial.kubebuilder.io", "cronjob-sample"]);
        let generation = cj["metadata"]["generation"].clone();
        cj["status"]["conditions"].as_array()?.iter().any(|c| c["type"] == "Reconciled" && c["observedGeneration"] == generation).then_some(())
    });
    let before = created(&host, "cronjob-sample").len();
    std::thread::sleep(std::time::Duration::from_secs(5));
    assert_eq!(created(&host, "cronjob-sample").len(), before, "no Job is created while suspended (5 cluster minutes)");
    host.ok(&["patch", "cronjob.batch.tutorial.kubebuilder.io", "cronjob-sample", "--type=merge", "-p", r#"{"spec":{"suspend":false}}"#]);
    eventually("Jobs again after resuming", || (created(&host, "cronjob-sample").len() > before).then_some(()));

    // Forbid: 3-minute Jobs every minute never overlap; skipped runs are evented.
    host.apply(&cronjob_lasting("forbid", "*/1 * * * *", "  concurrencyPolicy: Forbid\n", "3m"));
    eventually("a second Forbid Job", || (created(&host, "forbid").len() >= 2).then_some(()));
    let jobs = jobs_of(&host, "forbid");
    assert!(jobs.iter().filter(|j| active(j)).count() <= 1, "Forbid ran Jobs at once: {jobs:?}");
    assert!(event_seen(&host, "forbid", "JobAlreadyActive"), "a run skipped for Forbid is evented");

    // Replace: a Job still running when the next is due is deleted for it.
    host.apply(&cronjob_lasting("replace", "*/1 * * * *", "  concurrencyPolicy: Replace\n", "1h"));
    eventually("a replaced Job", || event_seen(&host, "replace", "SuccessfulDelete").then_some(()));
    eventually("one running Job under Replace", || (jobs_of(&host, "replace").iter().filter(|j| active(j)).count() == 1).then_some(()));

    // Refused by admission with the field error.
    let bad = host.kubectl_stdin(&["apply", "-f", "-"], Some(&cronjob("bad-schedule", "every now and then", "")));
    let err = String::from_utf8_lossy(&bad.stderr);
    assert!(!bad.status.success() && err.contains("spec.schedule"), "{err}");
    let long = "c".repeat(60);
    let bad = host.kubectl_stdin(&["apply", "-f", "-"], Some(&cronjob(&long, "*/1 * * * *", "")));
    let err = String::from_utf8_lossy(&bad.stderr);
    assert!(!bad.status.success() && err.contains("metadata.name") && err.contains("52"), "{err}");

    // Deleting a CronJob deletes its Jobs.
    host.ok(&["delete", "cronjob.batch.tutorial.kubebuilder.io", "cronjob-sample"]);
    eventually("the Jobs of a deleted CronJob to go", || jobs_of(&host, "cronjob-sample").is_empty().then_some(()));
}
