//! Related objects (contract 0.2): the objects a parent refers to or sits
//! next to, which the plugin reads but does not control. The manifest says
//! which kinds and how they attach ([`RelatedKind`]'s builders); reconcile
//! reads them by type ([`Related::of`]), as it reads [`Children`](crate::Children).
//!
//! ```ignore
//! Manifest::for_parent::<Memcached>("memcached", "0.1.0")
//!     .child::<Deployment>()
//!     .related(RelatedKind::labeled::<Pod>([("app.kubernetes.io/part-of", "memcached-operator")]))
//! ```

use std::collections::BTreeMap;

use kube_core::Resource;
use serde::de::DeserializeOwned;

use crate::children::TypedTexts;
use crate::contract::{Attachment, Manifest, ReconcileError, RelatedKind, gvk_of};
use crate::object::Object;

/// The related objects of one parent, of every related kind of the manifest.
/// Read-only: the host refuses a write to one that is not also a child.
#[derive(Clone, Debug, Default)]
pub struct Related {
    items: TypedTexts,
}

impl Related {
    /// Reads the host's JSON texts; an item that is not a JSON object is a
    /// permanent error naming its position.
    pub fn from_json(texts: &[String]) -> Result<Self, ReconcileError> {
        Ok(Self { items: TypedTexts::from_json(texts, "related object")? })
    }

    /// From already parsed objects (native callers).
    pub fn from_objects(objects: &[Object]) -> Self {
        Self { items: TypedTexts::from_objects(objects) }
    }

    /// Every related object of kind `K`, parsed into `K`, in the host's order.
    pub fn of<K>(&self) -> Result<Vec<K>, ReconcileError>
    where
        K: Resource<DynamicType = ()> + DeserializeOwned,
    {
        self.items.of::<K>("InvalidRelated", "related object")
    }

    /// The related object of kind `K` named `name`, if the host passed one
    /// (a name the parent refers to that does not exist is simply absent).
    pub fn named<K>(&self, name: &str) -> Result<Option<K>, ReconcileError>
    where
        K: Resource<DynamicType = ()> + DeserializeOwned,
    {
        Ok(self.of::<K>()?.into_iter().find(|o| o.meta().name.as_deref() == Some(name)))
    }

    /// Every related object as an untyped [`Object`].
    pub fn untyped(&self) -> Result<Vec<Object>, ReconcileError> {
        self.items.untyped("related object")
    }

    /// How many related objects there are, of all kinds.
    pub fn len(&self) -> usize {
        self.items.len()
    }

    /// Whether there are no related objects.
    pub fn is_empty(&self) -> bool {
        self.items.is_empty()
    }
}

impl RelatedKind {
    /// Objects of kind `K` picked by the `metav1.LabelSelector` at `path`
    /// of the parent, e.g. `spec.selector`.
    pub fn selector_at<K: Resource<DynamicType = ()>>(path: &str) -> Self {
        Self::new::<K>(Attachment::SelectorFrom(path.into()))
    }

    /// Objects of kind `K` named at these paths of the parent (each a name
    /// or a list of names; lists on the way are followed item by item),
    /// e.g. `["spec.configMapRef.name", "spec.template.spec.volumes.configMap.name"]`.
    pub fn names_at<K: Resource<DynamicType = ()>>(paths: &[&str]) -> Self {
        Self::new::<K>(Attachment::NamesFrom(paths.iter().map(|p| p.to_string()).collect()))
    }

    /// Every object of kind `K` in the parent's namespace carrying all
    /// these labels (a fixed `matchLabels` selector).
    pub fn labeled<K: Resource<DynamicType = ()>>(labels: impl IntoIterator<Item = (impl Into<String>, impl Into<String>)>) -> Self {
        let labels: BTreeMap<String, String> = labels.into_iter().map(|(k, v)| (k.into(), v.into())).collect();
        Self::new::<K>(Attachment::FixedSelector(serde_json::json!({ "matchLabels": labels })))
    }

    /// Looks the objects up cluster-wide: for a cluster-scoped kind (`Node`,
    /// `Namespace`); the host refuses a plugin whose scope is wrong.
    #[must_use]
    pub fn cluster_scoped(mut self) -> Self {
        self.cluster_scoped = true;
        self
    }

    fn new<K: Resource<DynamicType = ()>>(attach: Attachment) -> Self {
        RelatedKind { kind: gvk_of::<K>(), attach, cluster_scoped: false }
    }
}

impl Manifest {
    /// Adds a related kind: objects the plugin reads but does not control,
    /// passed to reconcile as [`Related`].
    #[must_use]
    pub fn related(mut self, kind: RelatedKind) -> Self {
        self.related.push(kind);
        self
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::contract::GroupVersionKind;
    use k8s_openapi::api::core::v1::{ConfigMap, Node, Pod};
    use serde_json::json;

    #[test]
    fn of_and_named_read_only_the_requested_kind() {
        let texts = vec![
            json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p1"}}).to_string(),
            json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "conf"}, "data": {"a": "1"}}).to_string(),
            json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p2"}}).to_string(),
        ];
        let related = Related::from_json(&texts).unwrap();
        let pods: Vec<Pod> = related.of().unwrap();
        assert_eq!(pods.iter().map(|p| p.metadata.name.clone().unwrap()).collect::<Vec<_>>(), ["p1", "p2"]);
        assert_eq!(related.named::<ConfigMap>("conf").unwrap().unwrap().data.unwrap()["a"], "1");
        assert!(related.named::<ConfigMap>("missing").unwrap().is_none());
        assert_eq!(related.len(), 3);
    }

    #[test]
    fn a_malformed_related_object_is_a_permanent_error_naming_it() {
        let err = Related::from_json(&["[".to_string()]).unwrap_err();
        assert!(!err.retryable && err.message.starts_with("related object 0 is not valid JSON"), "{err}");
        let texts = vec![json!({"apiVersion": "v1", "kind": "ConfigMap", "data": 5}).to_string()];
        let err = Related::from_json(&texts).unwrap().of::<ConfigMap>().unwrap_err();
        assert_eq!(err.reason, "InvalidRelated");
    }

    #[test]
    fn builders_write_the_contracts_attachments() {
        let m = Manifest {
            name: "m".into(),
            version: "0.1.0".into(),
            parent: GroupVersionKind::new("apps", "v1", "Deployment"),
            children: vec![],
            related: vec![],
            crds: vec![],
            finalizer: None,
        }
        .related(RelatedKind::selector_at::<Pod>("spec.selector"))
        .related(RelatedKind::names_at::<ConfigMap>(&["spec.template.spec.volumes.configMap.name"]))
        .related(RelatedKind::labeled::<Pod>([("app", "web")]))
        .related(RelatedKind::labeled::<Node>([("role", "cache")]).cluster_scoped());
        let pod = GroupVersionKind::new("", "v1", "Pod");
        assert_eq!(m.related[0], RelatedKind { kind: pod.clone(), attach: Attachment::SelectorFrom("spec.selector".into()), cluster_scoped: false });
        assert_eq!(m.related[1].attach, Attachment::NamesFrom(vec!["spec.template.spec.volumes.configMap.name".into()]));
        assert_eq!(m.related[1].kind, GroupVersionKind::new("", "v1", "ConfigMap"));
        assert_eq!(m.related[2].attach, Attachment::FixedSelector(json!({"matchLabels": {"app": "web"}})));
        assert!(m.related[3].cluster_scoped && m.related[3].kind.kind == "Node");
    }
}
