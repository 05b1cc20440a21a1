//! Every kind a v1.36 server serves: discovery compared with the real server's
//! (`surface/discovery.json`, captured by `cargo xtask api-surface`), and the new kinds and
//! subresources used through the real kubectl over HTTP (and kube-rs where kubectl cannot:
//! bearer tokens over plain HTTP).

use crate::common::kubectl::Cluster;
use serde_json::{Value, json};
use std::collections::BTreeSet;

const DISCOVERY: &str = include_str!("../../surface/discovery.json");

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn discovery_serves_every_resource_list_of_the_real_v1_36_server() {
    let c = Cluster::start().await;
    let upstream: Value = serde_json::from_str(DISCOVERY).expect("surface/discovery.json");
    let lists = upstream["resourceLists"].as_object().expect("resourceLists");
    assert!(lists.contains_key("api/v1") && lists.contains_key("apis/resource.k8s.io/v1"), "{:?}", lists.keys());
    for (key, list) in lists {
        let served: Value = serde_json::from_str(&c.ok(&["get", "--raw", &format!("/{key}")]).await).unwrap();
        assert_eq!(&served, list, "/{key}");
    }
    // kubectl lists every resource of every preferred version, by upstream's names.
    let wide = c.ok(&["api-resources", "-o", "name"]).await;
    let ours: BTreeSet<&str> = wide.lines().collect();
    for item in upstream["apis"]["items"].as_array().unwrap().iter().chain(upstream["api"]["items"].as_array().unwrap()) {
        let group = item["metadata"]["name"].as_str().unwrap_or_default();
        for r in item["versions"][0]["resources"].as_array().unwrap() {
            let plural = r["resource"].as_str().unwrap();
            let name = if group.is_empty() { plural.to_string() } else { format!("{plural}.{group}") };
            assert!(ours.contains(name.as_str()), "kubectl api-resources lacks {name}:\n{wide}");
        }
    }
    let apis: Value = serde_json::from_str(&c.ok(&["get", "--raw", "/apis"]).await).unwrap();
    let autoscaling = apis["groups"].as_array().unwrap().iter().find(|g| g["name"] == "autoscaling").unwrap();
    assert_eq!(autoscaling["preferredVersion"]["version"], "v2");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kubectl_gets_every_new_kind_by_its_short_name() {
    let c = Cluster::start().await;
    let kinds = "sts,ds,cj,rc,podtemplates,pvc,pv,sc,csidrivers,csinodes,volumeattachments,quota,limits,pdb,pc,ing,ingressclasses,netpol,hpa,csr,mutatingwebhookconfigurations,validatingwebhookconfigurations,validatingadmissionpolicies,validatingadmissionpolicybindings,apiservices,runtimeclasses,flowschemas,prioritylevelconfigurations,csistoragecapacities";
    let o = c.kubectl(&["get", kinds, "-A"]).await;
    assert_eq!(o.code, 0, "{}{}", o.stdout, o.stderr);
    assert!(o.stderr.contains("No resources found"), "{}", o.stderr);
    let cs = c.ok(&["get", "componentstatuses", "-o", "jsonpath={range .items[*]}{.metadata.name}={.conditions[0].status} {end}"]).await;
    assert_eq!(cs.trim(), "controller-manager=False scheduler=False etcd-0=True", "no simulated cluster runs here");
    // Verbs a kind does not serve are refused as upstream does.
    let e = c.fails(&["delete", "--raw", "/api/v1/namespaces"]).await;
    assert!(e.contains("MethodNotAllowed") || e.contains("does not allow this method"), "{e}");
    let e = c.fails(&["get", "--raw", "/api/v1/namespaces/default/bindings"]).await;
    assert!(e.contains("MethodNotAllowed") || e.contains("does not allow this method"), "{e}");
}

/// Manifests as the Kubernetes documentation gives them (concepts/workloads, services-networking,
/// run-application): a StatefulSet with a claim template, a CronJob, an Ingress, a PDB, an HPA, a
/// NetworkPolicy, a PriorityClass and a StorageClass.
const WORKLOADS: &str = r#"apiVersion: v1
kind: Service
metadata:
  name: nginx
  labels: {app: nginx}
spec:
  ports: [{port: 80, name: web}]
  clusterIP: None
  selector: {app: nginx}
---
apiVersion: apps/v1
kind: StatefulSet
metadata:
  name: web
spec:
  selector:
    matchLabels: {app: nginx}
  serviceName: "nginx"
  replicas: 2
  minReadySeconds: 10
  template:
    metadata:
      labels: {app: nginx}
    spec:
      terminationGracePeriodSeconds: 10
      containers:
      - name: nginx
        image: registry.k8s.io/nginx-slim:0.24
        ports: [{containerPort: 80, name: web}]
        volumeMounts: [{name: www, mountPath: /usr/share/nginx/html}]
  volumeClaimTemplates:
  - metadata:
      name: www
    spec:
      accessModes: ["ReadWriteOnce"]
      storageClassName: "my-storage-class"
      resources:
        requests: {storage: 1Gi}
---
apiVersion: batch/v1
kind: CronJob
metadata:
  name: hello
spec:
  schedule: "* * * * *"
  jobTemplate:
    spec:
      template:
        spec:
          containers:
          - name: hello
            image: busybox:1.28
            imagePullPolicy: IfNotPresent
            command: [/bin/sh, -c, date; echo Hello from the Kubernetes cluster]
          restartPolicy: OnFailure
---
apiVersion: networking.k8s.io/v1
kind: Ingress
metadata:
  name: minimal-ingress
  annotations:
    nginx.ingress.kubernetes.io/rewrite-target: /
spec:
  ingressClassName: nginx-example
  rules:
  - http:
      paths:
      - path: /testpath
        pathType: Prefix
        backend:
          service:
            name: test
            port: {number: 80}
---
apiVersion: policy/v1
kind: PodDisruptionBudget
metadata:
  name: zk-pdb
spec:
  minAvailable: 2
  selector:
    matchLabels: {app: zookeeper}
---
apiVersion: autoscaling/v2
kind: HorizontalPodAutoscaler
metadata:
  name: php-apache
spec:
  scaleTargetRef: {apiVersion: apps/v1, kind: Deployment, name: php-apache}
  minReplicas: 1
  maxReplicas: 10
  metrics:
  - type: Resource
    resource:
      name: cpu
      target: {type: Utilization, averageUtilization: 50}
---
apiVersion: networking.k8s.io/v1
kind: NetworkPolicy
metadata:
  name: test-network-policy
spec:
  podSelector:
    matchLabels: {role: db}
  ingress:
  - from:
    - ipBlock: {cidr: 172.17.0.0/16, except: [172.17.1.0/24]}
    ports: [{port: 6379}]
---
apiVersion: scheduling.k8s.io/v1
kind: PriorityClass
metadata:
  name: high-priority
value: 1000000
globalDefault: false
description: "This priority class should be used for XYZ service pods only."
---
apiVersion: storage.k8s.io/v1
kind: StorageClass
metadata:
  name: my-storage-class
provisioner: kubernetes.io/no-provisioner
"#;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kubectl_applies_workloads_from_the_docs_stored_defaulted_and_scalable() {
    let c = Cluster::start().await;
    let out = c.apply("workloads.yaml", WORKLOADS).await;
    for created in [
        "statefulset.apps/web created",
        "cronjob.batch/hello created",
        "ingress.networking.k8s.io/minimal-ingress created",
        "poddisruptionbudget.policy/zk-pdb created",
    ] {
        assert!(out.contains(created), "{out}");
    }
    // Defaults as upstream's SetDefaults_* fill them in.
    let sts = c.json(&["get", "sts", "web"]).await;
    assert_eq!(sts["spec"]["podManagementPolicy"], "OrderedReady");
    assert_eq!(sts["spec"]["updateStrategy"], json!({"type": "RollingUpdate", "rollingUpdate": {"partition": 0}}));
    assert_eq!(sts["spec"]["template"]["spec"]["restartPolicy"], "Always");
    assert_eq!(sts["metadata"]["generation"], 1);
    let cj = c.json(&["get", "cj", "hello"]).await;
    assert_eq!((cj["spec"]["concurrencyPolicy"].as_str(), cj["spec"]["successfulJobsHistoryLimit"].as_i64()), (Some("Allow"), Some(3)));
    let np = c.json(&["get", "netpol", "test-network-policy"]).await;
    assert_eq!(np["spec"]["policyTypes"], json!(["Ingress"]));
    assert_eq!(np["spec"]["ingress"][0]["ports"][0]["protocol"], "TCP");
    assert_eq!(c.ok(&["get", "sc", "my-storage-class", "-o", "jsonpath={.reclaimPolicy}/{.volumeBindingMode}"]).await, "Delete/Immediate");
    // A second apply of the same manifests changes nothing.
    let again = c.apply("workloads.yaml", WORKLOADS).await;
    assert!(again.contains("cronjob.batch/hello unchanged"), "{again}");

    // Scale subresource and generation.
    c.ok(&["scale", "sts", "web", "--replicas=3"]).await;
    let sts = c.json(&["get", "sts", "web"]).await;
    assert_eq!((sts["spec"]["replicas"].as_i64(), sts["metadata"]["generation"].as_i64()), (Some(3), Some(2)));
    // StatefulSet spec fields outside upstream's list are immutable.
    let e = c.fails(&["patch", "sts", "web", "--type=merge", "-p", r#"{"spec":{"serviceName":"other"}}"#]).await;
    assert!(e.contains("updates to statefulset spec for fields other than"), "{e}");
    // Strict field validation from the built-in schema.
    let typo = WORKLOADS.replace("minAvailable: 2", "minAvailable: 2\n  minAvailabel: 3");
    let path = c.file("typo.yaml", &typo);
    let e = c.fails(&["apply", "-f", path.to_str().unwrap()]).await;
    assert!(e.contains(r#"unknown field "spec.minAvailabel""#), "{e}");
    let both = WORKLOADS.replace("minAvailable: 2", "minAvailable: 2\n  maxUnavailable: 1");
    let path = c.file("both.yaml", &both);
    let e = c.fails(&["apply", "-f", path.to_str().unwrap()]).await;
    assert!(e.contains("minAvailable and maxUnavailable cannot be both set"), "{e}");

    // The HPA is served at autoscaling/v1 too, converted from the stored v2.
    let v1 = c.json(&["get", "horizontalpodautoscalers.v1.autoscaling", "php-apache"]).await;
    assert_eq!(v1["apiVersion"], "autoscaling/v1");
    assert_eq!(v1["spec"]["targetCPUUtilizationPercentage"], 50);
    // kubectl explain reads the schemas of the new kinds.
    let explain = c.ok(&["explain", "statefulset.spec.podManagementPolicy"]).await;
    assert!(explain.contains("podManagementPolicy"), "{explain}");
    let all = c.ok(&["get", "all"]).await;
    for shown in ["statefulset.apps/web", "cronjob.batch/hello", "horizontalpodautoscaler.autoscaling/php-apache"] {
        assert!(all.contains(shown), "{shown} not in `kubectl get all`:\n{all}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kubectl_create_token_issues_a_token_the_server_accepts_and_reviews() {
    let c = Cluster::start().await;
    c.apply("sa.yaml", "apiVersion: v1\nkind: ServiceAccount\nmetadata: {name: bot, namespace: default}\n").await;
    // `kubectl create token` sends its TokenRequest as protobuf (decoded on the h17-protobuf
    // branch); the same request as JSON through kubectl's raw mode:
    let request =
        |seconds: i64| json!({"apiVersion": "authentication.k8s.io/v1", "kind": "TokenRequest", "spec": {"expirationSeconds": seconds}}).to_string();
    let hour = c.file("tr.json", &request(3600));
    let url = "/api/v1/namespaces/default/serviceaccounts/bot/token";
    let issued: Value = serde_json::from_str(&c.ok(&["create", "--raw", url, "-f", hour.to_str().unwrap()]).await).unwrap();
    assert!(issued["status"]["expirationTimestamp"].is_string(), "{issued}");
    let token = issued["status"]["token"].as_str().unwrap().to_string();
    assert_eq!(token.split('.').count(), 3, "a JWT: {token}");
    // TokenReview names the service account.
    let review =
        c.file("review.json", &json!({"apiVersion": "authentication.k8s.io/v1", "kind": "TokenReview", "spec": {"token": token}}).to_string());
    // kubectl finds no PATCH path for a create-only kind in the OpenAPI v3 document and
    // validates it client-side with /openapi/v2 (protobuf), as against upstream.
    let reviewed: Value = serde_json::from_str(&c.ok(&["create", "-f", review.to_str().unwrap(), "-o", "json"]).await).unwrap();
    assert_eq!(reviewed["status"]["authenticated"], true, "{reviewed}");
    assert_eq!(reviewed["status"]["user"]["username"], "system:serviceaccount:default:bot");
    assert!(reviewed["status"]["user"]["groups"].as_array().unwrap().contains(&json!("system:serviceaccounts:default")));
    let forged = c.file(
        "forged.json",
        &json!({"apiVersion": "authentication.k8s.io/v1", "kind": "TokenReview", "spec": {"token": format!("{token}x")}}).to_string(),
    );
    let refused: Value = serde_json::from_str(&c.ok(&["create", "-f", forged.to_str().unwrap(), "-o", "json"]).await).unwrap();
    assert_ne!(refused["status"]["authenticated"], true, "{refused}");
    // The token is accepted as a bearer token, as the service account (RBAC applies to it).
    let client = c.client_with_token(&token).await;
    let who: Value = client
        .request(
            http::Request::post("/apis/authentication.k8s.io/v1/selfsubjectreviews")
                .body(serde_json::to_vec(&json!({"apiVersion": "authentication.k8s.io/v1", "kind": "SelfSubjectReview"})).unwrap())
                .unwrap(),
        )
        .await
        .unwrap();
    assert_eq!(who["status"]["userInfo"]["username"], "system:serviceaccount:default:bot");
    let pods: kube::Api<k8s_openapi::api::core::v1::Pod> = kube::Api::default_namespaced(client);
    match pods.list(&Default::default()).await {
        Err(kube::Error::Api(s)) => assert_eq!(s.code, 403, "{s:?}"),
        other => panic!("a service account without roles may not list pods: {other:?}"),
    }
    // Upstream's limits.
    let short = c.file("short.json", &request(300));
    let e = c.fails(&["create", "--raw", url, "-f", short.to_str().unwrap()]).await;
    assert!(e.contains("may not specify a duration less than 10 minutes"), "{e}");
    let e = c.fails(&["create", "--raw", "/api/v1/namespaces/default/serviceaccounts/nobody/token", "-f", hour.to_str().unwrap()]).await;
    assert!(e.contains("NotFound") || e.contains("not found"), "{e}");
    // SubjectAccessReview answers for the user it names.
    let sar = c.file(
        "sar.json",
        &json!({"apiVersion": "authorization.k8s.io/v1", "kind": "SubjectAccessReview",
        "spec": {"user": "system:serviceaccount:default:bot", "resourceAttributes": {"verb": "list", "resource": "pods", "namespace": "default"}}})
        .to_string(),
    );
    let answer: Value = serde_json::from_str(&c.ok(&["create", "-f", sar.to_str().unwrap(), "-o", "json"]).await).unwrap();
    assert_eq!(answer["status"]["allowed"], false, "{answer}");
    let admin = c.file(
        "sar-admin.json",
        &json!({"apiVersion": "authorization.k8s.io/v1", "kind": "SubjectAccessReview",
        "spec": {"user": "someone", "groups": ["system:masters"], "resourceAttributes": {"verb": "list", "resource": "pods"}}})
        .to_string(),
    );
    let answer: Value = serde_json::from_str(&c.ok(&["create", "-f", admin.to_str().unwrap(), "-o", "json"]).await).unwrap();
    assert_eq!(answer["status"]["allowed"], true, "{answer}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn certificate_signing_requests_are_approved_through_their_subresource() {
    let c = Cluster::start().await;
    let csr = "apiVersion: certificates.k8s.io/v1
kind: CertificateSigningRequest
metadata:
  name: myuser
spec:
  request: LS0tLS1CRUdJTiBDRVJUSUZJQ0FURSBSRVFVRVNULS0tLS0KLS0tLS1FTkQgQ0VSVElGSUNBVEUgUkVRVUVTVC0tLS0tCg==
  signerName: kubernetes.io/kube-apiserver-client
  expirationSeconds: 86400
  usages: [client auth]
";
    c.apply("csr.yaml", csr).await;
    assert!(c.ok(&["get", "csr"]).await.contains("myuser"));
    // A main-resource write may not approve.
    c.ok(&["patch", "csr", "myuser", "--type=merge", "-p", r#"{"status":{"conditions":[{"type":"Approved","status":"True"}]}}"#]).await;
    assert_eq!(c.ok(&["get", "csr", "myuser", "-o", "jsonpath={.status.conditions}"]).await, "");
    let mut approved = c.json(&["get", "csr", "myuser"]).await;
    approved["status"] = json!({"conditions": [{"type": "Approved", "status": "True", "reason": "KubectlApprove", "message": "approved by test"}]});
    let path = c.file("approved.json", &approved.to_string());
    c.ok(&["replace", "--raw", "/apis/certificates.k8s.io/v1/certificatesigningrequests/myuser/approval", "-f", path.to_str().unwrap()]).await;
    assert_eq!(c.ok(&["get", "csr", "myuser", "-o", "jsonpath={.status.conditions[0].type}"]).await, "Approved");
}

const PRINTED: &str = "apiVersion: apps/v1
kind: StatefulSet
metadata: {name: db}
spec:
  replicas: 3
  serviceName: db
  selector: {matchLabels: {app: db}}
  template:
    metadata: {labels: {app: db}}
    spec: {containers: [{name: pg, image: postgres:16}]}
---
apiVersion: apps/v1
kind: DaemonSet
metadata: {name: agent}
spec:
  selector: {matchLabels: {app: agent}}
  template:
    metadata: {labels: {app: agent}}
    spec:
      nodeSelector: {kubernetes.io/os: linux}
      containers: [{name: a, image: busybox}]
---
apiVersion: batch/v1
kind: CronJob
metadata: {name: tick}
spec:
  schedule: '*/5 * * * *'
  jobTemplate:
    spec:
      template:
        spec:
          restartPolicy: OnFailure
          containers: [{name: c, image: busybox}]
---
apiVersion: networking.k8s.io/v1
kind: Ingress
metadata: {name: site}
spec:
  ingressClassName: nginx
  tls: [{hosts: [a.example.com], secretName: cert}]
  rules:
  - host: a.example.com
    http: {paths: [{path: /, pathType: Prefix, backend: {service: {name: web, port: {number: 80}}}}]}
---
apiVersion: v1
kind: PersistentVolumeClaim
metadata: {name: data}
spec:
  accessModes: [ReadWriteOnce]
  storageClassName: fast
  resources: {requests: {storage: 1Gi}}
---
apiVersion: storage.k8s.io/v1
kind: StorageClass
metadata:
  name: fast
  annotations: {storageclass.kubernetes.io/is-default-class: 'true'}
provisioner: example.com/disk
---
apiVersion: policy/v1
kind: PodDisruptionBudget
metadata: {name: db}
spec:
  minAvailable: 2
  selector: {matchLabels: {app: db}}
---
apiVersion: networking.k8s.io/v1
kind: NetworkPolicy
metadata: {name: deny}
spec:
  podSelector: {matchLabels: {app: db}}
  policyTypes: [Ingress]
";

/// Issue 17: `kubectl get` prints upstream's columns (pkg/printers/internalversion, v1.32) for
/// the kinds added for 1.32 parity, not just Name and Age.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kubectl_get_prints_upstreams_columns_for_the_added_kinds() {
    let c = Cluster::start().await;
    c.apply("printed.yaml", PRINTED).await;
    c.ok(&["autoscale", "statefulset", "db", "--min=2", "--max=5", "--cpu-percent=70"]).await;
    c.ok(&["create", "priorityclass", "high", "--value=1000"]).await;
    let words = |text: &str| -> Vec<Vec<String>> { text.lines().map(|l| l.split_whitespace().map(String::from).collect()).collect() };
    let cases: Vec<(&str, Vec<&str>, Vec<&str>)> = vec![
        ("statefulsets", vec!["NAME", "READY", "AGE"], vec!["db", "0/3"]),
        (
            "daemonsets",
            vec!["NAME", "DESIRED", "CURRENT", "READY", "UP-TO-DATE", "AVAILABLE", "NODE", "SELECTOR", "AGE"],
            vec!["agent", "0", "0", "0", "0", "0", "kubernetes.io/os=linux"],
        ),
        (
            "cronjobs",
            vec!["NAME", "SCHEDULE", "TIMEZONE", "SUSPEND", "ACTIVE", "LAST", "SCHEDULE", "AGE"],
            vec!["tick", "*/5", "*", "*", "*", "*", "<none>", "False", "0", "<none>"],
        ),
        ("ingresses", vec!["NAME", "CLASS", "HOSTS", "ADDRESS", "PORTS", "AGE"], vec!["site", "nginx", "a.example.com", "80,", "443"]),
        (
            "pvc",
            vec!["NAME", "STATUS", "VOLUME", "CAPACITY", "ACCESS", "MODES", "STORAGECLASS", "VOLUMEATTRIBUTESCLASS", "AGE"],
            vec!["data", "Pending", "fast", "<unset>"],
        ),
        (
            "storageclasses",
            vec!["NAME", "PROVISIONER", "RECLAIMPOLICY", "VOLUMEBINDINGMODE", "ALLOWVOLUMEEXPANSION", "AGE"],
            vec!["fast", "(default)", "example.com/disk", "Delete", "Immediate", "false"],
        ),
        ("pdb", vec!["NAME", "MIN", "AVAILABLE", "MAX", "UNAVAILABLE", "ALLOWED", "DISRUPTIONS", "AGE"], vec!["db", "2", "N/A", "0"]),
        (
            "hpa",
            vec!["NAME", "REFERENCE", "TARGETS", "MINPODS", "MAXPODS", "REPLICAS", "AGE"],
            vec!["db", "StatefulSet/db", "cpu:", "<unknown>/70%", "2", "5", "0"],
        ),
        ("networkpolicies", vec!["NAME", "POD-SELECTOR", "AGE"], vec!["deny", "app=db"]),
        ("priorityclass/high", vec!["NAME", "VALUE", "GLOBAL-DEFAULT", "AGE", "PREEMPTIONPOLICY"], vec!["high", "1000", "false"]),
        ("endpoints/kubernetes", vec!["NAME", "ENDPOINTS", "AGE"], vec!["kubernetes"]),
        ("endpointslices/kubernetes", vec!["NAME", "ADDRESSTYPE", "PORTS", "ENDPOINTS", "AGE"], vec!["kubernetes", "IPv4"]),
    ];
    let mut wrong = vec![];
    for (what, header, first_cells) in &cases {
        let out = c.kubectl(&["get", what]).await;
        let rows = words(&out.stdout);
        let got_header = rows.first().cloned().unwrap_or_default();
        let got_cells = rows.get(1).cloned().unwrap_or_default();
        if got_header != *header || !got_cells.starts_with(&first_cells.iter().map(|s| s.to_string()).collect::<Vec<_>>()) {
            wrong.push(format!("kubectl get {what}:\n{}{}", out.stdout, out.stderr));
        }
    }
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
    // Kinds without a printer get upstream's default table: Name and Created At.
    c.apply("limits.yaml", "apiVersion: v1\nkind: LimitRange\nmetadata: {name: l}\nspec: {limits: [{type: Container, max: {cpu: '1'}}]}\n").await;
    let out = c.ok(&["get", "limitranges"]).await;
    assert_eq!(words(&out)[0], ["NAME", "CREATED", "AT"], "{out}");
    let wide = c.ok(&["get", "clusterrolebinding", "system:node-proxier", "-o", "wide"]).await;
    assert_eq!(words(&wide)[0], ["NAME", "ROLE", "AGE", "USERS", "GROUPS", "SERVICEACCOUNTS"], "{wide}");
    assert!(wide.contains("ClusterRole/system:node-proxier") && wide.contains("system:kube-proxy"), "{wide}");
}
