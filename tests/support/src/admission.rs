//! An AdmissionReview as kube-apiserver sends it, and an HTTPS client that
//! posts it the way kube-apiserver does: trusting only the configuration's
//! caBundle and checking the certificate's name.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use serde_json::{Value, json};

/// A review as kube-apiserver sends it (the fields its `AdmissionRequest` always carries).
pub fn review(operation: &str, object: Value) -> Vec<u8> {
    serde_json::to_vec(&json!({"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview",
        "request": {"uid": "req-1", "operation": operation, "object": object, "name": "c", "namespace": "default",
            "kind": {"group": "batch.tutorial.kubebuilder.io", "version": "v1", "kind": "CronJob"},
            "resource": {"group": "batch.tutorial.kubebuilder.io", "version": "v1", "resource": "cronjobs"},
            "userInfo": {"username": "kubernetes-admin", "groups": ["system:masters", "system:authenticated"]}}}))
    .unwrap()
}

/// POSTs an AdmissionReview to `path` at `addr` over HTTPS, trusting only
/// `ca_pem` and checking the certificate is valid for `server_name`.
pub async fn post(addr: SocketAddr, server_name: &str, ca_pem: &str, path: &str, body: Vec<u8>) -> Result<Value, String> {
    use http_body_util::BodyExt;
    use rustls::pki_types::pem::PemObject;
    let mut roots = rustls::RootCertStore::empty();
    for cert in rustls::pki_types::CertificateDer::pem_slice_iter(ca_pem.as_bytes()) {
        roots.add(cert.unwrap()).unwrap();
    }
    let config = rustls::ClientConfig::builder_with_provider(Arc::new(rustls::crypto::ring::default_provider()))
        .with_safe_default_protocol_versions()
        .unwrap()
        .with_root_certificates(roots)
        .with_no_client_auth();
    let name = rustls::pki_types::ServerName::try_from(server_name.to_string()).unwrap();
    let tcp = tokio::net::TcpStream::connect(addr).await.map_err(|e| e.to_string())?;
    let tls = tokio_rustls::TlsConnector::from(Arc::new(config)).connect(name, tcp).await.map_err(|e| format!("TLS: {e}"))?;
    let (mut sender, conn) = hyper::client::conn::http1::handshake(hyper_util::rt::TokioIo::new(tls)).await.map_err(|e| e.to_string())?;
    tokio::spawn(conn);
    let request = hyper::Request::post(path)
        .header("host", server_name)
        .header("content-type", "application/json")
        .body(http_body_util::Full::new(bytes::Bytes::from(body)))
        .unwrap();
    let response = tokio::time::timeout(Duration::from_secs(60), sender.send_request(request)).await.unwrap().map_err(|e| e.to_string())?;
    let body = response.into_body().collect().await.map_err(|e| e.to_string())?.to_bytes();
    serde_json::from_slice(&body).map_err(|e| format!("{e}: {}", String::from_utf8_lossy(&body)))
}
