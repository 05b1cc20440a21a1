//! Response bodies as a real kube-apiserver writes them: JSON members in Go struct order at
//! every level (`kind`, `apiVersion`, `metadata`, `spec`, `status`; ObjectMeta's `name`,
//! `generateName`, `namespace`, ...; a DeploymentSpec's `replicas`, `selector`, `template`, ...;
//! a Status's `status`, `message`, `reason`, `details`, `code`) and a newline after each body,
//! as `json.Encoder` ends it. The order of built-in types comes from upstream's descriptors
//! (`protobuf::layout`, which says why that is Go's order); custom resources are Go maps
//! upstream (`unstructured`), so their keys are sorted at every level, as Go sorts map keys.
//!
//! Objects are kept as `serde_json::Value`, whose maps sort their keys; rather than switch the
//! whole workspace to `preserve_order` (insertion order would still not be Go's order), the
//! order is applied when writing. Members the Go type does not have follow in sorted order.

use crate::protobuf::layout::{self, Child, Layout};
use serde_json::{Map, Value};

/// `meta.k8s.io/v1 PartialObjectMetadata` of an object (what metadata-only clients ask for).
pub fn partial_metadata(obj: &Value) -> Value {
    serde_json::json!({"kind": "PartialObjectMetadata", "apiVersion": "meta.k8s.io/v1", "metadata": obj["metadata"]})
}

/// A JSON body in Go member order, ending with a newline.
pub fn to_vec(v: &Value) -> Vec<u8> {
    let mut out = Vec::with_capacity(256);
    write(&mut out, v, Role::Any);
    out.push(b'\n');
    out
}

/// An object as upstream's JSON and merge patchers re-encode a patched object (shown in a
/// strict refusal): the top level's members sorted, as a Go map's, the members below in Go
/// order; compact, no newline.
pub fn patched_object(v: &Value) -> Vec<u8> {
    let mut out = Vec::with_capacity(256);
    let Value::Object(map) = v else {
        write(&mut out, v, Role::Any);
        return out;
    };
    let role = resolve(map, Role::Any);
    out.push(b'{');
    // serde_json's map keeps its keys sorted: its own order is the Go map's.
    for (i, (key, value)) in map.iter().enumerate() {
        if i > 0 {
            out.push(b',');
        }
        serde_json::to_writer(&mut out, key).expect("a string serializes");
        out.push(b':');
        write(&mut out, value, child(role, key));
    }
    out.push(b'}');
    out
}

/// What a JSON object is, which decides the order of its members.
#[derive(Clone, Copy)]
enum Role {
    /// Not known from the parent: a typed object (has `kind`), a watch event, or other.
    Any,
    /// A built-in Go struct, its order from upstream's descriptors (`protobuf::layout`).
    Go(&'static Layout),
    /// A Go map whose values are this struct: keys sorted, values in Go order.
    MapOf(&'static Layout),
    /// A Go-typed kind outside the descriptors (CustomResourceDefinition, APIService, Table):
    /// `kind`, `apiVersion`, `metadata`, then these members; nested structs sorted.
    Typed { members: &'static [&'static str], list: bool },
    /// A Table's row: `cells`, `conditions`, `object` (an object of its own kind).
    TableRow,
    /// A watch event: `type`, `object`.
    Event,
    /// Nothing known, or a custom resource (upstream encodes those from Go maps, whose keys
    /// are sorted): sorted keys all the way down.
    Other,
}

const TYPE_META: [&str; 2] = ["kind", "apiVersion"];
const META: &str = "k8s.io.apimachinery.pkg.apis.meta.v1.";

/// The members after `kind`, `apiVersion`, `metadata` of a Go-typed kind outside the
/// descriptors, or `None` for a custom resource.
fn typed_members(api_version: &str, kind: &str) -> Option<&'static [&'static str]> {
    let group = api_version.rsplit_once('/').map_or("", |(g, _)| g);
    match (group, kind) {
        ("meta.k8s.io", "Table") => Some(&["columnDefinitions", "rows"]),
        ("apiextensions.k8s.io" | "apiregistration.k8s.io", k) if k.ends_with("List") => Some(&["items"]),
        ("apiextensions.k8s.io" | "apiregistration.k8s.io", _) => Some(&["spec", "status"]),
        _ => None,
    }
}

