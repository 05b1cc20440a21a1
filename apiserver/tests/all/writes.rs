//! Write paths as upstream's: a Secret's `stringData` merged into `data` by every kind of write,
//! and field validation (Ignore, Warn, Strict) with upstream's wording, through the real kubectl
//! and raw requests. The same kubectl scenarios run on the real control plane in
//! `tests/real-cluster` (`writes.rs`).

use crate::common::kubectl::Cluster;
use apiserver::ApiServer;
use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use serde_json::{Value, json};
use tower::ServiceExt;

/// One request in-process: status, `Warning` header values and the JSON body.
async fn send(server: &ApiServer, method: &str, uri: &str, content_type: &str, body: &str) -> (u16, Vec<String>, Value) {
    let req =
        http::Request::builder().method(method).uri(uri).header("content-type", content_type).body(Full::new(Bytes::from(body.to_string()))).unwrap();
    let resp = server.service().oneshot(req).await.unwrap();
    let status = resp.status().as_u16();
    let warnings = resp.headers().get_all("warning").iter().map(|v| v.to_str().unwrap().to_string()).collect();
    let bytes = resp.into_body().collect().await.unwrap().to_bytes();
    (status, warnings, serde_json::from_slice(&bytes).unwrap_or(Value::Null))
}

const SECRETS: &str = "/api/v1/namespaces/default/secrets";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kubectl_patch_of_string_data_lands_in_data_as_base64() {
    let c = Cluster::start().await;
    c.ok(&["create", "secret", "generic", "s", "--from-literal=a=1"]).await;
    c.ok(&["patch", "secret", "s", "--type=merge", "-p", r#"{"stringData":{"k":"v"}}"#]).await;
    assert_eq!(c.ok(&["get", "secret", "s", "-o", "jsonpath={.data.k}"]).await, "dg==");
    let stored = c.json(&["get", "secret", "s"]).await;
    assert_eq!(stored.get("stringData"), None, "stringData is never stored: {stored}");
    assert_eq!(stored["data"], json!({"a": "MQ==", "k": "dg=="}));
    c.ok(&["patch", "secret", "s", "--type=strategic", "-p", r#"{"stringData":{"k":"w"}}"#]).await;
    assert_eq!(c.ok(&["get", "secret", "s", "-o", "jsonpath={.data.k}"]).await, "dw==");
    c.ok(&["patch", "secret", "s", "--type=json", "-p", r#"[{"op":"add","path":"/stringData","value":{"j":"x"}}]"#]).await;
    assert_eq!(c.ok(&["get", "secret", "s", "-o", "jsonpath={.data.j}"]).await, "eA==");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kubectl_apply_and_replace_of_string_data_win_over_data() {
    let c = Cluster::start().await;
    let manifest = "apiVersion: v1\nkind: Secret\nmetadata: {name: db}\ndata: {password: b2xk, user: YQ==}\nstringData: {password: new}\n";
    c.apply("secret.yaml", manifest).await;
    let stored = c.json(&["get", "secret", "db"]).await;
    assert_eq!(stored["data"], json!({"password": "bmV3", "user": "YQ=="}), "stringData wins for the same key: {stored}");
    assert_eq!(stored.get("stringData"), None);
    let replaced = c.file("replace.yaml", "apiVersion: v1\nkind: Secret\nmetadata: {name: db}\nstringData: {password: again}\n");
    c.ok(&["replace", "-f", replaced.to_str().unwrap()]).await;
    assert_eq!(c.json(&["get", "secret", "db"]).await["data"], json!({"password": "YWdhaW4="}));
    let applied = c.file("ssa.yaml", "apiVersion: v1\nkind: Secret\nmetadata: {name: ssa}\nstringData: {token: t}\n");
    c.ok(&["apply", "--server-side", "-f", applied.to_str().unwrap()]).await;
    let stored = c.json(&["get", "secret", "ssa"]).await;
    assert_eq!(stored["data"], json!({"token": "dA=="}), "{stored}");
    assert_eq!(stored.get("stringData"), None);
}

const POD_WITH_UNKNOWN_FIELD: &str = "apiVersion: v1
kind: Pod
metadata: {name: typo}
spec:
  foo: 1
  containers: [{name: app, image: nginx}]
";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kubectl_create_validate_warn_warns_and_strict_refuses_an_unknown_field() {
    let c = Cluster::start().await;
    let f = c.file("pod.yaml", POD_WITH_UNKNOWN_FIELD);
    let refused = c.kubectl(&["create", "--validate=strict", "-f", f.to_str().unwrap()]).await;
    assert_eq!(refused.code, 1, "{}", refused.text());
    assert!(
        refused.stderr.contains(r#"Pod in version "v1" cannot be handled as a Pod: strict decoding error: unknown field "spec.foo""#),
        "{}",
        refused.stderr
    );
    let warned = c.kubectl(&["create", "--validate=warn", "-f", f.to_str().unwrap()]).await;
    assert!(warned.ok(), "{}", warned.text());
    assert!(warned.stderr.contains(r#"Warning: unknown field "spec.foo""#), "{}", warned.stderr);
    let other = c.file("other.yaml", &POD_WITH_UNKNOWN_FIELD.replace("name: typo", "name: quiet"));
    let ignored = c.kubectl(&["create", "--validate=false", "-f", other.to_str().unwrap()]).await;
    assert!(ignored.ok() && !ignored.stderr.contains("Warning"), "{}", ignored.text());
}

#[tokio::test]
async fn field_validation_warns_by_default_names_duplicates_and_words_patch_refusals_as_upstream() {
    let s = ApiServer::new();
    let cms = "/api/v1/namespaces/default/configmaps";
    let body = r#"{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"a","name":"a","bogus":1},"data":{"k":"v"}}"#;
    let (code, warnings, created) = send(&s, "POST", cms, "application/json", body).await;
    assert_eq!(code, 201, "{created}");
    assert_eq!(warnings, [r#"299 - "duplicate field \"metadata.name\"""#, r#"299 - "unknown field \"metadata.bogus\"""#]);
    let (code, warnings, _) = send(&s, "PUT", &format!("{cms}/a?fieldValidation=Ignore"), "application/json", body).await;
    assert_eq!((code, warnings.len()), (200, 0));
    let (code, _, refused) = send(&s, "POST", &format!("{cms}?fieldValidation=Strict"), "application/json", &body.replace("\"a\"", "\"b\"")).await;
    assert_eq!(code, 400);
    assert_eq!(
        refused["message"],
        r#"ConfigMap in version "v1" cannot be handled as a ConfigMap: strict decoding error: duplicate field "metadata.name", unknown field "metadata.bogus""#
    );
    let patch = r#"{"data":{"x":"y"},"spec":{"foo":1}}"#;
    let (code, _, refused) = send(&s, "PATCH", &format!("{cms}/a?fieldValidation=Strict"), "application/merge-patch+json", patch).await;
    assert_eq!(code, 422, "{refused}");
    let message = refused["message"].as_str().unwrap();
    assert!(message.starts_with(r#" "" is invalid: patch: Invalid value: "{\"apiVersion\":\"v1\",\"data\":{\"k\":\"v\",\"x\":\"y\"},\"kind\":\"ConfigMap\",\"metadata\":{\"name\":\"a\","#), "{message}");
    assert!(message.ends_with(r#",\"spec\":{\"foo\":1}}": strict decoding error: unknown field "spec""#), "{message}");
    assert_eq!(
        refused["details"],
        json!({"causes": [{"reason": "FieldValueInvalid", "message": message.trim_start_matches(r#" "" is invalid: patch: "#), "field": "patch"}]})
    );
    let smp = r#"{"spec":{"foo":1}}"#;
    let (code, _, refused) = send(&s, "PATCH", &format!("{cms}/a?fieldValidation=Strict"), "application/strategic-merge-patch+json", smp).await;
    assert_eq!(code, 422);
    assert_eq!(refused["message"], r#" "" is invalid: patch: Invalid value: "map[spec:map[foo:1]]": strict decoding error: unknown field "spec""#);
    let (code, warnings, _) = send(&s, "PATCH", &format!("{cms}/a"), "application/merge-patch+json", patch).await;
    assert_eq!((code, warnings), (200, vec![r#"299 - "unknown field \"spec\"""#.to_string()]));
    let (code, warnings, _) = send(&s, "PATCH", &format!("{cms}/a"), "application/merge-patch+json", r#"{"data":{"x":"1","x":"2"}}"#).await;
    assert_eq!((code, warnings), (200, vec![r#"299 - "duplicate field \"data.x\"""#.to_string()]));
    let (code, _, refused) = send(&s, "POST", &format!("{cms}?fieldValidation=Loose"), "application/json", body).await;
    assert_eq!(code, 422, "{refused}");
    assert_eq!(
        refused["message"],
        r#"CreateOptions.meta.k8s.io "" is invalid: fieldValidation: Unsupported value: "Loose": supported values: "", "Ignore", "Strict", "Warn""#
    );
}

#[tokio::test]
async fn secret_string_data_is_merged_on_create_and_update() {
    let s = ApiServer::new();
    let secret =
        json!({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "x"}, "data": {"a": "b2xk"}, "stringData": {"a": "new", "b": "2"}});
    let (code, _, created) = send(&s, "POST", SECRETS, "application/json", &secret.to_string()).await;
    assert_eq!(code, 201, "{created}");
    assert_eq!(created["data"], json!({"a": "bmV3", "b": "Mg=="}));
    assert_eq!(created.get("stringData"), None);
    let mut update = created.clone();
    update["stringData"] = json!({"c": "3"});
    let (code, _, updated) = send(&s, "PUT", &format!("{SECRETS}/x"), "application/json", &update.to_string()).await;
    assert_eq!(code, 200, "{updated}");
    assert_eq!(updated["data"], json!({"a": "bmV3", "b": "Mg==", "c": "Mw=="}));
    let wrong = json!({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "y"}, "stringData": {"a": 1}});
    let (code, _, refused) = send(&s, "POST", SECRETS, "application/json", &wrong.to_string()).await;
    assert_eq!(code, 400);
    assert_eq!(
        refused["message"],
        r#"Secret in version "v1" cannot be handled as a Secret: json: cannot unmarshal number into Go struct field Secret.stringData of type string"#
    );
}

/// The message of a 422 for `body` sent with `method` to `uri`.
async fn refused(s: &ApiServer, method: &str, uri: &str, content_type: &str, body: Value) -> String {
    let (code, _, status) = send(s, method, uri, content_type, &body.to_string()).await;
    assert_eq!(code, 422, "{status}");
    status["message"].as_str().unwrap().to_string()
}

#[tokio::test]
async fn built_ins_are_refused_for_immutable_fields_enum_values_and_a_missing_selector_in_upstreams_words() {
    let s = ApiServer::new();
    let classes = "/apis/storage.k8s.io/v1/storageclasses";
    let (code, _, _) =
        send(&s, "POST", classes, "application/json", r#"{"metadata":{"name":"sc"},"provisioner":"a.io/x","parameters":{"k":"v"}}"#).await;
    assert_eq!(code, 201);
    let change = json!({"provisioner": "b.io/y", "parameters": {"k": "w"}, "reclaimPolicy": "Retain", "volumeBindingMode": "WaitForFirstConsumer"});
    assert_eq!(
        refused(&s, "PATCH", &format!("{classes}/sc"), "application/merge-patch+json", change).await,
        r#"StorageClass.storage.k8s.io "sc" is invalid: [parameters: Invalid value: {"k":"w"}: field is immutable, provisioner: Invalid value: "b.io/y": field is immutable, reclaimPolicy: Invalid value: "Retain": field is immutable, volumeBindingMode: Invalid value: "WaitForFirstConsumer": field is immutable]"#
    );
    let pod = json!({"metadata": {"name": "p"}, "spec": {"restartPolicy": "Sometimes", "containers": [
        {"name": "a", "image": "x", "imagePullPolicy": "Maybe", "ports": [{"containerPort": 80, "protocol": "tcp"}]}]}});
    assert_eq!(
        refused(&s, "POST", "/api/v1/namespaces/default/pods", "application/json", pod).await,
        r#"Pod "p" is invalid: [spec.containers[0].ports[0].protocol: Unsupported value: "tcp": supported values: "SCTP", "TCP", "UDP", spec.containers[0].imagePullPolicy: Unsupported value: "Maybe": supported values: "Always", "IfNotPresent", "Never", spec.restartPolicy: Unsupported value: "Sometimes": supported values: "Always", "OnFailure", "Never"]"#
    );
    let deployment = json!({"metadata": {"name": "d"}, "spec": {"selector": {"matchLabels": {"a": "b"}}, "template": {"metadata": {"labels": {"a": "b"}},
        "spec": {"restartPolicy": "Never", "containers": [{"name": "a", "image": "x", "ports": [{"containerPort": 80, "protocol": "udpx"}]}]}}}});
    assert_eq!(
        refused(&s, "POST", "/apis/apps/v1/namespaces/default/deployments", "application/json", deployment).await,
        r#"Deployment.apps "d" is invalid: [spec.template.spec.containers[0].ports[0].protocol: Unsupported value: "udpx": supported values: "SCTP", "TCP", "UDP", spec.template.spec.restartPolicy: Unsupported value: "Never": supported values: "Always"]"#
    );
    let rc = json!({"metadata": {"name": "rc"}, "spec": {"replicas": 1, "template": {"spec": {"containers": [{"name": "a", "image": "x"}]}}}});
    assert_eq!(
        refused(&s, "POST", "/api/v1/namespaces/default/replicationcontrollers", "application/json", rc).await,
        r#"ReplicationController "rc" is invalid: spec.selector: Required value"#
    );
    let services = "/api/v1/namespaces/default/services";
    let weird = json!({"metadata": {"name": "s"}, "spec": {"type": "Weird", "ports": [{"port": 80}]}});
    assert_eq!(
        refused(&s, "POST", services, "application/json", weird).await,
        r#"Service "s" is invalid: spec.type: Unsupported value: "Weird": supported values: "ClusterIP", "ExternalName", "LoadBalancer", "NodePort""#
    );
    let (code, _, _) = send(&s, "POST", services, "application/json", r#"{"metadata":{"name":"s2"},"spec":{"ports":[{"port":80}]}}"#).await;
    assert_eq!(code, 201);
    let moved = json!({"spec": {"clusterIP": "10.96.0.77", "clusterIPs": ["10.96.0.77"]}});
    assert_eq!(
        refused(&s, "PATCH", &format!("{services}/s2"), "application/merge-patch+json", moved).await,
        r#"Service "s2" is invalid: spec.clusterIPs[0]: Invalid value: ["10.96.0.77"]: may not change once set"#
    );
}

#[tokio::test]
async fn a_status_patch_of_metadata_changes_it_where_upstreams_status_strategy_lets_it() {
    let s = ApiServer::new();
    let template = json!({"metadata": {"labels": {"a": "b"}}, "spec": {"containers": [{"name": "a", "image": "x"}]}});
    let workload = |name: &str| json!({"metadata": {"name": name, "labels": {"o": "1"}}, "spec": {"selector": {"matchLabels": {"a": "b"}}, "template": template}});
    let metadata_only = r#"{"metadata":{"labels":{"x":"y"},"annotations":{"an":"1"},"ownerReferences":[{"apiVersion":"v1","kind":"ConfigMap","name":"o","uid":"u1"}]}}"#;
    let cases = [
        ("/apis/apps/v1/namespaces/default/replicasets", workload("rs"), json!({"o": "1", "x": "y"}), true),
        ("/apis/apps/v1/namespaces/default/deployments", workload("d"), json!({"o": "1"}), true),
        (
            "/api/v1/namespaces/default/pods",
            json!({"metadata": {"name": "p", "labels": {"o": "1"}}, "spec": template["spec"]}),
            json!({"o": "1", "x": "y"}),
            false,
        ),
    ];
    for (collection, body, labels, owned) in cases {
        let name = body["metadata"]["name"].as_str().unwrap().to_string();
        let (code, _, created) = send(&s, "POST", collection, "application/json", &body.to_string()).await;
        assert_eq!(code, 201, "{created}");
        let (code, _, patched) = send(&s, "PATCH", &format!("{collection}/{name}/status"), "application/merge-patch+json", metadata_only).await;
        assert_eq!(code, 200, "{patched}");
        assert_eq!(patched["metadata"]["labels"], labels, "{collection}");
        assert_eq!(patched["metadata"]["annotations"], json!({"an": "1"}), "{collection}");
        assert_eq!(patched["metadata"]["ownerReferences"].is_array(), owned, "{collection}");
    }
}

#[tokio::test(start_paused = true)]
async fn a_list_from_a_resource_version_not_reached_waits_for_it_then_answers_504_as_upstream() {
    let s = ApiServer::new();
    let cms = "/api/v1/namespaces/default/configmaps";
    let (_, _, list) = send(&s, "GET", cms, "application/json", "").await;
    let current: u64 = list["metadata"]["resourceVersion"].as_str().unwrap().parse().unwrap();
    let (code, _, status) = send(&s, "GET", &format!("{cms}?resourceVersion={}", current + 1000), "application/json", "").await;
    assert_eq!(code, 504, "{status}");
    assert_eq!(status["message"], format!("Timeout: Too large resource version: {}, current: {current}", current + 1000));
    assert_eq!(
        status["details"],
        json!({"causes": [{"reason": "ResourceVersionTooLarge", "message": "Too large resource version"}], "retryAfterSeconds": 1})
    );
    // A write landing while the list waits lets it through.
    let wanted = format!("{cms}?resourceVersion={}&resourceVersionMatch=NotOlderThan", current + 1);
    let (waiting, write) = tokio::join!(send(&s, "GET", &wanted, "application/json", ""), async {
        tokio::time::sleep(std::time::Duration::from_secs(1)).await;
        send(&s, "POST", cms, "application/json", r#"{"metadata":{"name":"late"}}"#).await
    });
    assert_eq!(write.0, 201);
    assert_eq!(waiting.0, 200, "{}", waiting.2);
    assert!(waiting.2["items"].as_array().unwrap().iter().any(|c| c["metadata"]["name"] == "late"), "{}", waiting.2);
}
