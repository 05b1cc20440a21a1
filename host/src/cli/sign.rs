//! `host sign --key PRIVATE FILE`: writes `FILE.sig`, the detached Ed25519
//! signature `host run --plugin-trust-key` checks (see
//! [`operator_runtime::hotswap::trust`]). The signature covers FILE as stored, gzipped
//! or not, so it is the signature `openssl pkeyutl -sign -rawin` makes; it
//! prints the component's digest for `--plugin-digest`.

use std::path::PathBuf;

use super::Failure;
use operator_runtime::hotswap::{gunzip_if_gzipped, trust};

#[derive(Debug, clap::Args)]
pub struct Args {
    /// Ed25519 private key in PEM (PKCS#8), as `openssl genpkey -algorithm ed25519 -out key.pem` writes it.
    #[arg(long, value_name = "PRIVATE")]
    key: PathBuf,
    /// The plugin to sign: a component (.wasm) or a gzipped one (.wasm.gz), signed as stored.
    file: PathBuf,
}

pub fn run(args: &Args) -> Result<(), Failure> {
    let key = trust::PrivateKey::read(&args.key).map_err(|e| Failure::bad_input(operator_runtime::error_chain(&e)))?;
    let file = args.file.display();
    let stored = std::fs::read(&args.file).map_err(|e| Failure::bad_input(format!("cannot read {file}: {e}")))?;
    let component = gunzip_if_gzipped(stored.clone()).map_err(|e| Failure::bad_input(format!("{file}: {e}")))?;
    // Signing something that is no plugin is a mistake worth stopping: the
    // host would refuse it anyway, after the signature was shipped.
    if !component.starts_with(b"\0asm") {
        return Err(Failure::bad_input(format!("{file} is not a WebAssembly component (no \\0asm header), gzipped or not")));
    }
    let out = trust::signature_path(&args.file);
    std::fs::write(&out, key.sign(&stored)).map_err(|e| Failure::bad_input(format!("cannot write {}: {e}", out.display())))?;
    println!("wrote {} (Ed25519 signature of {file} as stored)", out.display());
    println!("digest sha256:{} (the component; pin it with --plugin-digest)", operator_runtime::sandbox::cache::digest(&component));
    Ok(())
}
