//! The WIT edge of the host: `bindgen!` output for every contract minor it
//! runs (`wit/v0.1/plugin.wit`, `wit/v0.2/plugin.wit`, `wit/v0.3/plugin.wit`,
//! `wit/plugin.wit` = 0.4) and their
//! conversion to the SDK's plain types, the one internal representation.
//! Nothing outside this module sees generated code.

use operator_plugin_sdk::{
    Action, Attachment, EventType, FieldError, FieldErrorKind, GroupVersionKind, Manifest, ObjectRef, Propagation, ReconcileError, RelatedKind,
};

/// Contract 0.1: no related kinds.
pub(crate) mod v0_1 {
    wasmtime::component::bindgen!({ path: "../../../wit/v0.1", world: "plugin" });
    pub(crate) use exports::operator::plugin::controller as wit;
    pub(crate) use operator::plugin::log as wit_log;
}

/// Contract 0.2: 0.1 plus related kinds.
pub(crate) mod v0_2 {
    wasmtime::component::bindgen!({ path: "../../../wit/v0.2", world: "plugin" });
    pub(crate) use exports::operator::plugin::controller as wit;
    pub(crate) use operator::plugin::log as wit_log;
}

/// Contract 0.3: 0.2 plus `desired` (children applied server-side).
pub(crate) mod v0_3 {
    wasmtime::component::bindgen!({ path: "../../../wit/v0.3", world: "plugin" });
    pub(crate) use exports::operator::plugin::controller as wit;
    pub(crate) use exports::operator::plugin::desired as wit_desired;
    pub(crate) use operator::plugin::log as wit_log;
}

/// Contract 0.4: 0.3 plus `prioritized` (a requeue may ask for low priority).
pub(crate) mod v0_4 {
    wasmtime::component::bindgen!({ path: "../../../wit", world: "plugin" });
    pub(crate) use exports::operator::plugin::controller as wit;
    pub(crate) use exports::operator::plugin::desired as wit_desired;
    pub(crate) use exports::operator::plugin::prioritized as wit_prioritized;
    pub(crate) use operator::plugin::log as wit_log;
}

/// Why a plugin's output could not be taken: it is the plugin's fault, and
/// names the action and field.
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct InvalidOutput(pub String);

fn json(what: &str, text: &str) -> Result<serde_json::Value, InvalidOutput> {
    serde_json::from_str(text).map_err(|e| InvalidOutput(format!("{what} is not valid JSON: {e}")))
}

fn json_object(what: &str, text: &str) -> Result<serde_json::Value, InvalidOutput> {
    let value = json(what, text)?;
    if value.is_object() { Ok(value) } else { Err(InvalidOutput(format!("{what} must be a JSON object"))) }
}

/// The conversions every minor shares: its generated types are the same
/// shapes under another path.
macro_rules! conversions {
    ($minor:ident) => {
        use crate::bindings::$minor::wit;

        pub(crate) fn gvk(g: wit::GroupVersionKind) -> GroupVersionKind {
            GroupVersionKind { group: g.group, version: g.version, kind: g.kind }
        }

        fn object_ref(r: wit::ObjectRef) -> ObjectRef {
            ObjectRef { api_version: r.api_version, kind: r.kind, namespace: r.namespace, name: r.name }
        }

        pub(crate) fn actions(actions: Vec<wit::Action>) -> Result<Vec<Action>, InvalidOutput> {
            actions.into_iter().enumerate().map(|(i, a)| action(i, a)).collect()
        }

        fn action(i: usize, a: wit::Action) -> Result<Action, InvalidOutput> {
            Ok(match a {
                wit::Action::Create(o) => Action::Create(json_object(&format!("action {i} (create)"), &o)?),
                wit::Action::Replace(o) => Action::Replace(json_object(&format!("action {i} (replace)"), &o)?),
                wit::Action::Patch(p) => {
                    Action::Patch { target: object_ref(p.target), patch: json_object(&format!("action {i} (patch)"), &p.patch)? }
                }
                wit::Action::Delete(d) => Action::Delete {
                    target: object_ref(d.target),
                    propagation: match d.propagation {
                        wit::Propagation::Background => Propagation::Background,
                        wit::Propagation::Foreground => Propagation::Foreground,
                        wit::Propagation::Orphan => Propagation::Orphan,
                    },
                },
                wit::Action::SetStatus(s) => Action::SetStatus(json_object(&format!("action {i} (set-status)"), &s)?),
                wit::Action::Event(e) => Action::Event {
                    event_type: match e.event_type {
                        wit::EventType::Normal => EventType::Normal,
                        wit::EventType::Warning => EventType::Warning,
                    },
                    reason: e.reason,
                    message: e.message,
                },
                wit::Action::RequeueAfter(ms) => Action::RequeueAfterMs(ms),
                wit::Action::Finalized => Action::Finalized {},
            })
        }

        pub(crate) fn reconcile_error(e: wit::ReconcileError) -> ReconcileError {
            ReconcileError { reason: e.reason, message: e.message, retryable: e.retryable }
        }

        pub(crate) fn field_error(e: wit::FieldError) -> FieldError {
            FieldError {
                field: e.field,
                kind: match e.kind {
                    wit::FieldErrorKind::Required => FieldErrorKind::Required,
                    wit::FieldErrorKind::Invalid => FieldErrorKind::Invalid,
                    wit::FieldErrorKind::NotSupported => FieldErrorKind::NotSupported,
                    wit::FieldErrorKind::Forbidden => FieldErrorKind::Forbidden,
                    wit::FieldErrorKind::TooLong => FieldErrorKind::TooLong,
                    wit::FieldErrorKind::Duplicate => FieldErrorKind::Duplicate,
                },
                value: e.value,
                detail: e.detail,
            }
        }
    };
}

