//! The `pod-template-hash`: FNV-32a of the Pod template plus the collision
//! count, rendered with `rand.SafeEncodeString`, as upstream's
//! `controller.ComputeHash`.
//!
//! Upstream feeds the hasher a `spew` dump of the Go struct, which cannot be
//! reproduced outside Go; we feed it canonical JSON (object keys sorted, no
//! whitespace) of the template as stored. Both are deterministic functions of
//! the template, which is all the label needs to be.

use operator_plugin_sdk::serde_json::Value;

const FNV32_OFFSET: u32 = 0x811c_9dc5;
const FNV32_PRIME: u32 = 0x0100_0193;

/// The alphabet of `k8s.io/apimachinery/pkg/util/rand.SafeEncodeString`: no
/// vowels (no accidental words) and no 0, 1, 3 (no look-alikes).
const ALPHANUMS: &[u8] = b"bcdfghjklmnpqrstvwxz2456789";

/// FNV-1a, 32 bit (Go's `hash/fnv.New32a`).
#[derive(Clone, Copy, Debug)]
struct Fnv32a(u32);

impl Fnv32a {
    fn new() -> Self {
        Fnv32a(FNV32_OFFSET)
    }

    fn write(&mut self, bytes: &[u8]) {
        for b in bytes {
            self.0 ^= u32::from(*b);
            self.0 = self.0.wrapping_mul(FNV32_PRIME);
        }
    }
}

/// `rand.SafeEncodeString`: every byte maps to one letter of [`ALPHANUMS`].
pub fn safe_encode(s: &str) -> String {
    s.bytes().map(|b| ALPHANUMS[usize::from(b) % ALPHANUMS.len()] as char).collect()
}

/// The `pod-template-hash` of `template`. A collision count, when present,
/// is mixed in as four little-endian bytes, as upstream does, so that bumping
/// `status.collisionCount` yields a fresh name.
pub fn pod_template_hash(template: &Value, collision_count: Option<i32>) -> String {
    let mut hasher = Fnv32a::new();
    let mut canonical = String::new();
    write_canonical(template, &mut canonical);
    hasher.write(canonical.as_bytes());
    if let Some(count) = collision_count {
        // Go writes uint32(*collisionCount); negative counts never pass validation.
        hasher.write(&(count as u32).to_le_bytes());
    }
    safe_encode(&hasher.0.to_string())
}

/// `value` as canonical JSON (see [`write_canonical`]).
pub fn canonical(value: &Value) -> String {
    let mut out = String::new();
    write_canonical(value, &mut out);
    out
}

/// Canonical JSON: object keys sorted, no whitespace. Written by hand so the
/// result does not depend on whether some crate in the build turned on
/// serde_json's `preserve_order`.
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
    use operator_plugin_sdk::json;

    #[test]
    fn fnv32a_matches_the_published_test_vectors() {
        let mut h = Fnv32a::new();
        h.write(b"");
        assert_eq!(h.0, 0x811c_9dc5);
        let mut h = Fnv32a::new();
        h.write(b"a");
        assert_eq!(h.0, 0xe40c_292c);
        let mut h = Fnv32a::new();
        h.write(b"foobar");
        assert_eq!(h.0, 0xbf9c_f968);
    }

    #[test]
    fn safe_encoding_maps_digits_like_apimachinery() {
        // '0' is byte 48, 48 % 27 = 21 -> '4'; '9' is 57 % 27 = 3 -> 'f'.
        assert_eq!(safe_encode("0123456789"), "456789bcdf");
    }

    #[test]
    fn key_order_does_not_change_the_hash() {
        let a = json!({"metadata": {"labels": {"app": "nginx"}}, "spec": {"containers": [{"name": "nginx", "image": "nginx:1.7.9"}]}});
        let b = json!({"spec": {"containers": [{"image": "nginx:1.7.9", "name": "nginx"}]}, "metadata": {"labels": {"app": "nginx"}}});
        assert_eq!(pod_template_hash(&a, None), pod_template_hash(&b, None));
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
