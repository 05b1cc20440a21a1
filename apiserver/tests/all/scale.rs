//! The `scale` subresource of Deployments, ReplicaSets, StatefulSets and ReplicationControllers,
//! through the real kubectl, answered as kube-apiserver v1.36.3 answers it. The same steps run
//! against the real server in tests/real-cluster (`scale_subresource.rs`); the wording asserted
//! here is what it printed.

use crate::common::kubectl::Cluster;
use serde_json::{Value, json};

/// A Deployment, a ReplicationController (selector: a plain map), a StatefulSet (selector
/// with an expression) and a ReplicaSet.
pub const KINDS: &str = "apiVersion: apps/v1
kind: Deployment
metadata: {name: web}
spec:
  replicas: 2
  selector: {matchLabels: {app: web}}
  template:
    metadata: {labels: {app: web}}
    spec: {containers: [{name: c, image: nginx}]}
---
apiVersion: v1
kind: ReplicationController
metadata: {name: rc}
spec:
  replicas: 1
  selector: {tier: x, app: rc}
  template:
    metadata: {labels: {app: rc, tier: x}}
    spec: {containers: [{name: c, image: nginx}]}
---
apiVersion: apps/v1
kind: StatefulSet
metadata: {name: sts}
spec:
  replicas: 1
  serviceName: sts
  selector: {matchLabels: {z: '1'}, matchExpressions: [{key: app, operator: In, values: [sts, b]}]}
  template:
    metadata: {labels: {app: sts, z: '1'}}
    spec: {containers: [{name: c, image: nginx}]}
---
apiVersion: apps/v1
kind: ReplicaSet
metadata: {name: rs}
spec:
  replicas: 1
  selector: {matchLabels: {app: rs}}
  template:
    metadata: {labels: {app: rs}}
    spec: {containers: [{name: c, image: nginx}]}
";

const DEPLOYMENT_SCALE: &str = "/apis/apps/v1/namespaces/default/deployments/web/scale";

/// A Scale named `name` with `replicas`, of `kind` (`Scale`) at `resource_version` (none: any).
fn scale_body(name: &str, replicas: i64, kind: (&str, &str), resource_version: Option<&str>) -> String {
    let mut body = json!({"kind": kind.0, "apiVersion": kind.1, "metadata": {"name": name}, "spec": {"replicas": replicas}});
    if let Some(rv) = resource_version {
        body["metadata"]["resourceVersion"] = json!(rv);
    }
    body.to_string()
}

const SCALE: (&str, &str) = ("Scale", "autoscaling/v1");

