//! A `Plugin`'s status, computed from what the host already reports (the
//! status page's [`status::Plugin`], the reloader's last refusal, the
//! source's problem): no second bookkeeping of what runs. Conditions have
//! the `metav1.Condition` shape:
//! - `Ready`: True while the version the spec names serves (reason: its
//!   state, `Serving`, `Shadowing` or `RolledBack`); False when the source
//!   gives no bytes or its newest version was refused (the reason says which,
//!   the message says why, and an older version may still serve: see
//!   `status.digest`); Unknown while a version the source sent loads.
//! - `Degraded`: True while an older version serves in place of the one the
//!   spec names (refused, rolled back, source gone).
//! - `Staged`: True while `spec.candidate` is shadowed beside it (the message
//!   has the tally), False without a candidate or when it was refused.

use serde_json::{Value, json};

use super::sources::Problem;
use crate::activity::Refused;
use crate::sandbox::Tier;
use crate::status::{self, State};

/// Everything a Plugin's status is computed from.
#[derive(Debug, Default)]
pub struct Inputs<'a> {
    pub generation: Option<i64>,
    pub running: Option<&'a status::Plugin>,
    /// Why the spec cannot be acted on.
    pub invalid: Option<String>,
    pub problem: Option<Problem>,
    pub refusal: Option<Refused>,
    /// Hex digest of the component the source sent last (loading while it is not the one serving).
    pub loading: Option<String>,
    pub has_candidate: bool,
    pub candidate_problem: Option<Problem>,
    pub candidate_refusal: Option<Refused>,
}

/// One condition, without its transition time.
struct Condition {
    type_: &'static str,
    status: &'static str,
    reason: String,
    message: String,
}

fn condition(type_: &'static str, status: &'static str, reason: impl Into<String>, message: impl Into<String>) -> Condition {
    Condition { type_, status, reason: reason.into(), message: message.into() }
}

fn state_name(state: State) -> &'static str {
    match state {
        State::Serving => "Serving",
        State::Shadowing => "Shadowing",
        State::RolledBack => "RolledBack",
    }
}

/// `sha256:` and 12 hex digits.
fn short(digest: &str) -> String {
    let hex = digest.trim_start_matches("sha256:");
    format!("sha256:{}", &hex[..hex.len().min(12)])
}

/// Why the version the spec names does not serve, if it does not: (reason, message).
fn blocked(i: &Inputs) -> Option<(String, String)> {
    if let Some(why) = &i.invalid {
        return Some(("InvalidSpec".into(), why.clone()));
    }
    if let Some(p) = &i.problem {
        return Some((p.reason.into(), p.message.clone()));
    }
    if let Some(r) = &i.refusal {
        let reason = if r.reason == "PluginUntrusted" { "Untrusted" } else { "Refused" };
        return Some((reason.into(), r.message.clone()));
    }
    None
}

