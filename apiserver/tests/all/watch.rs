//! Watch semantics over raw HTTP (in-process), several under tokio's paused clock.

use crate::common;

use apiserver::{ApiServer, Config};
use chrono::TimeZone;
use common::*;
use serde_json::{Value, json};
use std::sync::Arc;

const CMS: &str = "/api/v1/namespaces/default/configmaps";

async fn watch_lines(s: &ApiServer, uri: &str) -> Vec<Value> {
    use http_body_util::{BodyExt, Full};
    use tower::ServiceExt;
    let req = http::Request::builder().uri(uri).body(Full::new(bytes::Bytes::new())).unwrap();
    let resp = s.service().oneshot(req).await.unwrap();
    let bytes = resp.into_body().collect().await.unwrap().to_bytes();
    String::from_utf8(bytes.to_vec()).unwrap().lines().map(|l| serde_json::from_str(l).unwrap()).collect()
}

fn summary(evs: &[Value]) -> Vec<String> {
    evs.iter().map(|e| format!("{} {}", e["type"].as_str().unwrap(), e["object"]["metadata"]["name"].as_str().unwrap_or(""))).collect()
}

#[tokio::test(start_paused = true)]
async fn watch_turns_selector_moves_into_added_and_deleted() {
    let s = ApiServer::new();
    let (_, list) = get(&s, CMS).await;
    let rv = list["metadata"]["resourceVersion"].as_str().unwrap().to_string();
    let s2 = s.clone();
    let w =
        tokio::spawn(async move { watch_lines(&s2, &format!("{CMS}?watch=1&resourceVersion={rv}&labelSelector=app%3Dweb&timeoutSeconds=10")).await });
    tokio::task::yield_now().await;
    post(&s, CMS, json!({"metadata": {"name": "a", "labels": {"app": "web"}}})).await;
    post(&s, CMS, json!({"metadata": {"name": "b"}})).await;
    patch(&s, &format!("{CMS}/a"), "application/merge-patch+json", json!({"data": {"x": "1"}})).await;
    patch(&s, &format!("{CMS}/a"), "application/merge-patch+json", json!({"metadata": {"labels": {"app": "db"}}})).await;
    patch(&s, &format!("{CMS}/b"), "application/merge-patch+json", json!({"metadata": {"labels": {"app": "web"}}})).await;
    delete(&s, &format!("{CMS}/b"), None).await;
    let evs = w.await.unwrap();
    assert_eq!(summary(&evs), ["ADDED a", "MODIFIED a", "DELETED a", "ADDED b", "DELETED b"]);
}

#[tokio::test(start_paused = true)]
async fn watch_sends_periodic_bookmarks_and_ends_at_its_timeout() {
    let s = ApiServer::with_config(Config { bookmark_interval: std::time::Duration::from_secs(60), ..Default::default() });
    post(&s, CMS, json!({"metadata": {"name": "a"}})).await;
    let (_, list) = get(&s, CMS).await;
    let rv = list["metadata"]["resourceVersion"].as_str().unwrap().to_string();
    let evs = watch_lines(&s, &format!("{CMS}?watch=1&resourceVersion={rv}&allowWatchBookmarks=true&timeoutSeconds=150")).await;
    assert_eq!(summary(&evs), ["BOOKMARK ", "BOOKMARK "]);
    assert_eq!(evs[0]["object"]["kind"], "ConfigMap");
    assert_eq!(evs[0]["object"]["apiVersion"], "v1");
    assert_eq!(evs[0]["object"]["metadata"]["resourceVersion"], rv);
}

#[tokio::test(start_paused = true)]
async fn send_initial_events_ends_with_the_initial_events_end_bookmark() {
    let s = ApiServer::new();
    for n in ["a", "b"] {
        post(&s, CMS, json!({"metadata": {"name": n}})).await;
    }
    let evs =
        watch_lines(&s, &format!("{CMS}?watch=1&sendInitialEvents=true&resourceVersionMatch=NotOlderThan&allowWatchBookmarks=true&timeoutSeconds=1"))
            .await;
    assert_eq!(summary(&evs), ["ADDED a", "ADDED b", "ADDED kube-root-ca.crt", "BOOKMARK "]);
    assert_eq!(evs[3]["object"]["metadata"]["annotations"]["k8s.io/initial-events-end"], "true");
    let (code, _) = get(&s, &format!("{CMS}?watch=1&sendInitialEvents=true")).await;
    assert_eq!(code, 422, "sendInitialEvents needs resourceVersionMatch=NotOlderThan");
}

