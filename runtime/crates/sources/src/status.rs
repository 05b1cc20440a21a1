//! The host's state at a glance: per plugin its version (digest, contract,
//! compile tier), whether it serves alone, beside a staged candidate or after
//! a rollback, its queue, its reconciles and errors in the last minutes and
//! its last error. `host status` prints it; the metrics port serves it as
//! JSON at `/status`.
//!
//! Three parts:
//! 1. [`Activity`], kept by [`Metrics`]: the recent reconciles per controller
//!    (fed where `controller_runtime_reconcile_total` is counted), the last
//!    failed verdict per controller, and the last rollback per plugin id.
//! 2. [`Source`]: what the running host knows besides (the plugins by id, the
//!    staged candidates), set on the metrics once the manager runs.
//! 3. [`Snapshot`]: the JSON document, versioned by [`API_VERSION`]. Fields
//!    are only ever added, so scripts may read it.

use std::time::Instant;

use chrono::Utc;
use serde::{Deserialize, Serialize};

use crate::activity::rfc3339;
pub use crate::activity::{Activity, Counts, LastError, Queue, RECENT, Rollback};
use crate::hotswap::shadow::Shadows;
use crate::metrics::Metrics;
use crate::registry::Registry;
use crate::sandbox::Tier;

/// The `apiVersion` of [`Snapshot`].
pub const API_VERSION: &str = "operator-host.dev/status/v1";

/// How a plugin serves now.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum State {
    /// Its answers are the ones written.
    Serving,
    /// It serves, and a staged candidate runs every reconcile again beside it.
    Shadowing,
    /// It serves again after a newer version failed and was rolled back.
    RolledBack,
}

impl State {
    pub fn as_str(self) -> &'static str {
        match self {
            State::Serving => "serving",
            State::Shadowing => "shadowing",
            State::RolledBack => "rolled-back",
        }
    }
}

/// A staged candidate and what its shadow runs found so far.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Candidate {
    pub version: String,
    pub digest: String,
    pub agree: u64,
    pub differ: u64,
    pub errors: u64,
    /// Reconciles not shadowed because every slot was busy.
    pub skipped: u64,
}

/// One plugin running as a controller.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Plugin {
    /// Where it came from: a file path or `configmap/NAMESPACE/NAME/KEY`.
    pub id: String,
    /// The controller name (the `controller` label of its metrics).
    pub name: String,
    pub version: String,
    /// SHA-256 of the component, hex (as `host inspect -o json` prints it).
    pub digest: String,
    /// The `operator:plugin` contract version it was built against.
    pub contract: String,
    /// `baseline` (Winch) or `optimized` (Cranelift).
    pub tier: Tier,
    /// `group/version Kind` of its parent.
    pub parent: String,
    pub state: State,
    pub queue: Queue,
    /// In the last [`RECENT`].
    pub recent: Counts,
    /// Since the host started.
    pub total: Counts,
    pub last_error: Option<LastError>,
    pub candidate: Option<Candidate>,
    pub last_rollback: Option<Rollback>,
}

/// What `/status` serves and `host status -o json` prints.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Snapshot {
    pub api_version: String,
    /// RFC 3339, UTC.
    pub time: String,
    /// What "recent" covers, in seconds.
    pub recent_seconds: u64,
    /// The leases this process takes part in, by name: whether it leads each.
    pub leader_election: Vec<Lease>,
    /// Ordered by id.
    pub plugins: Vec<Plugin>,
}

/// `leader_election_master_status{name}`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Lease {
    pub name: String,
    pub leading: bool,
}

/// What the running host knows beyond the metrics.
#[derive(Clone)]
pub struct Source {
    /// The plugins by id.
    pub registry: Registry,
    /// The staged candidates.
    pub shadows: Option<Shadows>,
}

impl crate::metrics::StatusSource for Source {
    fn snapshot_json(&self, metrics: &Metrics) -> serde_json::Value {
        serde_json::to_value(self.snapshot(metrics)).expect("a snapshot serializes")
    }
}