/// What an object of `role` is, now that its members are known.
fn resolve(map: &Map<String, Value>, role: Role) -> Role {
    if !matches!(role, Role::Any) {
        return role;
    }
    if let Some(kind) = map.get("kind").and_then(Value::as_str) {
        let api_version = map.get("apiVersion").and_then(Value::as_str).unwrap_or_default();
        if let Some(l) = layout::for_kind(api_version, kind) {
            return Role::Go(l);
        }
        if let Some(members) = typed_members(api_version, kind) {
            return Role::Typed { members, list: kind.ends_with("List") };
        }
        return Role::Other;
    }
    if map.contains_key("type") && map.contains_key("object") && map.len() == 2 {
        return Role::Event;
    }
    Role::Other
}

/// The members that come first, in this order; the others follow sorted.
fn first_members(map: &Map<String, Value>, role: Role) -> Vec<&'static str> {
    match role {
        Role::Go(l) => {
            // TypeMeta is embedded first in every kind but is no proto field.
            let type_meta = TYPE_META.iter().copied().filter(|k| map.contains_key(*k) && !l.has(k));
            type_meta.chain(l.members.iter().map(|(name, _)| name.as_str())).collect()
        }
        Role::Typed { members, .. } => TYPE_META.iter().chain(&["metadata"]).chain(members).copied().collect(),
        Role::TableRow => vec!["cells", "conditions", "object"],
        Role::Event => vec!["type", "object"],
        Role::Any | Role::MapOf(_) | Role::Other => vec![],
    }
}

/// The role of `map[key]` (an object, or the elements of an array) inside a map of `role`.
fn child(role: Role, key: &str) -> Role {
    let go = |name: &str| layout::layout(name).map_or(Role::Other, Role::Go);
    match role {
        Role::Go(l) => match l.child(key) {
            Some(Child::Struct(name)) => go(name),
            Some(Child::Map(Some(name))) => layout::layout(name).map_or(Role::Other, Role::MapOf),
            Some(Child::Raw) => Role::Any,
            Some(Child::Map(None) | Child::Leaf) | None => Role::Other,
        },
        Role::MapOf(l) => Role::Go(l),
        Role::Typed { list, .. } => match key {
            "metadata" if list => go(&format!("{META}ListMeta")),
            "metadata" => go(&format!("{META}ObjectMeta")),
            "items" => Role::Typed { members: &["spec", "status"], list: false },
            "rows" => Role::TableRow,
            _ => Role::Other,
        },
        Role::TableRow | Role::Event if key == "object" => Role::Any,
        Role::Any | Role::TableRow | Role::Event | Role::Other => Role::Other,
    }
}

/// One watch event line, `{"type":..,"object":..}` and a newline, as [`to_vec`] writes it
/// for that object, without first building the event as a `Value` (a deep copy of the
/// object per event and watcher).
pub fn watch_event(kind: &str, object: &Value) -> Vec<u8> {
    let mut out = Vec::with_capacity(512);
    out.extend_from_slice(b"{\"type\":");
    serde_json::to_writer(&mut out, kind).expect("a string serializes");
    out.extend_from_slice(b",\"object\":");
    write(&mut out, object, child(Role::Event, "object"));
    out.extend_from_slice(b"}\n");
    out
}

