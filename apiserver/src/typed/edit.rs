//! Removing one path from an object, the list items found by their step as the walks make it
//! (so a port keyed by a defaulted `protocol` it does not spell out is still found).

use super::path::PathElem;
use super::shape::{Kind, ListType, Node};
use super::walk::item_step;
use serde_json::Value;

/// Remove what `path` names from `obj`; a path that names nothing leaves `obj` as it is.
pub fn remove(obj: &mut Value, node: Node<'_>, path: &[PathElem]) {
    let Some((first, rest)) = path.split_first() else { return };
    match first {
        PathElem::Field(f) => {
            let Some(m) = obj.as_object_mut() else { return };
            if rest.is_empty() {
                m.remove(&**f);
            } else if let Some(child) = m.get_mut(&**f) {
                remove(child, node.field(f).0, rest);
            }
        }
        PathElem::Key(_) | PathElem::Value(_) => {
            let list_type = if node.kind() == Kind::List { node.list_type() } else { ListType::Atomic };
            if list_type == ListType::Atomic {
                return;
            }
            let Some(items) = obj.as_array_mut() else { return };
            let matches = |item: &Value| item_step(&node, &list_type, item).as_ref() == Some(first);
            if rest.is_empty() {
                items.retain(|i| !matches(i));
            } else if let Some(item) = items.iter_mut().find(|i| matches(i)) {
                remove(item, node.items(), rest);
            }
        }
    }
}
