//! One object as the cache keeps it ([`CachedObject`]): the JSON text the
//! plugins receive, serialized once per resourceVersion and shared with every
//! call, plus the few fields the indexes, the queue mappers, the expectations
//! and the reconcile driver read without parsing the text again.
//!
//! The strings among those fields (namespace, name, uid, resourceVersion,
//! the controller ownerReference, and labels and finalizers as their JSON
//! text, parsed when read) are not separate allocations but ranges of the
//! text, which already holds each of them: at 100,000 cached objects a dozen
//! small `String`s per object were a third of the cache. A value the text
//! holds only escaped (a quote, a backslash, a control character) is kept in
//! a small side string instead. The entry itself is 144 bytes of heap.

use std::collections::BTreeMap;
use std::sync::Arc;

use kube::api::DynamicObject;
use sha2::{Digest, Sha256};

/// `namespace/name` (namespace empty for cluster-scoped objects).
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ObjectKey {
    pub namespace: String,
    pub name: String,
}

impl ObjectKey {
    pub fn new(namespace: impl Into<String>, name: impl Into<String>) -> Self {
        Self { namespace: namespace.into(), name: name.into() }
    }

    pub fn of(obj: &DynamicObject) -> Self {
        Self::new(obj.metadata.namespace.clone().unwrap_or_default(), obj.metadata.name.clone().unwrap_or_default())
    }
}

impl std::fmt::Display for ObjectKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        if self.namespace.is_empty() { write!(f, "{}", self.name) } else { write!(f, "{}/{}", self.namespace, self.name) }
    }
}

/// A range of an entry's strings: of its JSON text, or past the text's end,
/// of its side string.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
struct Span {
    start: u32,
    len: u32,
}

impl Span {
    /// A field the object does not have.
    const ABSENT: Span = Span { start: u32::MAX, len: 0 };
}

/// Where the strings of an entry are found while it is built.
struct Placer<'a> {
    text: &'a str,
    extra: String,
}

impl Placer<'_> {
    /// A range holding `value`: any place in the text with the same bytes
    /// will do (only the content is ever read), else the side string.
    fn place(&mut self, value: &str) -> Span {
        let len = u32::try_from(value.len()).expect("object strings are far below 4 GiB");
        if value.is_empty() {
            return Span::default();
        }
        let start = match self.text.find(value) {
            Some(at) => at,
            None => {
                let at = self.text.len() + self.extra.len();
                self.extra.push_str(value);
                at
            }
        };
        Span { start: u32::try_from(start).expect("objects are far below 4 GiB"), len }
    }
}

fn json_text<T: serde::Serialize>(value: &T) -> String {
    serde_json::to_string(value).expect("maps and lists of strings serialize")
}

/// The controller ownerReference of an object.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ControllerRef<'a> {
    pub api_version: &'a str,
    pub kind: &'a str,
    pub name: &'a str,
    pub uid: &'a str,
}

/// `metadata.labels`, parsed from the entry's text (only label selectors of
/// related kinds read them).
#[derive(Clone, Debug, Default)]
pub struct Labels(BTreeMap<String, String>);

impl Labels {
    pub fn get(&self, key: &str) -> Option<&str> {
        self.0.get(key).map(String::as_str)
    }

    pub fn contains_key(&self, key: &str) -> bool {
        self.get(key).is_some()
    }
}

impl operator_selector::LabelSet for Labels {
    fn get(&self, key: &str) -> Option<&str> {
        Labels::get(self, key)
    }
}

/// A digest of everything but `status` and `metadata.resourceVersion` (the
/// first 128 bits of its SHA-256, plenty to tell two versions of one object
/// apart): equal fingerprints mean the object changed by a status write at most.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Fingerprint(pub [u8; 16]);

/// One object as the cache keeps it: its JSON text (type fields filled in,
/// managedFields dropped), shared with every plugin call that reads it, and
/// the fields the indexes, the queue mappers and the reconcile driver read
/// without parsing it.
#[derive(Debug)]
pub struct CachedObject {
    json: Arc<str>,
    /// Strings the text holds only escaped; spans past the text's end point here.
    extra: Box<str>,
    namespace: Span,
    name: Span,
    uid: Span,
    resource_version: Span,
    /// `metadata.labels` as a JSON object.
    labels: Span,
    /// `metadata.finalizers` as a JSON array.
    finalizers: Span,
    /// apiVersion, kind, name and uid of the controller ownerReference.
    /// Boxed: most cached objects have none.
    controller: Option<Box<[Span; 4]>>,
    /// `metadata.generation`, [`NO_GENERATION`] when absent.
    generation: i64,
    /// `metadata.deletionTimestamp` is set.
    pub deleting: bool,
    /// See [`Fingerprint`].
    pub fingerprint: Fingerprint,
}

