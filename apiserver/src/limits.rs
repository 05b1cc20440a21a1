//! Size limits a real cluster enforces, with upstream's numbers, codes and wording, so what
//! fits here fits there:
//!
//! 1. Request bodies: at most 3 MiB (`MaxRequestBodyBytes` in k8s.io/apiserver
//!    `pkg/server/config.go`: 2 × etcd's 1.5 MiB, for JSON's growth over protobuf). Read
//!    lazily and refused past the limit without reading the rest (`limitedReadBody` in
//!    `pkg/endpoints/handlers/rest.go`): 413 `Request entity too large: limit is 3145728`.
//! 2. ConfigMap `data` + `binaryData`, Secret `data` (+ `stringData`, which upstream merges
//!    into `data` before validating): at most 1 MiB (`core.MaxSecretSize`), counted in decoded
//!    bytes (`ValidateConfigMap`, `ValidateSecret` in k8s.io/kubernetes
//!    `pkg/apis/core/validation`): 422 `ConfigMap "x" is invalid: []: Too long: must have at
//!    most 1048576 bytes` (`data: ...` for a Secret).
//! 3. The stored object: etcd refuses a request over 1.5 MiB (`--max-request-bytes`,
//!    `embed.DefaultMaxRequestBytes`); kube-apiserver passes the gRPC error on as a 500 with no
//!    reason: `etcdserver: request is too large`. Dry runs never reach etcd and are not refused.
//!    The size is estimated (see [`stored_size`]).
//!
//! Labels and annotations (63-character names and values, 256 KiB of annotations) are checked
//! with the rest of object metadata in [`crate::validation::metadata`].

use crate::status::{ApiError, Cause};
use base64::Engine;
use serde_json::Value;

/// Largest request body kube-apiserver reads (`MaxRequestBodyBytes`, 3 MiB).
pub const MAX_REQUEST_BODY_BYTES: usize = 3 * 1024 * 1024;
/// Largest ConfigMap or Secret payload (`core.MaxSecretSize`, 1 MiB).
pub const MAX_DATA_BYTES: usize = 1024 * 1024;
/// Largest request etcd accepts by default (`embed.DefaultMaxRequestBytes`, 1.5 MiB).
pub const ETCD_MAX_REQUEST_BYTES: usize = 1536 * 1024;

/// 413, as `errors.NewRequestEntityTooLargeError(fmt.Sprintf("limit is %d", limit))`.
pub fn request_entity_too_large() -> ApiError {
    let mut e = ApiError::internal("");
    e.code = 413;
    e.reason = "RequestEntityTooLarge".into();
    e.message = format!("Request entity too large: limit is {MAX_REQUEST_BODY_BYTES}");
    e
}

/// The length `text` decodes to as base64 (its own length when it is not base64: the schema
/// check refuses it elsewhere, and the raw length is the safer bound).
fn decoded_len(text: &str) -> usize {
    base64::engine::general_purpose::STANDARD.decode(text).map_or(text.len(), |b| b.len())
}

fn sum_strings(map: Option<&Value>, len: impl Fn(&str) -> usize) -> usize {
    map.and_then(Value::as_object).map_or(0, |m| m.values().filter_map(Value::as_str).map(&len).sum())
}

/// The payload upstream counts against [`MAX_DATA_BYTES`], or `None` for other kinds.
fn data_size(group: &str, kind: &str, obj: &Value) -> Option<usize> {
    match (group, kind) {
        ("", "ConfigMap") => Some(sum_strings(obj.get("data"), str::len) + sum_strings(obj.get("binaryData"), decoded_len)),
        ("", "Secret") => Some(sum_strings(obj.get("data"), decoded_len) + sum_strings(obj.get("stringData"), str::len)),
        _ => None,
    }
}

/// The 1 MiB payload rule of ConfigMaps and Secrets, as a validation cause (field `[]` is
/// upstream's rendering of `field.NewPath("")`).
pub fn data_causes(group: &str, kind: &str, obj: &Value) -> Vec<Cause> {
    match data_size(group, kind, obj) {
        Some(size) if size > MAX_DATA_BYTES => {
            let field = if kind == "ConfigMap" { "[]" } else { "data" };
            vec![Cause::new("FieldValueTooLong", format!("Too long: must have at most {MAX_DATA_BYTES} bytes"), field)]
        }
        _ => vec![],
    }
}

