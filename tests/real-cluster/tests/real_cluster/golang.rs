//! The Go CronJob (plugins/examples/cronjob-go, the kubebuilder book's
//! logic in Go, built with the standard Go toolchain and `host
//! componentize`) on a real control plane beside the Rust one: two hosts,
//! `host run --plugin cronjob.wasm -n rust` and `host run --plugin
//! cronjob-go.wasm -n go`, serve the same CronJobs in their namespaces and
//! make the same Jobs (names, labels, annotations, templates, owners) and
//! the same statuses.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use real_cluster::{ControlPlane, HostProcess, Kubectl, Value, built, eventually_within, repo_file};

use crate::common::{CRONJOB_CRD, jobs_of, wait_for_crds};

const NAMESPACES: [&str; 2] = ["rust", "go"];

/// (name, spec lines): every minute (Allow), every minute in New York
/// (Forbid: the first Job never finishes without Pods, so no second), and
/// a schedule that does not parse (the host's validity gate, running each
/// build's `validate`, keeps it from reconcile: no Job).
const CRONJOBS: &[(&str, &str)] = &[
    ("every-minute", "  schedule: \"*/1 * * * *\"\n  concurrencyPolicy: Allow\n"),
    ("new-york", "  schedule: \"* * * * *\"\n  timeZone: America/New_York\n  concurrencyPolicy: Forbid\n"),
    ("six-fields", "  schedule: \"0 */2 * * * *\"\n"),
];

fn cronjob(namespace: &str, name: &str, spec: &str, suspend: bool) -> String {
    format!(
        "apiVersion: batch.tutorial.kubebuilder.io/v1\nkind: CronJob\nmetadata:\n  name: {name}\n  namespace: {namespace}\nspec:\n{spec}  suspend: {suspend}\n  \
         jobTemplate:\n    metadata:\n      labels:\n        app: {name}\n    spec:\n      template:\n        spec:\n          containers:\n          \
         - name: hello\n            image: busybox\n            args: [/bin/sh, -c, date]\n          restartPolicy: OnFailure\n"
    )
}

/// What must be the same of a Job made by either build: everything the
/// plugin decides (the API server's own additions, UIDs and the
/// controller-uid labels differ per namespace by nature).
fn job_as_decided(job: &Value) -> Value {
    let owner = &job["metadata"]["ownerReferences"][0];
    serde_json::json!({
        "name": job["metadata"]["name"],
        "labels": job["metadata"]["labels"].as_object().map(|l| l.iter().filter(|(k, _)| !k.contains("controller-uid") && *k != "job-name" && *k != "batch.kubernetes.io/job-name").collect::<BTreeMap<_, _>>()),
        "annotations": job["metadata"]["annotations"],
        "containers": job["spec"]["template"]["spec"]["containers"],
        "restartPolicy": job["spec"]["template"]["spec"]["restartPolicy"],
        "owner": [&owner["kind"], &owner["name"], &owner["controller"], &owner["blockOwnerDeletion"]],
    })
}

/// The status as decided: conditions without their transition times.
fn status_as_decided(cronjob: &Value) -> Value {
    let status = &cronjob["status"];
    let conditions: Vec<Value> = status["conditions"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|c| serde_json::json!([c["type"], c["status"], c["reason"], c["message"]]))
        .collect();
    let active: Vec<&Value> = status["active"].as_array().into_iter().flatten().map(|a| &a["name"]).collect();
    serde_json::json!({"conditions": conditions, "active": active, "lastScheduleTime": status["lastScheduleTime"]})
}

fn decided(kubectl: &Kubectl, namespace: &str) -> Value {
    let mut out = serde_json::Map::new();
    for (name, _) in CRONJOBS {
        let mut jobs: Vec<Value> = jobs_of(kubectl, namespace, name).iter().map(job_as_decided).collect();
        jobs.sort_by_key(|j| j["name"].as_str().unwrap_or_default().to_string());
        let status = status_as_decided(&kubectl.json(&["get", "cronjobs.batch.tutorial.kubebuilder.io", "-n", namespace, name]));
        out.insert(name.to_string(), serde_json::json!({"jobs": jobs, "status": status}));
    }
    Value::Object(out)
}

