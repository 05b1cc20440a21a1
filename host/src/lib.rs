//! The operator host: runs Kubernetes controller logic from sandboxed
//! WebAssembly plugins.
//!
//! - [`sandbox`]: the wasmtime engine, limits, module cache and calls into plugins.
//! - [`cli`]: the `host` command line.

pub mod cli;
pub mod sandbox;

/// Renders an error with its chain of causes, `outer: inner: ...`.
pub fn error_chain(e: &dyn std::error::Error) -> String {
    let mut text = e.to_string();
    let mut source = e.source();
    while let Some(s) = source {
        text.push_str(": ");
        text.push_str(&s.to_string());
        source = s.source();
    }
    text
}
