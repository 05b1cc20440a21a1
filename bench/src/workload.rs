//! Realistic inputs for one reconcile: a parent and `n` children built from
//! the plugins' own test fixtures (a CronJob with finished Jobs, a
//! MyDeployment with Running, Ready Pods), in steady state so every size
//! asks the plugin the same question: "anything to do?".

use serde_json::{Value, json};

const CRONJOB_PARENT: &str = include_str!("../../plugins/cronjob/tests/fixtures/history-limits-delete-the-oldest-finished-jobs/parent.yaml");
const CRONJOB_CHILDREN: &str = include_str!("../../plugins/cronjob/tests/fixtures/history-limits-delete-the-oldest-finished-jobs/children.yaml");
const CRONJOB_NOW: &str = include_str!("../../plugins/cronjob/tests/fixtures/history-limits-delete-the-oldest-finished-jobs/now.txt");
const MYDEPLOYMENT_PARENT: &str = include_str!("../../plugins/mydeployment/tests/fixtures/steady-state-only-reports-status/parent.yaml");
const MYDEPLOYMENT_CHILDREN: &str = include_str!("../../plugins/mydeployment/tests/fixtures/steady-state-only-reports-status/children.yaml");
const MYDEPLOYMENT_NOW: &str = include_str!("../../plugins/mydeployment/tests/fixtures/steady-state-only-reports-status/now.txt");

/// The plugins under test.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize, clap::ValueEnum)]
#[value(rename_all = "lower")]
pub enum Kind {
    CronJob,
    MyDeployment,
}

impl Kind {
    pub const ALL: [Kind; 2] = [Kind::CronJob, Kind::MyDeployment];

    /// The plugin's name (also its `.wasm` file name).
    pub fn plugin(self) -> &'static str {
        match self {
            Kind::CronJob => "cronjob",
            Kind::MyDeployment => "mydeployment",
        }
    }

    pub fn child(self) -> &'static str {
        match self {
            Kind::CronJob => "Jobs",
            Kind::MyDeployment => "Pods",
        }
    }
}

/// One reconcile's input, as JSON text the way the host passes it.
#[derive(Clone, Debug)]
pub struct Input {
    pub parent: String,
    pub children: Vec<String>,
    pub now_ms: i64,
}

/// The first document of `kind` in a multi-document fixture.
fn document(yaml: &str, kind: &str) -> Value {
    serde_saphyr::from_multiple::<Value>(yaml)
        .expect("fixture is YAML")
        .into_iter()
        .find(|v| v["kind"] == kind)
        .unwrap_or_else(|| panic!("fixture has a {kind}"))
}

fn now_ms(text: &str) -> i64 {
    chrono::DateTime::parse_from_rfc3339(text.trim()).expect("fixture now.txt is RFC 3339").timestamp_millis()
}

/// A parent with `n` children of the plugin's child kind.
pub fn input(kind: Kind, n: usize) -> Input {
    match kind {
        Kind::CronJob => cronjob(n),
        Kind::MyDeployment => mydeployment(n),
    }
}

/// A `*/1` CronJob whose last run was at 10:07 and `n` finished Jobs, one a
/// minute before that; the history limits keep them all, so nothing is due.
fn cronjob(n: usize) -> Input {
    let mut parent: Value = serde_saphyr::from_str(CRONJOB_PARENT).expect("fixture parent");
    parent["spec"]["successfulJobsHistoryLimit"] = json!(n.max(1));
    let template = document(CRONJOB_CHILDREN, "Job");
    let last = chrono::DateTime::parse_from_rfc3339("2026-01-15T10:07:00Z").expect("time");
    let children = (0..n)
        .map(|i| {
            let at = last - chrono::Duration::minutes(i as i64);
            let stamp = |d: chrono::Duration| (at + d).to_rfc3339_opts(chrono::SecondsFormat::Secs, true);
            let mut job = template.clone();
            let minutes = at.timestamp() / 60;
            job["metadata"]["name"] = json!(format!("cronjob-sample-{minutes}"));
            job["metadata"]["uid"] = json!(format!("9c1d{minutes:08}-0000-4000-8000-{i:012}"));
            job["metadata"]["creationTimestamp"] = json!(stamp(chrono::Duration::seconds(1)));
            job["metadata"]["annotations"]["batch.kubernetes.io/cronjob-scheduled-timestamp"] = json!(stamp(chrono::Duration::zero()));
            job["metadata"]["annotations"]["batch.tutorial.kubebuilder.io/scheduled-at"] = json!(stamp(chrono::Duration::zero()));
            job["status"]["startTime"] = json!(stamp(chrono::Duration::seconds(1)));
            job["status"]["completionTime"] = json!(stamp(chrono::Duration::seconds(20)));
            job.to_string()
        })
        .collect();
    Input { parent: parent.to_string(), children, now_ms: now_ms(CRONJOB_NOW) }
}

/// A MyDeployment of `n` replicas, all Running and Ready on the current
/// revision, plus its one ControllerRevision (so `n + 1` children).
fn mydeployment(n: usize) -> Input {
    let mut parent: Value = serde_saphyr::from_str(MYDEPLOYMENT_PARENT).expect("fixture parent");
    for field in ["replicas", "updatedReplicas", "readyReplicas", "availableReplicas"] {
        parent["status"][field] = json!(n);
    }
    parent["spec"]["replicas"] = json!(n);
    let template = document(MYDEPLOYMENT_CHILDREN, "Pod");
    let revision = document(MYDEPLOYMENT_CHILDREN, "ControllerRevision").to_string();
    let pods = (0..n).map(|i| {
        let mut pod = template.clone();
        pod["metadata"]["name"] = json!(format!("my-nginx-app-54db754775-{i:05}"));
        pod["metadata"]["uid"] = json!(format!("0a1b2c3d-0001-4e5f-8a9b-{i:012}"));
        pod["spec"]["nodeName"] = json!(format!("node-{}", i % 10 + 1));
        pod.to_string()
    });
    let children = std::iter::once(revision).chain(pods).collect();
    Input { parent: parent.to_string(), children, now_ms: now_ms(MYDEPLOYMENT_NOW) }
}
