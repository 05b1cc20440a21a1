//! SDK for operator-host plugins: Kubernetes controller logic compiled to a
//! WebAssembly component.
//!
//! A plugin is a unit struct implementing [`Plugin`] plus one
//! [`export_plugin!`] line. The host calls `reconcile(parent, children, now)`
//! with the whole current state of one parent and the children it controls;
//! the plugin answers with [`Action`]s. The same crate builds natively (for
//! unit tests and benchmarks: call [`plugin::reconcile`] or your
//! `Plugin::reconcile` directly) and for `wasm32-wasip2` or, through
//! `cargo component`, `wasm32-wasip1`.
//!
//! See `docs/plugin-authors.md` in the repository for a walk-through.

pub mod conditions;
pub mod contract;
pub mod log;
pub mod object;
pub mod plugin;
#[cfg(feature = "testing")]
pub mod testing;
pub mod time;

pub use conditions::Condition;
pub use contract::{
    Action, CONTRACT_VERSION, EventType, FieldError, FieldErrorKind, GroupVersionKind, Manifest, ObjectRef, Propagation,
    ReconcileError,
};
pub use object::{Object, OwnerReference};
pub use plugin::Plugin;
pub use time::Time;

pub use serde_json;
pub use serde_json::json;

#[cfg(feature = "k8s-openapi")]
pub use k8s_openapi;

#[cfg(target_arch = "wasm32")]
mod guest;

#[cfg(target_arch = "wasm32")]
#[doc(hidden)]
pub mod __private {
    pub use crate::guest::*;
}
