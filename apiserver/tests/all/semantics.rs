//! Table tests of API semantics through the in-process service (raw HTTP requests).

use crate::common;

use apiserver::{ApiServer, Cause, Denial};
use common::*;
use serde_json::{Value, json};

const CMS: &str = "/api/v1/namespaces/default/configmaps";
const CTS: &str = "/apis/stable.example.com/v1/namespaces/default/crontabs";

async fn with_crd() -> ApiServer {
    let s = ApiServer::new();
    let (code, body) = post(&s, "/apis/apiextensions.k8s.io/v1/customresourcedefinitions", crontab_crd()).await;
    assert_eq!(code, 201, "{body}");
    s
}

fn cm(name: &str) -> Value {
    json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name}, "data": {"k": "v"}})
}

fn ct(name: &str, replicas: i64) -> Value {
    json!({"apiVersion": "stable.example.com/v1", "kind": "CronTab", "metadata": {"name": name}, "spec": {"cronSpec": "* * * * *", "replicas": replicas}})
}

#[tokio::test]
async fn stale_resource_version_is_a_conflict() {
    let s = ApiServer::new();
    let (_, created) = post(&s, CMS, cm("a")).await;
    let mut v1 = created.clone();
    v1["data"]["k"] = json!("v1");
    let (code, updated) = put(&s, &format!("{CMS}/a"), v1.clone()).await;
    assert_eq!(code, 200);
    assert_ne!(updated["metadata"]["resourceVersion"], created["metadata"]["resourceVersion"]);
    let (code, status) = put(&s, &format!("{CMS}/a"), v1).await;
    assert_eq!(code, 409);
    assert_eq!(status["reason"], "Conflict");
    assert_eq!(
        status["message"],
        "Operation cannot be fulfilled on configmaps \"a\": the object has been modified; please apply your changes to the latest version and try again"
    );
    // A patch carrying a stale resourceVersion conflicts too.
    let stale = json!({"metadata": {"resourceVersion": created["metadata"]["resourceVersion"]}, "data": {"k": "x"}});
    assert_eq!(patch(&s, &format!("{CMS}/a"), "application/merge-patch+json", stale).await.0, 409);
}

#[tokio::test]
async fn errors_are_status_objects_with_upstream_codes() {
    let s = with_crd().await;
    post(&s, CMS, cm("a")).await;
    let cases: Vec<(u16, &str, (u16, Value))> = vec![
        (404, "NotFound", get(&s, &format!("{CMS}/missing")).await),
        (409, "AlreadyExists", post(&s, CMS, cm("a")).await),
        (404, "NotFound", post(&s, "/api/v1/namespaces/nope/configmaps", cm("b")).await),
        (422, "Invalid", post(&s, CTS, ct("bad", -1)).await),
        (415, "UnsupportedMediaType", patch(&s, &format!("{CTS}/x"), "application/strategic-merge-patch+json", json!({})).await),
        (415, "UnsupportedMediaType", patch(&s, &format!("{CMS}/a"), "text/plain", json!({})).await),
        (400, "BadRequest", get(&s, &format!("{CMS}?labelSelector=a%20in%20b")).await),
        (405, "MethodNotAllowed", call(&s, "POST", &format!("{CMS}/a"), "application/json", Some(cm("a"))).await),
        (404, "NotFound", get(&s, "/apis/nope.example.com/v1/things").await),
        (
            422,
            "Invalid",
            patch(&s, &format!("{CMS}/a"), "application/json-patch+json", json!([{"op": "test", "path": "/data/k", "value": "no"}])).await,
        ),
        (400, "BadRequest", post(&s, CMS, json!({"apiVersion": "apps/v1", "kind": "ConfigMap", "metadata": {"name": "z"}})).await),
    ];
    for (i, (code, reason, (got, body))) in cases.into_iter().enumerate() {
        assert_eq!(got, code, "case {i}: {body}");
        assert_eq!(body["kind"], "Status", "case {i}");
        assert_eq!(body["apiVersion"], "v1", "case {i}");
        assert_eq!(body["status"], "Failure", "case {i}");
        assert_eq!(body["reason"], reason, "case {i}: {body}");
        assert_eq!(body["code"], code, "case {i}");
    }
    let (_, missing_ns) = post(&s, "/api/v1/namespaces/nope/configmaps", cm("b")).await;
    assert_eq!(missing_ns["message"], "namespaces \"nope\" not found");
    let (_, invalid) = post(&s, CTS, ct("bad", -1)).await;
    // The scale subresource's own check first (named by its specReplicasPath), then the schema's.
    assert_eq!(invalid["details"]["causes"][0]["field"], ".spec.replicas");
    assert_eq!(invalid["details"]["causes"][1]["field"], "spec.replicas");
    assert_eq!(invalid["details"]["kind"], "CronTab");
    assert_eq!(invalid["details"]["group"], "stable.example.com");
}

