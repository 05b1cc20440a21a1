//! Related kinds (contract 0.2): which objects of a kind the plugin reads
//! attach to a parent, and the reverse index that maps a change of such an
//! object to exactly the parents that refer to it.
//!
//! The index is kept per controller and follows the parents: every change of
//! a parent recomputes what it refers to (its selector, the names it holds,
//! its namespace for a fixed selector), so a reference that moves moves the
//! mapping with it. As controller-runtime's `Watches` with
//! `EnqueueRequestsFromMapFunc` over a field index.

use std::collections::{BTreeSet, HashMap};
use std::sync::Mutex;

use operator_plugin_sdk::{Attachment, RelatedKind};
use serde_json::Value;

pub use operator_selector::LabelSelector;

use super::cache::{CachedObject, ObjectKey};

/// The values at a dotted field path; a list met on the way is followed
/// item by item, and a missing field or `null` yields nothing.
pub fn read_path<'a>(value: &'a Value, path: &str) -> Vec<&'a Value> {
    let mut current = vec![value];
    for step in path.split('.') {
        current = current
            .into_iter()
            .flat_map(|v| match v {
                Value::Array(items) => items.iter().filter_map(|i| i.get(step)).collect::<Vec<_>>(),
                other => other.get(step).into_iter().collect(),
            })
            .filter(|v| !v.is_null())
            .collect();
    }
    current.into_iter().flat_map(|v| if let Value::Array(items) = v { items.iter().collect() } else { vec![v] }).filter(|v| !v.is_null()).collect()
}

/// What one parent refers to among the objects of one related kind.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Reference {
    /// The namespace looked in: the parent's, or `""` for a cluster-scoped kind.
    pub scope: String,
    pub refs: Refs,
}

/// See [`Reference`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Refs {
    /// Objects picked by this selector (from the parent, or fixed).
    Selector(LabelSelector),
    /// Objects of these names.
    Names(BTreeSet<String>),
    /// Nothing (a selector field that is missing or null).
    Nothing,
}

impl Reference {
    /// Whether `obj` (of this kind) is referred to.
    pub fn covers(&self, obj: &CachedObject) -> bool {
        obj.namespace() == self.scope
            && match &self.refs {
                Refs::Selector(s) => s.matches(&obj.labels()),
                Refs::Names(names) => names.contains(obj.name()),
                Refs::Nothing => false,
            }
    }
}

/// What `parent` refers to, one [`Reference`] per related kind. A malformed
/// selector in the parent is an error naming the field.
pub fn references(kinds: &[RelatedKind], parent: &Value, parent_namespace: &str) -> Result<Vec<Reference>, String> {
    kinds
        .iter()
        .map(|k| {
            let scope = if k.cluster_scoped { String::new() } else { parent_namespace.to_string() };
            let refs = match &k.attach {
                Attachment::SelectorFrom(path) => match read_path(parent, path).first() {
                    None => Refs::Nothing,
                    Some(v) => Refs::Selector(LabelSelector::parse(v).map_err(|e| format!("{path}: {e}"))?),
                },
                Attachment::NamesFrom(paths) => Refs::Names(
                    paths.iter().flat_map(|p| read_path(parent, p)).filter_map(Value::as_str).filter(|n| !n.is_empty()).map(str::to_string).collect(),
                ),
                Attachment::FixedSelector(s) => Refs::Selector(LabelSelector::parse(s).map_err(|e| format!("fixed-selector: {e}"))?),
            };
            Ok(Reference { scope, refs })
        })
        .collect()
}

/// The reverse index of one controller: related object → referring parents.
pub struct RelatedIndex {
    kinds: Vec<RelatedKind>,
    inner: Mutex<Inner>,
}

#[derive(Default)]
struct Inner {
    by_parent: HashMap<ObjectKey, Vec<Reference>>,
    /// (kind, scope, name) → parents naming that object.
    by_name: HashMap<(usize, String, String), BTreeSet<ObjectKey>>,
    /// (kind, scope) → parents selecting by labels there.
    by_scope: HashMap<(usize, String), BTreeSet<ObjectKey>>,
}

impl Inner {
    fn unlink(&mut self, key: &ObjectKey) {
        let Some(old) = self.by_parent.remove(key) else { return };
        for (i, r) in old.iter().enumerate() {
            match &r.refs {
                Refs::Names(names) => {
                    for n in names {
                        let slot = (i, r.scope.clone(), n.clone());
                        if let Some(set) = self.by_name.get_mut(&slot) {
                            set.remove(key);
                            if set.is_empty() {
                                self.by_name.remove(&slot);
                            }
                        }
                    }
                }
                Refs::Selector(_) => {
                    let slot = (i, r.scope.clone());
                    if let Some(set) = self.by_scope.get_mut(&slot) {
                        set.remove(key);
                        if set.is_empty() {
                            self.by_scope.remove(&slot);
                        }
                    }
                }
                Refs::Nothing => {}
            }
        }
    }

