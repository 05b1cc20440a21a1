//! The operator host: runs Kubernetes controller logic from sandboxed
//! WebAssembly plugins.
//!
//! - [`sandbox`]: the wasmtime engine, limits, module cache and calls into plugins.
//! - [`clock`]: the one source of "now".
//! - [`controller`]: shared caches per kind, the workqueue, the reconcile driver.
//! - [`actions`]: policy check and execution of what plugins return.
//! - [`events`]: Kubernetes Events with deduplication.
//! - [`metrics`]: Prometheus metrics and probes.
//! - [`leader`]: leader election with a Lease, as client-go.
//! - [`manager`]: starts plugins as controllers (CRDs, discovery, caches).
//! - [`embedded`]: the in-process API server and admission for `--embedded`.
//! - [`webhook`]: plugin admission as HTTPS webhooks for real clusters.
//! - [`cli`]: the `host` command line.

pub mod actions;
pub mod cli;
pub mod clock;
pub mod controller;
pub mod embedded;
pub mod events;
pub mod hotswap;
pub mod leader;
pub mod manager;
pub mod metrics;
pub mod registry;
pub mod sandbox;
pub mod webhook;

/// Renders an error with its chain of causes, `outer: inner: ...`.
pub fn error_chain(e: &dyn std::error::Error) -> String {
    let mut text = e.to_string();
    let mut source = e.source();
    while let Some(s) = source {
        // Many errors already print their source in their own message.
        let part = s.to_string();
        if !text.contains(&part) {
            text.push_str(": ");
            text.push_str(&part);
        }
        source = s.source();
    }
    text
}
