//! Response bodies as a real kube-apiserver writes them: JSON members in Go struct order
//! (`kind`, `apiVersion`, `metadata`, `spec`, `status`; ObjectMeta's `name`, `generateName`,
//! `namespace`, ... `managedFields`; a Status's `status`, `message`, `reason`, `details`,
//! `code`) and a newline after each body, as `json.Encoder` ends it.
//!
//! Objects are kept as `serde_json::Value`, whose maps sort their keys; rather than switch the
//! whole workspace to `preserve_order` (insertion order would still not be Go's order), the
//! order is applied when writing. Members a table below does not name follow in sorted order.

use serde_json::{Map, Value};

/// A JSON body in Go member order, ending with a newline.
pub fn to_vec(v: &Value) -> Vec<u8> {
    let mut out = Vec::with_capacity(256);
    write(&mut out, v, Role::Any);
    out.push(b'\n');
    out
}

/// What a JSON object is, which decides the order of its members.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Role {
    /// Not known from the parent: a typed object (has `kind`), a watch event, or other.
    Any,
    /// An item of a list: a typed object even without `kind`.
    Item,
    /// `ObjectMeta` or `ListMeta`.
    Meta,
    /// `Status.details`.
    Details,
    /// `Status.details.causes[]`.
    Cause,
    /// `metadata.ownerReferences[]`.
    OwnerRef,
    /// `metadata.managedFields[]`.
    ManagedField,
    /// Nothing known: sorted keys.
    Other,
}

const TYPE_META: [&str; 3] = ["kind", "apiVersion", "metadata"];
const OBJECT_META: &[&str] = &[
    "name",
    "generateName",
    "namespace",
    "selfLink",
    "uid",
    "resourceVersion",
    "generation",
    "creationTimestamp",
    "deletionTimestamp",
    "deletionGracePeriodSeconds",
    "labels",
    "annotations",
    "ownerReferences",
    "finalizers",
    "managedFields",
    // ListMeta (selfLink and resourceVersion above).
    "continue",
    "remainingItemCount",
];

/// The members after `kind`, `apiVersion`, `metadata` of a typed object, by kind.
fn kind_members(kind: &str) -> &'static [&'static str] {
    match kind {
        "Status" => &["status", "message", "reason", "details", "code"],
        "ConfigMap" => &["immutable", "data", "binaryData"],
        "Secret" => &["immutable", "data", "stringData", "type"],
        "ServiceAccount" => &["secrets", "imagePullSecrets", "automountServiceAccountToken"],
        "Role" | "ClusterRole" => &["rules", "aggregationRule"],
        "RoleBinding" | "ClusterRoleBinding" => &["subjects", "roleRef"],
        "Endpoints" => &["subsets"],
        "EndpointSlice" => &["addressType", "endpoints", "ports"],
        "Event" => &[
            "involvedObject",
            "reason",
            "message",
            "source",
            "firstTimestamp",
            "lastTimestamp",
            "count",
            "type",
            "eventTime",
            "series",
            "action",
            "related",
            "reportingComponent",
            "reportingInstance",
            // events.k8s.io/v1
            "regarding",
            "note",
        ],
        "Table" => &["columnDefinitions", "rows"],
        k if k.ends_with("List") => &["items"],
        _ => &["spec", "status"],
    }
}

fn members(map: &Map<String, Value>, role: Role) -> (Vec<&'static str>, Role) {
    let listed = |first: &[&'static str], then: &[&'static str]| first.iter().chain(then).copied().collect::<Vec<_>>();
    match role {
        Role::Any | Role::Item => {
            if let Some(kind) = map.get("kind").and_then(Value::as_str) {
                return (listed(&TYPE_META, kind_members(kind)), Role::Any);
            }
            if map.contains_key("type") && map.contains_key("object") && map.len() == 2 {
                return (vec!["type", "object"], Role::Any); // a watch event
            }
            if role == Role::Item {
                return (listed(&TYPE_META, kind_members("")), Role::Any);
            }
            (vec![], Role::Other)
        }
        Role::Meta => (OBJECT_META.to_vec(), Role::Meta),
        Role::Details => (vec!["name", "group", "kind", "uid", "causes", "retryAfterSeconds"], Role::Details),
        Role::Cause => (vec!["reason", "message", "field"], Role::Cause),
        Role::OwnerRef => (vec!["apiVersion", "kind", "name", "uid", "controller", "blockOwnerDeletion"], Role::OwnerRef),
        Role::ManagedField => {
            (vec!["manager", "operation", "apiVersion", "time", "fieldsType", "fieldsV1", "subresource"], Role::ManagedField)
        }
        Role::Other => (vec![], Role::Other),
    }
}

/// The role of `map[key]` (an object, or the elements of an array) inside a map of `role`.
fn child(role: Role, is_status: bool, key: &str) -> Role {
    match (role, key) {
        (Role::Meta, "ownerReferences") => Role::OwnerRef,
        (Role::Meta, "managedFields") => Role::ManagedField,
        (Role::Meta, _) => Role::Other,
        (Role::Details, "causes") => Role::Cause,
        (Role::Cause | Role::OwnerRef | Role::ManagedField | Role::Details, _) => Role::Other,
        (_, "metadata") => Role::Meta,
        (_, "details") if is_status => Role::Details,
        (_, "items") => Role::Item,
        _ => Role::Any,
    }
}

fn write(out: &mut Vec<u8>, v: &Value, role: Role) {
    match v {
        Value::Object(map) => {
            let (first, own) = members(map, role);
            let is_status = map.get("kind").and_then(Value::as_str) == Some("Status");
            let mut keys: Vec<&str> = first.iter().copied().filter(|k| map.contains_key(*k)).collect();
            keys.extend(map.keys().map(String::as_str).filter(|k| !first.iter().any(|f| f == k)));
            out.push(b'{');
            for (i, key) in keys.into_iter().enumerate() {
                if i > 0 {
                    out.push(b',');
                }
                serde_json::to_writer(&mut *out, key).expect("a string serializes");
                out.push(b':');
                write(out, &map[key], child(own, is_status, key));
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
    }
}
