//! Record and replay: because a reconcile is a pure function of (parent,
//! children, now), a call recorded in production can be run again, later,
//! against another build of the plugin, and the two answers compared.
//!
//! - [`Call`]: one recorded reconcile: plugin name, version and digest, the
//!   inputs exactly as the plugin saw them, its answer or its error.
//! - [`redact`]: Secret `data`/`stringData` values are replaced before a call
//!   is written, unless the operator asks to keep them.
//! - [`log`]: the bounded on-disk log (JSON Lines files, rotated by size),
//!   written off the hot path, and its reader.
//! - [`compare`]: the one comparison of two answers, used by `host replay`
//!   and by shadow runs ([`crate::hotswap::shadow`]).
//! - [`tap`]: the log and the shadow as observers on the controller's
//!   plugin-call hook.

pub mod compare;
pub mod log;
pub mod redact;
pub mod tap;

use operator_plugin_sdk::{Action, GroupVersionKind};
use serde::{Deserialize, Serialize};

use crate::sandbox::{CallError, LoadedPlugin};

pub use compare::{Difference, Verdict};
pub use log::{Config, Recorder};
pub use tap::Tap;

/// What a plugin answered to one reconcile.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub enum Answer {
    Actions(Vec<Action>),
    /// The call failed: a plugin error or a trap (deadline, memory, panic...).
    Error(Failure),
}

/// A failed call, as far as comparing two versions cares.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Failure {
    /// [`CallError::kind`]: `plugin_error`, `trap`, `deadline`, ...
    pub kind: String,
    /// [`CallError::reason`], e.g. `InvalidSpec` or `PluginTrapped`.
    pub reason: String,
    pub message: String,
    pub retryable: bool,
}

impl Answer {
    pub fn of(result: &Result<Vec<Action>, CallError>) -> Self {
        match result {
            Ok(actions) => Answer::Actions(actions.clone()),
            Err(e) => Answer::Error(Failure { kind: e.kind().into(), reason: e.reason(), message: e.to_string(), retryable: e.retryable() }),
        }
    }
}

/// The inputs of one reconcile, exactly as the plugin saw them.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Inputs {
    /// The parent as JSON text.
    pub parent: String,
    /// The children as JSON texts, in the order the plugin got them.
    pub children: Vec<String>,
    /// The related objects as JSON texts (contract 0.2), in the order the plugin got them.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub related: Vec<String>,
    /// The clock's `now`, ms since the epoch (UTC).
    pub now: i64,
}

impl Inputs {
    /// `Kind namespace/name` of the parent, for messages.
    pub fn parent_name(&self) -> String {
        let v: serde_json::Value = serde_json::from_str(&self.parent).unwrap_or_default();
        let kind = v["kind"].as_str().unwrap_or("?");
        let name = v["metadata"]["name"].as_str().unwrap_or("?");
        match v["metadata"]["namespace"].as_str() {
            Some(ns) if !ns.is_empty() => format!("{kind} {ns}/{name}"),
            _ => format!("{kind} {name}"),
        }
    }
}

/// One recorded reconcile: a line of the log.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Call {
    /// The plugin's manifest name and version.
    pub plugin: String,
    pub version: String,
    /// SHA-256 of the component that answered.
    pub digest: String,
    /// The kind the plugin reconciles: a replay with a plugin of another kind is refused.
    pub parent_kind: GroupVersionKind,
    #[serde(flatten)]
    pub inputs: Inputs,
    pub answer: Answer,
    /// Whether Secret values in the inputs and answer were replaced by
    /// [`redact::REDACTED`] (the default); a replay redacts the new answer
    /// the same way before comparing.
    #[serde(default)]
    pub redacted: bool,
}

impl Call {
    /// A call of `plugin`, redacted unless `keep_secrets`.
    pub fn new(plugin: &LoadedPlugin, inputs: Inputs, answer: Answer, keep_secrets: bool) -> Self {
        let mut call = Call {
            plugin: plugin.name().into(),
            version: plugin.manifest().version.clone(),
            digest: plugin.info().digest.clone(),
            parent_kind: plugin.manifest().parent.clone(),
            inputs,
            answer,
            redacted: false,
        };
        if !keep_secrets {
            call.redacted = true;
            redact::call(&mut call);
        }
        call
    }
}