impl Source {
    /// The state now.
    pub fn snapshot(&self, metrics: &Metrics) -> Snapshot {
        let now = Instant::now();
        let activity = &metrics.activity;
        let rollbacks = activity.rollbacks();
        let plugins = self
            .registry
            .by_id()
            .into_iter()
            .map(|(id, p)| {
                let name = p.name().to_string();
                let (recent, total, last_error) = activity.counts(&name, now);
                let candidate = self.shadows.as_ref().and_then(|s| s.staged_for(&id)).map(|(c, tally)| Candidate {
                    version: c.manifest().version.clone(),
                    digest: c.info().digest.clone(),
                    agree: tally.agree,
                    differ: tally.differ,
                    errors: tally.errors,
                    skipped: tally.skipped,
                });
                // A rollback counts only while the version it went back to serves.
                let last_rollback = rollbacks.get(&id).filter(|r| r.to == p.info().digest).cloned();
                let state = match (&candidate, &last_rollback) {
                    (Some(_), _) => State::Shadowing,
                    (None, Some(_)) => State::RolledBack,
                    (None, None) => State::Serving,
                };
                let parent = &p.manifest().parent;
                Plugin {
                    id,
                    version: p.manifest().version.clone(),
                    digest: p.info().digest.clone(),
                    contract: p.info().contract_version.clone(),
                    tier: p.tier(),
                    parent: format!("{} {}", parent.api_version(), parent.kind),
                    state,
                    queue: metrics.queue(&name).unwrap_or_default(),
                    recent,
                    total,
                    last_error,
                    candidate,
                    last_rollback,
                    name,
                }
            })
            .collect();
        Snapshot {
            api_version: API_VERSION.into(),
            time: rfc3339(Utc::now()),
            recent_seconds: RECENT.as_secs(),
            leader_election: metrics.leases().into_iter().map(|(name, leading)| Lease { name, leading }).collect(),
            plugins,
        }
    }
}

impl Snapshot {
    /// The table `host status` prints in a terminal: one line per plugin, then
    /// what needs attention (candidates, rollbacks, last errors) below it.
    pub fn table(&self) -> String {
        let header = ["PLUGIN", "VERSION", "DIGEST", "CONTRACT", "TIER", "STATE", "QUEUE", "RECONCILES(5m)", "ERRORS(5m)", "LAST ERROR"];
        let mut rows: Vec<Vec<String>> = vec![header.iter().map(|h| h.to_string()).collect()];
        for p in &self.plugins {
            rows.push(vec![
                p.name.clone(),
                p.version.clone(),
                short_digest(&p.digest),
                p.contract.clone(),
                match p.tier {
                    Tier::Baseline => "baseline".into(),
                    Tier::Optimized => "optimized".into(),
                },
                p.state.as_str().into(),
                p.queue.depth.to_string(),
                p.recent.reconciles.to_string(),
                p.recent.errors.to_string(),
                p.last_error.as_ref().map_or_else(|| "-".into(), |e| format!("{} {} {}", e.at, e.object, e.reason)),
            ]);
        }
        let widths: Vec<usize> = (0..header.len()).map(|i| rows.iter().map(|r| r[i].chars().count()).max().unwrap_or(0)).collect();
        let mut out = String::new();
        for row in &rows {
            let cells: Vec<String> = row.iter().zip(&widths).map(|(c, w)| format!("{c:<w$}")).collect();
            out.push_str(cells.join("   ").trim_end());
            out.push('\n');
        }
        for l in &self.leader_election {
            out.push_str(&format!("\nleader election {}: {}\n", l.name, if l.leading { "leading" } else { "standing by" }));
        }
        for p in &self.plugins {
            if let Some(c) = &p.candidate {
                out.push_str(&format!(
                    "\n{}: candidate {} ({}) staged: {} agree, {} differ, {} errors, {} not shadowed (busy)\n",
                    p.name,
                    c.version,
                    short_digest(&c.digest),
                    c.agree,
                    c.differ,
                    c.errors,
                    c.skipped
                ));
            }
            if let Some(r) = &p.last_rollback {
                out.push_str(&format!(
                    "\n{}: rolled back at {} from {} to {} ({})\n",
                    p.name,
                    r.at,
                    short_digest(&r.from),
                    short_digest(&r.to),
                    r.cause
                ));
            }
            if let Some(e) = &p.last_error {
                out.push_str(&format!("\n{}: last error at {} on {}: {}: {}\n", p.name, e.at, e.object, e.reason, e.message));
            }
        }
        out
    }
}

