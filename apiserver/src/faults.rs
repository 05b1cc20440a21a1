//! Fault injection for reliability tests: make matching requests fail with a given status
//! (500, 409, 429, ...), wait first (latency, virtual-time friendly), or break watches (a 410
//! `Expired` ERROR event on resume, a stream that closes at once or after a while). Rules match
//! on verb, group and resource, fire on a share of the requests they match (drawn from a seeded
//! RNG, so a failing run can be replayed with the same seed) and a number of times or forever.
//! Every rule counts what it injected, so tests can assert that faults really happened.
//!
//! Rules come from Rust ([`Faults::inject`]), from the compact text syntax of [`spec`]
//! (`500:share=0.05`, `drop-watch:every=30s`, ...; `host run --embedded --fault`,
//! `OPERATOR_HOST_FAULTS`), or over HTTP (`/debug/faults`, see [`crate::http`]).

pub mod spec;

pub use spec::{FaultSpec, SpecError, parse_list};

use rand::rngs::StdRng;
use rand::{RngExt, SeedableRng};
use serde_json::{Value, json};
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
    /// Sleep this long (tokio time), then serve normally. Latency rules add up and do not stop
    /// other rules from firing.
    Latency(Duration),
    /// Watches that resume from a resourceVersion (not unset or `0`): a single ERROR event with
    /// a 410 Expired Status, as when the version left upstream's watch cache. Other verbs: a 410
    /// error.
    ExpireWatch,
    /// Watches: the stream closes immediately without events.
    CloseWatch,
    /// Watches: served normally, but the stream is closed after this long (counted when it is).
    DropWatchAfter(Duration),
}

impl FaultAction {
    /// A 500 InternalError.
    pub fn internal_error() -> Self {
        Self::error(500).expect("500 is known")
    }

    /// A 429 TooManyRequests.
    pub fn too_many_requests() -> Self {
        Self::error(429).expect("429 is known")
    }

    /// A 409 Conflict worded as upstream's optimistic-concurrency failure.
    pub fn conflict() -> Self {
        Self::error(409).expect("409 is known")
    }

    /// An error with upstream's reason for `code` (409, 429, 500, 503, 504), or `None` for a code
    /// the injector does not know how to word.
    pub fn error(code: u16) -> Option<Self> {
        let (reason, message) = match code {
            409 => (
                "Conflict",
                "Operation cannot be fulfilled (injected fault): the object has been modified; please apply your changes to the latest version and try again",
            ),
            429 => ("TooManyRequests", "injected fault: too many requests, please try again later"),
            500 => ("InternalError", "Internal error occurred: injected fault"),
            503 => ("ServiceUnavailable", "injected fault: the server is currently unable to handle the request"),
            504 => ("Timeout", "injected fault: the server was unable to return a response in the time allotted"),
            _ => return None,
        };
        Some(FaultAction::Error { code, reason: reason.into(), message: message.into() })
    }

    /// Short name used in counters and `/debug/faults` (`500`, `latency`, `expire-watch`, ...).
    pub fn kind(&self) -> String {
        match self {
            FaultAction::Error { code, .. } => code.to_string(),
            FaultAction::Latency(_) => "latency".into(),
            FaultAction::ExpireWatch => "expire-watch".into(),
            FaultAction::CloseWatch => "close-watch".into(),
            FaultAction::DropWatchAfter(_) => "drop-watch".into(),
        }
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

    /// A rule for every request (any verb, group and resource), until cleared.
    pub fn always(action: FaultAction) -> Self {
        Fault { verb: None, group: None, resource: None, times: None, action }
    }

    fn matches(&self, req: &RequestInfo<'_>) -> bool {
        let verb_ok = match self.verb.as_deref() {
            None => true,
            // `write` stands for every verb that changes state.
            Some("write") => is_write(req.verb),
            Some(v) => v == req.verb,
        };
        let watch_ok = match self.action {
            FaultAction::ExpireWatch => req.verb != "watch" || req.resuming,
            FaultAction::CloseWatch | FaultAction::DropWatchAfter(_) => req.verb == "watch",
            _ => true,
        };
        verb_ok && watch_ok && self.group.as_deref().is_none_or(|g| g == req.group) && self.resource.as_deref().is_none_or(|r| r == req.resource)
    }
}

/// Whether a verb changes state (what `verb=write` matches).
pub fn is_write(verb: &str) -> bool {
    matches!(verb, "create" | "update" | "patch" | "delete" | "deletecollection")
}

/// Handle returned by [`Faults::inject`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct FaultId(u64);

impl FaultId {
    /// The number shown in `/debug/faults`.
    pub fn get(self) -> u64 {
        self.0
    }