/// Converted outputs of a 0.1 component.
pub(crate) mod from_v0_1 {
    use super::*;
    conversions!(v0_1);

    pub(crate) fn manifest(m: wit::PluginManifest) -> Result<Manifest, InvalidOutput> {
        let crds = crds(&m.crds)?;
        Ok(Manifest {
            name: m.name,
            version: m.version,
            parent: gvk(m.parent),
            children: m.children.into_iter().map(gvk).collect(),
            related: Vec::new(),
            crds,
            finalizer: m.finalizer,
        })
    }
}

/// The manifest of 0.2 and later, which has related kinds (the record is
/// the same in each minor, but each minor's bindings are their own types).
macro_rules! manifest_with_related {
    () => {
        pub(crate) fn manifest(m: wit::PluginManifest) -> Result<Manifest, InvalidOutput> {
            let crds = crds(&m.crds)?;
            let related = m.related.into_iter().enumerate().map(|(i, r)| related_kind(i, r)).collect::<Result<Vec<_>, _>>()?;
            Ok(Manifest {
                name: m.name,
                version: m.version,
                parent: gvk(m.parent),
                children: m.children.into_iter().map(gvk).collect(),
                related,
                crds,
                finalizer: m.finalizer,
            })
        }

        fn related_kind(i: usize, r: wit::RelatedKind) -> Result<RelatedKind, InvalidOutput> {
            use wit::Attachment as A;
            let attach = match r.attach {
                A::SelectorFrom(path) => Attachment::SelectorFrom(path),
                A::NamesFrom(paths) => Attachment::NamesFrom(paths),
                A::FixedSelector(text) => Attachment::FixedSelector(json_object(&format!("manifest related[{i}] fixed-selector"), &text)?),
            };
            Ok(RelatedKind { kind: gvk(r.kind), attach, cluster_scoped: r.cluster_scoped })
        }
    };
}

/// Converted outputs of a 0.2 component.
pub(crate) mod from_v0_2 {
    use super::*;
    conversions!(v0_2);

    manifest_with_related!();
}

/// The conversions 0.3 and later share: `desired`'s steps and the manifest
/// with related kinds.
macro_rules! desired_conversions {
    ($minor:ident) => {
        /// `desired.reconcile`'s steps as actions: an apply is [`Action::Apply`].
        pub(crate) fn steps(steps: Vec<crate::bindings::$minor::wit_desired::Step>) -> Result<Vec<Action>, InvalidOutput> {
            steps.into_iter().enumerate().map(|(i, s)| step(i, s)).collect()
        }

        fn step(i: usize, s: crate::bindings::$minor::wit_desired::Step) -> Result<Action, InvalidOutput> {
            use crate::bindings::$minor::wit_desired::Step;
            match s {
                Step::Act(a) => action(i, a),
                Step::Apply(o) => Ok(Action::Apply(json_object(&format!("action {i} (apply)"), &o)?)),
            }
        }

        manifest_with_related!();
    };
}

/// Converted outputs of a 0.3 component.
pub(crate) mod from_v0_3 {
    use super::*;
    conversions!(v0_3);
    desired_conversions!(v0_3);
}

/// Converted outputs of a 0.4 component.
pub(crate) mod from_v0_4 {
    use super::*;
    conversions!(v0_4);
    desired_conversions!(v0_4);

    /// `prioritized.reconcile`'s directives as actions: a low-priority
    /// requeue is [`Action::RequeueLowAfterMs`], a normal one the plain
    /// [`Action::RequeueAfterMs`] every minor answers.
    pub(crate) fn directives(directives: Vec<crate::bindings::v0_4::wit_prioritized::Directive>) -> Result<Vec<Action>, InvalidOutput> {
        use crate::bindings::v0_4::wit_prioritized::{Directive, Priority};
        directives
            .into_iter()
            .enumerate()
            .map(|(i, d)| match d {
                Directive::Step(s) => step(i, s),
                Directive::Requeue(r) => Ok(match r.priority {
                    Priority::Normal => Action::RequeueAfterMs(r.after_ms),
                    Priority::Low => Action::RequeueLowAfterMs(r.after_ms),
                }),
            })
            .collect()
    }
}

fn crds(texts: &[String]) -> Result<Vec<serde_json::Value>, InvalidOutput> {
    texts.iter().enumerate().map(|(i, c)| json_object(&format!("manifest crds[{i}]"), c)).collect()
}