#[tokio::test]
async fn generation_bumps_only_on_spec_changes() {
    let s = with_crd().await;
    let (_, c) = post(&s, CTS, ct("g", 1)).await;
    assert_eq!(c["metadata"]["generation"], 1);
    let steps: Vec<(&str, Value, i64)> = vec![
        ("label change", json!({"metadata": {"labels": {"a": "b"}}}), 1),
        ("spec change", json!({"spec": {"replicas": 2}}), 2),
        ("status via main resource is ignored", json!({"status": {"replicas": 9}}), 2),
        ("same spec again", json!({"spec": {"replicas": 2}}), 2),
    ];
    for (what, p, want) in steps {
        let (code, o) = patch(&s, &format!("{CTS}/g"), "application/merge-patch+json", p).await;
        assert_eq!(code, 200, "{what}: {o}");
        assert_eq!(o["metadata"]["generation"], want, "{what}");
    }
    let (_, o) = get(&s, &format!("{CTS}/g")).await;
    assert!(o.get("status").is_none(), "main resource writes do not touch status");
}

#[tokio::test]
async fn status_subresource_changes_only_status() {
    let s = with_crd().await;
    post(&s, CTS, ct("st", 1)).await;
    let (code, o) = patch(
        &s,
        &format!("{CTS}/st/status"),
        "application/merge-patch+json",
        json!({"status": {"replicas": 4}, "spec": {"replicas": 7}, "metadata": {"labels": {"x": "y"}}}),
    )
    .await;
    assert_eq!(code, 200, "{o}");
    assert_eq!(o["status"]["replicas"], 4);
    assert_eq!(o["spec"]["replicas"], 1, "spec untouched by /status");
    assert!(o["metadata"].get("labels").is_none(), "metadata untouched by /status");
    assert_eq!(o["metadata"]["generation"], 1);
    let (code, scale) = get(&s, &format!("{CTS}/st/scale")).await;
    assert_eq!(code, 200);
    assert_eq!(scale["kind"], "Scale");
    assert_eq!(scale["apiVersion"], "autoscaling/v1");
    assert_eq!(scale["spec"]["replicas"], 1);
    assert_eq!(scale["status"]["replicas"], 4);
    let (code, scaled) = patch(&s, &format!("{CTS}/st/scale"), "application/merge-patch+json", json!({"spec": {"replicas": 5}})).await;
    assert_eq!(code, 200, "{scaled}");
    assert_eq!(scaled["spec"]["replicas"], 5);
    let (_, o) = get(&s, &format!("{CTS}/st")).await;
    assert_eq!(o["spec"]["replicas"], 5);
    assert_eq!(o["metadata"]["generation"], 2);
}

#[tokio::test]
async fn finalizers_hold_deletion_until_removed() {
    let s = ApiServer::new();
    let mut o = cm("f");
    o["metadata"]["finalizers"] = json!(["example.com/hold"]);
    post(&s, CMS, o).await;
    let (code, pending) = delete(&s, &format!("{CMS}/f"), None).await;
    assert_eq!(code, 200);
    assert!(pending["metadata"]["deletionTimestamp"].is_string());
    // Still readable, and no new finalizers may be added.
    assert_eq!(get(&s, &format!("{CMS}/f")).await.0, 200);
    let (code, _) =
        patch(&s, &format!("{CMS}/f"), "application/merge-patch+json", json!({"metadata": {"finalizers": ["example.com/hold", "new"]}})).await;
    assert_eq!(code, 422);
    let (code, _) = patch(&s, &format!("{CMS}/f"), "application/merge-patch+json", json!({"metadata": {"finalizers": null}})).await;
    assert_eq!(code, 200);
    assert_eq!(get(&s, &format!("{CMS}/f")).await.0, 404);
}

