//! The ReplicaSet and Deployment controllers of the simulated cluster: through the real kubectl
//! (/usr/bin/kubectl) over HTTP as a user drives a rollout, and in-process under virtual time
//! for the arithmetic a user can only watch.

use crate::common;

use crate::common::kubectl::Cluster;
use crate::{Simulated, simulated};
use apiserver::{ApiServer, Config};
use common::{delete, get, patch, post};
use operator_test_kit::{eventually, until};
use serde_json::{Value, json};
use simulated_cluster::{self as cluster, ClusterConfig};
use std::sync::Arc;
use std::time::Duration;

const DEPLOYS: &str = "/apis/apps/v1/namespaces/default/deployments";
const SETS: &str = "/apis/apps/v1/namespaces/default/replicasets";
const PODS: &str = "/api/v1/namespaces/default/pods";

/// A server over HTTP with the simulated cluster; Pods are Ready 200 ms after starting.
async fn kubectl_cluster() -> Simulated {
    simulated(ClusterConfig { ready_after: Duration::from_millis(200), ..Default::default() }).await
}

impl Cluster {
    /// `kubectl rollout status` must report success within a minute.
    async fn rolled_out(&self, name: &str) {
        let out = self.ok(&["rollout", "status", &format!("deployment/{name}"), "--timeout=60s"]).await;
        assert!(out.contains(&format!("deployment \"{name}\" successfully rolled out")), "{out}");
    }
}

fn label<'a>(obj: &'a Value, key: &str) -> &'a str {
    obj["metadata"]["labels"][key].as_str().unwrap_or_default()
}

fn annotation<'a>(obj: &'a Value, key: &str) -> &'a str {
    obj["metadata"]["annotations"][key].as_str().unwrap_or_default()
}

fn condition<'a>(obj: &'a Value, t: &str) -> &'a Value {
    obj["status"]["conditions"].as_array().and_then(|cs| cs.iter().find(|c| c["type"] == t)).unwrap_or(&Value::Null)
}

fn image(obj: &Value) -> &str {
    obj.pointer("/spec/template/spec/containers/0/image")
        .or_else(|| obj.pointer("/spec/containers/0/image"))
        .and_then(Value::as_str)
        .unwrap_or_default()
}

