//! The real kubectl (/usr/bin/kubectl) against a server started per test over HTTP.

use crate::common::kubectl::{Cluster, Out};

fn header(table: &str) -> Vec<String> {
    table.lines().next().unwrap_or_default().split_whitespace().map(String::from).collect()
}

const POD: &str = "apiVersion: v1
kind: Pod
metadata:
  name: web
  labels: {app: web}
spec:
  containers:
  - name: app
    image: nginx:1
    ports: [{containerPort: 80}]
";

const CRD: &str = "apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata:
  name: crontabs.stable.example.com
spec:
  group: stable.example.com
  scope: Namespaced
  names: {plural: crontabs, singular: crontab, kind: CronTab, shortNames: [ct]}
  versions:
  - name: v1
    served: true
    storage: true
    schema:
      openAPIV3Schema:
        type: object
        description: CronTab runs things on a schedule.
        properties:
          spec:
            type: object
            description: The desired schedule.
            required: [cronSpec]
            properties:
              cronSpec: {type: string, description: The cron expression.}
              image: {type: string}
              replicas: {type: integer, minimum: 0, default: 1}
              selector: {type: string}
          status:
            type: object
            properties:
              replicas: {type: integer}
    subresources:
      status: {}
      scale: {specReplicasPath: .spec.replicas, statusReplicasPath: .status.replicas, labelSelectorPath: .spec.selector}
    additionalPrinterColumns:
    - {name: Spec, type: string, jsonPath: .spec.cronSpec}
    - {name: Replicas, type: integer, jsonPath: .spec.replicas}
    - {name: Age, type: date, jsonPath: .metadata.creationTimestamp}