/// `sha256:` and the first 12 hex digits, as `host inspect` and the swap log show a digest.
fn short_digest(digest: &str) -> String {
    let hex = digest.trim_start_matches("sha256:");
    format!("sha256:{}", &hex[..hex.len().min(12)])
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn recent_counts_leave_out_reconciles_older_than_the_window() {
        let a = Activity::default();
        let now = Instant::now();
        let long_ago = now.checked_sub(RECENT + Duration::from_secs(1)).expect("the clock runs long enough");
        a.reconciled_at("cronjob", true, long_ago);
        a.reconciled_at("cronjob", false, now);
        a.reconciled_at("cronjob", true, now);
        let (recent, total, last) = a.counts("cronjob", now);
        assert_eq!(recent, Counts { reconciles: 2, errors: 1 });
        assert_eq!(total, Counts { reconciles: 3, errors: 2 });
        assert_eq!(last, None, "no verdict was reported");
        assert_eq!(a.counts("other", now).1, Counts::default());
    }

    #[test]
    fn the_last_failed_verdict_is_kept_per_controller() {
        let a = Activity::default();
        a.failed("cronjob", "default/a", "PluginError", "first");
        a.failed("cronjob", "default/b", "ActionRefused", "second");
        let (_, _, last) = a.counts("cronjob", Instant::now());
        let last = last.unwrap();
        assert_eq!((last.object.as_str(), last.reason.as_str(), last.message.as_str()), ("default/b", "ActionRefused", "second"));
    }

    #[test]
    fn the_table_has_a_line_per_plugin_and_the_details_below() {
        let snapshot = Snapshot {
            api_version: API_VERSION.into(),
            time: "2026-01-01T00:00:00Z".into(),
            recent_seconds: 300,
            leader_election: vec![Lease { name: "operator-host".into(), leading: true }],
            plugins: vec![Plugin {
                id: "cronjob.wasm".into(),
                name: "cronjob".into(),
                version: "0.1.0".into(),
                digest: format!("sha256:{}", "ab".repeat(32)),
                contract: "0.2.0".into(),
                tier: Tier::Optimized,
                parent: "batch.tutorial.kubebuilder.io/v1 CronJob".into(),
                state: State::Serving,
                queue: Queue { depth: 3, adds: 10, retries: 1 },
                recent: Counts { reconciles: 7, errors: 1 },
                total: Counts { reconciles: 9, errors: 1 },
                last_error: Some(LastError {
                    at: "2026-01-01T00:00:00Z".into(),
                    object: "default/x".into(),
                    reason: "PluginError".into(),
                    message: "boom".into(),
                }),
                candidate: None,
                last_rollback: None,
            }],
        };
        let table = snapshot.table();
        let lines: Vec<&str> = table.lines().collect();
        assert!(lines[0].starts_with("PLUGIN "), "{table}");
        let row: Vec<&str> = lines[1].split_whitespace().collect();
        assert_eq!(&row[..9], ["cronjob", "0.1.0", "sha256:abababababab", "0.2.0", "optimized", "serving", "3", "7", "1"], "{table}");
        assert!(table.contains("leader election operator-host: leading"), "{table}");
        assert!(table.contains("cronjob: last error at 2026-01-01T00:00:00Z on default/x: PluginError: boom"), "{table}");
        let json = serde_json::to_value(&snapshot).unwrap();
        assert_eq!(json["plugins"][0]["lastError"]["reason"], "PluginError");
        assert_eq!(json["plugins"][0]["state"], "serving");
        assert_eq!(json["plugins"][0]["tier"], "optimized");
        assert_eq!(serde_json::from_value::<Snapshot>(json).unwrap(), snapshot, "the JSON reads back as it was written");
    }
}