#[tokio::test]
async fn delete_preconditions_and_propagation_policies() {
    let s = ApiServer::new();
    for n in ["a", "b", "c"] {
        post(&s, CMS, cm(n)).await;
    }
    let (code, body) = delete(&s, &format!("{CMS}/a"), Some(json!({"preconditions": {"uid": "nope"}}))).await;
    assert_eq!(code, 409, "{body}");
    let uid = get(&s, &format!("{CMS}/a")).await.1["metadata"]["uid"].as_str().unwrap().to_string();
    assert_eq!(
        body["message"],
        format!(
            "Operation cannot be fulfilled on ConfigMap \"a\": the UID in the precondition (nope) does not match the UID in record ({uid}). The object might have been deleted and then recreated"
        )
    );
    assert_eq!(body["details"], json!({"kind": "ConfigMap", "name": "a"}));
    let (code, body) = delete(&s, &format!("{CMS}/a"), Some(json!({"propagationPolicy": "Background"}))).await;
    assert_eq!(code, 200);
    assert_eq!(body["kind"], "Status");
    assert_eq!(body["status"], "Success");
    let (code, body) = delete(&s, &format!("{CMS}/b"), Some(json!({"propagationPolicy": "Foreground"}))).await;
    assert_eq!(code, 200);
    assert_eq!(body["metadata"]["finalizers"], json!(["foregroundDeletion"]));
    let (code, body) = delete(&s, &format!("{CMS}/c"), Some(json!({"propagationPolicy": "Orphan"}))).await;
    assert_eq!(code, 200, "a pending deletion answers 200, as upstream");
    assert_eq!(body["metadata"]["finalizers"], json!(["orphan"]));
    let mut held = cm("d");
    held["metadata"]["finalizers"] = json!(["example.com/hold"]);
    post(&s, CMS, held).await;
    let (code, body) = delete(&s, &format!("{CMS}/d"), Some(json!({"orphanDependents": false}))).await;
    assert_eq!(code, 202, "only the deprecated orphanDependents=false makes it 202: {body}");
}

#[tokio::test]
async fn generate_name_gets_an_upstream_style_suffix() {
    let s = ApiServer::new();
    let (code, o) = post(&s, CMS, json!({"metadata": {"generateName": "job-"}})).await;
    assert_eq!(code, 201);
    let name = o["metadata"]["name"].as_str().unwrap();
    assert_eq!(name.len(), 9);
    assert!(name[4..].chars().all(|c| "bcdfghjklmnpqrstvwxz2456789".contains(c)), "{name}");
    let (code, body) = post(&s, CMS, json!({"metadata": {}})).await;
    assert_eq!(code, 422, "{body}");
}

#[tokio::test]
async fn list_pages_with_limit_and_continue_and_selects_fields() {
    let s = ApiServer::new();
    for i in 0..5 {
        let mut o = cm(&format!("c{i}"));
        o["metadata"]["labels"] = json!({"n": i.to_string()});
        post(&s, CMS, o).await;
    }
    let (_, page1) = get(&s, &format!("{CMS}?limit=2")).await;
    assert_eq!(page1["kind"], "ConfigMapList");
    assert_eq!(page1["items"].as_array().unwrap().len(), 2);
    assert_eq!(page1["metadata"]["remainingItemCount"], 4, "5 created and kube-root-ca.crt");
    let rv = page1["metadata"]["resourceVersion"].clone();
    post(&s, CMS, cm("late")).await;
    let token = page1["metadata"]["continue"].as_str().unwrap().to_string();
    let (_, page2) = get(&s, &format!("{CMS}?limit=10&continue={token}")).await;
    assert_eq!(page2["items"].as_array().unwrap().len(), 4, "continue serves the first page's snapshot");
    assert_eq!(page2["metadata"]["resourceVersion"], rv);
    assert!(page2["metadata"].get("continue").is_none());
    let (_, sel) = get(&s, &format!("{CMS}?fieldSelector=metadata.name%3Dc3")).await;
    assert_eq!(sel["items"].as_array().unwrap().len(), 1);
    let (_, sel) = get(&s, &format!("{CMS}?labelSelector=n%20notin%20(0,1),n")).await;
    assert_eq!(sel["items"].as_array().unwrap().len(), 3);
    let (code, _) = get(&s, &format!("{CMS}?fieldSelector=spec.bogus%3Dx")).await;
    assert_eq!(code, 400);
    let (_, all) = get(&s, "/api/v1/configmaps").await;
    assert_eq!(all["items"].as_array().unwrap().len(), 10, "6 created and a kube-root-ca.crt in each of 4 namespaces");
}

