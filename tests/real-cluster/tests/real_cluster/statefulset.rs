//! A StatefulSet with a volumeClaimTemplate on the real control plane:
//! kube-controller-manager's StatefulSet controller and PersistentVolume
//! binder, the fixture's default StorageClass and provisioner, kwok's Pods.
//! The same scenario as the simulated cluster's `statefulsets` tests, so the
//! two can be read side by side. The order Pods were made and replaced is
//! read from the controller's Events in the order the server stored them
//! (resourceVersion), not from timing.

use real_cluster::{ControlPlane, Kubectl, Value, eventually};

fn manifest(partition: i64) -> String {
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
  updateStrategy: {{type: RollingUpdate, rollingUpdate: {{partition: {partition}}}}}
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

/// The Pods named in the set's Events with `reason`, in the order the server stored them.
fn pods_by_event(k: &Kubectl, reason: &str) -> Vec<String> {
    let mut events = k.items(&["get", "events", "--field-selector", &format!("reason={reason},involvedObject.kind=StatefulSet")]);
    events.sort_by_key(|e| s(e, "/metadata/resourceVersion").parse::<u64>().unwrap_or(0));
    events
        .iter()
        .filter_map(|e| {
            let pod = s(e, "/message").strip_prefix(&format!("{} Pod ", reason.trim_start_matches("Successful")))?;
            Some(pod.split_whitespace().next()?.to_string())
        })
        .collect()
}

fn pod_revisions(k: &Kubectl) -> Vec<(String, String)> {
    let mut pods: Vec<(String, String)> = k
        .items(&["get", "pods", "-l", "app=web"])
        .iter()
        .map(|p| (s(p, "/metadata/name").to_string(), s(p, "/metadata/labels/controller-revision-hash").to_string()))
        .collect();
    pods.sort();
    pods
}

#[test]
fn a_statefulset_with_a_claim_template_becomes_ready_on_provisioned_volumes_and_rolls_back_to_front() {
    let Some(cluster) = ControlPlane::builder().start() else { return };
    let k = cluster.admin();
    k.apply(&manifest(0));
    k.ok(&["rollout", "status", "statefulset/web", "--timeout=120s"]);
    let set = k.json(&["get", "statefulset", "web"]);
    assert_eq!(set["status"]["readyReplicas"], 3, "{}", set["status"]);
    let first = s(&set, "/status/currentRevision").to_string();
    assert_eq!(pods_by_event(&k, "SuccessfulCreate"), ["web-0", "web-1", "web-2"], "OrderedReady creates by ordinal");
    for i in 0..3 {
        let claim = k.json(&["get", "pvc", &format!("www-web-{i}")]);
        assert_eq!(s(&claim, "/spec/storageClassName"), "standard", "the DefaultStorageClass admission");
        assert_eq!(s(&claim, "/status/phase"), "Bound");
        assert_eq!(s(&claim, "/metadata/annotations/pv.kubernetes.io~1bind-completed"), "yes");
        let volume = k.json(&["get", "pv", s(&claim, "/spec/volumeName")]);
        assert_eq!(s(&volume, "/status/phase"), "Bound");
        assert_eq!(s(&volume, "/metadata/annotations/pv.kubernetes.io~1provisioned-by"), real_cluster::storage::PROVISIONER);
    }

    k.ok(&["set", "image", "statefulset/web", "nginx=nginx:1.28"]);
    k.ok(&["rollout", "status", "statefulset/web", "--timeout=120s"]);
    let set = eventually("the rolling update is recorded as complete", || {
        let set = k.json(&["get", "statefulset", "web"]);
        (set["status"]["updatedReplicas"] == 3 && set["status"]["readyReplicas"] == 3 && s(&set, "/status/currentRevision") != first).then_some(set)
    });
    let second = s(&set, "/status/updateRevision").to_string();
    assert_eq!(pods_by_event(&k, "SuccessfulDelete"), ["web-2", "web-1", "web-0"], "a rolling update goes from the highest ordinal down");
    assert!(pod_revisions(&k).iter().all(|(_, r)| *r == second));
}

#[test]
fn pods_below_the_partition_keep_the_old_revision() {
    let Some(cluster) = ControlPlane::builder().start() else { return };
    let k = cluster.admin();
    k.apply(&manifest(2));
    k.ok(&["rollout", "status", "statefulset/web", "--timeout=120s"]);
    let first = s(&k.json(&["get", "statefulset", "web"]), "/status/currentRevision").to_string();

    k.ok(&["set", "image", "statefulset/web", "nginx=nginx:1.28"]);
    let set = eventually("web-2 is updated and ready", || {
        let set = k.json(&["get", "statefulset", "web"]);
        let st = &set["status"];
        (st["observedGeneration"] == set["metadata"]["generation"] && st["updatedReplicas"] == 1 && st["readyReplicas"] == 3).then_some(set)
    });
    let second = s(&set, "/status/updateRevision").to_string();
    assert_ne!(second, first);
    assert_eq!(s(&set, "/status/currentRevision"), first, "the rollout is not complete below the partition");
    let out = k.ok(&["rollout", "status", "statefulset/web", "--timeout=120s"]);
    assert!(out.contains("partitioned roll out complete: 1 new pods have been updated"), "{out}");
    assert_eq!(pod_revisions(&k), [("web-0".into(), first.clone()), ("web-1".into(), first), ("web-2".into(), second)]);
    assert_eq!(pods_by_event(&k, "SuccessfulDelete"), ["web-2"]);
}

#[test]
fn claims_scaled_away_under_when_scaled_delete_go_and_their_volumes_are_reclaimed() {
    let Some(cluster) = ControlPlane::builder().start() else { return };
    let k = cluster.admin();
    let manifest = manifest(0).replace(
        "  serviceName: web\n",
        "  serviceName: web\n  podManagementPolicy: Parallel\n  persistentVolumeClaimRetentionPolicy: {whenScaled: Delete, whenDeleted: Retain}\n",
    );
    k.apply(&manifest);
    k.ok(&["rollout", "status", "statefulset/web", "--timeout=120s"]);
    assert_eq!(k.items(&["get", "pv"]).len(), 3);

    k.ok(&["scale", "statefulset", "web", "--replicas=1"]);
    eventually("the claims of web-1 and web-2 are gone with their Pods", || {
        let claims: Vec<String> = k.items(&["get", "pvc"]).iter().map(|c| s(c, "/metadata/name").to_string()).collect();
        (claims == ["www-web-0"] && k.items(&["get", "pods", "-l", "app=web"]).len() == 1).then_some(())
    });
    // Released by kube-controller-manager's binder, deleted by the fixture's provisioner.
    eventually("the released volumes are deleted", || (k.items(&["get", "pv"]).len() == 1).then_some(()));
}
