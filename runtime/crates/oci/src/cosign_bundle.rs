//! Sigstore bundles (v0.3) as cosign 3 attaches them to an artifact, checked
//! with a cosign public key: the bundle holds a DSSE envelope whose in-toto
//! statement names the manifest digest as its subject, signed over the
//! envelope's pre-authentication encoding (DSSE v1).

use base64::Engine;
use p256::ecdsa::signature::Verifier;
use p256::ecdsa::{Signature, VerifyingKey};

use super::Digest;

/// The DSSE payload type of an in-toto statement.
const IN_TOTO: &str = "application/vnd.in-toto+json";
/// The predicate of the statement `cosign sign` signs (cosign 3's bundle form).
const SIGN_PREDICATE: &str = "https://sigstore.dev/cosign/sign/v1";

#[derive(serde::Deserialize)]
#[serde(rename_all = "camelCase")]
struct Bundle {
    media_type: Option<String>,
    dsse_envelope: Option<Envelope>,
    message_signature: Option<serde_json::Value>,
}

#[derive(serde::Deserialize)]
#[serde(rename_all = "camelCase")]
struct Envelope {
    payload: String,
    payload_type: String,
    signatures: Vec<EnvelopeSignature>,
}

#[derive(serde::Deserialize)]
struct EnvelopeSignature {
    sig: String,
}

/// DSSE's pre-authentication encoding: what is actually signed.
fn pae(payload_type: &str, payload: &[u8]) -> Vec<u8> {
    let mut out = format!("DSSEv1 {} {} {} ", payload_type.len(), payload_type, payload.len()).into_bytes();
    out.extend_from_slice(payload);
    out
}

/// Admits `bundle` if a key verifies its envelope and its statement's
/// subject is `digest`.
pub fn verify<'a>(bundle: &[u8], digest: &Digest, keys: impl Iterator<Item = &'a VerifyingKey> + Clone) -> Result<(), String> {
    let b64 = base64::engine::general_purpose::STANDARD;
    let bundle: Bundle = serde_json::from_slice(bundle).map_err(|e| format!("a Sigstore bundle is not JSON of the bundle format: {e}"))?;
    let Some(envelope) = bundle.dsse_envelope else {
        let form = if bundle.message_signature.is_some() { "a message signature" } else { "no signature" };
        return Err(format!(
            "a Sigstore bundle ({}) holds {form}, not the DSSE envelope cosign signs images with",
            bundle.media_type.unwrap_or_default()
        ));
    };
    let payload = b64.decode(&envelope.payload).map_err(|_| "a bundle's DSSE payload is not base64".to_string())?;
    let signed = pae(&envelope.payload_type, &payload);
    let verified = envelope.signatures.iter().any(|s| {
        let Ok(der) = b64.decode(&s.sig) else { return false };
        let Ok(sig) = Signature::from_der(&der) else { return false };
        keys.clone().any(|k| k.verify(&signed, &sig).is_ok())
    });
    if !verified {
        return Err("signed with another key, or the bundle changed".into());
    }
    let statement: serde_json::Value = serde_json::from_slice(&payload).map_err(|e| format!("a bundle's statement is not JSON: {e}"))?;
    // An attestation (SBOM, provenance) by the same key is no signature.
    if envelope.payload_type != IN_TOTO || statement["predicateType"] != SIGN_PREDICATE {
        return Err(format!(
            "the bundle is a {} statement of predicate {}, not a cosign signature ({SIGN_PREDICATE})",
            envelope.payload_type, statement["predicateType"]
        ));
    }
    let subjects = statement["subject"].as_array().cloned().unwrap_or_default();
    if subjects.iter().any(|s| s["digest"]["sha256"].as_str() == Some(digest.hex())) {
        Ok(())
    } else {
        Err(format!("the bundle is valid but its statement's subject is not {digest}"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_pre_authentication_encoding_is_dsse_v1() {
        // The example of the DSSE specification (protocol.md).
        assert_eq!(pae("http://example.com/HelloWorld", b"hello world"), b"DSSEv1 29 http://example.com/HelloWorld 11 hello world");
    }
}
