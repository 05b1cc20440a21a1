//! Plugins linked into the host instead of loaded as Wasm
//! ([`crate::Sandbox::load_native`]). They exist to measure what the sandbox costs: the same
//! `operator_plugin_sdk::plugin` text calls the Wasm export runs, without a
//! Store, instantiation or the component ABI. A native plugin has no memory
//! cap, no deadline and no isolation, so only benchmarks load one: nothing
//! in the host's commands can.

use operator_plugin_sdk::{Action, FieldError, Plugin, ReconcileError, plugin};

type Reconcile = fn(&str, &[String], &[String], i64) -> Result<Vec<Action>, ReconcileError>;
type Validate = fn(&str, Option<&str>) -> Vec<FieldError>;
type Default = fn(&str) -> Result<String, ReconcileError>;

/// The text entry points of one [`Plugin`] implementation.
pub(super) struct NativeCalls {
    pub(super) reconcile: Reconcile,
    pub(super) validate: Validate,
    pub(super) default: Default,
}

impl NativeCalls {
    pub(super) fn of<P: Plugin>() -> Self {
        Self { reconcile: plugin::reconcile_related::<P>, validate: plugin::validate::<P>, default: plugin::default::<P> }
    }
}
