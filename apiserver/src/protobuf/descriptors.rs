//! The message types of upstream's protobuf descriptors (`apiserver/proto/k8s-v1.32.fds`, see
//! its README), indexed by full name. Read with our own wire reader: the descriptors are plain
//! protobuf, and what we need from them beyond the `.proto` text is one gogo-protobuf option
//! (`nullable = false`: the Go field is not a pointer) that generic descriptor crates drop.

use super::wire::{Wire, WireError, records};
use std::collections::HashMap;
use std::sync::OnceLock;

const FILE_DESCRIPTOR_SET: &[u8] = include_bytes!("../../proto/k8s-v1.32.fds");

/// gogoproto.nullable (FieldOptions extension 65001).
const GOGO_NULLABLE: u64 = 65001;
/// gogoproto.customname (FieldOptions extension 65004): the Go field name.
const GOGO_CUSTOMNAME: u64 = 65004;

/// Proto field names that are not the JSON name: upstream's protobuf tags carry the Go field
/// name for these few (`Variable.Name`, `BoundObjectReference.uID`, ...), while JSON uses the
/// `json` tag. No JSON field of the API is spelled like the left column, so the rename applies in
/// every message; a test checks the names against the OpenAPI schemas.
const JSON_NAMES: &[(&str, &str)] =
    &[("Name", "name"), ("Expression", "expression"), ("Webhooks", "webhooks"), ("uID", "uid"), ("aPIGroup", "apiGroup")];

/// Go embedded structs (`json:",inline"`), whose fields JSON shows in the enclosing object.
/// Upstream's descriptors do not mark them (the proto field is named after the type, as a
/// named field of that type would be), so they are listed here; a test checks the list against
/// upstream's OpenAPI schemas (`surface/openapi-v3.json.gz`).
const INLINE: &[(&str, &str)] = &[
    ("k8s.io.api.admissionregistration.v1.NamedRuleWithOperations", "ruleWithOperations"),
    ("k8s.io.api.admissionregistration.v1.RuleWithOperations", "rule"),
    ("k8s.io.api.admissionregistration.v1alpha1.NamedRuleWithOperations", "ruleWithOperations"),
    ("k8s.io.api.admissionregistration.v1beta1.NamedRuleWithOperations", "ruleWithOperations"),
    ("k8s.io.api.core.v1.ConfigMapEnvSource", "localObjectReference"),
    ("k8s.io.api.core.v1.ConfigMapKeySelector", "localObjectReference"),
    ("k8s.io.api.core.v1.ConfigMapProjection", "localObjectReference"),
    ("k8s.io.api.core.v1.ConfigMapVolumeSource", "localObjectReference"),
    ("k8s.io.api.core.v1.EphemeralContainer", "ephemeralContainerCommon"),
    ("k8s.io.api.core.v1.PersistentVolumeSpec", "persistentVolumeSource"),
    ("k8s.io.api.core.v1.Probe", "handler"),
    ("k8s.io.api.core.v1.SecretEnvSource", "localObjectReference"),
    ("k8s.io.api.core.v1.SecretKeySelector", "localObjectReference"),
    ("k8s.io.api.core.v1.SecretProjection", "localObjectReference"),
    ("k8s.io.api.core.v1.Volume", "volumeSource"),
    ("k8s.io.api.extensions.v1beta1.IngressRule", "ingressRuleValue"),
    ("k8s.io.api.networking.v1.IngressRule", "ingressRuleValue"),
    ("k8s.io.api.networking.v1beta1.IngressRule", "ingressRuleValue"),
    ("k8s.io.api.resource.v1alpha3.DeviceAllocationConfiguration", "deviceConfiguration"),
    ("k8s.io.api.resource.v1alpha3.DeviceClaimConfiguration", "deviceConfiguration"),
    ("k8s.io.api.resource.v1alpha3.DeviceClassConfiguration", "deviceConfiguration"),
    ("k8s.io.api.resource.v1beta1.DeviceAllocationConfiguration", "deviceConfiguration"),
    ("k8s.io.api.resource.v1beta1.DeviceClaimConfiguration", "deviceConfiguration"),
    ("k8s.io.api.resource.v1beta1.DeviceClassConfiguration", "deviceConfiguration"),
];

/// A scalar wire type (`FieldDescriptorProto.Type`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Scalar {
    Double,
    Float,
    Int64,
    Uint64,
    Int32,
    Fixed64,
    Fixed32,
    Bool,
    String,
    Bytes,
    Uint32,
    Sfixed32,
    Sfixed64,
    Sint32,
    Sint64,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum FieldType {
    Scalar(Scalar),
    /// A message, by full name without the leading dot.
    Message(String),
}