    fn link(&mut self, key: &ObjectKey, refs: Vec<Reference>) {
        for (i, r) in refs.iter().enumerate() {
            match &r.refs {
                Refs::Names(names) => {
                    for n in names {
                        self.by_name.entry((i, r.scope.clone(), n.clone())).or_default().insert(key.clone());
                    }
                }
                Refs::Selector(_) => {
                    self.by_scope.entry((i, r.scope.clone())).or_default().insert(key.clone());
                }
                Refs::Nothing => {}
            }
        }
        self.by_parent.insert(key.clone(), refs);
    }
}

impl RelatedIndex {
    pub fn new(kinds: Vec<RelatedKind>) -> Self {
        Self { kinds, inner: Mutex::default() }
    }

    pub fn kinds(&self) -> &[RelatedKind] {
        &self.kinds
    }

    /// A parent appeared, changed (`Some`) or went away (`None`): its
    /// references replace the ones it had. A parent whose selector is
    /// malformed refers to nothing until fixed (its reconcile reports why).
    pub fn update_parent(&self, key: &ObjectKey, parent: Option<&CachedObject>) {
        let refs = parent.map(|p| {
            let value: Value = serde_json::from_str(p.json()).unwrap_or_default();
            references(&self.kinds, &value, &key.namespace).unwrap_or_default()
        });
        let mut inner = self.inner.lock().unwrap();
        inner.unlink(key);
        if let Some(refs) = refs {
            inner.link(key, refs);
        }
    }

