//! API errors and their wire form: `meta/v1 Status` objects with upstream reasons, codes and
//! message wording (see k8s.io/apimachinery/pkg/api/errors).

use serde_json::{Value, json};

/// One field-level cause of an error (`details.causes[]`).
#[derive(Debug, Clone, PartialEq)]
pub struct Cause {
    /// Machine reason, e.g. `FieldValueInvalid`, `FieldValueRequired`.
    pub reason: String,
    /// Human message, e.g. `Invalid value: -1: spec.replicas in body should be ...`.
    pub message: String,
    /// Field path, e.g. `spec.replicas`.
    pub field: String,
}

impl Cause {
    /// A cause with the given reason, message and field.
    pub fn new(reason: impl Into<String>, message: impl Into<String>, field: impl Into<String>) -> Self {
        Self { reason: reason.into(), message: message.into(), field: field.into() }
    }
}

/// An API error: everything a `Status` of status `Failure` carries.
#[derive(Debug, Clone, thiserror::Error)]
#[error("{code} {reason}: {message}")]
pub struct ApiError {
    /// HTTP status code.
    pub code: u16,
    /// `StatusReason`, e.g. `NotFound`.
    pub reason: String,
    /// Human readable message.
    pub message: String,
    /// `details.name`.
    pub name: Option<String>,
    /// `details.group`.
    pub group: Option<String>,
    /// `details.kind` (the resource for most errors, the kind for Invalid).
    pub kind: Option<String>,
    /// `details.causes`.
    pub causes: Vec<Cause>,
    /// `details.retryAfterSeconds`.
    pub retry_after: Option<u32>,
    /// `details` is answered even when empty (`{}`), as by `NewGenericServerResponse`.
    pub empty_details: bool,
}

/// Local result type.
pub type Result<T, E = ApiError> = std::result::Result<T, E>;

/// `resource.group` as upstream prints a `GroupResource`.
pub fn qualified(group: &str, resource: &str) -> String {
    if group.is_empty() { resource.to_string() } else { format!("{resource}.{group}") }
}

impl ApiError {
    fn base(code: u16, reason: &str, message: String) -> Self {
        Self { code, reason: reason.into(), message, name: None, group: None, kind: None, causes: vec![], retry_after: None, empty_details: false }
    }

    fn with_details(mut self, group: &str, kind: &str, name: &str) -> Self {
        self.group = Some(group.to_string());
        self.kind = Some(kind.to_string());
        self.name = Some(name.to_string());
        self
    }

    /// 404 `pods "x" not found`.
    pub fn not_found(group: &str, resource: &str, name: &str) -> Self {
        Self::base(404, "NotFound", format!("{} \"{name}\" not found", qualified(group, resource))).with_details(group, resource, name)
    }

    /// 409 `pods "x" already exists`.
    pub fn already_exists(group: &str, resource: &str, name: &str) -> Self {
        Self::base(409, "AlreadyExists", format!("{} \"{name}\" already exists", qualified(group, resource))).with_details(group, resource, name)
    }

    /// 409 Conflict with upstream's optimistic-concurrency wording.
    pub fn conflict(group: &str, resource: &str, name: &str, why: &str) -> Self {
        Self::base(409, "Conflict", format!("Operation cannot be fulfilled on {} \"{name}\": {why}", qualified(group, resource)))
            .with_details(group, resource, name)
    }

    /// 409 Conflict for a stale resourceVersion.
    pub fn stale(group: &str, resource: &str, name: &str) -> Self {
        Self::conflict(group, resource, name, "the object has been modified; please apply your changes to the latest version and try again")
    }

    /// 422 Invalid: `Kind.group "name" is invalid: [field: msg, ...]`.
    pub fn invalid(group: &str, kind: &str, name: &str, causes: Vec<Cause>) -> Self {
        let qualified_kind = if group.is_empty() { kind.to_string() } else { format!("{kind}.{group}") };
        let list: Vec<String> =
            causes.iter().map(|c| if c.field.is_empty() { c.message.clone() } else { format!("{}: {}", c.field, c.message) }).collect();
        let joined = if list.len() == 1 { list[0].clone() } else { format!("[{}]", list.join(", ")) };
        let mut e = Self::base(422, "Invalid", format!("{qualified_kind} \"{name}\" is invalid: {joined}")).with_details(group, kind, name);
        e.causes = causes;
        e
    }

    /// 422 of a JSON patch that does not apply (a failed `test`, a path the object lacks): upstream
    /// answers `NewGenericServerResponse`'s words, without the patch library's own message.
    pub fn json_patch_failed() -> Self {
        Self { empty_details: true, ..Self::base(422, "Invalid", "the server rejected our request due to an error in our request".into()) }
    }

    /// 415 of a PATCH whose content type is no patch type at all (`text/plain`), in upstream's words.
    pub fn unsupported_patch_type() -> Self {
        Self { empty_details: true, ..Self::base(415, "UnsupportedMediaType", "415: Unsupported Media Type".into()) }
    }

    /// 400 BadRequest.
    pub fn bad_request(message: impl Into<String>) -> Self {
        Self::base(400, "BadRequest", message.into())
    }

    /// 403 Forbidden.
    pub fn forbidden(message: impl Into<String>) -> Self {
        Self::base(403, "Forbidden", message.into())
    }

