//! The children the host passes to one reconcile, read by type.
//!
//! Each child stays JSON text until asked for: [`Children::of`] reads only
//! `apiVersion` and `kind` of each, and parses the matching ones straight
//! into the requested type, with no intermediate `serde_json::Value`.

use kube_core::Resource;
use serde::Deserializer as _;
use serde::de::DeserializeOwned;

use crate::contract::ReconcileError;
use crate::object::Object;

/// The children of one parent: the objects of the manifest's child kinds
/// that the parent controls.
#[derive(Clone, Debug, Default)]
pub struct Children {
    items: TypedTexts,
}

impl Children {
    /// Reads the host's JSON texts; a child that is not a JSON object is a
    /// permanent error naming its position.
    pub fn from_json(texts: &[String]) -> Result<Self, ReconcileError> {
        Ok(Self { items: TypedTexts::from_json(texts, "child")? })
    }

    /// From already parsed objects (native callers of the untyped trait).
    pub fn from_objects(objects: &[Object]) -> Self {
        Self { items: TypedTexts::from_objects(objects) }
    }

    /// Every child of kind `K` (a k8s-openapi type such as `Job`, or a
    /// `CustomResource`), parsed into `K`, in the host's order.
    pub fn of<K>(&self) -> Result<Vec<K>, ReconcileError>
    where
        K: Resource<DynamicType = ()> + DeserializeOwned,
    {
        self.items.of::<K>("InvalidChild", "child")
    }

    /// Every child as an untyped [`Object`], for kinds without a Rust type.
    pub fn untyped(&self) -> Result<Vec<Object>, ReconcileError> {
        self.items.untyped("child")
    }

    /// How many children there are, of all kinds.
    pub fn len(&self) -> usize {
        self.items.len()
    }

    /// Whether there are no children at all.
    pub fn is_empty(&self) -> bool {
        self.items.is_empty()
    }
}

/// Objects as the host passes them: JSON text, with the two fields that say
/// what each is read up front. Shared by [`Children`] and
/// [`Related`](crate::Related), which differ only in what they hold.
#[derive(Clone, Debug, Default)]
pub(crate) struct TypedTexts {
    items: Vec<TypedText>,
}

#[derive(Clone, Debug)]
struct TypedText {
    api_version: String,
    kind: String,
    json: String,
}

/// The two fields that say what an object is.
#[derive(Default)]
struct TypeMeta {
    api_version: String,
    kind: String,
}

impl TypeMeta {
    /// Reads `apiVersion` and `kind` from a JSON object and stops once both
    /// are found: the API server writes them first, so the rest of the
    /// object (the child itself, read again by [`TypedTexts::of`]) is not
    /// scanned twice. A field missing from the object is empty.
    fn read(text: &str) -> serde_json::Result<TypeMeta> {
        let mut found = None;
        let read = serde_json::Deserializer::from_str(text).deserialize_map(TypeMetaVisitor { found: &mut found });
        // Stopping early leaves the object unclosed, which the map's end
        // reports as an error; the fields are read all the same. The visitor
        // sets `found` whenever it returns, so without it `read` is the error.
        match found {
            Some(meta) => Ok(meta),
            None => read.map(|()| TypeMeta::default()),
        }
    }
}

struct TypeMetaVisitor<'a> {
    found: &'a mut Option<TypeMeta>,
}

/// An object's key, told apart without allocating.
enum TypeMetaKey {
    ApiVersion,
    Kind,
    Other,
}

impl<'de> serde::Deserialize<'de> for TypeMetaKey {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct KeyVisitor;
        impl serde::de::Visitor<'_> for KeyVisitor {
            type Value = TypeMetaKey;
            fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                f.write_str("a field name")
            }
            fn visit_str<E: serde::de::Error>(self, key: &str) -> Result<TypeMetaKey, E> {
                Ok(match key {
                    "apiVersion" => TypeMetaKey::ApiVersion,
                    "kind" => TypeMetaKey::Kind,
                    _ => TypeMetaKey::Other,
                })
            }
        }
        d.deserialize_identifier(KeyVisitor)
    }
}