/// Stands for an object without `metadata.generation` (objects without a spec).
const NO_GENERATION: i64 = i64::MIN;

impl CachedObject {
    /// The compact form of `obj` (serialized here, once).
    pub fn new(mut obj: DynamicObject) -> Self {
        // The fingerprint is taken with status and resourceVersion out, then
        // both go back for the text the plugins receive.
        let status = obj.data.as_object_mut().and_then(|d| d.remove("status"));
        let resource_version = obj.metadata.resource_version.take();
        let mut hash = Sha256::new();
        // Sha256 is an io::Write: the bytes stream into it without building the text.
        serde_json::to_writer(&mut hash, &obj).expect("objects serialize");
        let digest: [u8; 32] = hash.finalize().into();
        let fingerprint = Fingerprint(digest[..16].try_into().expect("16 of 32 bytes"));
        if let (Some(status), Some(data)) = (status, obj.data.as_object_mut()) {
            data.insert("status".into(), status);
        }
        obj.metadata.resource_version = resource_version;
        let json: Arc<str> = serde_json::to_string(&obj).expect("objects serialize").into();

        let m = &obj.metadata;
        let mut at = Placer { text: &json, extra: String::new() };
        let namespace = at.place(m.namespace.as_deref().unwrap_or_default());
        let name = at.place(m.name.as_deref().unwrap_or_default());
        let mut maybe = |value: Option<&str>| value.map_or(Span::ABSENT, |v| at.place(v));
        let uid = maybe(m.uid.as_deref());
        let resource_version = maybe(m.resource_version.as_deref());
        // Serialized as the whole text was, so found in it as they are.
        let labels = maybe(m.labels.as_ref().filter(|l| !l.is_empty()).map(json_text).as_deref());
        let finalizers = maybe(m.finalizers.as_ref().filter(|f| !f.is_empty()).map(json_text).as_deref());
        let controller = m
            .owner_references
            .iter()
            .flatten()
            .find(|r| r.controller == Some(true))
            .map(|r| Box::new([at.place(&r.api_version), at.place(&r.kind), at.place(&r.name), at.place(&r.uid)]));
        let extra = at.extra.into_boxed_str();
        Self {
            namespace,
            name,
            uid,
            resource_version,
            labels,
            finalizers,
            controller,
            generation: m.generation.unwrap_or(NO_GENERATION),
            deleting: m.deletion_timestamp.is_some(),
            fingerprint,
            extra,
            json,
        }
    }

    fn span(&self, s: Span) -> &str {
        let (start, end) = (s.start as usize, s.start as usize + s.len as usize);
        match start.checked_sub(self.json.len()) {
            Some(side) => &self.extra[side..side + s.len as usize],
            None => &self.json[start..end],
        }
    }

    /// `metadata.namespace` (empty for cluster-scoped objects).
    pub fn namespace(&self) -> &str {
        self.span(self.namespace)
    }

    pub fn name(&self) -> &str {
        self.span(self.name)
    }

    /// `namespace/name`, as an owned key.
    pub fn key(&self) -> ObjectKey {
        ObjectKey::new(self.namespace(), self.name())
    }

    /// Whether this object has this namespace and name.
    pub fn is(&self, key: &ObjectKey) -> bool {
        self.name() == key.name && self.namespace() == key.namespace
    }

    fn present(&self, s: Span) -> Option<&str> {
        (s != Span::ABSENT).then(|| self.span(s))
    }

    pub fn uid(&self) -> Option<&str> {
        self.present(self.uid)
    }

    pub fn resource_version(&self) -> Option<&str> {
        self.present(self.resource_version)
    }

    /// `metadata.generation` (objects without a spec have none).
    pub fn generation(&self) -> Option<i64> {
        (self.generation != NO_GENERATION).then_some(self.generation)
    }

    /// `metadata.labels`, for related kinds picked by a label selector.
    pub fn labels(&self) -> Labels {
        Labels(self.present(self.labels).map(|text| serde_json::from_str(text).expect("labels the cache serialized")).unwrap_or_default())
    }

    /// `metadata.finalizers`, in order.
    pub fn finalizers(&self) -> Vec<String> {
        self.present(self.finalizers).map(|text| serde_json::from_str(text).expect("finalizers the cache serialized")).unwrap_or_default()
    }

