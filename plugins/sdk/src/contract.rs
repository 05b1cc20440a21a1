//! The contract's types (`wit/plugin.wit`, interface `controller`) as plain
//! Rust values.
//!
//! Plugin logic works with these, never with generated bindings, so the same
//! code runs natively (tests, benchmarks, the host's native mode) and in Wasm.
//! Their serde form is the host's JSON form of actions (`host reconcile
//! --output json`): one object per action with exactly one key.

use kube_core::Resource;
use serde::{Deserialize, Serialize};
use serde_json::Value;

/// The package version of the WIT contract this SDK implements.
pub const CONTRACT_VERSION: &str = "0.4.0";

/// A Kubernetes group, version and kind. The core group is `""`.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub struct GroupVersionKind {
    /// The API group; empty for the core group (`v1`).
    pub group: String,
    /// The version, e.g. `v1`.
    pub version: String,
    /// The kind, e.g. `Deployment`.
    pub kind: String,
}

impl GroupVersionKind {
    /// A group, version and kind.
    ///
    /// ```
    /// # use operator_plugin_sdk::GroupVersionKind;
    /// assert_eq!(GroupVersionKind::new("apps", "v1", "Deployment").api_version(), "apps/v1");
    /// ```
    pub fn new(group: &str, version: &str, kind: &str) -> Self {
        Self { group: group.into(), version: version.into(), kind: kind.into() }
    }

    /// `apiVersion` as objects carry it: `v1` for the core group, else `group/version`.
    pub fn api_version(&self) -> String {
        if self.group.is_empty() { self.version.clone() } else { format!("{}/{}", self.group, self.version) }
    }

    /// Splits an `apiVersion` and a kind into a GroupVersionKind.
    pub fn from_api_version(api_version: &str, kind: &str) -> Self {
        match api_version.split_once('/') {
            Some((group, version)) => Self::new(group, version, kind),
            None => Self::new("", api_version, kind),
        }
    }
}

/// The group, version and kind of a Rust type.
pub fn gvk_of<K: Resource<DynamicType = ()>>() -> GroupVersionKind {
    GroupVersionKind::new(&K::group(&()), &K::version(&()), &K::kind(&()))
}

impl std::fmt::Display for GroupVersionKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}, Kind={}", self.api_version(), self.kind)
    }
}

/// Severity, as in the contract's `log.level`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Level {
    /// The most detailed level.
    Trace,
    /// For debugging.
    Debug,
    /// Normal operation.
    Info,
    /// Something unexpected the plugin handled.
    Warn,
    /// Something failed.
    Error,
}

/// What a plugin is and what it controls.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Manifest {
    /// DNS-1123 label, e.g. `cronjob`.
    pub name: String,
    /// The plugin's own semver version.
    pub version: String,
    /// The kind this plugin reconciles.
    pub parent: GroupVersionKind,
    /// The kinds it may create, change and delete.
    pub children: Vec<GroupVersionKind>,
    /// The kinds it reads but does not control, and how they attach to a parent.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub related: Vec<RelatedKind>,
    /// CustomResourceDefinitions to install, as JSON objects.
    pub crds: Vec<Value>,
    /// A finalizer the host keeps on parents until the plugin says `Finalized`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub finalizer: Option<String>,
}

/// A kind a plugin reads (never writes), and how its objects attach to a
/// parent; see `related-kind` in `wit/plugin.wit`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct RelatedKind {
    /// The related kind.
    pub kind: GroupVersionKind,
    /// How objects of that kind are attached to a parent.
    pub attach: Attachment,
    /// Objects are looked up cluster-wide (a cluster-scoped kind such as `Node`).
    #[serde(default)]
    pub cluster_scoped: bool,
}

/// How related objects attach to a parent. Paths are dotted field paths of
/// the parent; a list met on the way is followed item by item.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub enum Attachment {
    /// Picked by the `metav1.LabelSelector` at this field of the parent (e.g. `spec.selector`).
    SelectorFrom(String),
    /// Named by these fields of the parent (each a name or a list of names).
    NamesFrom(Vec<String>),
    /// Picked by this fixed `metav1.LabelSelector` (a JSON object).
    FixedSelector(Value),
}

