//! In-process admission: mutating and validating hooks registered per (group, kind), called on
//! create and update of the main resource in upstream's order (mutating → schema validation →
//! validating). A webhook rule for the resource does not match its subresources upstream
//! (`cronjobs` does not match `cronjobs/status`), so a hook sees a subresource write only when
//! registered for it: a validating hook registered for `scale` judges the parent after scaling,
//! as a webhook whose rules name `<plural>/scale` judges the Scale it is sent. A refusal
//! is worded as a webhook denial: `admission webhook "NAME" denied the request: ...`.
//!
//! Hooks are async: the request awaits a hook's answer, so a hook that calls out (the host runs
//! a Wasm plugin on the blocking pool) leaves the server's runtime threads free for other
//! requests, as a webhook call over the network would.

use crate::status::{ApiError, Cause};
use futures::future::{BoxFuture, FutureExt};
use serde_json::Value;
use std::sync::{Arc, RwLock};

/// Why a mutating hook refused the request.
#[derive(Debug, Clone, PartialEq)]
pub struct Denial {
    /// HTTP code (values below 400 become 400, as upstream).
    pub code: u16,
    /// Message appended to the webhook prefix.
    pub message: String,
}

impl Denial {
    /// A 400 denial with this message.
    pub fn new(message: impl Into<String>) -> Self {
        Self { code: 400, message: message.into() }
    }
}

/// `(object, old) -> mutated object | denial`, answered by a future the request awaits.
pub type MutateFn = Arc<dyn Fn(Value, Option<Value>) -> BoxFuture<'static, Result<Value, Denial>> + Send + Sync>;
/// `(object, old) -> field causes` (empty = allowed), answered by a future the request awaits.
pub type ValidateFn = Arc<dyn Fn(Value, Option<Value>) -> BoxFuture<'static, Vec<Cause>> + Send + Sync>;

#[derive(Clone)]
enum Hook {
    Mutating(MutateFn),
    Validating(ValidateFn),
}

#[derive(Clone)]
struct Registration {
    name: String,
    group: String,
    kind: String,
    /// Subresources (`scale`) the hook also sees writes of.
    subresources: Vec<String>,
    hook: Hook,
}

/// The hook registry (shared by the server; register at any time).
#[derive(Clone, Default)]
pub struct Admission {
    hooks: Arc<RwLock<Vec<Registration>>>,
}

impl std::fmt::Debug for Admission {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Admission").field("hooks", &self.hooks.read().unwrap().len()).finish()
    }
}

impl Admission {
    /// Register a mutating hook named `name` for objects of `group`/`kind` that answers at once
    /// (an in-memory rule; it runs on the request's task, so it must not block).
    pub fn register_mutating(
        &self,
        name: &str,
        group: &str,
        kind: &str,
        f: impl Fn(&Value, Option<&Value>) -> Result<Value, Denial> + Send + Sync + 'static,
    ) {
        self.register_mutating_async(name, group, kind, move |obj, old| futures::future::ready(f(&obj, old.as_ref())).boxed());
    }

    /// Register a mutating hook named `name` for objects of `group`/`kind` whose answer the
    /// request awaits (a hook that calls out).
    pub fn register_mutating_async(
        &self,
        name: &str,
        group: &str,
        kind: &str,
        f: impl Fn(Value, Option<Value>) -> BoxFuture<'static, Result<Value, Denial>> + Send + Sync + 'static,
    ) {
        self.register(name, group, kind, Hook::Mutating(Arc::new(f)));
    }

    /// Register a validating hook named `name` for objects of `group`/`kind` that answers at
    /// once (an in-memory rule; it runs on the request's task, so it must not block).
    pub fn register_validating(&self, name: &str, group: &str, kind: &str, f: impl Fn(&Value, Option<&Value>) -> Vec<Cause> + Send + Sync + 'static) {
        self.register_validating_async(name, group, kind, move |obj, old| futures::future::ready(f(&obj, old.as_ref())).boxed());
    }

