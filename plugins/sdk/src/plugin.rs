//! The trait a plugin implements, and the text-in/text-out calls that both the
//! Wasm export and native callers (tests, benchmarks, the host's native mode)
//! go through, so a plugin behaves the same in both.

use crate::contract::{Action, FieldError, FieldErrorKind, Manifest, ReconcileError};
use crate::object::Object;
use crate::time::Time;

/// A controller's logic over untyped [`Object`]s and the contract's action
/// list. Prefer [`Controller`](crate::Controller), the typed form; every
/// `Controller` is a `Plugin`. Export either with
/// [`export_plugin!`](crate::export_plugin).
///
/// Every method is a pure function of its arguments: the host calls them
/// from fresh instances, so nothing carries over between calls.
pub trait Plugin {
    /// What the plugin is and what it controls.
    fn manifest() -> Manifest;

    /// Decide what to do about `parent`, given the children it controls and
    /// the host's clock.
    fn reconcile(parent: &Object, children: &[Object], now: Time) -> Result<Vec<Action>, ReconcileError>;

    /// As [`reconcile`](Self::reconcile), with the objects of the manifest's
    /// related kinds that attach to `parent` (contract 0.2). The default
    /// ignores them.
    fn reconcile_with_related(parent: &Object, children: &[Object], related: &[Object], now: Time) -> Result<Vec<Action>, ReconcileError> {
        let _ = related;
        Self::reconcile(parent, children, now)
    }

    /// Field errors of an object of the parent kind; empty means valid.
    /// `old` is the stored object on update.
    fn validate(object: &Object, old: Option<&Object>) -> Vec<FieldError> {
        let _ = (object, old);
        Vec::new()
    }

    /// The object with defaults filled in.
    fn default(object: Object) -> Result<Object, ReconcileError> {
        Ok(object)
    }

    /// `reconcile` over the host's JSON texts. The default parses into
    /// [`Object`]s; a [`Controller`](crate::Controller) parses straight into
    /// its types instead.
    #[doc(hidden)]
    fn reconcile_json(parent: &str, children: &[String], now_ms: i64) -> Result<Vec<Action>, ReconcileError> {
        let parent = parse("parent", parent)?;
        let children = children.iter().enumerate().map(|(i, c)| parse(&format!("child {i}"), c)).collect::<Result<Vec<_>, _>>()?;
        Self::reconcile(&parent, &children, Time::from_unix_millis(now_ms))
    }

    /// `reconcile_with_related` over the host's JSON texts (contract 0.2).
    /// The default parses into [`Object`]s.
    #[doc(hidden)]
    fn reconcile_related_json(parent: &str, children: &[String], related: &[String], now_ms: i64) -> Result<Vec<Action>, ReconcileError> {
        let parent = parse("parent", parent)?;
        let parse_all =
            |what: &str, texts: &[String]| texts.iter().enumerate().map(|(i, t)| parse(&format!("{what} {i}"), t)).collect::<Result<Vec<_>, _>>();
        let (children, related) = (parse_all("child", children)?, parse_all("related object", related)?);
        Self::reconcile_with_related(&parent, &children, &related, Time::from_unix_millis(now_ms))
    }

    /// `validate` over JSON texts. Unparseable input is itself a field error.
    #[doc(hidden)]
    fn validate_json(object: &str, old: Option<&str>) -> Vec<FieldError> {
        let unparseable =
            |e: ReconcileError| vec![FieldError { field: String::new(), kind: FieldErrorKind::Invalid, value: None, detail: e.message }];
        let object = match parse("object", object) {
            Ok(o) => o,
            Err(e) => return unparseable(e),
        };
        let old = match old.map(|o| parse("old object", o)).transpose() {
            Ok(o) => o,
            Err(e) => return unparseable(e),
        };
        Self::validate(&object, old.as_ref())
    }

