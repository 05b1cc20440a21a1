//! Admission webhooks for a real cluster: each plugin's `default` and
//! `validate` served as `admission.k8s.io/v1` AdmissionReview over HTTPS, at
//! kubebuilder's paths:
//!
//! ```text
//! /mutate-<group with dots as dashes>-<version>-<kind lowercase>
//! /validate-<group with dots as dashes>-<version>-<kind lowercase>
//! ```
//!
//! e.g. `/validate-batch-tutorial-kubebuilder-io-v1-cronjob`. As with
//! controller-runtime, the certificate comes from a directory holding
//! `tls.crt` and `tls.key` (cert-manager's secret layout; `ca.crt` beside
//! them, when there, is the CA bundle), read again when the files change
//! (a rotated Secret). When the directory holds neither file, the host
//! generates a self-signed pair in memory ([`ServingCert::generate`]; names:
//! `localhost`, `127.0.0.1` and each `--webhook-host`) and writes only the
//! certificate, the configuration's `caBundle`, to `<dir>/generated/ca.crt`;
//! the key never leaves the process, and a restart makes a new pair. A
//! generated pair can instead be shared by replicas through a Secret
//! ([`cert_secret`]). The Mutating/ValidatingWebhookConfiguration objects
//! are deployment manifests, or written by the host itself
//! ([`configuration`], `run --webhook-configure`). On the embedded cluster
//! the same plugin calls are in-process admission hooks instead (the `host`
//! crate's `embedded` module).
//!
//! A failing plugin call refuses the request (the configuration's
//! `failurePolicy` decides what the API server does when the webhook itself
//! cannot be reached).

use operator_api::api_error;
use operator_api::error_chain;
use operator_controller as controller;
use operator_controller::actions;
use operator_metrics as metrics;
use operator_metrics::http;
use operator_sandbox as sandbox;
use operator_sandbox::registry;

pub mod cert_secret;
pub mod configuration;
pub mod scale;

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use base64::Engine;
use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use kube::api::DynamicObject;
use kube::core::admission::{AdmissionRequest, AdmissionResponse, AdmissionReview, Operation};
use serde_json::Value;

use crate::controller::validity::invalid_message;
use crate::sandbox::LoadedPlugin;

/// The path of a plugin's webhook of `kind` (`mutate` or `validate`).
pub fn path_for(kind: &str, plugin: &LoadedPlugin) -> String {
    let p = &plugin.manifest().parent;
    format!("/{kind}-{}-{}-{}", p.group.replace('.', "-"), p.version, p.kind.to_lowercase())
}

/// Answers one AdmissionReview sent to `path`, calling the plugin that
/// serves it (on the calling thread: wrap in `spawn_blocking`). Request and
/// response are kube's `admission.k8s.io/v1` types.
pub fn review(plugins: &[LoadedPlugin], path: &str, body: &[u8]) -> AdmissionReview<DynamicObject> {
    let request: AdmissionRequest<DynamicObject> = match serde_json::from_slice::<AdmissionReview<DynamicObject>>(body).map(TryInto::try_into) {
        Ok(Ok(request)) => request,
        Ok(Err(e)) => return AdmissionResponse::invalid(format!("cannot decode AdmissionReview: {e}")).into_review(),
        Err(e) => return AdmissionResponse::invalid(format!("cannot decode AdmissionReview: {e}")).into_review(),
    };
    answer(plugins, path, &request).into_review()
}

/// The review as the API server reads it. `admission.k8s.io/v1` declares
/// `response.patch` as `[]byte`, which is base64 text in JSON (the form the
/// Kubernetes docs specify); kube's type serializes its `Vec<u8>` as an array
/// of numbers instead (kube-rs/kube#1781), so the patch is re-encoded here.
pub fn to_wire(review: &AdmissionReview<DynamicObject>) -> Vec<u8> {
    let mut value = serde_json::to_value(review).expect("an AdmissionReview serializes");
    if let Some(patch) = value.pointer_mut("/response/patch")
        && let Some(bytes) = patch.as_array().map(|a| a.iter().filter_map(|b| b.as_u64().and_then(|b| u8::try_from(b).ok())).collect::<Vec<u8>>())
    {
        *patch = Value::String(base64::engine::general_purpose::STANDARD.encode(bytes));
    }
    serde_json::to_vec(&value).expect("JSON values serialize")
}