fn conditions(i: &Inputs) -> Vec<Condition> {
    let blocked = blocked(i);
    let ready = match (&blocked, i.running) {
        (Some((reason, message)), _) => condition("Ready", "False", reason, message),
        (None, Some(p)) if p.state != State::RolledBack && i.loading.as_deref().is_some_and(|d| d != p.digest.trim_start_matches("sha256:")) => {
            let d = i.loading.as_deref().unwrap_or_default();
            condition("Ready", "Unknown", "Loading", format!("loading {} while {} {} ({}) serves", short(d), p.name, p.version, short(&p.digest)))
        }
        (None, Some(p)) => condition("Ready", "True", state_name(p.state), format!("{} {} ({}) serves", p.name, p.version, short(&p.digest))),
        (None, None) => condition("Ready", "Unknown", "Loading", "waiting for the source's first version"),
    };
    let degraded = match (&blocked, i.running) {
        (Some((reason, _)), Some(p)) => condition(
            "Degraded",
            "True",
            reason,
            format!("{} {} ({}) still serves in place of the version the spec names", p.name, p.version, short(&p.digest)),
        ),
        (None, Some(p)) if p.state == State::RolledBack => {
            let message = match &p.last_rollback {
                Some(r) => format!("rolled back at {} from {} ({}); a new version of the source is loaded again", r.at, short(&r.from), r.cause),
                None => "rolled back".into(),
            };
            condition("Degraded", "True", "RolledBack", message)
        }
        _ => condition("Degraded", "False", "AsExpected", ""),
    };
    let candidate = i.running.and_then(|p| p.candidate.as_ref());
    let staged = if !i.has_candidate {
        condition("Staged", "False", "NoCandidate", "")
    } else if let Some(p) = &i.candidate_problem {
        condition("Staged", "False", p.reason, p.message.clone())
    } else if let Some(r) = &i.candidate_refusal {
        condition("Staged", "False", "Refused", r.message.clone())
    } else if let Some(c) = candidate {
        let message = format!("candidate {} ({}): {} agree, {} differ, {} errors", c.version, short(&c.digest), c.agree, c.differ, c.errors);
        condition("Staged", "True", "Shadowing", message)
    } else {
        condition("Staged", "Unknown", "Loading", "waiting for the candidate's first version")
    };
    vec![ready, degraded, staged]
}

/// The status for `i`; transition times are kept from `previous` (the
/// object's conditions now) where a condition's status did not change.
pub fn desired(i: &Inputs, previous: &[Value], now: &str) -> Value {
    let conditions: Vec<Value> = conditions(i)
        .into_iter()
        .map(|c| {
            let before = previous.iter().find(|p| p["type"] == c.type_ && p["status"] == c.status);
            let since = before.and_then(|p| p["lastTransitionTime"].as_str()).unwrap_or(now);
            let mut v = json!({"type": c.type_, "status": c.status, "reason": c.reason, "message": c.message, "lastTransitionTime": since});
            if let Some(g) = i.generation {
                v["observedGeneration"] = g.into();
            }
            v
        })
        .collect();
    let last_error = blocked(i)
        .map(|(_, m)| m)
        .or_else(|| i.candidate_problem.as_ref().map(|p| p.message.clone()))
        .or_else(|| i.candidate_refusal.as_ref().map(|r| r.message.clone()))
        .or_else(|| i.running.and_then(|p| p.last_error.as_ref()).map(|e| format!("{} on {}: {}: {}", e.at, e.object, e.reason, e.message)));
    let mut s = json!({
        "observedGeneration": i.generation,
        "lastError": last_error,
        "conditions": conditions,
        "id": null, "plugin": null, "version": null, "digest": null, "shortDigest": null,
        "contractVersion": null, "tier": null, "parent": null, "state": null, "candidate": null,
    });
    if let Some(p) = i.running {
        s["id"] = p.id.clone().into();
        s["plugin"] = p.name.clone().into();
        s["version"] = p.version.clone().into();
        s["digest"] = format!("sha256:{}", p.digest.trim_start_matches("sha256:")).into();
        s["shortDigest"] = short(&p.digest).into();
        s["contractVersion"] = p.contract.clone().into();
        s["tier"] = match p.tier {
            Tier::Baseline => "baseline",
            Tier::Optimized => "optimized",
        }
        .into();
        s["parent"] = p.parent.clone().into();
        s["state"] = state_name(p.state).into();
        s["candidate"] = p
            .candidate
            .as_ref()
            .map(
                |c| json!({"version": c.version, "digest": format!("sha256:{}", c.digest), "agree": c.agree, "differ": c.differ, "errors": c.errors}),
            )
            .unwrap_or(Value::Null);
    }
    s
}

