//! The plugin's finalizer as a wrapper around the reconcile, as
//! kube-runtime's `finalizer()`: the wrapped reconcile never sees a parent
//! it should not act on, and never touches `metadata.finalizers` itself.
//!
//! | parent            | our finalizer | what happens                                  |
//! |-------------------|---------------|-----------------------------------------------|
//! | live              | missing       | add it, end the pass (the write queues again) |
//! | live              | present/none  | [`Event::Apply`]                              |
//! | being deleted     | present       | [`Event::Cleanup`]; on [`Reconciled::CleanedUp`] remove it |
//! | being deleted     | missing/none  | nothing to do                                 |

use std::future::Future;

use super::Ended;
use super::cache::{CachedObject, ObjectKey};
use super::parent::ParentWrites;
use crate::api_error::ApiErrorClass;

/// What the wrapped reconcile is asked to do.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Event {
    /// Bring the world in line with the live parent.
    Apply,
    /// The parent is being deleted and still holds our finalizer: clean up.
    Cleanup,
}

/// What the wrapped reconcile answers.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Reconciled {
    /// The pass ended so; the finalizer stays.
    Ended(Ended),
    /// (Cleanup only) the plugin's cleanup is done: the finalizer may go,
    /// and with it the parent. Nothing is recorded on a parent on its way out.
    CleanedUp,
}

/// Which [`Event`] a parent calls for, or the end of the pass when there is
/// nothing for the reconcile to do (`Err`: add the finalizer, or nothing).
fn event(parent: &CachedObject, finalizer: Option<&str>) -> Result<Event, Step> {
    let finalizers = parent.finalizers();
    let has = |f: &str| finalizers.iter().any(|x| x == f);
    match (finalizer, parent.deleting) {
        (Some(f), false) if !has(f) => Err(Step::Add),
        (_, false) => Ok(Event::Apply),
        (Some(f), true) if has(f) => Ok(Event::Cleanup),
        (_, true) => Err(Step::Nothing),
    }
}

/// A finalizer step taken instead of a reconcile.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Step {
    Add,
    Nothing,
}

/// Runs `reconcile` for `parent` under the plugin's `finalizer` (if it
/// declares one), writing the finalizer through `writes`; see the module
/// docs for the table.
pub async fn with_finalizer<F, Fut>(writes: &ParentWrites, key: &ObjectKey, parent: &CachedObject, finalizer: Option<&str>, reconcile: F) -> Ended
where
    F: FnOnce(Event) -> Fut,
    Fut: Future<Output = Reconciled>,
{
    let event = match event(parent, finalizer) {
        Ok(event) => event,
        Err(Step::Nothing) => return Ended::Done,
        Err(Step::Add) => {
            let list = parent.finalizers().into_iter().chain(finalizer.map(String::from)).collect();
            return patch_finalizers(writes, key, parent, list).await;
        }
    };
    match (reconcile(event).await, finalizer) {
        (Reconciled::Ended(ended), _) => ended,
        (Reconciled::CleanedUp, Some(f)) => {
            let list = parent.finalizers().into_iter().filter(|x| x != f).collect();
            patch_finalizers(writes, key, parent, list).await
        }
        (Reconciled::CleanedUp, None) => Ended::Done,
    }
}

/// Writes `metadata.finalizers` (a newer parent answers 409 and the key
/// comes back at once; a parent gone meanwhile needs nothing more).
async fn patch_finalizers(writes: &ParentWrites, key: &ObjectKey, parent: &CachedObject, list: Vec<String>) -> Ended {
    match writes.finalizers(key, parent, list).await {
        Ok(()) => Ended::Done,
        Err(e) => match ApiErrorClass::of(&e) {
            ApiErrorClass::Conflict => Ended::Conflict,
            ApiErrorClass::NotFound => Ended::Done,
            _ => {
                tracing::warn!(error = %crate::error_chain(&e), "finalizer update failed");
                Ended::Failed
            }
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn parent(finalizers: &[&str], deleting: bool) -> CachedObject {
        let mut v = json!({"apiVersion": "x/v1", "kind": "P", "metadata": {"name": "p", "namespace": "ns", "finalizers": finalizers}});
        if deleting {
            v["metadata"]["deletionTimestamp"] = "2026-01-01T00:00:00Z".into();
        }
        CachedObject::new(serde_json::from_value(v).unwrap())
    }

    #[test]
    fn a_live_parent_gets_the_finalizer_before_it_is_reconciled() {
        assert_eq!(event(&parent(&[], false), Some("f")), Err(Step::Add));
        assert_eq!(event(&parent(&["other"], false), Some("f")), Err(Step::Add));
        assert_eq!(event(&parent(&["f"], false), Some("f")), Ok(Event::Apply));
        assert_eq!(event(&parent(&[], false), None), Ok(Event::Apply), "a plugin without a finalizer");
    }

    #[test]
    fn a_parent_on_its_way_out_is_cleaned_up_only_while_it_holds_the_finalizer() {
        assert_eq!(event(&parent(&["f"], true), Some("f")), Ok(Event::Cleanup));
        assert_eq!(event(&parent(&["other"], true), Some("f")), Err(Step::Nothing));
        assert_eq!(event(&parent(&["other"], true), None), Err(Step::Nothing));
    }
}
