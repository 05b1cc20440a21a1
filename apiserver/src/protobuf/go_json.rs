//! A protobuf-encoded Kubernetes message as the JSON its Go type encodes to: what a real server
//! holds after decoding a protobuf body, so the rest of our server sees what a JSON client would
//! have sent. Field names are the proto names (upstream makes them the JSON names); the types
//! with their own Go encoding (Time, MicroTime, Duration, IntOrString, Quantity, RawExtension,
//! FieldsV1, named slices) are converted as their `MarshalJSON` does.
//!
//! Unset versus zero: upstream's Go marshaller writes every non-pointer field, zero or not, and a
//! pointer field only when set. So a zero scalar is kept when its Go field is a pointer
//! (`replicas: 0`) or when the OpenAPI schema lists it as required (no `omitempty`: `port: 0`),
//! and dropped otherwise, as `omitempty` drops it. Fields this version does not know are skipped,
//! as upstream's generated `Unmarshal` skips them.

use super::descriptors::{Descriptors, Field, FieldType, Message, Scalar};
use super::wire::{Wire, WireError, records, varint};
use base64::Engine;
use serde_json::{Map, Value, json};
use std::collections::BTreeMap;

pub(super) const TIME: &str = "k8s.io.apimachinery.pkg.apis.meta.v1.Time";
pub(super) const MICRO_TIME: &str = "k8s.io.apimachinery.pkg.apis.meta.v1.MicroTime";
pub(super) const DURATION: &str = "k8s.io.apimachinery.pkg.apis.meta.v1.Duration";
pub(super) const FIELDS_V1: &str = "k8s.io.apimachinery.pkg.apis.meta.v1.FieldsV1";
pub(super) const INT_OR_STRING: &str = "k8s.io.apimachinery.pkg.util.intstr.IntOrString";
pub(super) const QUANTITY: &str = "k8s.io.apimachinery.pkg.api.resource.Quantity";
pub(super) const QUANTITY_VALUE: &str = "k8s.io.apimachinery.pkg.api.resource.QuantityValue";
pub(super) const RAW_EXTENSION: &str = "k8s.io.apimachinery.pkg.runtime.RawExtension";