/// The length of `obj` as compact JSON, counted as it is written (not buffered).
fn json_len(obj: &Value) -> usize {
    struct Count(usize);
    impl std::io::Write for Count {
        fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
            self.0 += buf.len();
            Ok(buf.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }
    let mut count = Count(0);
    serde_json::to_writer(&mut count, obj).map_or(0, |()| count.0)
}

/// Estimated bytes of etcd's put request for `obj` under `key`: the key plus the object as
/// JSON (how custom resources are stored), with base64 payloads counted decoded (built-ins are
/// stored as protobuf, which keeps bytes raw). For other built-ins JSON is somewhat larger than
/// protobuf, so near the limit this refuses a little earlier than upstream, never later.
pub fn stored_size(key: &str, obj: &Value) -> usize {
    let json = json_len(obj);
    let base64_overhead = |field: &str| sum_strings(obj.get(field), |s| s.len().saturating_sub(decoded_len(s)));
    let kind = obj.get("kind").and_then(Value::as_str).unwrap_or_default();
    let overhead = match kind {
        "ConfigMap" => base64_overhead("binaryData"),
        "Secret" => base64_overhead("data"),
        _ => 0,
    };
    key.len() + json - overhead
}

/// 500 `etcdserver: request is too large` when etcd would refuse to store `obj`.
pub fn check_storable(key: &str, obj: &Value) -> Result<(), ApiError> {
    if stored_size(key, obj) <= ETCD_MAX_REQUEST_BYTES {
        return Ok(());
    }
    let mut e = ApiError::internal("");
    e.reason = String::new(); // StatusReasonUnknown: upstream had no Status for a gRPC error
    e.message = "etcdserver: request is too large".into();
    Err(e)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn configmap_data_counts_text_bytes_and_decoded_binary_data() {
        let text = "x".repeat(MAX_DATA_BYTES / 2);
        let binary = base64::engine::general_purpose::STANDARD.encode(vec![0u8; MAX_DATA_BYTES / 2]);
        let at_limit = json!({"data": {"a": text}, "binaryData": {"b": binary}});
        assert!(data_causes("", "ConfigMap", &at_limit).is_empty(), "exactly 1 MiB is allowed");
        let over = json!({"data": {"a": text, "c": "!"}, "binaryData": {"b": binary}});
        let causes = data_causes("", "ConfigMap", &over);
        assert_eq!((causes[0].field.as_str(), causes[0].message.as_str()), ("[]", "Too long: must have at most 1048576 bytes"));
    }

    #[test]
    fn secret_data_and_string_data_count_together() {
        let data = base64::engine::general_purpose::STANDARD.encode(vec![1u8; MAX_DATA_BYTES]);
        let secret = json!({"data": {"a": data}, "stringData": {"b": "x"}});
        assert_eq!(data_causes("", "Secret", &secret)[0].field, "data");
        assert!(data_causes("", "Pod", &secret).is_empty());
    }

    #[test]
    fn objects_over_etcds_limit_are_not_storable() {
        let small = json!({"kind": "CronTab", "spec": {"x": "y"}});
        assert!(check_storable("/registry/x", &small).is_ok());
        let big = json!({"kind": "CronTab", "spec": {"x": "y".repeat(ETCD_MAX_REQUEST_BYTES)}});
        let e = check_storable("/registry/x", &big).unwrap_err();
        assert_eq!((e.code, e.message.as_str(), e.reason.as_str()), (500, "etcdserver: request is too large", ""));
        // A full 1 MiB of binaryData is 1.33 MiB of base64 but 1 MiB in etcd.
        let cm = json!({"kind": "ConfigMap", "binaryData": {"b": base64::engine::general_purpose::STANDARD.encode(vec![0u8; MAX_DATA_BYTES])}});
        assert!(check_storable("/registry/configmaps/default/x", &cm).is_ok());
    }
}
