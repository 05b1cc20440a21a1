//! The StatefulSet controller and storage of the simulated cluster, through the real kubectl
//! (/usr/bin/kubectl) over HTTP as a user drives a StatefulSet with a volumeClaimTemplate.
//! The order Pods were made and replaced is read from the controller's Events in the order the
//! server stored them (resourceVersion), not from timing.

use crate::common::kubectl::Cluster;
use crate::{Simulated, simulated};
use operator_test_kit::eventually;
use serde_json::Value;
use simulated_cluster::ClusterConfig;
use std::time::Duration;

/// A server over HTTP with the simulated cluster; Pods are Ready 200 ms after starting.
async fn kubectl_cluster() -> Simulated {
    simulated(ClusterConfig { ready_after: Duration::from_millis(200), ..Default::default() }).await
}

fn manifest(policy: &str, partition: i64, retention: &str) -> String {
    format!(
        r#"apiVersion: v1
kind: Service
metadata: {{name: web}}
spec:
  clusterIP: None
  selector: {{app: web}}
  ports: [{{port: 80, name: http}}]
---
apiVersion: apps/v1
kind: StatefulSet
metadata: {{name: web}}
spec:
  serviceName: web
  replicas: 3
  podManagementPolicy: {policy}
  updateStrategy: {{type: RollingUpdate, rollingUpdate: {{partition: {partition}}}}}
  persistentVolumeClaimRetentionPolicy: {retention}
  selector: {{matchLabels: {{app: web}}}}
  template:
    metadata: {{labels: {{app: web}}}}
    spec:
      containers:
      - name: nginx
        image: nginx:1.27
        volumeMounts: [{{name: www, mountPath: /usr/share/nginx/html}}]
  volumeClaimTemplates:
  - metadata: {{name: www}}
    spec:
      accessModes: [ReadWriteOnce]
      resources: {{requests: {{storage: 1Gi}}}}
"#
    )
}

fn s<'a>(obj: &'a Value, pointer: &str) -> &'a str {
    obj.pointer(pointer).and_then(Value::as_str).unwrap_or_default()
}

impl Cluster {
    /// The Pods named in the set's Events with `reason`, in the order the server stored them.
    async fn pods_by_event(&self, reason: &str) -> Vec<String> {
        let mut events = self.items(&["get", "events", "--field-selector", &format!("reason={reason},involvedObject.kind=StatefulSet")]).await;
        events.sort_by_key(|e| s(e, "/metadata/resourceVersion").parse::<u64>().unwrap_or(0));
        events
            .iter()
            .filter_map(|e| {
                let m = s(e, "/message");
                let pod = m.strip_prefix(&format!("{} Pod ", reason.trim_start_matches("Successful")))?;
                Some(pod.split_whitespace().next()?.to_string())
            })
            .collect()
    }

