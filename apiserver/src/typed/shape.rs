//! The shape of one point of an object's schema as structured-merge-diff sees it: a scalar, a
//! struct or map (granular or atomic), or a list (atomic, set, or map keyed by some of its items'
//! fields). Read from an OpenAPI v3 schema node: a built-in kind's (`schemas/builtin.json`, whose
//! missing extensions [`super::topology`] supplies) or a CRD's structural schema.

use super::topology;
use crate::builtin_schema;
use serde_json::Value;

/// A point of a schema: the node (None = no schema, the value's shape is deduced) and, for a
/// built-in type, the component it belongs to and the field it is, to look up what the node
/// itself does not say.
#[derive(Debug, Clone, Copy)]
pub struct Node<'s> {
    schema: Option<&'s Value>,
    /// The node as written, when it only refers to `schema` (`allOf: [{$ref}]` with extensions
    /// of its own beside the reference).
    outer: Option<&'s Value>,
    /// The component the node resolves to (`core.v1.Container`), if it names one.
    component: Option<&'static str>,
    /// The component holding the field this node is, and the field's name.
    field_of: Option<(&'static str, &'s str)>,
    /// Whether this is an object's root, whose `metadata` is ObjectMeta whatever its schema says.
    root: bool,
}

/// How a list's items are told apart.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ListType {
    /// One value: replaced whole, owned whole.
    Atomic,
    /// Scalar items, each its own element (`v:"x"`).
    Set,
    /// Object items keyed by these fields (`k:{"name":"x"}`).
    Map(Vec<String>),
}

/// What a node holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    Scalar,
    /// An object: named fields (a struct), or any keys (a map), or both.
    Object,
    List,
    /// No schema: the value decides (objects are granular maps, lists atomic).
    Deduced,
}

