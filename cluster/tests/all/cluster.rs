//! The simulated cluster parts (garbage collector, scheduler + kubelet, Job runner) next to the
//! API server, in-process, mostly under tokio's paused clock.

use crate::common;

use apiserver::{ApiServer, Config};
use common::{delete, get, post, put};
use operator_test_kit::until;
use serde_json::{Value, json};
use simulated_cluster::{self as cluster, ClusterConfig};
use std::sync::Arc;
use std::time::Duration;

const CMS: &str = "/api/v1/namespaces/default/configmaps";
const PODS: &str = "/api/v1/namespaces/default/pods";
const JOBS: &str = "/apis/batch/v1/namespaces/default/jobs";

async fn exists(s: &ApiServer, uri: &str) -> bool {
    get(s, uri).await.0 == 200
}

async fn cm(s: &ApiServer, name: &str, owners: &[(&str, &Value)]) -> Value {
    let refs: Vec<Value> = owners
        .iter()
        .map(|(kind_block, o)| {
            json!({"apiVersion": "v1", "kind": "ConfigMap", "name": o["metadata"]["name"], "uid": o["metadata"]["uid"], "blockOwnerDeletion": *kind_block == "block"})
        })
        .collect();
    let mut body = json!({"metadata": {"name": name}});
    if !refs.is_empty() {
        body["metadata"]["ownerReferences"] = json!(refs);
    }
    let (code, obj) = post(s, CMS, body).await;
    assert_eq!(code, 201, "{obj}");
    obj
}

fn cm_uri(name: &str) -> String {
    format!("{CMS}/{name}")
}

/// A server whose clock follows tokio's (paused) clock: virtual time for timestamps too.
fn virtual_server() -> ApiServer {
    let base = chrono::DateTime::parse_from_rfc3339("2030-01-01T00:00:00Z").unwrap().with_timezone(&chrono::Utc);
    let start = tokio::time::Instant::now();
    let clock = move || base + chrono::Duration::from_std(tokio::time::Instant::now() - start).unwrap();
    ApiServer::with_config(Config { clock: Arc::new(clock), ..Default::default() })
}

fn gc_only() -> ClusterConfig {
    ClusterConfig { nodes: 0, jobs: false, ..Default::default() }
}

#[tokio::test(start_paused = true)]
async fn background_deletion_of_an_owner_deletes_its_dependents() {
    let s = ApiServer::new();
    let _c = cluster::start(&s, gc_only());
    let owner = cm(&s, "owner", &[]).await;
    let other = cm(&s, "other", &[]).await;
    cm(&s, "dep-1", &[("", &owner)]).await;
    cm(&s, "dep-2", &[("block", &owner)]).await;
    cm(&s, "shared", &[("", &owner), ("", &other)]).await;
    assert_eq!(delete(&s, &cm_uri("owner"), None).await.0, 200);
    until("dependents are gone", Duration::from_secs(5), || async { !exists(&s, &cm_uri("dep-1")).await && !exists(&s, &cm_uri("dep-2")).await })
        .await;
    // A dependent with another live owner stays, minus the reference to the gone one.
    until("the shared dependent loses the dangling reference", Duration::from_secs(5), || async {
        let refs = get(&s, &cm_uri("shared")).await.1["metadata"]["ownerReferences"].clone();
        refs.as_array().is_some_and(|r| r.len() == 1 && r[0]["name"] == "other")
    })
    .await;
}

