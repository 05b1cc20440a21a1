//! The lightest helpers of the workspace's tests, shared by every crate's tests: [`wait`] polls a
//! condition until it holds (async and blocking), [`kubectl`] runs the real kubectl against one
//! kubeconfig.
//!
//! It depends on no crate of the workspace on purpose: the API server, the simulated cluster and
//! the runtime's crates sit below `operator-runtime`, and their tests could not use helpers that
//! need it (`operator-test-support` holds those).

#![warn(missing_docs)]

pub mod kubectl;
pub mod wait;

pub use kubectl::Kubectl;
pub use wait::{eventually, until};
