//! SDK for operator-host plugins: Kubernetes controller logic compiled to a
//! WebAssembly component.
//!
//! A plugin is a unit struct implementing [`Controller`] (typed: the parent
//! is your own `#[derive(CustomResource)]` type, children come by type, the
//! answer is an [`Outcome`]) or the untyped [`Plugin`], plus one
//! [`export_plugin!`] line. The host calls `reconcile(parent, children, now)`
//! with the whole current state of one parent and the children it controls.
//! The same crate builds natively (for unit tests and benchmarks: call
//! [`plugin::reconcile`] or your trait methods directly) and for
//! `wasm32-wasip2` or, through `cargo component`, `wasm32-wasip1`.
//!
//! ```ignore
//! use operator_plugin_sdk::prelude::*;
//!
//! #[derive(CustomResource, JsonSchema, Serialize, Deserialize, Clone, Debug, Default)]
//! #[kube(group = "demo.example.com", version = "v1alpha1", kind = "Demo", namespaced, status = "DemoStatus")]
//! // The derive names the crates it uses; this points them into the SDK.
//! #[kube(crates(kube_core = "::operator_plugin_sdk::kube_core", k8s_openapi = "::operator_plugin_sdk::k8s_openapi", schemars = "::operator_plugin_sdk::schemars", serde_json = "::operator_plugin_sdk::serde_json"))]
//! pub struct DemoSpec { pub greeting: String }
//! ```
//!
//! Versions: k8s-openapi 0.29 with feature `latest` (re-exported as
//! [`k8s_openapi`]; `Deployment.spec` etc. follow that release), kube-core
//! and kube-derive 5, schemars 1. The WIT contract this SDK implements is
//! `operator:plugin@`[`CONTRACT_VERSION`], bundled in the crate.
//!
//! See `docs/plugin-authors.md` in the repository for a walk-through.

#![deny(missing_docs)]

pub mod children;
pub mod conditions;
pub mod contract;
pub mod controller;
pub mod crd;
pub mod log;
pub mod object;
pub mod outcome;
pub mod plugin;
pub mod related;
#[cfg(feature = "testing")]
pub mod testing;
pub mod time;

/// This SDK's version (what `host new` writes as the dependency).
pub const VERSION: &str = env!("CARGO_PKG_VERSION");

pub use children::Children;
pub use conditions::Condition;
pub use contract::{
    Action, Attachment, CONTRACT_VERSION, EventType, FieldError, FieldErrorKind, FieldValue, GroupVersionKind, Manifest, ObjectRef, Propagation,
    ReconcileError, RelatedKind,
};
pub use controller::{Controller, gvk_of};
pub use object::{Object, OwnerReference};
pub use outcome::{Outcome, RequeuePriority};
pub use plugin::Plugin;
pub use related::Related;
pub use time::Time;

pub use k8s_openapi;
pub use kube_core;
pub use kube_core::{CustomResourceExt, Resource, ResourceExt};
pub use kube_derive::CustomResource;
pub use schemars;
pub use schemars::JsonSchema;
pub use serde;
pub use serde_json;
pub use serde_json::json;

/// What a plugin's `lib.rs` needs in one `use`: the traits, the derives
/// (`CustomResource`, `JsonSchema`, `Serialize`, `Deserialize`), the crates
/// the derives refer to, [`conditions`] with [`Condition`], [`FieldError`],
/// and `serde_json` with its `json!`.
///
/// ```
/// use operator_plugin_sdk::prelude::*;
///
/// let mut list: Vec<Condition> = Vec::new();
/// conditions::set(&mut list, Condition::new("Ready", true, "Available", "all replicas are ready"), Time::from_unix_millis(0));
/// assert_eq!(serde_json::to_value(&list[0])?["status"], json!("True"));
/// let refused = FieldError::invalid("spec.replicas", 20, "must be at most 10");
/// assert_eq!(refused.to_string(), "spec.replicas: Invalid value: 20: must be at most 10");
/// # Ok::<(), serde_json::Error>(())
/// ```
pub mod prelude {
    pub use crate::{
        Action, Children, Condition, Controller, CustomResource, CustomResourceExt, FieldError, FieldValue, JsonSchema, Manifest, Object, ObjectRef,
        Outcome, ReconcileError, Related, RelatedKind, Resource, ResourceExt, Time, conditions, embedded_crd, export_plugin, json, k8s_openapi,
        schemars, serde_json,
    };
    pub use serde::{Deserialize, Serialize};
}

// The bump arena is the Wasm build's allocator; its logic is unit-tested natively.
#[cfg(any(test, all(target_arch = "wasm32", feature = "arena")))]
mod arena;
// The Wasm edge is reached only through the hidden `__private`, by the code
// `export_plugin!` expands to; it is not API.
#[cfg(target_arch = "wasm32")]
#[allow(missing_docs)]
mod guest;

#[cfg(target_arch = "wasm32")]
#[doc(hidden)]
pub mod __private {
    pub use crate::guest::*;
}

#[cfg(test)]
mod tests {
    /// The bundled contract is the repository's `wit/plugin.wit`, byte for
    /// byte (checked only inside the repository; a packaged SDK has no `../..`).
    #[test]
    fn bundled_wit_is_the_repository_contract() {
        let bundled = include_str!("../wit/plugin.wit");
        let repo = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../wit/plugin.wit");
        if let Ok(text) = std::fs::read_to_string(&repo) {
            assert_eq!(bundled, text, "plugins/sdk/wit/plugin.wit differs from wit/plugin.wit: copy it");
        }
    }
}