/// A pointer to one object. `namespace` is empty for cluster-scoped objects.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ObjectRef {
    /// The target's `apiVersion`, e.g. `v1`.
    pub api_version: String,
    /// The target's kind, e.g. `ConfigMap`.
    pub kind: String,
    #[serde(default)]
    /// The target's namespace (the parent's, for children).
    pub namespace: String,
    /// The target's name.
    pub name: String,
}

impl std::fmt::Display for ObjectRef {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        if self.namespace.is_empty() { write!(f, "{} {}", self.kind, self.name) } else { write!(f, "{} {}/{}", self.kind, self.namespace, self.name) }
    }
}

/// What happens to an object's dependents when it is deleted.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum Propagation {
    /// Delete the object now; the garbage collector deletes dependents.
    #[default]
    Background,
    /// Delete blocking dependents first, then the object.
    Foreground,
    /// Delete the object and leave its dependents.
    Orphan,
}

/// The type of a Kubernetes Event.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum EventType {
    /// An Event of type `Normal`.
    Normal,
    /// An Event of type `Warning`.
    Warning,
}

/// One thing the plugin wants done; see `action` in `wit/plugin.wit`, and
/// `desired.step` for [`Action::Apply`] (contract 0.3), and
/// `prioritized.directive` for [`Action::RequeueLowAfterMs`] (contract 0.4).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub enum Action {
    /// Create a child. The host sets its namespace and controller ownerReference.
    Create(Value),
    /// Replace a child (PUT).
    Replace(Value),
    /// Merge-patch a child (RFC 7386).
    /// A JSON merge patch of a child.
    Patch {
        /// The child to patch.
        target: ObjectRef,
        /// The merge patch (RFC 7386).
        patch: Value,
    },
    /// Delete a child.
    /// A delete of a child.
    Delete {
        /// The child to delete.
        target: ObjectRef,
        /// How its own dependents go.
        propagation: Propagation,
    },
    /// Set the parent's status (status subresource, only when changed).
    SetStatus(Value),
    /// Record an Event on the parent.
    Event {
        #[serde(rename = "type")]
        /// `Normal` or `Warning`.
        event_type: EventType,
        /// Why, in one CamelCase word.
        reason: String,
        /// What happened, for a person.
        message: String,
    },
    /// Reconcile the parent again after this many milliseconds.
    RequeueAfterMs(u64),
    /// Reconcile the parent again after this many milliseconds, at low
    /// priority (contract 0.4, `prioritized.requeue`): once due, the parent
    /// waits behind fresh changes of other parents, with the host's
    /// start-up and resync passes; it is never starved. For periodic
    /// re-checks that need no promptness. When several requeues are
    /// answered the soonest wins, and of equally soon ones the normal one.
    RequeueLowAfterMs(u64),
    /// The child as the plugin wants it (contract 0.3), applied server-side
    /// by the host with the plugin's own field manager. The children one
    /// reconcile applies are the whole desired set: a child applied earlier
    /// and no longer applied is deleted.
    Apply(Value),
    /// The plugin's cleanup of a parent being deleted is complete.
    Finalized {},
}

impl Action {
    /// A Normal Event.
    pub fn normal(reason: impl Into<String>, message: impl Into<String>) -> Self {
        Action::Event { event_type: EventType::Normal, reason: reason.into(), message: message.into() }
    }

    /// A Warning Event.
    pub fn warning(reason: impl Into<String>, message: impl Into<String>) -> Self {
        Action::Event { event_type: EventType::Warning, reason: reason.into(), message: message.into() }
    }

    /// Requeue after a duration, rounded up to whole milliseconds.
    pub fn requeue_after(after: std::time::Duration) -> Self {
        Action::RequeueAfterMs(whole_millis(after))
    }

    /// Requeue after a duration (rounded up to whole milliseconds) at low
    /// priority: see [`Action::RequeueLowAfterMs`].
    pub fn requeue_low_after(after: std::time::Duration) -> Self {
        Action::RequeueLowAfterMs(whole_millis(after))
    }

    /// Delete with background propagation, as `kubectl delete` does.
    pub fn delete(target: ObjectRef) -> Self {
        Action::Delete { target, propagation: Propagation::Background }
    }
}

fn whole_millis(d: std::time::Duration) -> u64 {
    u64::try_from(d.as_nanos().div_ceil(1_000_000)).unwrap_or(u64::MAX)
}

