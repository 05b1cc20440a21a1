//! Fault injection for reliability tests: make matching requests fail with a given status
//! (500, 409, 429, ...), wait first (latency, virtual-time friendly), or break watches (an
//! immediate 410 `Expired` ERROR event, or a stream that closes at once). Rules match on verb,
//! group and resource and fire a number of times or forever.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// What a matching request suffers.
#[derive(Debug, Clone, PartialEq)]
pub enum FaultAction {
    /// Answer with this Status instead of serving the request.
    Error {
        /// HTTP code, e.g. 500.
        code: u16,
        /// Status reason, e.g. `InternalError`.
        reason: String,
        /// Status message.
        message: String,
    },
    /// Sleep this long (tokio time), then serve normally.
    Latency(Duration),
    /// Watches: a single ERROR event with a 410 Expired Status (other verbs: a 410 error).
    ExpireWatch,
    /// Watches: the stream closes immediately without events.
    CloseWatch,
}

impl FaultAction {
    /// A 500 InternalError.
    pub fn internal_error() -> Self {
        FaultAction::Error { code: 500, reason: "InternalError".into(), message: "Internal error occurred: injected fault".into() }
    }

    /// A 429 TooManyRequests.
    pub fn too_many_requests() -> Self {
        FaultAction::Error { code: 429, reason: "TooManyRequests".into(), message: "injected fault: too many requests, please try again later".into() }
    }
}

/// One rule.
#[derive(Debug, Clone, PartialEq)]
pub struct Fault {
    /// `get`, `list`, `watch`, `create`, `update`, `patch`, `delete`, `deletecollection`;
    /// `None` = any.
    pub verb: Option<String>,
    /// API group (`""` = core); `None` = any.
    pub group: Option<String>,
    /// Plural resource; `None` = any.
    pub resource: Option<String>,
    /// How many requests it hits; `None` = until cleared.
    pub times: Option<usize>,
    /// What happens.
    pub action: FaultAction,
}

impl Fault {
    /// A rule for `verb` on `group`/`resource` that fires once.
    pub fn once(verb: &str, group: &str, resource: &str, action: FaultAction) -> Self {
        Fault { verb: Some(verb.into()), group: Some(group.into()), resource: Some(resource.into()), times: Some(1), action }
    }
}

/// Handle returned by [`Faults::inject`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FaultId(u64);

/// The fault registry (shared; inject and clear at any time).
#[derive(Debug, Clone, Default)]
pub struct Faults {
    rules: Arc<Mutex<Vec<(FaultId, Fault)>>>,
    next: Arc<AtomicU64>,
}

impl Faults {
    /// Add a rule.
    pub fn inject(&self, fault: Fault) -> FaultId {
        let id = FaultId(self.next.fetch_add(1, Ordering::Relaxed));
        self.rules.lock().unwrap().push((id, fault));
        id
    }

    /// Remove a rule.
    pub fn clear(&self, id: FaultId) {
        self.rules.lock().unwrap().retain(|(i, _)| *i != id);
    }

    /// Remove every rule.
    pub fn clear_all(&self) {
        self.rules.lock().unwrap().clear();
    }

    /// The action for a request, consuming one use of the first matching rule.
    pub fn take(&self, verb: &str, group: &str, resource: &str) -> Option<FaultAction> {
        let mut rules = self.rules.lock().unwrap();
        let pos = rules.iter().position(|(_, f)| {
            f.verb.as_deref().is_none_or(|v| v == verb)
                && f.group.as_deref().is_none_or(|g| g == group)
                && f.resource.as_deref().is_none_or(|r| r == resource)
        })?;
        let action = rules[pos].1.action.clone();
        if let Some(t) = rules[pos].1.times.as_mut() {
            *t -= 1;
            if *t == 0 {
                rules.remove(pos);
            }
        }
        Some(action)
    }
}
