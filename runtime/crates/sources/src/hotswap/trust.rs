//! Trust: who may change the running code. Opt-in, as Kubewarden verifies
//! policies before running them: with `--plugin-trust-key` (Ed25519 public
//! keys) the host runs only plugin bytes with a valid detached signature
//! beside them, and with `--plugin-digest` only the pinned builds. Every
//! loading path (`--plugin FILE` at start-up, `--watch`, ConfigMaps) goes
//! through [`Policy::admit`], so there is one definition of "trusted".
//!
//! What is signed: the bytes exactly as stored (the file, the ConfigMap
//! value), gzipped or not. They are verified before they are inflated or
//! parsed, so bytes from an untrusted writer never reach the gzip decoder or
//! the Wasm compiler, and `openssl pkeyutl -sign -rawin` produces the same
//! signature as `host sign`. A signature is the 64 bytes of an Ed25519
//! signature, raw (what both tools write; `binaryData` in a ConfigMap) or as
//! base64 text (for `data`, or a hand-written manifest).
//!
//! Registry plugins (`oci://`) are signed the way the registry world signs:
//! with `--cosign-key` (the `cosign.pub` of `cosign generate-key-pair`) the
//! signatures cosign attached to the manifest digest are checked
//! ([`operator_oci::cosign`]). A plugin is admitted when any configured kind
//! of signature verifies: an Ed25519 `.sig` beside a file or key, or a
//! cosign signature of its manifest.
//!
//! What is pinned: the SHA-256 of the component (after inflating), the
//! digest the host reports in its logs and Events, so one pin matches a
//! build whether it ships plain or gzipped.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use ed25519_dalek::pkcs8::{DecodePrivateKey, DecodePublicKey};
use ed25519_dalek::{Signature, Signer, SigningKey, VerifyingKey};

/// The suffix of a signature beside the plugin it signs: `cronjob.wasm.sig`
/// beside a file, key `cronjob.wasm.sig` beside key `cronjob.wasm`.
pub const SIGNATURE_SUFFIX: &str = ".sig";

/// What a trust key, pin or signing key could not be.
#[derive(Debug, thiserror::Error)]
pub enum KeyError {
    #[error("cannot read key {path}")]
    Read {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("{path} is not an Ed25519 public key in PEM (-----BEGIN PUBLIC KEY-----, as `openssl pkey -pubout` writes): {detail}")]
    Public { path: PathBuf, detail: String },
    #[error("{path} is not an Ed25519 private key in PEM (-----BEGIN PRIVATE KEY-----, as `openssl genpkey -algorithm ed25519` writes): {detail}")]
    Private { path: PathBuf, detail: String },
    #[error("--plugin-digest {given:?} is not sha256:<64 hex digits>")]
    Digest { given: String },
    #[error("{0}")]
    Cosign(String),
}

/// Why plugin bytes were refused.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum Refusal {
    #[error("it is not signed: no {expected} beside it, and only plugins signed with one of the trusted keys may run")]
    Unsigned { expected: String },
    #[error("its signature {expected} is neither 64 raw bytes nor base64 of 64 bytes")]
    MalformedSignature { expected: String },
    #[error("its signature does not verify with any of the {keys} trusted key(s): signed with another key, or the bytes changed after signing")]
    BadSignature { keys: usize },
    #[error("its digest sha256:{digest} is not one of the --plugin-digest pins")]
    NotPinned { digest: String },
    #[error("{0}")]
    Cosign(#[from] super::oci::cosign::CosignRefusal),
}

impl Refusal {
    /// The `reason` label of `plugin_trust_refusals_total`.
    pub fn label(&self) -> &'static str {
        match self {
            Refusal::Unsigned { .. } => "unsigned",
            Refusal::MalformedSignature { .. } => "malformed_signature",
            Refusal::BadSignature { .. } => "bad_signature",
            Refusal::NotPinned { .. } => "digest_not_pinned",
            Refusal::Cosign(super::oci::cosign::CosignRefusal::Unsigned { .. }) => "unsigned",
            Refusal::Cosign(super::oci::cosign::CosignRefusal::BadSignature { .. }) => "bad_signature",
        }
    }
}