#[tokio::test(start_paused = true)]
async fn foreground_deletion_keeps_the_owner_until_blocking_dependents_are_gone() {
    let s = ApiServer::new();
    let _c = cluster::start(&s, gc_only());
    let owner = cm(&s, "owner", &[]).await;
    cm(&s, "free", &[("", &owner)]).await;
    // A blocking dependent held by its own finalizer: the owner must wait for it.
    let mut held = json!({"metadata": {"name": "held", "finalizers": ["example.com/hold"], "ownerReferences": [
        {"apiVersion": "v1", "kind": "ConfigMap", "name": "owner", "uid": owner["metadata"]["uid"], "blockOwnerDeletion": true}
    ]}});
    assert_eq!(post(&s, CMS, held.clone()).await.0, 201);
    let (code, _) = delete(&s, &cm_uri("owner"), Some(json!({"propagationPolicy": "Foreground"}))).await;
    assert_eq!(code, 200);
    until("the dependents are being deleted", Duration::from_secs(5), || async {
        !exists(&s, &cm_uri("free")).await && get(&s, &cm_uri("held")).await.1["metadata"]["deletionTimestamp"].is_string()
    })
    .await;
    tokio::time::sleep(Duration::from_secs(2)).await;
    let (code, o) = get(&s, &cm_uri("owner")).await;
    assert_eq!(code, 200, "the owner waits for its blocking dependent");
    assert_eq!(o["metadata"]["finalizers"], json!(["foregroundDeletion"]));
    assert!(o["metadata"]["deletionTimestamp"].is_string());
    // Release the dependent: it goes, then the owner.
    held = get(&s, &cm_uri("held")).await.1;
    held["metadata"]["finalizers"] = json!([]);
    assert_eq!(put(&s, &cm_uri("held"), held).await.0, 200);
    until("the owner is gone", Duration::from_secs(5), || async { !exists(&s, &cm_uri("owner")).await }).await;
}

#[tokio::test(start_paused = true)]
async fn orphan_deletion_keeps_dependents_and_removes_their_owner_references() {
    let s = ApiServer::new();
    let _c = cluster::start(&s, gc_only());
    let owner = cm(&s, "owner", &[]).await;
    let other = cm(&s, "other", &[]).await;
    cm(&s, "dep", &[("block", &owner)]).await;
    cm(&s, "both", &[("", &owner), ("", &other)]).await;
    let (code, o) = delete(&s, &cm_uri("owner"), Some(json!({"propagationPolicy": "Orphan"}))).await;
    assert_eq!(code, 200, "{o}");
    until("the owner is gone", Duration::from_secs(5), || async { !exists(&s, &cm_uri("owner")).await }).await;
    let dep = get(&s, &cm_uri("dep")).await.1;
    assert!(dep["metadata"].get("ownerReferences").is_none_or(|r| r == &json!([])), "{dep}");
    let both = get(&s, &cm_uri("both")).await.1;
    assert_eq!(both["metadata"]["ownerReferences"].as_array().unwrap().len(), 1);
    assert_eq!(both["metadata"]["ownerReferences"][0]["name"], "other");
    tokio::time::sleep(Duration::from_secs(2)).await;
    assert!(exists(&s, &cm_uri("dep")).await && exists(&s, &cm_uri("both")).await);
}

#[tokio::test(start_paused = true)]
async fn multi_level_ownership_is_collected_in_background_and_in_foreground() {
    let s = ApiServer::new();
    let _c = cluster::start(&s, gc_only());
    for policy in ["Background", "Foreground"] {
        let parent = cm(&s, "parent", &[]).await;
        let child = cm(&s, "child", &[("block", &parent)]).await;
        cm(&s, "grandchild", &[("block", &child)]).await;
        delete(&s, &cm_uri("parent"), Some(json!({"propagationPolicy": policy}))).await;
        until("all three levels are gone", Duration::from_secs(10), || async {
            !exists(&s, &cm_uri("parent")).await && !exists(&s, &cm_uri("child")).await && !exists(&s, &cm_uri("grandchild")).await
        })
        .await;
    }
}

#[tokio::test(start_paused = true)]
async fn dependents_of_an_owner_deleted_while_the_collector_was_not_running_are_deleted_at_start() {
    let s = ApiServer::new();
    let owner = cm(&s, "owner", &[]).await;
    cm(&s, "dep", &[("", &owner)]).await;
    assert_eq!(delete(&s, &cm_uri("owner"), None).await.0, 200);
    tokio::time::sleep(Duration::from_secs(1)).await;
    assert!(exists(&s, &cm_uri("dep")).await, "nothing collects without the cluster");
    let _c = cluster::start(&s, gc_only());
    until("the orphaned dependent is gone", Duration::from_secs(5), || async { !exists(&s, &cm_uri("dep")).await }).await;
}

fn pod(name: &str, annotations: Value) -> Value {
    json!({"metadata": {"name": name, "annotations": annotations}, "spec": {"containers": [
        {"name": "app", "image": "nginx:1.27"}, {"name": "sidecar", "image": "busybox:1.36"}
    ]}})
}

fn condition<'a>(obj: &'a Value, t: &str) -> &'a Value {
    obj["status"]["conditions"].as_array().and_then(|cs| cs.iter().find(|c| c["type"] == t)).unwrap_or(&Value::Null)
}

