//! The `oci` source of a `Plugin`, served by the host's registry client
//! ([`Puller`]): the reference resolved and pulled by digest (layer and
//! manifest checked against their digests, cached on disk), and when the
//! Plugin names `spec.trust.cosignKeys`, admitted only if cosign signed
//! that manifest digest with one of them. When the host's own policy names
//! cosign keys (`--cosign-key`), the signatures found travel with the bytes
//! ([`Pulled::cosign`]) so that policy judges them as it judges a
//! `--plugin oci://` version.

use std::path::Path;
use std::sync::Arc;

use super::sources::{OciRequest, OciSource, Pulled};
use crate::hotswap::oci::reference::SCHEME;
use crate::hotswap::oci::{Digest, Puller, Reference, cosign};

/// [`OciSource`] over a shared [`Puller`] (the one `--plugin oci://` uses,
/// with its credentials, cache and insecure hosts).
pub struct Registry {
    puller: Arc<Puller>,
    /// Whether the host's policy wants the cosign signatures of each version.
    host_cosign: bool,
}

impl Registry {
    /// `host_cosign`: the host's policy names cosign keys
    /// ([`crate::hotswap::trust::Policy::wants_cosign`]).
    pub fn new(puller: Arc<Puller>, host_cosign: bool) -> Self {
        Self { puller, host_cosign }
    }
}

#[async_trait::async_trait]
impl OciSource for Registry {
    async fn pull(&self, request: &OciRequest) -> Result<Pulled, String> {
        let reference: Reference = format!("{SCHEME}{}", request.reference).parse().map_err(|e| format!("spec.source.oci.reference: {e}"))?;
        let keys = request
            .cosign_keys
            .iter()
            .enumerate()
            .map(|(i, pem)| cosign::parse_key(pem, Path::new(&format!("spec.trust.cosignKeys[{i}]"))))
            .collect::<Result<Vec<_>, _>>()?;
        let pulled = self.puller.pull(&reference).await.map_err(|e| e.to_string())?;
        let mut evidence = None;
        if !keys.is_empty() || self.host_cosign {
            let digest: Digest = pulled.digest.parse()?;
            let found = self.puller.signatures(&reference, &digest).await.map_err(|e| e.to_string())?;
            if !keys.is_empty() {
                cosign::verify(&found, &keys).map_err(|e| e.to_string())?;
            }
            evidence = self.host_cosign.then_some(found);
        }
        Ok(Pulled { digest: pulled.digest, bytes: pulled.component, cosign: evidence })
    }
}
