//! The `pod-template-hash`: upstream's `controller.ComputeHash` is FNV-32a over a dump of the
//! template, then (when the Deployment has one) its collision count as eight bytes whose first
//! four are the count in little-endian order, printed in decimal and mapped through
//! `rand.SafeEncodeString`.
//!
//! Upstream dumps the typed Go struct with `spew`, which only Go can reproduce; here the dump is
//! the template's canonical JSON (object keys sorted, no whitespace). The label therefore has
//! upstream's form and stability (same template, same label; a bumped collision count, a fresh
//! one) but not a real cluster's value for the same template. [`hash_with_collision_count`] is
//! upstream's function over whatever bytes it is given, and is tested against upstream's output.

use serde_json::Value;

/// `k8s.io/apimachinery/pkg/util/rand`'s alphabet (`SafeEncodeString`, and `String` for
/// generated names): no vowels, so no accidental words, and no 0, 1 or 3, which look like
/// letters.
pub const SAFE_ALPHABET: &[u8; 27] = b"bcdfghjklmnpqrstvwxz2456789";

const FNV32_OFFSET: u32 = 0x811c_9dc5;
const FNV32_PRIME: u32 = 0x0100_0193;

/// FNV-1a, 32 bits (Go's `hash/fnv.New32a`), continuing from `h`.
fn fnv32a(h: u32, bytes: &[u8]) -> u32 {
    bytes.iter().fold(h, |h, b| (h ^ u32::from(*b)).wrapping_mul(FNV32_PRIME))
}

/// `rand.SafeEncodeString`: each byte of `s` replaced by [`SAFE_ALPHABET`]`[byte % 27]`.
pub fn safe_encode(s: &str) -> String {
    s.bytes().map(|b| SAFE_ALPHABET[usize::from(b) % SAFE_ALPHABET.len()] as char).collect()
}

/// `controller.ComputeHash` over `dump` (the bytes upstream's `DeepHashObject` writes).
pub fn hash_with_collision_count(dump: &[u8], collision_count: Option<i32>) -> String {
    let mut h = fnv32a(FNV32_OFFSET, dump);
    if let Some(count) = collision_count {
        // `binary.LittleEndian.PutUint32` into an 8-byte slice: the upper four stay zero.
        // Validation refuses negative counts; upstream converts with `uint32(...)` all the same.
        let mut bytes = [0u8; 8];
        bytes[..4].copy_from_slice(&(count as u32).to_le_bytes());
        h = fnv32a(h, &bytes);
    }
    safe_encode(&h.to_string())
}

/// FNV-1, 32 bits (Go's `hash/fnv.New32`: multiply, then xor), continuing from `h`.
fn fnv32(h: u32, bytes: &[u8]) -> u32 {
    bytes.iter().fold(h, |h, b| h.wrapping_mul(FNV32_PRIME) ^ u32::from(*b))
}

/// `history.HashControllerRevision`: FNV-1 (not 1a) over a ControllerRevision's raw `data`,
/// then the collision count written as decimal text, printed in decimal and mapped through
/// `rand.SafeEncodeString`. Its value names a StatefulSet's revisions (`<set>-<hash>`) and is
/// their `controller-revision-hash` label.
pub fn controller_revision_hash(raw: &[u8], collision_count: Option<i32>) -> String {
    let mut h = fnv32(FNV32_OFFSET, raw);
    if let Some(count) = collision_count {
        h = fnv32(h, count.to_string().as_bytes());
    }
    safe_encode(&h.to_string())
}

/// `value` as Go's `json.Marshal` writes a `map[string]interface{}`: keys sorted, no
/// whitespace, and `<`, `>`, `&` escaped as `\u003c`, `\u003e`, `\u0026` (they only occur
/// inside strings, so replacing them in the text is exact).
pub fn go_json(value: &Value) -> String {
    canonical_json(value).replace('<', "\\u003c").replace('>', "\\u003e").replace('&', "\\u0026")
}

/// The `pod-template-hash` of `template` (a Pod template as JSON) and the Deployment's
/// `status.collisionCount`.
pub fn pod_template_hash(template: &Value, collision_count: Option<i32>) -> String {
    hash_with_collision_count(canonical_json(template).as_bytes(), collision_count)
}

/// `value` as JSON text with object keys sorted and no whitespace: the same text whatever order
/// the map keeps (serde_json's `preserve_order` may be on for some crate in a build).
pub fn canonical_json(value: &Value) -> String {
    let mut out = String::new();
    write_canonical(value, &mut out);
    out
}