    /// 415 UnsupportedMediaType, listing the accepted media types.
    pub fn unsupported_media_type(accepted: &[&str]) -> Self {
        Self::base(
            415,
            "UnsupportedMediaType",
            format!("the body of the request was in an unknown format - accepted media types include: {}", accepted.join(", ")),
        )
    }

    /// 405 MethodNotAllowed.
    pub fn method_not_allowed(method: &str) -> Self {
        Self::base(405, "MethodNotAllowed", format!("the server does not allow this method on the requested resource ({method})"))
    }

    /// 404 for an unknown path (no details), as upstream's "the server could not find the requested resource".
    pub fn no_route() -> Self {
        Self::base(404, "NotFound", "the server could not find the requested resource".into())
    }

    /// 410 Expired, as the watch cache answers a too-old resourceVersion.
    pub fn expired(message: impl Into<String>) -> Self {
        Self::base(410, "Expired", message.into())
    }

    /// 500 InternalError.
    pub fn internal(message: impl Into<String>) -> Self {
        Self::base(500, "InternalError", format!("Internal error occurred: {}", message.into()))
    }

    /// 500 with no reason: what upstream answers for an error that is no API status (its
    /// `ErrorToAPIStatus` default), e.g. a server-side apply its field manager cannot type.
    pub fn unknown(message: impl Into<String>) -> Self {
        Self::base(500, "", message.into())
    }

    /// 504 Timeout.
    pub fn timeout(message: impl Into<String>) -> Self {
        Self::base(504, "Timeout", message.into())
    }

    /// 504 for a read from a resourceVersion the store has not reached, as upstream's watch
    /// cache answers once it has waited for it: `Timeout: Too large resource version: 9, current: 5`.
    pub fn too_large_resource_version(wanted: u64, current: u64) -> Self {
        let mut e = Self::timeout(format!("Timeout: Too large resource version: {wanted}, current: {current}"));
        e.causes = vec![Cause::new("ResourceVersionTooLarge", "Too large resource version", "")];
        e.retry_after = Some(1);
        e
    }

    /// The `Status` object.
    pub fn to_status(&self) -> Value {
        let mut status = json!({
            "kind": "Status",
            "apiVersion": "v1",
            "metadata": {},
            "status": "Failure",
            "message": self.message,
            "reason": self.reason,
            "code": self.code,
        });
        if self.reason.is_empty() {
            // StatusReasonUnknown is "" and `omitempty` upstream.
            status.as_object_mut().expect("object").remove("reason");
        }
        let mut details = serde_json::Map::new();
        if let Some(n) = &self.name
            && !n.is_empty()
        {
            details.insert("name".into(), json!(n));
        }
        if let Some(g) = &self.group
            && !g.is_empty()
        {
            details.insert("group".into(), json!(g));
        }
        if let Some(k) = &self.kind {
            details.insert("kind".into(), json!(k));
        }
        if !self.causes.is_empty() {
            details.insert(
                "causes".into(),
                Value::Array(
                    self.causes
                        .iter()
                        .map(|c| {
                            let mut cause = json!({"reason": c.reason, "message": c.message, "field": c.field});
                            if c.field.is_empty() {
                                cause.as_object_mut().expect("object").remove("field"); // omitempty
                            }
                            cause
                        })
                        .collect(),
                ),
            );
        }
        if let Some(r) = self.retry_after {
            details.insert("retryAfterSeconds".into(), json!(r));
        }
        if !details.is_empty() || self.empty_details {
            status["details"] = Value::Object(details);
        }
        status
    }
}

/// A `Status` of status `Success` (what DELETE of a collection or of an already-gone object returns).
pub fn success(details: Option<Value>) -> Value {
    let mut v = json!({"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Success"});
    if let Some(d) = details {
        v["details"] = d;
    }
    v
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn not_found_is_worded_as_upstream() {
        let s = ApiError::not_found("batch", "jobs", "foo").to_status();
        assert_eq!(s["message"], "jobs.batch \"foo\" not found");
        assert_eq!(s["reason"], "NotFound");
        assert_eq!(s["code"], 404);
        assert_eq!(s["details"], json!({"name": "foo", "group": "batch", "kind": "jobs"}));
    }

    #[test]
    fn conflict_is_worded_as_upstream() {
        let s = ApiError::stale("batch", "jobs", "foo").to_status();
        assert_eq!(
            s["message"],
            "Operation cannot be fulfilled on jobs.batch \"foo\": the object has been modified; please apply your changes to the latest version and try again"
        );
        assert_eq!(s["code"], 409);
    }

    #[test]
    fn invalid_lists_causes() {
        let e = ApiError::invalid(
            "stable.example.com",
            "CronTab",
            "x",
            vec![Cause::new("FieldValueInvalid", "Invalid value: -1: spec.replicas in body should be greater than or equal to 0", "spec.replicas")],
        );
        let s = e.to_status();
        assert_eq!(
            s["message"],
            "CronTab.stable.example.com \"x\" is invalid: spec.replicas: Invalid value: -1: spec.replicas in body should be greater than or equal to 0"
        );
        assert_eq!(s["details"]["causes"][0]["field"], "spec.replicas");
        assert_eq!(s["code"], 422);
    }
}