#[tokio::test]
async fn builtin_kinds_are_validated_as_upstream() {
    let s = ApiServer::new();
    let jobs = "/apis/batch/v1/namespaces/default/jobs";
    let job = json!({"metadata": {"name": "j"}, "spec": {"template": {"spec": {"restartPolicy": "Always", "containers": [{"name": "c", "image": "busybox"}]}}}});
    let (code, st) = post(&s, jobs, job.clone()).await;
    assert_eq!(code, 422);
    assert_eq!(
        st["message"],
        "Job.batch \"j\" is invalid: spec.template.spec.restartPolicy: Unsupported value: \"Always\": supported values: \"OnFailure\", \"Never\""
    );
    let mut ok = job.clone();
    ok["spec"]["template"]["spec"]["restartPolicy"] = json!("Never");
    let (code, created) = post(&s, jobs, ok).await;
    assert_eq!(code, 201, "{created}");
    let uid = created["metadata"]["uid"].as_str().unwrap();
    assert_eq!(created["spec"]["selector"]["matchLabels"]["batch.kubernetes.io/controller-uid"], uid);
    let (code, st) = patch(
        &s,
        &format!("{jobs}/j"),
        "application/merge-patch+json",
        json!({"spec": {"template": {"spec": {"containers": [{"name": "c", "image": "other"}]}}}}),
    )
    .await;
    assert_eq!(code, 422);
    assert_eq!(st["details"]["causes"][0]["field"], "spec.template");
    let (code, _) = post(&s, "/api/v1/namespaces/default/pods", json!({"metadata": {"name": "empty"}, "spec": {}})).await;
    assert_eq!(code, 422);
    let (_, _) = post(&s, CMS, json!({"metadata": {"name": "frozen"}, "data": {"a": "1"}, "immutable": true})).await;
    let (code, st) = patch(&s, &format!("{CMS}/frozen"), "application/merge-patch+json", json!({"data": {"a": "2"}})).await;
    assert_eq!(code, 422, "{st}");
}

#[tokio::test]
async fn dry_run_does_not_persist() {
    let s = ApiServer::new();
    let (code, o) = post(&s, &format!("{CMS}?dryRun=All"), cm("dry")).await;
    assert_eq!(code, 201);
    assert_eq!(o["metadata"]["name"], "dry");
    assert_eq!(get(&s, &format!("{CMS}/dry")).await.0, 404);
}

#[tokio::test]
async fn strategic_merge_patch_merges_containers_by_name() {
    let s = ApiServer::new();
    let pod = json!({"metadata": {"name": "p"}, "spec": {"containers": [{"name": "a", "image": "x:1"}, {"name": "b", "image": "y:1"}]}});
    post(&s, "/api/v1/namespaces/default/pods", pod).await;
    let (code, o) = patch(
        &s,
        "/api/v1/namespaces/default/pods/p",
        "application/strategic-merge-patch+json",
        json!({"spec": {"containers": [{"name": "b", "image": "y:2"}]}}),
    )
    .await;
    assert_eq!(code, 200);
    let images = |o: &Value| -> Vec<String> {
        o["spec"]["containers"]
            .as_array()
            .unwrap()
            .iter()
            .map(|c| format!("{}={}", c["name"].as_str().unwrap(), c["image"].as_str().unwrap()))
            .collect()
    };
    assert_eq!(images(&o), ["a=x:1", "b=y:2"]);
    assert_eq!(o["spec"]["containers"][0]["imagePullPolicy"], "IfNotPresent", "built-in defaults applied");
    let (code, st) = patch(
        &s,
        "/api/v1/namespaces/default/pods/p",
        "application/merge-patch+json",
        json!({"spec": {"containers": [{"name": "c", "image": "z"}]}}),
    )
    .await;
    assert_eq!(code, 422, "merge patch replaces lists, and pods may not change containers: {st}");
    assert_eq!(st["details"]["causes"][0]["field"], "spec");
    let roles = "/apis/rbac.authorization.k8s.io/v1/namespaces/default/roles";
    post(&s, roles, json!({"metadata": {"name": "r"}, "rules": [{"apiGroups": [""], "resources": ["pods"], "verbs": ["get"]}]})).await;
    let (_, r) = patch(
        &s,
        &format!("{roles}/r"),
        "application/merge-patch+json",
        json!({"rules": [{"apiGroups": [""], "resources": ["configmaps"], "verbs": ["list"]}]}),
    )
    .await;
    assert_eq!(r["rules"], json!([{"apiGroups": [""], "resources": ["configmaps"], "verbs": ["list"]}]), "merge patch replaces lists");
}

