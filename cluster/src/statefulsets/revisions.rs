//! A StatefulSet's ControllerRevisions (upstream's `pkg/controller/history` and the revision
//! half of `stateful_set_control.go`): each records the Pod template as the strategic merge
//! patch `{"spec":{"template":{...,"$patch":"replace"}}}`, is named `<set>-<hash>` with the
//! `controller-revision-hash` label (FNV-1 of the patch's JSON, then the collision count),
//! carries the template's labels and the set's annotations, and has a `revision` number.

use super::identity::REVISION_LABEL;
use crate::controller_ref::{controller_of, controller_ref};
use crate::{Retry, meta_str, opts, put};
use apiserver::resources::Resource;
use apiserver::rest::{Core, DeleteOptions, Sub};
use serde_json::{Map, Value, json};
use std::sync::Arc;

use super::MANAGER;

/// Upstream's `getPatch`: the set's template, marked to replace the whole template.
pub(crate) fn patch(set: &Value) -> Value {
    let mut template = set.pointer("/spec/template").cloned().filter(Value::is_object).unwrap_or_else(|| json!({}));
    template["$patch"] = json!("replace");
    json!({"spec": {"template": template}})
}

/// The text upstream hashes and compares: Go's `json.Marshal` of the patch map.
fn raw(data: &Value) -> String {
    workload_math::go_json(data)
}

/// Upstream's `newRevision`: the revision of `set`'s current template, numbered `revision`.
pub(crate) fn new_revision(set: &Value, revision: i64, collision_count: i32) -> Value {
    let data = patch(set);
    let hash = workload_math::controller_revision_hash(raw(&data).as_bytes(), Some(collision_count));
    let mut labels = set.pointer("/spec/template/metadata/labels").cloned().filter(Value::is_object).unwrap_or_else(|| json!({}));
    labels[REVISION_LABEL] = json!(hash);
    let mut meta = Map::new();
    meta.insert("name".into(), json!(revision_name(meta_str(set, "name"), &hash)));
    meta.insert("namespace".into(), json!(meta_str(set, "namespace")));
    meta.insert("labels".into(), labels);
    if let Some(a) = set.pointer("/metadata/annotations").filter(|a| a.as_object().is_some_and(|a| !a.is_empty())) {
        meta.insert("annotations".into(), a.clone());
    }
    meta.insert("ownerReferences".into(), json!([controller_ref(set, "apps/v1", "StatefulSet")]));
    json!({"apiVersion": "apps/v1", "kind": "ControllerRevision", "metadata": meta, "data": data, "revision": revision})
}

/// Upstream's `ControllerRevisionName`: the parent's name cut to 223 characters, a dash, the hash.
fn revision_name(parent: &str, hash: &str) -> String {
    let prefix: String = parent.chars().take(223).collect();
    format!("{prefix}-{hash}")
}

/// Upstream's `EqualRevision`: the same raw data.
pub(crate) fn equal(a: &Value, b: &Value) -> bool {
    raw(&a["data"]) == raw(&b["data"])
}

pub(crate) fn number(revision: &Value) -> i64 {
    revision["revision"].as_i64().unwrap_or(0)
}

/// Upstream's `SortControllerRevisions`: by revision, then creation time, then name.
pub(crate) fn sort(revisions: &mut [Value]) {
    revisions.sort_by(|a, b| {
        let created = |r: &Value| r.pointer("/metadata/creationTimestamp").and_then(Value::as_str).unwrap_or_default().to_string();
        number(a).cmp(&number(b)).then_with(|| created(a).cmp(&created(b))).then_with(|| meta_str(a, "name").cmp(meta_str(b, "name")))
    });
}

/// Upstream's `ApplyRevision`: `set` with the revision's template.
pub(crate) fn apply(set: &Value, revision: &Value) -> Value {
    let mut applied = set.clone();
    if let Some(template) = revision.pointer("/data/spec/template").and_then(Value::as_object) {
        let mut t = template.clone();
        t.remove("$patch");
        applied["spec"]["template"] = Value::Object(t);
    }
    applied
}

/// The revision history of one set, and where to write it.
pub(crate) struct History<'a> {
    pub core: &'a Core,
    pub res: &'a Resource,
}