#[tokio::test(start_paused = true)]
async fn pods_are_scheduled_run_and_become_ready_with_container_statuses_from_their_spec() {
    let s = virtual_server();
    let c = cluster::start(&s, ClusterConfig { nodes: 2, ..Default::default() });
    assert_eq!(c.nodes(), ["node-1", "node-2"]);
    let node = get(&s, "/api/v1/nodes/node-2").await.1;
    assert_eq!(condition(&node, "Ready")["status"], "True");
    for n in ["a", "b"] {
        assert_eq!(post(&s, PODS, pod(n, json!({}))).await.0, 201);
    }
    until("pods run", Duration::from_secs(5), || async {
        get(&s, &format!("{PODS}/a")).await.1["status"]["phase"] == "Running" && get(&s, &format!("{PODS}/b")).await.1["status"]["phase"] == "Running"
    })
    .await;
    let a = get(&s, &format!("{PODS}/a")).await.1;
    let b = get(&s, &format!("{PODS}/b")).await.1;
    assert_ne!(a["spec"]["nodeName"], b["spec"]["nodeName"], "least-loaded scheduling spreads pods");
    assert_eq!(condition(&a, "PodScheduled")["status"], "True");
    assert_eq!(condition(&a, "Initialized")["status"], "True");
    assert_eq!(condition(&a, "Ready")["status"], "False");
    assert!(a["status"]["podIP"].is_string() && a["status"]["hostIP"].is_string() && a["status"]["startTime"].is_string());
    let cs = a["status"]["containerStatuses"].as_array().unwrap();
    assert_eq!(cs.len(), 2);
    assert_eq!(cs[0]["name"], "app");
    assert_eq!(cs[0]["image"], "nginx:1.27");
    assert_eq!(cs[1]["image"], "busybox:1.36");
    assert_eq!(cs[0]["started"], true);
    assert_eq!(cs[0]["restartCount"], 0);
    assert!(cs[0]["state"]["running"]["startedAt"].is_string());
    until("pods are ready", Duration::from_secs(5), || async { condition(&get(&s, &format!("{PODS}/a")).await.1, "Ready")["status"] == "True" })
        .await;
    let a = get(&s, &format!("{PODS}/a")).await.1;
    assert_eq!(condition(&a, "ContainersReady")["status"], "True");
    assert!(a["status"]["containerStatuses"].as_array().unwrap().iter().all(|c| c["ready"] == true));
    // Ready one second (the default delay) after start, in virtual time.
    let started = chrono::DateTime::parse_from_rfc3339(a["status"]["startTime"].as_str().unwrap()).unwrap();
    let ready = chrono::DateTime::parse_from_rfc3339(condition(&a, "Ready")["lastTransitionTime"].as_str().unwrap()).unwrap();
    assert_eq!((ready - started).num_seconds(), 1);
}

#[tokio::test(start_paused = true)]
async fn annotations_make_pods_slow_never_ready_crash_looping_or_failed() {
    let s = ApiServer::new();
    let _c = cluster::start(&s, ClusterConfig::default());
    let p = "sim.operator-host.dev/";
    post(&s, PODS, pod("slow", json!({format!("{p}ready-after"): "30s"}))).await;
    post(&s, PODS, pod("never", json!({format!("{p}never-ready"): "true"}))).await;
    post(&s, PODS, pod("crash", json!({format!("{p}restarts"): "3"}))).await;
    post(&s, PODS, pod("fail", json!({format!("{p}fail"): "true"}))).await;
    until("the failing pod fails", Duration::from_secs(10), || async { get(&s, &format!("{PODS}/fail")).await.1["status"]["phase"] == "Failed" })
        .await;
    let failed = get(&s, &format!("{PODS}/fail")).await.1;
    assert_eq!(failed["status"]["containerStatuses"][0]["state"]["terminated"]["exitCode"], 1);
    tokio::time::sleep(Duration::from_secs(10)).await;
    let slow = get(&s, &format!("{PODS}/slow")).await.1;
    assert_eq!(slow["status"]["phase"], "Running");
    assert_eq!(condition(&slow, "Ready")["status"], "False");
    let never = get(&s, &format!("{PODS}/never")).await.1;
    assert_eq!(never["status"]["phase"], "Running");
    assert_eq!(condition(&never, "Ready")["status"], "False");
    let crash = get(&s, &format!("{PODS}/crash")).await.1;
    assert_eq!(crash["status"]["containerStatuses"][0]["restartCount"], 3);
    assert_eq!(crash["status"]["containerStatuses"][0]["state"]["waiting"]["reason"], "CrashLoopBackOff");
    assert_eq!(condition(&crash, "Ready")["status"], "False");
    until("the slow pod is ready", Duration::from_secs(30), || async {
        condition(&get(&s, &format!("{PODS}/slow")).await.1, "Ready")["status"] == "True"
    })
    .await;
    assert_eq!(condition(&get(&s, &format!("{PODS}/never")).await.1, "Ready")["status"], "False");
}

