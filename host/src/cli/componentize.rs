//! `host componentize CORE.wasm -o PLUGIN.wasm`: a WASI preview 1 core
//! module that exports the contract by its canonical-ABI names (what Go's
//! `GOOS=wasip1 GOARCH=wasm go build -buildmode=c-shared` writes from the Go
//! SDK's `//go:wasmexport` functions) becomes a plugin component.
//!
//! The steps are componentize-go's, done with crates from crates.io:
//! 1. embed the contract's world (`operator:plugin/plugin@0.3.0`, compiled
//!    into the host: the minor the Go SDK implements, which the host still
//!    runs beside 0.4) as the module's `component-type` custom section;
//! 2. encode a component from the module plus the `wasi_snapshot_preview1`
//!    *reactor* adapter built with the wasmtime whose WASI the host links,
//!    which turns the module's preview 1 imports (clocks, random, fd_write)
//!    into WASI 0.2 imports the sandbox serves deterministically.
//!
//! The component calls the module's `_initialize` (the Go runtime's start)
//! when it is instantiated, before any export: wit-component adds that call.

use std::path::{Path, PathBuf};

use anyhow::Context;
use wasi_preview1_component_adapter_provider::{WASI_SNAPSHOT_PREVIEW1_ADAPTER_NAME, WASI_SNAPSHOT_PREVIEW1_REACTOR_ADAPTER};
use wit_component::{ComponentEncoder, StringEncoding};
use wit_parser::Resolve;

use super::Failure;

/// The contract a componentized module implements: 0.3, the Go SDK's
/// (its exports are named `...@0.3.0`; it has no requeue priority yet).
const CONTRACT: &str = include_str!("../../../wit/v0.3/plugin.wit");
const WORLD: &str = "plugin";

#[derive(Debug, clap::Args)]
pub struct Args {
    /// The core module (.wasm), e.g. from `GOOS=wasip1 GOARCH=wasm go build -buildmode=c-shared`.
    module: PathBuf,
    /// Where to write the component (default: the module's path with `.component.wasm`).
    #[arg(long, short)]
    output: Option<PathBuf>,
}

pub fn run(args: &Args) -> Result<(), Failure> {
    let module = std::fs::read(&args.module).map_err(|e| Failure::bad_input(format!("read {}: {e}", args.module.display())))?;
    let component = componentize(&module).map_err(|e| Failure::bad_input(format!("componentize {}: {e:#}", args.module.display())))?;
    let output = args.output.clone().unwrap_or_else(|| default_output(&args.module));
    std::fs::write(&output, &component).map_err(|e| Failure::bad_input(format!("write {}: {e}", output.display())))?;
    eprintln!("wrote {} ({} bytes)", output.display(), component.len());
    Ok(())
}

fn default_output(module: &Path) -> PathBuf {
    module.with_extension("component.wasm")
}

/// The component made of the core `module` (WASI preview 1, exporting the
/// contract under its canonical-ABI names) and the preview 1 reactor adapter.
pub fn componentize(module: &[u8]) -> anyhow::Result<Vec<u8>> {
    check_is_core_module(module)?;
    let mut resolve = Resolve::default();
    let package = resolve.push_str("plugin.wit", CONTRACT).context("parse the contract's WIT")?;
    let world = resolve.select_world(&[package], Some(WORLD))?;
    let mut module = module.to_vec();
    wit_component::embed_component_metadata(&mut module, &resolve, world, StringEncoding::UTF8, false)?;
    let mut encoder = ComponentEncoder::default();
    // The adapter must not allocate its state through the module's
    // `cabi_realloc` (re-entering Go from the import the runtime makes while
    // starting throws `runtime.badsystemstack`), nor by growing memory (Go's
    // heap would take those pages again): a Go SDK module gets an allocator
    // over an arena in its static data (see `adapter_arena`). Other modules
    // own their memory as the adapter expects: it grows memory for them.
    match super::adapter_arena::add_adapter_realloc(&module).context("add the adapter's allocator")? {
        Some(with_arena) => module = with_arena,
        None => {
            encoder.realloc_via_memory_grow(true);
        }
    }
    encoder
        .validate(true)
        .module(&module)
        .context("read the core module against the contract")?
        .adapter(WASI_SNAPSHOT_PREVIEW1_ADAPTER_NAME, WASI_SNAPSHOT_PREVIEW1_REACTOR_ADAPTER)
        .context("add the WASI preview 1 reactor adapter")?
        .encode()
        .context("encode the component")
}

/// A component given where a core module is expected is a common slip:
/// name it instead of letting the encoder fail on the first section.
fn check_is_core_module(bytes: &[u8]) -> anyhow::Result<()> {
    const CORE_MODULE: [u8; 8] = [0, b'a', b's', b'm', 1, 0, 0, 0];
    match bytes.get(..8) {
        Some(header) if header == CORE_MODULE => Ok(()),
        Some(header) if header[..4] == CORE_MODULE[..4] => anyhow::bail!("this is already a component, not a core module"),
        _ => anyhow::bail!("not a WebAssembly module"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_component_is_refused_with_a_clear_error() {
        let component = [0, b'a', b's', b'm', 0x0d, 0, 1, 0];
        let error = componentize(&component).unwrap_err().to_string();
        assert!(error.contains("already a component"), "{error}");
        assert!(componentize(b"not wasm").unwrap_err().to_string().contains("not a WebAssembly module"));
    }

    #[test]
    fn a_module_that_does_not_export_the_contract_is_refused_naming_what_is_missing() {
        // (module (memory (export "memory") 1))
        let module = [0, b'a', b's', b'm', 1, 0, 0, 0, 5, 3, 1, 0, 1, 7, 10, 1, 6, b'm', b'e', b'm', b'o', b'r', b'y', 2, 0];
        let error = format!("{:#}", componentize(&module).unwrap_err());
        assert!(error.contains("operator:plugin/controller@0.3.0"), "{error}");
    }

    #[test]
    fn the_default_output_sits_beside_the_module() {
        assert_eq!(default_output(Path::new("out/hello.wasm")), Path::new("out/hello.component.wasm"));
    }
}
