//! The `oci` source of a `Plugin`, served by the host's registry client
//! ([`Puller`]): the reference resolved and pulled by digest (layer and
//! manifest checked against their digests, cached on disk), and when the
//! Plugin names `spec.trust.cosignKeys`, admitted only if cosign signed
//! that manifest digest with one of them.

use std::path::Path;
use std::sync::Arc;

use super::sources::{OciRequest, OciSource, Pulled};
use crate::hotswap::oci::reference::SCHEME;
use crate::hotswap::oci::{Digest, Puller, Reference, cosign};

/// [`OciSource`] over a shared [`Puller`] (the one `--plugin oci://` uses,
/// with its credentials, cache and insecure hosts).
pub struct Registry {
    puller: Arc<Puller>,
}

impl Registry {
    pub fn new(puller: Arc<Puller>) -> Self {
        Self { puller }
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
        if !keys.is_empty() {
            let digest: Digest = pulled.digest.parse()?;
            let evidence = self.puller.signatures(&reference, &digest).await.map_err(|e| e.to_string())?;
            cosign::verify(&evidence, &keys).map_err(|e| e.to_string())?;
        }
        Ok(Pulled { digest: pulled.digest, bytes: pulled.component })
    }
}