impl<'de> serde::de::Visitor<'de> for TypeMetaVisitor<'_> {
    type Value = ();

    fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
        f.write_str("a JSON object")
    }

    fn visit_map<A: serde::de::MapAccess<'de>>(self, mut map: A) -> Result<(), A::Error> {
        let (mut api_version, mut kind) = (None, None);
        while let Some(key) = map.next_key::<TypeMetaKey>()? {
            match key {
                TypeMetaKey::ApiVersion => api_version = Some(map.next_value::<String>()?),
                TypeMetaKey::Kind => kind = Some(map.next_value::<String>()?),
                TypeMetaKey::Other => {
                    map.next_value::<serde::de::IgnoredAny>()?;
                }
            }
            if api_version.is_some() && kind.is_some() {
                break;
            }
        }
        *self.found = Some(TypeMeta { api_version: api_version.unwrap_or_default(), kind: kind.unwrap_or_default() });
        Ok(())
    }
}

impl TypedTexts {
    /// `what` names an item in errors (`child 3 is not valid JSON`). Only
    /// each item's start is read here (up to its `apiVersion` and `kind`):
    /// what follows is checked when the item is read as a type or untyped.
    pub(crate) fn from_json(texts: &[String], what: &str) -> Result<Self, ReconcileError> {
        let items = texts
            .iter()
            .enumerate()
            .map(|(i, text)| {
                let meta =
                    TypeMeta::read(text).map_err(|e| ReconcileError::permanent("InvalidInput", format!("{what} {i} is not valid JSON: {e}")))?;
                Ok(TypedText { api_version: meta.api_version, kind: meta.kind, json: text.clone() })
            })
            .collect::<Result<_, ReconcileError>>()?;
        Ok(Self { items })
    }

    pub(crate) fn from_objects(objects: &[Object]) -> Self {
        let items =
            objects.iter().map(|o| TypedText { api_version: o.api_version().into(), kind: o.kind().into(), json: o.value().to_string() }).collect();
        Self { items }
    }

    pub(crate) fn of<K>(&self, reason: &str, what: &str) -> Result<Vec<K>, ReconcileError>
    where
        K: Resource<DynamicType = ()> + DeserializeOwned,
    {
        let (api_version, kind) = (K::api_version(&()), K::kind(&()));
        self.items
            .iter()
            .filter(|c| c.api_version == api_version && c.kind == kind)
            .map(|c| {
                serde_json::from_str(&c.json)
                    .map_err(|e| ReconcileError::permanent(reason, format!("a {what} is not a valid {api_version} {kind}: {e}")))
            })
            .collect()
    }

    pub(crate) fn untyped(&self, what: &str) -> Result<Vec<Object>, ReconcileError> {
        self.items
            .iter()
            .map(|c| Object::from_json(&c.json).map_err(|e| ReconcileError::permanent("InvalidInput", format!("a {what} is not valid JSON: {e}"))))
            .collect()
    }

    pub(crate) fn len(&self) -> usize {
        self.items.len()
    }

    pub(crate) fn is_empty(&self) -> bool {
        self.items.is_empty()
    }
}

