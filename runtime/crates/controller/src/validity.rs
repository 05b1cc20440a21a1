//! Validity re-checked before reconcile: a parent can be stored
//! invalid when it was written before the plugin's webhook existed, with
//! admission off, or under an older plugin whose rules were looser. Before
//! the driver calls `reconcile` it calls the plugin's `validate(parent, None)`;
//! field errors mean the plugin is not asked to act on the object, which is
//! flagged instead: the gate answers the verdict the driver records
//! (`Reconciled=False`, reason `Invalid`, a Warning Event) once. Field
//! errors are terminal, as controller-runtime's `reconcile.TerminalError`:
//! the same parent gives the same errors, so it is not retried (no backoff,
//! no repeated Warning) until it or the plugin changes, which queues it
//! again at once. A failed `validate` call is retried with backoff.
//!
//! A `validate` call per reconcile would double the plugin calls, so the
//! answer is remembered per parent with the (uid, generation, plugin digest)
//! it was given for, and asked again only when one of them changed: a new
//! object under the same name, a spec change, or a hot swap. A parent this
//! host's admission validated on create, with the same plugin build, is not
//! asked about again either (`LoadedPlugin::found_valid_on_create`).

use std::collections::HashMap;
use std::sync::Mutex;

use operator_plugin_sdk::FieldError;

use super::Ended;
use super::cache::{CachedObject, ObjectKey};
use super::permanent::Inputs;
use super::verdict::Pass;
use crate::actions::status::Verdict;
use crate::sandbox::LoadedPlugin;

/// What an answer of `validate` was given for.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Stamp {
    pub uid: String,
    /// `metadata.generation` (changes with every spec change).
    pub generation: Option<i64>,
    /// The plugin's component digest (changes with a hot swap).
    pub digest: String,
}

/// The remembered answers of `validate`, per parent.
#[derive(Debug, Default)]
pub struct Validity {
    answers: Mutex<HashMap<ObjectKey, (Stamp, Vec<FieldError>)>>,
}

impl Validity {
    /// The field errors of the parent at `key` as `stamp` describes it:
    /// remembered if this stamp was validated before, otherwise from
    /// `validate` (whose error, a failed plugin call, is not remembered).
    pub async fn check<E, F, Fut>(&self, key: &ObjectKey, stamp: Stamp, validate: F) -> Result<Vec<FieldError>, E>
    where
        F: FnOnce() -> Fut,
        Fut: std::future::Future<Output = Result<Vec<FieldError>, E>>,
    {
        if let Some((seen, errors)) = self.answers.lock().unwrap().get(key)
            && *seen == stamp
        {
            return Ok(errors.clone());
        }
        let errors = validate().await?;
        self.answers.lock().unwrap().insert(key.clone(), (stamp, errors.clone()));
        Ok(errors)
    }

    /// Drops the answer for a parent that is gone.
    pub fn forget(&self, key: &ObjectKey) {
        self.answers.lock().unwrap().remove(key);
    }
}

/// The message of an invalid object as the API server words a 422:
/// `Kind.group "name" is invalid: field: detail` (several errors in brackets).
pub fn invalid_message(group: &str, kind: &str, name: &str, errors: &[FieldError]) -> String {
    let qualified = if group.is_empty() { kind.to_string() } else { format!("{kind}.{group}") };
    let list: Vec<String> = errors.iter().map(ToString::to_string).collect();
    let joined = if list.len() == 1 { list[0].clone() } else { format!("[{}]", list.join(", ")) };
    format!("{qualified} \"{name}\" is invalid: {joined}")
}

/// Why the gate held a parent back: the verdict to record, and the kind
/// of plugin-call error to count (`invalid`, or the failed call's kind).
#[derive(Debug)]
pub struct Refused {
    pub error_kind: &'static str,
    pub verdict: Verdict,
    /// The plugin found the parent invalid (not: its call failed), which
    /// only a change of the parent or the plugin can undo.
    pub terminal: bool,
}

impl Refused {
    /// The pass to record: a terminal refusal is remembered for `inputs`
    /// (what the parent and plugin were) once on record.
    pub fn into_pass(self, inputs: Inputs) -> Pass {
        if self.terminal {
            Pass { verdict: Some(self.verdict), plugin_status: None, ended: Ended::FailedForGood, refused_for_good: Some(inputs) }
        } else {
            Pass::failed(self.verdict)
        }
    }
}