#[tokio::test]
async fn apply_patch_creates_and_requires_a_field_manager() {
    let s = ApiServer::new();
    let body = Value::String("apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: ap\ndata:\n  a: \"1\"\n".into());
    let (code, _) = call(&s, "PATCH", &format!("{CMS}/ap"), "application/apply-patch+yaml", Some(body.clone())).await;
    assert_eq!(code, 400, "fieldManager is required");
    let (code, o) = call(&s, "PATCH", &format!("{CMS}/ap?fieldManager=me"), "application/apply-patch+yaml", Some(body)).await;
    assert_eq!(code, 201, "an apply that creates answers 201 Created, as upstream: {o}");
    assert_eq!(o["data"]["a"], "1");
    assert_eq!(o["metadata"]["managedFields"][0]["manager"], "me");
    assert_eq!(o["metadata"]["managedFields"][0]["operation"], "Apply");
}

#[tokio::test]
async fn an_applied_service_port_is_owned_by_port_and_protocol_and_an_unkeyed_one_is_refused() {
    let s = ApiServer::new();
    let svcs = "/api/v1/namespaces/default/services";
    let body =
        Value::String("apiVersion: v1\nkind: Service\nmetadata:\n  name: web\nspec:\n  selector:\n    app: web\n  ports:\n  - port: 80\n".into());
    let (code, o) = call(&s, "PATCH", &format!("{svcs}/web?fieldManager=me"), "application/apply-patch+yaml", Some(body)).await;
    assert_eq!(code, 201, "{o}");
    let fields = &o["metadata"]["managedFields"][0]["fieldsV1"]["f:spec"];
    assert_eq!(fields["f:ports"]["k:{\"port\":80,\"protocol\":\"TCP\"}"], json!({".": {}, "f:port": {}}), "{fields}");
    assert_eq!(fields["f:selector"], json!({}), "a Service's selector is an atomic map: {fields}");
    let unkeyed = Value::String("apiVersion: v1\nkind: Service\nmetadata:\n  name: web\nspec:\n  ports:\n  - targetPort: 80\n".into());
    let (code, o) = call(&s, "PATCH", &format!("{svcs}/web?fieldManager=me"), "application/apply-patch+yaml", Some(unkeyed)).await;
    assert_eq!(code, 500, "{o}");
    assert_eq!(
        o["message"],
        "failed to create typed patch object (/web; /v1, Kind=Service): .spec.ports: element 0: associative list with keys has an element that omits key field \"port\" (and doesn't have default value)"
    );
}

#[tokio::test]
async fn admission_hooks_mutate_then_validate() {
    let s = ApiServer::new();
    s.admission().register_mutating("defaulter.example.com", "", "ConfigMap", |obj, _old| {
        let mut o = obj.clone();
        o["data"]["defaulted"] = json!("yes");
        Ok(o)
    });
    s.admission().register_validating("validator.example.com", "", "ConfigMap", |obj, _old| {
        if obj["data"]["k"] == "bad" { vec![Cause::new("FieldValueInvalid", "Invalid value: \"bad\": must not be bad", "data.k")] } else { vec![] }
    });
    s.admission().register_mutating("denier.example.com", "", "Secret", |_, _| Err(Denial::new("secrets are closed")));
    let (code, o) = post(&s, CMS, cm("m")).await;
    assert_eq!(code, 201);
    assert_eq!(o["data"]["defaulted"], "yes");
    let mut bad = cm("bad");
    bad["data"]["k"] = json!("bad");
    let (code, st) = post(&s, CMS, bad).await;
    assert_eq!(code, 422);
    assert_eq!(
        st["message"],
        "admission webhook \"validator.example.com\" denied the request: ConfigMap \"bad\" is invalid: data.k: Invalid value: \"bad\": must not be bad"
    );
    let (code, st) = post(&s, "/api/v1/namespaces/default/secrets", json!({"metadata": {"name": "s"}})).await;
    assert_eq!(code, 400);
    assert_eq!(st["message"], "admission webhook \"denier.example.com\" denied the request: secrets are closed");
}

