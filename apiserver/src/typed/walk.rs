//! The two walks of an object along its schema that managed fields are made of, as
//! structured-merge-diff's `typed` package does them: the field set an applied configuration
//! states (`ToFieldSet`), and the comparison of an object before and after a write (`Compare`:
//! the paths added, modified and removed, maps, structs and list items included).

use super::path::{FieldPath, FieldSet, PathElem, key_elem};
use super::shape::{Kind, ListType, Node};
use serde_json::{Map, Value};

/// A value that does not fit its schema, worded as upstream's typed errors
/// (`.spec.ports: element 0: associative list with keys has an element that omits key field "port"`).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{}", .0.join("\n"))]
pub struct TypeErrors(pub Vec<String>);

type Result<T, E = TypeErrors> = std::result::Result<T, E>;

fn path_prefix(path: &[PathElem]) -> String {
    let p = super::path::path_string(path);
    if p.is_empty() { String::new() } else { format!("{p}: ") }
}

/// The step of one list item: its key fields (a map list), its value (a set), or an error.
fn item_elem(list: &Node<'_>, list_type: &ListType, item: &Value, index: usize, path: &[PathElem]) -> Result<PathElem, String> {
    match list_type {
        ListType::Map(keys) => {
            let Some(obj) = item.as_object() else {
                return Err(format!("{}element {index}: associative list with keys may not have non-map elements", path_prefix(path)));
            };
            let items = list.items();
            let mut defaults = Vec::new();
            let mut found: Vec<(&str, Value)> = Vec::new();
            for k in keys {
                match obj.get(k) {
                    Some(v) => found.push((k, v.clone())),
                    None => match items.key_default(k) {
                        Some(d) => defaults.push((k.as_str(), d)),
                        None => {
                            return Err(format!(
                                "{}element {index}: associative list with keys has an element that omits key field {k:?} (and doesn't have default value)",
                                path_prefix(path)
                            ));
                        }
                    },
                }
            }
            found.extend(defaults);
            let pairs: Vec<(&str, &Value)> = found.iter().map(|(k, v)| (*k, v)).collect();
            Ok(key_elem(&pairs))
        }
        ListType::Set => {
            if item.is_object() || item.is_array() {
                return Err(format!("{}element {index}: associative list without keys has an element that's a map type", path_prefix(path)));
            }
            Ok(PathElem::Value(item.to_string().into()))
        }
        ListType::Atomic => unreachable!("atomic lists are leaves"),
    }
}

/// The step of a list item, if it has one.
pub(super) fn item_step(list: &Node<'_>, list_type: &ListType, item: &Value) -> Option<PathElem> {
    item_elem(list, list_type, item, 0, &[]).ok()
}

/// The list type of a node holding `v`: a deduced node's lists are atomic.
fn list_type_of(node: &Node<'_>) -> ListType {
    if node.kind() == Kind::List { node.list_type() } else { ListType::Atomic }
}

/// The paths an applied configuration states, as upstream's `ToFieldSet`: every scalar, every
/// list item, every map key (a struct's named fields only when they hold `null` or `{}`), and
/// atomic lists and maps whole.
pub fn field_set(v: &Value, node: Node<'_>) -> Result<FieldSet> {
    let mut out = FieldSet::new();
    let mut errors = Vec::new();
    to_set(v, node, &mut Vec::new(), &mut out, &mut errors);
    if errors.is_empty() { Ok(out) } else { Err(TypeErrors(errors)) }
}

