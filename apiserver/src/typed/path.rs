//! Field paths and sets, as structured-merge-diff's `fieldpath` names them: a path is a list of
//! steps (a field, a list item by its key fields, a set item by its value), and `fieldsV1`
//! renders a set of paths as a tree.

use serde_json::Value;
use std::collections::BTreeSet;
use std::sync::Arc;

/// One step of a field path. Shared text: every path of a walk is a copy of its current path,
/// and copies only count references.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum PathElem {
    /// A map field: `f:name`.
    Field(Arc<str>),
    /// A list item by its key fields: `k:{"name":"x"}` (JSON of the keys, sorted by name).
    Key(Arc<str>),
    /// A set item: `v:"x"`.
    Value(Arc<str>),
}

/// A field path.
pub type FieldPath = Vec<PathElem>;
/// A set of field paths.
pub type FieldSet = BTreeSet<FieldPath>;

/// The key step of a list item: its key fields as a JSON object with the fields sorted by name,
/// as upstream serializes a `k:` element.
pub fn key_elem(keys: &[(&str, &Value)]) -> PathElem {
    let mut sorted: Vec<_> = keys.to_vec();
    sorted.sort_by(|a, b| a.0.cmp(b.0));
    let fields: Vec<String> = sorted.iter().map(|(k, v)| format!("{}:{}", Value::from(*k), v)).collect();
    PathElem::Key(format!("{{{}}}", fields.join(",")).into())
}

/// A path as upstream's `fieldpath.Path.String` writes it in a conflict: `.spec.replicas`,
/// `.spec.ports[port=80,protocol="TCP"]`, `.metadata.finalizers[="x"]`.
pub fn path_string(p: &[PathElem]) -> String {
    let mut s = String::new();
    for e in p {
        match e {
            PathElem::Field(f) => {
                s.push('.');
                s.push_str(f);
            }
            PathElem::Key(k) => {
                let m: serde_json::Map<String, Value> = serde_json::from_str(k).unwrap_or_default();
                let parts: Vec<String> = m.iter().map(|(k, v)| format!("{k}={v}")).collect();
                s.push_str(&format!("[{}]", parts.join(",")));
            }
            PathElem::Value(v) => s.push_str(&format!("[={v}]")),
        }
    }
    s
}