fn answer(plugins: &[LoadedPlugin], path: &str, request: &AdmissionRequest<DynamicObject>) -> AdmissionResponse {
    let allowed = AdmissionResponse::from(request);
    let deny = |code: u16, message: String| {
        let mut denied = AdmissionResponse::from(request).deny(message);
        denied.result.code = code;
        denied
    };
    let mutate = plugins.iter().find(|p| path_for("mutate", p) == path);
    let validate = plugins.iter().find(|p| path_for("validate", p) == path);
    if mutate.is_none() && validate.is_none() {
        return deny(404, format!("no webhook at {path}"));
    }
    if matches!(request.operation, Operation::Delete | Operation::Connect) {
        return allowed;
    }
    let Some(object) = &request.object else {
        return deny(400, format!("a {:?} review without an object", request.operation));
    };
    let value = serde_json::to_value(object).expect("objects serialize");
    if let Some(plugin) = mutate {
        return match plugin.default_blocking(&value.to_string()) {
            Ok(defaulted) => {
                let patch = json_patch::diff(&value, &defaulted);
                if patch.0.is_empty() {
                    return allowed;
                }
                match allowed.with_patch(patch) {
                    Ok(patched) => patched,
                    Err(e) => deny(500, format!("defaulting failed: {e}")),
                }
            }
            Err(e) => deny(403, format!("defaulting failed: {e}")),
        };
    }
    let plugin = validate.expect("one of the two matched");
    let old = request.old_object.as_ref().map(|o| serde_json::to_string(o).expect("objects serialize"));
    match plugin.validate_blocking(&value.to_string(), old.as_deref()) {
        Ok(errors) if errors.is_empty() => {
            if request.operation == Operation::Create && !request.dry_run {
                plugin.found_valid_on_create(object.metadata.uid.as_deref().unwrap_or_default(), object.metadata.generation);
            }
            allowed
        }
        Ok(errors) => {
            let parent = &plugin.manifest().parent;
            let name = object.metadata.name.as_deref().unwrap_or(&request.name);
            deny(422, invalid_message(&parent.group, &parent.kind, name, &errors))
        }
        Err(e) => deny(403, format!("validation failed: {e}")),
    }
}

/// The review to answer: `body`, or for a `/scale` review its parent's
/// ([`scale::as_parent_review`]); a parent that cannot be read refuses the
/// request (500, with why), as a failed plugin call does.
async fn parent_review(
    client: Option<&kube::Client>,
    plugins: &[LoadedPlugin],
    path: &str,
    body: Bytes,
) -> Result<Bytes, AdmissionReview<DynamicObject>> {
    let converted = match client {
        Some(client) => scale::as_parent_review(client, plugins, path, &body).await,
        None => match serde_json::from_slice::<Value>(&body) {
            Ok(review) if review.pointer("/request/subResource") == Some(&Value::from("scale")) => Err(scale::Error::NoClient),
            _ => Ok(None),
        },
    };
    match converted {
        Ok(Some(parent)) => Ok(Bytes::from(parent)),
        Ok(None) => Ok(body),
        Err(e) => {
            let message = error_chain(&e);
            tracing::warn!(error = %message, "scale review refused");
            // kube implements `TryInto` (not `TryFrom`) from a review to its request.
            let request: Option<AdmissionRequest<DynamicObject>> =
                serde_json::from_slice::<AdmissionReview<DynamicObject>>(&body).ok().and_then(|r| r.try_into().ok());
            let mut refused = match request {
                Some(request) => AdmissionResponse::from(&request).deny(message),
                None => AdmissionResponse::invalid(message),
            };
            refused.result.code = 500;
            Err(refused.into_review())
        }
    }
}

/// The code an answer carries: its result's; without one, 200 when it
/// allows and 400 for a review that could not be decoded
/// ([`AdmissionResponse::invalid`]).
fn result_code(response: &AdmissionResponse) -> u16 {
    match response.result.code {
        0 if response.allowed => 200,
        0 if response.result.reason == "InvalidRequest" => 400,
        0 => 500,
        code => code,
    }
}