/// Regression: hooks ran on /status writes too, a `default` and a `validate`
/// plugin call per status write of a parent in the embedded cluster.
#[tokio::test]
async fn admission_hooks_do_not_run_for_status_writes_as_upstream_rules_do_not_match_subresources() {
    let s = with_crd().await;
    let calls = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let (m, v) = (calls.clone(), calls.clone());
    s.admission().register_mutating("m.example.com", "stable.example.com", "CronTab", move |obj, _| {
        m.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        Ok(obj.clone())
    });
    s.admission().register_validating("v.example.com", "stable.example.com", "CronTab", move |_, _| {
        v.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        vec![]
    });
    assert_eq!(post(&s, CTS, ct("st", 1)).await.0, 201);
    assert_eq!(calls.load(std::sync::atomic::Ordering::SeqCst), 2, "a create runs both hooks");
    let (code, o) = patch(&s, &format!("{CTS}/st/status"), "application/merge-patch+json", json!({"status": {"replicas": 4}})).await;
    assert_eq!(code, 200, "{o}");
    assert_eq!(calls.load(std::sync::atomic::Ordering::SeqCst), 2, "a status write runs no hook");
    let (code, o) = patch(&s, &format!("{CTS}/st"), "application/merge-patch+json", json!({"spec": {"replicas": 2}})).await;
    assert_eq!(code, 200, "{o}");
    assert_eq!(calls.load(std::sync::atomic::Ordering::SeqCst), 4, "an update of the object runs both hooks");
}

#[tokio::test]
async fn deleting_a_namespace_deletes_its_objects() {
    let s = ApiServer::new();
    post(&s, "/api/v1/namespaces", json!({"metadata": {"name": "tmp"}})).await;
    post(&s, "/api/v1/namespaces/tmp/configmaps", cm("x")).await;
    let (code, _) = delete(&s, "/api/v1/namespaces/tmp", None).await;
    assert_eq!(code, 200);
    assert_eq!(get(&s, "/api/v1/namespaces/tmp/configmaps/x").await.0, 404);
    assert_eq!(get(&s, "/api/v1/namespaces/tmp").await.0, 404);
}

#[tokio::test]
async fn a_namespace_terminates_until_its_last_object_is_gone() {
    let s = ApiServer::new();
    post(&s, "/api/v1/namespaces", json!({"metadata": {"name": "tmp"}})).await;
    let mut held = cm("held");
    held["metadata"]["finalizers"] = json!(["example.com/hold"]);
    post(&s, "/api/v1/namespaces/tmp/configmaps", held).await;
    let (code, ns) = delete(&s, "/api/v1/namespaces/tmp", None).await;
    assert_eq!(code, 200, "{ns}");
    assert_eq!(ns["status"]["phase"], "Terminating");
    let (code, st) = post(&s, "/api/v1/namespaces/tmp/configmaps", cm("new")).await;
    assert_eq!(code, 403, "{st}");
    assert_eq!(st["message"], "configmaps \"new\" is forbidden: unable to create new content in namespace tmp because it is being terminated");
    let (code, _) =
        patch(&s, "/api/v1/namespaces/tmp/configmaps/held", "application/merge-patch+json", json!({"metadata": {"finalizers": null}})).await;
    assert_eq!(code, 200);
    assert_eq!(get(&s, "/api/v1/namespaces/tmp").await.0, 404, "the namespace goes once empty");
}

#[tokio::test]
async fn discovery_documents_describe_the_served_resources() {
    let s = with_crd().await;
    let (_, v) = get(&s, "/version").await;
    assert!(v["gitVersion"].as_str().unwrap().starts_with("v1.36"));
    let (_, apis) = get(&s, "/apis").await;
    assert!(apis["groups"].as_array().unwrap().iter().any(|g| g["name"] == "stable.example.com"));
    let (_, rl) = get(&s, "/apis/stable.example.com/v1").await;
    let names: Vec<&str> = rl["resources"].as_array().unwrap().iter().map(|r| r["name"].as_str().unwrap()).collect();
    assert_eq!(names, ["crontabs", "crontabs/status", "crontabs/scale"]);
    let (_, core) = get(&s, "/api/v1").await;
    assert!(core["resources"].as_array().unwrap().iter().any(|r| r["name"] == "pods/status"));
    let (_, root) = get(&s, "/openapi/v3").await;
    let url = root["paths"]["apis/stable.example.com/v1"]["serverRelativeURL"].as_str().unwrap().to_string();
    let (code, doc) = get(&s, &url).await;
    assert_eq!(code, 200);
    assert!(doc["components"]["schemas"]["com.example.stable.v1.CronTab"].is_object());
}

