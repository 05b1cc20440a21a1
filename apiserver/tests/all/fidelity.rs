//! Answers outside clients compare with a real kube-apiserver's (issue 17, "Answers that
//! differ" and "objects a real cluster always has"), checked through kubectl and kube-rs over
//! HTTP: field selectors on unset fields, the objects of a fresh cluster, DELETE answers per
//! kind, Service allocation, metadata-only and Table answers to writes, JSON member order, and
//! the subresources we do not serve.

use crate::common::kubectl::Cluster;
use http_body_util::BodyExt;
use kube::api::{Api, DeleteParams, DynamicObject, Patch, PatchParams, PostParams};
use kube::core::{ApiResource, GroupVersionKind};
use serde_json::{Value, json};

/// Requests beyond kubectl's.
impl Cluster {
    /// One request over HTTP through kube-rs, whatever its status: (status, body text).
    async fn raw(&self, method: &str, path: &str, accept: &str, content_type: &str, body: Option<Value>) -> (u16, String) {
        let req = http::Request::builder()
            .method(method)
            .uri(path)
            .header("accept", accept)
            .header("content-type", content_type)
            .body(body.map(|b| serde_json::to_vec(&b).unwrap()).unwrap_or_default())
            .unwrap();
        let resp = self.client().send(req.map(kube::client::Body::from)).await.unwrap();
        let status = resp.status().as_u16();
        let bytes = resp.into_body().collect().await.unwrap().to_bytes();
        (status, String::from_utf8(bytes.to_vec()).unwrap())
    }

    fn api(&self, group: &str, kind: &str, plural: &str, namespace: Option<&str>) -> Api<DynamicObject> {
        let version = "v1";
        let ar = ApiResource::from_gvk_with_plural(&GroupVersionKind::gvk(group, version, kind), plural);
        match namespace {
            Some(ns) => Api::namespaced_with(self.client(), ns, &ar),
            None => Api::all_with(self.client(), &ar),
        }
    }
}

