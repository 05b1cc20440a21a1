//! Plugins from OCI registries: `--plugin oci://REGISTRY/REPO:TAG` (or
//! `@sha256:DIGEST`) and `host push`.
//!
//! A plugin is always pulled by digest: a tag is resolved to a manifest
//! digest once ([`Puller::resolve`]), then that digest is pulled, the
//! manifest's bytes are hashed and compared with it, the manifest must be a
//! Wasm artifact ([`layout`]), and the one layer's bytes are hashed and
//! compared with the layer digest the manifest names. Pulled blobs are kept
//! on disk by digest ([`cache`]) and hashed again whenever they are read.
//! Registry credentials come from a docker config JSON ([`credentials`]).
//! Plain HTTP is used only for loopback registries (`127.0.0.0/8`, `::1`,
//! `localhost`) and the hosts given as insecure; everything else is HTTPS.
//!
//! The hot-swap side (`operator-plugin-sources`, `hotswap::oci::watch`) re-resolves tags at an interval and hands a changed digest to
//! the hot-swap path as a new version; [`cosign`] finds and verifies the
//! signatures the cosign CLI attaches to a manifest digest.
//!
//! The client is `oci-client` (the ORAS project's Rust client, formerly
//! oci-distribution), which speaks the distribution API and its token
//! auth; digests, layouts and the cache are checked here.

pub mod cache;
pub mod cosign;
mod cosign_bundle;
pub mod credentials;
pub mod layout;
pub mod reference;

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::Mutex;
use std::time::Duration;

use futures::StreamExt;

pub use credentials::Credentials;
pub use reference::{Digest, Reference};

/// The largest plugin layer pulled; gzipped plugins inflate to the same bound.
pub const MAX_LAYER_BYTES: u64 = 64 << 20;
/// The largest manifest read.
const MAX_MANIFEST_BYTES: usize = 4 << 20;

/// Why a plugin could not be resolved, pulled or pushed.
#[derive(Debug, thiserror::Error)]
pub enum OciError {
    #[error("registry {registry}: {detail}")]
    Registry { registry: String, detail: String },
    #[error("{reference}: the manifest the registry sent does not hash to {expected} ({actual}): refused (a tampered or substituted manifest)")]
    ManifestDigestMismatch { reference: String, expected: Digest, actual: String },
    #[error("{reference}: layer {expected} hashes to {actual}: refused (a tampered or substituted blob)")]
    LayerDigestMismatch { reference: String, expected: Digest, actual: Digest },
    #[error("{reference}: layer {digest} is {actual} bytes, the manifest says {expected}")]
    LayerSize { reference: String, digest: Digest, expected: u64, actual: u64 },
    #[error("{reference}: the plugin layer is {size} bytes, more than the {max} MiB a plugin may be", max = MAX_LAYER_BYTES >> 20)]
    TooLarge { reference: String, size: u64 },
    #[error("{reference} is not a Wasm plugin artifact: {source}")]
    Layout {
        reference: String,
        #[source]
        source: layout::LayoutError,
    },
    #[error("{reference}: the registry sent no usable digest for the tag ({detail})")]
    NoDigest { reference: String, detail: String },
    #[error("OCI cache {dir}: {source}")]
    Cache {
        dir: PathBuf,
        #[source]
        source: std::io::Error,
    },
}

impl OciError {
    /// The `reason` label for metrics.
    pub fn label(&self) -> &'static str {
        match self {
            OciError::Registry { .. } | OciError::NoDigest { .. } => "registry",
            OciError::ManifestDigestMismatch { .. } | OciError::LayerDigestMismatch { .. } | OciError::LayerSize { .. } => "digest_mismatch",
            OciError::TooLarge { .. } | OciError::Layout { .. } => "not_a_plugin",
            OciError::Cache { .. } => "cache",
        }
    }
}

/// A plugin pulled and verified.
#[derive(Clone, Debug)]
pub struct Pulled {
    /// The manifest digest (`sha256:...`): the version, what cosign signs.
    pub digest: String,
    /// The component's bytes (the layer, verified against its digest).
    pub component: Vec<u8>,
    /// The layer's digest and media type.
    pub layer_digest: String,
    pub media_type: String,
    /// The reference as given (a tag, or a digest).
    pub reference: Reference,
    /// Whether the bytes came from the disk cache.
    pub cached: bool,
}

/// How a [`Puller`] reaches registries.
#[derive(Clone, Debug)]
pub struct PullerOptions {
    pub cache_dir: PathBuf,
    pub credentials: Credentials,
    /// Registries (`host` or `host:port`) reached over plain HTTP besides loopback ones.
    pub insecure: Vec<String>,
    pub connect_timeout: Duration,
    pub read_timeout: Duration,
}

impl Default for PullerOptions {
    fn default() -> Self {
        Self {
            cache_dir: cache::default_dir(),
            credentials: Credentials::default(),
            insecure: vec![],
            connect_timeout: Duration::from_secs(10),
            read_timeout: Duration::from_secs(120),
        }
    }
}

