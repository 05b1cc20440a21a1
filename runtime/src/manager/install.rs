//! What a plugin needs from the cluster before its controller runs: its
//! CRDs installed and Established, and each of its kinds discovered.

use std::time::Duration;

use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{Api, Patch, PatchParams};
use kube::discovery::Scope;
use operator_plugin_sdk::GroupVersionKind;
use serde_json::Value;

use super::Error;
use crate::actions::FIELD_MANAGER;

/// Installs `crd` by server-side apply and waits for `Established`.
pub async fn install_crd(client: &kube::Client, plugin: &str, crd: &Value, timeout: Duration) -> Result<(), Error> {
    let mut crd = crd.clone();
    let name = crd
        .pointer("/metadata/name")
        .and_then(Value::as_str)
        .ok_or_else(|| Error::InvalidCrd { plugin: plugin.into(), detail: "a CRD without metadata.name".into() })?
        .to_string();
    crd["apiVersion"] = "apiextensions.k8s.io/v1".into();
    crd["kind"] = "CustomResourceDefinition".into();
    let api: Api<CustomResourceDefinition> = Api::all(client.clone());
    api.patch(&name, &PatchParams::apply(FIELD_MANAGER).force(), &Patch::Apply(&crd))
        .await
        .map_err(|source| Error::InstallCrd { name: name.clone(), source })?;
    let deadline = tokio::time::Instant::now() + timeout;
    loop {
        if let Ok(crd) = api.get(&name).await {
            let established =
                crd.status.and_then(|s| s.conditions).unwrap_or_default().iter().any(|c| c.type_ == "Established" && c.status == "True");
            if established {
                tracing::info!(crd = %name, "CRD established");
                return Ok(());
            }
        }
        if tokio::time::Instant::now() >= deadline {
            return Err(Error::CrdNotEstablished { name, timeout });
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

pub(super) async fn discover(client: &kube::Client, gvk: &GroupVersionKind) -> Result<(kube::api::ApiResource, bool), Error> {
    let kgvk = kube::api::GroupVersionKind::gvk(&gvk.group, &gvk.version, &gvk.kind);
    let mut attempt = 0;
    loop {
        match kube::discovery::pinned_kind(client, &kgvk).await {
            Ok((ar, caps)) => return Ok((ar, caps.scope == Scope::Namespaced)),
            // Discovery of a just-established CRD can lag a moment on a real cluster.
            Err(_) if attempt < 20 => {
                attempt += 1;
                tokio::time::sleep(Duration::from_millis(250)).await;
            }
            Err(source) => {
                return Err(Error::Discovery { kind: format!("{}/{}", gvk.api_version(), gvk.kind), source });
            }
        }
    }
}
