//! Cosign key-based verification of a plugin's manifest digest: the
//! signatures `cosign sign --key cosign.key` attaches to an artifact in its
//! registry, checked against the public keys `cosign generate-key-pair`
//! writes (`cosign.pub`: ECDSA P-256, PEM `PUBLIC KEY`).
//!
//! Where cosign puts a signature, both forms are read:
//! - the tag `sha256-<hex>.sig` in the artifact's repository: an image
//!   manifest whose layers (`application/vnd.dev.cosign.simplesigning.v1+json`)
//!   are simple-signing payloads, each with its signature in the annotation
//!   `dev.cosignproject.cosign/signature` (base64 DER ECDSA over the payload's
//!   SHA-256); cosign 2's default, `--new-bundle-format=false` in cosign 3;
//! - a Sigstore bundle (`application/vnd.dev.sigstore.bundle.v0.3+json`)
//!   attached as an OCI 1.1 referrer, found through the referrers tag
//!   `sha256-<hex>` (the fallback a registry without the referrers API
//!   gets): cosign 3's default.
//!
//! A signature counts only if it verifies with a trusted key AND what it
//! signs names the manifest digest being admitted: a valid signature of
//! another artifact is no signature of this one. The transparency log is
//! not consulted (key-based signing with `--tlog-upload=false`).

use std::path::{Path, PathBuf};

use base64::Engine;
use p256::ecdsa::signature::Verifier;
use p256::ecdsa::{Signature as EcdsaSignature, VerifyingKey};
use p256::pkcs8::DecodePublicKey;

use super::{Digest, OciError, Puller, Reference, layout};

pub const SIMPLE_SIGNING: &str = "application/vnd.dev.cosign.simplesigning.v1+json";
pub const SIGNATURE_ANNOTATION: &str = "dev.cosignproject.cosign/signature";
pub const BUNDLE: &str = "application/vnd.dev.sigstore.bundle.v0.3+json";
/// The `type` of a simple-signing payload cosign writes.
const PAYLOAD_TYPE: &str = "cosign container image signature";

/// A cosign public key, with the file it came from.
#[derive(Clone, Debug)]
pub struct PublicKey {
    pub path: PathBuf,
    key: VerifyingKey,
}

/// Reads a `cosign.pub` (PEM `PUBLIC KEY`, ECDSA P-256).
pub fn read_key(path: &Path) -> Result<PublicKey, String> {
    let pem = std::fs::read_to_string(path).map_err(|e| format!("cannot read cosign key {}: {e}", path.display()))?;
    parse_key(&pem, path)
}

/// A `cosign.pub` given as text; `name` says where it came from in messages
/// (a file, or a field such as `spec.trust.cosignKeys[0]`).
pub fn parse_key(pem: &str, name: &Path) -> Result<PublicKey, String> {
    let key = VerifyingKey::from_public_key_pem(pem.trim()).map_err(|e| {
        format!(
            "{} is not an ECDSA P-256 public key in PEM (-----BEGIN PUBLIC KEY-----, the cosign.pub `cosign generate-key-pair` writes): {e}",
            name.display()
        )
    })?;
    Ok(PublicKey { path: name.to_path_buf(), key })
}

/// What was signed and its signature, as found in the registry.
#[derive(Clone, Debug)]
pub enum Signed {
    /// A simple-signing payload and the DER signature of its bytes.
    SimpleSigning { payload: Vec<u8>, signature: Vec<u8> },
    /// A Sigstore bundle (JSON).
    Bundle(Vec<u8>),
}

/// The signatures found for one manifest digest.
#[derive(Clone, Debug)]
pub struct Evidence {
    pub manifest_digest: Digest,
    pub signatures: Vec<Signed>,
    /// Where they were looked for (for messages).
    pub looked_in: String,
}

/// Why no signature admits a manifest digest.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum CosignRefusal {
    #[error("no cosign signature of {digest} in {looked_in}")]
    Unsigned { digest: String, looked_in: String },
    #[error("none of the {found} cosign signature(s) of {digest} verifies with the {keys} trusted --cosign-key key(s): {detail}")]
    BadSignature { digest: String, found: usize, keys: usize, detail: String },
}

