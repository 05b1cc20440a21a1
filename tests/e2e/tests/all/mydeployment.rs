//! The MyDeployment tutorial's use cases (plugins/mydeployment/README.md), in its order, through kubectl
//! only, plus the tutorial's TODOs that the plugin implements (status columns,
//! rollback, `kubectl describe` Events, `kubectl scale`). The tutorial's
//! Service + curl case needs real Pod networking, which the embedded
//! cluster does not simulate: out of scope (docs/operations.md).

use e2e::{Host, Value, eventually, read};

const SAMPLES: &str = "plugins/mydeployment/samples";

fn sample(name: &str) -> String {
    read(&format!("{SAMPLES}/{name}"))
}

/// The MyDeployment's Pods that are not being deleted.
fn pods(host: &Host) -> Vec<Value> {
    host.items(&["get", "pods", "-l", "app=my-nginx-app"]).into_iter().filter(|p| p["metadata"]["deletionTimestamp"].is_null()).collect()
}

fn images(pods: &[Value]) -> Vec<String> {
    pods.iter().map(|p| p["spec"]["containers"][0]["image"].as_str().unwrap_or_default().to_string()).collect()
}

fn ready(p: &Value) -> bool {
    p["status"]["conditions"].as_array().is_some_and(|cs| cs.iter().any(|c| c["type"] == "Ready" && c["status"] == "True"))
}

/// Waits until exactly `n` Pods run `image`, all Ready, and nothing else is left.
fn settle(host: &Host, n: usize, image: &str) -> Vec<Value> {
    eventually(&format!("{n} ready Pods of {image}"), || {
        let ps = pods(host);
        (ps.len() == n && images(&ps).iter().all(|i| i == image) && ps.iter().all(ready)).then_some(ps)
    })
}

fn replace(host: &Host, file: &str) {
    let o = host.kubectl_stdin(&["replace", "-f", "-"], Some(&sample(file)));
    assert!(o.status.success(), "kubectl replace -f {file}: {}", String::from_utf8_lossy(&o.stderr));
}

#[test]
fn the_seeds_nine_use_cases_and_its_todos_through_kubectl() {
    let host = Host::start(&[]);

    // 1. The CRD exists once the host has started.
    let crd = host.json(&["get", "customresourcedefinition", "mydeployments.apps.example.com"]);
    assert_eq!(crd["spec"]["names"]["kind"], "MyDeployment");
    assert!(crd["status"]["conditions"].as_array().unwrap().iter().any(|c| c["type"] == "Established" && c["status"] == "True"));

    // 2. kubectl create -f my-deployment-instance.yaml -> 3 Pods.
    let o = host.kubectl_stdin(&["create", "-f", "-"], Some(&sample("my-deployment-instance.yaml")));
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let first = settle(&host, 3, "nginx:1.7.9");
    for p in &first {
        let owner = &p["metadata"]["ownerReferences"][0];
        assert_eq!((owner["kind"].as_str(), owner["controller"].as_bool()), (Some("MyDeployment"), Some(true)));
    }

    // 3. Delete a Pod by hand -> it is replaced.
    let victim = first[0]["metadata"]["name"].as_str().unwrap().to_string();
    host.ok(&["delete", "pod", &victim, "--wait=false"]);
    let after = eventually("the deleted Pod to be replaced", || {
        let ps = pods(&host);
        (ps.len() == 3 && ps.iter().all(|p| p["metadata"]["name"] != victim.as_str()) && ps.iter().all(ready)).then_some(ps)
    });
    assert_eq!(images(&after), ["nginx:1.7.9"; 3]);

    // 4. (Service + curl: out of scope, see the module doc.)

    // 5. Update the image -> Pods roll to 1.9.1.
    replace(&host, "my-deployment-instance-update-image-1.9.1.yaml");
    settle(&host, 3, "nginx:1.9.1");

    // 6. Scale up to 5.
    replace(&host, "my-deployment-instance-update-scaleup-1.9.1.yaml");
    settle(&host, 5, "nginx:1.9.1");

    // 7. Scale down to 2.
    replace(&host, "my-deployment-instance-update-scaledown-1.9.1.yaml");
    settle(&host, 2, "nginx:1.9.1");

    // 8. Scale and change the image together -> 5 Pods of 1.14.
    replace(&host, "my-deployment-instance-update-image-and-scaleup-1.14.yaml");
    settle(&host, 5, "nginx:1.14");

    // The tutorial's TODO: status, as columns of `kubectl get md`.
    let table = eventually("kubectl get md to show 5 available", || {
        let t = host.ok(&["get", "md", "my-nginx-app"]);
        let row: Vec<String> = t.lines().nth(1)?.split_whitespace().map(String::from).collect();
        (row.get(1..6) == Some(&["5".to_string(), "5".into(), "5".into(), "5".into(), "5".into()][..])).then_some(t)
    });
    let header: Vec<&str> = table.lines().next().unwrap().split_whitespace().collect();
    assert_eq!(header[..6], ["NAME", "DESIRED", "CURRENT", "READY", "UP-TO-DATE", "AVAILABLE"], "{table}");

    // The tutorial's TODO: `kubectl scale` (the scale subresource).
    host.ok(&["scale", "md/my-nginx-app", "--replicas=4"]);
    settle(&host, 4, "nginx:1.14");
    host.ok(&["scale", "md/my-nginx-app", "--replicas=5"]);
    settle(&host, 5, "nginx:1.14");

    // The tutorial's TODO: rollback to revision 2 (nginx:1.9.1).
    let revisions = host.items(&["get", "controllerrevisions", "-l", "app=my-nginx-app"]);
    assert!(revisions.iter().any(|r| r["revision"] == 2), "revisions: {revisions:?}");
    replace(&host, "my-deployment-instance-rollback.yaml");
    settle(&host, 5, "nginx:1.9.1");
    let md = eventually("the RolledBack condition", || {
        let md = host.json(&["get", "md", "my-nginx-app"]);
        md["status"]["conditions"].as_array()?.iter().any(|c| c["type"] == "RolledBack" && c["status"] == "True").then_some(md)
    });
    assert_eq!(md["spec"]["template"]["spec"]["containers"][0]["image"], "nginx:1.14", "spec.template itself is unchanged");

    // The tutorial's TODO: `kubectl describe` shows the Events.
    let described = host.ok(&["describe", "md", "my-nginx-app"]);
    assert!(described.contains("Events:"), "{described}");
    assert!(
        described.contains("DeploymentRollback") || described.contains("ScalingReplicaSet") || described.contains("SuccessfulCreate"),
        "{described}"
    );

    // 9. Delete the MyDeployment -> its Pods are cascade-deleted.
    host.ok(&["delete", "mydeployments", "my-nginx-app"]);
    let gone = host.kubectl(&["get", "mydeployments", "my-nginx-app"]);
    assert!(!gone.status.success() && String::from_utf8_lossy(&gone.stderr).contains("NotFound"));
    eventually("the Pods to be garbage-collected", || host.items(&["get", "pods", "-l", "app=my-nginx-app"]).is_empty().then_some(()));
    eventually("the revisions to be garbage-collected", || {
        host.items(&["get", "controllerrevisions", "-l", "app=my-nginx-app"]).is_empty().then_some(())
    });
}