#[tokio::test]
async fn binding_assigns_a_pod_to_a_node_once() {
    let s = ApiServer::new();
    let pods = "/api/v1/namespaces/default/pods";
    post(&s, pods, json!({"metadata": {"name": "p"}, "spec": {"containers": [{"name": "c", "image": "i"}]}})).await;
    let binding = json!({"apiVersion": "v1", "kind": "Binding", "metadata": {"name": "p"}, "target": {"kind": "Node", "name": "n1"}});
    let (code, st) = post(&s, &format!("{pods}/p/binding"), binding.clone()).await;
    assert_eq!(code, 201, "{st}");
    assert_eq!(st["status"], "Success");
    let (_, p) = get(&s, &format!("{pods}/p")).await;
    assert_eq!(p["spec"]["nodeName"], "n1");
    assert_eq!(p["status"]["conditions"][0]["type"], "PodScheduled");
    let (code, st) = post(&s, &format!("{pods}/p/binding"), binding).await;
    assert_eq!(code, 409, "{st}");
    let (code, _) = patch(&s, &format!("{pods}/p"), "application/merge-patch+json", json!({"spec": {"nodeName": "n2"}})).await;
    assert_eq!(code, 422, "nodeName cannot move once set");
}

#[tokio::test]
async fn crd_defaults_apply_to_objects_read_after_a_schema_change() {
    let s = with_crd().await;
    post(&s, CTS, ct("old", 1)).await;
    let (_, mut crd) = get(&s, "/apis/apiextensions.k8s.io/v1/customresourcedefinitions/crontabs.stable.example.com").await;
    crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["spec"]["properties"]["image"]["default"] = json!("busybox");
    let (code, body) = put(&s, "/apis/apiextensions.k8s.io/v1/customresourcedefinitions/crontabs.stable.example.com", crd).await;
    assert_eq!(code, 200, "{body}");
    let (_, o) = get(&s, &format!("{CTS}/old")).await;
    assert_eq!(o["spec"]["image"], "busybox");
}

#[tokio::test]
async fn malformed_bodies_are_client_errors_not_panics() {
    let s = ApiServer::new();
    post(&s, CMS, cm("a")).await;
    let deploys = "/apis/apps/v1/namespaces/default/deployments";
    let cases: Vec<(&str, String, &str, Value)> = vec![
        ("POST", CMS.to_string(), "application/json", json!("just a string")),
        ("POST", CMS.to_string(), "application/json", json!([1, 2])),
        ("POST", deploys.to_string(), "application/json", json!({"metadata": {"name": "d"}, "spec": "nope"})),
        ("POST", deploys.to_string(), "application/json", json!({"metadata": {"name": "d2"}, "spec": {"strategy": "x", "template": 1}})),
        (
            "POST",
            "/apis/apiextensions.k8s.io/v1/customresourcedefinitions".to_string(),
            "application/json",
            json!({"metadata": {"name": "x.y"}, "spec": {"names": "bad", "versions": "bad"}}),
        ),
        ("POST", "/apis/events.k8s.io/v1/namespaces/default/events".to_string(), "application/json", json!([{"a": 1}])),
        ("POST", "/apis/authorization.k8s.io/v1/selfsubjectaccessreviews".to_string(), "application/json", json!([1])),
        ("PUT", format!("{CMS}/a"), "application/json", json!(42)),
        ("PATCH", format!("{CMS}/a"), "application/json-patch+json", json!([{"op": "replace", "path": "", "value": "x"}])),
        ("PATCH", format!("{CMS}/a"), "application/merge-patch+json", json!("x")),
        ("PATCH", format!("{CMS}/a"), "application/strategic-merge-patch+json", json!([1])),
        ("PATCH", format!("{CMS}/a"), "application/apply-patch+yaml", Value::String(": : :".into())),
        ("POST", CMS.to_string(), "application/vnd.kubernetes.protobuf", Value::String("k8s\0garbage".into())),
        ("GET", format!("{CMS}?limit=1&continue=bm90LWEtdG9rZW4"), "application/json", Value::Null),
        ("GET", format!("{CMS}?watch=1&resourceVersion=abc"), "application/json", Value::Null),
    ];
    for (i, (method, uri, ct, body)) in cases.into_iter().enumerate() {
        let body = if body.is_null() { None } else { Some(body) };
        let (code, st) = call(&s, method, &uri, ct, body).await;
        assert!((400..500).contains(&code) || code == 201, "case {i}: {code} {st}");
    }
    // The server is still healthy.
    assert_eq!(get(&s, &format!("{CMS}/a")).await.0, 200);
}

const EVENTS_V1: &str = "/apis/events.k8s.io/v1/namespaces/default/events";