/// Strip a component name's group prefix, as the topology tables name components.
fn short(name: &'static str) -> &'static str {
    name.strip_prefix("io.k8s.api.")
        .or_else(|| name.strip_prefix("io.k8s.apimachinery.pkg.apis."))
        .or_else(|| name.strip_prefix("io.k8s.apiextensions-apiserver.pkg.apis."))
        .or_else(|| name.strip_prefix("io.k8s.kube-aggregator.pkg.apis."))
        .unwrap_or(name)
}

/// Follow a built-in schema's `$ref`: (component reached, resolved node). A CRD's structural
/// schema has no references and stays as it is.
fn resolve(node: &Value) -> (Option<&'static str>, &Value) {
    let has_ref = node.get("$ref").is_some() || node.get("allOf").is_some_and(|a| a.as_array().is_some_and(|a| a.len() == 1));
    if !has_ref {
        return (None, node);
    }
    match builtin_schema::component_by_ref(node) {
        Some((name, s)) => (Some(short(name)), s),
        None => (None, node),
    }
}

impl<'s> Node<'s> {
    /// A node without schema: shapes are deduced from values.
    pub const DEDUCED: Node<'static> = Node { schema: None, outer: None, component: None, field_of: None, root: false };

    /// The root of a built-in kind (`None` if the kind has no schema).
    pub fn builtin(group: &str, version: &str, kind: &str) -> Option<Node<'static>> {
        let name = builtin_schema::component_name(group, version, kind)?;
        let (component, schema) = builtin_schema::component_named(&name)?;
        Some(Node { schema: Some(schema), outer: None, component: Some(short(component)), field_of: None, root: true })
    }

    /// The root of a custom resource: its CRD's structural schema.
    pub fn custom(schema: &'s Value) -> Node<'s> {
        Node { schema: Some(schema), outer: None, component: None, field_of: None, root: true }
    }

    fn object_meta() -> Node<'static> {
        builtin_schema::component_named("io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta")
            .map(|(name, schema)| Node { schema: Some(schema), outer: None, component: Some(short(name)), field_of: None, root: false })
            .unwrap_or(Node::DEDUCED)
    }

    fn at(schema: &'s Value, field_of: Option<(&'static str, &'s str)>) -> Node<'s> {
        let (component, resolved) = resolve(schema);
        let outer = (!std::ptr::eq(resolved, schema)).then_some(schema);
        Node { schema: Some(resolved), outer, component, field_of, root: false }
    }

    fn ext(&self, name: &str) -> Option<&'s Value> {
        self.outer.and_then(|o| o.get(name)).or_else(|| self.schema?.get(name))
    }

    /// What the node holds.
    pub fn kind(&self) -> Kind {
        let Some(s) = self.schema else { return Kind::Deduced };
        if s.get("x-kubernetes-int-or-string").and_then(Value::as_bool) == Some(true) {
            return Kind::Scalar;
        }
        let has_fields = s.get("properties").is_some() || s.get("additionalProperties").is_some_and(Value::is_object);
        match s.get("type").and_then(Value::as_str) {
            Some("array") => Kind::List,
            Some("object") if has_fields => Kind::Object,
            Some("string" | "integer" | "number" | "boolean") => Kind::Scalar,
            None if has_fields => Kind::Object,
            // Free-form (`type: object` alone, RawExtension, preserve-unknown-fields) or untyped.
            _ => Kind::Deduced,
        }
    }

    /// The node of field `key` of an object, and whether it is a named field (a struct's)
    /// rather than a map key.
    pub fn field(&self, key: &'s str) -> (Node<'s>, bool) {
        let Some(s) = self.schema else { return (Node::DEDUCED, false) };
        // A custom resource's `metadata` is ObjectMeta, whatever its schema says.
        if key == "metadata" && self.root && self.component.is_none() {
            return (Node::object_meta(), true);
        }
        if let Some(p) = s.get("properties").and_then(|p| p.get(key)) {
            return (Node::at(p, self.component.map(|c| (c, key))), true);
        }
        match s.get("additionalProperties").filter(|a| a.is_object()) {
            Some(a) => (Node::at(a, None), false),
            None => (Node::DEDUCED, false),
        }
    }

    /// Whether an object node names its fields (a struct), rather than only holding any keys.
    pub fn has_named_fields(&self) -> bool {
        self.schema.is_some_and(|s| s.get("properties").is_some())
    }

    /// The node of a list's items.
    pub fn items(&self) -> Node<'s> {
        match self.schema.and_then(|s| s.get("items")) {
            Some(i) => Node::at(i, None),
            None => Node::DEDUCED,
        }
    }

    /// How a list's items are told apart: `x-kubernetes-list-type` (and its map keys), else
    /// upstream's documents for a built-in list, else atomic.
    pub fn list_type(&self) -> ListType {
        match self.ext("x-kubernetes-list-type").and_then(Value::as_str) {
            Some("map") => {
                let keys = self
                    .ext("x-kubernetes-list-map-keys")
                    .and_then(Value::as_array)
                    .map(|k| k.iter().filter_map(Value::as_str).map(String::from).collect());
                return keys.map(ListType::Map).unwrap_or(ListType::Atomic);
            }
            Some("set") => return ListType::Set,
            Some(_) => return ListType::Atomic,
            None => {}
        }
        let Some((component, field)) = self.field_of else { return ListType::Atomic };
        if let Some((_, _, keys)) = topology::LIST_MAPS.iter().find(|(c, f, _)| *c == component && *f == field) {
            return ListType::Map(keys.iter().map(|k| k.to_string()).collect());
        }
        if topology::LIST_SETS.contains(&(component, field)) {
            return ListType::Set;
        }
        ListType::Atomic
    }

    /// Whether an object is one value (`x-kubernetes-map-type: atomic`, as label selectors).
    pub fn atomic_map(&self) -> bool {
        if let Some(t) = self.ext("x-kubernetes-map-type").and_then(Value::as_str) {
            return t == "atomic";
        }
        self.component.is_some_and(|c| topology::ATOMIC_MAPS.contains(&(c, "")))
            || self.field_of.is_some_and(|(c, f)| topology::ATOMIC_MAPS.iter().any(|&(ac, af)| ac == c && af == f))
    }

    /// The default of an item field used as a list key (a port's `protocol`), if any.
    ///
    /// Upstream's published OpenAPI v3 also states the Go zero value as `default` for required
    /// scalars (a ServicePort's `port: 0`), yet its field manager refuses an applied port that
    /// omits `port` ("doesn't have default value"): a zero-valued default is no key default.
    pub fn key_default(&self, key: &str) -> Option<Value> {
        if let Some(d) = self.schema.and_then(|s| s.pointer(&format!("/properties/{key}/default"))) {
            let zero = matches!(d, Value::Null | Value::Bool(false)) || d.as_f64() == Some(0.0) || d.as_str() == Some("");
            return if zero { None } else { Some(d.clone()) };
        }
        let component = self.component?;
        topology::KEY_DEFAULTS.iter().find(|(c, f, _)| *c == component && *f == key).map(|(_, _, d)| Value::from(*d))
    }

    /// Whether field `key` of this object exists in a new, empty object of its type: upstream
    /// compares a created object with the Go zero value of its type, which has every required
    /// field (as null or empty) and every optional struct-typed field (as `{}`). A custom
    /// resource's zero value is an empty object.
    pub fn in_zero_value(&self, key: &str) -> bool {
        let Some(component) = self.component else { return false };
        let required = self.schema.and_then(|s| s.get("required")).and_then(Value::as_array).is_some_and(|r| r.iter().any(|f| f == key));
        // Every Go type embeds ObjectMeta as a value.
        required || key == "metadata" || topology::VALUE_STRUCTS.contains(&(component, key))
    }
}