";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kubectl_api_resources_lists_the_builtin_table() {
    let c = Cluster::start().await;
    let out = c.ok(&["api-resources"]).await;
    for want in ["pods", "deployments", "customresourcedefinitions", "leases", "clusterrolebindings"] {
        assert!(out.contains(want), "{want} missing from:\n{out}");
    }
    assert!(out.lines().any(|l| l.starts_with("pods") && l.contains("po") && l.contains("true") && l.contains("Pod")));
    let ns = c.ok(&["get", "namespaces"]).await;
    assert_eq!(header(&ns), ["NAME", "STATUS", "AGE"]);
    assert!(ns.contains("kube-system") && ns.contains("Active"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kubectl_apply_creates_then_configures_and_get_prints_it() {
    let c = Cluster::start().await;
    let f = c.file("pod.yaml", POD);
    assert!(c.ok(&["apply", "-f", f.to_str().unwrap()]).await.contains("pod/web created"));
    let f2 = c.file("pod2.yaml", &POD.replace("nginx:1", "nginx:2"));
    assert!(c.ok(&["apply", "-f", f2.to_str().unwrap()]).await.contains("pod/web configured"));
    let table = c.ok(&["get", "pods"]).await;
    assert_eq!(header(&table), ["NAME", "READY", "STATUS", "RESTARTS", "AGE"]);
    assert!(table.lines().nth(1).unwrap().starts_with("web"), "{table}");
    assert!(table.contains("0/1") && table.contains("Pending"));
    let yaml = c.ok(&["get", "pod", "web", "-o", "yaml"]).await;
    assert!(yaml.contains("image: nginx:2") && yaml.contains("resourceVersion:") && yaml.contains("uid:"), "{yaml}");
    let json: serde_json::Value = serde_json::from_str(&c.ok(&["get", "pod", "web", "-o", "json"]).await).unwrap();
    assert_eq!(json["metadata"]["labels"]["app"], "web");
    let sel = c.ok(&["get", "pods", "-l", "app in (web,db)", "-o", "name"]).await;
    assert_eq!(sel.trim(), "pod/web");
    let none = c.kubectl(&["get", "pods", "-l", "app!=web"]).await;
    assert!(none.stderr.contains("No resources found"), "{}", none.stderr);
    let typo = c.file("typo.yaml", &POD.replace("name: web", "name: typo").replace("    image: nginx:1", "    image: nginx:1\n    imagee: nginx:1"));
    let refused = c.kubectl(&["apply", "-f", typo.to_str().unwrap()]).await;
    assert_eq!(refused.code, 1);
    assert!(
        refused
            .stderr
            .contains("Pod in version \"v1\" cannot be handled as a Pod: strict decoding error: unknown field \"spec.containers[0].imagee\""),
        "{}",
        refused.stderr
    );
    let explain = c.ok(&["explain", "pod.spec.containers.ports"]).await;
    assert!(explain.contains("containerPort") && explain.contains("<[]ContainerPort>"), "{explain}");
    let described = c.ok(&["describe", "pod", "web"]).await;
    assert!(described.contains("Name:") && described.contains("web") && described.contains("nginx:2"), "{described}");
    let missing = c.kubectl(&["get", "pod", "nope"]).await;
    assert_eq!(missing.code, 1);
    assert!(missing.stderr.contains("Error from server (NotFound): pods \"nope\" not found"), "{}", missing.stderr);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kubectl_patch_label_and_annotate_each_patch_type() {
    let c = Cluster::start().await;
    let f = c.file("pod.yaml", POD);
    c.ok(&["apply", "-f", f.to_str().unwrap()]).await;
    c.ok(&["patch", "pod", "web", "--type", "merge", "-p", r#"{"metadata":{"labels":{"m":"1"}}}"#]).await;
    c.ok(&["patch", "pod", "web", "--type", "json", "-p", r#"[{"op":"add","path":"/metadata/labels/j","value":"2"}]"#]).await;
    c.ok(&["patch", "pod", "web", "--type", "strategic", "-p", r#"{"spec":{"containers":[{"name":"app","image":"nginx:3"}]}}"#]).await;
    let failed = c.kubectl(&["patch", "pod", "web", "--type", "json", "-p", r#"[{"op":"test","path":"/metadata/labels/j","value":"9"}]"#]).await;
    assert_eq!(failed.code, 1, "failed json patch test must fail");
    c.ok(&["label", "pod", "web", "x=y"]).await;
    c.ok(&["annotate", "pod", "web", "note=hi"]).await;
    let out: serde_json::Value = serde_json::from_str(&c.ok(&["get", "pod", "web", "-o", "json"]).await).unwrap();
    assert_eq!(out["metadata"]["labels"], serde_json::json!({"app": "web", "m": "1", "j": "2", "x": "y"}));
    assert_eq!(out["metadata"]["annotations"]["note"], "hi");
    let containers = out["spec"]["containers"].as_array().unwrap();
    assert_eq!(containers.len(), 1, "strategic merge kept one container");
    assert_eq!(containers[0]["image"], "nginx:3");
    assert_eq!(containers[0]["ports"][0]["containerPort"], 80, "strategic merge kept ports");
    let relabel = c.kubectl(&["label", "pod", "web", "x=z"]).await;
    assert_eq!(relabel.code, 1, "label without --overwrite refuses");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kubectl_server_side_apply_conflicts_unless_forced() {
    let c = Cluster::start().await;
    let cm = "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: ssa}\ndata: {a: \"1\", b: \"2\"}\n";
    let f = c.file("cm.yaml", cm);
    assert!(c.ok(&["apply", "--server-side", "-f", f.to_str().unwrap()]).await.contains("serverside-applied"));
    let f2 = c.file("cm2.yaml", "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: ssa}\ndata: {a: \"1\"}\n");
    c.ok(&["apply", "--server-side", "-f", f2.to_str().unwrap()]).await;
    let data = c.ok(&["get", "cm", "ssa", "-o", "jsonpath={.data}"]).await;
    assert_eq!(data, r#"{"a":"1"}"#, "field dropped from the applied config is removed");
    c.ok(&["patch", "cm", "ssa", "--type", "merge", "-p", r#"{"data":{"a":"changed"}}"#]).await;
    let conflict = c.kubectl(&["apply", "--server-side", "-f", f2.to_str().unwrap()]).await;
    assert_eq!(conflict.code, 1);
    assert!(conflict.stderr.contains("conflict with \"kubectl-patch\""), "{}", conflict.stderr);
    c.ok(&["apply", "--server-side", "--force-conflicts", "-f", f2.to_str().unwrap()]).await;
    assert_eq!(c.ok(&["get", "cm", "ssa", "-o", "jsonpath={.data.a}"]).await, "1");
    let table = c.ok(&["get", "configmaps"]).await;
    assert_eq!(header(&table), ["NAME", "DATA", "AGE"]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kubectl_crd_custom_object_scale_and_explain() {
    let c = Cluster::start().await;
    let crd = c.file("crd.yaml", CRD);
    c.ok(&["create", "-f", crd.to_str().unwrap()]).await;
    c.ok(&["wait", "--for", "condition=established", "crd/crontabs.stable.example.com"]).await;
    let ct = c.file(
        "ct.yaml",
        "apiVersion: stable.example.com/v1\nkind: CronTab\nmetadata: {name: my}\nspec: {cronSpec: \"*/5 * * * *\", image: busybox}\n",
    );
    assert!(c.ok(&["create", "-f", ct.to_str().unwrap()]).await.contains("crontab.stable.example.com/my created"));
    let table = c.ok(&["get", "ct"]).await;
    assert_eq!(header(&table), ["NAME", "SPEC", "REPLICAS", "AGE"]);
    assert!(table.lines().nth(1).unwrap().contains("*/5 * * * *"), "{table}");
    c.ok(&["scale", "crontab", "my", "--replicas=3"]).await;
    assert_eq!(c.ok(&["get", "crontab", "my", "-o", "jsonpath={.spec.replicas} {.metadata.generation}"]).await, "3 2");
    let explain = c.ok(&["explain", "crontab.spec"]).await;
    assert!(explain.contains("The desired schedule.") && explain.contains("cronSpec") && explain.contains("The cron expression."), "{explain}");
    let bad = c.file("bad.yaml", "apiVersion: stable.example.com/v1\nkind: CronTab\nmetadata: {name: bad}\nspec: {cronSpec: x, replicas: -1}\n");
    let refused = c.kubectl(&["apply", "-f", bad.to_str().unwrap()]).await;
    assert_eq!(refused.code, 1);
    assert!(
        refused.stderr.contains("spec.replicas: Invalid value: -1: spec.replicas in body should be greater than or equal to 0"),
        "{}",
        refused.stderr
    );
    let unknown = c.file("unknown.yaml", "apiVersion: stable.example.com/v1\nkind: CronTab\nmetadata: {name: unk}\nspec: {cronSpec: x, bogus: 1}\n");
    let strict = c.kubectl(&["apply", "-f", unknown.to_str().unwrap()]).await;
    assert_eq!(strict.code, 1, "kubectl validates strictly by default: {}", strict.stdout);
    assert!(strict.stderr.contains("unknown field \"spec.bogus\""), "{}", strict.stderr);
    c.ok(&["delete", "crd", "crontabs.stable.example.com"]).await;
    let gone = c.kubectl(&["get", "crontabs.stable.example.com"]).await;
    assert_eq!(gone.code, 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kubectl_delete_honours_cascade_modes() {
    let c = Cluster::start().await;
    let mut docs = String::new();
    for n in ["bg", "orphan", "fg"] {
        docs.push_str(&format!("---\napiVersion: v1\nkind: ConfigMap\nmetadata: {{name: {n}}}\n"));
    }
    let f = c.file("cms.yaml", &docs);
    c.ok(&["apply", "-f", f.to_str().unwrap()]).await;
    assert!(c.ok(&["delete", "cm", "bg", "--cascade=background"]).await.contains("configmap \"bg\" deleted"));
    c.ok(&["delete", "cm", "orphan", "--cascade=orphan", "--wait=false"]).await;
    c.ok(&["delete", "cm", "fg", "--cascade=foreground", "--wait=false"]).await;
    let left =
        c.ok(&["get", "cm", "-o", "custom-columns=N:.metadata.name,F:.metadata.finalizers,D:.metadata.deletionTimestamp", "--no-headers"]).await;
    let lines: Vec<&str> = left.lines().filter(|l| !l.starts_with("kube-root-ca.crt")).collect();
    assert_eq!(lines.len(), 2, "{left}");
    assert!(lines.iter().any(|l| l.starts_with("fg") && l.contains("[foregroundDeletion]")), "{left}");
    assert!(lines.iter().any(|l| l.starts_with("orphan") && l.contains("[orphan]")), "{left}");
    c.ok(&["patch", "cm", "fg", "--type", "json", "-p", r#"[{"op":"remove","path":"/metadata/finalizers"}]"#]).await;
    let after = c.ok(&["get", "cm", "-o", "name"]).await;
    assert_eq!(after.trim(), "configmap/kube-root-ca.crt\nconfigmap/orphan", "removing the last finalizer deletes");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kubectl_get_prints_builtin_columns() {
    let c = Cluster::start().await;
    let job = "apiVersion: batch/v1\nkind: Job\nmetadata: {name: j1}\nspec:\n  template:\n    spec:\n      restartPolicy: Never\n      containers: [{name: c, image: busybox}]\n";
    let dep = "apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: d1}\nspec:\n  replicas: 2\n  selector: {matchLabels: {app: d}}\n  template:\n    metadata: {labels: {app: d}}\n    spec:\n      containers: [{name: c, image: nginx}]\n";
    let f = c.file("objs.yaml", &format!("{job}---\n{dep}"));
    c.ok(&["apply", "-f", f.to_str().unwrap()]).await;
    assert_eq!(header(&c.ok(&["get", "jobs"]).await), ["NAME", "STATUS", "COMPLETIONS", "DURATION", "AGE"]);
    assert_eq!(header(&c.ok(&["get", "deployments"]).await), ["NAME", "READY", "UP-TO-DATE", "AVAILABLE", "AGE"]);
    c.ok(&["scale", "deployment", "d1", "--replicas=4"]).await;
    assert_eq!(c.ok(&["get", "deploy", "d1", "-o", "jsonpath={.spec.replicas}"]).await, "4");
    let ev = "apiVersion: v1\nkind: Event\nmetadata: {name: e1}\ninvolvedObject: {kind: Job, name: j1, namespace: default}\nreason: Created\nmessage: hello\ntype: Normal\n";
    let f = c.file("ev.yaml", ev);
    c.ok(&["apply", "-f", f.to_str().unwrap()]).await;
    let events = c.ok(&["get", "events"]).await;
    assert_eq!(header(&events), ["LAST", "SEEN", "TYPE", "REASON", "OBJECT", "MESSAGE"]);
    assert!(events.contains("job/j1") && events.contains("hello"), "{events}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kubectl_create_run_and_expose_send_protobuf_that_is_decoded() {
    let c = Cluster::start().await;
    c.ok(&["create", "namespace", "team"]).await;
    c.ok(&["create", "configmap", "plugin", "-n", "team", "--from-literal=a=b"]).await;
    c.ok(&["create", "secret", "generic", "s", "-n", "team", "--from-literal=p=q"]).await;
    c.ok(&["create", "serviceaccount", "bot", "-n", "team"]).await;
    assert_eq!(c.ok(&["get", "cm", "plugin", "-n", "team", "-o", "jsonpath={.data.a}"]).await, "b");
    assert_eq!(c.ok(&["get", "secret", "s", "-n", "team", "-o", "jsonpath={.data.p} {.type}"]).await, "cQ== Opaque");
    assert_eq!(c.ok(&["get", "sa", "-n", "team", "-o", "name"]).await.trim(), "serviceaccount/bot\nserviceaccount/default");
    c.ok(&["create", "deployment", "web", "--image=nginx:1.27", "--replicas=3", "--port=80"]).await;
    let spec: serde_json::Value = serde_json::from_str(&c.ok(&["get", "deploy", "web", "-o", "jsonpath={.spec}"]).await).unwrap();
    assert_eq!(spec["replicas"], 3);
    assert_eq!(spec["selector"]["matchLabels"]["app"], "web");
    assert_eq!(spec["strategy"]["type"], "RollingUpdate");
    assert_eq!(spec["template"]["spec"]["containers"][0]["ports"][0]["containerPort"], 80);
    c.ok(&["create", "job", "hello", "--image=busybox", "--", "echo", "hi"]).await;
    assert_eq!(c.ok(&["get", "job", "hello", "-o", "jsonpath={.spec.template.spec.containers[0].command}"]).await, r#"["echo","hi"]"#);
    c.ok(&["expose", "deployment", "web", "--port=80", "--target-port=8080"]).await;
    assert_eq!(c.ok(&["get", "svc", "web", "-o", "jsonpath={.spec.ports[0].targetPort} {.spec.selector.app}"]).await, "8080 web");
    c.ok(&["run", "p", "--image=busybox", "--env=A=1", "--", "sleep", "10"]).await;
    assert_eq!(c.ok(&["get", "pod", "p", "-o", "jsonpath={.spec.containers[0].env[0].value}"]).await, "1");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kubectl_auth_reports_an_all_powerful_user() {
    let c = Cluster::start().await;
    assert_eq!(c.ok(&["auth", "can-i", "delete", "pods"]).await.trim(), "yes");
    let whoami = c.ok(&["auth", "whoami"]).await;
    assert!(whoami.contains("embedded-admin"), "{whoami}");
    let list = c.ok(&["auth", "can-i", "--list"]).await;
    assert!(list.contains("*.*"), "{list}");
}

impl Out {
    fn refused(&self, what: &str) -> &str {
        assert_ne!(self.code, 0, "{what} was accepted: {}", self.stdout);
        &self.stderr
    }
}

/// A ConfigMap manifest whose `data.big` holds `bytes` bytes of text.
fn configmap_yaml(name: &str, bytes: usize) -> String {
    format!("apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: {name}\ndata:\n  big: {}\n", "x".repeat(bytes))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kubectl_meets_the_configmap_secret_and_label_limits_of_a_real_server() {
    let c = Cluster::start().await;
    let big = c.file("big.txt", &"x".repeat(1_100_000));
    let big = big.to_str().unwrap();
    let out = c.kubectl(&["create", "configmap", "big", &format!("--from-file={big}")]).await;
    let err = out.refused("a 1.1 MB ConfigMap");
    assert!(err.contains(r#"ConfigMap "big" is invalid: []: Too long: must have at most 1048576 bytes"#), "{err}");
    let out = c.kubectl(&["create", "secret", "generic", "big", &format!("--from-file={big}")]).await;
    let err = out.refused("a 1.1 MB Secret");
    assert!(err.contains(r#"Secret "big" is invalid: data: Too long: must have at most 1048576 bytes"#), "{err}");
    // Exactly 1 MiB of data fits.
    let fits = c.file("fits.yaml", &configmap_yaml("fits", 1024 * 1024));
    c.ok(&["create", "-f", fits.to_str().unwrap()]).await;
    assert_eq!(c.ok(&["get", "configmaps", "-o", "name"]).await.lines().filter(|l| l.contains("big")).count(), 0, "nothing refused was stored");

    // Manifests: `kubectl label` checks label values itself before sending.
    let long = "v".repeat(64);
    let labelled = |name: &str, key: &str, value: &str| {
        c.file(&format!("{name}.yaml"), &format!("apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: {name}\n  labels:\n    {key}: {value}\n"))
    };
    let out = c.kubectl(&["create", "-f", labelled("long-value", "app", &long).to_str().unwrap()]).await;
    let err = out.refused("a 64-character label value");
    assert!(
        err.contains(&format!(r#"ConfigMap "long-value" is invalid: metadata.labels: Invalid value: "{long}": must be no more than 63 characters"#)),
        "{err}"
    );
    let out = c.kubectl(&["create", "-f", labelled("long-name", &long, "x").to_str().unwrap()]).await;
    let err = out.refused("a 64-character label name");
    assert!(err.contains(&format!(r#"metadata.labels: Invalid value: "{long}": name part must be no more than 63 characters"#)), "{err}");
    c.ok(&["create", "-f", labelled("at-limit", &"k".repeat(63), &"v".repeat(63)).to_str().unwrap()]).await;
    // (A file: one command-line argument may not exceed 128 KiB.)
    let annotated = c.file(
        "annotated.yaml",
        &format!("apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: annotated\n  annotations:\n    note: {}\n", "n".repeat(256 * 1024)),
    );
    let out = c.kubectl(&["create", "-f", annotated.to_str().unwrap()]).await;
    let err = out.refused("256 KiB of annotations and their keys");
    assert!(err.contains("metadata.annotations: Too long: must have at most 262144 bytes"), "{err}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kubectl_meets_the_request_body_and_etcd_object_limits_of_a_real_server() {
    let c = Cluster::start().await;
    let huge = c.file("huge.yaml", &configmap_yaml("huge", 4 * 1024 * 1024));
    let out = c.kubectl(&["create", "-f", huge.to_str().unwrap()]).await;
    let err = out.refused("a 4 MiB request body");
    assert!(err.contains("Error from server (RequestEntityTooLarge)") && err.contains("Request entity too large: limit is 3145728"), "{err}");

    // Under the body limit, within every field rule, but more than etcd stores (1.5 MiB).
    c.ok(&["apply", "-f", c.file("crd.yaml", CRD).to_str().unwrap()]).await;
    let crontab = format!(
        "apiVersion: stable.example.com/v1\nkind: CronTab\nmetadata:\n  name: huge\nspec:\n  cronSpec: '* * * * *'\n  image: {}\n",
        "i".repeat(2_000_000)
    );
    let crontab = c.file("crontab.yaml", &crontab);
    let crontab = crontab.to_str().unwrap();
    let started = std::time::Instant::now();
    let out = loop {
        let out = c.kubectl(&["create", "-f", crontab]).await;
        // Until the new CRD is in kubectl's discovery, it cannot map the kind.
        if !out.stderr.contains("no matches for kind") || started.elapsed().as_secs() > 30 {
            break out;
        }
        tokio::time::sleep(std::time::Duration::from_millis(200)).await;
    };
    let err = out.refused("a 2 MB custom resource");
    assert!(err.contains("Error from server") && err.contains("etcdserver: request is too large"), "{err}");
    // A dry run never reaches etcd, upstream or here.
    c.ok(&["create", "--dry-run=server", "-f", crontab]).await;
    assert!(c.kubectl(&["get", "crontab", "huge"]).await.code != 0, "the refused object was not stored");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_oversized_body_is_refused_after_the_limit_without_being_read() {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let c = Cluster::start().await;
    let mut s = tokio::net::TcpStream::connect(c.handle.addr()).await.unwrap();
    // Announce 200 MB, send a little over the 3 MiB limit, and wait for the answer: the
    // server answers without waiting for (or holding) the other 196 MB.
    let head =
        "POST /api/v1/namespaces/default/configmaps HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 200000000\r\n\r\n";
    s.write_all(head.as_bytes()).await.unwrap();
    let chunk = vec![b' '; 64 * 1024];
    for _ in 0..(3 * 1024 * 1024 / chunk.len() + 2) {
        if s.write_all(&chunk).await.is_err() {
            break;
        }
    }
    let mut answer = vec![0u8; 4096];
    let n = tokio::time::timeout(std::time::Duration::from_secs(10), s.read(&mut answer)).await.expect("an answer before the body ends").unwrap();
    let answer = String::from_utf8_lossy(&answer[..n]);
    assert!(answer.starts_with("HTTP/1.1 413"), "{answer}");
    assert!(answer.contains(r#""reason":"RequestEntityTooLarge""#) && answer.contains("Request entity too large: limit is 3145728"), "{answer}");
}

/// A self-signed EC certificate and its key (fixture for `kubectl create secret tls`).
const TLS_CRT: &str = "-----BEGIN CERTIFICATE-----
MIIBhDCCASmgAwIBAgIUVGeC2R8gggsEToE0MMciw5/qHMAwCgYIKoZIzj0EAwIw
FjEUMBIGA1UEAwwLZXhhbXBsZS5jb20wIBcNMjYxMTI0MDYxNjAzWhgPMjEyNjEw
MzEwNjE2MDNaMBYxFDASBgNVBAMMC2V4YW1wbGUuY29tMFkwEwYHKoZIzj0CAQYI
KoZIzj0DAQcDQgAEf1vvEU9YYHWBR9GnHh5fkx4tESvxnpgtWIzBR57W27Q4eNvD
W/t+fRUiDpHvNM2vXgoO3pt3yyDVIhXWKgCQlKNTMFEwHQYDVR0OBBYEFOVsLqzt
yn7IMO2q1/jEXEG+BhIzMB8GA1UdIwQYMBaAFOVsLqztyn7IMO2q1/jEXEG+BhIz
MA8GA1UdEwEB/wQFMAMBAf8wCgYIKoZIzj0EAwIDSQAwRgIhANI++XcF/TzUw8eE
ulN1+BpVUAnaxSZSDA77/c6yIICKAiEA8MkQpCa9ZGn0vO5n3fXgC2YYOOOd4q/m
zitAiE/TkDk=
-----END CERTIFICATE-----
";
const TLS_KEY: &str = "-----BEGIN PRIVATE KEY-----
MIGHAgEAMBMGByqGSM49AgEGCCqGSM49AwEHBG0wawIBAQQgs54W0i95tY5KHIkg
C/m/15fCmWMhxgC/UFMhUm9e3oChRANCAAR/W+8RT1hgdYFH0aceHl+THi0RK/Ge
mC1YjMFHntbbtDh428Nb+359FSIOke80za9eCg7em3fLINUiFdYqAJCU
-----END PRIVATE KEY-----
";

/// Whether a value kubectl sends sets nothing: `null`, or objects and lists of only such values
/// (`"status": {"loadBalancer": {}}`).
fn sets_nothing(v: &serde_json::Value) -> bool {
    match v {
        serde_json::Value::Null => true,
        serde_json::Value::Object(m) => m.values().all(sets_nothing),
        serde_json::Value::Array(a) => a.iter().all(sets_nothing),
        _ => false,
    }
}

/// Where `actual` lacks or differs from a value `expected` sets (the server may add fields of
/// its own).
fn unset_fields(expected: &serde_json::Value, actual: &serde_json::Value, path: &str, out: &mut Vec<String>) {
    use serde_json::Value;
    match expected {
        Value::Null => {}
        Value::Object(m) => {
            for (k, v) in m {
                let p = format!("{path}.{k}");
                match actual.get(k) {
                    Some(a) => unset_fields(v, a, &p, out),
                    None if sets_nothing(v) => {}
                    None => out.push(format!("{p} missing (kubectl set {v})")),
                }
            }
        }
        Value::Array(items) => match actual.as_array() {
            Some(a) if a.len() >= items.len() => {
                items.iter().zip(a).enumerate().for_each(|(i, (e, a))| unset_fields(e, a, &format!("{path}[{i}]"), out))
            }
            _ => out.push(format!("{path}: {actual} is not {expected}")),
        },
        scalar if scalar != actual => out.push(format!("{path}: {actual} is not {scalar}")),
        _ => {}
    }
}

impl Cluster {
    /// Runs `kubectl <args>`, then checks that `kubectl get <object>` shows every field of what
    /// `kubectl <args> --dry-run=client -o json` says it meant to send.
    async fn create_and_compare(&self, object: &str, args: &[&str]) -> Result<(), String> {
        // The flags go before a `--` that starts the container's command.
        let split = args.iter().position(|a| *a == "--").unwrap_or(args.len());
        let dry = [&args[..split], &["--dry-run=client", "-o", "json"], &args[split..]].concat();
        let meant = self.kubectl(&dry).await;
        if meant.code != 0 {
            return Err(format!("dry run failed: {}", meant.stderr.trim()));
        }
        let mut meant: serde_json::Value = serde_json::from_str(&meant.stdout).map_err(|e| format!("dry run printed no JSON: {e}"))?;
        // Status is the server's: upstream's create strategies reset what a client sends.
        meant.as_object_mut().map(|o| o.remove("status"));
        let created = self.kubectl(args).await;
        if created.code != 0 {
            return Err(format!("create failed: {}", created.stderr.trim()));
        }
        let stored = self.kubectl(&["get", object, "-o", "json"]).await;
        let stored: serde_json::Value = serde_json::from_str(&stored.stdout).map_err(|_| format!("get {object} failed: {}", stored.stderr.trim()))?;
        let mut unset = vec![];
        unset_fields(&meant, &stored, "", &mut unset);
        if unset.is_empty() { Ok(()) } else { Err(format!("stored {object} lacks what kubectl sent: {unset:?}")) }
    }
}

/// Issue 17: every `kubectl create` subcommand of kubectl 1.32 (protobuf bodies, each kind's
/// own fields), `kubectl create token`, `kubectl autoscale` and `kubectl create job --from`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kubectl_create_every_subcommand_stores_what_kubectl_meant_to_send() {
    let c = Cluster::start().await;
    let (crt, key, file) = (c.file("tls.crt", TLS_CRT), c.file("tls.key", TLS_KEY), c.file("app.ini", "mode=fast\n"));
    let (crt, key) = (format!("--cert={}", crt.display()), format!("--key={}", key.display()));
    let from_file = format!("--from-file=app.ini={}", file.display());
    let cases: Vec<(&str, Vec<&str>)> = vec![
        ("namespace/team", vec!["create", "namespace", "team"]),
        ("serviceaccount/bot", vec!["create", "serviceaccount", "bot"]),
        ("configmap/settings", vec!["create", "configmap", "settings", "--from-literal=a=b", &from_file]),
        ("secret/generic", vec!["create", "secret", "generic", "generic", "--from-literal=p=q", "--type=Opaque"]),
        (
            "secret/registry",
            vec![
                "create",
                "secret",
                "docker-registry",
                "registry",
                "--docker-server=r.example.com",
                "--docker-username=u",
                "--docker-password=p",
                "--docker-email=u@example.com",
            ],
        ),
        ("secret/cert", vec!["create", "secret", "tls", "cert", &crt, &key]),
        ("service/cip", vec!["create", "service", "clusterip", "cip", "--tcp=5678:8080"]),
        ("service/headless", vec!["create", "service", "clusterip", "headless", "--clusterip=None"]),
        ("service/np", vec!["create", "service", "nodeport", "np", "--tcp=5679:8080", "--node-port=30080"]),
        ("service/lb", vec!["create", "service", "loadbalancer", "lb", "--tcp=5680:8080"]),
        ("service/ext", vec!["create", "service", "externalname", "ext", "--external-name=db.example.com"]),
        (
            "clusterrole/reader",
            vec!["create", "clusterrole", "reader", "--verb=get,list,watch", "--resource=pods,deployments.apps", "--resource-name=a"],
        ),
        ("clusterrole/logs", vec!["create", "clusterrole", "logs", "--verb=get", "--non-resource-url=/logs/*"]),
        ("clusterrole/aggregate", vec!["create", "clusterrole", "aggregate", "--aggregation-rule=rbac.example.com/aggregate-to-reader=true"]),
        (
            "clusterrolebinding/readers",
            vec!["create", "clusterrolebinding", "readers", "--clusterrole=reader", "--user=alice", "--group=devs", "--serviceaccount=default:bot"],
        ),
        ("role/pod-reader", vec!["create", "role", "pod-reader", "--verb=get,list", "--resource=pods,pods/log"]),
        ("rolebinding/pod-readers", vec!["create", "rolebinding", "pod-readers", "--role=pod-reader", "--user=bob", "--serviceaccount=default:bot"]),
        ("rolebinding/viewers", vec!["create", "rolebinding", "viewers", "--clusterrole=reader", "--group=devs"]),
        ("deployment/web", vec!["create", "deployment", "web", "--image=nginx:1.27", "--replicas=0", "--port=80"]),
        ("job/once", vec!["create", "job", "once", "--image=busybox", "--", "echo", "hi"]),
        ("cronjob/tick", vec!["create", "cronjob", "tick", "--image=busybox", "--schedule=*/5 * * * *", "--restart=OnFailure", "--", "date"]),
        ("job/from-tick", vec!["create", "job", "from-tick", "--from=cronjob/tick"]),
        (
            "ingress/site",
            vec![
                "create",
                "ingress",
                "site",
                "--class=default",
                "--rule=foo.example.com/bar*=svc1:8080,tls=cert",
                "--default-backend=web:80",
                "--annotation=a=b",
            ],
        ),
        ("poddisruptionbudget/web", vec!["create", "poddisruptionbudget", "web", "--selector=app=web", "--min-available=50%"]),
        ("poddisruptionbudget/web-max", vec!["create", "poddisruptionbudget", "web-max", "--selector=app=web", "--max-unavailable=1"]),
        ("priorityclass/high", vec!["create", "priorityclass", "high", "--value=1000", "--description=high priority", "--preemption-policy=Never"]),
        ("priorityclass/zero", vec!["create", "priorityclass", "zero", "--value=0"]),
        ("resourcequota/compute", vec!["create", "quota", "compute", "--hard=cpu=1,memory=1G,pods=2", "--scopes=BestEffort"]),
        // kubectl sends autoscaling/v1; read it back in that version (v2 is preferred).
        ("horizontalpodautoscalers.v1.autoscaling/web", vec!["autoscale", "deployment", "web", "--min=1", "--max=3", "--cpu-percent=80"]),
    ];
    let mut failures = vec![];
    for (object, args) in &cases {
        if let Err(e) = c.create_and_compare(object, args).await {
            failures.push(format!("kubectl {}: {e}", args.join(" ")));
        }
    }
    let token = c.kubectl(&["create", "token", "bot", "--duration=10m"]).await;
    if token.code != 0 || token.stdout.trim().is_empty() {
        failures.push(format!("kubectl create token bot: {}", token.stderr.trim()));
    }
    assert!(failures.is_empty(), "{} of {} commands failed:\n{}", failures.len(), cases.len() + 1, failures.join("\n"));
}
