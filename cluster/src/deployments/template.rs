//! Pod templates of a Deployment and its ReplicaSets: the `pod-template-hash` that names a
//! ReplicaSet, and template equality ignoring that label (how upstream finds the new one).

use serde_json::{Map, Value};

/// The label (on the ReplicaSet, its selector, its template and so its Pods) that keeps the
/// ReplicaSets of one Deployment apart.
pub(crate) const HASH_LABEL: &str = "pod-template-hash";

/// The alphabet of upstream's `rand.SafeEncodeString` (no vowels, no confusable digits).
const SAFE: &[u8] = b"bcdfghjklmnpqrstvwxz2456789";

/// FNV-1a, 32 bits (Go's `hash/fnv.New32a`).
fn fnv32a(bytes: impl IntoIterator<Item = u8>, mut h: u32) -> u32 {
    for b in bytes {
        h ^= u32::from(b);
        h = h.wrapping_mul(0x0100_0193);
    }
    h
}

const FNV_OFFSET: u32 = 0x811c_9dc5;

/// Upstream's `controller.ComputeHash` shape: FNV-32a of the template, then of the collision
/// count (4 little-endian bytes padded to 8), printed in decimal and mapped through
/// `SafeEncodeString`. Upstream hashes Go's `spew` dump of the typed template, which a JSON
/// server cannot reproduce; this hashes the template's canonical JSON (keys sorted) instead,
/// so the values differ from a real cluster's but have the same form and the same stability.
pub(crate) fn compute_hash(template: &Value, collision_count: Option<i64>) -> String {
    let mut text = String::new();
    canonical(template, &mut text);
    let mut h = fnv32a(text.bytes(), FNV_OFFSET);
    if let Some(c) = collision_count {
        let mut bytes = [0u8; 8];
        bytes[..4].copy_from_slice(&(c as u32).to_le_bytes());
        h = fnv32a(bytes, h);
    }
    safe_encode(&h.to_string())
}

/// `rand.SafeEncodeString`: each character mapped into [`SAFE`] by its code.
pub(crate) fn safe_encode(s: &str) -> String {
    s.chars().map(|c| SAFE[c as usize % SAFE.len()] as char).collect()
}

/// JSON text with object keys sorted, whatever order the map keeps.
fn canonical(v: &Value, out: &mut String) {
    match v {
        Value::Object(m) => {
            let mut keys: Vec<&String> = m.keys().collect();
            keys.sort();
            out.push('{');
            for (i, k) in keys.into_iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                out.push_str(&Value::String(k.clone()).to_string());
                out.push(':');
                canonical(&m[k], out);
            }
            out.push('}');
        }
        Value::Array(a) => {
            out.push('[');
            for (i, x) in a.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                canonical(x, out);
            }
            out.push(']');
        }
        other => out.push_str(&other.to_string()),
    }
}

/// Upstream's `EqualIgnoreHash`: the templates are equal once the `pod-template-hash` label is
/// dropped, comparing as `Semantic.DeepEqual` does for what JSON can tell apart (unset, null,
/// empty string, empty list and empty map are all Go's zero value).
pub(crate) fn equal_ignore_hash(a: &Value, b: &Value) -> bool {
    normalized(a) == normalized(b)
}

fn normalized(template: &Value) -> Value {
    let mut t = template.clone();
    if let Some(labels) = t.pointer_mut("/metadata/labels").and_then(Value::as_object_mut) {
        labels.remove(HASH_LABEL);
    }
    drop_zero(&mut t);
    t
}

fn is_zero(v: &Value) -> bool {
    match v {
        Value::Null => true,
        Value::String(s) => s.is_empty(),
        Value::Array(a) => a.is_empty(),
        Value::Object(m) => m.is_empty(),
        _ => false,
    }
}

fn drop_zero(v: &mut Value) {
    match v {
        Value::Object(m) => {
            for x in m.values_mut() {
                drop_zero(x);
            }
            let kept: Map<String, Value> = std::mem::take(m).into_iter().filter(|(_, x)| !is_zero(x)).collect();
            *m = kept;
        }
        Value::Array(a) => a.iter_mut().for_each(drop_zero),
        _ => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn the_hash_is_fnv32a_of_the_template_in_safe_characters() {
        // FNV-32a of "" is the offset basis; of "a", 0xe40c292c (Go's hash/fnv test vectors).
        assert_eq!(fnv32a([], FNV_OFFSET), 2_166_136_261);
        assert_eq!(fnv32a(*b"a", FNV_OFFSET), 0xe40c_292c);
        assert_eq!(safe_encode("2166136261"), "65bb57b6b5");
        let t = json!({"metadata": {"labels": {"app": "d"}}, "spec": {"containers": [{"name": "c", "image": "nginx"}]}});
        let h = compute_hash(&t, None);
        assert!(h.len() <= 10 && h.bytes().all(|b| SAFE.contains(&b)), "{h}");
        // Key order does not matter; content and the collision count do.
        let reordered = json!({"spec": {"containers": [{"image": "nginx", "name": "c"}]}, "metadata": {"labels": {"app": "d"}}});
        assert_eq!(compute_hash(&reordered, None), h);
        assert_ne!(compute_hash(&t, Some(1)), h);
        let other = json!({"metadata": {"labels": {"app": "d"}}, "spec": {"containers": [{"name": "c", "image": "nginx:2"}]}});
        assert_ne!(compute_hash(&other, None), h);
    }

    #[test]
    fn templates_compare_equal_without_the_hash_label_and_zero_values() {
        let d = json!({"metadata": {"labels": {"app": "d"}}, "spec": {"containers": [{"name": "c", "image": "nginx", "resources": {}}]}});
        let rs = json!({"metadata": {"labels": {"app": "d", "pod-template-hash": "abc"}, "creationTimestamp": null}, "spec": {"containers": [{"name": "c", "image": "nginx"}]}});
        assert!(equal_ignore_hash(&d, &rs));
        let changed = json!({"metadata": {"labels": {"app": "d"}}, "spec": {"containers": [{"name": "c", "image": "nginx:2"}]}});
        assert!(!equal_ignore_hash(&d, &changed));
    }
}
