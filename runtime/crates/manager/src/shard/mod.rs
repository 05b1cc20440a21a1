//! Sharding a controller's parents across replicas of the host (`host run
//! --sharded`), on the protocol of [`operator_sharding`]: what a controller
//! needs (the labels, the drain acknowledgements) is the controller's
//! ([`crate::controller::shard`]); each replica keeps its own Lease
//! ([`lease`]), and the elected leader also runs the [`sharder`], which
//! assigns, drains and moves parents as replicas come and go.

pub use crate::controller::shard::*;

pub mod lease;
pub mod sharder;
