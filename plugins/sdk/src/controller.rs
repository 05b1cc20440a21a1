//! The typed way to write a plugin: the parent is your own
//! `#[derive(CustomResource)]` type, children come by type, and reconcile
//! answers an [`Outcome`]. Every [`Controller`] is a [`Plugin`], so
//! [`export_plugin!`](crate::export_plugin) and the fixture harness take it
//! as they are.

use kube_core::{CustomResourceExt, Resource};
use serde::Serialize;
use serde::de::DeserializeOwned;

use crate::children::Children;
pub use crate::contract::gvk_of;
use crate::contract::{Action, FieldError, FieldErrorKind, Manifest, ObjectRef, ReconcileError};
use crate::object::Object;
use crate::outcome::Outcome;
use crate::plugin::Plugin;
use crate::related::Related;
use crate::time::Time;

/// A controller's logic over typed objects. Implement it on a unit struct
/// and export it with [`export_plugin!`](crate::export_plugin).
///
/// Every method is a pure function of its arguments: the host calls them
/// from fresh instances, so nothing carries over between calls.
pub trait Controller {
    /// The kind reconciled: the type `#[derive(CustomResource)]` generates.
    type Parent: Resource<DynamicType = ()> + DeserializeOwned + Serialize;

    /// What the plugin is and what it controls; see [`Manifest::for_parent`].
    fn manifest() -> Manifest;

    /// Decide what to do about `parent`, given the children it controls and
    /// the host's clock. Implement this, or [`reconcile_with_related`](Self::reconcile_with_related) when the manifest has related kinds.
    fn reconcile(parent: &Self::Parent, children: &Children, now: Time) -> Result<Outcome, ReconcileError> {
        let _ = (parent, children, now);
        Err(ReconcileError::permanent("NotImplemented", "the plugin implements neither Controller::reconcile nor Controller::reconcile_with_related"))
    }

    /// As [`reconcile`](Self::reconcile), with the related objects the host
    /// found for the manifest's related kinds (contract 0.2; read them with
    /// [`Related::of`]). The default ignores them and calls `reconcile`.
    fn reconcile_with_related(parent: &Self::Parent, children: &Children, related: &Related, now: Time) -> Result<Outcome, ReconcileError> {
        let _ = related;
        Self::reconcile(parent, children, now)
    }

    /// Field errors of a parent; empty means valid. `old` is the stored
    /// parent on update. The host runs it as admission does, after `default`.
    fn validate(parent: &Self::Parent, old: Option<&Self::Parent>) -> Vec<FieldError> {
        let _ = (parent, old);
        Vec::new()
    }

    /// Fills in defaults, as a mutating admission webhook would.
    fn default(parent: &mut Self::Parent) -> Result<(), ReconcileError> {
        let _ = parent;
        Ok(())
    }

    /// What reconcile answers for a parent that does not read into `Parent`
    /// (a field of a type the CRD schema would refuse, in an object no
    /// admission checked). `name` is its `metadata.name` ("" when it has
    /// none) and `error` serde's message without its position in the text,
    /// so the Wasm export and a native call word it alike. The default is a
    /// permanent `InvalidInput` naming the kind; override it to keep a
    /// plugin's own wording.
    fn unreadable_parent(name: &str, error: &str) -> ReconcileError {
        let parent = if name.is_empty() { "the parent".to_string() } else { format!("parent {name}") };
        let (api_version, kind) = (<Self::Parent as Resource>::api_version(&()), <Self::Parent as Resource>::kind(&()));
        ReconcileError::permanent("InvalidInput", format!("{parent} is not a valid {api_version} {kind}: {error}"))
    }

    /// Admission's validation over the object as sent, before it is read
    /// into `Parent`. The default reads both objects and calls
    /// [`validate`](Self::validate); a wrongly typed field then becomes one
    /// error on the whole object. Override it to answer field by field as the
    /// API server does (`spec.suspend: Invalid value: "yes": must be a
    /// boolean`), keeping `reconcile` typed.
    fn validate_raw(object: &Object, old: Option<&Object>) -> Vec<FieldError> {
        let parsed = from_object::<Self::Parent>(object).and_then(|o| Ok((o, old.map(from_object::<Self::Parent>).transpose()?)));
        match parsed {
            Ok((object, old)) => Self::validate(&object, old.as_ref()),
            Err(e) => unreadable(e),
        }
    }

    /// Admission's defaulting over the object as sent. The default reads it
    /// into `Parent`, calls [`default`](Self::default) and writes it back, so
    /// fields `Parent` does not know are dropped; override it to default in
    /// place and keep them.
    ///
    /// An object that does not read into `Parent` (`replicas: "three"`) is
    /// returned unchanged: the API server runs mutating webhooks before its
    /// schema check, which then refuses it in its own words (`spec.replicas:
    /// Invalid value: "string": spec.replicas in body must be of type
    /// integer: "string"`); refusing it here would answer with serde's.
    fn default_raw(object: Object) -> Result<Object, ReconcileError> {
        let Ok(mut parent) = from_object::<Self::Parent>(&object) else {
            return Ok(object);
        };
        Self::default(&mut parent)?;
        Object::from_typed(&parent).map_err(|e| ReconcileError::permanent("SerializationFailed", e.to_string()))
    }
}