impl History<'_> {
    /// The revisions the set's selector matches that it owns, orphans adopted (upstream's
    /// `ListRevisions` + `AdoptOrphanRevisions`), sorted.
    pub(crate) fn list(&self, set: &Value, candidates: &[Arc<Value>], selector: &apiserver::selector::LabelSelector) -> Result<Vec<Value>, Retry> {
        let uid = meta_str(set, "uid");
        let mut out = vec![];
        for r in candidates.iter().filter(|r| selector.matches(r)) {
            match controller_of(r) {
                Some(c) if c["uid"] == uid => out.push(Value::clone(r)),
                Some(_) => {}
                None if crate::deleting(set) => {}
                None => {
                    let mut adopted = Value::clone(r);
                    let refs = adopted["metadata"].as_object_mut().expect("metadata").entry("ownerReferences").or_insert_with(|| json!([]));
                    if let Some(refs) = refs.as_array_mut() {
                        refs.push(controller_ref(set, "apps/v1", "StatefulSet"));
                    }
                    out.push(put(self.core, self.res, adopted, Sub::Main, MANAGER)?);
                }
            }
        }
        sort(&mut out);
        Ok(out)
    }

    /// Upstream's `getStatefulSetRevisions`: the current and update revisions and the
    /// collision count, creating the update revision or renumbering an equal older one.
    pub(crate) fn current_and_update(&self, set: &Value, revisions: &mut Vec<Value>) -> Result<(Value, Value, i32), Retry> {
        let mut collisions = set.pointer("/status/collisionCount").and_then(Value::as_i64).unwrap_or(0) as i32;
        let next_number = revisions.last().map_or(1, |r| number(r) + 1);
        let proposed = new_revision(set, next_number, collisions);
        let equal_revisions: Vec<&Value> = revisions.iter().filter(|r| equal(r, &proposed)).collect();
        let update = match (equal_revisions.last(), revisions.last()) {
            (Some(eq), Some(latest)) if equal(latest, eq) => latest.clone(),
            (Some(eq), _) => {
                // An older template came back (a rollback): renumber its revision.
                let mut renumbered = (*eq).clone();
                renumbered["revision"] = json!(next_number);
                let updated = put(self.core, self.res, renumbered, Sub::Main, MANAGER)?;
                if let Some(slot) = revisions.iter_mut().find(|r| meta_str(r, "name") == meta_str(&updated, "name")) {
                    *slot = updated.clone();
                }
                sort(revisions);
                updated
            }
            (None, _) => {
                let created = self.create(set, &proposed, &mut collisions)?;
                revisions.push(created.clone());
                sort(revisions);
                created
            }
        };
        let current_name = set.pointer("/status/currentRevision").and_then(Value::as_str).unwrap_or_default();
        let current = revisions.iter().find(|r| meta_str(r, "name") == current_name).cloned().unwrap_or_else(|| update.clone());
        Ok((current, update, collisions))
    }

    /// Upstream's `CreateControllerRevision`: on a name taken by different data, count a
    /// collision and hash again.
    fn create(&self, set: &Value, proposed: &Value, collisions: &mut i32) -> Result<Value, Retry> {
        loop {
            let hash = workload_math::controller_revision_hash(raw(&proposed["data"]).as_bytes(), Some(*collisions));
            let mut revision = proposed.clone();
            revision["metadata"]["name"] = json!(revision_name(meta_str(set, "name"), &hash));
            revision["metadata"]["labels"][REVISION_LABEL] = json!(hash);
            let ns = meta_str(set, "namespace");
            match apiserver::rest::wait(self.core.create(self.res, ns, revision.clone(), &opts(MANAGER))) {
                Ok(created) => return Ok(created),
                Err(e) if e.code == 409 => {
                    let existing = self.core.store.get(&self.core.key(self.res, ns, meta_str(&revision, "name"))).ok_or(Retry)?;
                    if equal(&existing, &revision) {
                        return Ok(existing);
                    }
                    *collisions += 1;
                }
                Err(e) => {
                    tracing::debug!(error = %e.message, "could not create a ControllerRevision");
                    return Err(Retry);
                }
            }
        }
    }

    /// Upstream's `truncateHistory`: delete the oldest revisions no Pod, current or update
    /// revision uses, beyond `revisionHistoryLimit` (default 10).
    pub(crate) fn truncate(&self, set: &Value, revisions: &[Value], live: &[&str]) -> Result<(), Retry> {
        let limit = set.pointer("/spec/revisionHistoryLimit").and_then(Value::as_i64).unwrap_or(10);
        let history: Vec<&Value> = revisions.iter().filter(|r| !live.contains(&meta_str(r, "name"))).collect();
        if limit < 0 || history.len() as i64 <= limit {
            return Ok(());
        }
        for r in &history[..history.len() - limit as usize] {
            let o = DeleteOptions { uid: Some(meta_str(r, "uid").into()), ..Default::default() };
            match self.core.delete(self.res, meta_str(r, "namespace"), meta_str(r, "name"), &o) {
                Ok(_) => {}
                Err(e) if e.code == 404 => {}
                Err(_) => return Err(Retry),
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn set(image: &str) -> Value {
        json!({
            "metadata": {"name": "web", "namespace": "ns", "uid": "u1", "annotations": {"note": "x"}},
            "spec": {"template": {"metadata": {"labels": {"app": "nginx"}}, "spec": {"containers": [{"name": "c", "image": image}]}}},
        })
    }

    #[test]
    fn a_revision_is_named_by_the_hash_of_its_patch_and_labelled_with_it() {
        let r = new_revision(&set("nginx:1"), 1, 0);
        let hash = r["metadata"]["labels"][REVISION_LABEL].as_str().unwrap().to_string();
        assert_eq!(r["metadata"]["name"], format!("web-{hash}"));
        assert_eq!(r["metadata"]["labels"]["app"], "nginx");
        assert_eq!(r["metadata"]["annotations"], json!({"note": "x"}));
        assert_eq!(r["data"]["spec"]["template"]["$patch"], "replace");
        assert_eq!(r["revision"], 1);
        let raw = r#"{"spec":{"template":{"$patch":"replace","metadata":{"labels":{"app":"nginx"}},"spec":{"containers":[{"image":"nginx:1","name":"c"}]}}}}"#;
        assert_eq!(hash, workload_math::controller_revision_hash(raw.as_bytes(), Some(0)));
    }

    #[test]
    fn an_image_change_or_a_collision_makes_another_revision() {
        let a = new_revision(&set("nginx:1"), 1, 0);
        let b = new_revision(&set("nginx:2"), 2, 0);
        assert!(!equal(&a, &b));
        assert_ne!(a["metadata"]["name"], b["metadata"]["name"]);
        assert!(equal(&a, &new_revision(&set("nginx:1"), 7, 1)));
        assert_ne!(a["metadata"]["name"], new_revision(&set("nginx:1"), 1, 1)["metadata"]["name"]);
    }

    #[test]
    fn applying_a_revision_restores_its_template() {
        let old = new_revision(&set("nginx:1"), 1, 0);
        let restored = apply(&set("nginx:2"), &old);
        assert_eq!(restored["spec"]["template"]["spec"]["containers"][0]["image"], "nginx:1");
        assert!(restored["spec"]["template"].get("$patch").is_none());
    }
}
