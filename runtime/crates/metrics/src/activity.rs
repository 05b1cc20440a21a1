//! What the controllers and the reloader did recently, kept by
//! [`crate::Metrics`] for the status page (`operator-plugin-sources`' `status`): the
//! recent reconciles per controller (fed where
//! `controller_runtime_reconcile_total` is counted), the last failed verdict
//! per controller, the last rollback and the last refused version per plugin
//! id, and a queue's counters.
//! Apart from the status page so that the metrics, which keep it, do not
//! import what reads them.

use std::collections::{HashMap, VecDeque};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use chrono::{DateTime, SecondsFormat, Utc};
use serde::{Deserialize, Serialize};

/// How far back "recent" reaches: five minutes, as `kubectl get` ages go.
pub const RECENT: Duration = Duration::from_secs(300);

/// Reconcile records kept per controller: enough for a busy controller's
/// five minutes in bounded memory (older ones fall off first).
const KEPT: usize = 8192;

/// A failed reconcile as its Warning Event reported it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct LastError {
    /// RFC 3339, UTC.
    pub at: String,
    /// `namespace/name` of the parent.
    pub object: String,
    pub reason: String,
    pub message: String,
}

/// An automatic rollback.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Rollback {
    /// RFC 3339, UTC.
    pub at: String,
    /// Digest of the version rolled back (not loaded again until its source changes).
    pub from: String,
    /// Digest of the version serving since.
    pub to: String,
    /// The failure kind most of the bad version's failures had.
    pub cause: String,
}

#[derive(Default)]
struct ControllerActivity {
    /// (when, whether it failed), oldest first.
    recent: VecDeque<(Instant, bool)>,
    total: u64,
    errors: u64,
    last_error: Option<LastError>,
}

/// What the controllers and the reloader did, kept for the plugin status `Snapshot` (operator-plugin-sources).
#[derive(Default)]
pub struct Activity {
    controllers: Mutex<HashMap<String, ControllerActivity>>,
    /// By plugin id.
    rollbacks: Mutex<HashMap<String, Rollback>>,
    /// By plugin id: the newest version its source offered, refused, while
    /// it is still the newest (cleared once the source offers one that runs).
    refusals: Mutex<HashMap<String, Refused>>,
}

/// A version of a plugin the reloader refused (untrusted, not loadable, or
/// refused by the manager): the previous version, if any, still serves.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Refused {
    /// RFC 3339, UTC.
    pub at: String,
    /// `PluginRejected` or `PluginUntrusted`, as the Warning Event's reason.
    pub reason: String,
    pub message: String,
}

impl Activity {
    /// One reconcile of `controller` ended; `failed` as the `error` result.
    pub fn reconciled(&self, controller: &str, failed: bool) {
        self.reconciled_at(controller, failed, Instant::now());
    }

    /// As [`Self::reconciled`], at `at` (tests place reconciles in time).
    pub fn reconciled_at(&self, controller: &str, failed: bool, at: Instant) {
        let mut all = self.controllers.lock().unwrap();
        let c = all.entry(controller.to_string()).or_default();
        if c.recent.len() >= KEPT {
            c.recent.pop_front();
        }
        c.recent.push_back((at, failed));
        c.total += 1;
        c.errors += u64::from(failed);
    }

    /// A reconcile of `object` by `controller` ended with a failed verdict.
    pub fn failed(&self, controller: &str, object: &str, reason: &str, message: &str) {
        let error = LastError { at: rfc3339(Utc::now()), object: object.into(), reason: reason.into(), message: message.into() };
        self.controllers.lock().unwrap().entry(controller.to_string()).or_default().last_error = Some(error);
    }

    /// The plugin running as `id` was rolled back from `from` to `to`.
    pub fn rolled_back(&self, id: &str, from: &str, to: &str, cause: &str) {
        let r = Rollback { at: rfc3339(Utc::now()), from: from.into(), to: to.into(), cause: cause.into() };
        self.rollbacks.lock().unwrap().insert(id.to_string(), r);
    }

    /// The newest version offered for `id` was refused.
    pub fn refused(&self, id: &str, reason: &str, message: &str) {
        let r = Refused { at: rfc3339(Utc::now()), reason: reason.into(), message: message.into() };
        self.refusals.lock().unwrap().insert(id.to_string(), r);
    }

    /// The source of `id` now offers a version that runs (or it is gone).
    pub fn accepted(&self, id: &str) {
        self.refusals.lock().unwrap().remove(id);
    }

    /// The refusal of the newest version offered for `id`, if it was refused.
    pub fn refusal(&self, id: &str) -> Option<Refused> {
        self.refusals.lock().unwrap().get(id).cloned()
    }

    /// The last rollback of each plugin id.
    pub fn rollbacks(&self) -> HashMap<String, Rollback> {
        self.rollbacks.lock().unwrap().clone()
    }

    /// A controller's reconciles in the recent window and in all, and its last error.
    pub fn counts(&self, controller: &str, now: Instant) -> (Counts, Counts, Option<LastError>) {
        let all = self.controllers.lock().unwrap();
        let Some(c) = all.get(controller) else { return Default::default() };
        let since = now.checked_sub(RECENT).unwrap_or(now);
        let mut recent = Counts::default();
        for (_, failed) in c.recent.iter().filter(|(at, _)| *at >= since) {
            recent.reconciles += 1;
            recent.errors += u64::from(*failed);
        }
        (recent, Counts { reconciles: c.total, errors: c.errors }, c.last_error.clone())
    }
}

/// A time as the status page and conditions write it (RFC 3339, seconds, `Z`).
pub fn rfc3339(t: DateTime<Utc>) -> String {
    t.to_rfc3339_opts(SecondsFormat::Secs, true)
}

/// Reconciles and how many of them failed.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Counts {
    pub reconciles: u64,
    pub errors: u64,
}

/// A plugin's workqueue, as `workqueue_*{name}` report it.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Queue {
    /// Keys waiting for a worker now.
    pub depth: u64,
    pub adds: u64,
    pub retries: u64,
}