fn write(out: &mut Vec<u8>, v: &Value, role: Role) {
    match v {
        Value::Object(map) => {
            let role = resolve(map, role);
            let first = first_members(map, role);
            let mut written = 0;
            let mut member = |out: &mut Vec<u8>, key: &str, value: &Value| {
                if written > 0 {
                    out.push(b',');
                }
                written += 1;
                serde_json::to_writer(&mut *out, key).expect("a string serializes");
                out.push(b':');
                write(out, value, child(role, key));
            };
            out.push(b'{');
            for key in &first {
                if let Some(value) = map.get(*key) {
                    member(out, key, value);
                }
            }
            // The rest in the map's own (sorted) order.
            for (key, value) in map.iter().filter(|(k, _)| !first.contains(&k.as_str())) {
                member(out, key, value);
            }
            out.push(b'}');
        }
        Value::Array(items) => {
            out.push(b'[');
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    out.push(b',');
                }
                write(out, item, role);
            }
            out.push(b']');
        }
        scalar => serde_json::to_writer(&mut *out, scalar).expect("a scalar serializes"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn text(v: &Value) -> String {
        String::from_utf8(to_vec(v)).unwrap()
    }

    #[test]
    fn objects_follow_go_struct_order_and_end_with_a_newline() {
        let pod = json!({"status": {"phase": "Running"}, "spec": {"b": 1, "a": 2}, "metadata": {
            "uid": "u", "namespace": "ns", "name": "p", "labels": {"z": "1", "a": "2"}, "creationTimestamp": "t", "resourceVersion": "5",
            "ownerReferences": [{"uid": "o", "name": "d", "kind": "ReplicaSet", "apiVersion": "apps/v1"}]}, "kind": "Pod", "apiVersion": "v1"});
        assert_eq!(
            text(&pod),
            concat!(
                r#"{"kind":"Pod","apiVersion":"v1","metadata":{"name":"p","namespace":"ns","uid":"u","resourceVersion":"5","#,
                r#""creationTimestamp":"t","labels":{"a":"2","z":"1"},"ownerReferences":[{"apiVersion":"apps/v1","kind":"ReplicaSet","#,
                r#""name":"d","uid":"o"}]},"spec":{"a":2,"b":1},"status":{"phase":"Running"}}"#,
                "\n"
            )
        );
    }

    #[test]
    fn a_status_is_written_as_upstream_writes_it() {
        let s = json!({"code": 404, "details": {"kind": "pods", "name": "x"}, "reason": "NotFound", "message": "m", "status": "Failure",
            "metadata": {}, "apiVersion": "v1", "kind": "Status"});
        assert_eq!(
            text(&s),
            "{\"kind\":\"Status\",\"apiVersion\":\"v1\",\"metadata\":{},\"status\":\"Failure\",\"message\":\"m\",\"reason\":\"NotFound\",\"details\":{\"name\":\"x\",\"kind\":\"pods\"},\"code\":404}\n"
        );
    }

    #[test]
    fn list_items_and_watch_events_are_ordered_too() {
        let list = json!({"items": [{"spec": {}, "metadata": {"namespace": "a", "name": "b"}}], "metadata": {"resourceVersion": "1"}, "apiVersion": "v1", "kind": "PodList"});
        assert_eq!(
            text(&list),
            "{\"kind\":\"PodList\",\"apiVersion\":\"v1\",\"metadata\":{\"resourceVersion\":\"1\"},\"items\":[{\"metadata\":{\"name\":\"b\",\"namespace\":\"a\"},\"spec\":{}}]}\n"
        );
        let ev = json!({"type": "ADDED", "object": {"metadata": {}, "kind": "ConfigMap", "data": {}, "apiVersion": "v1"}});
        assert_eq!(text(&ev), "{\"type\":\"ADDED\",\"object\":{\"kind\":\"ConfigMap\",\"apiVersion\":\"v1\",\"metadata\":{},\"data\":{}}}\n");
        // A watch line written from the object alone is the same bytes as the event built around it.
        for object in [ev["object"].clone(), json!({"kind": "CronTab", "apiVersion": "x/v1", "spec": {"b": 1, "a": [1, {"d": 2, "c": 3}]}})] {
            let built = String::from_utf8(to_vec(&json!({"type": "MODIFIED", "object": object.clone()}))).unwrap();
            assert_eq!(String::from_utf8(watch_event("MODIFIED", &object)).unwrap(), built);
        }
    }

    #[test]
    fn nested_structs_follow_go_order_and_custom_resources_are_sorted() {
        let d = json!({"kind": "Deployment", "apiVersion": "apps/v1", "metadata": {"name": "d"},
            "spec": {"template": {"spec": {"containers": [{"name": "c", "image": "i", "imagePullPolicy": "Always", "env": [{"value": "v", "name": "n"}]}]}},
                "strategy": {"type": "RollingUpdate"}, "selector": {"matchLabels": {"b": "1", "a": "2"}}, "replicas": 1},
            "status": {"replicas": 1, "observedGeneration": 1, "readyReplicas": 1, "updatedReplicas": 1}});
        assert_eq!(
            text(&d),
            concat!(
                r#"{"kind":"Deployment","apiVersion":"apps/v1","metadata":{"name":"d"},"spec":{"replicas":1,"selector":{"matchLabels":{"a":"2","b":"1"}},"#,
                r#""template":{"spec":{"containers":[{"name":"c","image":"i","env":[{"name":"n","value":"v"}],"imagePullPolicy":"Always"}]}},"#,
                r#""strategy":{"type":"RollingUpdate"}},"status":{"observedGeneration":1,"replicas":1,"updatedReplicas":1,"readyReplicas":1}}"#,
                "\n"
            )
        );
        let cr =
            json!({"kind": "CronTab", "apiVersion": "stable.example.com/v1", "metadata": {"namespace": "a", "name": "b"}, "spec": {"z": 1, "a": 2}});
        assert_eq!(
            text(&cr),
            "{\"apiVersion\":\"stable.example.com/v1\",\"kind\":\"CronTab\",\"metadata\":{\"name\":\"b\",\"namespace\":\"a\"},\"spec\":{\"a\":2,\"z\":1}}\n"
        );
    }
}
