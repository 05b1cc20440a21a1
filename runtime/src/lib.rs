//! The controller runtime of the operator host: runs Kubernetes controller
//! logic from sandboxed WebAssembly plugins against any API server. It links
//! no API server of its own; the `host` binary adds the command line and the
//! embedded cluster.
//!
//! - [`sandbox`]: the wasmtime engine, limits, module cache and calls into plugins.
//! - [`clock`]: the one source of "now" (the `operator-clock` crate).
//! - [`controller`]: shared caches per kind, the workqueue, the reconcile driver.
//! - [`actions`]: policy check and execution of what plugins return.
//! - [`events`]: Kubernetes Events with deduplication.
//! - [`metrics`]: Prometheus metrics and probes.
//! - [`leader`]: leader election with a Lease, as client-go.
//! - [`manager`]: starts plugins as controllers (CRDs, discovery, caches).
//! - [`registry`]: the plugins running now, read by admission.
//! - [`hotswap`]: new plugin versions from ConfigMaps and files; shadow runs of staged candidates.
//! - [`plugin_resource`]: the `Plugin` custom resource: plugins declared as objects, their status written back.
//! - [`record`]: the on-disk log of reconcile calls, and the comparison of two answers (replay, shadow).
//! - [`webhook`]: plugin admission as HTTPS webhooks for real clusters.
//! - [`status`]: the host's state at a glance (`host status`, `/status`).
//! - [`api_client`]: the Kubernetes client, with `TCP_NODELAY` on its connections.
//! - [`api_error`]: the classes of API errors the runtime acts on.
//! - [`api_answer`]: writes whose answer is read for identity and conditions only.

pub use operator_clock as clock;

pub mod actions;
pub mod activity;
pub mod api_answer;
pub mod api_client;
pub mod api_error;
pub mod controller;
pub mod events;
pub mod heap;
pub mod hotswap;
pub mod leader;
pub mod manager;
pub mod metrics;
pub mod object_reference;
pub mod outcomes;
pub mod plugin_resource;
pub mod record;
pub mod registry;
pub mod sandbox;
pub mod shard;
pub mod status;
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
