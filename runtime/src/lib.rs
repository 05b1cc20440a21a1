//! The controller runtime of the operator host: runs Kubernetes controller
//! logic from sandboxed WebAssembly plugins against any API server. It links
//! no API server of its own; the `host` binary adds the command line and the
//! embedded cluster.
//!
//! This crate is the facade over the runtime's crates (`runtime/crates`),
//! bottom layer first; the module paths are the ones the host uses:
//!
//! - `operator-api`: [`api_client`], [`api_error`], [`api_answer`], [`object_reference`], [`events`]
//!   (Kubernetes Events with deduplication) and [`error_chain`].
//! - `operator-sandbox`: [`sandbox`] (the wasmtime engine, limits, module cache and calls into
//!   plugins), [`registry`] (the plugins running now, read by admission) and [`heap`] (free pages
//!   handed back to the OS after compiles and start-up; one malloc arena). Knows nothing of
//!   controllers.
//! - `operator-oci`: plugins from OCI registries, as [`hotswap::oci`].
//! - `operator-metrics`: [`metrics`] (Prometheus metrics and probes, served on `/metrics`), [`activity`]
//!   and [`outcomes`] (what `/status` and rollback read).
//! - `operator-controller`: [`controller`] (shared caches per kind, the workqueue, the reconcile
//!   driver) and [`actions`] (policy check and execution of what plugins return).
//! - `operator-webhook`: [`webhook`], plugin admission as HTTPS webhooks for real clusters.
//! - `operator-manager`: [`manager`] (starts plugins as controllers: CRDs, discovery, caches),
//!   [`leader`] (leader election with a Lease, as client-go) and [`shard`] (sharding parents
//!   across replicas).
//! - `operator-plugin-sources`: [`hotswap`] (new plugin versions from ConfigMaps, files and OCI;
//!   shadow runs, trust, rollback), [`record`] (the log of reconcile calls, replay),
//!   [`plugin_resource`] (the `Plugin` custom resource) and [`status`] (`host status`, `/status`).
//! - [`clock`]: the one source of "now" (the `operator-clock` crate).

pub use operator_api::{api_answer, api_client, api_error, error_chain, events, object_reference};
pub use operator_clock as clock;
pub use operator_controller as controller;
pub use operator_controller::actions;
pub use operator_manager as manager;
pub use operator_manager::{leader, shard};
pub use operator_metrics as metrics;
pub use operator_metrics::{activity, outcomes};
pub use operator_plugin_sources::{hotswap, plugin_resource, record, status};
pub use operator_sandbox as sandbox;
pub use operator_sandbox::{heap, registry};
pub use operator_webhook as webhook;