#[derive(Debug, Clone)]
pub struct Field {
    /// The proto field name, which upstream makes the JSON name.
    pub name: String,
    /// The Go field name, as upstream's decoding errors say it.
    pub go_name: String,
    pub ty: FieldType,
    pub repeated: bool,
    /// A singular field whose Go type is a pointer: present means set, even to zero.
    pub pointer: bool,
    /// A Go embedded struct: its fields belong to the enclosing JSON object.
    pub inline: bool,
}

#[derive(Debug, Clone, Default)]
pub struct Message {
    /// The Go type name, as upstream's decoding errors say it.
    pub go_name: String,
    pub fields: HashMap<u64, Field>,
    /// Field numbers in declaration order, which is the Go struct's member order: go-to-protobuf
    /// writes each `.proto` message by walking its Go struct, whatever the numbers.
    pub order: Vec<u64>,
    /// A `map<K, V>` entry (key = 1, value = 2).
    pub map_entry: bool,
}

impl Message {
    /// A Go named slice type (`type ExtraValue []string`), which upstream encodes as a message
    /// with one repeated scalar field `items` and whose JSON is the bare array.
    pub fn named_slice(&self) -> Option<&Field> {
        let f = self.fields.get(&1)?;
        (self.fields.len() == 1 && f.name == "items" && f.repeated && matches!(f.ty, FieldType::Scalar(_))).then_some(f)
    }
}

/// Every message type of the descriptor set.
pub struct Descriptors {
    messages: HashMap<String, Message>,
}

impl Descriptors {
    /// A message by full name without the leading dot (`k8s.io.api.apps.v1.Deployment`).
    pub fn message(&self, name: &str) -> Option<&Message> {
        self.messages.get(name)
    }

    /// Every message's full name.
    pub fn names(&self) -> impl Iterator<Item = &str> {
        self.messages.keys().map(String::as_str)
    }
}

/// The descriptors, read once.
pub fn descriptors() -> &'static Descriptors {
    static D: OnceLock<Descriptors> = OnceLock::new();
    D.get_or_init(|| parse(FILE_DESCRIPTOR_SET).expect("apiserver/proto/k8s-v1.32.fds is a valid FileDescriptorSet"))
}

fn bytes(w: Wire<'_>) -> Result<&[u8], WireError> {
    match w {
        Wire::Bytes(b) => Ok(b),
        other => Err(WireError::WrongWireType { wire: other.number(), field: "descriptor".into() }),
    }
}

fn text(w: Wire<'_>) -> Result<String, WireError> {
    Ok(String::from_utf8_lossy(bytes(w)?).into_owned())
}

fn parse(set: &[u8]) -> Result<Descriptors, WireError> {
    let mut messages = HashMap::new();
    for r in records(set, "FileDescriptorSet") {
        let (1, file) = r? else { continue };
        let file = bytes(file)?;
        let mut package = String::new();
        let mut types = vec![];
        for r in records(file, "FileDescriptorProto") {
            match r? {
                (2, w) => package = text(w)?,
                (4, w) => types.push(bytes(w)?),
                _ => {}
            }
        }
        for t in types {
            message(t, &package, &mut messages)?;
        }
    }
    Ok(Descriptors { messages })
}

/// Reads one `DescriptorProto` (and its nested types) under `scope`.
fn message(buf: &[u8], scope: &str, out: &mut HashMap<String, Message>) -> Result<(), WireError> {
    let mut m = Message::default();
    let (mut nested, mut fields) = (vec![], vec![]);
    for r in records(buf, "DescriptorProto") {
        match r? {
            (1, w) => m.go_name = text(w)?,
            (2, w) => fields.push(field(bytes(w)?)?),
            (3, w) => nested.push(bytes(w)?),
            (7, w) => {
                for o in records(bytes(w)?, "MessageOptions") {
                    if let (7, Wire::Varint(v)) = o? {
                        m.map_entry = v != 0;
                    }
                }
            }
            _ => {}
        }
    }
    let name = format!("{scope}.{}", m.go_name);
    for (number, mut f) in fields {
        if let Some((_, json)) = JSON_NAMES.iter().find(|(proto, _)| *proto == f.name) {
            f.name = json.to_string();
        }
        f.inline = INLINE.contains(&(name.as_str(), f.name.as_str()));
        m.order.push(number);
        m.fields.insert(number, f);
    }
    for n in nested {
        message(n, &name, out)?;
    }
    out.insert(name, m);
    Ok(())
}

