//! Decoding of Kubernetes protobuf request bodies (`application/vnd.kubernetes.protobuf`) for the
//! kinds kubectl's typed clients create (`kubectl create configmap|secret|namespace|
//! serviceaccount|deployment|job`, `kubectl run`, `kubectl expose`). The envelope is `k8s\0` +
//! `runtime.Unknown{typeMeta, raw}`; `raw` is the object's message, decoded with a table of the
//! field numbers of upstream's `generated.proto` for the fields those commands set. Decoding is
//! strict: an unknown field, or another kind, is refused with 415 by the caller.

use base64::Engine;
use serde_json::{Map, Value, json};

enum Ty {
    /// A string (omitted when empty, as `omitempty`).
    Str,
    /// A non-pointer bool (omitted when false).
    Bool,
    /// A pointer bool (kept when false).
    OptBool,
    /// A non-pointer integer (omitted when zero).
    Int,
    /// A pointer integer (kept when zero).
    OptInt,
    MapStrStr,
    MapStrBytes,
    /// `map<string, Quantity>` (resource lists).
    MapStrQuantity,
    RepStr,
    /// `metav1.Time` (omitted when zero).
    Time,
    /// `intstr.IntOrString`.
    IntOrString,
    Msg(&'static [Field]),
    RepMsg(&'static [Field]),
    /// Read and dropped (status on create: the server resets it anyway).
    Ignored,
}

type Field = (u64, &'static str, Ty);

const OWNER_REF: &[Field] = &[
    (1, "kind", Ty::Str),
    (3, "name", Ty::Str),
    (4, "uid", Ty::Str),
    (5, "apiVersion", Ty::Str),
    (6, "controller", Ty::OptBool),
    (7, "blockOwnerDeletion", Ty::OptBool),
];

const OBJECT_META: &[Field] = &[
    (1, "name", Ty::Str),
    (2, "generateName", Ty::Str),
    (3, "namespace", Ty::Str),
    (4, "selfLink", Ty::Str),
    (5, "uid", Ty::Str),
    (6, "resourceVersion", Ty::Str),
    (7, "generation", Ty::Int),
    (8, "creationTimestamp", Ty::Time),
    (10, "deletionGracePeriodSeconds", Ty::OptInt),
    (11, "labels", Ty::MapStrStr),
    (12, "annotations", Ty::MapStrStr),
    (13, "ownerReferences", Ty::RepMsg(OWNER_REF)),
    (14, "finalizers", Ty::RepStr),
];

const CONFIG_MAP: &[Field] =
    &[(1, "metadata", Ty::Msg(OBJECT_META)), (2, "data", Ty::MapStrStr), (3, "binaryData", Ty::MapStrBytes), (4, "immutable", Ty::OptBool)];

const SECRET: &[Field] = &[
    (1, "metadata", Ty::Msg(OBJECT_META)),
    (2, "data", Ty::MapStrBytes),
    (3, "type", Ty::Str),
    (4, "stringData", Ty::MapStrStr),
    (5, "immutable", Ty::OptBool),
];

const NAMESPACE_SPEC: &[Field] = &[(1, "finalizers", Ty::RepStr)];

const NAMESPACE: &[Field] = &[(1, "metadata", Ty::Msg(OBJECT_META)), (2, "spec", Ty::Msg(NAMESPACE_SPEC)), (3, "status", Ty::Ignored)];

const RESOURCE_ATTRIBUTES: &[Field] = &[
    (1, "namespace", Ty::Str),
    (2, "verb", Ty::Str),
    (3, "group", Ty::Str),
    (4, "version", Ty::Str),
    (5, "resource", Ty::Str),
    (6, "subresource", Ty::Str),
    (7, "name", Ty::Str),
];

const NON_RESOURCE_ATTRIBUTES: &[Field] = &[(1, "path", Ty::Str), (2, "verb", Ty::Str)];

const SELF_SUBJECT_ACCESS_REVIEW_SPEC: &[Field] =
    &[(1, "resourceAttributes", Ty::Msg(RESOURCE_ATTRIBUTES)), (2, "nonResourceAttributes", Ty::Msg(NON_RESOURCE_ATTRIBUTES))];

/// What `kubectl auth can-i` sends.
const SELF_SUBJECT_ACCESS_REVIEW: &[Field] =
    &[(1, "metadata", Ty::Msg(OBJECT_META)), (2, "spec", Ty::Msg(SELF_SUBJECT_ACCESS_REVIEW_SPEC)), (3, "status", Ty::Ignored)];

const LOCAL_REF: &[Field] = &[(1, "name", Ty::Str)];

const SERVICE_ACCOUNT: &[Field] =
    &[(1, "metadata", Ty::Msg(OBJECT_META)), (3, "imagePullSecrets", Ty::RepMsg(LOCAL_REF)), (4, "automountServiceAccountToken", Ty::OptBool)];

const CONTAINER_PORT: &[Field] =
    &[(1, "name", Ty::Str), (2, "hostPort", Ty::Int), (3, "containerPort", Ty::Int), (4, "protocol", Ty::Str), (5, "hostIP", Ty::Str)];

const ENV_VAR: &[Field] = &[(1, "name", Ty::Str), (2, "value", Ty::Str)];

const RESOURCES: &[Field] = &[(1, "limits", Ty::MapStrQuantity), (2, "requests", Ty::MapStrQuantity)];

const CONTAINER: &[Field] = &[
    (1, "name", Ty::Str),
    (2, "image", Ty::Str),
    (3, "command", Ty::RepStr),
    (4, "args", Ty::RepStr),
    (5, "workingDir", Ty::Str),
    (6, "ports", Ty::RepMsg(CONTAINER_PORT)),
    (7, "env", Ty::RepMsg(ENV_VAR)),
    (8, "resources", Ty::Msg(RESOURCES)),
    (13, "terminationMessagePath", Ty::Str),
    (14, "imagePullPolicy", Ty::Str),
    (16, "stdin", Ty::Bool),
    (17, "stdinOnce", Ty::Bool),
    (18, "tty", Ty::Bool),
    (20, "terminationMessagePolicy", Ty::Str),
];

const POD_SPEC: &[Field] = &[
    (2, "containers", Ty::RepMsg(CONTAINER)),
    (3, "restartPolicy", Ty::Str),
    (4, "terminationGracePeriodSeconds", Ty::OptInt),
    (5, "activeDeadlineSeconds", Ty::OptInt),
    (6, "dnsPolicy", Ty::Str),
    (7, "nodeSelector", Ty::MapStrStr),
    (8, "serviceAccountName", Ty::Str),
    (9, "serviceAccount", Ty::Str),
    (10, "nodeName", Ty::Str),
    (11, "hostNetwork", Ty::Bool),
    (12, "hostPID", Ty::Bool),
    (13, "hostIPC", Ty::Bool),
    (15, "imagePullSecrets", Ty::RepMsg(LOCAL_REF)),
    (16, "hostname", Ty::Str),
    (17, "subdomain", Ty::Str),
    (19, "schedulerName", Ty::Str),
    (20, "initContainers", Ty::RepMsg(CONTAINER)),
    (21, "automountServiceAccountToken", Ty::OptBool),
    (24, "priorityClassName", Ty::Str),
    (25, "priority", Ty::OptInt),
    (30, "enableServiceLinks", Ty::OptBool),
];

const POD: &[Field] = &[(1, "metadata", Ty::Msg(OBJECT_META)), (2, "spec", Ty::Msg(POD_SPEC)), (3, "status", Ty::Ignored)];

const POD_TEMPLATE: &[Field] = &[(1, "metadata", Ty::Msg(OBJECT_META)), (2, "spec", Ty::Msg(POD_SPEC))];

const SELECTOR_REQUIREMENT: &[Field] = &[(1, "key", Ty::Str), (2, "operator", Ty::Str), (3, "values", Ty::RepStr)];

const LABEL_SELECTOR: &[Field] = &[(1, "matchLabels", Ty::MapStrStr), (2, "matchExpressions", Ty::RepMsg(SELECTOR_REQUIREMENT))];

const ROLLING_UPDATE: &[Field] = &[(1, "maxUnavailable", Ty::IntOrString), (2, "maxSurge", Ty::IntOrString)];

const STRATEGY: &[Field] = &[(1, "type", Ty::Str), (2, "rollingUpdate", Ty::Msg(ROLLING_UPDATE))];

const DEPLOYMENT_SPEC: &[Field] = &[
    (1, "replicas", Ty::OptInt),
    (2, "selector", Ty::Msg(LABEL_SELECTOR)),
    (3, "template", Ty::Msg(POD_TEMPLATE)),
    (4, "strategy", Ty::Msg(STRATEGY)),
    (5, "minReadySeconds", Ty::Int),
    (6, "revisionHistoryLimit", Ty::OptInt),
    (7, "paused", Ty::Bool),
    (9, "progressDeadlineSeconds", Ty::OptInt),
];

const DEPLOYMENT: &[Field] = &[(1, "metadata", Ty::Msg(OBJECT_META)), (2, "spec", Ty::Msg(DEPLOYMENT_SPEC)), (3, "status", Ty::Ignored)];

const JOB_SPEC: &[Field] = &[
    (1, "parallelism", Ty::OptInt),
    (2, "completions", Ty::OptInt),
    (3, "activeDeadlineSeconds", Ty::OptInt),
    (4, "selector", Ty::Msg(LABEL_SELECTOR)),
    (5, "manualSelector", Ty::OptBool),
    (6, "template", Ty::Msg(POD_TEMPLATE)),
    (7, "backoffLimit", Ty::OptInt),
    (8, "ttlSecondsAfterFinished", Ty::OptInt),
    (9, "completionMode", Ty::Str),
    (10, "suspend", Ty::OptBool),
];

const JOB: &[Field] = &[(1, "metadata", Ty::Msg(OBJECT_META)), (2, "spec", Ty::Msg(JOB_SPEC)), (3, "status", Ty::Ignored)];

const SERVICE_PORT: &[Field] = &[
    (1, "name", Ty::Str),
    (2, "protocol", Ty::Str),
    (3, "port", Ty::Int),
    (4, "targetPort", Ty::IntOrString),
    (5, "nodePort", Ty::Int),
    (6, "appProtocol", Ty::Str),
];

const SERVICE_SPEC: &[Field] = &[
    (1, "ports", Ty::RepMsg(SERVICE_PORT)),
    (2, "selector", Ty::MapStrStr),
    (3, "clusterIP", Ty::Str),
    (4, "type", Ty::Str),
    (5, "externalIPs", Ty::RepStr),
    (7, "sessionAffinity", Ty::Str),
    (8, "loadBalancerIP", Ty::Str),
    (10, "externalName", Ty::Str),
    (11, "externalTrafficPolicy", Ty::Str),
    (13, "publishNotReadyAddresses", Ty::Bool),
];

const SERVICE: &[Field] = &[(1, "metadata", Ty::Msg(OBJECT_META)), (2, "spec", Ty::Msg(SERVICE_SPEC)), (3, "status", Ty::Ignored)];

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
        // Decoding is strict: a field this table does not know makes the body unsupported
        // (415) rather than silently losing data.
        let Some((_, name, ty)) = schema.iter().find(|(n, _, _)| *n == num) else {
            return Err(Error::Unsupported(format!("field {num} (after {:?})", out.keys().collect::<Vec<_>>())));
        };
        let name = name.to_string();
        match (ty, w) {
            (Ty::Str, Wire::Bytes(b)) => {
                let s = string(b)?;
                if !s.is_empty() {
                    out.insert(name, json!(s));
                }
            }
            (Ty::Bool, Wire::Varint(v)) => {
                if v != 0 {
                    out.insert(name, json!(true));
                }
            }
            (Ty::OptBool, Wire::Varint(v)) => {
                out.insert(name, json!(v != 0));
            }
            (Ty::Int, Wire::Varint(v)) => {
                if v != 0 {
                    out.insert(name, json!(v as i64));
                }
            }
            (Ty::OptInt, Wire::Varint(v)) => {
                out.insert(name, json!(v as i64));
            }
            (Ty::Time, Wire::Bytes(b)) => {
                let (mut secs, mut nanos) = (0i64, 0u32);
                for (n, w) in fields(b)? {
                    match (n, w) {
                        (1, Wire::Varint(v)) => secs = v as i64,
                        (2, Wire::Varint(v)) => nanos = v as u32,
                        _ => {}
                    }
                }
                if secs != 0 || nanos != 0 {
                    let t = chrono::DateTime::from_timestamp(secs, nanos).ok_or(Error::Malformed)?;
                    out.insert(name, json!(crate::clock::timestamp(t)));
                }
            }
            (Ty::IntOrString, Wire::Bytes(b)) => {
                let (mut kind, mut int, mut string) = (0u64, 0i64, String::new());
                for (n, w) in fields(b)? {
                    match (n, w) {
                        (1, Wire::Varint(v)) => kind = v,
                        (2, Wire::Varint(v)) => int = v as i32 as i64,
                        (3, Wire::Bytes(x)) => string = self::string(x)?,
                        _ => {}
                    }
                }
                out.insert(name, if kind == 1 { json!(string) } else { json!(int) });
            }
            (Ty::MapStrQuantity, Wire::Bytes(b)) => {
                let mut k = String::new();
                let mut v = String::new();
                for (n, w) in fields(b)? {
                    if let Wire::Bytes(x) = w {
                        match n {
                            1 => k = string(x)?,
                            2 => {
                                for (qn, qw) in fields(x)? {
                                    if let (1, Wire::Bytes(q)) = (qn, qw) {
                                        v = string(q)?;
                                    }
                                }
                            }
                            _ => {}
                        }
                    }
                }
                out.entry(name).or_insert_with(|| json!({}))[k] = json!(v);
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
            (Ty::Ignored, _) => {}
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
        ("v1", "Pod") => POD,
        ("v1", "Service") => SERVICE,
        ("apps/v1", "Deployment") => DEPLOYMENT,
        ("batch/v1", "Job") => JOB,
        ("authorization.k8s.io/v1", "SelfSubjectAccessReview") => SELF_SUBJECT_ACCESS_REVIEW,
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
        let cm =
            [field(1, &meta), field(2, &[field(1, b"k"), field(2, b"v")].concat()), field(3, &[field(1, b"b"), field(2, &[0, 1])].concat())].concat();
        let tm = [field(1, b"v1"), field(2, b"ConfigMap")].concat();
        let body = [b"k8s\0".to_vec(), field(1, &tm), field(2, &cm)].concat();
        let v = decode(&body).unwrap();
        assert_eq!(
            v,
            json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "cm", "labels": {"app": "web"}}, "data": {"k": "v"}, "binaryData": {"b": "AAE="}})
        );
    }
}