/// Admits `evidence` if one signature verifies with one of `keys` and signs
/// `evidence.manifest_digest`.
pub fn verify(evidence: &Evidence, keys: &[PublicKey]) -> Result<(), CosignRefusal> {
    let digest = evidence.manifest_digest.to_string();
    if evidence.signatures.is_empty() {
        return Err(CosignRefusal::Unsigned { digest, looked_in: evidence.looked_in.clone() });
    }
    let mut why = Vec::new();
    for signed in &evidence.signatures {
        match verify_one(signed, &evidence.manifest_digest, keys) {
            Ok(()) => return Ok(()),
            Err(e) => why.push(e),
        }
    }
    why.dedup();
    Err(CosignRefusal::BadSignature { digest, found: evidence.signatures.len(), keys: keys.len(), detail: why.join("; ") })
}

fn verify_one(signed: &Signed, digest: &Digest, keys: &[PublicKey]) -> Result<(), String> {
    match signed {
        Signed::SimpleSigning { payload, signature } => {
            let signature = EcdsaSignature::from_der(signature).map_err(|_| "a signature is not a DER ECDSA P-256 signature".to_string())?;
            if !keys.iter().any(|k| k.key.verify(payload, &signature).is_ok()) {
                return Err("signed with another key, or the payload changed".into());
            }
            simple_signing_names(payload, digest)
        }
        Signed::Bundle(json) => super::cosign_bundle::verify(json, digest, keys.iter().map(|k| &k.key)),
    }
}

/// Checks that a simple-signing payload is cosign's and names `digest`.
fn simple_signing_names(payload: &[u8], digest: &Digest) -> Result<(), String> {
    let v: serde_json::Value = serde_json::from_slice(payload).map_err(|e| format!("the signed payload is not JSON: {e}"))?;
    let critical = &v["critical"];
    if critical["type"] != PAYLOAD_TYPE {
        return Err(format!("the signed payload's type is {}, not {PAYLOAD_TYPE:?}", critical["type"]));
    }
    match critical["image"]["docker-manifest-digest"].as_str() {
        Some(d) if d == digest.as_str() => Ok(()),
        other => Err(format!("the signature is valid but signs manifest {}, not {digest}", other.unwrap_or("(none)"))),
    }
}

impl Puller {
    /// The cosign signatures of `digest` in `r`'s repository (both forms;
    /// none found is an empty list, a registry that cannot be asked an error).
    pub async fn signatures(&self, r: &Reference, digest: &Digest) -> Result<Evidence, OciError> {
        let sig_tag = format!("sha256-{}.sig", digest.hex());
        let referrers_tag = format!("sha256-{}", digest.hex());
        let mut signatures = self.simple_signing(&r.with_tag(&sig_tag)).await?;
        signatures.extend(self.bundles(&r.with_tag(&referrers_tag), digest).await?);
        let looked_in = format!("{}/{} (tags {sig_tag} and {referrers_tag})", r.registry, r.repository);
        Ok(Evidence { manifest_digest: digest.clone(), signatures, looked_in })
    }

    /// The manifest at a tag, or `None` when the tag does not exist.
    async fn optional_manifest(&self, r: &Reference, accepted: &[&str]) -> Result<Option<Vec<u8>>, OciError> {
        let client = self.client(&r.registry);
        match client.pull_manifest_raw(&r.to_client(), &self.auth(r), accepted).await {
            Ok((bytes, _)) => Ok(Some(bytes.to_vec())),
            Err(e) if is_not_found(&e) => Ok(None),
            Err(e) => Err(Self::registry_error(r, e)),
        }
    }

    /// A blob of at most 1 MiB, verified against `digest`.
    async fn small_blob(&self, r: &Reference, d: &layout::Descriptor) -> Result<Vec<u8>, OciError> {
        if d.size > 1 << 20 {
            return Err(Self::registry_error(r, format!("signature blob {} is {} bytes; a signature is smaller", d.digest, d.size)));
        }
        let mut out = Vec::new();
        let wanted = oci_client::manifest::OciDescriptor {
            media_type: d.media_type.clone(),
            digest: d.digest.clone(),
            size: d.size as i64,
            ..Default::default()
        };
        self.client(&r.registry).pull_blob(&r.to_client(), &wanted, &mut out).await.map_err(|e| Self::registry_error(r, e))?;
        if Digest::of(&out).as_str() != d.digest {
            return Err(Self::registry_error(r, format!("signature blob {} does not hash to its digest", d.digest)));
        }
        Ok(out)
    }

