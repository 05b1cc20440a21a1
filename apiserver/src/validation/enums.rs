//! Enumerated values of built-in fields, refused as upstream's validation refuses them:
//! `Unsupported value: "tcp": supported values: "SCTP", "TCP", "UDP"`. Each list is in the
//! order upstream's message prints it (sorted where upstream validates against a sorted set,
//! declaration order where it lists them by hand, as a Pod's `restartPolicy`).

use crate::status::Cause;
use serde_json::Value;

/// A container port's or Service port's `protocol`.
pub const PROTOCOL: &[&str] = &["SCTP", "TCP", "UDP"];
/// A container's `imagePullPolicy`.
pub const IMAGE_PULL_POLICY: &[&str] = &["Always", "IfNotPresent", "Never"];
/// A Pod's `restartPolicy`.
pub const POD_RESTART_POLICY: &[&str] = &["Always", "OnFailure", "Never"];
/// A pod template's `restartPolicy` in a Deployment, ReplicaSet, StatefulSet, DaemonSet or
/// ReplicationController.
pub const TEMPLATE_RESTART_POLICY: &[&str] = &["Always"];
/// A Service's `type`.
pub const SERVICE_TYPE: &[&str] = &["ClusterIP", "ExternalName", "LoadBalancer", "NodePort"];

/// `Unsupported value` for `value` at `field` unless it is one of `allowed` (absent passes:
/// defaulting fills these fields, and `Required value` is the caller's).
pub fn check(value: Option<&Value>, allowed: &[&str], field: &str, causes: &mut Vec<Cause>) {
    let Some(v) = value else { return };
    if v.as_str().is_some_and(|s| allowed.contains(&s)) {
        return;
    }
    let listed: Vec<String> = allowed.iter().map(|a| format!("{a:?}")).collect();
    let shown = match v.as_str() {
        Some(s) => format!("{s:?}"),
        None => v.to_string(),
    };
    causes.push(Cause::new("FieldValueNotSupported", format!("Unsupported value: {shown}: supported values: {}", listed.join(", ")), field));
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn an_unlisted_value_is_refused_with_upstreams_list_and_a_listed_one_passes() {
        let mut causes = vec![];
        check(Some(&json!("tcp")), PROTOCOL, "spec.ports[0].protocol", &mut causes);
        check(Some(&json!("TCP")), PROTOCOL, "spec.ports[1].protocol", &mut causes);
        check(None, PROTOCOL, "spec.ports[2].protocol", &mut causes);
        assert_eq!(causes.len(), 1);
        assert_eq!(causes[0].message, r#"Unsupported value: "tcp": supported values: "SCTP", "TCP", "UDP""#);
        assert_eq!(causes[0].field, "spec.ports[0].protocol");
    }
}
