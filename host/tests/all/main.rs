//! The host's integration tests.
//!
//! One binary for every integration test of this crate, as wasmtime's
//! `tests/all`: each test file linked wasmtime and the API server on its own,
//! and linking dominated the build. Each module is one topic.

#[path = "../common/mod.rs"]
mod common;

mod bad_input;
mod cli;
mod crash_soak;
mod deploy;
mod embedded_flags;
mod expectations;
mod fault_soak;
mod finalizer;
mod hostile_neighbour;
mod hotswap;
mod languages;
mod leader;
mod ownership;
mod related;
mod robustness;
mod run_cli;
mod runtime;
mod sandbox;
mod scaffold;
mod simulate;
mod trust;
mod upgrades;
mod validity;
mod webhook;
mod webhook_configuration;