/// Why a message could not be converted.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ConvertError {
    #[error(transparent)]
    Wire(#[from] WireError),
    /// A `RawExtension` or `FieldsV1` whose bytes are not JSON.
    #[error("{field}: {reason}")]
    Raw { field: &'static str, reason: String },
    /// A time outside what Go's JSON encoding of `metav1.Time` accepts.
    #[error("Time.MarshalJSON: year outside of range [0,9999]")]
    TimeOutOfRange,
}

type Result<T, E = ConvertError> = std::result::Result<T, E>;

/// Converts the message `name` (full name without the leading dot) encoded in `buf`. `None`
/// stands for Go's `null` (a zero Time, an unset RawExtension), which a field then omits.
pub fn message(d: &Descriptors, name: &str, buf: &[u8]) -> Result<Option<Value>> {
    let m = d.message(name).unwrap_or_else(|| panic!("descriptor set refers to unknown message {name}"));
    match name {
        TIME => return time(buf, false),
        MICRO_TIME => return time(buf, true),
        DURATION => return duration(buf),
        INT_OR_STRING => return int_or_string(buf),
        QUANTITY | QUANTITY_VALUE => return quantity(buf),
        RAW_EXTENSION => return raw_json(buf, "RawExtension"),
        FIELDS_V1 => return raw_json(buf, "FieldsV1"),
        _ => {}
    }
    if let Some(items) = m.named_slice() {
        let v = object(d, name, m, buf)?;
        return Ok(v.get(&items.name).cloned());
    }
    object(d, name, m, buf).map(|o| Some(Value::Object(o)))
}

fn object(d: &Descriptors, name: &str, m: &Message, buf: &[u8]) -> Result<Map<String, Value>> {
    let mut out = Map::new();
    // A singular message field may come in several records, which protobuf merges: keeping the
    // concatenation and decoding it once is that merge.
    let mut nested: BTreeMap<u64, Vec<u8>> = BTreeMap::new();
    for r in records(buf, &m.go_name) {
        let (number, w) = r?;
        let Some(f) = m.fields.get(&number) else { continue };
        match (&f.ty, f.repeated) {
            (FieldType::Message(t), true) => {
                let b = bytes(w, f)?;
                if d.message(t).is_some_and(|e| e.map_entry) {
                    let (k, v) = map_entry(d, t, b)?;
                    let map = out.entry(f.name.clone()).or_insert_with(|| json!({}));
                    map.as_object_mut().expect("map field is an object").insert(k, v);
                } else {
                    push(&mut out, f, message(d, t, b)?.unwrap_or(Value::Null));
                }
            }
            (FieldType::Message(_), false) => nested.entry(number).or_default().extend_from_slice(bytes(w, f)?),
            (FieldType::Scalar(s), true) => match w {
                Wire::Bytes(b) if !matches!(s, Scalar::String | Scalar::Bytes) => {
                    for v in packed(*s, b, f)? {
                        push(&mut out, f, v);
                    }
                }
                w => push(&mut out, f, scalar(*s, w, f)?),
            },
            (FieldType::Scalar(s), false) => {
                out.insert(f.name.clone(), scalar(*s, w, f)?);
            }
        }
    }
    for (number, b) in nested {
        let f = &m.fields[&number];
        let FieldType::Message(t) = &f.ty else { unreachable!("only message fields are nested") };
        match message(d, t, &b)? {
            Some(Value::Object(members)) if f.inline => out.extend(members),
            Some(v) => {
                out.insert(f.name.clone(), v);
            }
            None => {}
        }
    }
    let omitted: Vec<String> = m
        .fields
        .values()
        .filter(|f| matches!(f.ty, FieldType::Scalar(_)) && !f.repeated && !f.pointer)
        .filter(|f| out.get(&f.name).is_some_and(is_zero) && !required(name, &f.name))
        .map(|f| f.name.clone())
        .collect();
    for n in omitted {
        out.remove(&n);
    }
    Ok(out)
}

/// Whether upstream's OpenAPI schema lists the field as required (its Go field has no
/// `omitempty`, so Go's JSON shows it even when zero).
/// OpenAPI names a type `io.k8s.api.core.v1.ServicePort` where protobuf says `k8s.io.api...`.
fn required(message: &str, field: &str) -> bool {
    // Go fields without `omitempty` whose generated schema here (from k8s-openapi) does not
    // list them as required, as upstream's OpenAPI does.
    const ALWAYS_SHOWN: &[(&str, &str)] = &[("k8s.io.api.scheduling.v1.PriorityClass", "value")];
    if ALWAYS_SHOWN.contains(&(message, field)) {
        return true;
    }
    let component = message.strip_prefix("k8s.io.").map(|rest| format!("io.k8s.{rest}")).unwrap_or_default();
    crate::builtin_schema::component(&component)
        .and_then(|s| s.get("required"))
        .and_then(Value::as_array)
        .is_some_and(|r| r.iter().any(|x| x == field))
}

fn is_zero(v: &Value) -> bool {
    match v {
        Value::String(s) => s.is_empty(),
        Value::Bool(b) => !b,
        Value::Number(n) => n.as_f64() == Some(0.0),
        _ => false,
    }
}

fn push(out: &mut Map<String, Value>, f: &Field, v: Value) {
    let list = out.entry(f.name.clone()).or_insert_with(|| json!([]));
    list.as_array_mut().expect("repeated field is an array").push(v);
}

fn bytes<'a>(w: Wire<'a>, f: &Field) -> Result<&'a [u8]> {
    match w {
        Wire::Bytes(b) => Ok(b),
        other => Err(WireError::WrongWireType { wire: other.number(), field: f.go_name.clone() }.into()),
    }
}

fn number(n: impl Into<serde_json::Number>) -> Value {
    Value::Number(n.into())
}

fn float(x: f64) -> Value {
    serde_json::Number::from_f64(x).map(Value::Number).unwrap_or(Value::Null)
}

fn zigzag(v: u64) -> i64 {
    ((v >> 1) as i64) ^ -((v & 1) as i64)
}

