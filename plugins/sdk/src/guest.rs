//! The Wasm edge: wit-bindgen's bindings for `wit/plugin.wit` and their
//! conversion to and from the SDK's plain types. Nothing outside this module
//! sees generated code.

#[doc(hidden)]
pub mod bindings {
    wit_bindgen::generate!({
        path: "wit",
        world: "plugin",
        pub_export_macro: true,
        export_macro_name: "__export_operator_plugin_world",
        default_bindings_module: "operator_plugin_sdk::__private::bindings",
    });
}

use bindings::exports::operator::plugin::controller as wit;
use bindings::exports::operator::plugin::desired as wit_desired;
use bindings::exports::operator::plugin::prioritized as wit_prioritized;
use bindings::operator::plugin::log as wit_log;

use crate::contract::{
    Action, Attachment, EventType, FieldError, FieldErrorKind, GroupVersionKind, Level, Manifest, ObjectRef, Propagation, ReconcileError, RelatedKind,
};

pub(crate) fn log(level: Level, message: &str) {
    let level = match level {
        Level::Trace => wit_log::Level::Trace,
        Level::Debug => wit_log::Level::Debug,
        Level::Info => wit_log::Level::Info,
        Level::Warn => wit_log::Level::Warn,
        Level::Error => wit_log::Level::Error,
    };
    wit_log::log(level, message);
}

fn gvk(g: GroupVersionKind) -> wit::GroupVersionKind {
    wit::GroupVersionKind { group: g.group, version: g.version, kind: g.kind }
}

fn object_ref(r: ObjectRef) -> wit::ObjectRef {
    wit::ObjectRef { api_version: r.api_version, kind: r.kind, namespace: r.namespace, name: r.name }
}

pub fn manifest(m: Manifest) -> wit::PluginManifest {
    wit::PluginManifest {
        name: m.name,
        version: m.version,
        parent: gvk(m.parent),
        children: m.children.into_iter().map(gvk).collect(),
        related: m.related.into_iter().map(related_kind).collect(),
        crds: m.crds.iter().map(|c| c.to_string()).collect(),
        finalizer: m.finalizer,
    }
}

fn related_kind(r: RelatedKind) -> wit::RelatedKind {
    wit::RelatedKind {
        kind: gvk(r.kind),
        attach: match r.attach {
            Attachment::SelectorFrom(path) => wit::Attachment::SelectorFrom(path),
            Attachment::NamesFrom(paths) => wit::Attachment::NamesFrom(paths),
            Attachment::FixedSelector(selector) => wit::Attachment::FixedSelector(selector.to_string()),
        },
        cluster_scoped: r.cluster_scoped,
    }
}

/// An action of `controller.reconcile`. An apply has no such form: a 0.3
/// host calls `desired.reconcile`, and a plugin that applies answers
/// `controller.reconcile` with the error [`apply_needs_desired`]. A
/// low-priority requeue is a plain `requeue-after` there (a 0.4 host calls
/// `prioritized.reconcile`, which carries the priority; the priority is a
/// hint, the requeue itself is kept).
pub fn action(a: Action) -> Result<wit::Action, ReconcileError> {
    Ok(match a {
        Action::Create(o) => wit::Action::Create(o.to_string()),
        Action::Replace(o) => wit::Action::Replace(o.to_string()),
        Action::Patch { target, patch } => wit::Action::Patch(wit::MergePatch { target: object_ref(target), patch: patch.to_string() }),
        Action::Delete { target, propagation } => wit::Action::Delete(wit::Deletion {
            target: object_ref(target),
            propagation: match propagation {
                Propagation::Background => wit::Propagation::Background,
                Propagation::Foreground => wit::Propagation::Foreground,
                Propagation::Orphan => wit::Propagation::Orphan,
            },
        }),
        Action::SetStatus(s) => wit::Action::SetStatus(s.to_string()),
        Action::Event { event_type, reason, message } => wit::Action::Event(wit::Event {
            event_type: match event_type {
                EventType::Normal => wit::EventType::Normal,
                EventType::Warning => wit::EventType::Warning,
            },
            reason,
            message,
        }),
        Action::RequeueAfterMs(ms) | Action::RequeueLowAfterMs(ms) => wit::Action::RequeueAfter(ms),
        Action::Finalized {} => wit::Action::Finalized,
        Action::Apply(_) => return Err(apply_needs_desired()),
    })
}

/// Why `controller.reconcile` cannot carry an apply.
pub fn apply_needs_desired() -> ReconcileError {
    ReconcileError::permanent(
        "ApplyNeedsDesiredState",
        "this plugin applies desired state, which only `desired.reconcile` (contract 0.3) carries; the host called `controller.reconcile`",
    )
}

/// `controller.reconcile`'s answer: every action, or the error of the first apply.
pub fn actions(actions: Vec<Action>) -> Result<Vec<wit::Action>, wit::ReconcileError> {
    actions.into_iter().map(action).collect::<Result<_, _>>().map_err(error)
}

/// One step of `desired.reconcile`.
pub fn step(a: Action) -> wit_desired::Step {
    match a {
        Action::Apply(o) => wit_desired::Step::Apply(o.to_string()),
        other => wit_desired::Step::Act(action(other).expect("only an apply has no action form")),
    }
}

/// `desired.reconcile`'s answer.
pub fn steps(actions: Vec<Action>) -> Vec<wit_desired::Step> {
    actions.into_iter().map(step).collect()
}

/// One directive of `prioritized.reconcile`: a low-priority requeue is a
/// `requeue` at `low`, everything else the step it always was.
pub fn directive(a: Action) -> wit_prioritized::Directive {
    match a {
        Action::RequeueLowAfterMs(after_ms) => {
            wit_prioritized::Directive::Requeue(wit_prioritized::RequeueRequest { after_ms, priority: wit_prioritized::Priority::Low })
        }
        other => wit_prioritized::Directive::Step(step(other)),
    }
}

/// `prioritized.reconcile`'s answer.
pub fn directives(actions: Vec<Action>) -> Vec<wit_prioritized::Directive> {
    actions.into_iter().map(directive).collect()
}

pub fn error(e: ReconcileError) -> wit::ReconcileError {
    wit::ReconcileError { reason: e.reason, message: e.message, retryable: e.retryable }
}

pub fn field_error(e: FieldError) -> wit::FieldError {
    wit::FieldError {
        field: e.field,
        kind: match e.kind {
            FieldErrorKind::Required => wit::FieldErrorKind::Required,
            FieldErrorKind::Invalid => wit::FieldErrorKind::Invalid,
            FieldErrorKind::NotSupported => wit::FieldErrorKind::NotSupported,
            FieldErrorKind::Forbidden => wit::FieldErrorKind::Forbidden,
            FieldErrorKind::TooLong => wit::FieldErrorKind::TooLong,
            FieldErrorKind::Duplicate => wit::FieldErrorKind::Duplicate,
        },
        value: e.value,
        detail: e.detail,
    }
}

pub use wit::Guest;
pub use wit::{Action as WitAction, FieldError as WitFieldError, PluginManifest as WitManifest, ReconcileError as WitReconcileError};
pub use wit_desired::{Guest as DesiredGuest, Step as WitStep};
pub use wit_prioritized::{Directive as WitDirective, Guest as PrioritizedGuest};