/// Why a reconcile could not produce actions.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ReconcileError {
    /// UpperCamelCase, e.g. `InvalidSpec`.
    pub reason: String,
    /// What went wrong, for a person.
    pub message: String,
    /// True when calling again later may succeed.
    pub retryable: bool,
}

impl ReconcileError {
    /// An error that may go away by itself (the host backs off and retries).
    pub fn transient(reason: impl Into<String>, message: impl Into<String>) -> Self {
        Self { reason: reason.into(), message: message.into(), retryable: true }
    }

    /// An error only a change of the object can fix.
    pub fn permanent(reason: impl Into<String>, message: impl Into<String>) -> Self {
        Self { reason: reason.into(), message: message.into(), retryable: false }
    }
}

impl std::fmt::Display for ReconcileError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}: {}", self.reason, self.message)
    }
}

impl std::error::Error for ReconcileError {}

/// How a field is wrong, named as the API server's `StatusCause` types.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum FieldErrorKind {
    /// `FieldValueRequired`: the field must be set.
    Required,
    /// `FieldValueInvalid`: the value is malformed or out of range.
    Invalid,
    /// `FieldValueNotSupported`: the value is not one of the allowed ones.
    NotSupported,
    /// `FieldValueForbidden`: the field may not be set or changed.
    Forbidden,
    /// `FieldValueTooLong`: the value is longer than allowed.
    TooLong,
    /// `FieldValueDuplicate`: the value must be unique.
    Duplicate,
}

impl FieldErrorKind {
    /// The `StatusCause.reason` the API server uses for this kind.
    pub fn cause_type(self) -> &'static str {
        match self {
            FieldErrorKind::Required => "FieldValueRequired",
            FieldErrorKind::Invalid => "FieldValueInvalid",
            FieldErrorKind::NotSupported => "FieldValueNotSupported",
            FieldErrorKind::Forbidden => "FieldValueForbidden",
            FieldErrorKind::TooLong => "FieldValueTooLong",
            FieldErrorKind::Duplicate => "FieldValueDuplicate",
        }
    }
}

/// One problem with one field, as the API server reports it in a
/// `StatusCause` and words it in its message (see the [`Display`](#impl-Display-for-FieldError)
/// impl).
///
/// ```
/// use operator_plugin_sdk::FieldError;
///
/// let e = FieldError::invalid("spec.replicas", 20, "must be less than or equal to 10");
/// assert_eq!(e.to_string(), "spec.replicas: Invalid value: 20: must be less than or equal to 10");
/// let e = FieldError::invalid("spec.schedule", "nope", "must be a valid cron schedule");
/// assert_eq!(e.to_string(), r#"spec.schedule: Invalid value: "nope": must be a valid cron schedule"#);
/// ```
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct FieldError {
    /// Path as the API server writes it, e.g. `spec.schedule`.
    pub field: String,
    /// How the field is wrong.
    pub kind: FieldErrorKind,
    /// The offending value as the message prints it (a [`FieldValue`]'s
    /// text: a string quoted, a number or boolean bare).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub value: Option<String>,
    /// What is wrong, e.g. `must be a valid cron schedule`.
    pub detail: String,
}

/// The offending value of a [`FieldError`], printed as the API server prints
/// a `field.Error`'s value: a string quoted (`"nope"`), a number or boolean
/// bare (`20`, `true`).
///
/// ```
/// use operator_plugin_sdk::contract::FieldValue;
///
/// assert_eq!(FieldValue::from("20").text(), r#""20""#);
/// assert_eq!(FieldValue::from(20).text(), "20");
/// assert_eq!(FieldValue::from(false).text(), "false");
/// ```
#[derive(Clone, Debug, PartialEq)]
pub struct FieldValue(String);

impl FieldValue {
    /// The value as the message prints it.
    pub fn text(&self) -> &str {
        &self.0
    }
}

impl From<&str> for FieldValue {
    fn from(s: &str) -> Self {
        Self(format!("{s:?}"))
    }
}

impl From<String> for FieldValue {
    fn from(s: String) -> Self {
        Self::from(s.as_str())
    }
}

impl From<&String> for FieldValue {
    fn from(s: &String) -> Self {
        Self::from(s.as_str())
    }
}

macro_rules! bare_field_values {
    ($($t:ty),*) => {$(
        impl From<$t> for FieldValue {
            fn from(v: $t) -> Self {
                Self(v.to_string())
            }
        }
    )*};
}
bare_field_values!(i8, i16, i32, i64, u8, u16, u32, u64, usize, isize, f32, f64, bool);