#[tokio::test(start_paused = true)]
async fn a_watch_from_resource_version_0_with_bookmarks_also_ends_its_initial_events_with_the_bookmark() {
    let s = ApiServer::new();
    post(&s, CMS, json!({"metadata": {"name": "a"}})).await;
    let evs = watch_lines(&s, &format!("{CMS}?watch=1&resourceVersion=0&allowWatchBookmarks=true&timeoutSeconds=1")).await;
    assert_eq!(summary(&evs), ["ADDED a", "ADDED kube-root-ca.crt", "BOOKMARK "]);
    let bookmark = &evs[2]["object"]["metadata"];
    assert_eq!(bookmark["annotations"]["k8s.io/initial-events-end"], "true");
    assert_eq!(bookmark.get("creationTimestamp"), None, "v1.36 omits a zero creationTimestamp");
    let evs = watch_lines(&s, &format!("{CMS}?watch=1&resourceVersion=0&timeoutSeconds=1")).await;
    assert_eq!(summary(&evs), ["ADDED a", "ADDED kube-root-ca.crt"], "no bookmarks asked for");
}

#[tokio::test(start_paused = true)]
async fn unset_resource_version_starts_with_synthetic_added_events() {
    let s = ApiServer::new();
    post(&s, CMS, json!({"metadata": {"name": "a"}})).await;
    let evs = watch_lines(&s, &format!("{CMS}?watch=1&timeoutSeconds=1")).await;
    assert_eq!(summary(&evs), ["ADDED a", "ADDED kube-root-ca.crt"]);
    let evs = watch_lines(&s, &format!("{CMS}?watch=1&resourceVersion=0&timeoutSeconds=1")).await;
    assert_eq!(summary(&evs), ["ADDED a", "ADDED kube-root-ca.crt"]);
}

#[tokio::test(start_paused = true)]
async fn too_old_resource_version_is_an_expired_error_event() {
    let s = ApiServer::with_config(Config { event_window: 2, ..Default::default() });
    for n in ["a", "b", "c", "d"] {
        post(&s, CMS, json!({"metadata": {"name": n}})).await;
    }
    let evs = watch_lines(&s, &format!("{CMS}?watch=1&resourceVersion=2&timeoutSeconds=5")).await;
    assert_eq!(evs.len(), 1);
    assert_eq!(evs[0]["type"], "ERROR");
    let st = &evs[0]["object"];
    assert_eq!(st["kind"], "Status");
    assert_eq!(st["code"], 410);
    assert_eq!(st["reason"], "Expired");
    assert!(st["message"].as_str().unwrap().starts_with("too old resource version: 2"));
}

#[tokio::test(start_paused = true)]
async fn watch_as_table_renders_one_row_per_event() {
    let s = ApiServer::new();
    post(&s, CMS, json!({"metadata": {"name": "a"}, "data": {"k": "v"}})).await;
    post(&s, CMS, json!({"metadata": {"name": "b"}})).await;
    use http_body_util::{BodyExt, Full};
    use tower::ServiceExt;
    let req = http::Request::builder()
        .uri(format!("{CMS}?watch=1&timeoutSeconds=1"))
        .header("accept", "application/json;as=Table;v=v1;g=meta.k8s.io")
        .body(Full::new(bytes::Bytes::new()))
        .unwrap();
    let body = s.service().oneshot(req).await.unwrap().into_body().collect().await.unwrap().to_bytes();
    let evs: Vec<Value> = String::from_utf8(body.to_vec()).unwrap().lines().map(|l| serde_json::from_str(l).unwrap()).collect();
    assert_eq!(evs.len(), 3, "a, b and kube-root-ca.crt");
    assert_eq!(evs[0]["object"]["kind"], "Table");
    assert_eq!(evs[0]["object"]["columnDefinitions"][0]["name"], "Name");
    assert_eq!(evs[0]["object"]["rows"][0]["cells"][0], "a");
    assert_eq!(evs[0]["object"]["rows"][0]["cells"][1], 1);
    assert_eq!(evs[1]["object"]["columnDefinitions"], json!([]));
}

#[tokio::test]
async fn an_injected_clock_stamps_timestamps() {
    let fixed = chrono::Utc.with_ymd_and_hms(2030, 1, 2, 3, 4, 5).unwrap();
    let s = ApiServer::with_config(Config { clock: Arc::new(move || fixed), ..Default::default() });
    let (_, o) = post(&s, CMS, json!({"metadata": {"name": "t", "finalizers": ["x"]}})).await;
    assert_eq!(o["metadata"]["creationTimestamp"], "2030-01-02T03:04:05Z");
    let (_, o) = delete(&s, &format!("{CMS}/t"), None).await;
    assert_eq!(o["metadata"]["deletionTimestamp"], "2030-01-02T03:04:05Z");
}