    /// Register a validating hook named `name` for objects of `group`/`kind` whose answer the
    /// request awaits (a hook that calls out).
    pub fn register_validating_async(
        &self,
        name: &str,
        group: &str,
        kind: &str,
        f: impl Fn(Value, Option<Value>) -> BoxFuture<'static, Vec<Cause>> + Send + Sync + 'static,
    ) {
        self.register_validating_async_on(name, group, kind, &[], f);
    }

    /// [`Self::register_validating_async`] for the main resource and `subresources` (`scale`):
    /// on a subresource write the hook gets the whole object after the write, and before it.
    pub fn register_validating_async_on(
        &self,
        name: &str,
        group: &str,
        kind: &str,
        subresources: &[&str],
        f: impl Fn(Value, Option<Value>) -> BoxFuture<'static, Vec<Cause>> + Send + Sync + 'static,
    ) {
        let subresources = subresources.iter().map(|s| s.to_string()).collect();
        self.hooks.write().unwrap().push(Registration {
            name: name.into(),
            group: group.into(),
            kind: kind.into(),
            subresources,
            hook: Hook::Validating(Arc::new(f)),
        });
    }

    fn register(&self, name: &str, group: &str, kind: &str, hook: Hook) {
        self.hooks.write().unwrap().push(Registration { name: name.into(), group: group.into(), kind: kind.into(), subresources: vec![], hook });
    }

    /// Remove every hook registered under `name`.
    pub fn unregister(&self, name: &str) {
        self.hooks.write().unwrap().retain(|r| r.name != name);
    }

    /// The hooks for writes of `group`/`kind`, of its `subresource` when not empty.
    fn matching(&self, group: &str, kind: &str, subresource: &str) -> Vec<Registration> {
        let hooks = self.hooks.read().unwrap();
        let covers = |r: &Registration| subresource.is_empty() || r.subresources.iter().any(|s| s == subresource);
        hooks.iter().filter(|r| r.group == group && r.kind == kind && covers(r)).cloned().collect()
    }

    /// Run mutating hooks in registration order.
    pub async fn mutate(&self, group: &str, kind: &str, obj: Value, old: Option<&Value>) -> Result<Value, ApiError> {
        let mut obj = obj;
        for r in self.matching(group, kind, "") {
            if let Hook::Mutating(f) = &r.hook {
                obj = f(obj, old.cloned()).await.map_err(|d| {
                    let mut e = ApiError::bad_request(format!("admission webhook \"{}\" denied the request: {}", r.name, d.message));
                    e.code = d.code.max(400);
                    e.reason = match e.code {
                        400 => "BadRequest".into(),
                        403 => "Forbidden".into(),
                        _ => String::new(),
                    };
                    e
                })?;
            }
        }
        Ok(obj)
    }

    /// Run the validating hooks of a write of the main resource (`subresource` empty) or of
    /// `subresource`; the first that returns causes refuses with 422 Invalid.
    pub async fn validate(
        &self,
        (group, kind, subresource): (&str, &str, &str),
        name: &str,
        obj: &Value,
        old: Option<&Value>,
    ) -> Result<(), ApiError> {
        for r in self.matching(group, kind, subresource) {
            if let Hook::Validating(f) = &r.hook {
                let causes = f(obj.clone(), old.cloned()).await;
                if !causes.is_empty() {
                    return Err(webhook_denial(&r.name, ApiError::invalid(group, kind, name, causes)));
                }
            }
        }
        Ok(())
    }
}

/// A validating hook's refusal as the real server answers a webhook's: upstream's
/// `webhookerrors.ToStatusErr` keeps the webhook's code (422) and prefixes its message, and a
/// webhook's result (kube's `AdmissionResponse::deny`, as the host answers) has no reason and no
/// details, so kubectl prints `Error from server: admission webhook ... denied the request:
/// Kind.group "name" is invalid: ...` on both servers.
fn webhook_denial(hook: &str, invalid: ApiError) -> ApiError {
    ApiError {
        reason: String::new(),
        message: format!("admission webhook \"{hook}\" denied the request: {}", invalid.message),
        name: None,
        group: None,
        kind: None,
        causes: vec![],
        ..invalid
    }
}