/// The ReplicaSets of `deployment`, by revision.
fn by_revision(sets: &[Value]) -> Vec<(i64, String, i64, String)> {
    let mut out: Vec<(i64, String, i64, String)> = sets
        .iter()
        .map(|rs| {
            let rev = annotation(rs, "deployment.kubernetes.io/revision").parse().unwrap_or(0);
            (rev, rs["metadata"]["name"].as_str().unwrap().to_string(), rs["spec"]["replicas"].as_i64().unwrap(), image(rs).to_string())
        })
        .collect();
    out.sort();
    out
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kubectl_create_deployment_then_rollout_status_completes() {
    let k = kubectl_cluster().await;
    k.ok(&["create", "deployment", "d1", "--image=nginx"]).await;
    k.rolled_out("d1").await;

    let d = k.json(&["get", "deployment", "d1"]).await;
    assert_eq!(d["status"]["observedGeneration"], d["metadata"]["generation"]);
    for field in ["replicas", "updatedReplicas", "readyReplicas", "availableReplicas"] {
        assert_eq!(d["status"][field], 1, "{field}: {}", d["status"]);
    }
    assert_eq!(condition(&d, "Available")["reason"], "MinimumReplicasAvailable");
    assert_eq!(condition(&d, "Progressing")["reason"], "NewReplicaSetAvailable");
    assert_eq!(annotation(&d, "deployment.kubernetes.io/revision"), "1");

    let sets = k.items(&["get", "replicasets"]).await;
    assert_eq!(sets.len(), 1);
    let rs = &sets[0];
    let hash = label(rs, "pod-template-hash");
    assert_eq!(rs["metadata"]["name"], format!("d1-{hash}"));
    assert_eq!(rs["spec"]["selector"]["matchLabels"]["pod-template-hash"], hash);
    assert_eq!(rs["metadata"]["ownerReferences"][0]["kind"], "Deployment");
    assert_eq!(rs["metadata"]["ownerReferences"][0]["controller"], true);
    assert_eq!(annotation(rs, "deployment.kubernetes.io/desired-replicas"), "1");
    assert_eq!(annotation(rs, "deployment.kubernetes.io/max-replicas"), "2", "1 + maxSurge 25% rounded up");

    let pods = k.items(&["get", "pods", "-l", "app=d1"]).await;
    assert_eq!(pods.len(), 1);
    let pod = &pods[0];
    assert!(pod["metadata"]["name"].as_str().unwrap().starts_with(&format!("d1-{hash}-")));
    assert_eq!(label(pod, "pod-template-hash"), hash);
    assert_eq!(pod["metadata"]["ownerReferences"][0]["name"], rs["metadata"]["name"]);
    assert_eq!(pod["status"]["phase"], "Running");
    let described = k.ok(&["describe", "deployment", "d1"]).await;
    assert!(described.contains(&format!("Scaled up replica set d1-{hash} from 0 to 1")), "{described}");

    // `kubectl logs deploy/d1` finds a Pod by the Deployment's selector and reads its pods/log
    // (empty: simulated containers print nothing); so do the ReplicaSet and label forms.
    let pod_name = pod["metadata"]["name"].as_str().unwrap();
    let logs = k.kubectl(&["logs", "deploy/d1", "-v=6"]).await;
    assert!(logs.ok(), "{}", logs.text());
    assert_eq!(logs.stdout, "");
    assert!(logs.stderr.contains(&format!("/api/v1/namespaces/default/pods/{pod_name}/log")), "kubectl read the Pod's log: {}", logs.stderr);
    assert_eq!(k.ok(&["logs", &format!("replicaset/d1-{hash}")]).await, "");
    assert_eq!(k.ok(&["logs", "-l", "app=d1", "--prefix"]).await, "");
    let e = k.fails(&["logs", "deploy/d1", "-c", "nope"]).await;
    assert!(e.contains(&format!("container nope is not valid for pod {pod_name}")), "{e}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kubectl_set_image_rolls_to_a_new_replica_set_and_history_and_undo_follow() {
    let k = kubectl_cluster().await;
    k.ok(&["create", "deployment", "web", "--image=nginx:1.26", "--replicas=3"]).await;
    k.rolled_out("web").await;
    k.ok(&["annotate", "deployment/web", "kubernetes.io/change-cause=move to 1.27"]).await;
    k.ok(&["set", "image", "deployment/web", "nginx=nginx:1.27"]).await;
    k.rolled_out("web").await;

    let sets = by_revision(&k.items(&["get", "replicasets"]).await);
    assert_eq!(sets.len(), 2, "{sets:?}");
    assert_eq!((sets[0].0, sets[0].2, sets[0].3.as_str()), (1, 0, "nginx:1.26"), "the old ReplicaSet is scaled to 0");
    assert_eq!((sets[1].0, sets[1].2, sets[1].3.as_str()), (2, 3, "nginx:1.27"), "the new one has every replica");
    let pods = k.items(&["get", "pods", "-l", "app=web"]).await;
    let live: Vec<&Value> = pods.iter().filter(|p| p["metadata"]["deletionTimestamp"].is_null()).collect();
    assert_eq!(live.len(), 3);
    assert!(live.iter().all(|p| image(p) == "nginx:1.27"), "{live:?}");

    let history = k.ok(&["rollout", "history", "deployment/web"]).await;
    let rows: Vec<Vec<&str>> =
        history.lines().map(|l| l.split_whitespace().collect()).filter(|r: &Vec<&str>| r.first().is_some_and(|c| c.parse::<u32>().is_ok())).collect();
    assert_eq!(rows.iter().map(|r| r[0]).collect::<Vec<_>>(), ["1", "2"], "{history}");
    assert!(history.contains("move to 1.27"), "the change-cause of revision 2: {history}");
    let revision_1 = k.ok(&["rollout", "history", "deployment/web", "--revision=1"]).await;
    assert!(revision_1.contains("nginx:1.26"), "{revision_1}");

    let undo = k.ok(&["rollout", "undo", "deployment/web"]).await;
    assert!(undo.contains("rolled back"), "{undo}");
    k.rolled_out("web").await;
    let d = k.json(&["get", "deployment", "web"]).await;
    assert_eq!(image(&d), "nginx:1.26", "the previous template is back");
    assert_eq!(annotation(&d, "deployment.kubernetes.io/revision"), "3");
    let sets = by_revision(&k.items(&["get", "replicasets"]).await);
    assert_eq!(sets.len(), 2, "the first ReplicaSet is reused, not copied: {sets:?}");
    assert_eq!((sets[0].0, sets[0].2, sets[0].3.as_str()), (2, 0, "nginx:1.27"));
    assert_eq!((sets[1].0, sets[1].2, sets[1].3.as_str()), (3, 3, "nginx:1.26"));
    let reused = k.json(&["get", "replicaset", &sets[1].1]).await;
    assert_eq!(annotation(&reused, "deployment.kubernetes.io/revision-history"), "1");
    let history = k.ok(&["rollout", "history", "deployment/web"]).await;
    let revisions: Vec<&str> = history.lines().filter_map(|l| l.split_whitespace().next()).filter(|c| c.parse::<u32>().is_ok()).collect();
    assert_eq!(revisions, ["2", "3"], "{history}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kubectl_scale_pause_resume_restart_and_deleting_the_deployment_cascades() {
    let k = kubectl_cluster().await;
    k.ok(&["create", "deployment", "d1", "--image=nginx"]).await;
    k.rolled_out("d1").await;
    k.ok(&["scale", "deployment/d1", "--replicas=5"]).await;
    k.rolled_out("d1").await;
    let pods = k.items(&["get", "pods", "-l", "app=d1"]).await;
    assert_eq!(pods.len(), 5);
    assert!(pods.iter().all(|p| p["status"]["phase"] == "Running"));
    let rs = &k.items(&["get", "replicasets"]).await[0];
    assert_eq!(rs["spec"]["replicas"], 5);
    assert_eq!(rs["status"]["readyReplicas"], 5);
    assert_eq!(annotation(rs, "deployment.kubernetes.io/desired-replicas"), "5");
    let table = k.ok(&["get", "deployment", "d1"]).await;
    assert!(table.lines().nth(1).is_some_and(|l| l.split_whitespace().nth(1) == Some("5/5")), "{table}");

    k.ok(&["scale", "deployment/d1", "--replicas=2"]).await;
    k.rolled_out("d1").await;
    eventually("3 Pods are deleted", Duration::from_secs(30), || async {
        let pods = k.items(&["get", "pods", "-l", "app=d1"]).await;
        (pods.len() == 2).then_some(())
    })
    .await;

    // Paused, a template change waits; resumed, it rolls; a restart rolls again.
    k.ok(&["rollout", "pause", "deployment/d1"]).await;
    k.ok(&["set", "image", "deployment/d1", "nginx=nginx:1.27"]).await;
    tokio::time::sleep(Duration::from_secs(1)).await;
    assert_eq!(k.items(&["get", "replicasets"]).await.len(), 1, "no rollout while paused");
    let d = k.json(&["get", "deployment", "d1"]).await;
    assert_eq!(condition(&d, "Progressing")["reason"], "DeploymentPaused");
    k.ok(&["rollout", "resume", "deployment/d1"]).await;
    k.rolled_out("d1").await;
    k.ok(&["rollout", "restart", "deployment/d1"]).await;
    k.rolled_out("d1").await;
    let sets = by_revision(&k.items(&["get", "replicasets"]).await);
    assert_eq!(sets.iter().map(|s| (s.0, s.2)).collect::<Vec<_>>(), [(1, 0), (2, 0), (3, 2)], "{sets:?}");

    k.ok(&["delete", "deployment", "d1"]).await;
    eventually("the ReplicaSet and Pods are collected", Duration::from_secs(30), || async {
        let sets = k.items(&["get", "replicasets"]).await;
        let pods = k.items(&["get", "pods", "-l", "app=d1"]).await;
        (sets.is_empty() && pods.is_empty()).then_some(())
    })
    .await;
}

// ---- in-process, virtual time ----------------------------------------------------------------

/// A server whose clock follows tokio's (paused) clock.
fn virtual_server() -> ApiServer {
    let base = chrono::DateTime::parse_from_rfc3339("2030-01-01T00:00:00Z").unwrap().with_timezone(&chrono::Utc);
    let start = tokio::time::Instant::now();
    let clock = move || base + chrono::Duration::from_std(tokio::time::Instant::now() - start).unwrap();
    ApiServer::with_config(Config { clock: Arc::new(clock), ..Default::default() })
}

fn deployment(name: &str, replicas: i64, image: &str, strategy: Value) -> Value {
    json!({"metadata": {"name": name}, "spec": {
        "replicas": replicas, "strategy": strategy,
        "selector": {"matchLabels": {"app": name}},
        "template": {"metadata": {"labels": {"app": name}}, "spec": {"containers": [{"name": "c", "image": image}]}},
    }})
}

async fn items(s: &ApiServer, uri: &str) -> Vec<Value> {
    get(s, uri).await.1["items"].as_array().cloned().unwrap_or_default()
}

async fn live_pods(s: &ApiServer) -> Vec<Value> {
    items(s, PODS).await.into_iter().filter(|p| p["metadata"]["deletionTimestamp"].is_null()).collect()
}

#[tokio::test(start_paused = true)]
async fn a_rolling_update_never_exceeds_the_surge_nor_drops_below_the_availability_floor() {
    let s = virtual_server();
    let _c = cluster::start(&s, ClusterConfig { ready_after: Duration::from_secs(2), ..Default::default() });
    let strategy = json!({"type": "RollingUpdate", "rollingUpdate": {"maxSurge": "20%", "maxUnavailable": "10%"}});
    assert_eq!(post(&s, DEPLOYS, deployment("r", 8, "app:1", strategy)).await.0, 201);
    until("8 Pods are ready", Duration::from_secs(30), || async { get(&s, &format!("{DEPLOYS}/r")).await.1["status"]["availableReplicas"] == 8 })
        .await;
    let (code, _) = patch(
        &s,
        &format!("{DEPLOYS}/r"),
        "application/merge-patch+json",
        json!({"spec": {"template": {"spec": {"containers": [{"name": "c", "image": "app:2"}]}}}}),
    )
    .await;
    assert_eq!(code, 200);
    // Of 8: surge 20% = 1.6, rounded up to 2; unavailable 10% = 0.8, rounded down to 0: at
    // most 10 Pods, at least 8 ready, all along.
    let mut most = 0;
    loop {
        let pods = live_pods(&s).await;
        let ready = pods.iter().filter(|p| condition(p, "Ready")["status"] == "True").count();
        most = most.max(pods.len());
        assert!(pods.len() <= 10, "more than replicas + maxSurge: {}", pods.len());
        assert!(ready >= 8, "fewer than replicas - maxUnavailable ready: {ready}");
        let d = get(&s, &format!("{DEPLOYS}/r")).await.1;
        let observed = d["status"]["observedGeneration"] == d["metadata"]["generation"];
        if observed && d["status"]["updatedReplicas"] == 8 && d["status"]["availableReplicas"] == 8 && d["status"]["replicas"] == 8 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert_eq!(most, 10, "the rollout used its surge");
    assert!(live_pods(&s).await.iter().all(|p| image(p) == "app:2"));
}

#[tokio::test(start_paused = true)]
async fn recreate_removes_every_old_pod_before_the_new_ones_start() {
    let s = virtual_server();
    let _c = cluster::start(&s, ClusterConfig::default());
    assert_eq!(post(&s, DEPLOYS, deployment("rc", 3, "app:1", json!({"type": "Recreate"}))).await.0, 201);
    until("3 Pods are ready", Duration::from_secs(30), || async { get(&s, &format!("{DEPLOYS}/rc")).await.1["status"]["availableReplicas"] == 3 })
        .await;
    patch(
        &s,
        &format!("{DEPLOYS}/rc"),
        "application/merge-patch+json",
        json!({"spec": {"template": {"spec": {"containers": [{"name": "c", "image": "app:2"}]}}}}),
    )
    .await;
    loop {
        let pods = items(&s, PODS).await; // terminating ones too: Recreate waits for them
        let images: Vec<&str> = pods.iter().map(image).collect();
        assert!(!(images.contains(&"app:1") && images.contains(&"app:2")), "old and new Pods at once: {images:?}");
        if images.len() == 3 && images.iter().all(|i| *i == "app:2") {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

#[tokio::test(start_paused = true)]
async fn a_rollout_that_makes_no_progress_exceeds_its_deadline() {
    let s = virtual_server();
    let _c = cluster::start(&s, ClusterConfig::default());
    let mut d = deployment("stuck", 1, "app:1", json!({"type": "RollingUpdate"}));
    d["spec"]["progressDeadlineSeconds"] = json!(30);
    d["spec"]["template"]["metadata"]["annotations"] = json!({"sim.operator-host.dev/never-ready": "true"});
    assert_eq!(post(&s, DEPLOYS, d).await.0, 201);
    until("Progressing is False", Duration::from_secs(120), || async {
        let d = get(&s, &format!("{DEPLOYS}/stuck")).await.1;
        condition(&d, "Progressing")["reason"] == "ProgressDeadlineExceeded"
    })
    .await;
    let d = get(&s, &format!("{DEPLOYS}/stuck")).await.1;
    let rs = &items(&s, SETS).await[0];
    assert_eq!(condition(&d, "Progressing")["status"], "False");
    assert_eq!(
        condition(&d, "Progressing")["message"],
        format!("ReplicaSet {:?} has timed out progressing.", rs["metadata"]["name"].as_str().unwrap())
    );
    assert_eq!(condition(&d, "Available")["status"], "False");
    assert_eq!(d["status"]["unavailableReplicas"], 1);
}

#[tokio::test(start_paused = true)]
async fn a_scale_during_a_rollout_is_shared_in_proportion_and_a_paused_deployment_does_not_roll() {
    let s = virtual_server();
    let _c = cluster::start(&s, ClusterConfig::default());
    let strategy = json!({"type": "RollingUpdate", "rollingUpdate": {"maxSurge": 3, "maxUnavailable": 2}});
    let mut d = deployment("p", 10, "app:1", strategy);
    d["spec"]["template"]["metadata"]["annotations"] = json!({"sim.operator-host.dev/ready-after": "1h"});
    assert_eq!(post(&s, DEPLOYS, d).await.0, 201);
    until("10 Pods exist", Duration::from_secs(30), || async { live_pods(&s).await.len() == 10 }).await;
    // A new template (paused first: nothing rolls). None of the Pods gets ready in this test.
    let uri = format!("{DEPLOYS}/p");
    patch(
        &s,
        &uri,
        "application/merge-patch+json",
        json!({"spec": {"paused": true, "template": {"spec": {"containers": [{"name": "c", "image": "app:2"}]}}}}),
    )
    .await;
    tokio::time::sleep(Duration::from_secs(5)).await;
    assert_eq!(items(&s, SETS).await.len(), 1, "a paused Deployment does not start a rollout");
    let paused = get(&s, &uri).await.1;
    assert_eq!(condition(&paused, "Progressing")["reason"], "DeploymentPaused");
    patch(&s, &uri, "application/merge-patch+json", json!({"spec": {"paused": false}})).await;
    let sizes = |sets: &[Value]| {
        let mut v: Vec<(String, i64)> = sets.iter().map(|rs| (image(rs).to_string(), rs["spec"]["replicas"].as_i64().unwrap())).collect();
        v.sort();
        v
    };
    // The new ReplicaSet surges to 3 (13 = replicas + maxSurge); the old one gives up 2 of its
    // unready Pods (13 - (10 - maxUnavailable 2) - 3 new unavailable = 2); the new one takes
    // the room: 8 + 5 = 13, and nothing more can move while no Pod is available.
    until("the rollout is as far as it can get", Duration::from_secs(30), || async {
        sizes(&items(&s, SETS).await) == [("app:1".to_string(), 8), ("app:2".to_string(), 5)]
    })
    .await;
    tokio::time::sleep(Duration::from_secs(2)).await;
    assert_eq!(sizes(&items(&s, SETS).await), [("app:1".to_string(), 8), ("app:2".to_string(), 5)], "and stays there");
    // Scale 10 → 20 mid-rollout: 23 allowed, 10 to add, shared by size against the 13 they
    // were sized for (upstream's proportions: 8 * 23 / 13 = 14.2 → 14, 5 * 23 / 13 = 8.8 → 9).
    patch(&s, &uri, "application/merge-patch+json", json!({"spec": {"replicas": 20}})).await;
    until("both ReplicaSets grew", Duration::from_secs(30), || async {
        let sets = items(&s, SETS).await;
        sets.iter().map(|rs| rs["spec"]["replicas"].as_i64().unwrap()).sum::<i64>() == 23
    })
    .await;
    assert_eq!(sizes(&items(&s, SETS).await), [("app:1".to_string(), 14), ("app:2".to_string(), 9)]);
}

#[tokio::test(start_paused = true)]
async fn a_replica_set_adopts_matching_orphans_and_deletes_not_ready_pods_first() {
    let s = virtual_server();
    let _c = cluster::start(&s, ClusterConfig::default());
    let orphan = json!({"metadata": {"name": "orphan", "labels": {"app": "rs"}}, "spec": {"containers": [{"name": "c", "image": "app:1"}]}});
    assert_eq!(post(&s, PODS, orphan).await.0, 201);
    let rs = json!({"metadata": {"name": "rs"}, "spec": {
        "replicas": 3, "selector": {"matchLabels": {"app": "rs"}},
        "template": {"metadata": {"labels": {"app": "rs"}}, "spec": {"containers": [{"name": "c", "image": "app:1"}]}},
    }});
    assert_eq!(post(&s, SETS, rs).await.0, 201);
    until("3 ready replicas", Duration::from_secs(30), || async {
        let rs = get(&s, &format!("{SETS}/rs")).await.1;
        rs["status"]["readyReplicas"] == 3 && rs["status"]["observedGeneration"] == 1
    })
    .await;
    let pods = live_pods(&s).await;
    assert_eq!(pods.len(), 3, "the orphan counts: two created");
    let orphan = get(&s, &format!("{PODS}/orphan")).await.1;
    assert_eq!(orphan["metadata"]["ownerReferences"][0]["name"], "rs", "adopted");
    // One more Pod that never gets ready; scaling down to 3 deletes it, not a ready one.
    let rs = get(&s, &format!("{SETS}/rs")).await.1;
    let uid = rs["metadata"]["uid"].clone();
    let laggard = json!({"metadata": {"name": "laggard", "labels": {"app": "rs"}, "annotations": {"sim.operator-host.dev/never-ready": "true"},
        "ownerReferences": [{"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "rs", "uid": uid, "controller": true}]},
        "spec": {"containers": [{"name": "c", "image": "app:1"}]}});
    assert_eq!(post(&s, PODS, laggard).await.0, 201);
    until("the surplus Pod is deleted", Duration::from_secs(30), || async { live_pods(&s).await.len() == 3 }).await;
    let names: Vec<String> = live_pods(&s).await.iter().map(|p| p["metadata"]["name"].as_str().unwrap().to_string()).collect();
    assert!(!names.contains(&"laggard".to_string()), "{names:?}");
    // A Pod relabelled out of the selector is released and replaced.
    let (code, _) = patch(&s, &format!("{PODS}/orphan"), "application/merge-patch+json", json!({"metadata": {"labels": {"app": "elsewhere"}}})).await;
    assert_eq!(code, 200);
    until("the released Pod loses its owner and is replaced", Duration::from_secs(30), || async {
        let released = get(&s, &format!("{PODS}/orphan")).await.1;
        let owned = live_pods(&s).await.iter().filter(|p| p["metadata"]["labels"]["app"] == "rs").count();
        released["metadata"].get("ownerReferences").is_none_or(|r| r == &json!([])) && owned == 3
    })
    .await;
    // Deleting the ReplicaSet collects its Pods, not the released one.
    assert_eq!(delete(&s, &format!("{SETS}/rs"), None).await.0, 200);
    until("its Pods are collected", Duration::from_secs(30), || async { live_pods(&s).await.len() == 1 }).await;
}