/// A JSON value as found in an object: a string quoted, anything else as its
/// JSON text (`5`, `1.5`, `true`, `null`, `[1,2]`).
impl From<&serde_json::Value> for FieldValue {
    fn from(v: &serde_json::Value) -> Self {
        match v {
            serde_json::Value::String(s) => Self::from(s),
            other => Self(other.to_string()),
        }
    }
}

impl FieldError {
    /// `FieldValueInvalid`: the value is malformed or out of range.
    ///
    /// ```
    /// # use operator_plugin_sdk::FieldError;
    /// let e = FieldError::invalid("spec.port", 70000, "must be between 1 and 65535, inclusive");
    /// assert_eq!(e.to_string(), "spec.port: Invalid value: 70000: must be between 1 and 65535, inclusive");
    /// ```
    pub fn invalid(field: impl Into<String>, value: impl Into<FieldValue>, detail: impl Into<String>) -> Self {
        Self { field: field.into(), kind: FieldErrorKind::Invalid, value: Some(value.into().0), detail: detail.into() }
    }

    /// `FieldValueRequired`: the field must be set.
    ///
    /// ```
    /// # use operator_plugin_sdk::FieldError;
    /// assert_eq!(FieldError::required("spec.image", "").to_string(), "spec.image: Required value");
    /// ```
    pub fn required(field: impl Into<String>, detail: impl Into<String>) -> Self {
        Self { field: field.into(), kind: FieldErrorKind::Required, value: None, detail: detail.into() }
    }

    /// `FieldValueNotSupported`: the value is not one of `supported`.
    ///
    /// ```
    /// # use operator_plugin_sdk::FieldError;
    /// let e = FieldError::not_supported("spec.policy", "Sometimes", &["Allow", "Forbid"]);
    /// assert_eq!(e.to_string(), r#"spec.policy: Unsupported value: "Sometimes": supported values: "Allow", "Forbid""#);
    /// ```
    pub fn not_supported(field: impl Into<String>, value: impl Into<FieldValue>, supported: &[&str]) -> Self {
        let list = supported.iter().map(|s| format!("\"{s}\"")).collect::<Vec<_>>().join(", ");
        Self { field: field.into(), kind: FieldErrorKind::NotSupported, value: Some(value.into().0), detail: format!("supported values: {list}") }
    }

    /// `FieldValueTooLong`: longer than `max` bytes. The message leaves the
    /// value out, as the API server's does.
    ///
    /// ```
    /// # use operator_plugin_sdk::FieldError;
    /// let e = FieldError::too_long("spec.greeting", "a very long greeting", 8);
    /// assert_eq!(e.to_string(), "spec.greeting: Too long: must have at most 8 bytes");
    /// ```
    pub fn too_long(field: impl Into<String>, value: impl Into<FieldValue>, max: usize) -> Self {
        Self { field: field.into(), kind: FieldErrorKind::TooLong, value: Some(value.into().0), detail: format!("must have at most {max} bytes") }
    }

    /// `FieldValueForbidden`: the field may not be set or changed.
    ///
    /// ```
    /// # use operator_plugin_sdk::FieldError;
    /// let e = FieldError::forbidden("spec.selector", "may not be changed");
    /// assert_eq!(e.to_string(), "spec.selector: Forbidden: may not be changed");
    /// ```
    pub fn forbidden(field: impl Into<String>, detail: impl Into<String>) -> Self {
        Self { field: field.into(), kind: FieldErrorKind::Forbidden, value: None, detail: detail.into() }
    }
}

/// How `value` is printed: as it is when it is already a [`FieldValue`]'s
/// text (JSON: a quoted string, a number, a boolean, ...), quoted otherwise.
/// Plugins built with an SDK before [`FieldValue`] send strings unquoted and
/// numbers as their digits, which this prints as the API server would, except
/// a string that is itself JSON (`"20"`, `true`), which it prints bare.
fn printed(value: &str) -> std::borrow::Cow<'_, str> {
    if serde_json::from_str::<serde_json::Value>(value).is_ok() { value.into() } else { format!("{value:?}").into() }
}

