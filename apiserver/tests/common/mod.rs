//! Test helpers: raw requests against the in-process service.
#![allow(dead_code)]

use apiserver::ApiServer;
use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use serde_json::Value;
use tower::ServiceExt;

pub mod kubectl;

/// Send one request in-process; returns (status, JSON body or Null).
pub async fn call(server: &ApiServer, method: &str, uri: &str, content_type: &str, body: Option<Value>) -> (u16, Value) {
    let raw = body.map(|b| if let Value::String(s) = b { s.into_bytes() } else { serde_json::to_vec(&b).unwrap() }).unwrap_or_default();
    let req = http::Request::builder()
        .method(method)
        .uri(uri)
        .header("content-type", content_type)
        .header("user-agent", "test/1.0")
        .body(Full::new(Bytes::from(raw)))
        .unwrap();
    let resp = server.service().oneshot(req).await.unwrap();
    let status = resp.status().as_u16();
    let bytes = resp.into_body().collect().await.unwrap().to_bytes();
    (status, serde_json::from_slice(&bytes).unwrap_or(Value::Null))
}

pub async fn get(s: &ApiServer, uri: &str) -> (u16, Value) {
    call(s, "GET", uri, "application/json", None).await
}

pub async fn post(s: &ApiServer, uri: &str, body: Value) -> (u16, Value) {
    call(s, "POST", uri, "application/json", Some(body)).await
}

pub async fn put(s: &ApiServer, uri: &str, body: Value) -> (u16, Value) {
    call(s, "PUT", uri, "application/json", Some(body)).await
}

pub async fn patch(s: &ApiServer, uri: &str, ct: &str, body: Value) -> (u16, Value) {
    call(s, "PATCH", uri, ct, Some(body)).await
}

pub async fn delete(s: &ApiServer, uri: &str, body: Option<Value>) -> (u16, Value) {
    call(s, "DELETE", uri, "application/json", body).await
}

/// A CRD for `crontabs.stable.example.com` with status and scale subresources.
pub fn crontab_crd() -> Value {
    serde_json::json!({
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": "crontabs.stable.example.com"},
        "spec": {
            "group": "stable.example.com",
            "scope": "Namespaced",
            "names": {"plural": "crontabs", "singular": "crontab", "kind": "CronTab", "shortNames": ["ct"]},
            "versions": [{
                "name": "v1", "served": true, "storage": true,
                "schema": {"openAPIV3Schema": {"type": "object", "description": "CronTab runs things on a schedule.", "properties": {
                    "spec": {"type": "object", "description": "The desired schedule.", "properties": {
                        "cronSpec": {"type": "string", "description": "The cron expression.", "pattern": "^[0-9*/ ,-]+$"},
                        "image": {"type": "string"},
                        "replicas": {"type": "integer", "minimum": 0, "default": 1},
                        "selector": {"type": "string"}
                    }, "required": ["cronSpec"]},
                    "status": {"type": "object", "properties": {
                        "replicas": {"type": "integer"},
                        "phase": {"type": "string"}
                    }}
                }}},
                "subresources": {"status": {}, "scale": {"specReplicasPath": ".spec.replicas", "statusReplicasPath": ".status.replicas", "labelSelectorPath": ".spec.selector"}},
                "additionalPrinterColumns": [
                    {"name": "Spec", "type": "string", "jsonPath": ".spec.cronSpec"},
                    {"name": "Replicas", "type": "integer", "jsonPath": ".spec.replicas"},
                    {"name": "Age", "type": "date", "jsonPath": ".metadata.creationTimestamp"}
                ]
            }]
        }
    })
}