    /// `default` over JSON text.
    #[doc(hidden)]
    fn default_json(object: &str) -> Result<String, ReconcileError> {
        let object = parse("object", object)?;
        let defaulted = Self::default(object)?;
        Ok(defaulted.value().to_string())
    }
}

fn parse(what: &str, text: &str) -> Result<Object, ReconcileError> {
    Object::from_json(text).map_err(|e| ReconcileError::permanent("InvalidInput", format!("{what} is not valid JSON: {e}")))
}

/// `reconcile` over JSON text, exactly as the Wasm export runs it.
pub fn reconcile<P: Plugin>(parent: &str, children: &[String], now_ms: i64) -> Result<Vec<Action>, ReconcileError> {
    P::reconcile_json(parent, children, now_ms)
}

/// `reconcile` over JSON text with the related objects, exactly as the Wasm
/// export runs it.
pub fn reconcile_related<P: Plugin>(parent: &str, children: &[String], related: &[String], now_ms: i64) -> Result<Vec<Action>, ReconcileError> {
    P::reconcile_related_json(parent, children, related, now_ms)
}

/// `validate` over JSON text. Unparseable input is itself a field error.
pub fn validate<P: Plugin>(object: &str, old: Option<&str>) -> Vec<FieldError> {
    P::validate_json(object, old)
}

/// `default` over JSON text.
pub fn default<P: Plugin>(object: &str) -> Result<String, ReconcileError> {
    P::default_json(object)
}

/// Exports a [`Plugin`](crate::Plugin) or [`Controller`](crate::Controller) as the component's `controller`.
///
/// ```ignore
/// struct Hello;
/// impl operator_plugin_sdk::Plugin for Hello { /* ... */ }
/// operator_plugin_sdk::export_plugin!(Hello);
/// ```
///
/// Natively the macro expands to nothing, so the crate also builds as a plain
/// library for tests and benchmarks.
#[macro_export]
macro_rules! export_plugin {
    ($plugin:ty) => {
        // rustfmt's layout of this block is not stable (each run moves the export line).
        #[rustfmt::skip]
        #[cfg(target_arch = "wasm32")]
        const _: () = {
            use $crate::__private as __p;
            struct __OperatorPluginExport;
            impl __p::Guest for __OperatorPluginExport {
                fn manifest() -> __p::WitManifest {
                    __p::manifest(<$plugin as $crate::Plugin>::manifest())
                }
                fn reconcile(parent: String, children: Vec<String>, related: Vec<String>, now: i64) -> Result<Vec<__p::WitAction>, __p::WitReconcileError> {
                    $crate::plugin::reconcile_related::<$plugin>(&parent, &children, &related, now).map_err(__p::error).and_then(__p::actions)
                }
                fn validate(object: String, old: Option<String>) -> Vec<__p::WitFieldError> {
                    $crate::plugin::validate::<$plugin>(&object, old.as_deref()).into_iter().map(__p::field_error).collect()
                }
                fn default(object: String) -> Result<String, __p::WitReconcileError> {
                    $crate::plugin::default::<$plugin>(&object).map_err(__p::error)
                }
            }
            impl __p::DesiredGuest for __OperatorPluginExport {
                fn reconcile(parent: String, children: Vec<String>, related: Vec<String>, now: i64) -> Result<Vec<__p::WitStep>, __p::WitReconcileError> {
                    $crate::plugin::reconcile_related::<$plugin>(&parent, &children, &related, now).map(__p::steps).map_err(__p::error)
                }
            }
            impl __p::PrioritizedGuest for __OperatorPluginExport {
                fn reconcile(parent: String, children: Vec<String>, related: Vec<String>, now: i64) -> Result<Vec<__p::WitDirective>, __p::WitReconcileError> {
                    $crate::plugin::reconcile_related::<$plugin>(&parent, &children, &related, now).map(__p::directives).map_err(__p::error)
                }
            }
            $crate::__private::bindings::__export_operator_plugin_world!(__OperatorPluginExport with_types_in $crate::__private::bindings);
        };
    };
}