/// plugins/examples/cronjob-go built as its README says, with the built
/// host's `componentize` (the real control plane is here, so Go is).
fn build_cronjob_go(dir: &Path) -> PathBuf {
    let core = dir.join("cronjob-go.core.wasm");
    let component = dir.join("cronjob-go.wasm");
    let out = Command::new("go")
        .current_dir(repo_file("plugins/examples/cronjob-go"))
        .env("GOOS", "wasip1")
        .env("GOARCH", "wasm")
        .args(["build", "-trimpath", "-buildmode=c-shared", "-o"])
        .arg(&core)
        .arg(".")
        .output()
        .expect("go runs");
    assert!(out.status.success(), "go build: {}", String::from_utf8_lossy(&out.stderr));
    let out = Command::new(built("release/host")).arg("componentize").arg(&core).arg("-o").arg(&component).output().expect("host runs");
    assert!(out.status.success(), "host componentize: {}", String::from_utf8_lossy(&out.stderr));
    component
}

#[test]
fn the_go_cronjob_makes_the_same_jobs_as_the_rust_one_on_a_real_server() {
    let Some(cluster) = ControlPlane::builder().pods_run(false).start() else { return };
    let kubectl = cluster.admin();
    let logs = cluster.dir().join("logs");
    let mut hosts = Vec::new();
    let go_plugin = build_cronjob_go(cluster.dir());
    for (namespace, plugin) in NAMESPACES.iter().zip([built("plugins/cronjob.wasm"), go_plugin]) {
        kubectl.ok(&["create", "namespace", namespace]);
        let plugin = plugin.display().to_string();
        let mut host = HostProcess::start(&format!("host-{namespace}"), &cluster.kubeconfig, &logs, &["--plugin", &plugin, "--namespace", namespace]);
        host.wait_ready();
        hosts.push(host);
    }
    wait_for_crds(&kubectl, &[CRONJOB_CRD]);

    // Created suspended, and resumed once a minute boundary has passed
    // since both were created: a run is due from creation on, so both
    // sides then start from the same most recent activation.
    for namespace in NAMESPACES {
        for (name, spec) in CRONJOBS {
            kubectl.apply(&cronjob(namespace, name, spec, true));
        }
    }
    let created_minute = |namespace: &str| {
        let c = kubectl.json(&["get", "cronjobs.batch.tutorial.kubebuilder.io", "-n", namespace, "every-minute"]);
        c["metadata"]["creationTimestamp"].as_str().unwrap_or_default()[..16].to_string()
    };
    let latest_created = NAMESPACES.iter().map(|n| created_minute(n)).max().unwrap_or_default();
    // The server runs on this machine's clock.
    eventually_within("a minute boundary after the CronJobs were created", Duration::from_secs(90), || {
        (chrono::Utc::now().format("%Y-%m-%dT%H:%M").to_string() > latest_created).then_some(())
    });
    for namespace in NAMESPACES {
        for (name, spec) in CRONJOBS {
            kubectl.apply(&cronjob(namespace, name, spec, false));
        }
    }

    // Each side makes its first Jobs, then both agree in full.
    for namespace in NAMESPACES {
        for name in ["every-minute", "new-york"] {
            eventually_within(&format!("a Job of {namespace}/{name}"), Duration::from_secs(90), || {
                jobs_of(&kubectl, namespace, name).into_iter().next()
            });
        }
    }
    let agreed = eventually_within("both builds to have decided the same", Duration::from_secs(90), || {
        let (rust, go) = (decided(&kubectl, "rust"), decided(&kubectl, "go"));
        let settled = rust["every-minute"]["status"]["lastScheduleTime"].is_string();
        if settled && rust != go {
            eprintln!("not yet the same:\nrust: {rust}\ngo:   {go}");
        }
        (settled && rust == go).then_some(rust)
    });
    let first = agreed["every-minute"]["jobs"][0]["name"].as_str().unwrap_or_default();
    assert!(first.starts_with("every-minute-"), "{agreed}");
    assert_eq!(agreed["new-york"]["jobs"].as_array().map(Vec::len), Some(1), "Forbid: one Job while it runs: {agreed}");
    let zoned = agreed["new-york"]["jobs"][0]["annotations"]["batch.kubernetes.io/cronjob-scheduled-timestamp"].as_str().unwrap_or_default();
    assert!(zoned.ends_with("-05:00") || zoned.ends_with("-04:00"), "upstream's annotation in New York time: {zoned}");
    assert!(agreed["six-fields"]["jobs"].as_array().is_some_and(Vec::is_empty), "{agreed}");
    drop(hosts);
}