fn scalar(ty: u64) -> Option<Scalar> {
    use Scalar::*;
    Some(match ty {
        1 => Double,
        2 => Float,
        3 => Int64,
        4 => Uint64,
        5 => Int32,
        6 => Fixed64,
        7 => Fixed32,
        8 => Bool,
        9 => String,
        12 => Bytes,
        13 => Uint32,
        // Enums are varints; Kubernetes uses strings for every enum-like field.
        14 => Int32,
        15 => Sfixed32,
        16 => Sfixed64,
        17 => Sint32,
        18 => Sint64,
        _ => return None,
    })
}

/// Reads one `FieldDescriptorProto`.
fn field(buf: &[u8]) -> Result<(u64, Field), WireError> {
    let (mut name, mut number, mut repeated, mut ty, mut type_name) = (String::new(), 0, false, 0, String::new());
    let (mut nullable, mut go_name) = (true, None);
    for r in records(buf, "FieldDescriptorProto") {
        match r? {
            (1, w) => name = text(w)?,
            (3, Wire::Varint(v)) => number = v,
            (4, Wire::Varint(v)) => repeated = v == 3,
            (5, Wire::Varint(v)) => ty = v,
            (6, w) => type_name = text(w)?,
            (8, w) => {
                for o in records(bytes(w)?, "FieldOptions") {
                    match o? {
                        (GOGO_NULLABLE, Wire::Varint(v)) => nullable = v != 0,
                        (GOGO_CUSTOMNAME, w) => go_name = Some(text(w)?),
                        _ => {}
                    }
                }
            }
            _ => {}
        }
    }
    let ty = match scalar(ty) {
        Some(s) => FieldType::Scalar(s),
        None => FieldType::Message(type_name.trim_start_matches('.').to_string()),
    };
    // A `[]byte` is never a pointer; gogo makes every other proto2 optional field one unless
    // `nullable = false`.
    let pointer = nullable && !repeated && ty != FieldType::Scalar(Scalar::Bytes);
    let go_name = go_name.unwrap_or_else(|| {
        let mut c = name.chars();
        c.next().map(|f| f.to_uppercase().chain(c).collect()).unwrap_or_default()
    });
    Ok((number, Field { name, go_name, ty, repeated, pointer, inline: false }))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_field_type_resolves_to_a_known_message() {
        let d = descriptors();
        assert!(d.messages.len() > 1000, "{} messages", d.messages.len());
        for m in d.messages.values() {
            for f in m.fields.values() {
                if let FieldType::Message(t) = &f.ty {
                    assert!(d.message(t).is_some(), "{}.{} refers to unknown {t}", m.go_name, f.name);
                }
            }
        }
    }

    #[test]
    fn pointers_are_told_from_values_by_the_gogo_option() {
        let spec = descriptors().message("k8s.io.api.apps.v1.DeploymentSpec").unwrap();
        let by_name = |n: &str| spec.fields.values().find(|f| f.name == n).unwrap();
        assert!(by_name("replicas").pointer, "replicas is *int32");
        assert!(!by_name("minReadySeconds").pointer, "minReadySeconds is int32");
        assert!(!by_name("template").pointer);
        assert!(by_name("selector").pointer);
        assert_eq!(by_name("minReadySeconds").go_name, "MinReadySeconds");
    }

    #[test]
    fn inline_fields_are_exactly_those_the_openapi_schemas_leave_out() {
        let mut wrong = vec![];
        for (name, m) in &descriptors().messages {
            let Some(schema) = crate::builtin_schema::component(&name.replacen("k8s.io.", "io.k8s.", 1)) else { continue };
            let Some(properties) = schema.get("properties").and_then(|p| p.as_object()) else { continue };
            for f in m.fields.values() {
                if f.inline == properties.contains_key(&f.name) {
                    wrong.push(format!("{name}.{}", f.name));
                }
            }
        }
        assert!(wrong.is_empty(), "inline or not: {wrong:?}");
        for (name, field) in INLINE {
            assert!(descriptors().message(name).is_some_and(|m| m.fields.values().any(|f| f.name == *field && f.inline)), "{name}.{field}");
        }
    }

    #[test]
    fn map_entries_and_named_slices_are_recognised() {
        let d = descriptors();
        assert!(d.message("k8s.io.apimachinery.pkg.apis.meta.v1.ObjectMeta.LabelsEntry").unwrap().map_entry);
        assert!(d.message("k8s.io.api.authentication.v1.ExtraValue").unwrap().named_slice().is_some());
        assert!(d.message("k8s.io.api.core.v1.DownwardAPIProjection").unwrap().named_slice().is_none());
    }
}