fn write_canonical(value: &Value, out: &mut String) {
    match value {
        Value::Object(map) => {
            let mut keys: Vec<&String> = map.keys().collect();
            keys.sort();
            out.push('{');
            for (i, k) in keys.into_iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                out.push_str(&Value::String(k.clone()).to_string());
                out.push(':');
                write_canonical(&map[k], out);
            }
            out.push('}');
        }
        Value::Array(items) => {
            out.push('[');
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                write_canonical(item, out);
            }
            out.push(']');
        }
        scalar => out.push_str(&scalar.to_string()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn fnv32a_matches_the_published_test_vectors() {
        // The FNV reference vectors (Fowler, Noll, Vo: "FNV-1a 32 bit" of "", "a", "foobar").
        assert_eq!(fnv32a(FNV32_OFFSET, b""), 0x811c_9dc5);
        assert_eq!(fnv32a(FNV32_OFFSET, b"a"), 0xe40c_292c);
        assert_eq!(fnv32a(FNV32_OFFSET, b"foobar"), 0xbf9c_f968);
    }

    #[test]
    fn fnv32_matches_the_published_test_vectors() {
        // The FNV reference vectors ("FNV-1 32 bit" of "a" and "foobar").
        assert_eq!(fnv32(FNV32_OFFSET, b"a"), 0x050c_5d7e);
        assert_eq!(fnv32(FNV32_OFFSET, b"foobar"), 0x31f0_b262);
    }

    #[test]
    fn go_json_escapes_html_characters_and_sorts_keys() {
        let v = json!({"b": "a<b>&c", "a": 1});
        assert_eq!(go_json(&v), r#"{"a":1,"b":"a\u003cb\u003e\u0026c"}"#);
    }

    #[test]
    fn safe_encoding_maps_each_byte_modulo_the_alphabet() {
        // '0' is byte 48, 48 % 27 = 21 -> '4'; '9' is 57 % 27 = 3 -> 'f'.
        assert_eq!(safe_encode("0123456789"), "456789bcdf");
    }

    #[test]
    fn key_order_does_not_change_the_hash() {
        let a = json!({"metadata": {"labels": {"app": "nginx"}}, "spec": {"containers": [{"name": "nginx", "image": "nginx:1.7.9"}]}});
        let b = json!({"spec": {"containers": [{"image": "nginx:1.7.9", "name": "nginx"}]}, "metadata": {"labels": {"app": "nginx"}}});
        assert_eq!(pod_template_hash(&a, None), pod_template_hash(&b, None));
        assert_eq!(canonical_json(&b), r#"{"metadata":{"labels":{"app":"nginx"}},"spec":{"containers":[{"image":"nginx:1.7.9","name":"nginx"}]}}"#);
    }

    #[test]
    fn an_image_change_or_a_collision_count_changes_the_hash() {
        let a = json!({"spec": {"containers": [{"name": "nginx", "image": "nginx:1.7.9"}]}});
        let b = json!({"spec": {"containers": [{"name": "nginx", "image": "nginx:1.9.1"}]}});
        assert_ne!(pod_template_hash(&a, None), pod_template_hash(&b, None));
        assert_ne!(pod_template_hash(&a, None), pod_template_hash(&a, Some(1)));
        assert_ne!(pod_template_hash(&a, Some(0)), pod_template_hash(&a, None));
    }
}

#[cfg(test)]
mod upstream {
    use super::hash_with_collision_count;

    /// What upstream's `DeepHashObject` writes for the template
    /// `{labels: {app: nginx}, containers: [{name: nginx, image: nginx:1.14.2}]}`, and
    /// `controller.ComputeHash` of it without and with collision count 1: produced by
    /// `tests/fixtures/compute_hash.go.txt` against k8s.io/kubernetes v1.36.3 (its `go.mod` is
    /// `tests/real-cluster/go/kubernetes`'s).
    const DUMP: &[u8] = include_bytes!("../tests/fixtures/nginx-template.spew");

    #[test]
    fn compute_hash_matches_upstream_over_upstreams_dump() {
        assert_eq!(hash_with_collision_count(DUMP, None), "5d76467944");
        assert_eq!(hash_with_collision_count(DUMP, Some(1)), "7f4c77ddb5");
    }
}