    /// The controller ownerReference, if any.
    pub fn controller(&self) -> Option<ControllerRef<'_>> {
        self.controller.as_deref().map(|[api_version, kind, name, uid]| ControllerRef {
            api_version: self.span(*api_version),
            kind: self.span(*kind),
            name: self.span(*name),
            uid: self.span(*uid),
        })
    }

    /// The heap this entry holds, as the cache counts it: the JSON text, the
    /// side string, the entry itself and its controller reference. An
    /// estimate from the sizes it knows (allocator rounding and the
    /// indexes' slots are not counted).
    pub fn retained_bytes(&self) -> usize {
        let controller = if self.controller.is_some() { std::mem::size_of::<[Span; 4]>() } else { 0 };
        self.json.len() + self.extra.len() + std::mem::size_of::<Self>() + controller
    }

    /// The object as JSON text, as plugins receive it.
    pub fn json(&self) -> &str {
        &self.json
    }

    /// The same text, shared (a plugin call takes it without a copy).
    pub fn shared_json(&self) -> Arc<str> {
        self.json.clone()
    }

    /// The object parsed again (for the few readers that need all of it).
    pub fn object(&self) -> DynamicObject {
        serde_json::from_str(&self.json).expect("the cache holds objects it serialized itself")
    }

    /// Only `status` parsed out of the text (`{}` when absent or not an
    /// object): the driver's status write needs it, and nothing else.
    pub fn status(&self) -> serde_json::Value {
        #[derive(serde::Deserialize)]
        struct StatusOnly {
            #[serde(default)]
            status: serde_json::Value,
        }
        let parsed: StatusOnly = serde_json::from_str(&self.json).expect("the cache holds objects it serialized itself");
        if parsed.status.is_object() { parsed.status } else { serde_json::json!({}) }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn obj(v: serde_json::Value) -> CachedObject {
        CachedObject::new(serde_json::from_value(v).unwrap())
    }

    #[test]
    fn fields_read_back_as_the_object_has_them() {
        let o = obj(json!({"apiVersion": "v1", "kind": "Pod", "metadata": {
            "name": "web-1", "namespace": "shop", "uid": "u-1", "resourceVersion": "42", "generation": 3,
            "labels": {"tier": "web", "app": "shop", "zone": ""}, "finalizers": ["a/b", "c"],
            "ownerReferences": [{"apiVersion": "x/v1", "kind": "Other", "name": "o", "uid": "u-o"},
                {"apiVersion": "apps.example.com/v1", "kind": "MyDeployment", "name": "web", "uid": "u-p", "controller": true}]}}));
        assert_eq!((o.namespace(), o.name(), o.uid(), o.resource_version()), ("shop", "web-1", Some("u-1"), Some("42")));
        assert!(o.is(&ObjectKey::new("shop", "web-1")) && !o.is(&ObjectKey::new("shop", "web")));
        assert_eq!(o.generation(), Some(3));
        assert_eq!(o.finalizers(), ["a/b", "c"]);
        let labels = o.labels();
        assert_eq!((labels.get("app"), labels.get("tier"), labels.get("zone")), (Some("shop"), Some("web"), Some("")));
        assert!(!labels.contains_key("ap") && !labels.contains_key("zzz"));
        let c = o.controller().unwrap();
        assert_eq!((c.api_version, c.kind, c.name, c.uid), ("apps.example.com/v1", "MyDeployment", "web", "u-p"));
        assert!(o.extra.is_empty(), "every string was found in the text");
    }

    #[test]
    fn strings_the_text_holds_escaped_are_kept_aside() {
        let o = obj(json!({"metadata": {"name": "n", "labels": {"say": "a \"quoted\"\\ word\n", "k": "v"},
            "ownerReferences": [{"apiVersion": "v1", "kind": "K\t", "name": "é\"", "uid": "u", "controller": true}]}}));
        assert_eq!(o.labels().get("say"), Some("a \"quoted\"\\ word\n"));
        assert_eq!(o.labels().get("k"), Some("v"));
        assert_eq!((o.controller().unwrap().kind, o.controller().unwrap().name), ("K\t", "é\""));
        assert_eq!((o.namespace(), o.name(), o.uid(), o.resource_version()), ("", "n", None, None));
        assert_eq!(o.labels().get("none"), None);
        assert_eq!((o.generation(), o.finalizers()), (None, vec![]));
    }

    #[test]
    fn an_entry_fits_in_144_bytes_of_heap() {
        // 120 bytes, plus the Arc's two counts, plus malloc's header, in 16-byte steps.
        assert!(std::mem::size_of::<CachedObject>() <= 120, "{}", std::mem::size_of::<CachedObject>());
    }

    #[test]
    fn the_text_is_the_object_without_managed_fields_untouched() {
        let v = json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "a", "resourceVersion": "7"}, "spec": {"x": 1}, "status": {"y": 2}});
        let o = obj(v.clone());
        assert_eq!(serde_json::from_str::<serde_json::Value>(o.json()).unwrap(), v);
        assert_eq!(o.status(), json!({"y": 2}));
    }
}