    /// Each Pod's `controller-revision-hash` label, by ordinal.
    async fn pod_revisions(&self) -> Vec<(String, String)> {
        let mut pods: Vec<(String, String)> = self
            .items(&["get", "pods", "-l", "app=web"])
            .await
            .iter()
            .map(|p| (s(p, "/metadata/name").to_string(), s(p, "/metadata/labels/controller-revision-hash").to_string()))
            .collect();
        pods.sort();
        pods
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_statefulset_with_a_claim_template_starts_in_order_on_provisioned_volumes_and_rolls_back_to_front() {
    let k = kubectl_cluster().await;
    k.apply("web.yaml", &manifest("OrderedReady", 0, "{}")).await;
    let out = k.ok(&["rollout", "status", "statefulset/web", "--timeout=60s"]).await;
    assert!(out.contains("partitioned roll out complete") || out.contains("roll out complete"), "{out}");

    let set = k.json(&["get", "statefulset", "web"]).await;
    let st = &set["status"];
    assert_eq!(st["readyReplicas"], 3, "{st}");
    assert_eq!(st["availableReplicas"], 3, "{st}");
    assert_eq!(st["currentReplicas"], 3, "{st}");
    assert_eq!(st["updatedReplicas"], 3, "{st}");
    assert_eq!(st["observedGeneration"], set["metadata"]["generation"]);
    assert_eq!(st["collisionCount"], 0);
    let first = s(st, "/currentRevision").to_string();
    assert_eq!(s(st, "/updateRevision"), first);
    assert_eq!(k.pods_by_event("SuccessfulCreate").await, ["web-0", "web-1", "web-2"], "OrderedReady creates by ordinal");

    let revision = k.json(&["get", "controllerrevision", &first]).await;
    let hash = first.strip_prefix("web-").expect("named <set>-<hash>");
    assert_eq!(s(&revision, "/metadata/labels/controller-revision-hash"), hash);
    assert_eq!(s(&revision, "/metadata/labels/app"), "web");
    assert_eq!(revision["revision"], 1);
    assert_eq!(s(&revision, "/data/spec/template/$patch"), "replace");
    assert_eq!(s(&revision, "/metadata/ownerReferences/0/kind"), "StatefulSet");

    for i in 0..3 {
        let pod = k.json(&["get", "pod", &format!("web-{i}")]).await;
        assert_eq!(s(&pod, "/status/phase"), "Running");
        assert_eq!(s(&pod, "/spec/hostname"), format!("web-{i}"));
        assert_eq!(s(&pod, "/spec/subdomain"), "web");
        assert_eq!(s(&pod, "/metadata/labels/statefulset.kubernetes.io~1pod-name"), format!("web-{i}"));
        assert_eq!(s(&pod, "/metadata/labels/apps.kubernetes.io~1pod-index"), i.to_string());
        assert_eq!(s(&pod, "/metadata/labels/controller-revision-hash"), first);
        assert_eq!(s(&pod, "/spec/volumes/0/persistentVolumeClaim/claimName"), format!("www-web-{i}"));

        let claim = k.json(&["get", "pvc", &format!("www-web-{i}")]).await;
        assert_eq!(s(&claim, "/spec/storageClassName"), "standard", "the DefaultStorageClass admission");
        assert_eq!(s(&claim, "/status/phase"), "Bound");
        assert_eq!(s(&claim, "/metadata/labels/app"), "web");
        assert_eq!(s(&claim, "/metadata/annotations/pv.kubernetes.io~1bind-completed"), "yes");
        assert_eq!(s(&claim, "/metadata/finalizers/0"), "kubernetes.io/pvc-protection");
        assert_eq!(s(&claim, "/metadata/annotations/volume.kubernetes.io~1storage-provisioner"), simulated_cluster::storage::PROVISIONER);
        let volume = k.json(&["get", "pv", s(&claim, "/spec/volumeName")]).await;
        assert_eq!(s(&volume, "/status/phase"), "Bound");
        assert_eq!(s(&volume, "/spec/claimRef/name"), format!("www-web-{i}"));
        assert_eq!(s(&volume, "/spec/claimRef/uid"), s(&claim, "/metadata/uid"));
        assert_eq!(s(&volume, "/metadata/annotations/pv.kubernetes.io~1provisioned-by"), simulated_cluster::storage::PROVISIONER);
        assert_eq!(s(&volume, "/spec/capacity/storage"), "1Gi");
    }

    k.ok(&["set", "image", "statefulset/web", "nginx=nginx:1.28"]).await;
    k.ok(&["rollout", "status", "statefulset/web", "--timeout=60s"]).await;
    let set = eventually("the rolling update is recorded as complete", Duration::from_secs(30), || async {
        let set = k.json(&["get", "statefulset", "web"]).await;
        let done = set["status"]["updatedReplicas"] == 3 && set["status"]["readyReplicas"] == 3 && s(&set, "/status/currentRevision") != first;
        done.then_some(set)
    })
    .await;
    let second = s(&set, "/status/updateRevision").to_string();
    assert_ne!(second, first);
    assert_eq!(s(&set, "/status/currentRevision"), second);
    assert_eq!(k.pods_by_event("SuccessfulDelete").await, ["web-2", "web-1", "web-0"], "a rolling update goes from the highest ordinal down");
    assert_eq!(k.pods_by_event("SuccessfulCreate").await, ["web-0", "web-1", "web-2", "web-2", "web-1", "web-0"]);
    for (_, revision) in k.pod_revisions().await {
        assert_eq!(revision, second);
    }
    let revisions = k.items(&["get", "controllerrevisions", "-l", "app=web"]).await;
    assert_eq!(revisions.len(), 2, "the old revision is history, kept within revisionHistoryLimit");
    // The claims outlived the Pods that used them (retention Retain) and were reused.
    assert_eq!(k.items(&["get", "pvc"]).await.len(), 3);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pods_below_the_partition_keep_the_old_revision() {
    let k = kubectl_cluster().await;
    k.apply("web.yaml", &manifest("OrderedReady", 2, "{}")).await;
    k.ok(&["rollout", "status", "statefulset/web", "--timeout=60s"]).await;
    let first = s(&k.json(&["get", "statefulset", "web"]).await, "/status/currentRevision").to_string();

    k.ok(&["set", "image", "statefulset/web", "nginx=nginx:1.28"]).await;
    // Upstream's controller stops here: the Pod at the partition updated and Ready, the
    // rest at the current revision.
    let set = eventually("web-2 is updated and ready", Duration::from_secs(60), || async {
        let set = k.json(&["get", "statefulset", "web"]).await;
        let st = &set["status"];
        let settled = st["observedGeneration"] == set["metadata"]["generation"] && st["updatedReplicas"] == 1 && st["readyReplicas"] == 3;
        settled.then_some(set)
    })
    .await;
    let second = s(&set, "/status/updateRevision").to_string();
    assert_ne!(second, first);
    assert_eq!(s(&set, "/status/currentRevision"), first, "the rollout is not complete below the partition");
    assert_eq!(set["status"]["currentReplicas"], 2);
    let out = k.ok(&["rollout", "status", "statefulset/web", "--timeout=60s"]).await;
    assert!(out.contains("partitioned roll out complete: 1 new pods have been updated"), "{out}");
    assert_eq!(k.pod_revisions().await, [("web-0".into(), first.clone()), ("web-1".into(), first.clone()), ("web-2".into(), second.clone())]);
    assert_eq!(k.pods_by_event("SuccessfulDelete").await, ["web-2"]);

    k.ok(&["patch", "statefulset", "web", "-p", r#"{"spec":{"updateStrategy":{"rollingUpdate":{"partition":0}}}}"#]).await;
    eventually("every Pod is at the update revision", Duration::from_secs(60), || async {
        let set = k.json(&["get", "statefulset", "web"]).await;
        (s(&set, "/status/currentRevision") == second && set["status"]["readyReplicas"] == 3).then_some(())
    })
    .await;
    assert_eq!(k.pods_by_event("SuccessfulDelete").await, ["web-2", "web-1", "web-0"]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn parallel_pods_start_together_and_scaled_away_claims_are_deleted_under_when_scaled_delete() {
    let k = kubectl_cluster().await;
    k.apply("web.yaml", &manifest("Parallel", 0, "{whenScaled: Delete, whenDeleted: Retain}")).await;
    k.ok(&["rollout", "status", "statefulset/web", "--timeout=60s"]).await;
    assert_eq!(k.json(&["get", "statefulset", "web"]).await["status"]["readyReplicas"], 3);

    k.ok(&["scale", "statefulset", "web", "--replicas=1"]).await;
    eventually("the claims of web-1 and web-2 are gone with their Pods", Duration::from_secs(60), || async {
        let claims: Vec<String> = k.items(&["get", "pvc"]).await.iter().map(|c| s(c, "/metadata/name").to_string()).collect();
        let pods = k.items(&["get", "pods", "-l", "app=web"]).await.len();
        (claims == ["www-web-0"] && pods == 1).then_some(())
    })
    .await;
    let claim = k.json(&["get", "pvc", "www-web-0"]).await;
    assert!(claim["metadata"].get("ownerReferences").is_none(), "a claim in range has no owner under whenDeleted: Retain: {claim}");
    // The provisioned volumes of deleted claims are released, then deleted (reclaim Delete).
    eventually("the released volumes are deleted", Duration::from_secs(30), || async { (k.items(&["get", "pv"]).await.len() == 1).then_some(()) })
        .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn api_only_mode_has_no_default_storage_class_so_a_claim_keeps_no_class() {
    let k = simulated(ClusterConfig::api_server_only()).await;
    assert!(k.items(&["get", "storageclasses"]).await.is_empty());
    k.apply("claim.json", &claim_named("data")).await;
    let claim = k.json(&["get", "pvc", "data"]).await;
    assert!(claim["spec"].get("storageClassName").is_none(), "{claim}");
    // The StorageObjectInUseProtection admission still runs (it is kube-apiserver's).
    assert_eq!(s(&claim, "/metadata/finalizers/0"), "kubernetes.io/pvc-protection");

    // A default class the test makes is given to the next claim, as kube-apiserver's
    // DefaultStorageClass admission does on envtest's server.
    let class = r#"{"apiVersion":"storage.k8s.io/v1","kind":"StorageClass","metadata":{"name":"mine",
        "annotations":{"storageclass.kubernetes.io/is-default-class":"true"}},"provisioner":"example.com/none"}"#;
    k.apply("class.json", class).await;
    k.apply("claim2.json", &claim_named("data2")).await;
    assert_eq!(s(&k.json(&["get", "pvc", "data2"]).await, "/spec/storageClassName"), "mine");
}

fn claim_named(name: &str) -> String {
    format!(
        r#"{{"apiVersion":"v1","kind":"PersistentVolumeClaim","metadata":{{"name":"{name}"}},"spec":{{"accessModes":["ReadWriteOnce"],"resources":{{"requests":{{"storage":"1Gi"}}}}}}}}"#
    )
}
