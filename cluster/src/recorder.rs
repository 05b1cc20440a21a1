//! Events the simulated controllers record on the objects they act on, as upstream's event
//! recorder writes them (core/v1, `<name>.<hex nanoseconds>`), so `kubectl describe` and
//! `kubectl get events` show what the controllers did. Unlike upstream, repeats are not
//! folded into one Event with a count.

use super::{builtin, meta_str, opts};
use apiserver::rest::Core;
use serde_json::{Value, json};
use std::sync::atomic::{AtomicU64, Ordering};

/// Keeps two Events of one object written within the same nanosecond apart.
static SEQUENCE: AtomicU64 = AtomicU64::new(0);

/// What an Event is about.
pub(crate) struct Subject<'a> {
    pub obj: &'a Value,
    pub api_version: &'a str,
    pub kind: &'a str,
}

/// Record a `Normal` or `Warning` Event about `subject` from `component`.
pub(crate) fn record(core: &Core, component: &str, subject: Subject<'_>, warning: bool, reason: &str, message: &str) {
    let Subject { obj, api_version, kind } = subject;
    let res = builtin(core, "", "v1", "events");
    let now = core.config.clock.now();
    let nanos = now.timestamp_nanos_opt().unwrap_or_default() as u64 + SEQUENCE.fetch_add(1, Ordering::Relaxed);
    let ts = super::now(core);
    let ns = meta_str(obj, "namespace");
    let event = json!({
        "apiVersion": "v1", "kind": "Event",
        "metadata": {"name": format!("{}.{nanos:x}", meta_str(obj, "name")), "namespace": ns},
        "involvedObject": {
            "apiVersion": api_version, "kind": kind, "namespace": ns, "name": meta_str(obj, "name"),
            "uid": meta_str(obj, "uid"), "resourceVersion": meta_str(obj, "resourceVersion"),
        },
        "reason": reason, "message": message,
        "source": {"component": component},
        "firstTimestamp": ts, "lastTimestamp": ts, "count": 1,
        "type": if warning { "Warning" } else { "Normal" },
        "reportingComponent": component, "reportingInstance": "",
    });
    if let Err(e) = apiserver::rest::wait(core.create(&res, ns, event, &opts(component))) {
        tracing::debug!(error = %e.message, reason, "could not record an Event");
    }
}
