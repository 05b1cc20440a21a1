//! The runtime's integration tests: its behaviour against the embedded API
//! server (controllers, caches, queue, policy, finalizers, validity, related
//! objects, hot swap, shadow upgrades, trust, leader election, webhooks) and
//! the sandbox, importing `operator_runtime` by name as any embedder would.
//!
//! One binary for every integration test of this crate, as wasmtime's
//! `tests/all`: each test file linked wasmtime and the API server on its own,
//! and linking dominated the build. Each module is one topic.

use operator_test_support as common;

mod expectations;
mod fault_soak;
mod finalizer;
mod hostile_neighbour;
mod hotswap;
mod languages;
mod leader;
mod ownership;
mod plugin_resource;
mod priority;
mod related;
mod requeue_priority;
mod robustness;
mod runtime;
mod sandbox;
mod trust;
mod upgrades;
mod validity;
mod webhook;