    /// The id with this number (as `/debug/faults` shows it).
    pub fn from_raw(id: u64) -> Self {
        FaultId(id)
    }
}

/// The request a rule is matched against.
#[derive(Debug, Clone, Copy)]
pub struct RequestInfo<'a> {
    /// Verb (see [`Fault::verb`]).
    pub verb: &'a str,
    /// API group.
    pub group: &'a str,
    /// Plural resource.
    pub resource: &'a str,
    /// A watch from a resourceVersion (not unset or `0`).
    pub resuming: bool,
}

/// What to do with one request: wait, then maybe fail or break the watch.
#[derive(Debug, Clone, Default)]
pub struct Decision {
    /// Sum of the matching latency rules.
    pub latency: Duration,
    /// The first error or watch-breaking rule that fired.
    pub action: Option<FaultAction>,
    /// A watch to close after this long; call [`Faults::count`] with the id when it happens.
    pub drop_watch: Option<(FaultId, Duration)>,
}

struct Rule {
    id: FaultId,
    fault: Fault,
    /// Probability of firing on a match (1.0 = always).
    share: f64,
    /// The rule as text (its spec, or a description of a Rust-made rule).
    text: String,
    rng: StdRng,
    injected: u64,
    matched: u64,
}

impl Rule {
    fn exhausted(&self) -> bool {
        self.fault.times == Some(0)
    }

    fn to_json(&self) -> Value {
        json!({
            "id": self.id.0,
            "spec": self.text,
            "kind": self.fault.action.kind(),
            "share": self.share,
            "remaining": self.fault.times,
            "active": !self.exhausted(),
            "matched": self.matched,
            "injected": self.injected,
        })
    }
}

#[derive(Default)]
struct Inner {
    rules: Vec<Rule>,
    seed: u64,
}

/// The fault registry (shared; inject and clear at any time).
#[derive(Clone, Default)]
pub struct Faults {
    inner: Arc<Mutex<Inner>>,
    next: Arc<AtomicU64>,
}

impl std::fmt::Debug for Faults {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Faults").field("rules", &self.inner.lock().unwrap().rules.len()).finish()
    }
}

impl Faults {
    /// Seed for the RNG of rules added from now on (each rule draws from its own generator,
    /// seeded with this seed and the rule's id, so rules do not disturb each other's draws).
    /// Default 0.
    pub fn set_seed(&self, seed: u64) {
        self.inner.lock().unwrap().seed = seed;
    }

    /// Add a rule that fires on every match.
    pub fn inject(&self, fault: Fault) -> FaultId {
        let text = describe(&fault);
        self.add(fault, 1.0, text)
    }

    /// Add a rule that fires on `share` (0..=1) of its matches.
    pub fn inject_share(&self, fault: Fault, share: f64) -> FaultId {
        let text = format!("{}, share={share}", describe(&fault));
        self.add(fault, share, text)
    }

    /// Add a rule parsed from the text syntax (see [`FaultSpec`]: `kind[:param=value,...]`).
    pub fn inject_spec(&self, spec: &FaultSpec) -> FaultId {
        self.add(spec.fault.clone(), spec.share, spec.text.clone())
    }

    fn add(&self, fault: Fault, share: f64, text: String) -> FaultId {
        let id = FaultId(self.next.fetch_add(1, Ordering::Relaxed) + 1);
        let mut inner = self.inner.lock().unwrap();
        let rng = StdRng::seed_from_u64(inner.seed ^ id.0.wrapping_mul(0x9E37_79B9_7F4A_7C15));
        inner.rules.push(Rule { id, fault, share: share.clamp(0.0, 1.0), text, rng, injected: 0, matched: 0 });
        id
    }

    /// Remove a rule; `false` if there was none with this id.
    pub fn clear(&self, id: FaultId) -> bool {
        let mut inner = self.inner.lock().unwrap();
        let before = inner.rules.len();
        inner.rules.retain(|r| r.id != id);
        inner.rules.len() != before
    }

    /// Remove every rule (and its counters).
    pub fn clear_all(&self) {
        self.inner.lock().unwrap().rules.clear();
    }

    /// How many times a rule injected its fault (0 for an unknown or cleared rule).
    pub fn injected(&self, id: FaultId) -> u64 {
        self.inner.lock().unwrap().rules.iter().find(|r| r.id == id).map_or(0, |r| r.injected)
    }

    /// Faults injected by every current rule.
    pub fn injected_total(&self) -> u64 {
        self.inner.lock().unwrap().rules.iter().map(|r| r.injected).sum()
    }

    /// Record that a deferred fault (a dropped watch) happened.
    pub fn count(&self, id: FaultId) {
        if let Some(r) = self.inner.lock().unwrap().rules.iter_mut().find(|r| r.id == id) {
            r.injected += 1;
        }
    }

    /// The rules and their counters, as `GET /debug/faults` shows them.
    pub fn to_json(&self) -> Value {
        let inner = self.inner.lock().unwrap();
        let total: u64 = inner.rules.iter().map(|r| r.injected).sum();
        json!({
            "seed": inner.seed,
            "injected": total,
            "rules": inner.rules.iter().map(Rule::to_json).collect::<Vec<_>>(),
        })
    }