#[tokio::test(start_paused = true)]
async fn deleting_a_pod_waits_for_its_grace_period_and_zero_grace_deletes_at_once() {
    let s = virtual_server();
    let _c = cluster::start(&s, ClusterConfig { pod_grace_period: Duration::from_secs(5), ..Default::default() });
    post(&s, PODS, pod("graceful", json!({}))).await;
    post(&s, PODS, pod("now", json!({}))).await;
    post(&s, PODS, pod("custom", json!({}))).await;
    until("pods run", Duration::from_secs(5), || async {
        let mut all = true;
        for n in ["graceful", "now", "custom"] {
            all &= get(&s, &format!("{PODS}/{n}")).await.1["status"]["phase"] == "Running";
        }
        all
    })
    .await;
    let (code, o) = delete(&s, &format!("{PODS}/graceful"), None).await;
    assert_eq!(code, 200, "{o}");
    assert_eq!(o["metadata"]["deletionGracePeriodSeconds"], 5);
    assert!(o["metadata"]["deletionTimestamp"].is_string());
    let (code, _) = delete(&s, &format!("{PODS}/now?gracePeriodSeconds=0"), None).await;
    assert_eq!(code, 200);
    assert!(!exists(&s, &format!("{PODS}/now")).await);
    let (code, o) = delete(&s, &format!("{PODS}/custom"), Some(json!({"gracePeriodSeconds": 20}))).await;
    assert_eq!(code, 200);
    assert_eq!(o["metadata"]["deletionGracePeriodSeconds"], 20);
    tokio::time::sleep(Duration::from_secs(3)).await;
    assert!(exists(&s, &format!("{PODS}/graceful")).await, "still terminating within its grace period");
    until("the graceful pod is gone", Duration::from_secs(5), || async { !exists(&s, &format!("{PODS}/graceful")).await }).await;
    assert!(exists(&s, &format!("{PODS}/custom")).await);
    until("the custom-grace pod is gone", Duration::from_secs(30), || async { !exists(&s, &format!("{PODS}/custom")).await }).await;
    // Unscheduled pods have no kubelet to wait for.
    post(&s, PODS, json!({"metadata": {"name": "elsewhere"}, "spec": {"schedulerName": "other", "containers": [{"name": "a", "image": "x"}]}})).await;
    assert_eq!(delete(&s, &format!("{PODS}/elsewhere"), None).await.0, 200);
}

fn job(name: &str, annotations: Value) -> Value {
    json!({"metadata": {"name": name, "annotations": annotations}, "spec": {"backoffLimit": 2, "template": {"spec": {
        "restartPolicy": "Never", "containers": [{"name": "main", "image": "busybox:1.36"}]
    }}}})
}