/// Why [`Policy::admit`] did not hand out a component.
#[derive(Debug, thiserror::Error)]
pub enum NotAdmitted {
    /// The trust policy refused the bytes.
    #[error("untrusted: {0}")]
    Untrusted(#[from] Refusal),
    /// Trusted (or no trust asked for) but not inflatable.
    #[error("{0}")]
    Unreadable(String),
}

/// Plugin bytes the policy admitted, inflated, with their component digest.
#[derive(Debug)]
pub struct Admitted {
    pub component: Vec<u8>,
    /// Hex SHA-256 of `component` (as [`crate::sandbox::PluginInfo::digest`]).
    pub digest: String,
}

/// The trust policy: keys whose signatures are accepted, and pinned digests.
/// The default policy (no keys, no pins) trusts every plugin.
#[derive(Clone, Debug, Default)]
pub struct Policy {
    keys: Vec<VerifyingKey>,
    /// Hex SHA-256 digests of pinned components; empty = no pin.
    pins: BTreeSet<String>,
    /// `--cosign-key`: keys whose cosign signatures of a manifest digest are accepted.
    cosign_keys: Vec<super::oci::cosign::PublicKey>,
}

impl Policy {
    /// Reads `--plugin-trust-key` files and parses `--plugin-digest` pins.
    pub fn load(key_files: &[PathBuf], pins: &[String]) -> Result<Self, KeyError> {
        let mut keys = Vec::new();
        for path in key_files {
            let pem = std::fs::read_to_string(path).map_err(|source| KeyError::Read { path: path.clone(), source })?;
            let key = VerifyingKey::from_public_key_pem(pem.trim()).map_err(|e| KeyError::Public { path: path.clone(), detail: e.to_string() })?;
            keys.push(key);
        }
        let pins = pins.iter().map(|p| parse_pin(p)).collect::<Result<_, _>>()?;
        Ok(Self { keys, pins, cosign_keys: vec![] })
    }

    /// Adds `--cosign-key` files (cosign.pub).
    pub fn with_cosign_keys(mut self, files: &[PathBuf]) -> Result<Self, KeyError> {
        for path in files {
            self.cosign_keys.push(super::oci::cosign::read_key(path).map_err(KeyError::Cosign)?);
        }
        Ok(self)
    }

    /// A policy from PEM text (a `Plugin`'s `spec.trust`): keys are named
    /// `spec.trust.ed25519Keys[i]` in errors.
    pub fn from_pem(keys: &[String], pins: &[String]) -> Result<Self, KeyError> {
        let keys = keys
            .iter()
            .enumerate()
            .map(|(i, pem)| {
                VerifyingKey::from_public_key_pem(pem.trim())
                    .map_err(|e| KeyError::Public { path: format!("spec.trust.ed25519Keys[{i}]").into(), detail: e.to_string() })
            })
            .collect::<Result<_, _>>()?;
        let pins = pins.iter().map(|p| parse_pin(p)).collect::<Result<_, _>>()?;
        Ok(Self { keys, pins, cosign_keys: Vec::new() })
    }

    /// Whether plugins need a signature.
    pub fn requires_signature(&self) -> bool {
        !self.keys.is_empty() || !self.cosign_keys.is_empty()
    }

    /// Whether registry versions need their cosign signatures fetched.
    pub fn wants_cosign(&self) -> bool {
        !self.cosign_keys.is_empty()
    }

    /// Checks `stored` (the bytes as they sit in the file or ConfigMap) and
    /// its detached `signature` (`None` when there is none), then inflates
    /// it and checks the component against the pins.
    pub fn admit(&self, stored: Vec<u8>, signature: Option<&[u8]>, signature_name: &str) -> Result<Admitted, NotAdmitted> {
        self.admit_with(stored, signature, None, signature_name)
    }