impl std::fmt::Display for FieldError {
    /// Worded as the API server's `field.Error`: `spec.x: Invalid value: "v": detail`,
    /// `spec.replicas: Invalid value: 20: detail`; `Required`, `Forbidden` and
    /// `TooLong` print no value.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let what = match self.kind {
            FieldErrorKind::Required => "Required value",
            FieldErrorKind::Invalid => "Invalid value",
            FieldErrorKind::NotSupported => "Unsupported value",
            FieldErrorKind::Forbidden => "Forbidden",
            FieldErrorKind::TooLong => "Too long",
            FieldErrorKind::Duplicate => "Duplicate value",
        };
        write!(f, "{}: {what}", self.field)?;
        let prints_value = !matches!(self.kind, FieldErrorKind::Required | FieldErrorKind::Forbidden | FieldErrorKind::TooLong);
        if let Some(v) = self.value.as_deref().filter(|_| prints_value) {
            write!(f, ": {}", printed(v))?;
        }
        if !self.detail.is_empty() {
            write!(f, ": {}", self.detail)?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn actions_serialize_as_one_key_objects() {
        let target = ObjectRef { api_version: "batch/v1".into(), kind: "Job".into(), namespace: "ns".into(), name: "j".into() };
        let cases = vec![
            (Action::Create(json!({"a": 1})), json!({"create": {"a": 1}})),
            (Action::Replace(json!({"a": 1})), json!({"replace": {"a": 1}})),
            (
                Action::Patch { target: target.clone(), patch: json!({"b": 2}) },
                json!({"patch": {"target": {"apiVersion": "batch/v1", "kind": "Job", "namespace": "ns", "name": "j"}, "patch": {"b": 2}}}),
            ),
            (
                Action::Delete { target: target.clone(), propagation: Propagation::Foreground },
                json!({"delete": {"target": {"apiVersion": "batch/v1", "kind": "Job", "namespace": "ns", "name": "j"}, "propagation": "Foreground"}}),
            ),
            (Action::SetStatus(json!({"s": 1})), json!({"setStatus": {"s": 1}})),
            (Action::warning("R", "m"), json!({"event": {"type": "Warning", "reason": "R", "message": "m"}})),
            (Action::RequeueAfterMs(5), json!({"requeueAfterMs": 5})),
            (Action::Finalized {}, json!({"finalized": {}})),
        ];
        for (action, want) in cases {
            assert_eq!(serde_json::to_value(&action).unwrap(), want);
            assert_eq!(serde_json::from_value::<Action>(want).unwrap(), action);
        }
    }

    #[test]
    fn requeue_after_rounds_up_to_whole_milliseconds() {
        assert_eq!(Action::requeue_after(std::time::Duration::from_micros(1500)), Action::RequeueAfterMs(2));
    }

    #[test]
    fn field_errors_read_like_the_api_server() {
        let e = FieldError::invalid("spec.schedule", "bad", "must be a valid cron schedule");
        assert_eq!(e.to_string(), r#"spec.schedule: Invalid value: "bad": must be a valid cron schedule"#);
        assert_eq!(FieldError::required("spec.schedule", "").to_string(), "spec.schedule: Required value");
        assert_eq!(FieldError::invalid("spec.replicas", 20, "d").to_string(), "spec.replicas: Invalid value: 20: d");
        assert_eq!(FieldError::invalid("spec.name", "20", "d").to_string(), r#"spec.name: Invalid value: "20": d"#);
        assert_eq!(FieldError::invalid("spec.on", true, "d").to_string(), "spec.on: Invalid value: true: d");
    }

    #[test]
    fn values_from_plugins_built_before_field_values_print_as_the_api_server_would() {
        let old = |value: &str| FieldError { field: "spec.x".into(), kind: FieldErrorKind::Invalid, value: Some(value.into()), detail: "d".into() };
        assert_eq!(old("bad").to_string(), r#"spec.x: Invalid value: "bad": d"#);
        assert_eq!(old("20").to_string(), "spec.x: Invalid value: 20: d");
        assert_eq!(old("").to_string(), r#"spec.x: Invalid value: "": d"#);
    }

    #[test]
    fn api_version_round_trips_for_core_and_named_groups() {
        assert_eq!(GroupVersionKind::from_api_version("v1", "Pod"), GroupVersionKind::new("", "v1", "Pod"));
        assert_eq!(GroupVersionKind::from_api_version("batch/v1", "Job").api_version(), "batch/v1");
    }
}
