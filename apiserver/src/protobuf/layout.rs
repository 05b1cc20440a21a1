//! The JSON member order of the built-in Go types, taken from upstream's descriptors, for
//! writing responses as a real server does (`crate::wire`).
//!
//! The rule: a message's fields in declaration order are its Go struct's members in order,
//! because go-to-protobuf writes each `generated.proto` message by walking the Go struct and
//! keeps each member's number from its `protobuf` tag, so a member added later sits in the
//! middle with a high number (`PodStatus`: `reason` = 4, `nominatedNodeName` = 11, `hostIP` = 5).
//! Field numbers are therefore not the order. The exceptions, handled here:
//! - embedded structs (`json:",inline"`, marked in `descriptors::INLINE`): their members take
//!   the place of the proto field, as Go's encoder flattens them;
//! - `TypeMeta` (`kind`, `apiVersion`) is not a proto field: it comes first;
//! - types with their own `MarshalJSON` (Time, Duration, Quantity, IntOrString, named slices)
//!   are scalars or arrays in JSON; `FieldsV1` is raw JSON (written sorted); `RawExtension`
//!   holds a whole object, ordered by its own kind;
//! - maps (`map<K, V>` entries) are written with sorted keys, as Go's encoder sorts map keys.

use super::descriptors::{Descriptors, FieldType, descriptors};
use super::go_json::{DURATION, FIELDS_V1, INT_OR_STRING, MICRO_TIME, QUANTITY, QUANTITY_VALUE, RAW_EXTENSION, TIME};
use std::collections::HashMap;
use std::sync::OnceLock;

/// What a member's value is, for ordering what is inside it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Child {
    /// A Go struct, by message name.
    Struct(String),
    /// A Go map whose values are this struct (`None`: scalars).
    Map(Option<String>),
    /// A `runtime.RawExtension`: an object of its own kind.
    Raw,
    /// A scalar, a list of scalars or raw JSON: nothing to order but sorted map keys.
    Leaf,
}

/// A Go struct's JSON members in declaration order, embedded structs flattened.
#[derive(Debug, Default)]
pub struct Layout {
    pub members: Vec<(String, Child)>,
}

impl Layout {
    pub fn child(&self, member: &str) -> Option<&Child> {
        self.members.iter().find(|(name, _)| name == member).map(|(_, c)| c)
    }

    pub fn has(&self, member: &str) -> bool {
        self.child(member).is_some()
    }
}

/// The layout of a message by full name (`k8s.io.api.apps.v1.DeploymentSpec`).
pub fn layout(message: &str) -> Option<&'static Layout> {
    static ALL: OnceLock<HashMap<String, Layout>> = OnceLock::new();
    ALL.get_or_init(|| {
        let d = descriptors();
        d.names().map(|name| (name.to_string(), build(d, name))).collect()
    })
    .get(message)
}

/// The layout of a built-in kind (`apps/v1`, `Deployment`), or of a meta.k8s.io/v1 kind any
/// built-in group version serves (`Status`, `APIResourceList`, `WatchEvent`). `None` for kinds
/// outside the descriptors: custom resources, CustomResourceDefinition, APIService, Table.
pub fn for_kind(api_version: &str, kind: &str) -> Option<&'static Layout> {
    let (group, version) = api_version.rsplit_once('/').unwrap_or(("", api_version));
    let (_, package) = super::GROUP_PACKAGES.iter().find(|(g, _)| *g == group)?;
    layout(&format!("{package}.{version}.{kind}")).or_else(|| layout(&format!("k8s.io.apimachinery.pkg.apis.meta.v1.{kind}")))
}

fn build(d: &Descriptors, name: &str) -> Layout {
    let mut out = Layout::default();
    flatten(d, name, &mut out.members);
    out
}

fn flatten(d: &Descriptors, name: &str, out: &mut Vec<(String, Child)>) {
    let Some(m) = d.message(name) else { return };
    for number in &m.order {
        let f = &m.fields[number];
        let child = match &f.ty {
            FieldType::Scalar(_) => Child::Leaf,
            FieldType::Message(t) if f.inline => {
                flatten(d, t, out);
                continue;
            }
            FieldType::Message(t) => child_of(d, t),
        };
        out.push((f.name.clone(), child));
    }
}

fn child_of(d: &Descriptors, t: &str) -> Child {
    match t {
        TIME | MICRO_TIME | DURATION | INT_OR_STRING | QUANTITY | QUANTITY_VALUE | FIELDS_V1 => Child::Leaf,
        RAW_EXTENSION => Child::Raw,
        _ => match d.message(t) {
            Some(m) if m.map_entry => match m.fields.get(&2).map(|v| &v.ty) {
                Some(FieldType::Message(v)) if child_of(d, v) != Child::Leaf => Child::Map(Some(v.clone())),
                _ => Child::Map(None),
            },
            Some(m) if m.named_slice().is_some() => Child::Leaf,
            _ => Child::Struct(t.to_string()),
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn names(l: &Layout) -> Vec<&str> {
        l.members.iter().map(|(n, _)| n.as_str()).collect()
    }

    /// Checked against upstream's Go structs (k8s.io/api v1.32 `core/v1/types.go`,
    /// `apps/v1/types.go`): declaration order, not field numbers.
    #[test]
    fn members_follow_the_go_struct_not_the_field_numbers() {
        let status = layout("k8s.io.api.core.v1.PodStatus").unwrap();
        assert_eq!(names(status)[..7], ["phase", "conditions", "message", "reason", "nominatedNodeName", "hostIP", "hostIPs"]);
        let spec = layout("k8s.io.api.apps.v1.DeploymentStatus").unwrap();
        assert_eq!(names(spec)[..5], ["observedGeneration", "replicas", "updatedReplicas", "readyReplicas", "availableReplicas"]);
        let pod = for_kind("v1", "Pod").unwrap();
        assert_eq!(names(pod), ["metadata", "spec", "status"]);
        assert_eq!(pod.child("spec"), Some(&Child::Struct("k8s.io.api.core.v1.PodSpec".into())));
    }

    #[test]
    fn embedded_structs_are_flattened_and_special_types_are_leaves() {
        let volume = layout("k8s.io.api.core.v1.Volume").unwrap();
        assert_eq!(names(volume)[..3], ["name", "hostPath", "emptyDir"]);
        let meta = layout("k8s.io.apimachinery.pkg.apis.meta.v1.ObjectMeta").unwrap();
        assert_eq!(meta.child("creationTimestamp"), Some(&Child::Leaf));
        assert_eq!(meta.child("labels"), Some(&Child::Map(None)));
        let resources = layout("k8s.io.api.core.v1.ResourceRequirements").unwrap();
        assert_eq!(resources.child("limits"), Some(&Child::Map(None)), "Quantity values are strings");
        assert_eq!(for_kind("v1", "Status").map(names).unwrap(), ["metadata", "status", "message", "reason", "details", "code"]);
        assert!(for_kind("stable.example.com/v1", "CronTab").is_none());
        assert_eq!(layout("k8s.io.api.apps.v1.ControllerRevision").unwrap().child("data"), Some(&Child::Raw));
    }
}
