//! Decoding of Kubernetes protobuf request bodies (`application/vnd.kubernetes.protobuf`) for the
//! few simple kinds kubectl's typed clients send (`kubectl create configmap|secret|namespace|
//! serviceaccount`). The envelope is `k8s\0` + `runtime.Unknown{typeMeta, raw}`; `raw` is the
//! object's message, decoded here with a small table of field numbers from upstream's
//! `generated.proto`. Other kinds are refused with 415 by the caller.

use base64::Engine;
use serde_json::{Map, Value, json};

enum Ty {
    Str,
    Bool,
    I64,
    MapStrStr,
    MapStrBytes,
    RepStr,
    Msg(&'static [Field]),
    RepMsg(&'static [Field]),
}

type Field = (u64, &'static str, Ty);

const OWNER_REF: &[Field] = &[
    (1, "kind", Ty::Str),
    (3, "name", Ty::Str),
    (4, "uid", Ty::Str),
    (5, "apiVersion", Ty::Str),
    (6, "controller", Ty::Bool),
    (7, "blockOwnerDeletion", Ty::Bool),
];

const OBJECT_META: &[Field] = &[
    (1, "name", Ty::Str),
    (2, "generateName", Ty::Str),
    (3, "namespace", Ty::Str),
    (5, "uid", Ty::Str),
    (6, "resourceVersion", Ty::Str),
    (7, "generation", Ty::I64),
    (11, "labels", Ty::MapStrStr),
    (12, "annotations", Ty::MapStrStr),
    (13, "ownerReferences", Ty::RepMsg(OWNER_REF)),
    (14, "finalizers", Ty::RepStr),
];

const CONFIG_MAP: &[Field] = &[
    (1, "metadata", Ty::Msg(OBJECT_META)),
    (2, "data", Ty::MapStrStr),
    (3, "binaryData", Ty::MapStrBytes),
    (4, "immutable", Ty::Bool),
];

const SECRET: &[Field] = &[
    (1, "metadata", Ty::Msg(OBJECT_META)),
    (2, "data", Ty::MapStrBytes),
    (3, "type", Ty::Str),
    (4, "stringData", Ty::MapStrStr),
    (5, "immutable", Ty::Bool),
];

const NAMESPACE_SPEC: &[Field] = &[(1, "finalizers", Ty::RepStr)];

const NAMESPACE: &[Field] = &[(1, "metadata", Ty::Msg(OBJECT_META)), (2, "spec", Ty::Msg(NAMESPACE_SPEC))];

const LOCAL_REF: &[Field] = &[(1, "name", Ty::Str)];

const SERVICE_ACCOUNT: &[Field] = &[
    (1, "metadata", Ty::Msg(OBJECT_META)),
    (3, "imagePullSecrets", Ty::RepMsg(LOCAL_REF)),
    (4, "automountServiceAccountToken", Ty::Bool),
];

/// Why a body could not be decoded.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Error {
    /// Not a `k8s\0` envelope or malformed wire data.
    #[error("malformed protobuf body")]
    Malformed,
    /// A kind this decoder has no table for.
    #[error("protobuf bodies are not supported for {0}")]
    Unsupported(String),
}

enum Wire<'a> {
    Varint(u64),
    Bytes(&'a [u8]),
}

fn varint(buf: &[u8], pos: &mut usize) -> Result<u64, Error> {
    let mut out = 0u64;
    for shift in (0..64).step_by(7) {
        let b = *buf.get(*pos).ok_or(Error::Malformed)?;
        *pos += 1;
        out |= u64::from(b & 0x7f) << shift;
        if b & 0x80 == 0 {
            return Ok(out);
        }
    }
    Err(Error::Malformed)
}

fn fields(buf: &[u8]) -> Result<Vec<(u64, Wire<'_>)>, Error> {
    let mut pos = 0;
    let mut out = vec![];
    while pos < buf.len() {
        let key = varint(buf, &mut pos)?;
        let (num, wt) = (key >> 3, key & 7);
        let v = match wt {
            0 => Wire::Varint(varint(buf, &mut pos)?),
            2 => {
                let len = varint(buf, &mut pos)? as usize;
                let end = pos.checked_add(len).filter(|e| *e <= buf.len()).ok_or(Error::Malformed)?;
                let b = &buf[pos..end];
                pos = end;
                Wire::Bytes(b)
            }
            1 => {
                pos += 8;
                continue;
            }
            5 => {
                pos += 4;
                continue;
            }
            _ => return Err(Error::Malformed),
        };
        out.push((num, v));
    }
    Ok(out)
}

fn string(b: &[u8]) -> Result<String, Error> {
    String::from_utf8(b.to_vec()).map_err(|_| Error::Malformed)
}

fn map_entry(b: &[u8], bytes_value: bool) -> Result<(String, Value), Error> {
    let mut k = String::new();
    let mut v = json!("");
    for (n, w) in fields(b)? {
        if let Wire::Bytes(x) = w {
            match n {
                1 => k = string(x)?,
                2 if bytes_value => v = json!(base64::engine::general_purpose::STANDARD.encode(x)),
                2 => v = json!(string(x)?),
                _ => {}
            }
        }
    }
    Ok((k, v))
}

fn message(buf: &[u8], schema: &[Field]) -> Result<Value, Error> {
    let mut out = Map::new();
    for (num, w) in fields(buf)? {
        let Some((_, name, ty)) = schema.iter().find(|(n, _, _)| *n == num) else { continue };
        let name = name.to_string();
        match (ty, w) {
            (Ty::Str, Wire::Bytes(b)) => {
                let s = string(b)?;
                if !s.is_empty() {
                    out.insert(name, json!(s));
                }
            }
            (Ty::Bool, Wire::Varint(v)) => {
                out.insert(name, json!(v != 0));
            }
            (Ty::I64, Wire::Varint(v)) => {
                if v != 0 {
                    out.insert(name, json!(v as i64));
                }
            }
            (Ty::MapStrStr, Wire::Bytes(b)) | (Ty::MapStrBytes, Wire::Bytes(b)) => {
                let (k, v) = map_entry(b, matches!(ty, Ty::MapStrBytes))?;
                out.entry(name).or_insert_with(|| json!({}))[k] = v;
            }
            (Ty::RepStr, Wire::Bytes(b)) => {
                let s = string(b)?;
                out.entry(name).or_insert_with(|| json!([])).as_array_mut().expect("array").push(json!(s));
            }
            (Ty::Msg(s), Wire::Bytes(b)) => {
                out.insert(name, message(b, s)?);
            }
            (Ty::RepMsg(s), Wire::Bytes(b)) => {
                let m = message(b, s)?;
                out.entry(name).or_insert_with(|| json!([])).as_array_mut().expect("array").push(m);
            }
            _ => return Err(Error::Malformed),
        }
    }
    Ok(Value::Object(out))
}

/// Decode a `k8s\0`-enveloped protobuf body into the JSON object it stands for.
pub fn decode(body: &[u8]) -> Result<Value, Error> {
    let inner = body.strip_prefix(b"k8s\0").ok_or(Error::Malformed)?;
    let (mut api_version, mut kind, mut raw) = (String::new(), String::new(), &[][..]);
    for (num, w) in fields(inner)? {
        match (num, w) {
            (1, Wire::Bytes(tm)) => {
                for (n, v) in fields(tm)? {
                    if let Wire::Bytes(b) = v {
                        match n {
                            1 => api_version = string(b)?,
                            2 => kind = string(b)?,
                            _ => {}
                        }
                    }
                }
            }
            (2, Wire::Bytes(b)) => raw = b,
            _ => {}
        }
    }
    let schema = match (api_version.as_str(), kind.as_str()) {
        ("v1", "ConfigMap") => CONFIG_MAP,
        ("v1", "Secret") => SECRET,
        ("v1", "Namespace") => NAMESPACE,
        ("v1", "ServiceAccount") => SERVICE_ACCOUNT,
        _ => return Err(Error::Unsupported(format!("{api_version}, Kind={kind}"))),
    };
    let mut obj = message(raw, schema)?;
    obj["apiVersion"] = json!(api_version);
    obj["kind"] = json!(kind);
    Ok(obj)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn field(num: u64, bytes: &[u8]) -> Vec<u8> {
        let mut out = vec![((num << 3) | 2) as u8, bytes.len() as u8];
        out.extend_from_slice(bytes);
        out
    }

    #[test]
    fn a_config_map_envelope_decodes() {
        let meta = [field(1, b"cm"), field(11, &[field(1, b"app"), field(2, b"web")].concat())].concat();
        let cm = [field(1, &meta), field(2, &[field(1, b"k"), field(2, b"v")].concat()), field(3, &[field(1, b"b"), field(2, &[0, 1])].concat())].concat();
        let tm = [field(1, b"v1"), field(2, b"ConfigMap")].concat();
        let body = [b"k8s\0".to_vec(), field(1, &tm), field(2, &cm)].concat();
        let v = decode(&body).unwrap();
        assert_eq!(v, json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "cm", "labels": {"app": "web"}}, "data": {"k": "v"}, "binaryData": {"b": "AAE="}}));
    }
}
