//! The `scale` subresource of Deployments, ReplicaSets, StatefulSets and
//! ReplicationControllers on the real kube-apiserver: the same steps as the
//! embedded server's test (apiserver/tests/all/scale.rs), whose wording
//! comes from here.

use real_cluster::{ControlPlane, Kubectl, Value, json};

const KINDS: &str = "apiVersion: apps/v1
kind: Deployment
metadata: {name: web, namespace: default}
spec:
  replicas: 2
  selector: {matchLabels: {app: web}}
  template:
    metadata: {labels: {app: web}}
    spec: {containers: [{name: c, image: nginx}]}
---
apiVersion: v1
kind: ReplicationController
metadata: {name: rc, namespace: default}
spec:
  replicas: 1
  selector: {tier: x, app: rc}
  template:
    metadata: {labels: {app: rc, tier: x}}
    spec: {containers: [{name: c, image: nginx}]}
---
apiVersion: apps/v1
kind: StatefulSet
metadata: {name: sts, namespace: default}
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
metadata: {name: rs, namespace: default}
spec:
  replicas: 1
  selector: {matchLabels: {app: rs}}
  template:
    metadata: {labels: {app: rs}}
    spec: {containers: [{name: c, image: nginx}]}
";

const DEPLOYMENT_SCALE: &str = "/apis/apps/v1/namespaces/default/deployments/web/scale";

fn scale_body(name: &str, replicas: i64, kind: (&str, &str), resource_version: Option<&str>) -> String {
    let mut body = json!({"kind": kind.0, "apiVersion": kind.1, "metadata": {"name": name}, "spec": {"replicas": replicas}});
    if let Some(rv) = resource_version {
        body["metadata"]["resourceVersion"] = json!(rv);
    }
    body.to_string()
}

const SCALE: (&str, &str) = ("Scale", "autoscaling/v1");

fn fails(admin: &Kubectl, args: &[&str], stdin: Option<&str>) -> String {
    let out = admin.run_stdin(args, stdin.map(str::as_bytes));
    assert!(!out.status.success(), "kubectl {args:?} should have failed");
    String::from_utf8_lossy(&out.stderr).into_owned()
}

#[test]
fn the_scale_subresource_of_the_built_in_kinds_answers_as_upstream() {
    let Some(cluster) = ControlPlane::builder().pods_run(false).start() else { return };
    let admin = cluster.admin();
    admin.apply(KINDS);

    let scale: Value = serde_json::from_str(&admin.ok(&["get", "--raw", DEPLOYMENT_SCALE])).unwrap();
    let deployment = admin.json(&["get", "deploy", "web"]);
    assert_eq!(scale["spec"], json!({"replicas": 2}));
    assert_eq!(scale["status"]["selector"], "app=web");
    assert_eq!(scale["metadata"]["uid"], deployment["metadata"]["uid"]);
    let keys: Vec<&String> = scale["metadata"].as_object().unwrap().keys().collect();
    let mut sorted = keys.clone();
    sorted.sort();
    assert_eq!(sorted, ["creationTimestamp", "name", "namespace", "resourceVersion", "uid"]);
    for (path, selector) in [
        ("api/v1/namespaces/default/replicationcontrollers/rc", "app=rc,tier=x"),
        ("apis/apps/v1/namespaces/default/statefulsets/sts", "app in (b,sts),z=1"),
        ("apis/apps/v1/namespaces/default/replicasets/rs", "app=rs"),
    ] {
        let scale: Value = serde_json::from_str(&admin.ok(&["get", "--raw", &format!("/{path}/scale")])).unwrap();
        assert_eq!(scale["status"]["selector"], selector, "{path}: {scale}");
    }

    let put = |body: String| fails(&admin, &["replace", "--raw", DEPLOYMENT_SCALE, "-f", "-"], Some(&body));
    let stale = put(scale_body("web", 1, SCALE, Some("1")));
    assert!(stale.contains(r#"Operation cannot be fulfilled on deployments.apps "web": the object has been modified"#), "{stale}");
    let negative = put(scale_body("web", -1, SCALE, None));
    assert!(negative.contains(r#"The Scale "web" is invalid: spec.replicas: Invalid value: -1: must be greater than or equal to 0"#), "{negative}");
    let renamed = put(scale_body("other", 1, SCALE, None));
    assert!(renamed.contains("the name of the object (other) does not match the name on the URL (web)"), "{renamed}");
    let wrong_kind = put(scale_body("web", 1, ("Deployment", "apps/v1"), None));
    assert!(wrong_kind.contains("Deployment in version \"v1\" cannot be handled as a Scale"), "{wrong_kind}");
    let patched_negative =
        fails(&admin, &["patch", "deploy", "web", "--subresource=scale", "--type=merge", "-p", r#"{"spec":{"replicas":-2}}"#], None);
    assert!(patched_negative.contains("spec.replicas: Invalid value: -2: must be greater than or equal to 0"), "{patched_negative}");
    let missing = fails(&admin, &["get", "--raw", "/apis/apps/v1/namespaces/default/deployments/nope/scale"], None);
    assert!(missing.contains(r#"deployments.apps "nope" not found"#), "{missing}");

    for kind in ["deploy/web", "rc/rc", "sts/sts", "rs/rs"] {
        assert!(admin.ok(&["scale", kind, "--replicas=3"]).contains("scaled"));
        let object = admin.json(&["get", kind, "--show-managed-fields"]);
        assert_eq!(object["spec"]["replicas"], 3, "{kind}");
        let entries: Vec<&Value> = object["metadata"]["managedFields"].as_array().unwrap().iter().filter(|e| e["subresource"] == "scale").collect();
        assert_eq!(entries.len(), 1, "{kind}: {entries:?}");
        assert_eq!(entries[0]["operation"], "Update");
        assert_eq!(entries[0]["fieldsV1"], json!({"f:spec": {"f:replicas": {}}}));
        assert!(entries[0].get("time").is_none(), "the scale entry has no time: {}", entries[0]);
    }
    assert_eq!(admin.ok(&["get", "deploy", "web", "-o", "jsonpath={.metadata.generation}"]), "2", "a scale is a spec change");

    let zero: Value = serde_json::from_str(&admin.ok(&[
        "patch",
        "deploy",
        "web",
        "--subresource=scale",
        "--type=json",
        "-p",
        r#"[{"op":"replace","path":"/spec/replicas","value":0}]"#,
        "-o",
        "json",
    ]))
    .unwrap();
    assert_eq!(zero["spec"], json!({}), "replicas is omitempty in autoscaling/v1: {zero}");
    let resources: Value = serde_json::from_str(&admin.ok(&["get", "--raw", "/apis/apps/v1"])).unwrap();
    let scales: Vec<&str> =
        resources["resources"].as_array().unwrap().iter().filter_map(|r| r["name"].as_str()).filter(|n| n.ends_with("/scale")).collect();
    assert_eq!(scales, ["deployments/scale", "replicasets/scale", "statefulsets/scale"]);
}