    /// [`Self::admit`] for bytes that may also carry cosign evidence (a
    /// registry version: the signatures found for its manifest digest).
    /// Either kind of signature admits them.
    pub fn admit_with(
        &self,
        stored: Vec<u8>,
        signature: Option<&[u8]>,
        cosign: Option<&super::oci::cosign::Evidence>,
        signature_name: &str,
    ) -> Result<Admitted, NotAdmitted> {
        if self.requires_signature() {
            match cosign {
                Some(evidence) if !self.cosign_keys.is_empty() => super::oci::cosign::verify(evidence, &self.cosign_keys).map_err(Refusal::from)?,
                _ if self.keys.is_empty() => return Err(Refusal::Unsigned { expected: signature_name.into() }.into()),
                _ => self.check_ed25519(&stored, signature, signature_name)?,
            }
        }
        let component = super::gunzip_if_gzipped(stored).map_err(NotAdmitted::Unreadable)?;
        let digest = crate::sandbox::cache::digest(&component);
        if !self.pins.is_empty() && !self.pins.contains(&digest) {
            return Err(Refusal::NotPinned { digest }.into());
        }
        Ok(Admitted { component, digest })
    }

    fn check_ed25519(&self, stored: &[u8], signature: Option<&[u8]>, signature_name: &str) -> Result<(), Refusal> {
        let raw = signature.ok_or_else(|| Refusal::Unsigned { expected: signature_name.into() })?;
        let signature = decode_signature(raw).ok_or_else(|| Refusal::MalformedSignature { expected: signature_name.into() })?;
        // Strict: no malleable signatures or weak keys (RFC 8032 checks).
        if !self.keys.iter().any(|k| k.verify_strict(stored, &signature).is_ok()) {
            return Err(Refusal::BadSignature { keys: self.keys.len() });
        }
        Ok(())
    }

    /// [`Self::admit`] for a plugin file and the `.sig` file beside it.
    pub fn admit_file(&self, path: &Path) -> Result<Admitted, NotAdmitted> {
        let stored = std::fs::read(path).map_err(|e| NotAdmitted::Unreadable(format!("cannot read plugin file {}: {e}", path.display())))?;
        let sig_path = signature_path(path);
        let signature = if self.requires_signature() { read_signature(&sig_path)? } else { None };
        self.admit(stored, signature.as_deref(), &sig_path.display().to_string())
    }
}

/// `FILE.sig` for `FILE`.
pub fn signature_path(path: &Path) -> PathBuf {
    let mut name = path.as_os_str().to_owned();
    name.push(SIGNATURE_SUFFIX);
    PathBuf::from(name)
}

/// The signature file's bytes; `None` if there is none (an unsigned plugin).
pub fn read_signature(path: &Path) -> Result<Option<Vec<u8>>, NotAdmitted> {
    match std::fs::read(path) {
        Ok(bytes) => Ok(Some(bytes)),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(NotAdmitted::Unreadable(format!("cannot read {}: {e}", path.display()))),
    }
}

/// 64 raw bytes, or base64 text of 64 bytes (surrounding whitespace ignored).
fn decode_signature(raw: &[u8]) -> Option<Signature> {
    use base64::Engine;
    if let Ok(bytes) = <[u8; 64]>::try_from(raw) {
        return Some(Signature::from_bytes(&bytes));
    }
    let text = std::str::from_utf8(raw).ok()?.trim();
    let decoded = base64::engine::general_purpose::STANDARD.decode(text).ok()?;
    Some(Signature::from_bytes(&<[u8; 64]>::try_from(decoded.as_slice()).ok()?))
}

fn parse_pin(pin: &str) -> Result<String, KeyError> {
    let hex = pin.strip_prefix("sha256:").unwrap_or_default().to_ascii_lowercase();
    if hex.len() == 64 && hex.bytes().all(|b| b.is_ascii_hexdigit()) { Ok(hex) } else { Err(KeyError::Digest { given: pin.into() }) }
}

/// A signing key read from a PKCS#8 PEM file (`openssl genpkey -algorithm ed25519`).
pub struct PrivateKey(SigningKey);

impl PrivateKey {
    pub fn read(path: &Path) -> Result<Self, KeyError> {
        let pem = std::fs::read_to_string(path).map_err(|source| KeyError::Read { path: path.into(), source })?;
        SigningKey::from_pkcs8_pem(pem.trim()).map(Self).map_err(|e| KeyError::Private { path: path.into(), detail: e.to_string() })
    }

