//! The text syntax of fault rules, for flags, environment variables and `POST /debug/faults`:
//!
//! ```text
//! SPEC   := KIND [":" PARAM ("," PARAM)*]
//! KIND   := 409 | 429 | 500 | 503 | 504          an error answer instead of the request
//!         | latency                              wait first (needs a duration)
//!         | drop-watch                           close watch streams after `every`
//!         | expire-watch                         410 Expired to watches that resume from a resourceVersion
//!         | close-watch                          watch streams close at once
//! PARAM  := share=0.05        fire on this share (0..1) of matching requests (default 1)
//!         | verb=update       get|list|watch|create|update|patch|delete|deletecollection|write (default any;
//!                             409 defaults to `write`, the watch kinds to `watch`)
//!         | group=apps        API group (`core` or empty for the core group)
//!         | resource=pods     plural resource
//!         | count=3           fire this many times, then stop (default: until cleared)
//!         | every=30s         drop-watch: how long each watch lives
//!         | 50ms              latency: the delay (also `delay=50ms`)
//! DURATION := the flags' syntax (humantime): 50ms, 30s, 2m, 1m30s
//! LIST   := SPEC (";" SPEC)*  (OPERATOR_HOST_FAULTS)
//! ```
//!
//! Examples: `500:share=0.05`, `409:share=0.1,verb=update`, `drop-watch:every=30s`,
//! `expire-watch`, `latency:50ms,resource=pods`.

use super::{Fault, FaultAction};
use std::time::Duration;

/// A parsed rule: the [`Fault`], its share and its text.
#[derive(Debug, Clone, PartialEq)]
pub struct FaultSpec {
    /// The rule.
    pub fault: Fault,
    /// Share of matching requests it fires on (0..=1).
    pub share: f64,
    /// The text it was parsed from (trimmed).
    pub text: String,
}

/// Why a spec does not parse; the message names the spec and what was expected.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SpecError {
    /// Nothing but whitespace.
    #[error("empty fault spec (expected e.g. `500:share=0.05` or `drop-watch:every=30s`)")]
    Empty,
    /// The part before `:` is not a known kind.
    #[error("fault spec `{spec}`: unknown kind `{kind}` (expected 409, 429, 500, 503, 504, latency, drop-watch, expire-watch or close-watch)")]
    UnknownKind {
        /// The whole spec.
        spec: String,
        /// The kind given.
        kind: String,
    },
    /// A parameter is unknown, malformed or out of range.
    #[error("fault spec `{spec}`: {problem}")]
    BadParam {
        /// The whole spec.
        spec: String,
        /// What is wrong.
        problem: String,
    },
}

const VERBS: &[&str] = &["get", "list", "watch", "create", "update", "patch", "delete", "deletecollection", "write"];

impl std::str::FromStr for FaultSpec {
    type Err = SpecError;

    fn from_str(s: &str) -> Result<Self, SpecError> {
        parse(s)
    }
}

/// Parse one spec.
pub fn parse(text: &str) -> Result<FaultSpec, SpecError> {
    let text = text.trim();
    if text.is_empty() {
        return Err(SpecError::Empty);
    }
    let bad = |problem: String| SpecError::BadParam { spec: text.to_string(), problem };
    let (kind, params) = text.split_once(':').unwrap_or((text, ""));
    let kind = kind.trim();
    let mut action = match kind {
        "latency" => FaultAction::Latency(Duration::ZERO),
        "drop-watch" => FaultAction::DropWatchAfter(Duration::ZERO),
        "expire-watch" => FaultAction::ExpireWatch,
        "close-watch" => FaultAction::CloseWatch,
        code => code
            .parse::<u16>()
            .ok()
            .and_then(FaultAction::error)
            .ok_or_else(|| SpecError::UnknownKind { spec: text.to_string(), kind: kind.to_string() })?,
    };
    let mut fault = Fault::always(action.clone());
    match kind {
        "409" => fault.verb = Some("write".into()), // a conflict is an answer to a write
        "drop-watch" | "expire-watch" | "close-watch" => fault.verb = Some("watch".into()),
        _ => {}
    }
    let mut share = 1.0;
    let mut duration = None;
    for param in params.split(',').map(str::trim).filter(|p| !p.is_empty()) {
        let (key, value) = match param.split_once('=') {
            Some((k, v)) => (k.trim(), v.trim()),
            None if kind == "latency" => ("delay", param),
            None => return Err(bad(format!("parameter `{param}` is not key=value"))),
        };
        match key {
            "share" => {
                share = value
                    .parse::<f64>()
                    .ok()
                    .filter(|s| (0.0..=1.0).contains(s))
                    .ok_or_else(|| bad(format!("share `{value}` is not a number between 0 and 1")))?;
            }
            "verb" => {
                if !VERBS.contains(&value) {
                    return Err(bad(format!("verb `{value}` is not one of {}", VERBS.join(", "))));
                }
                fault.verb = Some(value.to_string());
            }
            "group" => fault.group = Some(if value == "core" { String::new() } else { value.to_string() }),
            "resource" => fault.resource = Some(value.to_string()),
            "count" => {
                let n = value.parse::<usize>().ok().filter(|n| *n > 0).ok_or_else(|| bad(format!("count `{value}` is not a positive integer")))?;
                fault.times = Some(n);
            }
            "every" | "delay" if (key, kind) == ("every", "drop-watch") || (key, kind) == ("delay", "latency") => {
                // The flags' syntax (humantime), so `1m30s` works here as in `--resync`.
                let d = operator_clock::parse_duration(value)
                    .ok()
                    .filter(|d| !d.is_zero() || kind == "latency")
                    .ok_or_else(|| bad(format!("{key} `{value}` is not a duration (e.g. 50ms, 30s, 2m, 1m30s)")))?;
                duration = Some(d);
            }
            other => return Err(bad(format!("unknown parameter `{other}` for {kind}"))),
        }
    }
    match &mut action {
        FaultAction::Latency(d) => *d = duration.ok_or_else(|| bad("latency needs a duration, e.g. `latency:50ms`".into()))?,
        FaultAction::DropWatchAfter(d) => {
            *d = duration.ok_or_else(|| bad("drop-watch needs `every=DURATION`, e.g. `drop-watch:every=30s`".into()))?
        }
        _ => {}
    }
    fault.action = action;
    Ok(FaultSpec { fault, share, text: text.to_string() })
}

