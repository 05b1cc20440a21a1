//! `host push FILE oci://REGISTRY/REPO:TAG`: uploads a plugin in the CNCF
//! Wasm OCI artifact layout (config `application/vnd.wasm.config.v0+json`,
//! one `application/wasm` layer) and prints the manifest digest, which is
//! what `--plugin oci://...@sha256:...` pins and what `cosign sign` signs.

use std::path::PathBuf;

use super::Failure;
use operator_runtime::hotswap::gunzip_if_gzipped;
use operator_runtime::hotswap::oci::{self, Credentials, Puller, PullerOptions, Reference};

#[derive(Debug, clap::Args)]
pub struct Args {
    /// The plugin: a component (.wasm), or a gzipped one (pushed inflated:
    /// registries compress in transit, and the layer must be the component).
    file: PathBuf,
    /// Where to: `oci://REGISTRY/REPO:TAG`.
    reference: String,
    /// Registry credentials: a docker config JSON.
    #[arg(long, value_name = "FILE")]
    registry_config: Option<PathBuf>,
    /// Reach this registry over plain HTTP (loopback ones always are).
    #[arg(long = "insecure-registry", value_name = "HOST[:PORT]")]
    insecure_registries: Vec<String>,
}

pub fn run(args: &Args) -> Result<(), Failure> {
    let reference: Reference = args.reference.parse().map_err(Failure::bad_input)?;
    if reference.tag.is_none() {
        return Err(Failure::bad_input(format!("{reference}: push to a tag (oci://REGISTRY/REPO:TAG); the digest is what the push prints")));
    }
    let file = args.file.display();
    let stored = std::fs::read(&args.file).map_err(|e| Failure::bad_input(format!("cannot read {file}: {e}")))?;
    let component = gunzip_if_gzipped(stored).map_err(|e| Failure::bad_input(format!("{file}: {e}")))?;
    if !component.starts_with(b"\0asm") {
        return Err(Failure::bad_input(format!("{file} is not a WebAssembly component (no \\0asm header), gzipped or not")));
    }
    let mut credentials = Credentials::default();
    if let Some(path) = &args.registry_config {
        let json = std::fs::read(path).map_err(|e| Failure::bad_input(format!("--registry-config {}: {e}", path.display())))?;
        credentials = Credentials::from_docker_config(&json, &path.display().to_string()).map_err(Failure::bad_input)?;
    }
    let puller = Puller::new(PullerOptions { credentials, insecure: args.insecure_registries.clone(), ..PullerOptions::default() });
    let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().map_err(|e| Failure::plugin(format!("tokio: {e}")))?;
    let digest = runtime.block_on(puller.push(&component, &reference)).map_err(|e| Failure::bad_input(operator_runtime::error_chain(&e)))?;
    println!("pushed {file} to {reference} ({} KiB, {} layout)", component.len() >> 10, oci::layout::CNCF_CONFIG);
    println!("digest {digest}");
    println!("run it pinned: --plugin {}", reference.at(&digest));
    Ok(())
}
