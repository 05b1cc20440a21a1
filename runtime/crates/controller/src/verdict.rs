//! The one place a pass's verdict is written. Every step that ends a pass
//! with something to report (the validity gate, the read of the inputs,
//! the plugin call, the policy, the writes) hands a [`Pass`] here; this step
//! alone writes the `Reconciled` condition and the plugin's status to the
//! parent, sends the Warning Event of a failure, and remembers a refusal for
//! good once it is on record.

use chrono::{DateTime, Utc};
use serde_json::Value;

use super::cache::{CachedObject, ObjectKey};
use super::finalizer::Event;
use super::parent::ParentWrites;
use super::{Ended, permanent};
use crate::actions::status;
use crate::api_error::ApiErrorClass;
use crate::events::Recorder;
use crate::metrics::Metrics;
use crate::object_reference::ObjectReference;

/// What a pass concluded, before it is recorded.
#[derive(Debug)]
pub struct Pass {
    /// The `Reconciled` condition to record; `None` writes nothing (a
    /// conflict: the next pass, at once, decides).
    pub verdict: Option<status::Verdict>,
    /// The status the plugin set, if any.
    pub plugin_status: Option<Value>,
    pub ended: Ended,
    /// Set when the plugin refused these inputs for good: remembered once
    /// the refusal is on record.
    pub refused_for_good: Option<permanent::Inputs>,
}

impl Pass {
    pub fn failed(verdict: status::Verdict) -> Self {
        Self { verdict: Some(verdict), plugin_status: None, ended: Ended::Failed, refused_for_good: None }
    }
}

/// Where a verdict goes.
pub struct VerdictSink<'a> {
    /// The controller's name (metrics, activity).
    pub controller: &'a str,
    pub writes: &'a ParentWrites,
    pub recorder: &'a Recorder,
    pub metrics: &'a Metrics,
    pub permanent: &'a permanent::PermanentErrors,
}

impl VerdictSink<'_> {
    /// Records `pass` for the parent at `key`: a Warning Event for a
    /// failure, the `Reconciled` condition (and the plugin's status) on the
    /// parent, and a refusal for good once it is on record. A failed status
    /// write decides the end when the pass itself succeeded.
    pub async fn record(
        &self,
        key: &ObjectKey,
        parent: &CachedObject,
        reference: &ObjectReference,
        pass: Pass,
        event: Event,
        now: DateTime<Utc>,
    ) -> Ended {
        let Pass { verdict, plugin_status, ended, refused_for_good } = pass;
        if let Some(verdict) = verdict {
            if !verdict.ok {
                self.metrics.activity.failed(self.controller, &key.to_string(), &verdict.reason, &verdict.message);
                self.recorder.record(reference, "Warning", &verdict.reason, &verdict.message);
            }
            // A parent on its way out gets no success condition of its own.
            let quiet = event == Event::Cleanup && verdict.ok && plugin_status.is_none();
            if !quiet && let Err(e) = self.writes.status(key, parent, plugin_status, &verdict, now).await {
                tracing::warn!(error = %crate::error_chain(&e), "status write failed");
                if refused_for_good.is_some() {
                    // The refusal is not on record yet: retry until it is.
                    return Ended::Failed;
                }
                if !ended.failed() {
                    return if ApiErrorClass::of(&e) == ApiErrorClass::Conflict { Ended::Conflict } else { Ended::Failed };
                }
            }
        }
        if let Some(inputs) = refused_for_good {
            self.permanent.record(key, inputs);
        }
        ended
    }
}