fn names(out: &str) -> Vec<&str> {
    out.split_whitespace().collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn field_selectors_compare_unset_bools_and_ints_as_go_zero_values() {
    let c = Cluster::start().await;
    let nodes = "apiVersion: v1\nkind: Node\nmetadata: {name: plain}\n---\napiVersion: v1\nkind: Node\nmetadata: {name: cordoned}\nspec: {unschedulable: true}\n";
    c.apply("nodes.yaml", nodes).await;
    let out = c.ok(&["get", "nodes", "--field-selector", "spec.unschedulable=false", "-o", "name"]).await;
    assert_eq!(names(&out), ["node/plain"], "every schedulable Node matches, spec.unschedulable unset included");
    let out = c.ok(&["get", "nodes", "--field-selector", "spec.unschedulable!=false", "-o", "name"]).await;
    assert_eq!(names(&out), ["node/cordoned"]);
    let pod = "apiVersion: v1\nkind: Pod\nmetadata: {name: p}\nspec: {containers: [{name: c, image: nginx}]}\n";
    c.apply("pod.yaml", pod).await;
    let out = c.ok(&["get", "pods", "--field-selector", "spec.hostNetwork=false", "-o", "name"]).await;
    assert_eq!(names(&out), ["pod/p"]);
    let job = "apiVersion: batch/v1\nkind: Job\nmetadata: {name: j}\nspec: {template: {spec: {restartPolicy: Never, containers: [{name: c, image: busybox}]}}}\n";
    c.apply("job.yaml", job).await;
    let out = c.ok(&["get", "jobs", "--field-selector", "status.successful=0", "-o", "name"]).await;
    assert_eq!(names(&out), ["job.batch/j"], "status.successful reads status.succeeded, 0 when unset");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_fresh_cluster_has_what_a_real_one_always_has() {
    let c = Cluster::start().await;
    let port = c.handle.addr().port();
    let sas = c.ok(&["get", "sa", "-A", "-o", "jsonpath={range .items[*]}{.metadata.namespace}/{.metadata.name} {end}"]).await;
    for ns in ["default", "kube-system", "kube-public", "kube-node-lease"] {
        assert!(names(&sas).contains(&format!("{ns}/default").as_str()), "{sas}");
    }
    let svc: Value = serde_json::from_str(&c.ok(&["get", "svc", "kubernetes", "-n", "default", "-o", "json"]).await).unwrap();
    assert_eq!(svc["spec"]["clusterIP"], "10.96.0.1");
    assert_eq!(svc["spec"]["ports"], json!([{"name": "https", "port": 443, "protocol": "TCP", "targetPort": port}]));
    assert_eq!(svc["metadata"]["labels"], json!({"component": "apiserver", "provider": "kubernetes"}));
    let ep = c.ok(&["get", "endpoints", "kubernetes", "-o", "jsonpath={.subsets[0].addresses[0].ip}:{.subsets[0].ports[0].port}"]).await;
    assert_eq!(ep, format!("127.0.0.1:{port}"));
    let slice = c.ok(&["get", "endpointslices", "kubernetes", "-o", "jsonpath={.endpoints[0].addresses[0]}:{.ports[0].port}"]).await;
    assert_eq!(slice, format!("127.0.0.1:{port}"));

    c.ok(&["create", "namespace", "team"]).await;
    let ca = c.ok(&["get", "configmap", "kube-root-ca.crt", "-n", "team", "-o", "jsonpath={.data.ca\\.crt}"]).await;
    assert!(ca.starts_with("-----BEGIN CERTIFICATE-----"), "{ca}");
    c.ok(&["get", "serviceaccount", "default", "-n", "team"]).await;
    c.ok(&["delete", "serviceaccount", "default", "-n", "team"]).await;
    c.ok(&["get", "serviceaccount", "default", "-n", "team"]).await; // the controller puts it back

    let roles = c.ok(&["get", "clusterroles", "-o", "name"]).await;
    for role in ["cluster-admin", "admin", "edit", "view", "system:discovery", "system:basic-user", "system:controller:deployment-controller"] {
        assert!(names(&roles).contains(&format!("clusterrole.rbac.authorization.k8s.io/{role}").as_str()), "{role} in {roles}");
    }
    let admin: Value = serde_json::from_str(&c.ok(&["get", "clusterrole", "cluster-admin", "-o", "json"]).await).unwrap();
    assert_eq!(admin["metadata"]["annotations"]["rbac.authorization.kubernetes.io/autoupdate"], "true");
    assert_eq!(admin["metadata"]["labels"]["kubernetes.io/bootstrapping"], "rbac-defaults");
    let bindings = c.ok(&["get", "clusterrolebinding", "cluster-admin", "-o", "jsonpath={.subjects[0].name}"]).await;
    assert_eq!(bindings, "system:masters");

    // Aggregation: view's rules reach edit and admin; a new labelled role reaches all three.
    let rules = |role: &'static str| {
        let c = &c;
        async move { c.ok(&["get", "clusterrole", role, "-o", "jsonpath={.rules[*].resources}"]).await }
    };
    assert!(rules("view").await.contains("\"pods\""));
    assert!(rules("edit").await.contains("\"pods/exec\""));
    assert!(rules("admin").await.contains("\"rolebindings\"") && rules("admin").await.contains("\"pods/exec\""));
    let extra = "apiVersion: rbac.authorization.k8s.io/v1\nkind: ClusterRole\nmetadata:\n  name: crontab-viewer\n  labels: {rbac.authorization.k8s.io/aggregate-to-view: \"true\"}\nrules:\n- {apiGroups: [stable.example.com], resources: [crontabs], verbs: [get]}\n";
    c.apply("extra.yaml", extra).await;
    for role in ["view", "edit", "admin"] {
        assert!(rules(role).await.contains("crontabs"), "{role} aggregates the new role");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn delete_answers_the_object_or_a_status_as_each_upstream_registry_does() {
    let c = Cluster::start().await;
    c.raw("POST", "/apis/apiextensions.k8s.io/v1/customresourcedefinitions", "application/json", "application/json", Some(crd())).await;
    // (group, kind, plural, namespaced, body, answers the object)
    let cases: Vec<(&str, &str, &str, bool, Value, bool)> = vec![
        ("", "Pod", "pods", true, json!({"spec": {"containers": [{"name": "c", "image": "nginx"}]}}), true),
        ("", "Service", "services", true, json!({"spec": {"ports": [{"port": 80}]}}), true),
        ("", "ServiceAccount", "serviceaccounts", true, json!({}), true),
        ("", "Namespace", "namespaces", false, json!({}), true),
        ("", "Node", "nodes", false, json!({}), false),
        ("", "ConfigMap", "configmaps", true, json!({}), false),
        ("", "Secret", "secrets", true, json!({}), false),
        ("", "Event", "events", true, json!({"involvedObject": {"kind": "Pod", "name": "x"}}), false),
        ("", "Endpoints", "endpoints", true, json!({}), false),
        ("discovery.k8s.io", "EndpointSlice", "endpointslices", true, json!({"addressType": "IPv4", "endpoints": []}), false),
        (
            "apps",
            "Deployment",
            "deployments",
            true,
            json!({"spec": {"selector": {"matchLabels": {"a": "b"}}, "template": {"metadata": {"labels": {"a": "b"}}, "spec": {"containers": [{"name": "c", "image": "nginx"}]}}}}),
            false,
        ),
        (
            "apps",
            "ReplicaSet",
            "replicasets",
            true,
            json!({"spec": {"selector": {"matchLabels": {"a": "b"}}, "template": {"metadata": {"labels": {"a": "b"}}, "spec": {"containers": [{"name": "c", "image": "nginx"}]}}}}),
            false,
        ),
        ("apps", "ControllerRevision", "controllerrevisions", true, json!({"revision": 1}), false),
        (
            "batch",
            "Job",
            "jobs",
            true,
            json!({"spec": {"template": {"spec": {"restartPolicy": "Never", "containers": [{"name": "c", "image": "nginx"}]}}}}),
            false,
        ),
        ("coordination.k8s.io", "Lease", "leases", true, json!({}), false),
        ("rbac.authorization.k8s.io", "Role", "roles", true, json!({"rules": []}), false),
        (
            "rbac.authorization.k8s.io",
            "RoleBinding",
            "rolebindings",
            true,
            json!({"roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "r"}}),
            false,
        ),
        ("rbac.authorization.k8s.io", "ClusterRole", "clusterroles", false, json!({"rules": []}), false),
        (
            "rbac.authorization.k8s.io",
            "ClusterRoleBinding",
            "clusterrolebindings",
            false,
            json!({"roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "r"}}),
            false,
        ),
        ("stable.example.com", "CronTab", "crontabs", true, json!({"spec": {"cronSpec": "* * * * *"}}), false),
        ("apiextensions.k8s.io", "CustomResourceDefinition", "customresourcedefinitions", false, widget_crd(), true),
    ];
    for (group, kind, plural, namespaced, body, answers_object) in cases {
        let api = c.api(group, kind, plural, namespaced.then_some("default"));
        let name = body.pointer("/metadata/name").and_then(Value::as_str).unwrap_or("doomed").to_string();
        let mut obj = body.clone();
        obj["apiVersion"] = json!(if group.is_empty() { "v1".to_string() } else { format!("{group}/v1") });
        obj["kind"] = json!(kind);
        obj["metadata"]["name"] = json!(name);
        let created: DynamicObject = serde_json::from_value(obj).unwrap();
        let created = api.create(&PostParams::default(), &created).await.unwrap_or_else(|e| panic!("{plural}: {e}"));
        let uid = created.metadata.uid.clone().unwrap();
        let answer = api.delete(&name, &DeleteParams::default()).await.unwrap();
        match (answer.clone().left(), answer.clone().right(), answers_object) {
            (Some(gone), None, true) => assert_eq!(gone.metadata.uid.as_deref(), Some(uid.as_str()), "{plural}"),
            (None, Some(status), false) => {
                let status = serde_json::to_value(status).unwrap();
                assert_eq!(status["status"], "Success", "{plural}: {status}");
                let d = |k: &str| status["details"][k].as_str().unwrap_or_default().to_string();
                assert_eq!(
                    [d("name"), d("group"), d("kind"), d("uid")],
                    [name.clone(), group.to_string(), plural.to_string(), uid.clone()],
                    "{status}"
                );
            }
            _ => panic!("{plural}: DELETE answered {answer:?}, expected {}", if answers_object { "the object" } else { "a Status" }),
        }
    }
}

fn widget_crd() -> Value {
    let mut w = crd();
    w["metadata"]["name"] = json!("widgets.example.org");
    w["spec"]["group"] = json!("example.org");
    w["spec"]["names"] = json!({"plural": "widgets", "singular": "widget", "kind": "Widget"});
    w
}

fn crd() -> Value {
    json!({"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition", "metadata": {"name": "crontabs.stable.example.com"},
        "spec": {"group": "stable.example.com", "scope": "Namespaced", "names": {"plural": "crontabs", "singular": "crontab", "kind": "CronTab"},
            "versions": [{"name": "v1", "served": true, "storage": true, "schema": {"openAPIV3Schema": {"type": "object", "x-kubernetes-preserve-unknown-fields": true}}}]}})
}

const SERVICES: &str = "apiVersion: v1
kind: Service
metadata: {name: web}
spec:
  type: NodePort
  selector: {app: web}
  ports: [{name: http, port: 80, nodePort: 30080}]
---
apiVersion: v1
kind: Service
metadata: {name: fixed}
spec:
  clusterIP: 10.96.0.10
  ports: [{port: 80}]
---
apiVersion: v1
kind: Service
metadata: {name: lb}
spec:
  type: LoadBalancer
  ports: [{port: 443}]
---
apiVersion: v1
kind: Service
metadata: {name: ext}
spec:
  type: ExternalName
  externalName: example.com
";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn services_get_cluster_ips_and_node_ports_and_taken_ones_are_refused() {
    let c = Cluster::start().await;
    let out = c.try_apply("svcs.yaml", SERVICES).await;
    assert_eq!(out.code, 0, "{}{}", out.stdout, out.stderr);
    let svc = |name: &'static str| {
        let c = &c;
        async move { serde_json::from_str::<Value>(&c.ok(&["get", "svc", name, "-o", "json"]).await).unwrap() }
    };
    let web = svc("web").await;
    let ip = web["spec"]["clusterIP"].as_str().unwrap().to_string();
    let octets: Vec<u8> = ip.split('.').map(|o| o.parse().unwrap()).collect();
    assert!(octets[0] == 10 && (96..112).contains(&octets[1]) && ip != "10.96.0.1", "{ip} in 10.96.0.0/12, not the kubernetes IP");
    assert_eq!(web["spec"]["clusterIPs"], json!([ip]));
    assert_eq!(web["spec"]["ipFamilies"], json!(["IPv4"]));
    assert_eq!(web["spec"]["ipFamilyPolicy"], "SingleStack");
    assert_eq!(web["spec"]["internalTrafficPolicy"], "Cluster");
    assert_eq!(web["spec"]["externalTrafficPolicy"], "Cluster");
    assert_eq!(web["spec"]["sessionAffinity"], "None");
    assert_eq!(web["spec"]["ports"][0]["nodePort"], 30080);
    assert_eq!(web["status"], json!({"loadBalancer": {}}));
    assert_eq!(svc("fixed").await["spec"]["clusterIPs"], json!(["10.96.0.10"]));
    let lb = svc("lb").await;
    let lb_port = lb["spec"]["ports"][0]["nodePort"].as_i64().unwrap();
    assert!((30000..=32767).contains(&lb_port), "{lb}");
    assert_eq!(lb["spec"]["allocateLoadBalancerNodePorts"], true);
    let ext = svc("ext").await;
    assert!(ext["spec"].get("clusterIP").is_none() && ext["spec"].get("ipFamilies").is_none(), "{ext}");

    // Taken values are refused with upstream's wording, and released on delete.
    let taken_ip = "apiVersion: v1\nkind: Service\nmetadata: {name: again}\nspec: {clusterIP: 10.96.0.10, ports: [{port: 80}]}\n";
    let out = c.try_apply("taken-ip.yaml", taken_ip).await;
    assert!(
        out.stderr.contains(r#"Service "again" is invalid: spec.clusterIPs: Invalid value: []string{"10.96.0.10"}: failed to allocate IP 10.96.0.10: provided IP is already allocated"#),
        "{}",
        out.stderr
    );
    let taken_port = "apiVersion: v1\nkind: Service\nmetadata: {name: twice}\nspec: {type: NodePort, ports: [{port: 80, nodePort: 30080}]}\n";
    let out = c.try_apply("taken-port.yaml", taken_port).await;
    assert!(
        out.stderr.contains(r#"Service "twice" is invalid: spec.ports[0].nodePort: Invalid value: 30080: provided port is already allocated"#),
        "{}",
        out.stderr
    );
    let out = c
        .try_apply(
            "range.yaml",
            "apiVersion: v1\nkind: Service\nmetadata: {name: low}\nspec: {type: NodePort, ports: [{port: 80, nodePort: 29999}]}\n",
        )
        .await;
    assert!(
        out.stderr.contains(
            "spec.ports[0].nodePort: Invalid value: 29999: provided port is not in the valid range. The range of valid ports is 30000-32767"
        ),
        "{}",
        out.stderr
    );
    c.ok(&["delete", "svc", "web", "fixed"]).await;
    for (file, yaml) in [("taken-ip.yaml", taken_ip), ("taken-port.yaml", taken_port)] {
        let out = c.try_apply(file, yaml).await;
        assert_eq!(out.code, 0, "released on delete: {}", out.stderr);
    }
    // An apply without the allocated values keeps them (upstream's patchAllocatedValues).
    let reapplied = c
        .try_apply(
            "svcs2.yaml",
            "apiVersion: v1\nkind: Service\nmetadata: {name: lb}\nspec:\n  type: LoadBalancer\n  ports: [{port: 443}]\n  sessionAffinity: ClientIP\n",
        )
        .await;
    assert_eq!(reapplied.code, 0, "{}", reapplied.stderr);
    let lb2 = svc("lb").await;
    assert_eq!((lb2["spec"]["clusterIP"].clone(), lb2["spec"]["ports"][0]["nodePort"].clone()), (lb["spec"]["clusterIP"].clone(), json!(lb_port)));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn writes_answer_partial_object_metadata_and_tables_when_asked() {
    let c = Cluster::start().await;
    const META: &str = "application/json;as=PartialObjectMetadata;g=meta.k8s.io;v=v1";
    const TABLE: &str = "application/json;as=Table;g=meta.k8s.io;v=v1";
    let base = "/api/v1/namespaces/default/configmaps";
    let cm = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "m", "labels": {"a": "b"}}, "data": {"k": "v"}});
    let parse = |s: &str| serde_json::from_str::<Value>(s).unwrap();
    let (code, body) = c.raw("POST", base, META, "application/json", Some(cm.clone())).await;
    let body = parse(&body);
    assert_eq!((code, body["kind"].as_str(), body["apiVersion"].as_str()), (201, Some("PartialObjectMetadata"), Some("meta.k8s.io/v1")), "{body}");
    assert!(body.get("data").is_none() && body["metadata"]["labels"]["a"] == "b", "{body}");
    let (_, body) =
        c.raw("PATCH", &format!("{base}/m"), META, "application/merge-patch+json", Some(json!({"metadata": {"labels": {"c": "d"}}}))).await;
    assert_eq!(parse(&body)["kind"], "PartialObjectMetadata", "{body}");
    let (_, current) = c.raw("GET", &format!("{base}/m"), "application/json", "", None).await;
    let (_, body) = c.raw("PUT", &format!("{base}/m"), TABLE, "application/json", Some(parse(&current))).await;
    let table = parse(&body);
    assert_eq!(table["kind"], "Table", "{body}");
    assert_eq!(table["rows"][0]["cells"][0], "m");
    // A DELETE that answers the object is transformed; one that answers a Status is not.
    c.ok(&["create", "namespace", "gone"]).await;
    let (_, body) = c.raw("DELETE", "/api/v1/namespaces/gone", META, "application/json", None).await;
    assert_eq!(parse(&body)["kind"], "PartialObjectMetadata", "{body}");
    let (_, body) = c.raw("DELETE", &format!("{base}/m"), META, "application/json", None).await;
    assert_eq!(parse(&body)["kind"], "Status", "{body}");
    // kube-rs's metadata-only patch reads the same answer.
    let cms: Api<k8s_openapi::api::core::v1::ConfigMap> = Api::default_namespaced(c.client());
    cms.create(&PostParams::default(), &serde_json::from_value(cm).unwrap()).await.unwrap();
    let patched = cms.patch_metadata("m", &PatchParams::default(), &Patch::Merge(json!({"metadata": {"annotations": {"x": "y"}}}))).await.unwrap();
    assert_eq!(patched.metadata.annotations.unwrap()["x"], "y");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bodies_are_written_in_go_struct_order_with_a_trailing_newline() {
    let c = Cluster::start().await;
    let cm = json!({"data": {"k": "v"}, "metadata": {"labels": {"a": "b"}, "name": "ordered"}, "kind": "ConfigMap", "apiVersion": "v1"});
    let (code, body) = c.raw("POST", "/api/v1/namespaces/default/configmaps", "application/json", "application/json", Some(cm)).await;
    assert_eq!(code, 201, "{body}");
    assert!(body.starts_with(r#"{"kind":"ConfigMap","apiVersion":"v1","metadata":{"name":"ordered","namespace":"default","uid":""#), "{body}");
    assert!(body.ends_with("}\n") && body.matches('\n').count() == 1, "one body, one newline: {body:?}");
    let meta_keys: Vec<usize> = ["\"uid\"", "\"resourceVersion\"", "\"creationTimestamp\"", "\"labels\"", "\"data\""]
        .iter()
        .map(|k| body.find(k).unwrap_or_else(|| panic!("{k} in {body}")))
        .collect();
    assert!(meta_keys.windows(2).all(|w| w[0] < w[1]), "ObjectMeta order, then data: {body}");
    let (code, body) = c.raw("GET", "/api/v1/namespaces/default/configmaps/missing", "application/json", "", None).await;
    assert_eq!(code, 404);
    assert_eq!(
        body,
        "{\"kind\":\"Status\",\"apiVersion\":\"v1\",\"metadata\":{},\"status\":\"Failure\",\"message\":\"configmaps \\\"missing\\\" not found\",\"reason\":\"NotFound\",\"details\":{\"name\":\"missing\",\"kind\":\"configmaps\"},\"code\":404}\n"
    );
    let (_, list) = c.raw("GET", "/api/v1/namespaces/default/configmaps", "application/json", "", None).await;
    assert!(list.starts_with(r#"{"kind":"ConfigMapList","apiVersion":"v1","metadata":{"resourceVersion":"#), "{list}");
    // Watch events too: {"type":..,"object":{"kind":..
    let (_, events) = c.raw("GET", "/api/v1/namespaces/default/configmaps?watch=true&timeoutSeconds=1", "application/json", "", None).await;
    let first = events.lines().next().unwrap();
    assert!(first.starts_with(r#"{"type":"ADDED","object":{"kind":"ConfigMap","apiVersion":"v1","metadata":{"name":"#), "{first}");
}

/// Where each of `keys` (JSON member names) first occurs in `body` after the previous one;
/// panics naming the first that is out of order.
fn in_order(body: &str, keys: &[&str]) {
    let mut at = 0;
    for k in keys {
        let quoted = format!("\"{k}\":");
        match body[at..].find(&quoted) {
            Some(i) => at += i + quoted.len(),
            None => panic!("{k} is missing or out of Go order after byte {at}: {body}"),
        }
    }
}

/// Issue 17: nested members too are in Go struct declaration order (a real server's
/// `kubectl get --raw` text), not sorted.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn nested_members_are_in_go_struct_order_as_kubectl_get_raw_shows() {
    let c = Cluster::start().await;
    c.ok(&["create", "deployment", "web", "--image=nginx"]).await;
    let body = c.ok(&["get", "--raw", "/apis/apps/v1/namespaces/default/deployments/web"]).await;
    // A 1.32 server's text of the same Deployment, member for member.
    in_order(&body, &["kind", "apiVersion", "metadata", "name", "namespace", "uid", "resourceVersion", "generation", "creationTimestamp", "labels"]);
    in_order(&body, &["spec", "replicas", "selector", "matchLabels", "template", "metadata", "labels", "spec", "containers"]);
    in_order(&body, &["containers", "name", "image", "resources", "terminationMessagePath", "terminationMessagePolicy", "imagePullPolicy"]);
    in_order(&body, &["imagePullPolicy", "restartPolicy", "terminationGracePeriodSeconds", "dnsPolicy", "securityContext", "schedulerName"]);
    in_order(
        &body,
        &["schedulerName", "strategy", "type", "rollingUpdate", "maxUnavailable", "maxSurge", "revisionHistoryLimit", "progressDeadlineSeconds"],
    );
    let svc = c.ok(&["create", "service", "clusterip", "db", "--tcp=5432:5432", "-o", "name"]).await;
    assert_eq!(svc.trim(), "service/db");
    let body = c.ok(&["get", "--raw", "/api/v1/namespaces/default/services/db"]).await;
    in_order(&body, &["ports", "name", "protocol", "port", "targetPort", "selector", "clusterIP", "clusterIPs", "type", "sessionAffinity"]);
    in_order(&body, &["sessionAffinity", "ipFamilies", "ipFamilyPolicy", "internalTrafficPolicy", "status", "loadBalancer"]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn exec_attach_and_port_forward_get_a_status_naming_what_is_not_served() {
    let c = Cluster::start().await;
    let pod = "apiVersion: v1\nkind: Pod\nmetadata: {name: p}\nspec: {containers: [{name: c, image: nginx}]}\n";
    c.apply("pod.yaml", pod).await;
    let out = c.kubectl(&["exec", "p", "--", "ls"]).await;
    assert_ne!(out.code, 0);
    assert!(out.stderr.contains("pods/exec is not supported by the embedded API server"), "{}", out.stderr);
    for sub in ["exec", "attach", "portforward"] {
        let (code, body) = c.raw("POST", &format!("/api/v1/namespaces/default/pods/p/{sub}"), "application/json", "", None).await;
        let status: Value = serde_json::from_str(&body).unwrap();
        assert_eq!((code, status["reason"].as_str()), (405, Some("MethodNotAllowed")), "{body}");
        assert!(status["message"].as_str().unwrap().starts_with(&format!("pods/{sub} is not supported")), "{body}");
    }
    let (code, body) = c.raw("POST", "/api/v1/namespaces/default/pods/missing/exec", "application/json", "", None).await;
    assert_eq!(code, 404, "a missing pod is NotFound first: {body}");
    assert!(body.contains(r#"pods \"missing\" not found"#), "{body}");
}

/// Differences `tests/fidelity` measured against kube-apiserver v1.36 and this server now
/// answers as it does: an apply that creates answers 201; health checks are
/// `text/plain; charset=utf-8`; aggregated discovery's group metadata carries no
/// `creationTimestamp: null`; an apply conflict names an applier alone and its details name
/// no object (errors.NewApplyConflict); discovery gives each built-in resource's
/// storageVersionHash.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn answers_the_fidelity_corpus_found_different() {
    let c = Cluster::start().await;
    let path = "/api/v1/namespaces/default/configmaps/applied?fieldManager=alice";
    let cm = |v: &str| Some(json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "applied"}, "data": {"owner": v}}));
    let (status, _) = c.raw("PATCH", path, "application/json", "application/apply-patch+yaml", cm("alice")).await;
    assert_eq!(status, 201, "an apply that creates the object");
    let (status, _) = c.raw("PATCH", path, "application/json", "application/apply-patch+yaml", cm("alice")).await;
    assert_eq!(status, 200, "an apply to an existing object");
    let bob = "/api/v1/namespaces/default/configmaps/applied?fieldManager=bob";
    let (status, body) = c.raw("PATCH", bob, "application/json", "application/apply-patch+yaml", cm("bob")).await;
    assert_eq!(status, 409);
    let conflict: Value = serde_json::from_str(&body).unwrap();
    assert_eq!(conflict["message"], "Apply failed with 1 conflict: conflict with \"alice\": .data.owner");
    assert_eq!(
        conflict["details"],
        json!({"causes": [{"reason": "FieldManagerConflict", "message": "conflict with \"alice\"", "field": ".data.owner"}]})
    );

    for health in ["/healthz", "/livez", "/readyz"] {
        let resp = c.client().send(http::Request::get(health).body(kube::client::Body::empty()).unwrap()).await.unwrap();
        assert_eq!(resp.headers()["content-type"], "text/plain; charset=utf-8", "{health}");
    }

    // Values kube-apiserver v1.36 answers.
    for (path, resource, hash) in
        [("/api/v1", "pods", "xPOwRZ+Yhw8="), ("/apis/apps/v1", "deployments", "8aSe+NMegvE="), ("/apis/batch/v1", "jobs", "mudhfqk/qZY=")]
    {
        let (_, body) = c.raw("GET", path, "application/json", "application/json", None).await;
        let list: Value = serde_json::from_str(&body).unwrap();
        let entry = list["resources"].as_array().unwrap().iter().find(|r| r["name"] == resource).unwrap().clone();
        assert_eq!(entry["storageVersionHash"], hash, "{path} {resource}");
    }

    let accept = "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList";
    for root in ["/api", "/apis"] {
        let (status, body) = c.raw("GET", root, accept, "application/json", None).await;
        assert_eq!(status, 200);
        let list: Value = serde_json::from_str(&body).unwrap();
        for item in list["items"].as_array().unwrap() {
            assert!(item["metadata"].get("creationTimestamp").is_none(), "{root}: {}", item["metadata"]);
        }
    }
}

/// A LIST of a built-in kind answers items without `apiVersion` and `kind` (upstream encodes
/// them from Go structs with an empty TypeMeta); a custom resource's items keep both.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn built_in_list_items_carry_no_type_meta_and_custom_ones_do() {
    let c = Cluster::start().await;
    c.ok(&["create", "configmap", "listed", "--from-literal=a=1"]).await;
    let (status, body) = c.raw("GET", "/api/v1/namespaces/default/configmaps", "application/json", "application/json", None).await;
    assert_eq!(status, 200);
    let list: Value = serde_json::from_str(&body).unwrap();
    assert_eq!((list["kind"].as_str(), list["apiVersion"].as_str()), (Some("ConfigMapList"), Some("v1")));
    let items = list["items"].as_array().unwrap();
    assert!(!items.is_empty());
    for item in items {
        assert!(item.get("apiVersion").is_none() && item.get("kind").is_none(), "{item}");
    }
    let out = c.ok(&["get", "configmap", "listed", "-o", "json"]).await;
    assert!(out.contains("\"kind\": \"ConfigMap\""), "a GET of one object still names its kind: {out}");

    c.apply("crd.yaml", &serde_json::to_string(&crate::common::crontab_crd()).unwrap()).await;
    c.ok(&["wait", "--for", "condition=established", "crd/crontabs.stable.example.com"]).await;
    c.apply("ct.yaml", "apiVersion: stable.example.com/v1\nkind: CronTab\nmetadata: {name: one}\nspec: {cronSpec: '* * * * */5', image: x}\n").await;
    let (_, body) = c.raw("GET", "/apis/stable.example.com/v1/namespaces/default/crontabs", "application/json", "application/json", None).await;
    let list: Value = serde_json::from_str(&body).unwrap();
    assert_eq!(list["items"][0]["kind"], "CronTab");
    assert_eq!(list["items"][0]["apiVersion"], "stable.example.com/v1");
}