/// The validity gate: `Err` when the parent at `key` may not be reconciled,
/// because the plugin finds it invalid or its `validate` call failed. The
/// driver then records the verdict and backs the parent off.
pub async fn gate(answers: &Validity, key: &ObjectKey, plugin: &LoadedPlugin, parent: &CachedObject) -> Result<(), Refused> {
    let (uid, generation) = (parent.uid().unwrap_or_default(), parent.generation());
    let stamp = Stamp { uid: uid.to_string(), generation, digest: plugin.info().digest.clone() };
    let validate = || async move {
        if plugin.take_found_valid_on_create(uid, generation) {
            return Ok(Vec::new());
        }
        plugin.validate(parent.json().to_string(), None).await
    };
    let refused = match answers.check(key, stamp, validate).await {
        Ok(errors) if errors.is_empty() => return Ok(()),
        Ok(errors) => {
            let parent = &plugin.manifest().parent;
            let verdict = Verdict::failure("Invalid", invalid_message(&parent.group, &parent.kind, &key.name, &errors));
            Refused { error_kind: "invalid", verdict, terminal: true }
        }
        Err(e) => Refused { error_kind: e.kind(), verdict: Verdict::failure(e.reason(), e.to_string()), terminal: false },
    };
    tracing::warn!(reason = %refused.verdict.reason, message = %refused.verdict.message, "not reconciled");
    Err(refused)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicUsize, Ordering};

    fn stamp(uid: &str, generation: i64, digest: &str) -> Stamp {
        Stamp { uid: uid.into(), generation: Some(generation), digest: digest.into() }
    }

    async fn check(v: &Validity, calls: &AtomicUsize, s: Stamp) -> Vec<FieldError> {
        v.check(&ObjectKey::new("ns", "p"), s, || async {
            calls.fetch_add(1, Ordering::SeqCst);
            Ok::<_, ()>(vec![FieldError::invalid("spec.schedule", "x", "bad")])
        })
        .await
        .unwrap()
    }

    #[tokio::test]
    async fn the_same_uid_generation_and_plugin_are_validated_once() {
        let (v, calls) = (Validity::default(), AtomicUsize::new(0));
        let first = check(&v, &calls, stamp("u", 1, "d")).await;
        let again = check(&v, &calls, stamp("u", 1, "d")).await;
        assert_eq!(calls.load(Ordering::SeqCst), 1);
        assert_eq!(first, again, "the remembered answer, errors included");
    }

    #[tokio::test]
    async fn a_new_generation_uid_or_plugin_is_validated_again() {
        let (v, calls) = (Validity::default(), AtomicUsize::new(0));
        for s in [stamp("u", 1, "d"), stamp("u", 2, "d"), stamp("u2", 2, "d"), stamp("u2", 2, "swapped")] {
            check(&v, &calls, s).await;
        }
        assert_eq!(calls.load(Ordering::SeqCst), 4);
        v.forget(&ObjectKey::new("ns", "p"));
        check(&v, &calls, stamp("u2", 2, "swapped")).await;
        assert_eq!(calls.load(Ordering::SeqCst), 5, "a forgotten parent is validated again");
    }

    #[tokio::test]
    async fn a_failed_validate_call_is_not_remembered() {
        let v = Validity::default();
        let key = ObjectKey::new("ns", "p");
        let failed = v.check(&key, stamp("u", 1, "d"), || async { Err::<Vec<FieldError>, _>("trap") }).await;
        assert_eq!(failed, Err("trap"));
        let ok = v.check(&key, stamp("u", 1, "d"), || async { Ok::<_, &str>(vec![]) }).await;
        assert_eq!(ok, Ok(vec![]));
    }

    #[test]
    fn the_message_reads_like_the_api_servers_422() {
        let one = [FieldError::invalid("spec.schedule", "nope", "must be a valid cron schedule")];
        assert_eq!(
            invalid_message("batch.tutorial.kubebuilder.io", "CronJob", "c", &one),
            "CronJob.batch.tutorial.kubebuilder.io \"c\" is invalid: spec.schedule: Invalid value: \"nope\": must be a valid cron schedule"
        );
        let two = [FieldError::required("spec.a", "must be set"), FieldError::required("spec.b", "must be set")];
        assert_eq!(
            invalid_message("", "Pod", "p", &two),
            "Pod \"p\" is invalid: [spec.a: Required value: must be set, spec.b: Required value: must be set]"
        );
    }
}