async fn check_jobs(s: &ApiServer, limit_secs: u64) {
    let p = "sim.operator-host.dev/";
    assert_eq!(post(s, JOBS, job("ok", json!({}))).await.0, 201);
    assert_eq!(post(s, JOBS, job("bad", json!({format!("{p}fail"): "true"}))).await.0, 201);
    let mut suspended = job("later", json!({}));
    suspended["spec"]["suspend"] = json!(true);
    assert_eq!(post(s, JOBS, suspended).await.0, 201);
    until("the jobs start", Duration::from_secs(limit_secs), || async { get(s, &format!("{JOBS}/ok")).await.1["status"]["active"] == 1 }).await;
    assert!(get(s, &format!("{JOBS}/ok")).await.1["status"]["startTime"].is_string());
    until("the jobs finish", Duration::from_secs(limit_secs), || async {
        condition(&get(s, &format!("{JOBS}/ok")).await.1, "Complete")["status"] == "True"
            && condition(&get(s, &format!("{JOBS}/bad")).await.1, "Failed")["status"] == "True"
    })
    .await;
    let ok = get(s, &format!("{JOBS}/ok")).await.1;
    assert_eq!(ok["status"]["succeeded"], 1);
    assert_eq!(ok["status"]["active"], 0);
    assert!(ok["status"]["completionTime"].is_string());
    assert_eq!(condition(&ok, "SuccessCriteriaMet")["status"], "True");
    assert_eq!(condition(&ok, "Complete")["reason"], "CompletionsReached");
    let bad = get(s, &format!("{JOBS}/bad")).await.1;
    assert_eq!(condition(&bad, "FailureTarget")["reason"], "BackoffLimitExceeded");
    assert_eq!(condition(&bad, "Failed")["reason"], "BackoffLimitExceeded");
    assert_eq!(bad["status"]["failed"], 3, "backoffLimit 2 is exceeded by the third failure");
    assert!(bad["status"].get("completionTime").is_none());
    assert!(get(s, &format!("{JOBS}/later")).await.1["status"].get("startTime").is_none(), "suspended jobs do not start");
}

#[tokio::test]
async fn jobs_complete_and_fail_as_annotated_under_the_real_clock() {
    let s = ApiServer::new();
    let _c = cluster::start(&s, ClusterConfig { job_duration: Duration::from_millis(300), ..Default::default() });
    check_jobs(&s, 30).await;
}

#[tokio::test(start_paused = true)]
async fn jobs_run_for_their_duration_in_virtual_time_under_a_paused_clock() {
    let s = virtual_server();
    let _c = cluster::start(&s, ClusterConfig { job_duration: Duration::from_secs(3600), ..Default::default() });
    let wall = std::time::Instant::now();
    check_jobs(&s, 7200).await;
    let p = "sim.operator-host.dev/";
    post(&s, JOBS, job("quick", json!({format!("{p}duration"): "10s"}))).await;
    until("the annotated job completes", Duration::from_secs(60), || async {
        condition(&get(&s, &format!("{JOBS}/quick")).await.1, "Complete")["status"] == "True"
    })
    .await;
    let ok = get(&s, &format!("{JOBS}/ok")).await.1;
    let quick = get(&s, &format!("{JOBS}/quick")).await.1;
    let took = |j: &Value| {
        let t = |f: &str| chrono::DateTime::parse_from_rfc3339(j["status"][f].as_str().unwrap()).unwrap();
        (t("completionTime") - t("startTime")).num_seconds()
    };
    assert_eq!(took(&ok), 3600);
    assert_eq!(took(&quick), 10);
    assert!(wall.elapsed() < Duration::from_secs(60), "virtual time, not wall time");
}

/// Regression: the Job runner wrote a new Job's status as soon as the create was committed,
/// so a client that created a Job and at once wrote its status with the resourceVersion the
/// create returned (the kubebuilder book's controller test does) was answered 409 Conflict.
/// Over HTTP with kube-rs, on a multi-threaded runtime as `host cluster` serves.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_status_write_right_after_creating_a_job_is_not_raced_by_the_job_runner() {
    use k8s_openapi::api::batch::v1::{Job, JobStatus};
    use kube::api::{Api, PostParams};
    let s = ApiServer::new();
    let _c = cluster::start(&s, ClusterConfig { job_duration: Duration::from_millis(300), ..Default::default() });
    let handle = s.serve().await.unwrap();
    let jobs: Api<Job> = Api::namespaced(handle.kube_client().unwrap(), "default");
    let names: Vec<String> = (0..20).map(|i| format!("faked-{i}")).collect();
    for name in &names {
        let created = jobs.create(&PostParams::default(), &serde_json::from_value(job(name, json!({}))).unwrap()).await.unwrap();
        let mut running = created;
        running.status = Some(JobStatus { active: Some(2), ..Default::default() });
        if let Err(e) = jobs.replace_status(name, &PostParams::default(), &running).await {
            panic!("status write of {name} right after its create: {e}");
        }
    }
    // The runner still runs each Job, from the copy the client wrote.
    until("every Job completes", Duration::from_secs(30), || async {
        let mut done = true;
        for name in &names {
            done &= condition(&get(&s, &format!("{JOBS}/{name}")).await.1, "Complete")["status"] == "True";
        }
        done
    })
    .await;
    let first = get(&s, &format!("{JOBS}/{}", names[0])).await.1;
    assert!(first["status"]["startTime"].is_string(), "{first}");
    assert_eq!(first["status"]["succeeded"], 1);
}

