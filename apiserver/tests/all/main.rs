//! The API server's integration tests.
//!
//! One binary for every integration test of this crate, as wasmtime's
//! `tests/all`: each test file linked the API server and kube on its own,
//! and linking dominated the build. Each module is one topic.

#[path = "../common/mod.rs"]
mod common;

mod fault_control;
mod faults;
mod fidelity;
mod kinds;
mod kube_client;
mod kubectl;
mod persist;
mod rbac;
mod scale;
mod semantics;
mod watch;
mod writes;