#[tokio::test]
async fn an_events_v1_event_is_validated_and_its_managed_fields_recorded_as_events_v1() {
    let s = ApiServer::new();
    let (code, body) = post(
        &s,
        EVENTS_V1,
        json!({"apiVersion": "events.k8s.io/v1", "kind": "Event", "metadata": {"name": "bad"}, "reason": "R", "type": "Sideways"}),
    )
    .await;
    assert_eq!(code, 422, "{body}");
    assert_eq!(
        body["message"],
        // No namespace cause: an Event in `default` may be about a cluster-scoped object.
        r#"Event "bad" is invalid: [eventTime: Required value, type: Invalid value: "": has invalid value: Sideways]"#
    );
    let event = json!({"apiVersion": "events.k8s.io/v1", "kind": "Event", "metadata": {"name": "good"}, "eventTime": "2026-01-01T00:00:00.000000Z",
        "reportingController": "c", "reportingInstance": "c-0", "action": "Reconcile", "reason": "Synced", "type": "Normal", "note": "n",
        "regarding": {"kind": "ConfigMap", "name": "cm", "namespace": "default"}});
    let (code, v1) = call(&s, "POST", &format!("{EVENTS_V1}?fieldManager=m"), "application/json", Some(event)).await;
    assert_eq!(code, 201, "{v1}");
    assert_eq!((&v1["deprecatedSource"], &v1["deprecatedFirstTimestamp"], &v1["deprecatedLastTimestamp"]), (&json!({}), &Value::Null, &Value::Null));
    let entry = &v1["metadata"]["managedFields"][0];
    assert_eq!(entry["apiVersion"], "events.k8s.io/v1");
    let fields: Vec<&String> = entry["fieldsV1"].as_object().unwrap().keys().collect();
    assert_eq!(fields, ["f:action", "f:eventTime", "f:note", "f:reason", "f:regarding", "f:reportingController", "f:reportingInstance", "f:type"]);
    let (_, core) = get(&s, "/api/v1/namespaces/default/events/good").await;
    assert_eq!(core["metadata"]["managedFields"], v1["metadata"]["managedFields"], "recorded once, in the version written");
    assert_eq!((&core["message"], &core["source"], &core["firstTimestamp"]), (&json!("n"), &json!({}), &Value::Null));
    let (code, body) = patch(&s, &format!("{EVENTS_V1}/good"), "application/merge-patch+json", json!({"note": "changed"})).await;
    assert_eq!(code, 422, "{body}");
    assert_eq!(body["details"]["causes"][0]["message"], r#"Invalid value: "changed": field is immutable"#);
}

#[tokio::test]
async fn a_namespace_records_no_field_for_the_finalizer_its_strategy_adds_and_keeps_requested_ones() {
    let s = ApiServer::new();
    let ns = json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "n"}, "spec": {"finalizers": ["example.com/keep"]}});
    let (code, body) = call(&s, "POST", "/api/v1/namespaces?fieldManager=kubectl-create", "application/json", Some(ns)).await;
    assert_eq!(code, 201, "{body}");
    assert_eq!(body["spec"]["finalizers"], json!(["example.com/keep", "kubernetes"]));
    assert!(body["metadata"]["managedFields"][0]["fieldsV1"]["f:spec"].get("f:finalizers").is_some(), "the requested finalizers are the manager's");
    let (_, body) =
        call(&s, "POST", "/api/v1/namespaces?fieldManager=kubectl-create", "application/json", Some(json!({"metadata": {"name": "m"}}))).await;
    assert_eq!(body["spec"]["finalizers"], json!(["kubernetes"]));
    assert_eq!(body["metadata"]["managedFields"][0]["fieldsV1"].get("f:spec"), None);
    let (code, body) = delete(&s, "/api/v1/namespaces/m", None).await;
    assert_eq!(code, 200, "{body}");
    assert_eq!(body["metadata"].get("deletionGracePeriodSeconds"), None, "the namespace registry sets no grace period");
}

#[tokio::test]
async fn errors_are_worded_as_upstream_v1_36_words_them() {
    let s = ApiServer::new();
    post(&s, CMS, cm("a")).await;
    let (code, body) = get(&s, &format!("{CMS}?fieldSelector=data.k%3Dv")).await;
    assert_eq!(code, 400);
    assert_eq!(body["message"], r#""data.k" is not a known field selector: only "metadata.name", "metadata.namespace""#);
    let (code, body) = patch(&s, &format!("{CMS}/a"), "application/json-patch+json", json!([{"op": "remove", "path": "/data/nope"}])).await;
    assert_eq!(
        (code, &body["message"], &body["details"]),
        (422, &json!("the server rejected our request due to an error in our request"), &json!({}))
    );
    let (code, body) = patch(&s, &format!("{CMS}/a"), "text/plain", json!({"data": {"b": "2"}})).await;
    assert_eq!((code, &body["message"], &body["details"]), (415, &json!("415: Unsupported Media Type"), &json!({})));
}