/// The config hash (issue 20): a MyDeployment whose template takes a
/// ConfigMap through `envFrom` rolls its Pods when the ConfigMap's content
/// changes (`kubectl patch configmap`), and not when only its labels do.
#[test]
fn a_changed_configmap_rolls_the_pods() {
    let host = Host::start(&[]);
    host.ok(&["create", "configmap", "web-conf", "--from-literal=greeting=hello"]);
    host.apply(
        r#"
apiVersion: apps.example.com/v1
kind: MyDeployment
metadata:
  name: web
spec:
  replicas: 2
  selector:
    matchLabels: {app: web}
  template:
    metadata:
      labels: {app: web}
    spec:
      containers:
      - name: web
        image: nginx:1.14
        envFrom:
        - configMapRef: {name: web-conf}
"#,
    );
    let hash = |p: &Value| p["metadata"]["annotations"]["apps.example.com/config-hash"].as_str().unwrap_or_default().to_string();
    let settled = |what: &str, ok: &dyn Fn(&[Value]) -> bool| {
        eventually(what, || {
            let ps: Vec<Value> = host.items(&["get", "pods", "-l", "app=web"]);
            (ps.len() == 2 && ps.iter().all(|p| p["metadata"]["deletionTimestamp"].is_null() && ready(p)) && ok(&ps)).then_some(ps)
        })
    };
    let first = settled("2 Ready Pods with a config hash", &|ps| ps.iter().all(|p| hash(p).len() == 64));
    let first_hash = hash(&first[0]);

    host.ok(&["label", "configmap", "web-conf", "touched=yes"]);
    host.ok(&["patch", "configmap", "web-conf", "--type=merge", "-p", r#"{"data":{"greeting":"bonjour"}}"#]);
    let second = settled("the Pods to roll to the new config hash", &|ps| ps.iter().all(|p| !hash(p).is_empty() && hash(p) != first_hash));
    let names = |ps: &[Value]| ps.iter().map(|p| p["metadata"]["name"].as_str().unwrap_or_default().to_string()).collect::<Vec<_>>();
    assert!(names(&second).iter().all(|n| !names(&first).contains(n)), "every Pod was replaced");
    assert_eq!(hash(&second[0]), hash(&second[1]));
    // Two revisions, not three: the relabel before the patch made no template of its own.
    let revisions = host.items(&["get", "controllerrevisions", "-l", "app=web"]);
    assert_eq!(revisions.len(), 2, "one revision per config content");
    host.ok(&["delete", "mydeployments", "web"]);
}