/// The managedFields entries of `subresource: scale` of `object`.
pub fn scale_entries(object: &Value) -> Vec<Value> {
    object["metadata"]["managedFields"].as_array().into_iter().flatten().filter(|e| e["subresource"] == "scale").cloned().collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_scale_subresource_of_the_built_in_kinds_answers_as_upstream() {
    let c = Cluster::start().await;
    c.apply("kinds.yaml", KINDS).await;

    let raw = |path: &str| format!("/{path}/scale");
    let scale: Value = serde_json::from_str(&c.ok(&["get", "--raw", DEPLOYMENT_SCALE]).await).unwrap();
    let deployment = c.json(&["get", "deploy", "web"]).await;
    assert_eq!(scale["spec"], json!({"replicas": 2}));
    assert_eq!(scale["status"]["selector"], "app=web");
    assert_eq!(scale["metadata"]["uid"], deployment["metadata"]["uid"], "the parent's uid");
    assert_eq!(scale["metadata"]["resourceVersion"], deployment["metadata"]["resourceVersion"], "the parent's resourceVersion");
    let mut keys: Vec<&String> = scale["metadata"].as_object().unwrap().keys().collect();
    keys.sort();
    assert_eq!(keys, ["creationTimestamp", "name", "namespace", "resourceVersion", "uid"]);
    for (path, selector) in [
        ("api/v1/namespaces/default/replicationcontrollers/rc", "app=rc,tier=x"),
        ("apis/apps/v1/namespaces/default/statefulsets/sts", "app in (b,sts),z=1"),
        ("apis/apps/v1/namespaces/default/replicasets/rs", "app=rs"),
    ] {
        let scale: Value = serde_json::from_str(&c.ok(&["get", "--raw", &raw(path)]).await).unwrap();
        assert_eq!(scale["status"]["selector"], selector, "{path}: {scale}");
    }

    let cluster = &c;
    let put = |name: &str, body: String| {
        let file = cluster.file(name, &body);
        async move { cluster.fails(&["replace", "--raw", DEPLOYMENT_SCALE, "-f", file.to_str().unwrap()]).await }
    };
    let stale = put("stale.json", scale_body("web", 1, SCALE, Some("1"))).await;
    assert!(stale.contains(r#"Operation cannot be fulfilled on deployments.apps "web": the object has been modified"#), "{stale}");
    let negative = put("negative.json", scale_body("web", -1, SCALE, None)).await;
    assert!(negative.contains(r#"The Scale "web" is invalid: spec.replicas: Invalid value: -1: must be greater than or equal to 0"#), "{negative}");
    let renamed = put("renamed.json", scale_body("other", 1, SCALE, None)).await;
    assert!(renamed.contains("the name of the object (other) does not match the name on the URL (web)"), "{renamed}");
    let wrong_kind = put("kind.json", scale_body("web", 1, ("Deployment", "apps/v1"), None)).await;
    assert!(wrong_kind.contains("Deployment in version \"v1\" cannot be handled as a Scale"), "{wrong_kind}");
    let patched_negative = c.fails(&["patch", "deploy", "web", "--subresource=scale", "--type=merge", "-p", r#"{"spec":{"replicas":-2}}"#]).await;
    assert!(patched_negative.contains("spec.replicas: Invalid value: -2: must be greater than or equal to 0"), "{patched_negative}");
    let missing = c.fails(&["get", "--raw", "/apis/apps/v1/namespaces/default/deployments/nope/scale"]).await;
    assert!(missing.contains(r#"deployments.apps "nope" not found"#), "{missing}");

    for kind in ["deploy/web", "rc/rc", "sts/sts", "rs/rs"] {
        let out = c.ok(&["scale", kind, "--replicas=3"]).await;
        assert!(out.contains("scaled"), "{out}");
        let object = c.json(&["get", kind, "--show-managed-fields"]).await;
        assert_eq!(object["spec"]["replicas"], 3, "{kind}");
        let entries = scale_entries(&object);
        assert_eq!(entries.len(), 1, "{kind}: {entries:?}");
        assert_eq!(entries[0]["operation"], "Update");
        assert_eq!(entries[0]["fieldsV1"], json!({"f:spec": {"f:replicas": {}}}));
        assert!(entries[0].get("time").is_none(), "upstream records the scale entry without a time: {}", entries[0]);
    }
    let generation = c.ok(&["get", "deploy", "web", "-o", "jsonpath={.metadata.generation}"]).await;
    assert_eq!(generation, "2", "a scale is a spec change");

    let zero: Value = serde_json::from_str(
        &c.ok(&[
            "patch",
            "deploy",
            "web",
            "--subresource=scale",
            "--type=json",
            "-p",
            r#"[{"op":"replace","path":"/spec/replicas","value":0}]"#,
            "-o",
            "json",
        ])
        .await,
    )
    .unwrap();
    assert_eq!(zero["spec"], json!({}), "replicas is omitempty in autoscaling/v1: {zero}");
    let resources: Value = serde_json::from_str(&c.ok(&["get", "--raw", "/apis/apps/v1"]).await).unwrap();
    let scales: Vec<&str> =
        resources["resources"].as_array().unwrap().iter().filter_map(|r| r["name"].as_str()).filter(|n| n.ends_with("/scale")).collect();
    assert_eq!(scales, ["deployments/scale", "replicasets/scale", "statefulsets/scale"]);
}

/// A server-side apply of a Scale is an apply of the parent's replicas for subresource
/// `scale`: it conflicts with the manager that set them last, and with `force` takes them.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_applied_scale_conflicts_with_the_replicas_owner_as_upstream() {
    let c = Cluster::start().await;
    c.apply("kinds.yaml", KINDS).await;
    c.ok(&["scale", "deploy/web", "--replicas=3"]).await;
    let client = c.client();
    let apply = |force: bool| {
        let body = json!({"apiVersion": "autoscaling/v1", "kind": "Scale", "metadata": {"name": "web"}, "spec": {"replicas": 6}});
        let uri = format!("{DEPLOYMENT_SCALE}?fieldManager=ssa{}", if force { "&force=true" } else { "" });
        let request =
            http::Request::patch(uri).header("content-type", "application/apply-patch+yaml").body(serde_json::to_vec(&body).unwrap()).unwrap();
        let client = client.clone();
        async move { client.request::<Value>(request).await }
    };
    match apply(false).await {
        Err(kube::Error::Api(s)) => {
            assert_eq!(s.code, 409, "{s:?}");
            // kubectl's manager name for `scale` is `kubectl` in v1.36, `kubectl-scale` before.
            assert!(s.message.starts_with(r#"Apply failed with 1 conflict: conflict with "kubectl"#), "{}", s.message);
            assert!(s.message.contains(r#" with subresource "scale" using "#) && s.message.ends_with(": .spec.replicas"), "{}", s.message);
        }
        other => panic!("an apply over kubectl's replicas must conflict: {other:?}"),
    }
    let applied = apply(true).await.unwrap();
    assert_eq!(applied["spec"]["replicas"], 6, "{applied}");
    let object = c.json(&["get", "deploy", "web", "--show-managed-fields"]).await;
    let entries = scale_entries(&object);
    assert_eq!(entries.len(), 1, "kubectl's entry is gone with its only field: {entries:?}");
    assert_eq!((entries[0]["manager"].as_str(), entries[0]["operation"].as_str()), (Some("ssa"), Some("Apply")));
}