/// `status` without its null fields: what the server keeps of a merge
/// patch of [`desired`] (whose nulls remove fields set before).
pub fn without_nulls(status: &Value) -> Value {
    match status {
        Value::Object(m) => Value::Object(m.iter().filter(|(_, v)| !v.is_null()).map(|(k, v)| (k.clone(), without_nulls(v))).collect()),
        other => other.clone(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::activity::{Counts, Queue};

    fn running(state: State) -> status::Plugin {
        status::Plugin {
            id: "plugin/cron".into(),
            name: "cronjob".into(),
            version: "1.0.0".into(),
            digest: "ab".repeat(32),
            contract: "0.2.0".into(),
            tier: Tier::Optimized,
            parent: "batch.tutorial.kubebuilder.io/v1 CronJob".into(),
            state,
            queue: Queue::default(),
            recent: Counts::default(),
            total: Counts::default(),
            last_error: None,
            candidate: None,
            last_rollback: None,
        }
    }

    fn find<'a>(s: &'a Value, type_: &str) -> &'a Value {
        s["conditions"].as_array().unwrap().iter().find(|c| c["type"] == type_).unwrap()
    }

    #[test]
    fn a_serving_plugin_is_ready_with_its_digest() {
        let p = running(State::Serving);
        let s = desired(&Inputs { generation: Some(2), running: Some(&p), ..Inputs::default() }, &[], "T0");
        assert_eq!(s["shortDigest"], "sha256:abababababab");
        assert_eq!(s["digest"], format!("sha256:{}", "ab".repeat(32)));
        assert_eq!(s["state"], "Serving");
        assert_eq!((find(&s, "Ready")["status"].as_str(), find(&s, "Ready")["reason"].as_str()), (Some("True"), Some("Serving")));
        assert_eq!(find(&s, "Degraded")["status"], "False");
        assert_eq!(find(&s, "Ready")["observedGeneration"], 2);
        assert_eq!(s["lastError"], Value::Null);
    }

    #[test]
    fn a_refused_version_is_not_ready_while_the_old_one_serves_and_says_why() {
        let p = running(State::Serving);
        let refusal = Refused { at: "T".into(), reason: "PluginUntrusted".into(), message: "refused: untrusted: bad signature".into() };
        let s = desired(&Inputs { running: Some(&p), refusal: Some(refusal), ..Inputs::default() }, &[], "T0");
        let ready = find(&s, "Ready");
        assert_eq!((ready["status"].as_str(), ready["reason"].as_str()), (Some("False"), Some("Untrusted")));
        assert_eq!(s["lastError"], "refused: untrusted: bad signature");
        assert_eq!(s["shortDigest"], "sha256:abababababab", "the old version still serves");
        assert_eq!(find(&s, "Degraded")["status"], "True");
    }

    #[test]
    fn transition_times_move_only_when_a_condition_changes() {
        let p = running(State::Serving);
        let first = desired(&Inputs { running: Some(&p), ..Inputs::default() }, &[], "T0");
        let same = desired(&Inputs { running: Some(&p), ..Inputs::default() }, first["conditions"].as_array().unwrap(), "T1");
        assert_eq!(same, first);
        let problem = Problem { reason: "SourceUnavailable", message: "gone".into() };
        let changed =
            desired(&Inputs { running: Some(&p), problem: Some(problem), ..Inputs::default() }, first["conditions"].as_array().unwrap(), "T2");
        assert_eq!(find(&changed, "Ready")["lastTransitionTime"], "T2");
        assert_eq!(find(&changed, "Staged")["lastTransitionTime"], "T0");
    }

    #[test]
    fn nothing_loaded_yet_is_unknown_and_an_unusable_oci_source_is_not_ready() {
        let s = desired(&Inputs::default(), &[], "T0");
        assert_eq!(find(&s, "Ready")["status"], "Unknown");
        let oci = Problem { reason: "OciUnavailable", message: "no OCI client".into() };
        let s = desired(&Inputs { problem: Some(oci), ..Inputs::default() }, &[], "T0");
        assert_eq!((find(&s, "Ready")["status"].as_str(), find(&s, "Ready")["reason"].as_str()), (Some("False"), Some("OciUnavailable")));
        assert_eq!(without_nulls(&s).get("digest"), None);
    }
}
