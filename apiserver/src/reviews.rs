//! Create-only reviews, answered and never stored: access reviews decided by [`crate::rbac`]
//! (`SelfSubjectAccessReview` for the requester as `kubectl auth can-i` sends,
//! `SubjectAccessReview` and `LocalSubjectAccessReview` for the user the spec names), rules
//! reviews, `SelfSubjectReview` (`kubectl auth whoami`) and `TokenReview` (see
//! [`crate::rest::Core::review_token`]).

use crate::auth::UserInfo;
use crate::rbac::Attributes;
use crate::resources::Resource;
use crate::rest::Core;
use crate::status::{ApiError, Cause, Result};
use serde_json::{Value, json};

fn s(v: &Value, k: &str) -> String {
    v[k].as_str().unwrap_or_default().to_string()
}

/// The attributes an access review's spec asks about, if it has any.
fn attributes(spec: &Value) -> Option<Attributes> {
    if let Some(a) = spec.get("resourceAttributes").filter(|a| a.is_object()) {
        return Some(Attributes::Resource {
            verb: s(a, "verb"),
            group: s(a, "group"),
            resource: s(a, "resource"),
            subresource: s(a, "subresource"),
            namespace: s(a, "namespace"),
            name: s(a, "name"),
        });
    }
    spec.get("nonResourceAttributes").filter(|a| a.is_object()).map(|a| Attributes::NonResource { verb: s(a, "verb"), path: s(a, "path") })
}

fn access_status(core: &Core, spec: &Value, user: &UserInfo) -> Value {
    let Some(attrs) = attributes(spec) else {
        return json!({"allowed": false, "evaluationError": "spec has neither resourceAttributes nor nonResourceAttributes"});
    };
    let allowed = crate::rbac::allows(&core.store, user, &attrs);
    let reason = if user.groups.iter().any(|g| g == "system:masters") {
        "the user is in system:masters"
    } else if allowed {
        "allowed by RBAC"
    } else {
        ""
    };
    json!({"allowed": allowed, "reason": reason})
}

/// The user a (Local)SubjectAccessReview asks about; upstream requires a user or a group.
fn subject(res: &Resource, spec: &Value) -> Result<UserInfo> {
    let name = s(spec, "user");
    let groups: Vec<String> = spec["groups"].as_array().map(|a| a.iter().filter_map(|g| g.as_str().map(String::from)).collect()).unwrap_or_default();
    if name.is_empty() && groups.is_empty() {
        return Err(ApiError::invalid(
            &res.group,
            &res.kind,
            "",
            vec![Cause::new("FieldValueInvalid", "Invalid value: \"\": at least one of user or group must be specified", "spec.user")],
        ));
    }
    Ok(UserInfo { name, groups })
}

/// Answer a review posted to `res` (in namespace `ns` for a LocalSubjectAccessReview) by `user`.
pub fn answer(core: &Core, res: &Resource, ns: &str, body: Value, user: &UserInfo) -> Result<Value> {
    let mut body = if body.is_object() { body } else { json!({}) };
    body["apiVersion"] = json!(res.api_version());
    body["kind"] = json!(res.kind);
    let admin = user.groups.iter().any(|g| g == "system:masters");
    body["status"] = match res.kind.as_str() {
        "SelfSubjectAccessReview" => access_status(core, &body["spec"], user),
        "SubjectAccessReview" => access_status(core, &body["spec"], &subject(res, &body["spec"])?),
        "LocalSubjectAccessReview" => {
            let subject = subject(res, &body["spec"])?;
            if let Some(attrs) = body.pointer_mut("/spec/resourceAttributes").filter(|a| a.is_object()) {
                match attrs.get("namespace").and_then(Value::as_str) {
                    Some(other) if !other.is_empty() && other != ns => {
                        return Err(ApiError::bad_request(format!("spec.resourceAttributes.namespace must match namespace: {ns}")));
                    }
                    _ => attrs["namespace"] = json!(ns),
                }
            }
            if let Some(m) = body.as_object_mut() {
                let meta = m.entry("metadata").or_insert_with(|| json!({}));
                if meta.is_object() {
                    meta["namespace"] = json!(ns);
                }
            }
            access_status(core, &body["spec"], &subject)
        }
        "SelfSubjectRulesReview" if admin => json!({
            "resourceRules": [{"verbs": ["*"], "apiGroups": ["*"], "resources": ["*"]}],
            "nonResourceRules": [{"verbs": ["*"], "nonResourceURLs": ["*"]}],
            "incomplete": false,
        }),
        "SelfSubjectRulesReview" => json!({"resourceRules": [], "nonResourceRules": [], "incomplete": true,
            "evaluationError": "the embedded API server lists rules only for system:masters"}),
        "TokenReview" => core.review_token(body.pointer("/spec/token").and_then(Value::as_str).unwrap_or_default()),
        _ => json!({"userInfo": {"username": user.name, "groups": user.groups}}),
    };
    Ok(body)
}
