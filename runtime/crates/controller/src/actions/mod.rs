//! What plugins return, checked and carried out: [`policy`] decides what a
//! plugin may do (pure), [`execute`] writes it in order, [`status`] merges the
//! host's `Reconciled` condition into the parent's status.

pub mod execute;
pub mod policy;
pub mod status;

pub use execute::{Executed, Executor, Expectation, FIELD_MANAGER, WriteError, apply_manager};
pub use policy::{APPLIED_BY, AppliedEarlier, Existing, Lookup, Plan, Refusal, Write, check, prune};