/// Resolves, pulls (and pushes) plugins; one client per registry.
pub struct Puller {
    options: PullerOptions,
    cache: cache::BlobCache,
    clients: Mutex<HashMap<String, oci_client::Client>>,
}

/// Whether `registry` may be spoken to over plain HTTP.
pub fn plain_http_allowed(registry: &str, insecure: &[String]) -> bool {
    let host = reference::host_of(registry);
    let loopback = host == "localhost" || host.parse::<std::net::IpAddr>().is_ok_and(|ip| ip.is_loopback());
    loopback || insecure.iter().any(|i| i == registry || i == host)
}

impl Puller {
    pub fn new(options: PullerOptions) -> Self {
        // The client's TLS is rustls without a built-in provider: ring, as
        // the rest of the host. Already installed is fine.
        let _ = rustls::crypto::ring::default_provider().install_default();
        Self { cache: cache::BlobCache::new(&options.cache_dir), options, clients: Mutex::new(HashMap::new()) }
    }

    pub fn options(&self) -> &PullerOptions {
        &self.options
    }

    pub(crate) fn client(&self, registry: &str) -> oci_client::Client {
        let mut clients = self.clients.lock().expect("the client map is never poisoned");
        clients
            .entry(registry.to_string())
            .or_insert_with(|| {
                let protocol = if plain_http_allowed(registry, &self.options.insecure) {
                    oci_client::client::ClientProtocol::HttpsExcept(vec![registry.to_string()])
                } else {
                    oci_client::client::ClientProtocol::Https
                };
                oci_client::Client::new(oci_client::client::ClientConfig {
                    protocol,
                    connect_timeout: Some(self.options.connect_timeout),
                    read_timeout: Some(self.options.read_timeout),
                    // A plugin is one artifact: an index is refused, not resolved.
                    platform_resolver: None,
                    ..Default::default()
                })
            })
            .clone()
    }

    pub(crate) fn registry_error(r: &Reference, e: impl std::fmt::Display) -> OciError {
        OciError::Registry { registry: r.registry.clone(), detail: format!("{r}: {e}") }
    }

    pub(crate) fn auth(&self, r: &Reference) -> oci_client::secrets::RegistryAuth {
        self.options.credentials.auth(&r.registry)
    }

    /// The manifest digest `r` names now: its own digest, or what its tag
    /// points to in the registry.
    pub async fn resolve(&self, r: &Reference) -> Result<Digest, OciError> {
        if let Some(d) = &r.digest {
            return Ok(d.clone());
        }
        let client = self.client(&r.registry);
        let header = client.fetch_manifest_digest(&r.to_client(), &self.auth(r)).await.map_err(|e| Self::registry_error(r, e))?;
        header.parse().map_err(|detail| OciError::NoDigest { reference: r.to_string(), detail })
    }

    /// Resolves `r` and pulls that digest (from the cache when it holds it).
    pub async fn pull(&self, r: &Reference) -> Result<Pulled, OciError> {
        let digest = self.resolve(r).await?;
        self.pull_digest(r, &digest).await
    }

    /// Pulls the manifest `digest` of `r`'s repository, verified.
    pub async fn pull_digest(&self, r: &Reference, digest: &Digest) -> Result<Pulled, OciError> {
        let by_digest = r.at(digest);
        let (manifest, from_cache) = match self.cache.get(digest) {
            Some(m) => (m, true),
            None => (self.fetch_manifest(&by_digest, digest).await?, false),
        };
        let (layer, layer_digest) = layout::component_layer(&manifest).map_err(|source| OciError::Layout { reference: r.to_string(), source })?;
        if layer.size > MAX_LAYER_BYTES {
            return Err(OciError::TooLarge { reference: r.to_string(), size: layer.size });
        }
        let (component, cached) = match self.cache.get(&layer_digest) {
            Some(c) => (c, from_cache),
            None => (self.fetch_layer(&by_digest, &layer, &layer_digest).await?, false),
        };
        if component.len() as u64 != layer.size {
            return Err(OciError::LayerSize { reference: r.to_string(), digest: layer_digest, expected: layer.size, actual: component.len() as u64 });
        }
        for (d, bytes) in [(&layer_digest, &component), (digest, &manifest)] {
            self.cache.put(d, bytes).map_err(|source| OciError::Cache { dir: self.cache.dir().to_path_buf(), source })?;
        }
        Ok(Pulled {
            digest: digest.to_string(),
            component,
            layer_digest: layer_digest.to_string(),
            media_type: layer.media_type,
            reference: r.clone(),
            cached,
        })
    }