/// Why the webhook server could not start.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("{present} is there but {missing} is not: give both, or neither to have a self-signed pair generated")]
    HalfAPair { present: String, missing: String },
    #[error("cannot generate a self-signed certificate")]
    Generate(#[from] rcgen::Error),
    #[error("cannot read {path}")]
    Pem {
        path: String,
        #[source]
        source: rustls::pki_types::pem::Error,
    },
    #[error("invalid certificate or key")]
    Tls(#[from] rustls::Error),
    #[error("cannot listen")]
    Io(#[from] std::io::Error),
}

/// Where the CA bundle of a generated certificate is written, under the
/// certificate directory.
pub const GENERATED_CA: &str = "generated/ca.crt";

/// The webhook's serving certificate chain and key, as PEM.
pub struct ServingCert {
    pub cert_pem: String,
    key_pem: String,
}

impl std::fmt::Debug for ServingCert {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ServingCert").field("cert_pem", &self.cert_pem).finish_non_exhaustive()
    }
}

impl ServingCert {
    /// A new self-signed certificate (ECDSA P-256) for `localhost`,
    /// `127.0.0.1` and `hosts` (DNS names or IP addresses, e.g. the webhook
    /// Service's `name.namespace.svc`).
    pub fn generate(hosts: &[String]) -> Result<Self, Error> {
        let mut names = vec!["localhost".to_string(), "127.0.0.1".to_string()];
        names.extend(hosts.iter().filter(|h| !names.contains(h)).cloned().collect::<Vec<_>>());
        let mut params = rcgen::CertificateParams::new(names)?;
        params.distinguished_name.push(rcgen::DnType::CommonName, "operator-host webhook");
        let key = rcgen::KeyPair::generate()?;
        let cert = params.self_signed(&key)?;
        Ok(Self { cert_pem: cert.pem(), key_pem: key.serialize_pem() })
    }

    /// A pair given as PEM text (e.g. read from a Secret).
    pub fn from_pem(cert_pem: String, key_pem: String) -> Self {
        Self { cert_pem, key_pem }
    }

    /// The private key, PEM (to write a pair to files).
    pub fn key_pem(&self) -> &str {
        &self.key_pem
    }

    /// `dir/tls.crt` and `dir/tls.key` as they are.
    pub fn read(dir: &Path) -> Result<Self, Error> {
        let read = |name: &str| {
            let path = dir.join(name);
            std::fs::read_to_string(&path).map_err(|e| Error::Pem { path: path.display().to_string(), source: rustls::pki_types::pem::Error::Io(e) })
        };
        Ok(Self { cert_pem: read("tls.crt")?, key_pem: read("tls.key")? })
    }

    /// The pair in `dir`, or a generated one when `dir` holds neither file.
    /// A generated certificate is written to `dir/`[`GENERATED_CA`] (or,
    /// when `dir` is not writable, to the temp directory) and the path is
    /// returned with it.
    pub fn read_or_generate(dir: &Path, hosts: &[String]) -> Result<(Self, Option<PathBuf>), Error> {
        let (crt, key) = (dir.join("tls.crt"), dir.join("tls.key"));
        match (crt.exists(), key.exists()) {
            (true, true) => return Ok((Self::read(dir)?, None)),
            (true, false) => return Err(Error::HalfAPair { present: crt.display().to_string(), missing: key.display().to_string() }),
            (false, true) => return Err(Error::HalfAPair { present: key.display().to_string(), missing: crt.display().to_string() }),
            (false, false) => {}
        }
        let cert = Self::generate(hosts)?;
        let write = |path: PathBuf| -> std::io::Result<PathBuf> {
            std::fs::create_dir_all(path.parent().expect("a file path has a parent"))?;
            std::fs::write(&path, &cert.cert_pem)?;
            Ok(path)
        };
        let fallback = std::env::temp_dir().join(format!("operator-host-{}", std::process::id())).join("webhook-ca.crt");
        let written = write(dir.join(GENERATED_CA)).or_else(|e| {
            tracing::warn!(dir = %dir.display(), error = %e, "cannot write the generated CA bundle there; using the temp directory");
            write(fallback)
        })?;
        Ok((cert, Some(written)))
    }

    /// The rustls server configuration serving this pair (HTTP/1.1).
    pub fn tls_config(&self) -> Result<rustls::ServerConfig, Error> {
        use rustls::pki_types::pem::PemObject;
        use rustls::pki_types::{CertificateDer, PrivateKeyDer};
        fn pem(what: &'static str) -> impl Fn(rustls::pki_types::pem::Error) -> Error {
            move |source| Error::Pem { path: what.to_string(), source }
        }
        let certs = CertificateDer::pem_slice_iter(self.cert_pem.as_bytes()).collect::<Result<Vec<_>, _>>().map_err(pem("the certificate"))?;
        let key = PrivateKeyDer::from_pem_slice(self.key_pem.as_bytes()).map_err(pem("the key"))?;
        server_config(certs, key)
    }
}

/// TLS configuration from `dir/tls.crt` and `dir/tls.key`.
pub fn tls_config(dir: &Path) -> Result<rustls::ServerConfig, Error> {
    ServingCert::read(dir)?.tls_config()
}

fn server_config(
    certs: Vec<rustls::pki_types::CertificateDer<'static>>,
    key: rustls::pki_types::PrivateKeyDer<'static>,
) -> Result<rustls::ServerConfig, Error> {
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let mut config = rustls::ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()?
        .with_no_client_auth()
        .with_single_cert(certs, key)?;
    config.alpn_protocols = vec![b"http/1.1".to_vec()];
    Ok(config)
}

/// The CA bundle of the pair in `dir`: `ca.crt` when it is there (a
/// CA-issued certificate, as cert-manager writes it), else `tls.crt` (a
/// self-signed certificate is its own CA).
pub fn ca_bundle_in(dir: &Path) -> Result<String, Error> {
    let path = if dir.join("ca.crt").exists() { dir.join("ca.crt") } else { dir.join("tls.crt") };
    std::fs::read_to_string(&path).map_err(|e| Error::Pem { path: path.display().to_string(), source: rustls::pki_types::pem::Error::Io(e) })
}

/// How often a certificate directory is read for a rotated pair (as
/// controller-runtime's certwatcher polls, besides its file events).
pub const CERT_POLL_INTERVAL: Duration = Duration::from_secs(10);

/// Where the serving certificate comes from.
#[derive(Debug)]
pub enum Certificate {
    /// `tls.crt`/`tls.key` in `dir`, read again every `poll` when they
    /// change; or, with neither file there, a pair generated for `hosts`
    /// (see [`ServingCert::read_or_generate`]).
    Dir { dir: PathBuf, hosts: Vec<String>, poll: Duration },
    /// A pair held as it is, with its CA bundle (e.g. from [`cert_secret`]).
    Pair { cert: ServingCert, ca_pem: String },
}

/// A webhook server running.
#[derive(Debug)]
pub struct Serving {
    pub addr: SocketAddr,
    pub task: tokio::task::JoinHandle<()>,
    /// The CA bundle (PEM) of the certificate served now; changes when a
    /// rotated pair is read from the certificate directory.
    pub ca_pem: tokio::sync::watch::Receiver<Arc<str>>,
}

/// Serves the webhooks of the plugins in `registry` (read per request, so
/// hot swaps apply) over HTTPS on `addr` until `shutdown`, with the pair in
/// `cert_dir` or a generated one valid for `hosts` (see
/// [`ServingCert::read_or_generate`]). Each answer is counted in
/// `controller_runtime_webhook_requests_total{webhook, code}` on `metrics`.
/// `parents` reads the parent of a `/scale` review ([`scale`]); until it
/// holds a client such a review is refused.
pub async fn serve(
    addr: SocketAddr,
    cert_dir: &Path,
    hosts: &[String],
    registry: crate::registry::Registry,
    metrics: Arc<crate::metrics::Metrics>,
    parents: scale::Parents,
    shutdown: impl std::future::Future<Output = ()> + Send + 'static,
) -> Result<(SocketAddr, tokio::task::JoinHandle<()>), Error> {
    let listener = tokio::net::TcpListener::bind(addr).await?;
    let certificate = Certificate::Dir { dir: cert_dir.to_path_buf(), hosts: hosts.to_vec(), poll: CERT_POLL_INTERVAL };
    let serving = serve_on(listener, certificate, registry, metrics, parents, shutdown)?;
    Ok((serving.addr, serving.task))
}

/// [`serve`] on a listener bound beforehand (the host binds its ports before
/// anything is announced, and may need the API to get its certificate).
pub fn serve_on(
    listener: tokio::net::TcpListener,
    certificate: Certificate,
    registry: crate::registry::Registry,
    metrics: Arc<crate::metrics::Metrics>,
    parents: scale::Parents,
    shutdown: impl std::future::Future<Output = ()> + Send + 'static,
) -> Result<Serving, Error> {
    let (cert, ca_pem, watched_dir) = match certificate {
        Certificate::Dir { dir, hosts, poll } => {
            let (cert, generated) = ServingCert::read_or_generate(&dir, &hosts)?;
            match generated {
                Some(ca_bundle) => {
                    tracing::info!(
                        ca_bundle = %ca_bundle.display(),
                        hosts = ?hosts,
                        "no tls.crt/tls.key in {}: generated a self-signed certificate; use the CA bundle file as the webhook configuration's caBundle",
                        dir.display()
                    );
                    let ca_pem = cert.cert_pem.clone();
                    (cert, ca_pem, None)
                }
                None => {
                    tracing::info!(cert_dir = %dir.display(), "webhook certificate from tls.crt/tls.key");
                    let ca_pem = ca_bundle_in(&dir)?;
                    (cert, ca_pem, Some((dir, poll)))
                }
            }
        }
        Certificate::Pair { cert, ca_pem } => (cert, ca_pem, None),
    };
    let (tls_tx, tls) = tokio::sync::watch::channel(Arc::new(cert.tls_config()?));
    let (ca_tx, ca_rx) = tokio::sync::watch::channel(Arc::<str>::from(ca_pem.as_str()));
    let bound = listener.local_addr()?;
    for p in registry.all().iter() {
        tracing::info!(plugin = p.name(), mutate = %path_for("mutate", p), validate = %path_for("validate", p), "serving admission webhooks");
    }
    let rotation = watched_dir.map(|(dir, poll)| tokio::spawn(watch_dir(dir, poll, cert, ca_pem, tls_tx, ca_tx)));
    let task = tokio::spawn(async move {
        http::serve(listener, shutdown, |stream| {
            // The pair served now: a rotated one takes over from the next connection on.
            let acceptor = tokio_rustls::TlsAcceptor::from(tls.borrow().clone());
            let registry = registry.clone();
            let metrics = metrics.clone();
            let parents = parents.clone();
            async move {
                let Ok(tls) = acceptor.accept(stream).await else { return };
                let service = hyper::service::service_fn(move |req: hyper::Request<hyper::body::Incoming>| {
                    let registry = registry.clone();
                    let metrics = metrics.clone();
                    let parents = parents.clone();
                    async move {
                        let path = req.uri().path().to_string();
                        let body = req.into_body().collect().await.map(|b| b.to_bytes()).unwrap_or_default();
                        let answered = path.clone();
                        let answer = match parent_review(parents.get(), &registry.all(), &path, body).await {
                            Ok(body) => tokio::task::spawn_blocking(move || review(&registry.all(), &answered, &body)).await.unwrap_or_else(|e| {
                                let mut failed = AdmissionResponse::invalid(format!("webhook failed: {e}"));
                                failed.result.code = 500;
                                failed.into_review()
                            }),
                            Err(refused) => refused,
                        };
                        metrics.webhook_request(&path, answer.response.as_ref().map_or(500, result_code));
                        let bytes = Bytes::from(to_wire(&answer));
                        Ok::<_, std::convert::Infallible>(
                            hyper::Response::builder().header("content-type", "application/json").body(Full::new(bytes)).expect("valid response"),
                        )
                    }
                });
                http::serve_http1(tls, service).await;
            }
        })
        .await;
        if let Some(r) = rotation {
            r.abort();
        }
    });
    Ok(Serving { addr: bound, task, ca_pem: ca_rx })
}

/// Reads `dir` every `poll`; a changed, usable pair is served from the next
/// connection on and its CA bundle published. A pair caught half-written
/// (or otherwise unusable) is logged and the served one kept.
async fn watch_dir(
    dir: PathBuf,
    poll: Duration,
    mut cert: ServingCert,
    mut ca_pem: String,
    tls: tokio::sync::watch::Sender<Arc<rustls::ServerConfig>>,
    ca: tokio::sync::watch::Sender<Arc<str>>,
) {
    loop {
        tokio::time::sleep(poll).await;
        let read = ServingCert::read(&dir).and_then(|new| Ok((ca_bundle_in(&dir)?, new)));
        let (new_ca, new) = match read {
            Ok(read) => read,
            Err(e) => {
                tracing::warn!(cert_dir = %dir.display(), error = %crate::error_chain(&e), "cannot read the webhook certificate; serving the previous one");
                continue;
            }
        };
        if new.cert_pem == cert.cert_pem && new.key_pem == cert.key_pem && new_ca == ca_pem {
            continue;
        }
        match new.tls_config() {
            Ok(config) => {
                tracing::info!(cert_dir = %dir.display(), "webhook certificate changed: serving the new one");
                tls.send_replace(Arc::new(config));
                ca.send_replace(Arc::from(new_ca.as_str()));
                (cert, ca_pem) = (new, new_ca);
            }
            Err(e) => {
                tracing::warn!(cert_dir = %dir.display(), error = %crate::error_chain(&e), "the new webhook certificate is unusable; serving the previous one")
            }
        }
    }
}