    /// The parents that refer to `obj`, an object of related kind `kind`.
    pub fn parents_of(&self, kind: usize, obj: &CachedObject) -> BTreeSet<ObjectKey> {
        let inner = self.inner.lock().unwrap();
        let scope = obj.namespace().to_string();
        let mut parents: BTreeSet<ObjectKey> = inner.by_name.get(&(kind, scope.clone(), obj.name().to_string())).cloned().unwrap_or_default();
        if let Some(selecting) = inner.by_scope.get(&(kind, scope)) {
            parents.extend(selecting.iter().filter(|p| inner.by_parent.get(*p).is_some_and(|refs| refs[kind].covers(obj))).cloned());
        }
        parents
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use operator_plugin_sdk::GroupVersionKind;
    use serde_json::json;

    fn obj(v: Value) -> CachedObject {
        CachedObject::new(serde_json::from_value(v).unwrap())
    }

    fn pod(ns: &str, name: &str, labels: Value) -> CachedObject {
        obj(json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "namespace": ns, "labels": labels}}))
    }

    fn cm(ns: &str, name: &str) -> CachedObject {
        obj(json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name, "namespace": ns}}))
    }

    fn parent(ns: &str, name: &str, spec: Value) -> CachedObject {
        obj(json!({"apiVersion": "x.dev/v1", "kind": "P", "metadata": {"name": name, "namespace": ns}, "spec": spec}))
    }

    fn kinds() -> Vec<RelatedKind> {
        vec![
            RelatedKind {
                kind: GroupVersionKind::new("", "v1", "Pod"),
                attach: Attachment::SelectorFrom("spec.selector".into()),
                cluster_scoped: false,
            },
            RelatedKind {
                kind: GroupVersionKind::new("", "v1", "ConfigMap"),
                attach: Attachment::NamesFrom(vec!["spec.configMapRef.name".into(), "spec.extra.name".into()]),
                cluster_scoped: false,
            },
        ]
    }

    fn set(keys: &[(&str, &str)]) -> BTreeSet<ObjectKey> {
        keys.iter().map(|(ns, n)| ObjectKey::new(*ns, *n)).collect()
    }

    #[test]
    fn selectors_match_as_the_api_server_reads_them() {
        let s = LabelSelector::parse(&json!({"matchLabels": {"app": "a"}, "matchExpressions": [
            {"key": "tier", "operator": "In", "values": ["web", "db"]}, {"key": "canary", "operator": "DoesNotExist"}]}))
        .unwrap();
        let matches = |s: &LabelSelector, labels: Value| s.matches(&pod("ns", "p", labels).labels());
        assert!(matches(&s, json!({"app": "a", "tier": "web"})));
        assert!(!matches(&s, json!({"app": "a", "tier": "cache"})));
        assert!(!matches(&s, json!({"app": "a", "tier": "web", "canary": "1"})));
        assert!(matches(&LabelSelector::parse(&json!({})).unwrap(), json!({})), "an empty selector selects everything");
        let bad = LabelSelector::parse(&json!({"matchExpressions": [{"key": "a", "operator": "In"}]})).unwrap_err();
        assert!(bad.contains("values set can't be empty"), "{bad}");
        assert!(LabelSelector::parse(&json!({"matchExpressions": [{"key": "a", "operator": "Near"}]})).is_err());
    }

    #[test]
    fn paths_follow_lists_and_skip_missing_fields() {
        let v = json!({"spec": {"volumes": [{"configMap": {"name": "a"}}, {"secret": {}}, {"configMap": {"name": "b"}}], "names": ["x", "y"], "n": null}});
        let names = |p| read_path(&v, p).into_iter().filter_map(Value::as_str).collect::<Vec<_>>();
        assert_eq!(names("spec.volumes.configMap.name"), ["a", "b"]);
        assert_eq!(names("spec.names"), ["x", "y"]);
        assert!(names("spec.n").is_empty());
        assert!(names("spec.missing.name").is_empty());
    }

    #[test]
    fn a_related_change_maps_to_exactly_the_referring_parents() {
        let index = RelatedIndex::new(kinds());
        let a = parent("ns", "a", json!({"selector": {"matchLabels": {"app": "a"}}, "configMapRef": {"name": "shared"}}));
        let b = parent("ns", "b", json!({"selector": {"matchLabels": {"app": "b"}}, "configMapRef": {"name": "shared"}, "extra": {"name": "own"}}));
        let c = parent("other", "c", json!({"selector": {"matchLabels": {"app": "a"}}, "configMapRef": {"name": "shared"}}));
        for p in [&a, &b, &c] {
            index.update_parent(&p.key(), Some(p));
        }
        assert_eq!(index.parents_of(0, &pod("ns", "p1", json!({"app": "a"}))), set(&[("ns", "a")]));
        assert_eq!(index.parents_of(0, &pod("ns", "p2", json!({"app": "b", "x": "y"}))), set(&[("ns", "b")]));
        assert_eq!(index.parents_of(0, &pod("ns", "p3", json!({"app": "c"}))), set(&[]));
        assert_eq!(index.parents_of(1, &cm("ns", "shared")), set(&[("ns", "a"), ("ns", "b")]));
        assert_eq!(index.parents_of(1, &cm("ns", "own")), set(&[("ns", "b")]));
        assert_eq!(index.parents_of(1, &cm("other", "shared")), set(&[("other", "c")]), "same name, other namespace");
        assert_eq!(index.parents_of(1, &cm("ns", "unrelated")), set(&[]));
    }

    #[test]
    fn a_reference_change_moves_the_mapping() {
        let index = RelatedIndex::new(kinds());
        let a = parent("ns", "a", json!({"selector": {"matchLabels": {"app": "a"}}, "configMapRef": {"name": "one"}}));
        index.update_parent(&a.key(), Some(&a));
        assert_eq!(index.parents_of(1, &cm("ns", "one")), set(&[("ns", "a")]));
        let moved = parent("ns", "a", json!({"selector": {"matchLabels": {"app": "z"}}, "configMapRef": {"name": "two"}}));
        index.update_parent(&moved.key(), Some(&moved));
        assert_eq!(index.parents_of(1, &cm("ns", "one")), set(&[]), "the old name no longer maps");
        assert_eq!(index.parents_of(1, &cm("ns", "two")), set(&[("ns", "a")]));
        assert_eq!(index.parents_of(0, &pod("ns", "p", json!({"app": "a"}))), set(&[]));
        assert_eq!(index.parents_of(0, &pod("ns", "p", json!({"app": "z"}))), set(&[("ns", "a")]));
        index.update_parent(&moved.key(), None);
        assert_eq!(index.parents_of(1, &cm("ns", "two")), set(&[]), "a deleted parent refers to nothing");
        assert!(index.inner.lock().unwrap().by_name.is_empty());
    }

    #[test]
    fn fixed_selectors_and_cluster_scoped_kinds() {
        let kinds = vec![
            RelatedKind {
                kind: GroupVersionKind::new("", "v1", "Secret"),
                attach: Attachment::FixedSelector(json!({"matchLabels": {"shop": "yes"}})),
                cluster_scoped: false,
            },
            RelatedKind {
                kind: GroupVersionKind::new("", "v1", "Node"),
                attach: Attachment::NamesFrom(vec!["spec.node".into()]),
                cluster_scoped: true,
            },
        ];
        let index = RelatedIndex::new(kinds);
        let a = parent("ns", "a", json!({"node": "n1"}));
        index.update_parent(&a.key(), Some(&a));
        let secret = |ns: &str, shop: &str| obj(json!({"metadata": {"name": "s", "namespace": ns, "labels": {"shop": shop}}}));
        assert_eq!(index.parents_of(0, &secret("ns", "yes")), set(&[("ns", "a")]));
        assert_eq!(index.parents_of(0, &secret("ns", "no")), set(&[]));
        assert_eq!(index.parents_of(0, &secret("other", "yes")), set(&[]));
        let node = obj(json!({"metadata": {"name": "n1"}}));
        assert_eq!(index.parents_of(1, &node), set(&[("ns", "a")]));
    }
}
