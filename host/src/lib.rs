//! The operator host: the `host` command line over the controller runtime
//! ([`operator_runtime`], re-exported here module by module), and with the
//! `embedded` feature (on by default) the in-process cluster.
//!
//! - [`cli`]: the `host` command line.
//! - [`embedded`]: the in-process API server and admission for `--embedded`
//!   (feature `embedded`; the production image is built without it).

pub use operator_runtime::{actions, clock, controller, error_chain, events, hotswap, leader, manager, metrics, record, registry, sandbox, webhook};

pub mod cli;
#[cfg(feature = "embedded")]
pub mod embedded;