/// Parse a `;`-separated list (empty entries are skipped).
pub fn parse_list(text: &str) -> Result<Vec<FaultSpec>, SpecError> {
    text.split(';').filter(|s| !s.trim().is_empty()).map(parse).collect()
}

/// `50ms`, `30s`, `1.5s` (how specs show durations).
pub fn format_duration(d: Duration) -> String {
    if d.subsec_millis() != 0 || d.is_zero() {
        if d.as_millis() < 1000 {
            return format!("{}ms", d.as_millis());
        }
        return format!("{}s", d.as_secs_f64());
    }
    format!("{}s", d.as_secs())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_documented_examples_parse() {
        let s = parse("500:share=0.05").unwrap();
        assert_eq!((s.fault.action.kind().as_str(), s.share, s.fault.verb.as_deref()), ("500", 0.05, None));
        let s = parse("409:share=0.1,verb=update").unwrap();
        assert_eq!((s.fault.verb.as_deref(), s.share), (Some("update"), 0.1));
        assert_eq!(parse("409").unwrap().fault.verb.as_deref(), Some("write"));
        assert_eq!(parse("drop-watch:every=30s").unwrap().fault.action, FaultAction::DropWatchAfter(Duration::from_secs(30)));
        // The flags' syntax: compound durations the hand-written parser refused.
        assert_eq!(parse("drop-watch:every=1m30s").unwrap().fault.action, FaultAction::DropWatchAfter(Duration::from_secs(90)));
        assert_eq!(parse("latency:1s500ms").unwrap().fault.action, FaultAction::Latency(Duration::from_millis(1500)));
        assert_eq!(parse("expire-watch").unwrap().fault.action, FaultAction::ExpireWatch);
        let s = parse("latency:50ms,resource=pods").unwrap();
        assert_eq!(s.fault.action, FaultAction::Latency(Duration::from_millis(50)));
        assert_eq!(s.fault.resource.as_deref(), Some("pods"));
        let s = parse("500:group=core,resource=configmaps,count=2").unwrap();
        assert_eq!((s.fault.group.as_deref(), s.fault.times), (Some(""), Some(2)));
        assert_eq!(parse_list("500:share=0.5; ;latency:1s").unwrap().len(), 2);
    }

    #[test]
    fn bad_specs_say_what_is_wrong() {
        let msg = |s: &str| parse(s).unwrap_err().to_string();
        assert!(msg("418").contains("unknown kind `418`"), "{}", msg("418"));
        assert!(msg("500:share=2").contains("share `2` is not a number between 0 and 1"));
        assert!(msg("500:verb=frob").contains("verb `frob` is not one of"));
        assert!(msg("drop-watch").contains("drop-watch needs `every=DURATION`"));
        assert!(msg("drop-watch:every=soon").contains("every `soon` is not a duration"));
        assert!(msg("latency").contains("latency needs a duration"));
        assert!(msg("500:every=1s").contains("unknown parameter `every` for 500"));
        assert!(msg("500:count=0").contains("count `0` is not a positive integer"));
        assert!(msg("500:oops").contains("parameter `oops` is not key=value"));
        assert_eq!(parse("  "), Err(SpecError::Empty));
    }
}
