//! A generated webhook certificate shared by every replica through a Secret
//! (`run --webhook-cert-secret NAMESPACE/NAME`): with several replicas behind
//! one Service, the API server trusts one `caBundle`, so every replica must
//! serve the same pair.
//!
//! Create-or-get: a replica reads the Secret; when there is none it
//! generates a pair and creates the Secret (type `kubernetes.io/tls`, keys
//! `tls.crt`, `tls.key` and `ca.crt`, cert-manager's layout); a create that
//! meets `AlreadyExists` means another replica won the race, so it reads
//! theirs and drops its own. The Secret is never updated by the host:
//! rotating means deleting it and restarting the replicas.

use std::collections::BTreeMap;

use k8s_openapi::ByteString;
use k8s_openapi::api::core::v1::Secret;
use kube::api::{Api, ObjectMeta, PostParams};

use super::ServingCert;
use crate::actions::FIELD_MANAGER;
use crate::api_error::ApiErrorClass;

/// Why the shared pair could not be had this time.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("cannot read Secret {namespace}/{name}")]
    Read {
        namespace: String,
        name: String,
        #[source]
        source: kube::Error,
    },
    #[error("cannot create Secret {namespace}/{name}")]
    Create {
        namespace: String,
        name: String,
        #[source]
        source: kube::Error,
    },
    #[error("Secret {namespace}/{name} has no {key}: delete it to have a new pair generated, or give it tls.crt and tls.key")]
    MissingKey { namespace: String, name: String, key: &'static str },
    #[error("cannot generate the webhook certificate")]
    Generate(#[from] super::Error),
}

/// The pair and the CA bundle (PEM) the Secret holds.
#[derive(Debug)]
pub struct SharedPair {
    pub cert: ServingCert,
    pub ca_pem: String,
    /// True when this replica created the Secret.
    pub created: bool,
}

/// The pair in Secret `namespace/name`, created with a pair generated for
/// `hosts` when there is none (see the module doc).
pub async fn create_or_get(client: &kube::Client, namespace: &str, name: &str, hosts: &[String]) -> Result<SharedPair, Error> {
    let api: Api<Secret> = Api::namespaced(client.clone(), namespace);
    let read = |source| Error::Read { namespace: namespace.into(), name: name.into(), source };
    if let Some(secret) = api.get_opt(name).await.map_err(read)? {
        return from_secret(namespace, name, &secret, false);
    }
    let cert = ServingCert::generate(hosts)?;
    let bytes = |s: &str| ByteString(s.as_bytes().to_vec());
    let secret = Secret {
        metadata: ObjectMeta {
            name: Some(name.into()),
            namespace: Some(namespace.into()),
            labels: Some(BTreeMap::from([("app.kubernetes.io/managed-by".to_string(), FIELD_MANAGER.to_string())])),
            ..ObjectMeta::default()
        },
        type_: Some("kubernetes.io/tls".into()),
        data: Some(BTreeMap::from([
            ("tls.crt".to_string(), bytes(&cert.cert_pem)),
            ("tls.key".to_string(), bytes(cert.key_pem())),
            ("ca.crt".to_string(), bytes(&cert.cert_pem)),
        ])),
        ..Secret::default()
    };
    match api.create(&PostParams { field_manager: Some(FIELD_MANAGER.into()), ..PostParams::default() }, &secret).await {
        Ok(created) => from_secret(namespace, name, &created, true),
        Err(e) if ApiErrorClass::of(&e) == ApiErrorClass::AlreadyExists => {
            tracing::info!(secret = %format!("{namespace}/{name}"), "another replica created the webhook certificate Secret first; using theirs");
            let theirs = api.get(name).await.map_err(read)?;
            from_secret(namespace, name, &theirs, false)
        }
        Err(source) => Err(Error::Create { namespace: namespace.into(), name: name.into(), source }),
    }
}

fn from_secret(namespace: &str, name: &str, secret: &Secret, created: bool) -> Result<SharedPair, Error> {
    let data = secret.data.clone().unwrap_or_default();
    let text = |key: &str| data.get(key).map(|b| String::from_utf8_lossy(&b.0).into_owned()).filter(|s| !s.is_empty());
    let missing = |key| Error::MissingKey { namespace: namespace.into(), name: name.into(), key };
    let cert_pem = text("tls.crt").ok_or_else(|| missing("tls.crt"))?;
    let key_pem = text("tls.key").ok_or_else(|| missing("tls.key"))?;
    // A self-signed pair is its own CA; cert-manager adds ca.crt for a CA-issued one.
    let ca_pem = text("ca.crt").unwrap_or_else(|| cert_pem.clone());
    Ok(SharedPair { cert: ServingCert::from_pem(cert_pem, key_pem), ca_pem, created })
}
