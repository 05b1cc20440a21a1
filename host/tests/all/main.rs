//! The host's integration tests: the `host` command line, run as a user runs
//! it (the built binary, its flags, exit codes and output). The runtime's
//! behaviour is tested by runtime/tests/all.
//!
//! One binary for every integration test of this crate, as wasmtime's
//! `tests/all`: each test file linked wasmtime and the API server on its own,
//! and linking dominated the build. Each module is one topic.

use operator_test_support as common;

mod bad_input;
mod cli;
mod crash_soak;
mod deploy;
mod embedded_flags;
mod golang;
mod languages;
mod leader;
mod prometheus;
mod run_cli;
mod scaffold;
mod simulate;
mod status;
mod trust;
mod upgrades;
mod webhook_configuration;
