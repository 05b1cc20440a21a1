//! `host pull oci://REGISTRY/REPO:TAG`: what `host run --plugin oci://...`
//! would run, pulled and verified the same way (digests, layout, and with
//! `--cosign-key` the signatures), printed, and written out with
//! `--output`. For checking a published plugin before a host runs it.

use std::path::PathBuf;

use super::Failure;
use operator_runtime::hotswap::Origin;
use operator_runtime::hotswap::oci::{self, Credentials, Puller, PullerOptions, Reference};
use operator_runtime::hotswap::trust::Policy;

#[derive(Debug, clap::Args)]
pub struct Args {
    /// `oci://REGISTRY/REPO:TAG` or `oci://REGISTRY/REPO@sha256:DIGEST`.
    reference: String,
    /// Write the component here.
    #[arg(long, short = 'o', value_name = "FILE")]
    output: Option<PathBuf>,
    /// Require a cosign signature of the manifest digest by this key (cosign.pub); repeatable.
    #[arg(long = "cosign-key", value_name = "FILE")]
    cosign_keys: Vec<PathBuf>,
    /// Registry credentials: a docker config JSON.
    #[arg(long, value_name = "FILE")]
    registry_config: Option<PathBuf>,
    /// Reach this registry over plain HTTP (loopback ones always are).
    #[arg(long = "insecure-registry", value_name = "HOST[:PORT]")]
    insecure_registries: Vec<String>,
    /// Where pulled plugins are kept by digest (default: `$XDG_CACHE_HOME/operator-host/oci`).
    #[arg(long, value_name = "DIR")]
    oci_cache_dir: Option<PathBuf>,
}

pub fn run(args: &Args) -> Result<(), Failure> {
    let reference: Reference = args.reference.parse().map_err(Failure::bad_input)?;
    let trust = Policy::default().with_cosign_keys(&args.cosign_keys).map_err(|e| Failure::bad_input(operator_runtime::error_chain(&e)))?;
    let mut credentials = Credentials::default();
    if let Some(path) = &args.registry_config {
        let json = std::fs::read(path).map_err(|e| Failure::bad_input(format!("--registry-config {}: {e}", path.display())))?;
        credentials = Credentials::from_docker_config(&json, &path.display().to_string()).map_err(Failure::bad_input)?;
    }
    let cache_dir = args.oci_cache_dir.clone().unwrap_or_else(oci::cache::default_dir);
    let puller = Puller::new(PullerOptions { cache_dir, credentials, insecure: args.insecure_registries.clone(), ..PullerOptions::default() });
    let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().map_err(|e| Failure::plugin(format!("tokio: {e}")))?;
    let (pulled, evidence) = runtime
        .block_on(async {
            let pulled = puller.pull(&reference).await?;
            let digest: oci::Digest = pulled.digest.parse().expect("a pulled digest parses");
            let evidence = if trust.wants_cosign() { Some(puller.signatures(&reference, &digest).await?) } else { None };
            Ok::<_, oci::OciError>((pulled, evidence))
        })
        .map_err(|e| Failure::bad_input(operator_runtime::error_chain(&e)))?;
    let origin = Origin::Oci(reference.clone());
    let admitted = trust
        .admit_with(pulled.component.clone(), None, evidence.as_ref(), &origin.signature_name())
        .map_err(|e| Failure::bad_input(format!("{reference} ({}) refused: {e}", pulled.digest)))?;
    println!("digest {}", pulled.digest);
    println!("layer {} ({}, {} bytes)", pulled.layer_digest, pulled.media_type, pulled.component.len());
    println!("component sha256:{}", admitted.digest);
    if trust.wants_cosign() {
        println!("cosign signature verified");
    }
    if let Some(out) = &args.output {
        std::fs::write(out, &pulled.component).map_err(|e| Failure::bad_input(format!("cannot write {}: {e}", out.display())))?;
        println!("wrote {}", out.display());
    }
    Ok(())
}