fn to_set(v: &Value, node: Node<'_>, path: &mut FieldPath, out: &mut FieldSet, errors: &mut Vec<String>) {
    match v {
        Value::Object(m) => {
            if node.kind() == Kind::Object && node.atomic_map() {
                out.insert(path.clone());
                return;
            }
            for (k, c) in m {
                let (child, named) = node.field(k);
                path.push(PathElem::Field(k.as_str().into()));
                to_set(c, child, path, out, errors);
                let empty = c.is_null() || c.as_object().is_some_and(Map::is_empty);
                if empty || !named {
                    out.insert(path.clone());
                }
                path.pop();
            }
        }
        Value::Array(items) => {
            let list_type = list_type_of(&node);
            if list_type == ListType::Atomic {
                out.insert(path.clone());
                return;
            }
            let item_node = node.items();
            let mut seen = std::collections::BTreeMap::new();
            let mut elems = Vec::new();
            for (i, item) in items.iter().enumerate() {
                match item_elem(&node, &list_type, item, i, path) {
                    Ok(e) => {
                        *seen.entry(e.clone()).or_insert(0) += 1;
                        elems.push(Some(e));
                    }
                    Err(e) => {
                        errors.push(e);
                        elems.push(None);
                    }
                }
            }
            for (item, elem) in items.iter().zip(elems) {
                let Some(elem) = elem else { continue };
                path.push(elem.clone());
                // A duplicated item is owned whole, as upstream does for duplicates it allows.
                if seen[&elem] == 1 {
                    to_set(item, item_node, path, out, errors);
                }
                out.insert(path.clone());
                path.pop();
            }
        }
        _ => {
            out.insert(path.clone());
        }
    }
}

/// What a write changed, path by path.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Comparison {
    /// Present after, absent before (maps, structs and list items as well as leaves).
    pub added: FieldSet,
    /// Leaves (and atomic values) whose value changed.
    pub modified: FieldSet,
    /// Present before, absent after.
    pub removed: FieldSet,
}

impl Comparison {
    /// Keep only the paths `keep` accepts (upstream's ignore filter: the fields a subresource's
    /// strategy resets).
    pub fn retain(&mut self, keep: impl Fn(&FieldPath) -> bool) {
        self.added.retain(&keep);
        self.modified.retain(&keep);
        self.removed.retain(&keep);
    }
}

/// Compare `before` with `after`, as upstream's `Compare`. `before` of a create is a new, empty
/// object of the type, as upstream's (see [`Node::in_zero_value`]): pass `None`.
pub fn compare(before: Option<&Value>, after: &Value, node: Node<'_>) -> Result<Comparison> {
    let mut cmp = Comparison::default();
    let mut errors = Vec::new();
    let zero;
    let before = match before {
        Some(b) => b,
        None => {
            zero = zero_value(after, node);
            &zero
        }
    };
    compare_at(Some(before), Some(after), node, &mut Vec::new(), &mut cmp, &mut errors);
    if errors.is_empty() { Ok(cmp) } else { Err(TypeErrors(errors)) }
}

/// The Go zero value of `node`'s type along the fields `shape` has: required fields and
/// struct-typed optional fields present (structs as objects, the rest as null).
fn zero_value(shape: &Value, node: Node<'_>) -> Value {
    let mut out = Map::new();
    if let Some(m) = shape.as_object() {
        for (k, c) in m {
            if !node.in_zero_value(k) {
                continue;
            }
            let (child, _) = node.field(k);
            let zero = match (child.kind(), c) {
                (Kind::Object, Value::Object(_)) if !child.atomic_map() && is_struct(&child) => zero_value(c, child),
                _ => Value::Null,
            };
            out.insert(k.clone(), zero);
        }
    }
    Value::Object(out)
}

/// Whether an object node is a struct (named fields), whose zero value is `{}` rather than null.
fn is_struct(node: &Node<'_>) -> bool {
    node.has_named_fields()
}

fn do_leaf(before: Option<&Value>, after: Option<&Value>, path: &FieldPath, cmp: &mut Comparison) {
    match (before, after) {
        (None, Some(_)) => {
            cmp.added.insert(path.clone());
        }
        (Some(_), None) => {
            cmp.removed.insert(path.clone());
        }
        (Some(b), Some(a)) if b != a => {
            cmp.modified.insert(path.clone());
        }
        _ => {}
    }
}

