//! Revision history as `apps/v1` ControllerRevision children, one per Pod
//! template the MyDeployment has run (`pkg/controller/history`, and the part
//! of the Deployment controller that numbers ReplicaSets).
//!
//! A revision is named `<name>-<pod-template-hash>`, carries the template as
//! `data` and the hash as a label, and has a `revision` number that grows
//! with every rollout. When an earlier template comes back (a rollback or a
//! revert of `spec.template`) its revision is reused and renumbered to the
//! newest number, its old number appended to the revision-history annotation
//! as upstream does for ReplicaSets, so `spec.rollbackTo.revision` keeps
//! finding it under the number the user saw.

use std::collections::BTreeSet;

use operator_plugin_sdk::k8s_openapi::api::apps::v1::ControllerRevision;
use operator_plugin_sdk::serde_json::{Map, Value};
use operator_plugin_sdk::{ObjectRef, ReconcileError, json};

use crate::api::{POD_TEMPLATE_HASH_LABEL, REVISION_HISTORY_ANNOTATION};
use crate::hash::pod_template_hash;

/// How many collision counts to try before giving up; FNV-32a collisions of
/// one controller's templates are rare enough that a second try is unusual.
const MAX_COLLISION_RETRIES: i32 = 16;

/// One stored revision.
#[derive(Clone, Debug, PartialEq)]
pub struct Revision {
    pub name: String,
    pub hash: String,
    pub number: i64,
    /// Numbers this revision had before it was reused.
    pub earlier_numbers: Vec<i64>,
    pub template: Value,
    /// What a patch or delete names.
    pub reference: ObjectRef,
}

impl Revision {
    /// Reads a stored revision; its template moves out of `data` uncopied.
    pub fn from_revision(revision: ControllerRevision, parent_name: &str) -> Self {
        let reference = ObjectRef::of(&revision);
        let meta = revision.metadata;
        let name = meta.name.unwrap_or_default();
        let hash = meta
            .labels
            .and_then(|mut labels| labels.remove(POD_TEMPLATE_HASH_LABEL))
            .or_else(|| name.strip_prefix(&format!("{parent_name}-")).map(String::from))
            .unwrap_or_default();
        let earlier_numbers = meta
            .annotations
            .as_ref()
            .and_then(|a| a.get(REVISION_HISTORY_ANNOTATION))
            .map(|list| list.split(',').filter_map(|n| n.trim().parse().ok()).collect())
            .unwrap_or_default();
        Revision { name, hash, number: revision.revision.unwrap_or(0), earlier_numbers, template: revision.data.0, reference }
    }

    /// True when the user may call this revision `n`.
    pub fn answers_to(&self, n: i64) -> bool {
        self.number == n || self.earlier_numbers.contains(&n)
    }
}

/// `<name>-<hash>`, the ControllerRevision's name (and the Pods' name prefix).
pub fn revision_name(parent_name: &str, hash: &str) -> String {
    format!("{parent_name}-{hash}")
}

/// What `spec.rollbackTo` amounts to.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Rollback {
    /// `spec.rollbackTo` is not set.
    None,
    /// The desired template is pinned to this revision.
    Pinned { revision: i64, name: String },
    /// No revision answers to this number; `spec.template` is followed.
    NotFound { revision: i64 },
}

/// The Pod template the Pods should run now, and where it is stored.
#[derive(Clone, Debug, PartialEq)]
pub struct Target {
    pub hash: String,
    pub name: String,
    pub template: Value,
    /// Index into the revisions of the stored revision, if there is one.
    pub stored: Option<usize>,
    /// `status.collisionCount` after resolving hash collisions.
    pub collision_count: Option<i32>,
    pub rollback: Rollback,
}

/// Picks the desired template: the pinned rollback revision if
/// `spec.rollbackTo` names one that exists, else `spec.template`, hashed with
/// the collision count, bumping the count while a different template already
/// holds the name (upstream's `getNewReplicaSet` collision handling).
pub fn resolve_target(
    parent_name: &str,
    template: &Value,
    rollback_to: Option<i64>,
    revisions: &[Revision],
    collision_count: Option<i32>,
) -> Result<Target, ReconcileError> {
    let rollback = match rollback_to {
        None => Rollback::None,
        Some(n) => match revisions.iter().position(|r| r.answers_to(n)) {
            Some(i) => {
                let r = &revisions[i];
                return Ok(Target {
                    hash: r.hash.clone(),
                    name: r.name.clone(),
                    template: r.template.clone(),
                    stored: Some(i),
                    collision_count,
                    rollback: Rollback::Pinned { revision: n, name: r.name.clone() },
                });
            }
            None => Rollback::NotFound { revision: n },
        },
    };
    let mut count = collision_count;
    for _ in 0..MAX_COLLISION_RETRIES {
        let hash = pod_template_hash(template, count);
        let name = revision_name(parent_name, &hash);
        match revisions.iter().position(|r| r.name == name) {
            Some(i) if revisions[i].template != *template => {
                count = Some(count.unwrap_or(0) + 1);
            }
            stored => {
                return Ok(Target { hash, name, template: template.clone(), stored, collision_count: count, rollback });
            }
        }
    }
    Err(ReconcileError::transient(
        "HashCollision",
        format!("pod-template-hash of spec.template collides with stored revisions for {MAX_COLLISION_RETRIES} collision counts in a row"),
    ))
}