fn scalar(s: Scalar, w: Wire<'_>, f: &Field) -> Result<Value> {
    use Scalar::*;
    Ok(match (s, w) {
        (Int32, Wire::Varint(v)) => number(v as i32),
        (Int64, Wire::Varint(v)) => number(v as i64),
        (Uint32, Wire::Varint(v)) => number(v as u32),
        (Uint64, Wire::Varint(v)) => number(v),
        (Sint32, Wire::Varint(v)) => number(zigzag(v) as i32),
        (Sint64, Wire::Varint(v)) => number(zigzag(v)),
        (Bool, Wire::Varint(v)) => Value::Bool(v != 0),
        (Fixed32, Wire::Fixed32(v)) => number(v),
        (Sfixed32, Wire::Fixed32(v)) => number(v as i32),
        (Float, Wire::Fixed32(v)) => float(f64::from(f32::from_bits(v))),
        (Fixed64, Wire::Fixed64(v)) => number(v),
        (Sfixed64, Wire::Fixed64(v)) => number(v as i64),
        (Double, Wire::Fixed64(v)) => float(f64::from_bits(v)),
        // Go keeps the bytes as they are; its JSON encoder then writes invalid UTF-8 as U+FFFD.
        (String, Wire::Bytes(b)) => Value::String(std::string::String::from_utf8_lossy(b).into_owned()),
        (Bytes, Wire::Bytes(b)) => Value::String(base64::engine::general_purpose::STANDARD.encode(b)),
        (_, other) => return Err(WireError::WrongWireType { wire: other.number(), field: f.go_name.clone() }.into()),
    })
}

/// A packed run of repeated scalars.
fn packed(s: Scalar, buf: &[u8], f: &Field) -> Result<Vec<Value>> {
    let mut out = vec![];
    let mut pos = 0;
    while pos < buf.len() {
        let w = match s {
            Scalar::Fixed32 | Scalar::Sfixed32 | Scalar::Float => {
                let b = buf.get(pos..pos + 4).ok_or(WireError::UnexpectedEof)?;
                pos += 4;
                Wire::Fixed32(u32::from_le_bytes(b.try_into().expect("4 bytes")))
            }
            Scalar::Fixed64 | Scalar::Sfixed64 | Scalar::Double => {
                let b = buf.get(pos..pos + 8).ok_or(WireError::UnexpectedEof)?;
                pos += 8;
                Wire::Fixed64(u64::from_le_bytes(b.try_into().expect("8 bytes")))
            }
            _ => Wire::Varint(varint(buf, &mut pos)?),
        };
        out.push(scalar(s, w, f)?);
    }
    Ok(out)
}

/// One `map<K, V>` entry as a JSON member (JSON keys are strings; a missing value is V's zero).
fn map_entry(d: &Descriptors, entry: &str, buf: &[u8]) -> Result<(String, Value)> {
    let e = d.message(entry).expect("map entry type is known");
    let (mut key, mut value) = (None, None);
    for r in records(buf, &e.go_name) {
        let (number, w) = r?;
        let Some(f) = e.fields.get(&number) else { continue };
        let v = match &f.ty {
            FieldType::Scalar(s) => Some(scalar(*s, w, f)?),
            FieldType::Message(t) => Some(message(d, t, bytes(w, f)?)?.unwrap_or(Value::Null)),
        };
        if number == 1 { key = v } else { value = v }
    }
    let key = match key {
        Some(Value::String(s)) => s,
        Some(other) => other.to_string(),
        None => String::new(),
    };
    let value = match value {
        Some(v) => v,
        None => match &e.fields.get(&2).expect("map entry has a value").ty {
            FieldType::Scalar(Scalar::String | Scalar::Bytes) => json!(""),
            FieldType::Scalar(Scalar::Bool) => json!(false),
            FieldType::Scalar(_) => json!(0),
            FieldType::Message(t) => message(d, t, &[])?.unwrap_or(Value::Null),
        },
    };
    Ok((key, value))
}

/// The varint and bytes fields of a small fixed message (Time, IntOrString, ...).
fn small_fields<'a>(buf: &'a [u8], go_name: &'a str) -> Result<BTreeMap<u64, Wire<'a>>> {
    let mut out = BTreeMap::new();
    for r in records(buf, go_name) {
        let (n, w) = r?;
        out.insert(n, w);
    }
    Ok(out)
}

fn varint_field(f: &BTreeMap<u64, Wire<'_>>, n: u64) -> u64 {
    match f.get(&n) {
        Some(Wire::Varint(v)) => *v,
        _ => 0,
    }
}

fn bytes_field<'a>(f: &BTreeMap<u64, Wire<'a>>, n: u64) -> &'a [u8] {
    match f.get(&n) {
        Some(Wire::Bytes(b)) => b,
        _ => &[],
    }
}