fn compare_at(before: Option<&Value>, after: Option<&Value>, node: Node<'_>, path: &mut FieldPath, cmp: &mut Comparison, errors: &mut Vec<String>) {
    let sample = after.filter(|v| !v.is_null()).or(before).unwrap_or(&Value::Null);
    let is_leaf = match sample {
        Value::Object(_) => {
            let (b, a) = (before.and_then(Value::as_object), after.and_then(Value::as_object));
            let empty = b.is_none_or(Map::is_empty) && a.is_none_or(Map::is_empty);
            if (node.kind() == Kind::Object && node.atomic_map()) || empty || mismatched(before, after) {
                true
            } else {
                let mut keys: Vec<&String> = b.into_iter().flat_map(|m| m.keys()).collect();
                keys.extend(a.into_iter().flat_map(|m| m.keys()).filter(|k| !b.is_some_and(|b| b.contains_key(*k))));
                for k in keys {
                    let (child, _) = node.field(k);
                    path.push(PathElem::Field(k.as_str().into()));
                    compare_at(b.and_then(|m| m.get(k)), a.and_then(|m| m.get(k)), child, path, cmp, errors);
                    path.pop();
                }
                false
            }
        }
        Value::Array(_) => {
            let (b, a) = (before.and_then(Value::as_array), after.and_then(Value::as_array));
            let empty = b.is_none_or(Vec::is_empty) && a.is_none_or(Vec::is_empty);
            let list_type = list_type_of(&node);
            if list_type == ListType::Atomic || empty || mismatched(before, after) {
                true
            } else {
                compare_items(b, a, &node, &list_type, path, cmp, errors);
                false
            }
        }
        _ => true,
    };
    if is_leaf {
        do_leaf(before, after, path, cmp);
    } else if before.is_none() {
        cmp.added.insert(path.clone());
    } else if after.is_none() {
        cmp.removed.insert(path.clone());
    }
}

/// Whether a value changed kind (an object became a list or a scalar): compared as one leaf.
fn mismatched(before: Option<&Value>, after: Option<&Value>) -> bool {
    let kind = |v: &Value| match v {
        Value::Object(_) => 1,
        Value::Array(_) => 2,
        Value::Null => 0,
        _ => 3,
    };
    match (before.map(kind), after.map(kind)) {
        (Some(b), Some(a)) => b != a && b != 0 && a != 0,
        _ => false,
    }
}

/// Index a list's items by their step; items that repeat a step are kept together.
fn index_items<'v>(
    items: Option<&'v Vec<Value>>,
    node: &Node<'_>,
    list_type: &ListType,
    path: &[PathElem],
    order: &mut Vec<PathElem>,
    errors: &mut Vec<String>,
) -> std::collections::HashMap<PathElem, Vec<&'v Value>> {
    let mut out: std::collections::HashMap<PathElem, Vec<&'v Value>> = std::collections::HashMap::new();
    for (i, item) in items.into_iter().flatten().enumerate() {
        match item_elem(node, list_type, item, i, path) {
            Ok(e) => {
                let entry = out.entry(e.clone()).or_default();
                if entry.is_empty() && !order.contains(&e) {
                    order.push(e);
                }
                entry.push(item);
            }
            Err(e) => errors.push(e),
        }
    }
    out
}