/// The ControllerRevision to create for a template first seen now.
pub fn new_revision_object(target: &Target, number: i64) -> Value {
    let mut labels: Map<String, Value> = target.template.pointer("/metadata/labels").and_then(Value::as_object).cloned().unwrap_or_default();
    labels.insert(POD_TEMPLATE_HASH_LABEL.into(), Value::String(target.hash.clone()));
    json!({
        "apiVersion": "apps/v1",
        "kind": "ControllerRevision",
        "metadata": {"name": target.name, "labels": labels},
        "data": target.template,
        "revision": number,
    })
}

/// The merge patch that makes a reused revision the newest one, remembering
/// its earlier number.
pub fn renumber_patch(revision: &Revision, number: i64) -> Value {
    let mut earlier = revision.earlier_numbers.clone();
    earlier.push(revision.number);
    let list = earlier.iter().map(i64::to_string).collect::<Vec<_>>().join(",");
    json!({"metadata": {"annotations": {REVISION_HISTORY_ANNOTATION: list}}, "revision": number})
}

/// Revisions to delete so that at most `limit` old ones remain: never the
/// target, never one a Pod still runs (`live_hashes`), never `protected`
/// (the status' current revision); oldest numbers go first, as upstream's
/// `cleanupDeployment` sorts by revision.
pub fn revisions_to_prune<'a>(
    revisions: &'a [Revision],
    target_name: &str,
    live_hashes: &BTreeSet<String>,
    protected: &str,
    limit: i32,
) -> Vec<&'a Revision> {
    let mut old: Vec<&Revision> = revisions.iter().filter(|r| r.name != target_name).collect();
    let excess = old.len().saturating_sub(usize::try_from(limit.max(0)).unwrap_or(0));
    old.sort_by(|a, b| a.number.cmp(&b.number).then_with(|| a.name.cmp(&b.name)));
    old.into_iter().filter(|r| !live_hashes.contains(&r.hash) && r.name != protected).take(excess).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn template(image: &str) -> Value {
        json!({"metadata": {"labels": {"app": "web"}}, "spec": {"containers": [{"name": "c", "image": image}]}})
    }

    fn stored(number: i64, image: &str, earlier: Option<&str>) -> Revision {
        let t = template(image);
        let hash = pod_template_hash(&t, None);
        let mut obj = json!({
            "apiVersion": "apps/v1", "kind": "ControllerRevision",
            "metadata": {"name": revision_name("web", &hash), "labels": {"app": "web", "pod-template-hash": hash}},
            "data": t, "revision": number
        });
        if let Some(e) = earlier {
            obj["metadata"]["annotations"] = json!({REVISION_HISTORY_ANNOTATION: e});
        }
        Revision::from_revision(operator_plugin_sdk::serde_json::from_value(obj).expect("a ControllerRevision"), "web")
    }

    #[test]
    fn a_new_template_gets_a_name_from_its_hash_and_no_stored_revision() {
        let t = resolve_target("web", &template("v2"), None, &[stored(1, "v1", None)], None).unwrap();
        assert_eq!(t.name, format!("web-{}", t.hash));
        assert_eq!(t.stored, None);
        assert_eq!(t.rollback, Rollback::None);
    }

    #[test]
    fn a_template_seen_before_finds_its_stored_revision() {
        let revs = [stored(1, "v1", None), stored(2, "v2", None)];
        let t = resolve_target("web", &template("v1"), None, &revs, None).unwrap();
        assert_eq!(t.stored, Some(0));
    }

    #[test]
    fn rollback_pins_the_revision_by_current_or_earlier_number() {
        let revs = [stored(3, "v1", Some("1")), stored(2, "v2", None)];
        for n in [1, 3] {
            let t = resolve_target("web", &template("v9"), Some(n), &revs, None).unwrap();
            assert_eq!(t.template, template("v1"));
            assert_eq!(t.rollback, Rollback::Pinned { revision: n, name: revs[0].name.clone() });
        }
        let missing = resolve_target("web", &template("v9"), Some(7), &revs, None).unwrap();
        assert_eq!(missing.template, template("v9"));
        assert_eq!(missing.rollback, Rollback::NotFound { revision: 7 });
    }

    #[test]
    fn a_hash_collision_bumps_the_collision_count() {
        // A stored revision holding the name of v2's hash but another template.
        let mut impostor = stored(1, "v1", None);
        let v2_hash = pod_template_hash(&template("v2"), None);
        impostor.name = revision_name("web", &v2_hash);
        let t = resolve_target("web", &template("v2"), None, &[impostor], None).unwrap();
        assert_eq!(t.collision_count, Some(1));
        assert_eq!(t.hash, pod_template_hash(&template("v2"), Some(1)));
        assert_eq!(t.stored, None);
    }

    #[test]
    fn renumbering_appends_the_old_number_to_the_history_annotation() {
        let patch = renumber_patch(&stored(2, "v1", Some("1")), 5);
        assert_eq!(patch, json!({"metadata": {"annotations": {REVISION_HISTORY_ANNOTATION: "1,2"}}, "revision": 5}));
    }

    #[test]
    fn pruning_keeps_the_limit_and_spares_target_live_and_current_revisions() {
        let revs: Vec<Revision> = (1..=6).map(|n| stored(n, &format!("v{n}"), None)).collect();
        let live: BTreeSet<String> = [revs[0].hash.clone()].into();
        // Old revisions: 1..=5 (6 is the target); limit 2 -> 3 must go, oldest first,
        // skipping 1 (live) and 2 (protected current revision).
        let pruned: Vec<i64> = revisions_to_prune(&revs, &revs[5].name, &live, &revs[1].name, 2).iter().map(|r| r.number).collect();
        assert_eq!(pruned, vec![3, 4, 5]);
        let none: Vec<i64> = revisions_to_prune(&revs, &revs[5].name, &live, "", 10).iter().map(|r| r.number).collect();
        assert!(none.is_empty());
    }
}
