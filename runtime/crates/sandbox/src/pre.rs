//! A component linked for calls: its `InstancePre` and the `controller`
//! exports found in it. A plugin holds one per size class.

use wasmtime::Store;
use wasmtime::component::{Component, Instance, InstancePre};

use super::contract::Minor;
use super::error::LoadError;
use super::exports::Exports;
use super::wasi::CallState;

/// A component ready to instantiate, with its `controller` functions.
pub(super) struct Pre {
    instance_pre: InstancePre<CallState>,
    pub(super) exports: Exports,
}

impl Pre {
    /// Links `component` (compiled by `linker`'s engine) for calls.
    pub(super) fn new(linker: &wasmtime::component::Linker<CallState>, component: &Component, minor: Minor, label: &str) -> Result<Pre, LoadError> {
        let instance_pre = linker.instantiate_pre(component).map_err(|e| LoadError::Link { plugin: label.into(), import: format!("{e:#}") })?;
        let exports =
            Exports::find(&instance_pre, minor).map_err(|e| LoadError::MissingExport { plugin: label.into(), exports: format!("{e:#}") })?;
        Ok(Pre { instance_pre, exports })
    }

    pub(super) fn engine(&self) -> &wasmtime::Engine {
        self.instance_pre.engine()
    }

    pub(super) fn component(&self) -> &Component {
        self.instance_pre.component()
    }

    /// A fresh instance whose exports passed their type check.
    pub(super) fn instantiate(&self, store: &mut Store<CallState>) -> wasmtime::Result<Instance> {
        let instance = self.instance_pre.instantiate(&mut *store)?;
        self.exports.check_once(store, instance)?;
        Ok(instance)
    }
}