/// `metav1.Time` (seconds; upstream drops the nanoseconds on decode) and `metav1.MicroTime`
/// (seconds and nanoseconds, shown to the microsecond). Empty is Go's zero time, `null`.
fn time(buf: &[u8], micro: bool) -> Result<Option<Value>> {
    if buf.is_empty() {
        return Ok(None);
    }
    let f = small_fields(buf, "Timestamp")?;
    let seconds = varint_field(&f, 1) as i64;
    let nanos = if micro { varint_field(&f, 2) as i32 } else { 0 };
    let t = chrono::DateTime::from_timestamp(seconds, nanos.clamp(0, 999_999_999) as u32).ok_or(ConvertError::TimeOutOfRange)?;
    if !(0..=9999).contains(&chrono::Datelike::year(&t)) {
        return Err(ConvertError::TimeOutOfRange);
    }
    Ok(Some(json!(if micro { crate::clock::micro_timestamp(t) } else { crate::clock::timestamp(t) })))
}

/// `metav1.Duration`: Go's `time.Duration.String()` of its nanoseconds.
fn duration(buf: &[u8]) -> Result<Option<Value>> {
    let f = small_fields(buf, "Duration")?;
    Ok(Some(json!(go_duration(varint_field(&f, 1) as i64))))
}

/// Go's `time.Duration.String()`: `1h2m3.5s`, `1.5ms`, `0s`.
pub fn go_duration(nanos: i64) -> String {
    fn fraction(v: u64, precision: u32) -> (String, u64) {
        let scale = 10u64.pow(precision);
        let digits = format!("{:0width$}", v % scale, width = precision as usize);
        let digits = digits.trim_end_matches('0');
        (if digits.is_empty() { String::new() } else { format!(".{digits}") }, v / scale)
    }
    let u = nanos.unsigned_abs();
    let text = if u < 1_000_000_000 {
        let (precision, unit) = match u {
            0 => return "0s".into(),
            u if u < 1_000 => (0, "ns"),
            u if u < 1_000_000 => (3, "µs"),
            _ => (6, "ms"),
        };
        let (frac, int) = fraction(u, precision);
        format!("{int}{frac}{unit}")
    } else {
        let (frac, secs) = fraction(u, 9);
        let (hours, minutes, seconds) = (secs / 3600, secs / 60 % 60, secs % 60);
        match (hours, secs / 60) {
            (0, 0) => format!("{seconds}{frac}s"),
            (0, _) => format!("{minutes}m{seconds}{frac}s"),
            _ => format!("{hours}h{minutes}m{seconds}{frac}s"),
        }
    };
    if nanos < 0 { format!("-{text}") } else { text }
}

/// `intstr.IntOrString`: `type` 1 is a string, anything else the int.
fn int_or_string(buf: &[u8]) -> Result<Option<Value>> {
    let f = small_fields(buf, "IntOrString")?;
    Ok(Some(if varint_field(&f, 1) == 1 { json!(String::from_utf8_lossy(bytes_field(&f, 3))) } else { json!(varint_field(&f, 2) as i32) }))
}

/// `resource.Quantity`: its string form (Go's zero Quantity is `"0"`).
fn quantity(buf: &[u8]) -> Result<Option<Value>> {
    let f = small_fields(buf, "Quantity")?;
    let s = String::from_utf8_lossy(bytes_field(&f, 1));
    Ok(Some(json!(if s.is_empty() { "0".into() } else { s.into_owned() })))
}

/// `runtime.RawExtension` / `metav1.FieldsV1`: bytes that hold JSON. Unset is `null`.
fn raw_json(buf: &[u8], field: &'static str) -> Result<Option<Value>> {
    let f = small_fields(buf, field)?;
    let raw = bytes_field(&f, 1);
    if raw.is_empty() {
        return Ok(None);
    }
    serde_json::from_slice(raw).map(Some).map_err(|e| ConvertError::Raw { field, reason: e.to_string() })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations_print_as_go_prints_them() {
        assert_eq!(go_duration(0), "0s");
        assert_eq!(go_duration(1), "1ns");
        assert_eq!(go_duration(1_500), "1.5µs");
        assert_eq!(go_duration(1_500_000), "1.5ms");
        assert_eq!(go_duration(90 * 1_000_000_000), "1m30s");
        assert_eq!(go_duration(3_600 * 1_000_000_000), "1h0m0s");
        assert_eq!(go_duration(3_723_500_000_000), "1h2m3.5s");
        assert_eq!(go_duration(-2_000_000_000), "-2s");
    }
}