    async fn simple_signing(&self, tag: &Reference) -> Result<Vec<Signed>, OciError> {
        let Some(manifest) = self.optional_manifest(tag, &[layout::OCI_MANIFEST, layout::DOCKER_MANIFEST]).await? else { return Ok(vec![]) };
        let m: SigManifest =
            serde_json::from_slice(&manifest).map_err(|e| Self::registry_error(tag, format!("the signature manifest is not JSON: {e}")))?;
        let mut out = Vec::new();
        for layer in m.layers.iter().filter(|l| l.media_type == SIMPLE_SIGNING) {
            let Some(b64) = layer.annotations.get(SIGNATURE_ANNOTATION) else { continue };
            let Ok(signature) = base64::engine::general_purpose::STANDARD.decode(b64.trim()) else { continue };
            let d = layout::Descriptor { media_type: layer.media_type.clone(), digest: layer.digest.clone(), size: layer.size };
            out.push(Signed::SimpleSigning { payload: self.small_blob(tag, &d).await?, signature });
        }
        Ok(out)
    }

    async fn bundles(&self, tag: &Reference, digest: &Digest) -> Result<Vec<Signed>, OciError> {
        let Some(index) = self.optional_manifest(tag, &[layout::OCI_INDEX]).await? else { return Ok(vec![]) };
        let index: Index = serde_json::from_slice(&index).map_err(|e| Self::registry_error(tag, format!("the referrers index is not JSON: {e}")))?;
        let mut out = Vec::new();
        for m in index.manifests.iter().filter(|m| m.artifact_type.as_deref() == Some(BUNDLE)) {
            let at = tag.at(&m.digest.parse().map_err(|e: String| Self::registry_error(tag, e))?);
            let Some(bytes) = self.optional_manifest(&at, &[layout::OCI_MANIFEST]).await? else { continue };
            if Digest::of(&bytes).as_str() != m.digest {
                return Err(Self::registry_error(&at, "a referrer manifest does not hash to its digest"));
            }
            let referrer: SigManifest = serde_json::from_slice(&bytes).map_err(|e| Self::registry_error(&at, e))?;
            // A referrer of another manifest, listed here by mistake or malice, is ignored.
            if referrer.subject.as_ref().is_some_and(|s| s.digest != digest.as_str()) {
                continue;
            }
            for layer in referrer.layers.iter().filter(|l| l.media_type == BUNDLE) {
                let d = layout::Descriptor { media_type: layer.media_type.clone(), digest: layer.digest.clone(), size: layer.size };
                out.push(Signed::Bundle(self.small_blob(&at, &d).await?));
            }
        }
        Ok(out)
    }
}

fn is_not_found(e: &oci_client::errors::OciDistributionError) -> bool {
    use oci_client::errors::OciDistributionError as E;
    match e {
        E::ImageManifestNotFoundError(_) => true,
        E::ServerError { code, .. } => *code == 404,
        E::RegistryError { envelope, .. } => envelope
            .errors
            .iter()
            .any(|e| matches!(e.code, oci_client::errors::OciErrorCode::ManifestUnknown | oci_client::errors::OciErrorCode::NameUnknown)),
        _ => false,
    }
}

#[derive(serde::Deserialize)]
#[serde(rename_all = "camelCase")]
struct SigLayer {
    media_type: String,
    digest: String,
    size: u64,
    #[serde(default)]
    annotations: std::collections::BTreeMap<String, String>,
}

#[derive(serde::Deserialize)]
struct SigManifest {
    #[serde(default)]
    layers: Vec<SigLayer>,
    subject: Option<layout::Descriptor>,
}

#[derive(serde::Deserialize)]
#[serde(rename_all = "camelCase")]
struct IndexEntry {
    digest: String,
    artifact_type: Option<String>,
}

#[derive(serde::Deserialize)]
struct Index {
    #[serde(default)]
    manifests: Vec<IndexEntry>,
}
