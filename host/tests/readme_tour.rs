//! The README's two-minute tour, run as written: `host run --embedded` with
//! both shipped plugins as a separate process, driven only through the real
//! kubectl.

mod common;

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use common::{wasm, workspace_root};

struct Host {
    child: Child,
    kubeconfig: PathBuf,
    _dir: tempfile::TempDir,
}

impl Drop for Host {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn start_host() -> Host {
    let dir = tempfile::tempdir().unwrap();
    let kubeconfig = dir.path().join("kubeconfig");
    let child = Command::new(env!("CARGO_BIN_EXE_host"))
        .args(["run", "--embedded", "--metrics-addr", "0", "--plugin"])
        .arg(wasm("cronjob"))
        .arg("--plugin")
        .arg(wasm("mydeployment"))
        .arg("--kubeconfig-out")
        .arg(&kubeconfig)
        .arg("--plugin-cache-dir")
        .arg(dir.path().join("cache"))
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("start host");
    let host = Host { child, kubeconfig, _dir: dir };
    eventually("the CRDs are installed", Duration::from_secs(60), || {
        let out = kubectl(&host.kubeconfig, &["get", "crds", "-o", "name"]);
        (out.contains("cronjobs.batch.tutorial.kubebuilder.io") && out.contains("mydeployments.apps.example.com")).then_some(())
    });
    host
}

fn kubectl_result(kubeconfig: &Path, args: &[&str]) -> (bool, String) {
    let out = Command::new("kubectl").args(args).env("KUBECONFIG", kubeconfig).current_dir(workspace_root()).output().expect("run kubectl");
    let text = String::from_utf8_lossy(&out.stdout).into_owned() + &String::from_utf8_lossy(&out.stderr);
    (out.status.success(), text)
}

fn kubectl(kubeconfig: &Path, args: &[&str]) -> String {
    kubectl_result(kubeconfig, args).1
}

fn eventually<T>(what: &str, limit: Duration, mut check: impl FnMut() -> Option<T>) -> T {
    let start = Instant::now();
    loop {
        if let Some(v) = check() {
            return v;
        }
        assert!(start.elapsed() < limit, "timed out after {limit:?} waiting until {what}");
        std::thread::sleep(Duration::from_millis(250));
    }
}

fn json(kubeconfig: &Path, args: &[&str]) -> serde_json::Value {
    let mut all = args.to_vec();
    all.extend(["-o", "json"]);
    serde_json::from_str(&kubectl(kubeconfig, &all)).unwrap_or(serde_json::Value::Null)
}

#[test]
fn the_mydeployment_part_of_the_tour_creates_scales_and_describes() {
    let host = start_host();
    let k = &host.kubeconfig;
    let (ok, out) = kubectl_result(k, &["apply", "-f", "plugins/mydeployment/samples/my-deployment-instance.yaml"]);
    assert!(ok, "{out}");
    let ready_pods = |n: usize| {
        move || {
            let pods = json(k, &["get", "pods", "-l", "app=my-nginx-app"]);
            let items = pods["items"].as_array().cloned().unwrap_or_default();
            let ready = items.iter().filter(|p| p["status"]["conditions"].as_array().is_some_and(|c| c.iter().any(|c| c["type"] == "Ready" && c["status"] == "True"))).count();
            (items.len() == n && ready == n).then_some(items)
        }
    };
    let pods = eventually("3 Pods are Ready", Duration::from_secs(60), ready_pods(3));
    for p in &pods {
        let owner = &p["metadata"]["ownerReferences"][0];
        assert_eq!((owner["kind"].as_str(), owner["controller"].as_bool()), (Some("MyDeployment"), Some(true)));
    }
    let (ok, out) = kubectl_result(k, &["scale", "md/my-nginx-app", "--replicas=5"]);
    assert!(ok, "{out}");
    eventually("5 Pods are Ready", Duration::from_secs(60), ready_pods(5));
    eventually("kubectl get md shows 5 available", Duration::from_secs(30), || {
        let table = kubectl(k, &["get", "md", "my-nginx-app"]);
        let row = table.lines().nth(1)?.split_whitespace().collect::<Vec<_>>();
        (row.get(1..6) == Some(&["5", "5", "5", "5", "5"][..])).then_some(())
    });
    let described = kubectl(k, &["describe", "md", "my-nginx-app"]);
    assert!(described.contains("ScalingPods") && described.contains("operator-host/mydeployment"), "{described}");
}

#[test]
fn the_cronjob_part_of_the_tour_runs_a_job_and_refuses_a_bad_schedule() {
    let host = start_host();
    let k = &host.kubeconfig;
    let (ok, out) = kubectl_result(k, &["apply", "-f", "plugins/cronjob/samples/batch_v1_cronjob.yaml"]);
    assert!(ok, "{out}");
    // `*/1 * * * *`: the first run is at the next minute boundary.
    eventually("a Job completes and the CronJob records its schedule time", Duration::from_secs(90), || {
        let jobs = json(k, &["get", "jobs"]);
        let complete = jobs["items"].as_array()?.iter().any(|j| j["status"]["succeeded"] == 1);
        let cj = json(k, &["get", "cronjob", "cronjob-sample"]);
        (complete && cj["status"]["lastScheduleTime"].is_string()).then_some(())
    });
    let bad = "apiVersion: batch.tutorial.kubebuilder.io/v1\nkind: CronJob\nmetadata: {name: bad}\nspec:\n  schedule: \"not a schedule\"\n  jobTemplate: {spec: {template: {spec: {restartPolicy: Never, containers: [{name: c, image: busybox}]}}}}\n";
    let path = host._dir.path().join("bad.yaml");
    std::fs::write(&path, bad).unwrap();
    let (ok, out) = kubectl_result(k, &["apply", "-f", path.to_str().unwrap()]);
    assert!(!ok, "a bad schedule must be refused: {out}");
    assert!(out.contains("spec.schedule: Invalid value: \"not a schedule\""), "{out}");
}