impl Manifest {
    /// The manifest of a plugin reconciling `K`, with `K`'s generated CRD.
    ///
    /// ```ignore
    /// Manifest::for_parent::<Memcached>("memcached", env!("CARGO_PKG_VERSION")).child::<Deployment>()
    /// ```
    pub fn for_parent<K>(name: &str, version: &str) -> Self
    where
        K: Resource<DynamicType = ()> + CustomResourceExt,
    {
        Self::with_crd::<K>(name, version, crate::crd::generated::<K>())
    }

    /// The manifest of a plugin reconciling `K`, with the CRD embedded from
    /// the crate's checked-in `crd.json` rather than generated at run time,
    /// which keeps schemars out of the Wasm component (see [`crate::crd`]).
    ///
    /// ```ignore
    /// Manifest::for_parent_with_crd::<Memcached>("memcached", env!("CARGO_PKG_VERSION"), embedded_crd!())
    /// ```
    pub fn for_parent_with_crd<K: Resource<DynamicType = ()>>(name: &str, version: &str, crd_json: &str) -> Self {
        Self::with_crd::<K>(name, version, crate::crd::from_json::<K>(crd_json))
    }

    fn with_crd<K: Resource<DynamicType = ()>>(name: &str, version: &str, crd: serde_json::Value) -> Self {
        Manifest {
            name: name.into(),
            version: version.into(),
            parent: gvk_of::<K>(),
            children: Vec::new(),
            related: Vec::new(),
            crds: vec![crd],
            finalizer: None,
        }
    }

    /// Adds a child kind the plugin may create, change and delete.
    #[must_use]
    pub fn child<K: Resource<DynamicType = ()>>(mut self) -> Self {
        self.children.push(gvk_of::<K>());
        self
    }

    /// Asks the host to keep `finalizer` on parents until an outcome says
    /// [`finalized`](Outcome::finalized).
    #[must_use]
    pub fn with_finalizer(mut self, finalizer: &str) -> Self {
        self.finalizer = Some(finalizer.into());
        self
    }
}

impl ObjectRef {
    /// A reference to a typed object (a child read with
    /// [`Children::of`]), for [`Outcome::patch`] and [`Outcome::delete`].
    pub fn of<K: Resource<DynamicType = ()>>(object: &K) -> Self {
        let meta = object.meta();
        ObjectRef {
            api_version: K::api_version(&()).into_owned(),
            kind: K::kind(&()).into_owned(),
            namespace: meta.namespace.clone().unwrap_or_default(),
            name: meta.name.clone().unwrap_or_default(),
        }
    }
}

fn from_object<K: DeserializeOwned + Resource<DynamicType = ()>>(object: &Object) -> Result<K, ReconcileError> {
    K::deserialize(object.value())
        .map_err(|e| ReconcileError::permanent("InvalidInput", format!("not a valid {} {}: {e}", K::api_version(&()), K::kind(&()))))
}

/// The parent for reconcile, from the host's text; see [`Controller::unreadable_parent`].
fn read_parent<C: Controller>(text: &str) -> Result<C::Parent, ReconcileError> {
    serde_json::from_str(text).map_err(|e| {
        // Only on failure: the name, from whatever of the text still parses.
        let value: Option<serde_json::Value> = serde_json::from_str(text).ok();
        let name = value.as_ref().and_then(|v| v.get("metadata")?.get("name")?.as_str()).unwrap_or_default();
        C::unreadable_parent(name, &without_position(&e))
    })
}

/// The parent for reconcile, from an already parsed object (native callers).
fn parent_of<C: Controller>(object: &Object) -> Result<C::Parent, ReconcileError> {
    <C::Parent as serde::Deserialize>::deserialize(object.value()).map_err(|e| C::unreadable_parent(object.name(), &without_position(&e)))
}

/// serde_json's message without the ` at line L column C` it appends when
/// reading text (a position in one-line JSON the user never saw).
fn without_position(e: &serde_json::Error) -> String {
    let message = e.to_string();
    let position = format!(" at line {} column {}", e.line(), e.column());
    match message.strip_suffix(&position) {
        Some(bare) if e.line() != 0 => bare.to_string(),
        _ => message,
    }
}

#[cfg(test)]
mod unreadable_parent_tests {
    use k8s_openapi::api::core::v1::ConfigMap;

    use super::*;

    /// A controller of ConfigMaps that words unreadable parents its own way.
    struct Strict;

    impl Controller for Strict {
        type Parent = ConfigMap;
        fn manifest() -> Manifest {
            Manifest::for_parent_with_crd::<ConfigMap>("strict", "0.1.0", r#"{"spec": {"group": "", "names": {"kind": "ConfigMap"}}}"#)
        }
        fn reconcile(_: &ConfigMap, _: &Children, _: Time) -> Result<Outcome, ReconcileError> {
            Ok(Outcome::new())
        }
        fn unreadable_parent(name: &str, error: &str) -> ReconcileError {
            ReconcileError::permanent("InvalidSpec", format!("cannot read ConfigMap {name}: {error}"))
        }
    }