    async fn fetch_manifest(&self, by_digest: &Reference, digest: &Digest) -> Result<Vec<u8>, OciError> {
        let client = self.client(&by_digest.registry);
        let accepted = [layout::OCI_MANIFEST, layout::DOCKER_MANIFEST, layout::OCI_INDEX];
        let (bytes, _) = client.pull_manifest_raw(&by_digest.to_client(), &self.auth(by_digest), &accepted).await.map_err(|e| match e {
            // The client checks the bytes against the digest asked for too.
            oci_client::errors::OciDistributionError::DigestError(e) => {
                OciError::ManifestDigestMismatch { reference: by_digest.to_string(), expected: digest.clone(), actual: e.to_string() }
            }
            e => Self::registry_error(by_digest, e),
        })?;
        if bytes.len() > MAX_MANIFEST_BYTES {
            return Err(Self::registry_error(by_digest, format!("a manifest of {} bytes is no plugin manifest", bytes.len())));
        }
        let actual = Digest::of(&bytes);
        if actual != *digest {
            return Err(OciError::ManifestDigestMismatch {
                reference: by_digest.to_string(),
                expected: digest.clone(),
                actual: format!("it hashes to {actual}"),
            });
        }
        Ok(bytes.to_vec())
    }

    async fn fetch_layer(&self, by_digest: &Reference, layer: &layout::Descriptor, digest: &Digest) -> Result<Vec<u8>, OciError> {
        let client = self.client(&by_digest.registry);
        let wanted = oci_client::manifest::OciDescriptor {
            media_type: layer.media_type.clone(),
            digest: layer.digest.clone(),
            size: layer.size as i64,
            ..Default::default()
        };
        let mut stream = client.pull_blob_stream(&by_digest.to_client(), &wanted).await.map_err(|e| Self::registry_error(by_digest, e))?;
        let mut bytes = Vec::with_capacity(layer.size as usize);
        while let Some(chunk) = stream.next().await {
            let chunk = chunk.map_err(|e| {
                // The client hashes while streaming and fails the stream on a mismatch.
                if e.to_string().to_ascii_lowercase().contains("digest") {
                    OciError::LayerDigestMismatch { reference: by_digest.to_string(), expected: digest.clone(), actual: Digest::of(&bytes) }
                } else {
                    Self::registry_error(by_digest, e)
                }
            })?;
            bytes.extend_from_slice(&chunk);
            if bytes.len() as u64 > layer.size.max(1) || bytes.len() as u64 > MAX_LAYER_BYTES {
                return Err(OciError::LayerSize {
                    reference: by_digest.to_string(),
                    digest: digest.clone(),
                    expected: layer.size,
                    actual: bytes.len() as u64,
                });
            }
        }
        let actual = Digest::of(&bytes);
        if actual != *digest {
            return Err(OciError::LayerDigestMismatch { reference: by_digest.to_string(), expected: digest.clone(), actual });
        }
        Ok(bytes)
    }

    /// Pushes `component` to `r` (which must name a tag) in the CNCF layout;
    /// the manifest digest.
    pub async fn push(&self, component: &[u8], r: &Reference) -> Result<Digest, OciError> {
        let Some(tag) = &r.tag else {
            return Err(Self::registry_error(r, "push to a tag (oci://REGISTRY/REPOSITORY:TAG), not a digest"));
        };
        let created = chrono::Utc::now().to_rfc3339_opts(chrono::SecondsFormat::Secs, true);
        let artifact = layout::cncf_artifact(component, &created);
        let client = self.client(&r.registry);
        let target = r.with_tag(tag).to_client();
        client.auth(&target, &self.auth(r), oci_client::RegistryOperation::Push).await.map_err(|e| Self::registry_error(r, e))?;
        client.push_blob(&target, artifact.config.clone(), artifact.config_digest.as_str()).await.map_err(|e| Self::registry_error(r, e))?;
        client.push_blob(&target, component.to_vec(), artifact.layer_digest.as_str()).await.map_err(|e| Self::registry_error(r, e))?;
        let content_type = http::HeaderValue::from_static(layout::OCI_MANIFEST);
        client.push_manifest_raw(&target, artifact.manifest.clone(), content_type).await.map_err(|e| Self::registry_error(r, e))?;
        Ok(artifact.manifest_digest)
    }
}

/// How an operator promotes a staged OCI candidate (`REPO:TAG.candidate`
/// beside `REPO:TAG`): by moving the running tag to the candidate's manifest.
/// The host never writes to a registry.
pub fn promote_command(candidate: &Reference, active_id: &str, _component_digest: &str) -> String {
    let active_tag = active_id.parse::<Reference>().ok().and_then(|a| a.tag).unwrap_or_else(|| "TAG".into());
    let source = match (&candidate.tag, &candidate.digest) {
        (_, Some(d)) => format!("{}/{}@{d}", candidate.registry, candidate.repository),
        (Some(t), None) => format!("{}/{}:{t}", candidate.registry, candidate.repository),
        (None, None) => format!("{}/{}", candidate.registry, candidate.repository),
    };
    format!("oras tag {source} {active_tag}")
}