    /// The action for a request, consuming one use of the first matching rule (the behaviour
    /// of the original API; latency rules are applied by [`Faults::decide`] only).
    pub fn take(&self, verb: &str, group: &str, resource: &str) -> Option<FaultAction> {
        let d = self.decide(&RequestInfo { verb, group, resource, resuming: true });
        d.action.or((!d.latency.is_zero()).then_some(FaultAction::Latency(d.latency)))
    }

    /// What happens to one request: every matching latency rule adds its delay, the first
    /// error or watch rule that fires (by its share) decides the answer. Counts what fired.
    pub fn decide(&self, req: &RequestInfo<'_>) -> Decision {
        let mut inner = self.inner.lock().unwrap();
        let mut d = Decision::default();
        for rule in inner.rules.iter_mut() {
            if rule.exhausted() || !rule.fault.matches(req) {
                continue;
            }
            let is_latency = matches!(rule.fault.action, FaultAction::Latency(_));
            let is_drop = matches!(rule.fault.action, FaultAction::DropWatchAfter(_));
            if !is_latency && (d.action.is_some() || (is_drop && d.drop_watch.is_some())) {
                continue;
            }
            rule.matched += 1;
            if rule.share < 1.0 && !rule.rng.random_bool(rule.share) {
                continue;
            }
            if let Some(t) = rule.fault.times.as_mut() {
                *t -= 1;
            }
            match &rule.fault.action {
                FaultAction::Latency(l) => {
                    d.latency += *l;
                    rule.injected += 1;
                }
                // Counted when the watch is actually dropped.
                FaultAction::DropWatchAfter(after) => d.drop_watch = Some((rule.id, *after)),
                other => {
                    d.action = Some(other.clone());
                    rule.injected += 1;
                }
            }
        }
        d
    }
}

fn describe(f: &Fault) -> String {
    let mut s = match &f.action {
        FaultAction::Latency(d) => format!("latency:{}", spec::format_duration(*d)),
        FaultAction::DropWatchAfter(d) => format!("drop-watch:every={}", spec::format_duration(*d)),
        other => other.kind(),
    };
    for (k, v) in [("verb", &f.verb), ("group", &f.group), ("resource", &f.resource)] {
        if let Some(v) = v {
            s.push_str(&format!(",{k}={v}"));
        }
    }
    if let Some(t) = f.times {
        s.push_str(&format!(",count={t}"));
    }
    s.replacen(',', ":", usize::from(!s.contains(':')))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn req<'a>(verb: &'a str, resource: &'a str) -> RequestInfo<'a> {
        RequestInfo { verb, group: "", resource, resuming: true }
    }

    #[test]
    fn a_share_is_reproducible_with_the_same_seed_and_close_to_its_rate() {
        let run = |seed| {
            let f = Faults::default();
            f.set_seed(seed);
            f.inject_share(Fault::always(FaultAction::internal_error()), 0.25);
            (0..400).map(|_| f.decide(&req("get", "pods")).action.is_some()).collect::<Vec<_>>()
        };
        assert_eq!(run(7), run(7));
        assert_ne!(run(7), run(8));
        let hits = run(7).iter().filter(|h| **h).count();
        assert!((60..=140).contains(&hits), "{hits} of 400 at share 0.25");
    }

    #[test]
    fn latencies_add_up_and_do_not_hide_an_error() {
        let f = Faults::default();
        f.inject(Fault::always(FaultAction::Latency(Duration::from_millis(10))));
        f.inject(Fault::always(FaultAction::Latency(Duration::from_millis(5))));
        let e = f.inject(Fault::once("get", "", "pods", FaultAction::internal_error()));
        let d = f.decide(&req("get", "pods"));
        assert_eq!(d.latency, Duration::from_millis(15));
        assert!(d.action.is_some());
        assert_eq!(f.injected(e), 1);
        assert!(f.decide(&req("get", "pods")).action.is_none(), "a once-rule is spent");
        assert_eq!(f.injected_total(), 4 + 1);
    }

    #[test]
    fn expire_watch_only_hits_resuming_watches() {
        let f = Faults::default();
        let id = f.inject(Fault::always(FaultAction::ExpireWatch));
        assert!(f.decide(&RequestInfo { verb: "watch", group: "", resource: "pods", resuming: false }).action.is_none());
        assert!(f.decide(&req("watch", "pods")).action.is_some());
        assert_eq!(f.injected(id), 1);
    }

    #[test]
    fn write_matches_every_changing_verb() {
        let f = Faults::default();
        f.inject(Fault { verb: Some("write".into()), ..Fault::always(FaultAction::conflict()) });
        assert!(f.decide(&req("get", "pods")).action.is_none());
        for v in ["create", "update", "patch", "delete"] {
            assert!(f.decide(&req(v, "pods")).action.is_some(), "{v}");
        }
    }
}