    /// As `Strict`, with the SDK's wording.
    struct Plain;

    impl Controller for Plain {
        type Parent = ConfigMap;
        fn manifest() -> Manifest {
            <Strict as Controller>::manifest()
        }
    }

    const MALFORMED: &str = r#"{"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "cm"}, "data": 5}"#;

    #[test]
    fn an_unreadable_parent_is_worded_by_the_controller_alike_from_text_and_objects() {
        let from_text = crate::plugin::reconcile::<Strict>(MALFORMED, &[], 0).unwrap_err();
        assert_eq!(from_text, ReconcileError::permanent("InvalidSpec", "cannot read ConfigMap cm: invalid type: integer `5`, expected a map"));
        let object = Object::from_json(MALFORMED).unwrap();
        assert_eq!(<Strict as Plugin>::reconcile(&object, &[], Time::from_unix_millis(0)).unwrap_err(), from_text);
    }

    #[test]
    fn by_default_an_unreadable_parent_is_invalid_input_naming_the_kind() {
        let err = crate::plugin::reconcile::<Plain>(MALFORMED, &[], 0).unwrap_err();
        assert_eq!(
            err,
            ReconcileError::permanent("InvalidInput", "parent cm is not a valid v1 ConfigMap: invalid type: integer `5`, expected a map")
        );
        let nameless = crate::plugin::reconcile::<Plain>("[]", &[], 0).unwrap_err();
        assert!(nameless.message.starts_with("the parent is not a valid v1 ConfigMap: invalid type: sequence"), "{nameless}");
    }

    /// Admission's schema check comes after defaulting and words the refusal;
    /// defaulting leaves what it cannot read as it is.
    #[test]
    fn defaulting_passes_an_unreadable_parent_through_unchanged() {
        let object = Object::from_json(MALFORMED).unwrap();
        assert_eq!(<Plain as Plugin>::default(object.clone()).unwrap(), object);
    }
}

fn unreadable(e: ReconcileError) -> Vec<FieldError> {
    vec![FieldError { field: String::new(), kind: FieldErrorKind::Invalid, value: None, detail: e.message }]
}

/// A typed controller speaks the contract through the untyped trait; its
/// text entry points parse straight into the types.
impl<C: Controller> Plugin for C {
    fn manifest() -> Manifest {
        C::manifest()
    }

    fn reconcile(parent: &Object, children: &[Object], now: Time) -> Result<Vec<Action>, ReconcileError> {
        let parent = parent_of::<C>(parent)?;
        C::reconcile_with_related(&parent, &Children::from_objects(children), &Related::default(), now).map(Outcome::into_actions)
    }

    fn reconcile_with_related(parent: &Object, children: &[Object], related: &[Object], now: Time) -> Result<Vec<Action>, ReconcileError> {
        let parent = parent_of::<C>(parent)?;
        C::reconcile_with_related(&parent, &Children::from_objects(children), &Related::from_objects(related), now).map(Outcome::into_actions)
    }

    fn validate(object: &Object, old: Option<&Object>) -> Vec<FieldError> {
        C::validate_raw(object, old)
    }

    fn default(object: Object) -> Result<Object, ReconcileError> {
        C::default_raw(object)
    }

    fn reconcile_json(parent: &str, children: &[String], now_ms: i64) -> Result<Vec<Action>, ReconcileError> {
        Self::reconcile_related_json(parent, children, &[], now_ms)
    }

    fn reconcile_related_json(parent: &str, children: &[String], related: &[String], now_ms: i64) -> Result<Vec<Action>, ReconcileError> {
        let parent = read_parent::<C>(parent)?;
        let children = Children::from_json(children)?;
        let related = Related::from_json(related)?;
        C::reconcile_with_related(&parent, &children, &related, Time::from_unix_millis(now_ms)).map(Outcome::into_actions)
    }

    // Admission goes through `validate_raw`/`default_raw`, which a controller
    // may override to read the object as sent; the Plugin trait's defaults
    // for the text entry points parse into `Object` and call them.
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::apps::v1::ControllerRevision;
    use k8s_openapi::api::core::v1::Pod;

    #[test]
    fn object_ref_of_names_a_typed_object_by_its_type_and_metadata() {
        let mut pod = Pod::default();
        pod.metadata.name = Some("web-0".into());
        pod.metadata.namespace = Some("default".into());
        let r = ObjectRef::of(&pod);
        assert_eq!((r.api_version.as_str(), r.kind.as_str(), r.namespace.as_str(), r.name.as_str()), ("v1", "Pod", "default", "web-0"));
        let r = ObjectRef::of(&ControllerRevision::default());
        assert_eq!((r.api_version.as_str(), r.kind.as_str(), r.name.as_str()), ("apps/v1", "ControllerRevision", ""));
    }
}