    /// The raw 64-byte signature of `stored` (the bytes as they will be
    /// stored: what [`Policy::admit`] verifies).
    pub fn sign(&self, stored: &[u8]) -> [u8; 64] {
        self.0.sign(stored).to_bytes()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;

    // Made with `openssl genpkey -algorithm ed25519` and `openssl pkey
    // -pubout`; SIGNED_BY_OPENSSL is `openssl pkeyutl -sign -rawin` of
    // MESSAGE, base64. They pin interoperability with the openssl tools.
    const OPENSSL_PRIVATE: &str =
        "-----BEGIN PRIVATE KEY-----\nMC4CAQAwBQYDK2VwBCIEICd/RMxAOkDuyc63rqwLEaasfzyMU/9X+1BPNLqfXAtL\n-----END PRIVATE KEY-----\n";
    const OPENSSL_PUBLIC: &str =
        "-----BEGIN PUBLIC KEY-----\nMCowBQYDK2VwAyEARYWmmH1Ui1HBGfz621fjpAFWt3QwHI+D+1OK3L0oTkg=\n-----END PUBLIC KEY-----\n";
    const MESSAGE: &[u8] = b"\0asm plugin bytes";
    const SIGNED_BY_OPENSSL: &str = "Egk7UQNxdBfKqDXNvQumB74Sh8LVS793Zne94p77CrZwJrE4U7qrT+Uwe2icboqE10Nc9n7uMhS4Tu9zjd3uAA==";

    fn file(dir: &Path, name: &str, text: &[u8]) -> PathBuf {
        let path = dir.join(name);
        std::fs::File::create(&path).unwrap().write_all(text).unwrap();
        path
    }

    fn policy(dir: &Path, pins: &[String]) -> Policy {
        Policy::load(&[file(dir, "trusted.pem", OPENSSL_PUBLIC.as_bytes())], pins).unwrap()
    }

    fn refusal(r: Result<Admitted, NotAdmitted>) -> Refusal {
        match r {
            Err(NotAdmitted::Untrusted(why)) => why,
            other => panic!("expected a refusal, got {other:?}"),
        }
    }

    #[test]
    fn an_openssl_signature_verifies_and_host_sign_makes_the_same_one() {
        use base64::Engine;
        let dir = tempfile::tempdir().unwrap();
        let by_openssl = base64::engine::general_purpose::STANDARD.decode(SIGNED_BY_OPENSSL).unwrap();
        let admitted = policy(dir.path(), &[]).admit(MESSAGE.to_vec(), Some(&by_openssl), "m.sig").unwrap();
        assert_eq!(admitted.component, MESSAGE);
        let key = PrivateKey::read(&file(dir.path(), "key.pem", OPENSSL_PRIVATE.as_bytes())).unwrap();
        // Ed25519 is deterministic: the same key signs the same bytes identically.
        assert_eq!(key.sign(MESSAGE).to_vec(), by_openssl);
        // Base64 text (a ConfigMap's `data`) is accepted too.
        assert!(policy(dir.path(), &[]).admit(MESSAGE.to_vec(), Some(format!("{SIGNED_BY_OPENSSL}\n").as_bytes()), "m.sig").is_ok());
    }

    #[test]
    fn unsigned_wrongly_signed_tampered_and_malformed_bytes_are_refused() {
        let dir = tempfile::tempdir().unwrap();
        let trusted = policy(dir.path(), &[]);
        assert_eq!(refusal(trusted.admit(MESSAGE.to_vec(), None, "m.sig")), Refusal::Unsigned { expected: "m.sig".into() });
        let other = PrivateKey(SigningKey::from_bytes(&[9; 32]));
        assert_eq!(refusal(trusted.admit(MESSAGE.to_vec(), Some(&other.sign(MESSAGE)), "m.sig")), Refusal::BadSignature { keys: 1 });
        let key = PrivateKey::read(&file(dir.path(), "key.pem", OPENSSL_PRIVATE.as_bytes())).unwrap();
        let mut tampered = MESSAGE.to_vec();
        tampered[5] ^= 1;
        assert_eq!(refusal(trusted.admit(tampered, Some(&key.sign(MESSAGE)), "m.sig")), Refusal::BadSignature { keys: 1 });
        assert_eq!(refusal(trusted.admit(MESSAGE.to_vec(), Some(b"short"), "m.sig")).label(), "malformed_signature");
    }

    #[test]
    fn gzipped_bytes_are_signed_as_stored_and_pinned_by_their_component() {
        let dir = tempfile::tempdir().unwrap();
        let mut e = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
        e.write_all(MESSAGE).unwrap();
        let gz = e.finish().unwrap();
        let key = PrivateKey::read(&file(dir.path(), "key.pem", OPENSSL_PRIVATE.as_bytes())).unwrap();
        let pin = format!("sha256:{}", crate::sandbox::cache::digest(MESSAGE));
        let pinned = policy(dir.path(), std::slice::from_ref(&pin));
        let admitted = pinned.admit(gz.clone(), Some(&key.sign(&gz)), "m.sig").unwrap();
        assert_eq!(admitted.component, MESSAGE);
        // The signature of the inflated bytes does not cover the stored ones.
        assert_eq!(refusal(pinned.admit(gz, Some(&key.sign(MESSAGE)), "m.sig")).label(), "bad_signature");
    }

    #[test]
    fn a_pin_admits_its_build_only_and_needs_no_key() {
        let pin = format!("sha256:{}", crate::sandbox::cache::digest(MESSAGE).to_uppercase());
        let pinned = Policy::load(&[], &[pin]).unwrap();
        assert!(pinned.admit(MESSAGE.to_vec(), None, "m.sig").is_ok());
        let other = refusal(pinned.admit(b"\0asm another build".to_vec(), None, "m.sig"));
        assert!(matches!(other, Refusal::NotPinned { .. }), "{other:?}");
        for bad in ["abc", "sha256:xyz", "md5:d41d8cd98f00b204e9800998ecf8427e"] {
            assert!(Policy::load(&[], &[bad.into()]).unwrap_err().to_string().contains("sha256:<64 hex digits>"), "{bad}");
        }
    }

    #[test]
    fn a_key_that_is_not_an_ed25519_public_key_is_named_with_what_is_expected() {
        let dir = tempfile::tempdir().unwrap();
        let private = file(dir.path(), "private.pem", OPENSSL_PRIVATE.as_bytes());
        let e = Policy::load(std::slice::from_ref(&private), &[]).unwrap_err().to_string();
        assert!(e.contains("private.pem") && e.contains("BEGIN PUBLIC KEY"), "{e}");
        assert!(Policy::load(&[dir.path().join("missing.pem")], &[]).unwrap_err().to_string().contains("cannot read key"));
    }

    #[test]
    fn without_keys_or_pins_every_plugin_is_admitted() {
        assert!(Policy::default().admit(MESSAGE.to_vec(), None, "m.sig").is_ok());
        assert!(!Policy::default().requires_signature());
    }
}