fn compare_items(
    before: Option<&Vec<Value>>,
    after: Option<&Vec<Value>>,
    node: &Node<'_>,
    list_type: &ListType,
    path: &mut FieldPath,
    cmp: &mut Comparison,
    errors: &mut Vec<String>,
) {
    let mut order = Vec::new();
    let b = index_items(before, node, list_type, path, &mut order, errors);
    let a = index_items(after, node, list_type, path, &mut order, errors);
    let item_node = node.items();
    for elem in order {
        let (bl, al) = (b.get(&elem).map(Vec::as_slice).unwrap_or_default(), a.get(&elem).map(Vec::as_slice).unwrap_or_default());
        path.push(elem);
        match (bl.len(), al.len()) {
            (0..=1, 0..=1) => compare_at(bl.first().copied(), al.first().copied(), item_node, path, cmp, errors),
            (2.., 2..) => {
                if bl != al {
                    cmp.modified.insert(path.clone());
                }
            }
            (2.., _) => {
                if let Some(a) = al.first() {
                    compare_at(None, Some(a), item_node, path, cmp, errors);
                }
                cmp.removed.insert(path.clone());
            }
            (_, _) => {
                if let Some(b) = bl.first() {
                    compare_at(Some(b), None, item_node, path, cmp, errors);
                }
                cmp.added.insert(path.clone());
            }
        }
        path.pop();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::typed::path::path_string;
    use serde_json::json;

    fn paths(set: &FieldSet) -> Vec<String> {
        set.iter().map(|p| path_string(p)).collect()
    }

    fn node(group: &str, kind: &str) -> Node<'static> {
        Node::builtin(group, "v1", kind).expect("built-in schema")
    }

    #[test]
    fn a_created_config_map_adds_its_data_map_and_each_key() {
        let cm = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "x"}, "data": {"a": "1"}});
        let cmp = compare(None, &cm, node("", "ConfigMap")).unwrap();
        let added = paths(&cmp.added);
        assert!(added.contains(&".data".to_string()) && added.contains(&".data.a".to_string()), "{added:?}");
    }

    #[test]
    fn a_created_deployment_finds_its_value_structs_present_and_its_maps_added() {
        let d = json!({"metadata": {"name": "d", "labels": {"app": "web"}}, "spec": {"replicas": 1, "selector": {"matchLabels": {"app": "web"}},
            "template": {"metadata": {"labels": {"app": "web"}}, "spec": {"containers": [{"name": "c", "image": "i"}]}}}});
        let cmp = compare(None, &d, Node::builtin("apps", "v1", "Deployment").unwrap()).unwrap();
        let all: Vec<String> = paths(&cmp.added).into_iter().chain(paths(&cmp.modified)).collect();
        for present in [".spec", ".spec.template", ".spec.template.spec", ".spec.template.metadata", ".spec.template.spec.containers"] {
            assert!(!all.contains(&present.to_string()), "{present} is in a new Deployment already: {all:?}");
        }
        for added in [".metadata.labels", ".spec.template.metadata.labels", ".spec.template.spec.containers[name=\"c\"]", ".spec.selector"] {
            assert!(all.contains(&added.to_string()), "{added} missing: {all:?}");
        }
        assert!(!all.iter().any(|p| p.starts_with(".spec.selector.")), "a label selector is atomic: {all:?}");
    }

    #[test]
    fn service_ports_are_keyed_by_port_and_protocol_with_the_protocol_defaulted() {
        let svc = json!({"spec": {"ports": [{"port": 80, "targetPort": 8080}], "selector": {"app": "web"}}});
        let set = field_set(&svc, node("", "Service")).unwrap();
        let p = paths(&set);
        assert!(p.contains(&".spec.ports[port=80,protocol=\"TCP\"]".to_string()), "{p:?}");
        assert!(p.contains(&".spec.ports[port=80,protocol=\"TCP\"].targetPort".to_string()), "{p:?}");
        assert!(p.contains(&".spec.selector".to_string()) && !p.iter().any(|x| x.starts_with(".spec.selector.")), "the selector is atomic: {p:?}");
        assert!(!p.contains(&".spec".to_string()), "a struct's named field is not stated by itself: {p:?}");
    }

    #[test]
    fn an_applied_list_item_without_its_key_is_refused_as_upstream_words_it() {
        let pod = json!({"spec": {"containers": [{"image": "i"}]}});
        let e = field_set(&pod, node("", "Pod")).unwrap_err();
        assert_eq!(
            e.to_string(),
            ".spec.containers: element 0: associative list with keys has an element that omits key field \"name\" (and doesn't have default value)"
        );
    }

    #[test]
    fn a_set_list_owns_each_value() {
        let cm = json!({"metadata": {"finalizers": ["a", "b"]}});
        let p = paths(&field_set(&cm, node("", "ConfigMap")).unwrap());
        assert_eq!(p, [".metadata.finalizers[=\"a\"]", ".metadata.finalizers[=\"b\"]"]);
    }

    #[test]
    fn a_changed_leaf_is_modified_and_a_dropped_key_removed() {
        let before = json!({"data": {"a": "1", "b": "2"}});
        let after = json!({"data": {"a": "3"}});
        let cmp = compare(Some(&before), &after, node("", "ConfigMap")).unwrap();
        assert_eq!(paths(&cmp.modified), [".data.a"]);
        assert_eq!(paths(&cmp.removed), [".data.b"]);
        assert!(cmp.added.is_empty());
    }

    #[test]
    fn a_custom_resource_compares_against_an_empty_object() {
        let schema = json!({"type": "object", "properties": {"spec": {"type": "object", "properties": {"size": {"type": "integer"}}}}});
        let cr = json!({"spec": {"size": 1}});
        let cmp = compare(None, &cr, Node::custom(&schema)).unwrap();
        assert_eq!(paths(&cmp.added), [".spec", ".spec.size"]);
    }
}