/// The real kubectl against the server + cluster over HTTP.
struct Kubectl {
    dir: tempfile::TempDir,
    kubectl: operator_test_kit::Kubectl,
}

impl Kubectl {
    fn new(handle: &apiserver::ServerHandle) -> Kubectl {
        let dir = tempfile::tempdir().unwrap();
        handle.write_kubeconfig(dir.path().join("kubeconfig")).unwrap();
        let kubectl = operator_test_kit::Kubectl::new(operator_test_kit::kubectl::system(), dir.path().join("kubeconfig")).with_home(dir.path());
        Kubectl { dir, kubectl }
    }

    fn command(&self, args: &[&str]) -> tokio::process::Command {
        let mut command = tokio::process::Command::from(self.kubectl.command(args));
        command.kill_on_drop(true);
        command
    }

    async fn ok(&self, args: &[&str]) -> String {
        self.kubectl.ok_async(args).await
    }

    async fn apply(&self, name: &str, yaml: &str) -> String {
        let path = self.dir.path().join(name);
        std::fs::write(&path, yaml).unwrap();
        self.ok(&["apply", "-f", path.to_str().unwrap()]).await
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kubectl_delete_cascade_foreground_waits_until_dependents_are_gone() {
    let s = ApiServer::new();
    let handle = s.serve().await.unwrap();
    let _c = cluster::start(&s, gc_only());
    let k = Kubectl::new(&handle);
    k.apply("owner.yaml", "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: owner}\n").await;
    let uid = k.ok(&["get", "configmap", "owner", "-o", "jsonpath={.metadata.uid}"]).await;
    let dep = format!(
        "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: dep\n  finalizers: [example.com/hold]\n  ownerReferences:\n  - {{apiVersion: v1, kind: ConfigMap, name: owner, uid: {uid}, blockOwnerDeletion: true}}\n"
    );
    k.apply("dep.yaml", &dep).await;
    let mut deleting = k.command(&["delete", "configmap", "owner", "--cascade=foreground", "--timeout=60s"]).spawn().unwrap();
    until("the dependent is being deleted", Duration::from_secs(30), || async {
        get(&s, &cm_uri("dep")).await.1["metadata"]["deletionTimestamp"].is_string()
    })
    .await;
    let fins = k.ok(&["get", "configmap", "owner", "-o", "jsonpath={.metadata.finalizers}"]).await;
    assert!(fins.contains("foregroundDeletion"), "{fins}");
    assert!(deleting.try_wait().unwrap().is_none(), "kubectl returned while a blocking dependent exists");
    k.ok(&["patch", "configmap", "dep", "--type=merge", "-p", r#"{"metadata":{"finalizers":null}}"#]).await;
    let status = tokio::time::timeout(Duration::from_secs(60), deleting.wait()).await.expect("kubectl delete returns").unwrap();
    assert!(status.success());
    assert!(!exists(&s, &cm_uri("owner")).await && !exists(&s, &cm_uri("dep")).await);
    handle.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kubectl_waits_for_ready_pods_and_complete_jobs_and_deletes_pods_gracefully() {
    let s = ApiServer::new();
    let handle = s.serve().await.unwrap();
    let _c =
        cluster::start(&s, ClusterConfig { ready_after: Duration::from_millis(200), job_duration: Duration::from_millis(300), ..Default::default() });
    let k = Kubectl::new(&handle);
    k.apply("pod.yaml", "apiVersion: v1\nkind: Pod\nmetadata: {name: web}\nspec:\n  containers: [{name: app, image: nginx:1.27}]\n").await;
    k.ok(&["wait", "--for=condition=Ready", "pod/web", "--timeout=60s"]).await;
    let table = k.ok(&["get", "pod", "web"]).await;
    assert!(table.contains("1/1") && table.contains("Running"), "{table}");
    let nodes = k.ok(&["get", "nodes"]).await;
    assert!(nodes.contains("node-1") && nodes.contains("Ready"), "{nodes}");
    k.apply("job.yaml", "apiVersion: batch/v1\nkind: Job\nmetadata: {name: once}\nspec:\n  template:\n    spec:\n      restartPolicy: Never\n      containers: [{name: main, image: busybox:1.36}]\n").await;
    k.ok(&["wait", "--for=condition=Complete", "job/once", "--timeout=60s"]).await;
    let out = k.ok(&["delete", "pod", "web", "--timeout=60s"]).await;
    assert!(out.contains("deleted"), "{out}");
    assert!(!exists(&s, &format!("{PODS}/web")).await);
    handle.shutdown().await;
}

#[tokio::test(start_paused = true)]
async fn namespace_deletion_waits_for_its_pods_grace_period_and_stopping_the_cluster_deletes_pods_at_once() {
    let s = ApiServer::new();
    let c = cluster::start(&s, ClusterConfig { pod_grace_period: Duration::from_secs(3), ..Default::default() });
    assert_eq!(post(&s, "/api/v1/namespaces", json!({"metadata": {"name": "team"}})).await.0, 201);
    let team_pods = "/api/v1/namespaces/team/pods";
    assert_eq!(post(&s, team_pods, pod("p", json!({}))).await.0, 201);
    until("the pod runs", Duration::from_secs(5), || async { get(&s, &format!("{team_pods}/p")).await.1["status"]["phase"] == "Running" }).await;
    assert_eq!(delete(&s, "/api/v1/namespaces/team", None).await.0, 200);
    let p = get(&s, &format!("{team_pods}/p")).await.1;
    assert_eq!(p["metadata"]["deletionGracePeriodSeconds"], 3, "{p}");
    assert_eq!(get(&s, "/api/v1/namespaces/team").await.1["status"]["phase"], "Terminating");
    until("the namespace is gone with its pod", Duration::from_secs(10), || async { !exists(&s, "/api/v1/namespaces/team").await }).await;

    post(&s, PODS, pod("q", json!({}))).await;
    until("the pod runs", Duration::from_secs(5), || async { get(&s, &format!("{PODS}/q")).await.1["status"]["phase"] == "Running" }).await;
    c.stop().await;
    assert_eq!(delete(&s, &format!("{PODS}/q"), None).await.0, 200, "no kubelet: deleted at once");
}

#[tokio::test(start_paused = true)]
async fn a_chain_whose_root_was_deleted_while_the_collector_was_not_running_is_collected_at_start() {
    let s = ApiServer::new();
    let parent = cm(&s, "parent", &[]).await;
    let child = cm(&s, "child", &[("block", &parent)]).await;
    cm(&s, "grandchild", &[("block", &child)]).await;
    let unrelated = cm(&s, "unrelated", &[]).await;
    cm(&s, "kept", &[("", &unrelated)]).await;
    assert_eq!(delete(&s, &cm_uri("parent"), None).await.0, 200);
    tokio::time::sleep(Duration::from_secs(1)).await;
    assert!(exists(&s, &cm_uri("child")).await && exists(&s, &cm_uri("grandchild")).await, "nothing collects without the cluster");
    let _c = cluster::start(&s, gc_only());
    until("both levels below the gone root are deleted", Duration::from_secs(10), || async {
        !exists(&s, &cm_uri("child")).await && !exists(&s, &cm_uri("grandchild")).await
    })
    .await;
    assert!(exists(&s, &cm_uri("kept")).await, "a dependent of a live owner stays");
}

#[tokio::test(start_paused = true)]
async fn a_foreground_deletion_requested_while_the_collector_was_not_running_completes_at_start() {
    let s = ApiServer::new();
    let parent = cm(&s, "parent", &[]).await;
    let child = cm(&s, "child", &[("block", &parent)]).await;
    cm(&s, "grandchild", &[("block", &child)]).await;
    let (code, _) = delete(&s, &cm_uri("parent"), Some(json!({"propagationPolicy": "Foreground"}))).await;
    assert_eq!(code, 200);
    tokio::time::sleep(Duration::from_secs(1)).await;
    let (code, o) = get(&s, &cm_uri("parent")).await;
    assert_eq!((code, o["metadata"]["finalizers"].clone()), (200, json!(["foregroundDeletion"])), "the owner waits for a collector");
    let _c = cluster::start(&s, gc_only());
    until("the whole chain is gone, owner last", Duration::from_secs(10), || async {
        !exists(&s, &cm_uri("parent")).await && !exists(&s, &cm_uri("child")).await && !exists(&s, &cm_uri("grandchild")).await
    })
    .await;
}