/// Makes a struct with a `metadata: ObjectMeta` field a typed view of the
/// k8s-openapi kind `$of`: the same group, version, kind and scope, so
/// [`Children::of`] and [`Manifest::child`](crate::Manifest::child) take it.
///
/// A view reads only the fields a controller uses. Reading children as
/// k8s-openapi's whole `Pod` or `Job` links PodSpec's deserializer (about
/// 450 kB of Wasm) and parses every child's pod template on every call.
///
/// ```ignore
/// #[derive(serde::Deserialize)]
/// pub struct Job { #[serde(default)] pub metadata: ObjectMeta, #[serde(default)] pub status: Option<JobStatus> }
/// operator_plugin_sdk::view_of!(Job, k8s_openapi::api::batch::v1::Job);
/// ```
#[macro_export]
macro_rules! view_of {
    ($view:ty, $of:ty) => {
        impl $crate::k8s_openapi::Resource for $view {
            const API_VERSION: &'static str = <$of as $crate::k8s_openapi::Resource>::API_VERSION;
            const GROUP: &'static str = <$of as $crate::k8s_openapi::Resource>::GROUP;
            const KIND: &'static str = <$of as $crate::k8s_openapi::Resource>::KIND;
            const VERSION: &'static str = <$of as $crate::k8s_openapi::Resource>::VERSION;
            const URL_PATH_SEGMENT: &'static str = <$of as $crate::k8s_openapi::Resource>::URL_PATH_SEGMENT;
            type Scope = <$of as $crate::k8s_openapi::Resource>::Scope;
        }

        impl $crate::k8s_openapi::Metadata for $view {
            type Ty = $crate::k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

            fn metadata(&self) -> &Self::Ty {
                &self.metadata
            }

            fn metadata_mut(&mut self) -> &mut Self::Ty {
                &mut self.metadata
            }
        }
    };
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::batch::v1::Job;
    use k8s_openapi::api::core::v1::ConfigMap;
    use serde_json::json;

    #[test]
    fn of_returns_only_the_requested_kind_parsed() {
        let texts = vec![
            json!({"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": "a"}}).to_string(),
            json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "b"}, "data": {"k": "v"}}).to_string(),
        ];
        let children = Children::from_json(&texts).unwrap();
        let jobs: Vec<Job> = children.of().unwrap();
        assert_eq!(jobs.len(), 1);
        assert_eq!(jobs[0].metadata.name.as_deref(), Some("a"));
        let cms = children.of::<ConfigMap>().unwrap();
        assert_eq!(cms[0].data.as_ref().unwrap()["k"], "v");
    }

    #[test]
    fn a_child_of_the_kind_with_wrong_field_types_is_a_permanent_error() {
        let texts = vec![json!({"apiVersion": "v1", "kind": "ConfigMap", "data": 5}).to_string()];
        let err = Children::from_json(&texts).unwrap().of::<ConfigMap>().unwrap_err();
        assert!(!err.retryable);
        assert!(err.message.contains("v1 ConfigMap"), "{err}");
        assert!(Children::from_json(&["[".to_string()]).is_err());
    }

    #[test]
    fn type_meta_is_read_wherever_it_stands_and_missing_fields_are_empty() {
        let read = |t: &str| TypeMeta::read(t).map(|m| (m.api_version, m.kind));
        assert_eq!(read(r#"{"apiVersion":"batch/v1","kind":"Job","metadata":{"name":"a"}}"#).unwrap(), ("batch/v1".into(), "Job".into()));
        let late = r#"{"metadata":{"name":"a","labels":{"kind":"x"}},"kind":"Job","spec":[1,"}"],"apiVersion":"batch/v1"}"#;
        assert_eq!(read(late).unwrap(), ("batch/v1".into(), "Job".into()));
        assert_eq!(read(r#"{"kind":"Job"}"#).unwrap(), (String::new(), "Job".into()));
        assert!(read("[").is_err() && read("5").is_err() && read(r#"{"kind":"#).is_err());
    }

    /// A view of Job: metadata only, the rest of each child skipped.
    #[derive(serde::Deserialize)]
    struct JobView {
        #[serde(default)]
        metadata: k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta,
    }
    crate::view_of!(JobView, Job);

    #[test]
    fn a_view_of_a_kind_reads_the_children_of_that_kind() {
        assert_eq!((JobView::api_version(&()), JobView::kind(&()), JobView::plural(&())), ("batch/v1".into(), "Job".into(), "jobs".into()));
        let texts = vec![
            json!({"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": "a"}, "spec": {"template": {"spec": {"containers": 5}}}})
                .to_string(),
            json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "b"}}).to_string(),
        ];
        let views = Children::from_json(&texts).unwrap().of::<JobView>().unwrap();
        assert_eq!(views.iter().map(|v| v.metadata.name.as_deref()).collect::<Vec<_>>(), [Some("a")], "the unread spec is not checked");
    }
}
