//! The operator host: the `host` command line over the controller runtime
//! ([`operator_runtime`], which this crate uses by name and does not
//! re-export), and with the `embedded` feature (on by default) the in-process
//! cluster ([`embedded_cluster`]).
//!
//! - [`cli`]: the `host` command line.

pub mod cli;
